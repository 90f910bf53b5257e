//! What the server knows of replication, shared by the event loop and the
//! commands (REPLICAOF, ROLE, WAIT, INFO): the replication ID and offset,
//! the backlog, the attached replicas and, on a replica, its master and
//! the state of the link to it. `docs/replication.md` has the design.

use std::collections::VecDeque;
use std::fmt::Write;

use crate::state::unix_ms;

/// The ID that says "no ID" (INFO's `master_replid2` when unset).
pub const NO_ID: &str = "0000000000000000000000000000000000000000";

/// The last `size` bytes of the replication stream, for partial resyncs;
/// more while a replica's full sync needs the bytes since its snapshot
/// (`pinned`): the backlog is then also that replica's replication buffer,
/// shared by every replica of the sync, as Redis's is.
#[derive(Debug)]
pub struct Backlog {
    buf: VecDeque<u8>,
    size: usize,
    /// Newest bytes kept whatever the size.
    pinned: usize,
}

impl Backlog {
    /// An empty backlog keeping at most `size` bytes.
    pub fn new(size: usize) -> Backlog {
        Backlog {
            buf: VecDeque::new(),
            size: size.max(1),
            pinned: 0,
        }
    }

    /// Appends stream bytes, forgetting the oldest past the size (and
    /// past the pinned bytes).
    pub fn push(&mut self, bytes: &[u8]) {
        let limit = self.size.max(self.pinned);
        let keep = bytes.len().min(limit);
        self.buf.extend(&bytes[bytes.len() - keep..]);
        let excess = self.buf.len().saturating_sub(limit);
        self.buf.drain(..excess);
    }

    /// Changes the size (`repl-backlog-size`), keeping the newest bytes.
    pub fn resize(&mut self, size: usize) {
        let size = size.max(1);
        if size != self.size {
            self.size = size;
            self.trim();
        }
    }

    /// Keeps at least the newest `bytes` whatever the size (0: none).
    pub fn pin(&mut self, bytes: usize) {
        self.pinned = bytes;
        self.trim();
    }

    fn trim(&mut self) {
        let excess = self.buf.len().saturating_sub(self.size.max(self.pinned));
        self.buf.drain(..excess);
        if excess > 0 && self.buf.capacity() > 2 * self.buf.len().max(self.size) {
            self.buf.shrink_to(self.buf.len().max(self.size));
        }
    }

    /// Bytes allocated for it (INFO's `mem_replication_backlog`).
    pub fn allocated(&self) -> usize {
        self.buf.capacity()
    }

    /// Bytes held (INFO's `repl_backlog_histlen`).
    pub fn histlen(&self) -> usize {
        self.buf.len()
    }

    /// The bytes held from the `skip`-th on.
    pub fn tail(&self, skip: usize) -> Vec<u8> {
        self.buf
            .range(skip.min(self.buf.len())..)
            .copied()
            .collect()
    }
}

/// The state of a replica's link to its master, as ROLE names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Link {
    /// Waiting to connect (next attempt at the next cron).
    Connect,
    /// The TCP connection is being set up.
    Connecting,
    /// PING, AUTH, REPLCONF and PSYNC are being exchanged.
    Handshake,
    /// The dataset is arriving.
    Transfer,
    /// Streaming the master's writes.
    Connected,
}

impl Link {
    /// ROLE's word for the state.
    pub fn name(self) -> &'static str {
        match self {
            Link::Connect => "connect",
            Link::Connecting => "connecting",
            Link::Handshake => "handshake",
            Link::Transfer => "sync",
            Link::Connected => "connected",
        }
    }
}

/// A replica attached to this server.
#[derive(Debug)]
pub struct Replica {
    /// Its connection's slot in the server.
    pub index: usize,
    /// Its client id.
    pub id: u64,
    /// Its address as seen here (or announced).
    pub ip: String,
    /// The port it said it listens on (`REPLCONF listening-port`).
    pub port: u16,
    /// The offset it last acknowledged (`REPLCONF ACK`).
    pub ack: i64,
    /// When it last acknowledged, Unix ms.
    pub ack_ms: i64,
    /// It acknowledged at least once: from then on, a silence longer than
    /// `repl-timeout` disconnects it (a replica attached by SYNC never
    /// acknowledges, and one still loading its payload has not yet).
    pub acked: bool,
    /// During its full sync: the offset of its snapshot. The stream after
    /// it is kept in the backlog (pinned) and sent once the RDB has ended
    /// and the replica acknowledged.
    pub sync_from: Option<i64>,
    /// Its `$EOF:` payload ended: the stream since its snapshot goes at
    /// its first ACK,
    /// since bytes right after the end mark would hide the mark from a
    /// replica that looks for it at the end of what it read (Redis's).
    pub rdb_sent: bool,
}

