//! The master side of replication. A replica attaches by SYNC or PSYNC:
//! PSYNC with an ID and offset the backlog can serve gets `+CONTINUE` and
//! the stream from there; anything else gets the dataset as an RDB file
//! (`+FULLRESYNC id offset` first for PSYNC), then the stream. The stream
//! is one sequence of bytes for every replica: each record the log gets,
//! in the same form (several commands of one record wrapped in
//! MULTI/EXEC), SELECT where the database changes, PINGs every
//! `repl-ping-replica-period` and `REPLCONF GETACK *` when a WAIT waits.
//! Its length is the replication offset; its last `repl-backlog-size`
//! bytes stay in the backlog. Replicas answer with `REPLCONF ACK offset`,
//! which WAIT and `min-replicas-to-write` count.

use super::conn::Conn;
use super::repl::{Backlog, Replica};
use super::Server;
use crate::commands::{encode_command, Propagation};
use crate::resp::Args;
use crate::state::unix_ms;

/// Output a replica may leave unread before it is dropped (Redis's hard
/// `client-output-buffer-limit` for replicas).
pub const OUTPUT_MAX_BYTES: usize = 256 * 1024 * 1024;

impl Server {
    /// Sums the replicas' reply buffers for the eviction check
    /// (`State::replica_output_bytes`); nothing to do without replicas.
    pub(super) fn count_replica_output(&mut self) {
        let conns = &self.conns;
        self.state.replica_output_bytes = self
            .state
            .repl
            .replicas
            .iter()
            .filter_map(|r| conns.get(r.index).and_then(Option::as_ref))
            .map(|conn| conn.reply.buf.capacity() as u64)
            .sum();
    }

    /// Whether connection `index` is an attached replica.
    pub(super) fn is_replica_conn(&self, index: usize) -> bool {
        self.state.repl.replicas.iter().any(|r| r.index == index)
    }

    /// Answers SYNC or PSYNC on `conn` (at `index`): a partial resync
    /// when the backlog holds what the replica lacks, else the dataset.
    pub(super) fn attach_replica(&mut self, index: usize, conn: &mut Conn) {
        let psync = conn.session.psync.take();
        let repl = &mut self.state.repl;
        let out = &mut conn.reply.buf;
        if let Some((id, from)) = &psync {
            if let Some(bytes) = repl.continuation(id, *from) {
                out.extend_from_slice(format!("+CONTINUE {}\r\n", repl.replid).as_bytes());
                out.extend_from_slice(&bytes);
                repl.sync_partial_ok += 1;
                return self.register_replica(index, conn, false);
            }
            if id != "?" {
                repl.sync_partial_err += 1;
            }
        }
        let c = &self.state.config;
        if conn.session.capa_eof && c.repl_diskless_sync && c.repl_diskless_sync_delay_s > 0 {
            // As Redis's diskless sync: wait for more replicas to share it.
            repl.pending.push((index, psync.is_some()));
            repl.pending_since
                .get_or_insert_with(std::time::Instant::now);
            conn.inbuf.clear();
            return;
        }
        self.full_sync(index, conn, psync.is_some());
    }

    /// Sends `conn` the dataset (after `+FULLRESYNC` for PSYNC) and
    /// attaches it. A replica that reads `$EOF:` payloads gets the RDB
    /// streamed from a snapshot by a worker (`docs/rdb.md`); while another
    /// production runs it waits for the next one.
    fn full_sync(&mut self, index: usize, conn: &mut Conn, psync: bool) {
        if conn.session.capa_eof {
            if self.state.rdb.job.is_some() {
                let repl = &mut self.state.repl;
                repl.pending.push((index, psync));
                repl.pending_since
                    .get_or_insert_with(std::time::Instant::now);
                conn.inbuf.clear();
                return;
            }
            match crate::rdb::persist::start_sync(&mut self.state, vec![index]) {
                Ok(mark) => self.begin_streamed_sync(index, conn, psync, &mark),
                Err(e) => {
                    tracing::warn!("cannot start a full sync: {e}");
                    conn.closing = true;
                }
            }
            return;
        }
        self.fullresync_line(conn, psync);
        let out = &mut conn.reply.buf;
        // Encoded in place, then its length put in front: the payload is
        // in memory once (a separate file copied in would be twice).
        let start = out.len();
        super::rdb_file::encode_into(&self.state.keyspace, self.state.keyspace.now_ms, out);
        let header = format!("${}\r\n", out.len() - start);
        out.splice(start..start, header.into_bytes());
        conn.payload_end = conn.reply.buf.len();
        self.register_replica(index, conn, false);
    }

