//! Blocked and paused clients: who waits for which keys, in what order,
//! until when; and how the event loop serves them.
//!
//! A blocking command that finds nothing leaves a [`BlockRequest`] in its
//! session (`commands/blocking.rs`); the loop then records the client here
//! with the command's arguments and stops running its pipeline. Keys
//! clients block on are listed in the keyspace (`blocking_on`), which
//! notes each one a write touches in `ready`, in order. After every
//! command (EXEC counting as one) the loop takes the ready keys in that
//! order and, for each, runs again the commands of the clients blocked on
//! it, first blocked first, with the client's `Session::serving` naming the key,
//! until one finds it empty or of another type: that is Redis's FIFO
//! service. A served command logs its effect (the pop, the move) like any
//! write, so replay never meets a blocking command, and its reply waits
//! for the log's acknowledgement like any reply. A served BLMOVE's push
//! may make another key ready, which the same pass serves.
//!
//! Timeouts, CLIENT UNBLOCK and CLIENT PAUSE's end are checked by the loop
//! every iteration; it sleeps no longer than the nearest deadline.

use std::collections::{HashMap, VecDeque};

use super::Server;
use crate::commands::{
    flatten, serve_blocked, BlockKind, BlockRequest, Ctx, Pause, PauseMode, QueuedCommand,
};
use crate::keyspace::{segment_of, Keyspace};
use crate::resp::Args;
use crate::state::unix_ms;
use crate::types::{Bytes, Value};

/// One client blocked by a command.
#[derive(Debug)]
struct Blocked {
    /// Its connection's slot in the server.
    index: usize,
    /// Its database when it blocked.
    db: usize,
    request: BlockRequest,
    /// The command, to run again when a key is ready.
    command: QueuedCommand,
}

/// Why a blocked client stops waiting without being served.
#[derive(Clone, Debug)]
enum Release {
    /// Its timeout passed, or CLIENT UNBLOCK ... TIMEOUT: it gets what a
    /// timeout replies.
    Timeout(BlockKind),
    /// CLIENT UNBLOCK ... ERROR.
    Error,
    /// An XREADGROUP whose key was deleted or now holds another type: its
    /// group is gone, so it fails at once, as in Redis.
    StreamGone,
    /// REPLICAOF made this server a replica: the client gets an error
    /// and is disconnected, as Redis does.
    RoleChange,
    /// In cluster mode its key's slot is no longer served here: the
    /// redirection or refusal to send (`cluster_blocked.rs`).
    Cluster(String),
}

/// The registry of blocked and paused clients (part of the server state,
/// so CLIENT UNBLOCK, CLIENT LIST and INFO see it).
#[derive(Debug, Default)]
pub struct Blocking {
    clients: HashMap<u64, Blocked>,
    /// Per `(db, key)`, the clients blocked on it, first blocked first.
    waiters: HashMap<(usize, Bytes), VecDeque<u64>>,
    /// Clients whose next command waits for a CLIENT PAUSE to end, in the
    /// order they were held back, with their connection slots.
    postponed: Vec<(u64, usize)>,
    pause: Option<Pause>,
    /// A FAILOVER pauses writes until it ends or is aborted.
    pub failover_pause: bool,
    /// A cluster manual failover pauses writes on its primary until the
    /// replica took over or the attempt timed out.
    pub cluster_pause: bool,
    /// Clients released since the loop last looked, with their slots.
    released: Vec<(usize, Release)>,
}

impl Blocking {
    /// Whether client `id` is blocked or paused (CLIENT LIST's `b`).
    pub fn is_blocked(&self, id: u64) -> bool {
        self.clients.contains_key(&id) || self.postponed.iter().any(|(p, _)| *p == id)
    }

    /// Clients blocked or paused (INFO's `blocked_clients`).
    pub fn count(&self) -> usize {
        self.clients.len() + self.postponed.len()
    }

    /// CLIENT UNBLOCK: releases client `id` if a blocking command blocks
    /// it (a paused client is not released); whether it did.
    pub fn unblock(&mut self, ks: &mut Keyspace, id: u64, error: bool) -> bool {
        let Some(blocked) = self.remove(ks, id) else {
            return false;
        };
        let why = if error {
            Release::Error
        } else {
            Release::Timeout(blocked.request.kind)
        };
        self.released.push((blocked.index, why));
        true
    }

