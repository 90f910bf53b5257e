//! One client connection: its socket, buffers, parser and session.

use std::io::{self, Read, Write};
use std::time::Instant;

use mio::Token;

use super::stream::Stream;
use crate::aof::Ticket;
use crate::commands::Session;
use crate::resp::{Limits, Parser, Protocol, ReplyBuf};

/// Bytes read from a socket per `read` call (the shared scratch buffer).
pub const READ_CHUNK_BYTES: usize = 64 * 1024;
/// Reads per readiness event before other clients get a turn.
pub(super) const READS_PER_EVENT_MAX: usize = 16;
/// Capacity a connection's input or reply buffer always keeps
/// ([`give_back`]; Redis resizes its query buffers for the same reason).
pub const BUF_KEEP_BYTES: usize = 64 * 1024;
/// A reply buffer keeps at least this much after a round (Redis's
/// smallest client reply buffer, `PROTO_REPLY_MIN_BYTES`).
pub const REPLY_KEEP_MIN_BYTES: usize = 1024;
/// Room a query buffer has before a read, as Redis's (`PROTO_IOBUF_LEN`):
/// CLIENT LIST's `qbuf-free` shows it, and Redis's suite checks it.
pub const QUERY_BUF_READ_BYTES: usize = 16 * 1024;
/// A connection idle this long gives its empty query buffer back, as
/// Redis's client cron does.
pub const QUERY_BUF_IDLE_MS: i64 = 2000;

/// What reading from the socket found.
#[derive(Debug, PartialEq, Eq)]
pub enum ReadOutcome {
    /// New bytes are in the query buffer (maybe none).
    Data,
    /// The fair share was read and the socket may hold more. Polling is
    /// edge-triggered, so no new event will say so: the server must read
    /// this connection again on its own.
    More,
    /// The peer closed the connection or it failed.
    Closed,
    /// The query buffer passed `client-query-buffer-limit`.
    TooBig,
}

/// A connected client.
#[derive(Debug)]
pub struct Conn {
    pub stream: Stream,
    pub token: Token,
    pub session: Session,
    pub reply: ReplyBuf,
    /// Bytes received and not yet consumed by complete commands.
    pub inbuf: Vec<u8>,
    pub parser: Parser,
    /// How much of `reply.buf` was already sent.
    pub out_sent: usize,
    /// Where a full sync's RDB payload ends in `reply.buf` (0: none): the
    /// payload does not count against a replica's output limit, which is
    /// for the stream that piles up behind it (as in Redis).
    pub payload_end: usize,
    /// The replies in `reply.buf` may go out once the log acknowledged this.
    pub wait_ticket: Ticket,
    /// When the connection started waiting for the log.
    pub waiting_since: Option<Instant>,
    /// Close once the pending replies are written.
    pub closing: bool,
    /// Registered for WRITABLE events (a write would have blocked).
    pub want_write: bool,
    /// Queued in the server's to-flush list.
    pub queued: bool,
    /// Since when the unsent replies are at or over the soft output limit
    /// (`obuf.rs`).
    pub soft_over_since: Option<Instant>,
    /// Bytes of the last reply round written in full ([`Conn::write_pending`]).
    pub last_round: usize,
    /// The rustls state of a connection accepted on a `tls-port`
    /// (`tls.rs`); `None` for plain connections.
    pub tls: Option<Box<rustls::ServerConnection>>,
    /// A read reached the end of the stream after taking bytes: those
    /// are handled first, the next read reports the close.
    pub eof: bool,
    /// Read on past a short read, to a read that would block or the end
    /// of the stream. Polling is edge-triggered: when the peer's FIN comes
    /// in the same event as its last bytes, a short read taken as "drained"
    /// never learns of the close. Set while a replica receives a full
    /// sync's payload; everywhere else a short read ends the turn, which
    /// saves a read that would block (the wider use is in replication.md).
    pub read_to_end: bool,
}

impl Conn {
    pub fn new(stream: impl Into<Stream>, token: Token, session: Session) -> Conn {
        Conn {
            stream: stream.into(),
            token,
            session,
            reply: ReplyBuf::new(Protocol::Resp2),
            inbuf: Vec::new(),
            parser: Parser::new(),
            out_sent: 0,
            payload_end: 0,
            wait_ticket: 0,
            waiting_since: None,
            closing: false,
            want_write: false,
            queued: false,
            soft_over_since: None,
            last_round: 0,
            tls: None,
            eof: false,
            read_to_end: false,
        }
    }

