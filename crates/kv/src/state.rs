//! Server-wide state shared by all commands: the keyspace, the
//! configuration, statistics and the log's status.

use std::collections::BTreeMap;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::config::Config;
use crate::keyspace::Keyspace;

/// Counters reported by INFO stats.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// Connections accepted since start.
    pub connections_received: u64,
    /// Commands run since start (or CONFIG RESETSTAT).
    pub commands_processed: u64,
    /// Connections refused for `maxclients`.
    pub rejected_connections: u64,
    /// Bytes read from clients.
    pub net_input_bytes: u64,
    /// Bytes written to clients.
    pub net_output_bytes: u64,
    /// Times the event loop moved itself off a core it kept waiting for
    /// (`cpus::Unstack`).
    pub event_loop_moves: u64,
    /// Keys evicted for `maxmemory` (INFO `evicted_keys`).
    pub evicted_keys: u64,
    /// Clients closed for `maxmemory-clients` (INFO `evicted_clients`).
    pub evicted_clients: u64,
    /// Per-command and per-error counters (INFO commandstats, errorstats,
    /// latencystats).
    pub commands: crate::cmdstats::CommandTable,
}

/// The log's figures for INFO persistence, refreshed by the server.
#[derive(Clone, Debug, Default)]
pub struct LogInfo {
    /// Whether a log is open.
    pub enabled: bool,
    /// Device kind: `file`, `pmem`.
    pub device: String,
    /// For PM: `real` or `emulated`.
    pub pmem_mode: String,
    /// Bytes in the log now.
    pub current_size: u64,
    /// Bytes in the log after start-up replay.
    pub base_size: u64,
    /// Records appended since start.
    pub appends: u64,
    /// Durability points since start: batches made durable by one sync on
    /// a file, advances of the durable LSN on persistent memory.
    pub commits: u64,
    /// Device syncs (`fdatasync`) since start.
    pub syncs: u64,
    /// Records made durable per commit, on average.
    pub mean_batch: f64,
    /// Microseconds the log's committer spent waiting for writes and syncs.
    pub commit_wait_us_total: u64,
    /// Every record up to this LSN is durable.
    pub durable_lsn: u64,
    /// Total microseconds clients' replies waited for durability.
    pub wait_us_total: u64,
    /// Times an fsync was late by more than 2 s (Redis's aof_delayed_fsync).
    pub delayed_fsync: u64,
    /// Appends whose write waited behind a running sync (everysec).
    pub postponed_writes: u64,
    /// Cache lines flushed per appended record (PM devices).
    pub flushes_per_write: f64,
    /// The log device's flush and media accounting since it was opened
    /// (PM devices; `None` on a file), for INFO pmem.
    pub flush: Option<ferrite_pmem::FlushStats>,
    /// Payload bytes of the records appended to the current log device:
    /// the user bytes INFO pmem divides media bytes by.
    pub payload_bytes: u64,
    /// Bytes of the commands the current log holds (its records' payloads,
    /// replayed ones included): what Redis's AOF would hold for them, and
    /// so the log's size for `auto-aof-rewrite-*`. The file is larger by
    /// each record's frame and, on PM, its padding to whole cache lines
    /// (192 bytes for a three-field XADD of 101).
    pub command_bytes: u64,
    /// Replay at start-up: commands and milliseconds.
    pub loaded_commands: u64,
    /// See `loaded_commands`.
    pub load_ms: u64,
    /// Bytes cut from a torn tail at start-up.
    pub truncated_bytes: u64,
    /// The log device's own counters (a write buffer's), by name.
    pub device_counters: Vec<(&'static str, u64)>,
}

/// What CLIENT LIST shows of a connection.
#[derive(Clone, Debug, Default)]
pub struct ClientInfo {
    /// Peer address.
    pub addr: String,
    /// Local address.
    pub laddr: String,
    /// Connected through the `unixsocket` (flag `U`).
    pub unix: bool,
    /// Connection start in Unix ms.
    pub created_ms: i64,
    /// CLIENT SETNAME.
    pub name: String,
    /// Selected database.
    pub db: usize,
    /// Protocol version.
    pub resp: i64,
    /// Bytes received and not yet run (`qbuf`), as of the connection's
    /// last read or write; the event loop refreshes these four.
    pub qbuf: usize,
    /// Spare capacity of the query buffer (`qbuf-free`).
    pub qbuf_free: usize,
    /// Reply bytes waiting to be sent (`obl`).
    pub obl: usize,
    /// Bytes allocated for replies (`omem`).
    pub omem: usize,
    /// Bytes of its queued transaction and watched keys (`multi-mem`).
    pub multi_mem: u64,
    /// Unix ms of the connection's last read or write (`idle`).
    pub last_ms: i64,
    /// The user it is authenticated as (`user`; empty: `default`).
    pub user: String,
    /// The last command it ran (`cmd`), as of that read or write.
    pub cmd: Option<std::borrow::Cow<'static, str>>,
    /// Commands queued in MULTI (`multi`; `None` outside a transaction),
    /// as of that read or write.
    pub multi: Option<usize>,
}

/// Everything server-wide.
#[derive(Debug)]
pub struct State {
    /// The data.
    pub keyspace: Keyspace,
    /// The configuration (CONFIG SET changes it).
    pub config: Config,
    /// Counters.
    pub stats: Stats,
    /// The log's status.
    pub log: LogInfo,
    /// Why writes are refused (a failed write or fsync, a full disk).
    pub log_failure: Option<String>,
    /// Memory in use as last read by [`State::refresh_used_memory`]
    /// (the timer's); [`State::used_memory`] has the current figure.
    pub used_memory_bytes: u64,
    /// The largest `used_memory_bytes` seen (MEMORY STATS).
    pub used_memory_peak_bytes: u64,
    /// `used_memory_bytes` at its first reading, once serving.
    pub startup_memory_bytes: u64,
    /// Source of randomness for SPOP, RANDOMKEY, SRANDMEMBER.
    pub rng: fastrand::Rng,
    /// The thread that frees large deleted values (`lazyfree.rs`).
    pub lazyfree: crate::lazyfree::LazyFree,
    /// Start time, for uptime.
    pub started: Instant,
    /// Unix seconds of the last time the data was known durable as a
    /// whole (LASTSAVE, INFO's `rdb_last_save_time`): the start, then each
    /// SAVE and each completed log rewrite (BGSAVE, BGREWRITEAOF).
    pub start_unix_s: i64,
    /// Connected clients by id.
    pub clients: BTreeMap<u64, ClientInfo>,
    /// What each client holds in memory, and client eviction's buckets
    /// (`client_memory.rs`); the event loop keeps it current.
    pub client_memory: crate::client_memory::ClientMemory,
    /// SHUTDOWN was called.
    pub shutdown_requested: bool,
    /// Signals recorded for the timer and the save a shutdown runs
    /// (`server/shutdown.rs`).
    pub shutdown: crate::server::shutdown::Shared,
    /// The TCP port actually bound.
    pub port: u16,
    /// The log rewrite's status, for BGREWRITEAOF and INFO.
    pub rewrite: RewriteInfo,
    /// Pub/Sub subscriptions, tracking, MONITOR clients, and what waits
    /// to be delivered to clients other than the running one.
    pub pubsub: crate::server::pubsub::Hub,
    /// Blocked and paused clients (`server/blocking.rs`).
    pub blocking: crate::server::blocking::Blocking,
    /// Function libraries (FUNCTION LOAD): part of the dataset, logged and
    /// captured by rewrites (`docs/scripting.md`).
    pub functions: crate::commands::Libraries,
    /// Clients CLIENT KILL closed, by id: the event loop closes their
    /// connections after the running command.
    pub killed_clients: Vec<u64>,
    /// SLOWLOG's entries.
    pub slowlog: crate::commands::diagnostics::SlowLog,
    /// The latency monitor's events.
    pub latency: crate::commands::diagnostics::LatencyMonitor,
    /// Whether the timer expires keys (DEBUG SET-ACTIVE-EXPIRE).
    pub active_expire_enabled: bool,
    /// DEBUG SET-SKIP-CHECKSUM-VALIDATION: RESTORE and FUNCTION RESTORE
    /// accept a payload whose CRC-64 does not match (its version must
    /// still be one Redis 7.0 reads).
    pub skip_checksum_validation: bool,
    /// DEBUG PAUSE-CRON: the timer skips Redis's cron work (active
    /// expiry, the tracking table's limit, memory figures); the log's
    /// syncs still run.
    pub cron_paused: bool,
    /// Whether the eviction before the running client command failed to
    /// bring memory under `maxmemory` (Redis's `pre_command_oom_state`):
    /// then that command, a transaction's EXEC, or a script's writes are
    /// refused if they may grow memory.
    pub out_of_memory: bool,
    /// Bytes of the replicas' reply buffers, left out of the eviction
    /// check as Redis leaves them out (`mem_not_counted_for_evict`), so
    /// that feeding replicas cannot evict keys; the event loop refreshes
    /// it each turn.
    pub replica_output_bytes: u64,
    /// DEBUG RELOAD or LOADAOF ran: the event loop closes the log and
    /// loads the dataset back from it before the next command.
    pub reload_requested: bool,
    /// SAVE ran: the event loop makes the log durable, then replies.
    pub save_requested: bool,
    /// CONFIG SET changed `appendonly`: the event loop opens or closes the
    /// log after the command (`server/aof_switch.rs`).
    pub appendonly_change: Option<AppendonlyChange>,
    /// The RDB productions (BGSAVE, full syncs) and their figures.
    pub rdb: crate::rdb::persist::RdbState,
    /// Listeners CONFIG SET port or bind planned, for the event loop to
    /// take over.
    pub new_listeners: Option<Vec<crate::server::Planned>>,
    /// The listeners CONFIG SET tls-port or bind planned, for the loop to
    /// switch to.
    pub new_tls_listeners: Option<Vec<crate::server::Planned>>,
    /// The addresses the TCP listeners accept on now.
    pub bound: Vec<std::net::SocketAddr>,
    /// The addresses the TLS listeners accept on now.
    pub tls_bound: Vec<std::net::SocketAddr>,
    /// The process's OOM score as Ferrite found it (`oom-score-adj`).
    pub oom: crate::oom::OomScore,
    /// INFO's `instantaneous_*` rates, sampled by the timer.
    pub instantaneous: crate::metrics::Instantaneous,
    /// ACL users and the ACL log.
    pub acl: crate::users::Acl,
    /// The node table in cluster mode (`cluster-enabled yes`).
    pub cluster: Option<std::sync::Arc<crate::cluster::Shared>>,
    /// Replication: IDs, offset, backlog, replicas, master link.
    pub repl: crate::server::repl::Repl,
    /// The PM value tier, when `maxmemory-dram` is set (`tier.rs`).
    pub tier: Option<crate::tier::Tier>,
}

/// What INFO persistence reports about log rewrites (issue #5).
#[derive(Clone, Debug, Default)]
pub struct RewriteInfo {
    /// BGREWRITEAOF asked for a rewrite the timer has not started yet.
    pub scheduled: bool,
    /// A rewrite runs; when it started.
    pub running_since: Option<Instant>,
    /// Writes since the data was last saved as a whole (INFO's
    /// `rdb_changes_since_last_save`): one per command that logged
    /// something, outside start-up replay.
    pub changes_since_save: u64,
    /// `changes_since_save` when the running rewrite started: what its
    /// completion saves.
    pub changes_at_start: u64,
    /// Seconds the last rewrite took (-1: none yet).
    pub last_duration_s: i64,
    /// Milliseconds the last rewrite took.
    pub last_duration_ms: u64,
    /// Whether the last rewrite succeeded.
    pub last_ok: bool,
    /// Rewrites completed.
    pub completed: u64,
    /// Rewrites failed in a row (for the back-off).
    pub failures_in_row: u32,
    /// Bytes of the base parts of the current manifest.
    pub base_bytes: u64,
    /// Worker threads (`aof-rewrite-threads`).
    pub threads: usize,
    /// Parts of the current base.
    pub parts: usize,
    /// Peak extra bytes held by copy-before-write during the last rewrite.
    pub cow_peak_bytes: u64,
    /// Segments copied before a write during the last rewrite.
    pub cow_copies: u64,
    /// Keys the last rewrite's parts left out because the clients
    /// superseded them (`keyspace/supersede.rs`).
    pub superseded_keys: u64,
    /// Chunks the last rewrite wrote ahead of their segments.
    pub pieces: u64,
    /// Segments the running (or last) rewrite captured ahead of their turn
    /// for commands across segments (rule C1, `keyspace/capture.rs`).
    pub captured_early: u64,
    /// Milliseconds from start-up to serving (loading included).
    pub load_to_serve_ms: u64,
}

/// The wall clock in Unix milliseconds.
pub fn unix_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

impl State {
    /// Fresh state for `config`.
    pub fn new(config: Config) -> State {
        let seed = unix_ms() as u64 ^ u64::from(std::process::id()) << 32;
        State {
            keyspace: Keyspace::new(config.databases),
            config,
            stats: Stats::default(),
            log: LogInfo::default(),
            log_failure: None,
            rewrite: RewriteInfo {
                last_duration_s: -1,
                last_ok: true,
                ..RewriteInfo::default()
            },
            used_memory_bytes: 0,
            used_memory_peak_bytes: 0,
            startup_memory_bytes: 0,
            rng: fastrand::Rng::with_seed(seed),
            lazyfree: Default::default(),
            started: Instant::now(),
            start_unix_s: unix_ms() / 1000,
            clients: BTreeMap::new(),
            client_memory: Default::default(),
            shutdown_requested: false,
            shutdown: Default::default(),
            rdb: Default::default(),
            port: 0,
            pubsub: Default::default(),
            blocking: Default::default(),
            functions: Default::default(),
            killed_clients: Vec::new(),
            slowlog: Default::default(),
            latency: Default::default(),
            active_expire_enabled: true,
            skip_checksum_validation: false,
            cron_paused: false,
            out_of_memory: false,
            replica_output_bytes: 0,
            reload_requested: false,
            save_requested: false,
            appendonly_change: None,
            new_listeners: None,
            new_tls_listeners: None,
            bound: Vec::new(),
            tls_bound: Vec::new(),
            instantaneous: Default::default(),
            oom: Default::default(),
            acl: Default::default(),
            cluster: None,
            repl: crate::server::repl::Repl::default(),
            tier: None,
        }
    }