    /// The `+FULLRESYNC id offset` line (PSYNC only), after making sure a
    /// backlog and a history exist.
    fn fullresync_line(&mut self, conn: &mut Conn, psync: bool) {
        let repl = &mut self.state.repl;
        if repl.backlog.is_none() {
            // A backlog made from scratch starts a new history, as Redis's.
            repl.replid = super::repl::random_id();
            repl.replid2 = super::repl::NO_ID.to_string();
            repl.second_offset = -1;
            repl.backlog = Some(Backlog::new(
                self.state.config.repl_backlog_size_bytes as usize,
            ));
        }
        // The stream after the snapshot starts with a SELECT.
        repl.seldb = None;
        repl.sync_full += 1;
        if psync {
            let line = format!("+FULLRESYNC {} {}\r\n", repl.replid, repl.offset);
            conn.reply.buf.extend_from_slice(line.as_bytes());
        }
    }

    /// Starts a replica's streamed sync, in the iteration its snapshot was
    /// taken: the offset it is told is the snapshot's.
    fn begin_streamed_sync(&mut self, index: usize, conn: &mut Conn, psync: bool, mark: &str) {
        self.fullresync_line(conn, psync);
        let header = format!("$EOF:{mark}\r\n");
        conn.reply.buf.extend_from_slice(header.as_bytes());
        conn.payload_end = 0;
        self.register_replica(index, conn, true);
    }

    fn register_replica(&mut self, index: usize, conn: &mut Conn, streamed: bool) {
        let id = conn.session.id;
        let peer = self.state.clients.get(&id).map(|c| c.addr.clone());
        let ip = conn.session.replica_ip.clone().unwrap_or_else(|| {
            let addr = peer.unwrap_or_default();
            addr.rsplit_once(':')
                .map_or(addr.clone(), |(ip, _)| ip.to_string())
        });
        conn.inbuf.clear();
        self.state.repl.replicas.push(Replica {
            index,
            id,
            ip,
            port: conn.session.replica_port,
            ack: 0,
            ack_ms: unix_ms(),
            acked: false,
            sync_from: streamed.then_some(self.state.repl.offset),
            rdb_sent: false,
        });
    }

    /// Forgets connection `index` if it was a replica (closed).
    pub(super) fn detach_replica(&mut self, index: usize) {
        let repl = &mut self.state.repl;
        repl.replicas.retain(|r| r.index != index);
        repl.pending.retain(|(i, _)| *i != index);
        repl.pin_for_syncs();
        self.forget_sync_target(index);
    }

    /// Whether connection `index` waits for its full sync.
    pub(super) fn is_pending_replica(&self, index: usize) -> bool {
        self.state.repl.pending.iter().any(|(i, _)| *i == index)
    }