    /// Reads what the socket has, up to a fair share, through `scratch`
    /// (a buffer shared by all connections, so nothing is zeroed per read).
    pub fn read(
        &mut self,
        scratch: &mut [u8],
        query_limit_bytes: usize,
        received: &mut u64,
    ) -> ReadOutcome {
        // A big argument on its way already has its room (`run_commands`):
        // reads stop at its end, as Redis reads only what it lacks, so
        // the buffer is not grown past it.
        let big_end = self
            .parser
            .big_arg_end()
            .filter(|&end| end > self.inbuf.len() && end <= self.inbuf.capacity());
        if big_end.is_none() && self.inbuf.capacity() - self.inbuf.len() < QUERY_BUF_READ_BYTES {
            self.inbuf.reserve(QUERY_BUF_READ_BYTES);
        }
        if self.tls.is_some() {
            return super::tls::read(self, scratch, query_limit_bytes, received);
        }
        if self.eof {
            return ReadOutcome::Closed;
        }
        let mut got = false;
        for _ in 0..READS_PER_EVENT_MAX {
            let want = match big_end {
                Some(end) if end == self.inbuf.len() => return ReadOutcome::More,
                Some(end) => (end - self.inbuf.len()).min(scratch.len()),
                None => scratch.len(),
            };
            match self.stream.read(&mut scratch[..want]) {
                // The bytes before the end are commands (or a payload) to
                // handle before the connection goes.
                Ok(0) if got => {
                    self.eof = true;
                    return ReadOutcome::More;
                }
                Ok(0) => return ReadOutcome::Closed,
                Ok(n) => {
                    got = true;
                    self.inbuf.extend_from_slice(&scratch[..n]);
                    *received += n as u64;
                    if self.inbuf.len() > query_limit_bytes {
                        return ReadOutcome::TooBig;
                    }
                    if n < want && !self.read_to_end {
                        return ReadOutcome::Data;
                    }
                }
                Err(e) => match e.kind() {
                    io::ErrorKind::WouldBlock => return ReadOutcome::Data,
                    io::ErrorKind::Interrupted => {}
                    _ => return ReadOutcome::Closed,
                },
            }
        }
        ReadOutcome::More
    }

    /// Writes pending replies; returns `Ok(true)` when all were written.
    pub fn write_pending(&mut self, sent: &mut u64) -> io::Result<bool> {
        if self.tls.is_some() && !super::tls::write(self, sent)? {
            return Ok(false);
        }
        while self.out_sent < self.reply.buf.len() {
            match self.stream.write(&self.reply.buf[self.out_sent..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.out_sent += n;
                    *sent += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        let sent_len = self.reply.buf.len();
        self.reply.buf.clear();
        // Rounds of one size keep their buffer. A burst larger than the
        // round before it (invalidations after an eviction, one large
        // reply) gives back what it grew beyond twice the smaller round,
        // as Redis frees its reply blocks once written: the memory counts
        // in `used_memory`, and keeping it would make eviction evict
        // again for the bytes its own invalidations took.
        //
        // A replica keeps none of it: every byte of its stream is also in
        // the backlog, which is what Redis counts as the one replication
        // buffer all replicas share, so a copy kept here after the burst
        // would be the same bytes held twice in `used_memory`.
        let keep = if self.session.sync_requested {
            0
        } else {
            2 * sent_len.min(self.last_round)
        };
        if self.reply.buf.capacity() > keep.max(REPLY_KEEP_MIN_BYTES) {
            self.reply.buf.shrink_to(keep.max(REPLY_KEEP_MIN_BYTES));
        }
        self.last_round = sent_len;
        self.out_sent = 0;
        self.payload_end = 0;
        Ok(true)
    }

    /// The parser limits for this client now.
    pub fn limits(&self, bulk_len_max_bytes: usize) -> Limits {
        if self.session.authenticated {
            Limits {
                args_max: Limits::DEFAULT.args_max,
                bulk_len_max_bytes,
            }
        } else {
            Limits::UNAUTHENTICATED
        }
    }
}
