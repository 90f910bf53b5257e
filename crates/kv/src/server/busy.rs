//! The event loop re-entered from a busy script (`commands/scripting/
//! run.rs` calls [`Reenter::serve`] from its Lua hook). It borrows only
//! the poller, the listeners and the connection table: the script's own
//! connection is out of the table while its command runs, and the
//! server's state reaches it as a [`BusyView`], through which only the
//! `allow-busy` commands run: none touches data, the log or Lua, so
//! whatever it serves cannot change what the suspended script works on
//! (`docs/scripting.md`).
//!
//! Each call polls without waiting, up to four rounds while events come
//! (as Redis's `processEventsWhileBlocked`): accepts, reads, answers each
//! complete command through [`busy_command`], and writes replies the log
//! allows. What it cannot finish now is left to the main loop: clients
//! with input held back (blocked clients, a replica's REPLCONF, the
//! caller's own socket) go on `reread`, and replies
//! waiting for the log on `ready`.

use std::collections::HashMap;
use std::time::Duration;

use mio::net::{TcpListener, UnixListener};
use mio::{Events, Interest, Poll, Token};

use super::accept::{accept_all, accept_unix, Admission, Table};
use super::conn::{Conn, ReadOutcome};
use super::{CONN_BASE, WAKER};
use crate::aof::CommandLog;
use crate::commands::{busy_command, BusyOutcome, BusyView, Reenter};

/// Poll rounds per call, while each finds events.
const ROUNDS: usize = 4;
/// Readiness events handled per round.
const EVENTS_PER_ROUND: usize = 256;

/// The event loop's side of a busy script: borrowed from the server for
/// the length of one command.
#[derive(Debug)]
pub(super) struct BusyLoop<'s> {
    pub poll: &'s mut Poll,
    pub listeners: &'s [TcpListener],
    /// The `tls-port` listeners.
    pub tls_listeners: &'s [TcpListener],
    /// The `unixsocket` listener.
    pub unix_listener: Option<&'s UnixListener>,
    pub conns: &'s mut Vec<Option<Conn>>,
    pub ids: &'s mut HashMap<u64, usize>,
    pub free: &'s mut Vec<usize>,
    pub next_client_id: &'s mut u64,
    /// Connections whose replies wait for the main loop.
    pub ready: &'s mut Vec<usize>,
    /// Connections the main loop must read (and run) again.
    pub reread: &'s mut Vec<usize>,
    pub scratch: &'s mut [u8],
    /// Only to ask what the log has acknowledged.
    pub log: &'s dyn CommandLog,
    /// Connections whose input waits for the script to end: nothing more
    /// of theirs is answered before it does, so replies stay in order.
    pub held: Vec<usize>,
    /// Every connection was read once since the script became busy.
    pub swept: bool,
}

impl Reenter for BusyLoop<'_> {
    fn serve(&mut self, mut view: BusyView<'_>) {
        if !self.swept {
            // The main loop may hold readiness events it has not handled
            // yet (polling is edge-triggered: they will not come again),
            // so every connection is read once on entering.
            self.swept = true;
            for index in 0..self.conns.len() {
                self.on_event(index, true, &mut view);
            }
        }
        let mut events = Events::with_capacity(EVENTS_PER_ROUND);
        for _ in 0..ROUNDS {
            if self.poll.poll(&mut events, Some(Duration::ZERO)).is_err() || events.is_empty() {
                return;
            }
            for event in events.iter() {
                match event.token() {
                    WAKER => {}
                    Token(t) if t < CONN_BASE => self.accept(t, &mut view),
                    Token(t) => self.on_event(t - CONN_BASE, event.is_readable(), &mut view),
                }
            }
        }
    }

    fn shut_down(&mut self, id: u64) {
        let conn = self.ids.get(&id).and_then(|i| self.conns.get(*i));
        if let Some(conn) = conn.and_then(Option::as_ref) {
            conn.stream.shutdown();
        }
    }
}

