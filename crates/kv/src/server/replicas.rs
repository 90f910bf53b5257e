//! Replicas attached by SYNC: each got the dataset as an RDB file, then
//! receives every record the log receives, in the same form (a record of
//! several commands wrapped in MULTI/EXEC), with SELECT wherever the
//! database changes, and a PING every
//! `repl-ping-replica-period` seconds so it can tell the link is alive.

use std::time::{Duration, Instant};

use super::conn::Conn;
use crate::commands::{encode_command, Propagation};

/// Seconds between PINGs when `repl-ping-replica-period` is not set.
const PING_PERIOD_DEFAULT_S: u64 = 10;
/// Output a replica may leave unread before it is dropped (Redis's hard
/// `client-output-buffer-limit` for replicas).
pub const OUTPUT_MAX_BYTES: usize = 256 * 1024 * 1024;

#[derive(Debug)]
struct Replica {
    /// The connection's index in the server's table.
    index: usize,
    /// The database the replica's stream last selected.
    db: Option<usize>,
}

/// The attached replicas.
#[derive(Debug)]
pub struct Replicas {
    list: Vec<Replica>,
    last_ping: Instant,
}

impl Default for Replicas {
    fn default() -> Replicas {
        Replicas {
            list: Vec::new(),
            last_ping: Instant::now(),
        }
    }
}

impl Replicas {
    /// Whether no replica is attached.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Whether connection `index` is a replica.
    pub fn contains(&self, index: usize) -> bool {
        self.list.iter().any(|r| r.index == index)
    }

    /// Attaches connection `conn` (at `index`): queues the RDB payload as
    /// SYNC's reply, a bulk length then the file without a final CRLF.
    pub fn attach(&mut self, index: usize, conn: &mut Conn, rdb: &[u8]) {
        let out = &mut conn.reply.buf;
        out.extend_from_slice(format!("${}\r\n", rdb.len()).as_bytes());
        out.extend_from_slice(rdb);
        self.list.push(Replica { index, db: None });
    }

    /// Forgets connection `index` (closed).
    pub fn detach(&mut self, index: usize) {
        self.list.retain(|r| r.index != index);
    }

    /// Appends `records` to every replica's output; returns the indices
    /// that now have output to send (those past [`OUTPUT_MAX_BYTES`] are
    /// for the caller to drop).
    pub fn feed(&mut self, records: &Propagation, conns: &mut [Option<Conn>]) -> Vec<usize> {
        let Some(first_db) = records.first_db else {
            return Vec::new();
        };
        let mut fed = Vec::new();
        for replica in &mut self.list {
            let Some(conn) = conns.get_mut(replica.index).and_then(Option::as_mut) else {
                continue;
            };
            if replica.db != Some(first_db) {
                let db = first_db.to_string();
                encode_command(&mut conn.reply.buf, &[b"SELECT", db.as_bytes()]);
            }
            // Several commands from one client command (a transaction) go
            // as one, as in the log.
            let wrap = records.commands > 1;
            if wrap {
                encode_command(&mut conn.reply.buf, &[b"MULTI"]);
            }
            conn.reply.buf.extend_from_slice(&records.buf);
            if wrap {
                encode_command(&mut conn.reply.buf, &[b"EXEC"]);
            }
            replica.db = Some(records.last_db);
            fed.push(replica.index);
        }
        fed
    }

    /// Queues a PING to every replica when the period has passed; returns
    /// the indices that now have output to send.
    pub fn ping_if_due(
        &mut self,
        period_s: Option<&str>,
        conns: &mut [Option<Conn>],
    ) -> Vec<usize> {
        let period = period_s
            .and_then(|p| p.parse::<u64>().ok())
            .unwrap_or(PING_PERIOD_DEFAULT_S);
        if self.list.is_empty() || self.last_ping.elapsed() < Duration::from_secs(period) {
            return Vec::new();
        }
        self.last_ping = Instant::now();
        let mut pinged = Vec::new();
        for replica in &self.list {
            if let Some(conn) = conns.get_mut(replica.index).and_then(Option::as_mut) {
                encode_command(&mut conn.reply.buf, &[b"PING"]);
                pinged.push(replica.index);
            }
        }
        pinged
    }
}