/// A WAIT client: released once `wanted` replicas acknowledged `target`.
#[derive(Debug)]
pub struct Waiter {
    pub id: u64,
    pub target: i64,
    pub wanted: usize,
}

/// The loading state of a replica receiving a full sync by diskless load
/// (`repl-diskless-load`), as INFO reports it and commands see it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Loading {
    /// No diskless load (or a disk-style one, still receiving).
    #[default]
    Off,
    /// `loading:1`: commands without the `loading` flag get `-LOADING`.
    Blocking {
        /// Unix seconds the load started.
        since_s: i64,
        /// The old dataset is kept until the new one is whole (`swapdb`).
        swapdb: bool,
    },
    /// `async_loading:1` (`swapdb` with the same replication ID): the old
    /// dataset is served until the new one replaces it.
    Async { since_s: i64 },
}

/// A replica's master and the link's progress.
#[derive(Debug)]
pub struct Master {
    pub host: String,
    pub port: u16,
    pub link: Link,
    /// When the link last went down, Unix ms (0: never up).
    pub down_since_ms: i64,
    /// When the master last sent something, Unix ms.
    pub last_io_ms: i64,
    /// During a transfer: bytes expected (0 for the EOF-marker form) and read.
    pub transfer: (u64, u64),
}

impl Master {
    /// A master to connect to, the link not started yet.
    pub fn new(host: String, port: u16) -> Master {
        Master {
            host,
            port,
            link: Link::Connect,
            down_since_ms: 0,
            last_io_ms: unix_ms(),
            transfer: (0, 0),
        }
    }
}

/// Replication, as the commands see it.
#[derive(Debug)]
pub struct Repl {
    /// This server's replication ID (a replica's is its master's).
    pub replid: String,
    /// The ID before the last change, valid up to `second_offset`.
    pub replid2: String,
    pub second_offset: i64,
    /// Bytes of the replication stream so far (`master_repl_offset`).
    pub offset: i64,
    /// Created when the first replica attaches (or the first sync ends).
    pub backlog: Option<Backlog>,
    /// The database the stream last selected.
    pub seldb: Option<usize>,
    /// Set on a replica.
    pub master: Option<Master>,
    /// The client id of the link to the master, while connected.
    pub link_client: Option<u64>,
    /// Replicas waiting for their full sync (`repl-diskless-sync-delay`):
    /// connection slot and whether they asked by PSYNC; since when.
    pub pending: Vec<(usize, bool)>,
    pub pending_since: Option<std::time::Instant>,
    /// Attached replicas, in attach order.
    pub replicas: Vec<Replica>,
    /// REPLICAOF changed the master: the event loop acts on it.
    pub changed: bool,
    /// WAIT clients.
    pub waiters: Vec<Waiter>,
    /// A WAIT blocked: ask the replicas for acknowledgements.
    pub getack: bool,
    /// Commands for the replicas but not the log (PUBLISH), in order,
    /// with the database they ran in.
    pub replicate_only: Vec<(usize, Vec<Vec<u8>>)>,
    /// The last command's records go to the log only, not to replicas
    /// (DEBUG POPULATE: Redis neither logs nor replicates its keys; Ferrite
    /// logs them, so they are as durable as any write, and keeps them off
    /// the replication stream, so replicas see what Redis's would).
    pub log_only: bool,
    /// INFO stats: full syncs served, partial resyncs accepted and refused.
    pub sync_full: u64,
    pub sync_partial_ok: u64,
    pub sync_partial_err: u64,
    /// A FAILOVER in progress on this master (`server/failover.rs`).
    pub failover: Option<Failover>,
    /// The replicas attached when this server last became a master: they
    /// are disconnected to learn the new ID (those attaching since got it).
    pub stale_replicas: Vec<u64>,
    /// The replication ID and offset of the last record loaded from the
    /// log, if no change followed it (`aof/repl_mark.rs`): taken as this
    /// server's history at start-up.
    pub log_mark: Option<(String, i64, usize)>,
    /// On a replica, the database the master's stream has selected: a
    /// partial resync continues the stream without a SELECT, so a new
    /// link starts in it (Redis keeps its cached master client's).
    pub stream_db: usize,
    /// On a replica, the diskless load of a full sync in progress
    /// (`server/diskless_load.rs`).
    pub loading: Loading,
    /// Since when (Unix ms) this master has had no replica, for
    /// `repl-backlog-ttl`.
    pub no_replicas_since_ms: Option<i64>,
}