    /// REPLICAOF host port: releases every blocked client (not those a
    /// pause holds back), each to get an error and be disconnected.
    pub fn unblock_all_for_role_change(&mut self, ks: &mut Keyspace) {
        let ids: Vec<u64> = self.clients.keys().copied().collect();
        for id in ids {
            if let Some(blocked) = self.remove(ks, id) {
                self.released.push((blocked.index, Release::RoleChange));
            }
        }
    }

    /// The clients blocked on keys (not WAIT), each with its connection
    /// slot, its first key and the command it runs, for the cluster's
    /// check that their slot is still served here.
    pub(super) fn keyed(&self) -> Vec<(u64, usize, Bytes, Option<Vec<u8>>)> {
        self.clients
            .iter()
            .filter(|(_, b)| b.request.kind != BlockKind::Wait)
            .filter_map(|(id, b)| {
                let key = b.request.keys.first()?;
                Some((*id, b.index, Bytes::clone(key), b.command.first().cloned()))
            })
            .collect()
    }

    /// Releases client `id` with a cluster redirection or refusal.
    pub(super) fn release_for_cluster(&mut self, ks: &mut Keyspace, id: u64, text: String) {
        if let Some(blocked) = self.remove(ks, id) {
            self.released.push((blocked.index, Release::Cluster(text)));
        }
    }

    /// CLIENT PAUSE: the stronger mode and the later end win, as in Redis.
    pub fn pause(&mut self, pause: Pause) {
        self.pause = Some(match self.pause {
            Some(old) => Pause {
                mode: old.mode.max(pause.mode),
                until_ms: old.until_ms.max(pause.until_ms),
            },
            None => pause,
        });
    }

    /// CLIENT UNPAUSE.
    pub fn unpause(&mut self) {
        self.pause = None;
    }

    /// The pause in force at `now_ms`, forgetting a CLIENT PAUSE that
    /// ended; a FAILOVER pauses writes until it ends, whatever CLIENT
    /// UNPAUSE does.
    pub fn pause_mode(&mut self, now_ms: i64) -> Option<PauseMode> {
        let client = match self.pause {
            Some(p) if p.until_ms >= now_ms => Some(p.mode),
            Some(_) => {
                self.pause = None;
                None
            }
            None => None,
        };
        if self.failover_pause || self.cluster_pause {
            return Some(client.map_or(PauseMode::Write, |m| m.max(PauseMode::Write)));
        }
        client
    }

    fn block(&mut self, ks: &mut Keyspace, id: u64, blocked: Blocked) {
        for key in &blocked.request.keys {
            let k = (blocked.db, Bytes::clone(key));
            let queue = self.waiters.entry(k.clone()).or_default();
            // BLPOP k k: one place in the queue per client.
            if !queue.contains(&id) {
                queue.push_back(id);
            }
            ks.blocking_on.insert(k);
        }
        self.clients.insert(id, blocked);
    }

    /// Forgets blocked client `id` (served, released or disconnected).
    fn remove(&mut self, ks: &mut Keyspace, id: u64) -> Option<Blocked> {
        let blocked = self.clients.remove(&id)?;
        for key in &blocked.request.keys {
            let k = (blocked.db, Bytes::clone(key));
            if let Some(queue) = self.waiters.get_mut(&k) {
                queue.retain(|w| *w != id);
                if queue.is_empty() {
                    self.waiters.remove(&k);
                    ks.blocking_on.remove(&k);
                }
            }
        }
        Some(blocked)
    }

    /// Forgets client `id` entirely (it disconnected).
    pub fn forget(&mut self, ks: &mut Keyspace, id: u64) {
        self.remove(ks, id);
        self.postponed.retain(|(p, _)| *p != id);
    }

    /// The nearest deadline of a blocked client or of the pause, Unix ms.
    fn next_deadline(&self) -> Option<i64> {
        let blocked = self
            .clients
            .values()
            .filter_map(|b| b.request.deadline_ms)
            .min();
        let pause = self
            .pause
            .filter(|_| !self.postponed.is_empty())
            .map(|p| p.until_ms);
        blocked.into_iter().chain(pause).min()
    }