impl BusyLoop<'_> {
    fn accept(&mut self, listener: usize, view: &mut BusyView<'_>) {
        let found = super::tls::listener(self.listeners, self.tls_listeners, listener);
        if found.is_none() && listener != super::UNIX_LISTENER {
            return;
        }
        let mut table = Table {
            conns: &mut *self.conns,
            ids: &mut *self.ids,
            free: &mut *self.free,
            next_client_id: &mut *self.next_client_id,
        };
        let mut admission = Admission {
            config: &view.state.config,
            stats: &mut view.state.stats,
            clients: &mut view.state.clients,
            acl: &view.state.acl,
        };
        match (found, self.unix_listener) {
            (Some((listener, tls)), _) => {
                accept_all(listener, tls, self.poll, &mut table, &mut admission)
            }
            (None, Some(unix)) => accept_unix(unix, self.poll, &mut table, &mut admission),
            (None, None) => {}
        }
    }

    fn on_event(&mut self, index: usize, readable: bool, view: &mut BusyView<'_>) {
        let Some(mut conn) = self.conns.get_mut(index).and_then(Option::take) else {
            // The script's caller (or a free slot): read once it is back.
            self.again(index);
            return;
        };
        if readable {
            self.read(&mut conn, index, view);
        }
        self.flush(&mut conn, index, view);
        self.conns[index] = Some(conn);
    }

    fn read(&mut self, conn: &mut Conn, index: usize, view: &mut BusyView<'_>) {
        let limit = view.state.config.client_query_buffer_limit_bytes;
        match conn.read(self.scratch, limit, &mut view.state.stats.net_input_bytes) {
            // The main loop reads again, finds the same, and closes it.
            ReadOutcome::Closed | ReadOutcome::TooBig => return self.again(index),
            ReadOutcome::More => self.again(index),
            ReadOutcome::Data => {}
        }
        if conn.session.is_master {
            // The master's bytes stay in the link's buffer for the main
            // loop, which knows whether they are commands or a full sync's
            // payload (parsed as commands here, a payload would read as a
            // protocol error and drop the link). Redis likewise only
            // accumulates its master's stream while a script is busy.
            return self.hold(index);
        }
        if conn.session.sync_requested {
            // A replica's acknowledgements need no answer.
            conn.inbuf.clear();
            return;
        }
        if self.held.contains(&index) || view.state.blocking.is_blocked(conn.session.id) {
            return self.hold(index);
        }
        let mut at = 0;
        while at < conn.inbuf.len() && !conn.closing {
            let limits = conn.limits(view.state.config.proto_max_bulk_len_bytes);
            match conn.parser.parse(&conn.inbuf[at..], &limits) {
                Ok(Some(consumed)) => {
                    let args = conn.parser.args(&conn.inbuf[at..]);
                    match busy_command(view, &mut conn.session, &mut conn.reply, &args) {
                        BusyOutcome::Done => at += consumed,
                        BusyOutcome::Wait => {
                            self.hold(index);
                            break;
                        }
                    }
                    conn.closing |= conn.session.close_after_reply;
                }
                Ok(None) => break,
                Err(e) => {
                    conn.reply.error(&format!("ERR {e}"));
                    conn.closing = true;
                }
            }
        }
        conn.inbuf.drain(..at);
    }

    /// Writes what the connection may be sent now; leaves the rest (and
    /// closing it) to the main loop.
    fn flush(&mut self, conn: &mut Conn, index: usize, view: &mut BusyView<'_>) {
        let pending = conn.reply.buf.len() > conn.out_sent || super::tls::wants_write(conn);
        if conn.closing || (pending && conn.wait_ticket > self.log.acknowledged()) {
            return self.mark_ready(conn, index);
        }
        if !pending {
            return;
        }
        match conn.write_pending(&mut view.state.stats.net_output_bytes) {
            Ok(true) => {}
            Ok(false) => {
                if !conn.want_write {
                    conn.want_write = true;
                    let interest = Interest::READABLE | Interest::WRITABLE;
                    let _ = self
                        .poll
                        .registry()
                        .reregister(&mut conn.stream, conn.token, interest);
                }
                self.mark_ready(conn, index);
            }
            Err(_) => self.again(index),
        }
    }

    fn mark_ready(&mut self, conn: &mut Conn, index: usize) {
        if !conn.queued {
            conn.queued = true;
            self.ready.push(index);
        }
    }

    /// Holds the connection's input until the script ends.
    fn hold(&mut self, index: usize) {
        if !self.held.contains(&index) {
            self.held.push(index);
        }
        self.again(index);
    }

    /// Has the main loop read and run the connection once the script ends.
    fn again(&mut self, index: usize) {
        if !self.reread.contains(&index) {
            self.reread.push(index);
        }
    }
}