/// A coordinated FAILOVER: writes are paused while the master waits for a
/// replica (the target, or any) to acknowledge its whole stream; then it
/// becomes that replica's replica and asks it, by `PSYNC ... FAILOVER`, to
/// take over.
#[derive(Debug, Clone)]
pub struct Failover {
    /// The replica to hand over to, once known (named, or the first to
    /// catch up).
    pub target: Option<(String, u16)>,
    /// When waiting ends, Unix ms (TIMEOUT), if ever.
    pub end_ms: Option<i64>,
    /// FORCE: at the timeout, hand over even to a replica behind.
    pub force: bool,
    /// The handover started: this server is the target's replica now.
    pub in_progress: bool,
}

impl Failover {
    /// INFO's `master_failover_state`.
    pub fn state_name(failover: Option<&Failover>) -> &'static str {
        match failover {
            None => "no-failover",
            Some(f) if f.in_progress => "failover-in-progress",
            Some(_) => "waiting-for-sync",
        }
    }
}

/// 40 random hex digits.
pub fn random_id() -> String {
    let mut bytes = [0u8; 20];
    let read = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes));
    if read.is_err() {
        // Distinct enough without /dev/urandom: the time and the pid.
        let seed = (unix_ms() as u64) ^ (u64::from(std::process::id()) << 32);
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = (seed.rotate_left(i as u32 * 7) >> (i % 8)) as u8;
        }
    }
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

impl Default for Repl {
    fn default() -> Repl {
        Repl {
            replid: random_id(),
            replid2: NO_ID.to_string(),
            second_offset: -1,
            offset: 0,
            backlog: None,
            seldb: None,
            master: None,
            link_client: None,
            pending: Vec::new(),
            pending_since: None,
            replicas: Vec::new(),
            changed: false,
            waiters: Vec::new(),
            getack: false,
            replicate_only: Vec::new(),
            log_only: false,
            sync_full: 0,
            sync_partial_ok: 0,
            sync_partial_err: 0,
            failover: None,
            stale_replicas: Vec::new(),
            log_mark: None,
            stream_db: 0,
            loading: Loading::default(),
            no_replicas_since_ms: None,
        }
    }
}

impl Repl {
    /// Whether this server replicates a master.
    pub fn is_replica(&self) -> bool {
        self.master.is_some()
    }

    /// Whether a replica's link is up.
    pub fn link_up(&self) -> bool {
        self.master
            .as_ref()
            .is_some_and(|m| m.link == Link::Connected)
    }

    /// The first offset the backlog holds (INFO's
    /// `repl_backlog_first_byte_offset`).
    pub fn backlog_first_offset(&self) -> i64 {
        let histlen = self.backlog.as_ref().map_or(0, Backlog::histlen) as i64;
        self.offset - histlen + 1
    }

    /// Replicas that acknowledged `offset` or later.
    pub fn acked(&self, offset: i64) -> usize {
        self.replicas.iter().filter(|r| r.ack >= offset).count()
    }

    /// Replicas that acknowledged within `max_lag_s` seconds.
    pub fn good_replicas(&self, max_lag_s: i64, now_ms: i64) -> usize {
        self.replicas
            .iter()
            .filter(|r| now_ms - r.ack_ms <= max_lag_s * 1000)
            .count()
    }