    /// Starts the waiting full syncs once `repl-diskless-sync-delay`
    /// passed or `repl-diskless-sync-max-replicas` wait.
    fn start_pending_syncs(&mut self) {
        let c = &self.state.config;
        let repl = &self.state.repl;
        let Some(since) = repl.pending_since else {
            return;
        };
        let max = c.repl_diskless_sync_max_replicas;
        let full = max > 0 && repl.pending.len() >= max;
        if !full && since.elapsed().as_secs() < c.repl_diskless_sync_delay_s {
            return;
        }
        if self.state.rdb.job.is_some() {
            // The running production ends first; they get the next one.
            return;
        }
        self.state.repl.pending_since = None;
        let batch = std::mem::take(&mut self.state.repl.pending);
        let streamed: Vec<usize> = batch
            .iter()
            .map(|(index, _)| *index)
            .filter(|i| {
                self.conns
                    .get(*i)
                    .and_then(Option::as_ref)
                    .is_some_and(|c| c.session.capa_eof)
            })
            .collect();
        let mark = if streamed.is_empty() {
            None
        } else {
            match crate::rdb::persist::start_sync(&mut self.state, streamed.clone()) {
                Ok(mark) => Some(mark),
                Err(e) => {
                    tracing::warn!("cannot start a full sync: {e}");
                    None
                }
            }
        };
        for (index, psync) in batch {
            let Some(mut conn) = self.conns.get_mut(index).and_then(Option::take) else {
                continue;
            };
            match &mark {
                Some(mark) if streamed.contains(&index) => {
                    self.begin_streamed_sync(index, &mut conn, psync, mark)
                }
                None if streamed.contains(&index) => conn.closing = true,
                _ => self.full_sync(index, &mut conn, psync),
            }
            self.conns[index] = Some(conn);
            self.mark_ready(index);
        }
    }

    /// Reads a replica's `REPLCONF ACK offset` lines; anything else it
    /// sends needs no answer.
    pub(super) fn replica_input(&mut self, conn: &mut Conn) {
        let mut at = 0;
        let limits = conn.limits(self.state.config.proto_max_bulk_len_bytes);
        let mut acked = None;
        while at < conn.inbuf.len() {
            match conn.parser.parse(&conn.inbuf[at..], &limits) {
                Ok(Some(consumed)) => {
                    let args = conn.parser.args(&conn.inbuf[at..]);
                    if !super::replica_rogue::is_ack(&args) {
                        let who = self.state.clients.get(&conn.session.id).map_or_else(
                            || format!("id={}", conn.session.id),
                            |c| format!("id={} addr={}", conn.session.id, c.addr),
                        );
                        super::replica_rogue::log_rogue(&args, &who);
                        // Nothing more goes out: not the rest of a
                        // payload, nor the stream.
                        conn.reply.buf.truncate(conn.out_sent);
                        conn.closing = true;
                        at = conn.inbuf.len();
                        break;
                    }
                    if let Some(offset) = ack_offset(&args) {
                        acked = Some(offset);
                    }
                    at += consumed;
                }
                Ok(None) => break,
                Err(_) => {
                    at = conn.inbuf.len();
                }
            }
        }
        conn.inbuf.drain(..at);
        if let Some(offset) = acked {
            let id = conn.session.id;
            let mut loaded_from = None;
            if let Some(r) = self.state.repl.replicas.iter_mut().find(|r| r.id == id) {
                if r.rdb_sent {
                    loaded_from = r.sync_from.take();
                }
                r.ack = r.ack.max(offset);
                r.ack_ms = unix_ms();
                r.acked = true;
            }
            if let Some(from) = loaded_from {
                // The replica loaded its RDB: the stream since goes now,
                // from the backlog that kept it.
                let repl = &self.state.repl;
                match repl.continuation(&repl.replid, from + 1) {
                    Some(bytes) => conn.reply.buf.extend_from_slice(&bytes),
                    None => conn.closing = true,
                }
                self.state.repl.pin_for_syncs();
            }
            self.release_waiters();
        }
    }

    /// Releases the WAIT clients enough replicas have acknowledged.
    pub(super) fn release_waiters(&mut self) {
        let repl = &self.state.repl;
        let done: Vec<u64> = repl
            .waiters
            .iter()
            .filter(|w| repl.acked(w.target) >= w.wanted)
            .map(|w| w.id)
            .collect();
        for id in done {
            self.state
                .blocking
                .unblock(&mut self.state.keyspace, id, false);
        }
        self.release();
    }