    /// Releases the clients whose deadline passed at `now_ms`, earliest
    /// first.
    fn expire(&mut self, ks: &mut Keyspace, now_ms: i64) {
        let mut due: Vec<(i64, u64)> = self
            .clients
            .iter()
            .filter_map(|(id, b)| Some((b.request.deadline_ms?, *id)))
            .filter(|(at, _)| *at <= now_ms)
            .collect();
        due.sort_unstable();
        for (_, id) in due {
            if let Some(b) = self.remove(ks, id) {
                self.released
                    .push((b.index, Release::Timeout(b.request.kind)));
            }
        }
    }
}

/// What the value at `key` can serve: `None` when the key is missing,
/// `Some(None)` for a type no blocking command waits for. Counts no hit or
/// miss (an expired key is removed first, as any lookup does).
fn kind_at(ks: &mut Keyspace, db: usize, key: &[u8]) -> Option<Option<BlockKind>> {
    if !ks.contains(db, key) {
        return None;
    }
    match ks.db(db).segments()[segment_of(key)].map.get(key) {
        Some(Value::List(_)) => Some(Some(BlockKind::List)),
        Some(Value::ZSet(_)) => Some(Some(BlockKind::ZSet)),
        Some(Value::Stream(_)) => Some(Some(BlockKind::Stream)),
        _ => Some(None),
    }
}

/// Whether `blocked` waits in XREADGROUP (which needs its key's group).
fn is_group_read(blocked: &Blocked) -> bool {
    blocked.request.kind == BlockKind::Stream
        && blocked
            .command
            .first()
            .is_some_and(|name| name.eq_ignore_ascii_case(b"xreadgroup"))
}

impl Server {
    /// After a client's command ran (its log record appended): blocks the
    /// client if the command asked to, then serves what the command made
    /// ready and replies to the clients it released.
    pub(super) fn after_command(
        &mut self,
        id: u64,
        db: usize,
        index: usize,
        block: Option<BlockRequest>,
        args: &Args<'_>,
    ) {
        if let Some(mut request) = block {
            let command = request.command.take().unwrap_or_else(|| args.to_vec());
            let blocked = Blocked {
                index,
                db,
                request,
                command,
            };
            self.state
                .blocking
                .block(&mut self.state.keyspace, id, blocked);
        }
        self.serve_ready();
        self.release();
    }

    /// Holds back the client in slot `index`, whose command CLIENT PAUSE
    /// postponed.
    pub(super) fn postpone(&mut self, id: u64, index: usize) {
        self.state.blocking.postponed.push((id, index));
    }

    /// Each loop iteration: releases timed-out clients and, once a pause
    /// ended, lets the held-back clients run their commands.
    pub(super) fn blocking_tick(&mut self) {
        let now = unix_ms();
        self.state.keyspace.now_ms = now;
        self.state.blocking.expire(&mut self.state.keyspace, now);
        self.release();
        let paused = self.state.blocking.pause_mode(now).is_some();
        // A replica's clients see expired keys as missing but never remove
        // them: the master's DEL does, as in Redis.
        let replica = self.state.repl.is_replica();
        self.state.keyspace.expiry_paused = paused || replica;
        self.state.keyspace.track_local_expires = replica;
        if !paused && !self.state.blocking.postponed.is_empty() {
            for (_, index) in std::mem::take(&mut self.state.blocking.postponed) {
                self.reread.push(index);
            }
        }
    }

    /// How long the loop may sleep: `tick`, or less to meet a deadline.
    pub(super) fn sleep_limit(&self, tick: std::time::Duration) -> std::time::Duration {
        match self.state.blocking.next_deadline() {
            Some(at) => {
                let ms = (at - unix_ms()).max(0) as u64;
                tick.min(std::time::Duration::from_millis(ms + 1))
            }
            None => tick,
        }
    }

    /// Serves the clients blocked on ready keys, key by key in the order
    /// the keys became ready, and per key first blocked first.
    fn serve_ready(&mut self) {
        while !self.state.keyspace.ready.is_empty() {
            let ready = std::mem::take(&mut self.state.keyspace.ready);
            for (db, key) in ready {
                self.serve_key(db, &key);
            }
        }
    }