    /// Stops replicating, if this server does (REPLICAOF NO ONE, a PSYNC
    /// FAILOVER, an aborted handover): a new history from here, in which
    /// replicas resync partially with the old ID up to this offset.
    /// Whether it was a replica.
    pub fn promote(&mut self) -> bool {
        if self.master.take().is_none() {
            return false;
        }
        self.shift_id();
        self.seldb = None;
        self.changed = true;
        self.stale_replicas = self.replicas.iter().map(|r| r.id).collect();
        true
    }

    /// A new history: the current ID becomes the secondary one (valid up
    /// to the next offset), and a fresh ID continues (promotion).
    pub fn shift_id(&mut self) {
        self.replid2 = std::mem::replace(&mut self.replid, random_id());
        self.second_offset = self.offset + 1;
    }

    /// A record holding only this server's replication mark, when it has
    /// a history to resume (as `PSYNC` asks for one).
    pub fn mark_record(&self) -> Option<crate::commands::Propagation> {
        if self.offset <= 0 && self.backlog.is_none() {
            return None;
        }
        Some(crate::commands::Propagation {
            repl_mark: Some((self.replid.clone(), self.offset, self.stream_db)),
            ..Default::default()
        })
    }

    /// Takes the history the log's last mark names as this server's own
    /// (start-up): a replica then asks its master to continue from there.
    /// A backlog starts there, empty, so that replicas holding the same
    /// history continue partially, as Redis does after loading an RDB file
    /// that names its history.
    /// A server starting as a master also takes a new ID, the restored
    /// one staying valid up to this offset (as Redis after loading its RDB
    /// file): its replicas continue, and the new history is its own.
    pub fn restore_from_log(&mut self, backlog_bytes: usize, as_master: bool) {
        if let Some((replid, offset, db)) = self.log_mark.take() {
            tracing::info!("replication history from the log: {replid}:{offset}");
            self.replid = replid;
            self.offset = offset;
            self.stream_db = db;
            self.backlog = Some(Backlog::new(backlog_bytes));
            if as_master {
                self.shift_id();
            }
        }
    }

    /// Appends stream bytes to the offset and the backlog.
    pub fn advance(&mut self, bytes: &[u8]) {
        self.offset += bytes.len() as i64;
        self.pin_for_syncs();
        if let Some(backlog) = &mut self.backlog {
            backlog.push(bytes);
        }
    }

    /// Pins in the backlog the stream since the oldest snapshot a full
    /// sync still has to follow with (none left: the pin goes).
    pub fn pin_for_syncs(&mut self) {
        let oldest = self.replicas.iter().filter_map(|r| r.sync_from).min();
        let bytes = oldest.map_or(0, |from| (self.offset - from).max(0) as usize);
        if let Some(backlog) = &mut self.backlog {
            backlog.pin(bytes);
        }
    }

    /// The bytes a replica asking for `replid` from `from` (the first byte
    /// it lacks) would continue with, when the backlog holds them.
    pub fn continuation(&self, replid: &str, from: i64) -> Option<Vec<u8>> {
        let backlog = self.backlog.as_ref()?;
        let known = replid == self.replid
            || (replid == self.replid2 && replid != NO_ID && from <= self.second_offset);
        if !known || from < self.backlog_first_offset() || from > self.offset + 1 {
            return None;
        }
        Some(backlog.tail((from - self.backlog_first_offset()) as usize))
    }
}

