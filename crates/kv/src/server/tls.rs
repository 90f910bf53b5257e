//! TLS connections in the event loop. A connection accepted on a
//! `tls-port` listener carries a rustls server connection beside its
//! socket; everything else about it (parser, reply buffer, output limits,
//! closing) is a plain connection's.
//!
//! Nothing here blocks: the handshake advances as bytes arrive, one
//! readiness event at a time, so a client that sends garbage is closed
//! at the first record that fails to parse and one that stops halfway
//! holds nothing but its slot (until `timeout`, if set). Reading drains
//! every decrypted byte into the query buffer at once, so the query
//! buffer limit bounds a TLS client as it bounds a plain one. Writing
//! hands rustls one slice of the reply buffer at a time, and only once
//! the records of the previous slice are on the socket: unsent replies
//! stay in the reply buffer, where `client-output-buffer-limit` measures
//! them, and rustls never holds more than one slice of a slow reader.
//!
//! Plain connections reach none of this: `Conn::read` and
//! `Conn::write_pending` test `conn.tls` once and take their own path.

use std::io::{self, Read, Write};

use mio::net::TcpListener;
use mio::{Interest, Poll, Token};

use super::conn::{Conn, ReadOutcome, READS_PER_EVENT_MAX};
use crate::error::Result;

/// Token of TLS listener `i` is `LISTENER_BASE + i` (plain listener `i`
/// is token `i`; connections start at `CONN_BASE`).
pub(super) const LISTENER_BASE: usize = 512;
/// Plaintext bytes handed to rustls per record batch (a TLS record holds
/// at most 16 KiB of plaintext).
const WRITE_SLICE_BYTES: usize = 64 * 1024;

/// The listener behind listener token `t`, and whether it is a TLS one.
pub(super) fn listener<'l>(
    plain: &'l [TcpListener],
    tls: &'l [TcpListener],
    t: usize,
) -> Option<(&'l TcpListener, bool)> {
    if t >= LISTENER_BASE {
        tls.get(t - LISTENER_BASE).map(|l| (l, true))
    } else {
        plain.get(t).map(|l| (l, false))
    }
}

/// Registers TLS listener `i` under token `LISTENER_BASE + i`.
pub(super) fn register_listeners(poll: &Poll, listeners: &mut [TcpListener]) -> Result<()> {
    for (i, listener) in listeners.iter_mut().enumerate() {
        poll.registry()
            .register(listener, Token(LISTENER_BASE + i), Interest::READABLE)
            .map_err(|source| crate::Error::Io {
                op: "register",
                path: format!("TLS listener {i}").into(),
                source,
            })?;
    }
    Ok(())
}

/// Whether the connection has TLS records (handshake messages, alerts)
/// waiting to go out.
pub(super) fn wants_write(conn: &Conn) -> bool {
    conn.tls.as_ref().is_some_and(|tls| tls.wants_write())
}

/// [`Conn::read`] for a TLS connection: reads records from the socket,
/// advances the handshake, and moves the decrypted bytes to the query
/// buffer.
pub(super) fn read(
    conn: &mut Conn,
    scratch: &mut [u8],
    query_limit_bytes: usize,
    received: &mut u64,
) -> ReadOutcome {
    let Conn {
        stream, tls, inbuf, ..
    } = conn;
    let Some(tls) = tls.as_deref_mut() else {
        return ReadOutcome::Closed;
    };
    for _ in 0..READS_PER_EVENT_MAX {
        let mut eof = false;
        let mut drained = false;
        match tls.read_tls(stream) {
            Ok(0) => eof = true,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => drained = true,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return ReadOutcome::Closed,
        }
        if let Err(e) = tls.process_new_packets() {
            // rustls queued an alert saying why; send it if the socket
            // takes it now, without waiting for a client that may never
            // read it.
            tracing::debug!("TLS error from a client: {e}");
            let _ = tls.write_tls(stream);
            return ReadOutcome::Closed;
        }
        loop {
            match tls.reader().read(scratch) {
                // The client sent close_notify.
                Ok(0) => return ReadOutcome::Closed,
                Ok(n) => {
                    inbuf.extend_from_slice(&scratch[..n]);
                    *received += n as u64;
                    if inbuf.len() > query_limit_bytes {
                        return ReadOutcome::TooBig;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(_) => return ReadOutcome::Closed,
            }
        }
        if eof {
            return ReadOutcome::Closed;
        }
        if drained {
            return ReadOutcome::Data;
        }
    }
    ReadOutcome::More
}

/// The sending half of [`Conn::write_pending`] for a TLS connection:
/// `Ok(true)` once every reply byte is encrypted and on the socket.
pub(super) fn write(conn: &mut Conn, sent: &mut u64) -> io::Result<bool> {
    let Conn {
        stream,
        tls,
        reply,
        out_sent,
        ..
    } = conn;
    let Some(tls) = tls.as_deref_mut() else {
        return Err(io::ErrorKind::NotConnected.into());
    };
    loop {
        while tls.wants_write() {
            match tls.write_tls(stream) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if *out_sent >= reply.buf.len() {
            return Ok(true);
        }
        if tls.is_handshaking() {
            // Nothing is answered before the handshake ends; keep the
            // replies until it does rather than queue them in rustls.
            return Ok(false);
        }
        let end = reply.buf.len().min(*out_sent + WRITE_SLICE_BYTES);
        let n = tls.writer().write(&reply.buf[*out_sent..end])?;
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        *out_sent += n;
        *sent += n as u64;
    }
}

/// New server-side rustls state for a connection accepted on a TLS
/// port, with the context in force now.
pub(super) fn server_side(config: &crate::config::Config) -> Option<Box<rustls::ServerConnection>> {
    let context = config.tls.context.as_ref()?;
    match rustls::ServerConnection::new(std::sync::Arc::clone(context)) {
        Ok(tls) => Some(Box::new(tls)),
        Err(e) => {
            tracing::warn!("cannot start a TLS connection: {e}");
            None
        }
    }
}