    /// Sends what the log just got to the replicas too (a master's own
    /// writes; a replica forwards its master's stream instead).
    pub(super) fn feed_replicas(&mut self, records: &Propagation) {
        let repl = &mut self.state.repl;
        if repl.is_replica() || (repl.backlog.is_none() && repl.replicas.is_empty()) {
            return;
        }
        let Some(first_db) = records.first_db else {
            return;
        };
        let mut out = Vec::with_capacity(records.buf.len() + 64);
        if repl.seldb != Some(first_db) {
            let db = first_db.to_string();
            encode_command(&mut out, &[b"SELECT", db.as_bytes()]);
        }
        // Several commands from one client command (a transaction) go
        // as one, as in the log.
        let wrap = records.commands > 1;
        if wrap {
            encode_command(&mut out, &[b"MULTI"]);
        }
        out.extend_from_slice(&records.buf);
        if wrap {
            encode_command(&mut out, &[b"EXEC"]);
        }
        repl.seldb = Some(records.last_db);
        self.push_stream(&out);
    }

    /// Appends `command` to the stream outside any database (PING,
    /// REPLCONF GETACK), when this server is a master with a stream.
    pub(super) fn feed_command(&mut self, command: &[&[u8]]) {
        let repl = &self.state.repl;
        if repl.is_replica() || repl.backlog.is_none() {
            return;
        }
        let mut out = Vec::new();
        encode_command(&mut out, command);
        self.push_stream(&out);
    }

    /// Appends stream bytes: the offset, the backlog, every replica's
    /// output (dropping one that leaves too much unread).
    pub(super) fn push_stream(&mut self, bytes: &[u8]) {
        // A CONFIG SET repl-backlog-size acts on the next byte, as Redis
        // resizes its backlog when the setting changes: a MULTI that
        // shrinks it and then writes must push older bytes out at once,
        // or a replica reconnecting before the next cron would continue
        // from history Redis would no longer have.
        let size = self.state.config.repl_backlog_size_bytes as usize;
        if let Some(backlog) = &mut self.state.repl.backlog {
            backlog.resize(size);
        }
        self.state.repl.advance(bytes);
        // A replica in its full sync gets the stream after its RDB, from
        // the backlog, which keeps it meanwhile (its replication buffer):
        // what it is owed counts against the replica class's hard limit
        // of `client-output-buffer-limit` (0: none), as in Redis.
        let offset = self.state.repl.offset;
        let hard = self
            .state
            .config
            .client_output_buffer_limits
            .of(crate::config::obuf::ClientClass::Replica)
            .hard_bytes as i64;
        let mut over: Vec<usize> = self
            .state
            .repl
            .replicas
            .iter()
            .filter(|r| {
                r.sync_from
                    .is_some_and(|from| hard > 0 && offset - from >= hard)
            })
            .map(|r| r.index)
            .collect();
        let targets: Vec<usize> = self
            .state
            .repl
            .replicas
            .iter()
            .filter(|r| r.sync_from.is_none())
            .map(|r| r.index)
            .collect();
        for index in targets {
            let Some(mut conn) = self.conns.get_mut(index).and_then(Option::take) else {
                continue;
            };
            conn.reply.buf.extend_from_slice(bytes);
            let unsent_from = conn.out_sent.max(conn.payload_end);
            if conn.reply.buf.len().saturating_sub(unsent_from) > OUTPUT_MAX_BYTES {
                over.push(index);
            }
            self.conns[index] = Some(conn);
            self.mark_ready(index);
        }
        for index in over {
            if let Some(conn) = self.conns.get_mut(index).and_then(Option::take) {
                tracing::warn!("dropping replica {}: output over 256 MB", conn.session.id);
                self.close(conn, index);
            }
        }
    }

    /// Closes every attached replica (their master changed history).
    pub(super) fn disconnect_replicas(&mut self) {
        let all: Vec<u64> = self.state.repl.replicas.iter().map(|r| r.id).collect();
        self.disconnect_replicas_among(&all);
    }