    fn serve_key(&mut self, db: usize, key: &Bytes) {
        let waiting: Vec<u64> = match self.state.blocking.waiters.get(&(db, Bytes::clone(key))) {
            Some(queue) => queue.iter().copied().collect(),
            None => return,
        };
        for id in waiting {
            let at = kind_at(&mut self.state.keyspace, db, key);
            let Some(blocked) = self.state.blocking.clients.get(&id) else {
                continue;
            };
            if at != Some(Some(BlockKind::Stream)) && is_group_read(blocked) {
                if let Some(b) = self.state.blocking.remove(&mut self.state.keyspace, id) {
                    self.state
                        .blocking
                        .released
                        .push((b.index, Release::StreamGone));
                }
                continue;
            }
            let Some(at) = at else {
                continue;
            };
            // Redis serves a list key's list waiters only; a zset waiter
            // on it keeps waiting.
            if Some(blocked.request.kind) != at {
                continue;
            }
            let (index, command) = (blocked.index, blocked.command.clone());
            self.serve_one(id, index, &command, key);
        }
    }

    /// Runs blocked client `id`'s command again for ready `key`; unblocks
    /// it if the command answered.
    fn serve_one(&mut self, id: u64, index: usize, command: &QueuedCommand, key: &Bytes) {
        let Some(mut conn) = self.conns.get_mut(index).and_then(Option::take) else {
            return;
        };
        let (buf, ranges) = flatten(command);
        let args = Args::new(&buf, &ranges);
        conn.session.serving = Some(Bytes::clone(key));
        let mut ctx = Ctx {
            state: &mut self.state,
            session: &mut conn.session,
            reply: &mut conn.reply,
            prop: &mut self.prop,
            busy: None,
        };
        serve_blocked(&mut ctx, &args);
        conn.session.serving = None;
        let still_waiting = conn.session.block.take().is_some();
        if let Some(ticket) = self.log_command() {
            conn.wait_ticket = ticket;
        }
        self.conns[index] = Some(conn);
        if !still_waiting {
            self.state.blocking.remove(&mut self.state.keyspace, id);
            self.resume(index);
        }
    }

    /// Sends released clients what their release replies.
    pub(super) fn release(&mut self) {
        for (index, why) in std::mem::take(&mut self.state.blocking.released) {
            let Some(conn) = self.conns.get_mut(index).and_then(Option::as_mut) else {
                continue;
            };
            match why {
                Release::Timeout(BlockKind::Wait) => {
                    // WAIT answers how many replicas acknowledged its offset.
                    let repl = &mut self.state.repl;
                    let id = conn.session.id;
                    let acked = repl
                        .waiters
                        .iter()
                        .find(|w| w.id == id)
                        .map_or(0, |w| repl.acked(w.target));
                    repl.waiters.retain(|w| w.id != id);
                    conn.reply.int(acked as i64)
                }
                Release::Timeout(_) => conn.reply.null_array(),
                Release::Error => {
                    let text = "UNBLOCKED client unblocked via CLIENT UNBLOCK";
                    conn.reply.error(text);
                    count_failure(
                        &mut self.state.stats,
                        conn.session.last_cmd.as_deref(),
                        text,
                    );
                }
                Release::Cluster(text) => {
                    conn.reply.error(&text);
                    count_failure(
                        &mut self.state.stats,
                        conn.session.last_cmd.as_deref(),
                        &text,
                    );
                }
                Release::StreamGone => {
                    let text = "UNBLOCKED the stream key no longer exists";
                    conn.reply.error(text);
                    count_failure(
                        &mut self.state.stats,
                        conn.session.last_cmd.as_deref(),
                        text,
                    );
                }
                Release::RoleChange => {
                    let text = "UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)";
                    conn.reply.error(text);
                    count_failure(
                        &mut self.state.stats,
                        conn.session.last_cmd.as_deref(),
                        text,
                    );
                    conn.closing = true;
                    let id = conn.session.id;
                    self.state.repl.waiters.retain(|w| w.id != id);
                }
            }
            self.resume(index);
        }
    }