    /// Bytes in use now: the installed probe's counter (an atomic load),
    /// else the resident set size the timer last read (`memory.rs`).
    pub fn used_memory(&self) -> u64 {
        match crate::memory::probe() {
            Some(probe) => (probe.allocated)(),
            None => self.used_memory_bytes,
        }
    }

    /// Whether `maxmemory` is set and exceeded, counting the PM tier's
    /// bytes with DRAM's (`docs/tier.md`). O(1): it runs before every
    /// command a client sends.
    pub fn over_maxmemory(&self) -> bool {
        let limit = self.config.maxmemory_bytes;
        limit > 0 && self.dataset_memory() > limit
    }

    /// What `maxmemory` limits: the memory in use, PM tier included,
    /// less the replicas' reply buffers.
    pub fn dataset_memory(&self) -> u64 {
        (self.used_memory() + crate::tier::pm_used(self)).saturating_sub(self.replica_output_bytes)
    }

    /// Raises the peak to the probe's counter, once per turn of the event
    /// loop (one atomic load), so a burst between two timer ticks still
    /// shows in `used_memory_peak`.
    pub fn note_peak_memory(&mut self) {
        if let Some(probe) = crate::memory::probe() {
            let bytes = (probe.allocated)();
            self.used_memory_peak_bytes = self.used_memory_peak_bytes.max(bytes);
        }
    }

    /// Reads the memory in use (for the default probe, the resident set
    /// size) and updates the peak; the first reading is the startup figure.
    pub fn refresh_used_memory(&mut self) {
        let bytes = match crate::memory::probe() {
            Some(probe) => Some((probe.allocated)()),
            None => crate::memory::resident_bytes(),
        };
        if let Some(bytes) = bytes {
            self.used_memory_bytes = bytes;
            self.used_memory_peak_bytes = self.used_memory_peak_bytes.max(bytes);
            if self.startup_memory_bytes == 0 {
                self.startup_memory_bytes = bytes;
            }
        }
    }
}

/// A change of `appendonly` at run time, for the event loop to carry out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AppendonlyChange {
    /// The new value.
    pub on: bool,
    /// Whether the event loop writes the command's reply (`+OK`, or the
    /// error when the log cannot start); inside a transaction the reply
    /// was `+OK` already.
    pub reply: bool,
}