    /// Disconnects the attached replicas whose client ids are in `ids`.
    pub(super) fn disconnect_replicas_among(&mut self, ids: &[u64]) {
        let targets: Vec<usize> = self
            .state
            .repl
            .replicas
            .iter()
            .filter(|r| ids.contains(&r.id))
            .map(|r| r.index)
            .collect();
        for index in targets {
            if let Some(conn) = self.conns.get_mut(index).and_then(Option::take) {
                self.close(conn, index);
            }
        }
    }

    /// Disconnects the replicas silent for longer than `repl-timeout`
    /// since their last acknowledgement, as Redis's master does.
    fn drop_silent_replicas(&mut self) {
        let limit_ms = self.state.config.repl_timeout_s.saturating_mul(1000) as i64;
        let now = unix_ms();
        let silent: Vec<(usize, String, u16)> = self
            .state
            .repl
            .replicas
            .iter()
            .filter(|r| r.acked && now - r.ack_ms > limit_ms)
            .map(|r| (r.index, r.ip.clone(), r.port))
            .collect();
        for (index, ip, port) in silent {
            tracing::warn!("Disconnecting timedout replica (streaming sync): {ip}:{port}");
            if let Some(conn) = self.conns.get_mut(index).and_then(Option::take) {
                self.close(conn, index);
            }
        }
    }

    /// Timer work of a master: a PING into the stream every
    /// `repl-ping-replica-period` seconds while replicas are attached.
    pub(super) fn replicas_cron(&mut self) {
        self.start_pending_syncs();
        self.drop_silent_replicas();
        self.expire_backlog();
        let period = self.state.config.repl_ping_replica_period_s.max(1);
        if self.state.repl.replicas.is_empty()
            || self.state.repl.failover.is_some()
            || self.last_replica_ping.elapsed().as_secs() < period
        {
            return;
        }
        self.last_replica_ping = std::time::Instant::now();
        self.feed_command(&[b"PING"]);
    }

    /// A master without replicas for `repl-backlog-ttl` seconds (0:
    /// never) frees its backlog and starts a new history, as Redis does:
    /// a replica returning after that syncs in full. A replica keeps its
    /// backlog, since it may be promoted.
    fn expire_backlog(&mut self) {
        let now = unix_ms();
        let repl = &mut self.state.repl;
        if !repl.replicas.is_empty() || !repl.pending.is_empty() || repl.is_replica() {
            repl.no_replicas_since_ms = None;
            return;
        }
        if repl.backlog.is_none() {
            return;
        }
        let since = *repl.no_replicas_since_ms.get_or_insert(now);
        let ttl_s = self.state.config.repl_backlog_ttl_s;
        if ttl_s <= 0 || now - since < ttl_s.saturating_mul(1000) {
            return;
        }
        tracing::info!(
            "Replication backlog freed after {ttl_s} seconds without connected replicas."
        );
        repl.backlog = None;
        repl.replid = super::repl::random_id();
        repl.replid2 = super::repl::NO_ID.to_string();
        repl.second_offset = -1;
        repl.no_replicas_since_ms = None;
    }

    /// Before sleeping: asks the replicas for an ACK if a WAIT waits.
    pub(super) fn request_acks(&mut self) {
        if std::mem::take(&mut self.state.repl.getack) && !self.state.repl.replicas.is_empty() {
            self.feed_command(&[b"REPLCONF", b"GETACK", b"*"]);
        }
    }
}

/// Appends replication-only commands (with their databases) to `prop`.
pub(super) fn push_all(prop: &mut Propagation, commands: &[(usize, Vec<Vec<u8>>)]) {
    for (db, command) in commands {
        let args: Vec<&[u8]> = command.iter().map(Vec::as_slice).collect();
        prop.push(*db, &args);
    }
}

/// The offset of `REPLCONF ACK offset [...]`.
fn ack_offset(args: &Args<'_>) -> Option<i64> {
    if args.len() < 3
        || !args.get(0).eq_ignore_ascii_case(b"REPLCONF")
        || !args.get(1).eq_ignore_ascii_case(b"ACK")
    {
        return None;
    }
    crate::types::number::parse_i64(args.get(2))
}