    /// A client no longer blocked: its reply goes out and the rest of its
    /// pipeline, read while it was blocked, runs before the loop sleeps
    /// (bytes arriving later raise their own readiness event).
    fn resume(&mut self, index: usize) {
        self.mark_ready(index);
        let pending = self
            .conns
            .get(index)
            .and_then(Option::as_ref)
            .is_some_and(|c| !c.inbuf.is_empty());
        if pending {
            self.reread.push(index);
        }
    }
}

/// A blocked command released with an error: the error reply counts in
/// errorstats and the command's call as failed (its call was counted when
/// it blocked), as Redis counts them.
fn count_failure(stats: &mut crate::state::Stats, command: Option<&str>, text: &str) {
    stats.commands.error(text);
    if let Some(spec) = command.and_then(|name| crate::commands::lookup(name.as_bytes())) {
        stats.commands.of((spec.name, "")).failed_calls += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(keys: &[&[u8]], deadline_ms: Option<i64>) -> BlockRequest {
        BlockRequest {
            keys: keys.iter().map(|k| Bytes::from(*k)).collect(),
            deadline_ms,
            kind: BlockKind::List,
            command: None,
        }
    }

    fn blocked(index: usize, keys: &[&[u8]], deadline_ms: Option<i64>) -> Blocked {
        Blocked {
            index,
            db: 0,
            request: request(keys, deadline_ms),
            command: Vec::new(),
        }
    }

    #[test]
    fn writes_note_blocked_keys_ready_once_in_order() {
        let mut ks = Keyspace::new(2);
        let mut b = Blocking::default();
        b.block(&mut ks, 1, blocked(0, &[b"a", b"b"], None));
        ks.set(0, b"other", Value::Str(b"v"[..].into()), false);
        ks.set(0, b"b", Value::Str(b"v"[..].into()), false);
        ks.set(1, b"a", Value::Str(b"v"[..].into()), false);
        ks.set(0, b"a", Value::Str(b"v"[..].into()), false);
        ks.set(0, b"b", Value::Str(b"w"[..].into()), false);
        let noted: Vec<(usize, &[u8])> = ks.ready.iter().map(|(d, k)| (*d, &k[..])).collect();
        assert_eq!(noted, vec![(0, &b"b"[..]), (0, &b"a"[..])]);
        // SWAPDB and FLUSHDB note every key blocked on in the database.
        ks.ready.clear();
        ks.swap_db(0, 1);
        assert_eq!(ks.ready.len(), 2);
    }

    #[test]
    fn waiters_keep_blocking_order_and_leave_no_trace() {
        let mut ks = Keyspace::new(1);
        let mut b = Blocking::default();
        b.block(&mut ks, 7, blocked(0, &[b"k", b"k"], None));
        b.block(&mut ks, 3, blocked(1, &[b"k"], Some(50)));
        b.block(&mut ks, 5, blocked(2, &[b"k", b"j"], Some(20)));
        let queue: Vec<u64> = b.waiters[&(0, Bytes::from(&b"k"[..]))]
            .iter()
            .copied()
            .collect();
        assert_eq!(queue, vec![7, 3, 5]);
        assert_eq!(b.count(), 3);
        assert_eq!(b.next_deadline(), Some(20));
        // Timeouts release the earliest deadline first.
        b.expire(&mut ks, 60);
        let released: Vec<usize> = b.released.iter().map(|(i, _)| *i).collect();
        assert_eq!(released, vec![2, 1]);
        assert!(b.unblock(&mut ks, 7, true));
        assert!(!b.unblock(&mut ks, 7, true));
        assert_eq!(b.count(), 0);
        assert!(b.waiters.is_empty() && ks.blocking_on.is_empty());
    }

    #[test]
    fn pauses_combine_and_end() {
        let mut b = Blocking::default();
        b.pause(Pause {
            mode: PauseMode::All,
            until_ms: 100,
        });
        b.pause(Pause {
            mode: PauseMode::Write,
            until_ms: 200,
        });
        assert_eq!(b.pause_mode(150), Some(PauseMode::All));
        assert_eq!(b.pause_mode(201), None);
        assert_eq!(b.pause_mode(0), None);
    }
}