/// `# Replication` of INFO.
pub fn info(state: &crate::state::State, out: &mut String) {
    let repl = &state.repl;
    let c = &state.config;
    let now = unix_ms();
    match &repl.master {
        None => out.push_str("role:master\r\n"),
        Some(m) => info_link(state, m, now, out),
    }
    let _ = write!(out, "connected_slaves:{}\r\n", repl.replicas.len());
    if c.min_replicas_to_write > 0 && c.min_replicas_max_lag_s > 0 {
        let good = repl.good_replicas(c.min_replicas_max_lag_s, now);
        let _ = write!(out, "min_slaves_good_slaves:{good}\r\n");
    }
    for (i, r) in repl.replicas.iter().enumerate() {
        let _ = write!(
            out,
            "slave{i}:ip={},port={},state={},offset={},lag={}\r\n",
            r.ip,
            r.port,
            if r.sync_from.is_some() && !r.rdb_sent {
                "wait_bgsave"
            } else {
                "online"
            },
            r.ack,
            (now - r.ack_ms).max(0) / 1000
        );
    }
    let _ = write!(
        out,
        "master_failover_state:{}\r\nmaster_replid:{}\r\nmaster_replid2:{}\r\nmaster_repl_offset:{}\r\nsecond_repl_offset:{}\r\nrepl_backlog_active:{}\r\nrepl_backlog_size:{}\r\nrepl_backlog_first_byte_offset:{}\r\nrepl_backlog_histlen:{}\r\n",
        Failover::state_name(repl.failover.as_ref()),
        repl.replid,
        repl.replid2,
        repl.offset,
        repl.second_offset,
        u8::from(repl.backlog.is_some()),
        c.repl_backlog_size_bytes,
        if repl.backlog.is_some() { repl.backlog_first_offset() } else { 0 },
        repl.backlog.as_ref().map_or(0, Backlog::histlen),
    );
}

/// INFO's fields about a replica's master and link.
fn info_link(state: &crate::state::State, m: &Master, now: i64, out: &mut String) {
    let (repl, c) = (&state.repl, &state.config);
    let io = if m.link == Link::Connected || m.link == Link::Transfer {
        (now - m.last_io_ms) / 1000
    } else {
        -1
    };
    let _ = write!(
        out,
        "role:slave\r\nmaster_host:{}\r\nmaster_port:{}\r\nmaster_link_status:{}\r\nmaster_last_io_seconds_ago:{io}\r\nmaster_sync_in_progress:{}\r\nslave_read_repl_offset:{}\r\nslave_repl_offset:{}\r\n",
        m.host,
        m.port,
        if m.link == Link::Connected { "up" } else { "down" },
        u8::from(m.link == Link::Transfer),
        repl.offset,
        repl.offset,
    );
    if m.link == Link::Transfer {
        let (total, read) = m.transfer;
        let perc = if total > 0 {
            read as f64 * 100.0 / total as f64
        } else {
            0.0
        };
        let _ = write!(
            out,
            "master_sync_total_bytes:{total}\r\nmaster_sync_read_bytes:{read}\r\nmaster_sync_left_bytes:{}\r\nmaster_sync_perc:{perc:.2}\r\nmaster_sync_last_io_seconds_ago:{}\r\n",
            total as i64 - read as i64,
            (now - m.last_io_ms) / 1000
        );
    }
    if m.link != Link::Connected {
        let since = if m.down_since_ms > 0 {
            (now - m.down_since_ms) / 1000
        } else {
            -1
        };
        let _ = write!(out, "master_link_down_since_seconds:{since}\r\n");
    }
    let _ = write!(
        out,
        "slave_priority:{}\r\nslave_read_only:{}\r\nreplica_announced:{}\r\n",
        c.accepted_int("replica-priority").unwrap_or(100),
        u8::from(c.replica_read_only),
        u8::from(c.get("replica-announced").as_deref() != Some("no")),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backlog_keeps_the_newest_bytes() {
        let mut b = Backlog::new(4);
        b.push(b"abc");
        b.push(b"def");
        assert_eq!(b.tail(0), b"cdef");
        b.push(b"0123456");
        assert_eq!(b.tail(1), b"456");
        b.resize(2);
        assert_eq!(b.tail(0), b"56");
    }

    #[test]
    fn continuation_needs_a_known_id_and_an_offset_in_the_backlog() {
        let mut r = Repl {
            backlog: Some(Backlog::new(4)),
            ..Repl::default()
        };
        r.advance(b"abcdef");
        let id = r.replid.clone();
        assert_eq!(r.backlog_first_offset(), 3);
        assert_eq!(r.continuation(&id, 7).unwrap(), b"");
        assert_eq!(r.continuation(&id, 4).unwrap(), b"def");
        assert!(r.continuation(&id, 2).is_none());
        assert!(r.continuation(&id, 8).is_none());
        assert!(r.continuation(NO_ID, 4).is_none());
        r.shift_id();
        assert_eq!(r.continuation(&id, 5).unwrap(), b"ef");
        r.advance(b"g");
        assert!(r.continuation(&id, 8).is_none());
    }
}
