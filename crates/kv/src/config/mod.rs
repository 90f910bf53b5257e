//! Configuration: a redis.conf-style file plus `--name value` flags, read
//! through one table of directives ([`table::DIRECTIVES`]) with Redis 7.0's
//! names, aliases, syntax, bounds and error texts.
//!
//! Directives Ferrite acts on live in typed fields (`config.appendfsync`,
//! `config.maxmemory_bytes`...); the others are accepted, checked and kept
//! as the text CONFIG GET shows (`config.accepted`).

mod doc;
mod fields;
mod kinds;
pub mod obuf;
mod parse;
mod rewrite;
pub mod table;

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::keyspace::glob::glob_match;
use crate::resp::parser::split_args;

pub use doc::markdown;
pub use kinds::{AppendFsync, LogDevice, MaxmemoryPolicy, ProtectedAction};
pub use parse::{format_percentile, parse_memory, Refusal, Source};
use table::{Directive, Effect, HIDDEN, IMMUTABLE, MULTI_ARG, PROTECTED, STARTUP_ONLY};

/// The server configuration. Defaults come from [`table::DIRECTIVES`].
#[derive(Clone, Debug)]
pub struct Config {
    /// TCP port (`port`); 0 picks a free one.
    pub port: u16,
    /// Addresses to listen on (`bind`).
    pub bind: Vec<String>,
    /// Refuse non-loopback clients when no password is set.
    pub protected_mode: bool,
    /// Data directory (`dir`).
    pub dir: PathBuf,
    /// Whether writes are logged (`appendonly`).
    pub appendonly: bool,
    /// Log durability (`appendfsync`).
    pub appendfsync: AppendFsync,
    /// Log file name inside `dir` (`appendfilename`).
    pub appendfilename: String,
    /// Snapshot points, `seconds changes` pairs (`save`; with
    /// `appendonly no`).
    pub save: String,
    /// The RDB file's name inside `dir` (`dbfilename`).
    pub dbfilename: String,
    /// Start with a log whose tail is torn, truncating it (`aof-load-truncated`).
    pub aof_load_truncated: bool,
    /// The log's device (`log-device`).
    pub log_device: LogDevice,
    /// Directory of the logs' write buffers with `log-device wbuf`
    /// (`log-wbuf-dir`; empty: the data directory).
    pub log_wbuf_dir: String,
    /// Bytes of persistent memory per log's write buffer (`log-wbuf-size`).
    pub log_wbuf_size_bytes: u64,
    /// Password of the default user (`requirepass`).
    pub requirepass: Option<String>,
    /// Most connected clients (`maxclients`).
    pub maxclients: usize,
    /// `rename-command old new` lines, in order (`commands::rename`).
    pub renamed_commands: Vec<(String, String)>,
    /// Seconds a client may stay idle, 0 for ever (`timeout`).
    pub timeout_s: u64,
    /// The `tls-*` directives and the context built from them.
    pub tls: crate::tls::Settings,
    /// The `cluster-*` directives.
    pub cluster: crate::cluster::Settings,
    /// Memory limit in bytes, 0 for none (`maxmemory`).
    pub maxmemory_bytes: u64,
    /// DRAM budget of the dataset, 0 for no PM tier (`maxmemory-dram`,
    /// `docs/tier.md`).
    pub maxmemory_dram_bytes: u64,
    /// The PM tier's heap file, empty for `dir`/ferrite-pm-tier
    /// (`pm-tier-path`).
    pub pm_tier_path: String,
    /// Bytes of the PM tier's heap (`pm-tier-size`).
    pub pm_tier_size_bytes: u64,
    /// Memory all clients may hold before the largest are closed
    /// (`maxmemory-clients`): bytes, or `-N` for N percent of
    /// `maxmemory`; 0 for no limit. See [`Config::client_eviction_limit`].
    pub maxmemory_clients: i64,
    /// Longest bulk string in bytes (`proto-max-bulk-len`).
    pub proto_max_bulk_len_bytes: usize,
    /// Largest query buffer per client in bytes (`client-query-buffer-limit`).
    pub client_query_buffer_limit_bytes: usize,
    /// Number of databases (`databases`).
    pub databases: usize,
    /// Timer frequency in Hz as configured (`hz`); see [`Config::hz_effective`].
    pub hz: u32,
    /// Milliseconds a script runs before other clients are served, with
    /// BUSY replies (`busy-reply-threshold`, alias `lua-time-limit`).
    pub busy_reply_threshold_ms: u64,
    /// Who may run DEBUG (`enable-debug-command`).
    pub enable_debug_command: ProtectedAction,
    /// Who may run MODULE (`enable-module-command`).
    pub enable_module_command: ProtectedAction,
    /// Who may CONFIG SET protected directives (`enable-protected-configs`).
    pub enable_protected_configs: ProtectedAction,
    /// Per-command latency histograms (`latency-tracking`).
    pub latency_tracking: bool,
    /// Percentiles INFO latencystats shows (`latency-tracking-info-percentiles`).
    pub latency_percentiles: Vec<f64>,
    /// Log growth in percent that starts a rewrite, 0 for never
    /// (`auto-aof-rewrite-percentage`).
    pub auto_aof_rewrite_percentage: u32,
    /// Smallest log an automatic rewrite starts at (`auto-aof-rewrite-min-size`).
    pub auto_aof_rewrite_min_size_bytes: u64,
    /// Rewrite threads, 0 for one per core (`aof-rewrite-threads`).
    pub aof_rewrite_threads: usize,
    /// Percent of the time a rewrite may write (`aof-rewrite-io-share`).
    pub aof_rewrite_io_share_percent: u32,
    /// Percent of the machine's CPU time a rewrite may use, 0 unlimited (`aof-rewrite-cpu-share`).
    pub aof_rewrite_cpu_share_percent: u32,
    /// A rewrite burst may use the loop's core (`aof-rewrite-lend-loop-core`).
    pub aof_rewrite_lend_loop_core: bool,
    /// Testing: a rewrite's delay per key written (`rdb-key-save-delay`,
    /// microseconds; negative `-n`: one microsecond with a chance of 1/n).
    pub rdb_key_save_delay: i32,
    /// How the OOM score is set (`oom-score-adj`).
    pub oom_score_adj: crate::oom::OomMode,
    /// Scores of a master, a replica and a child (`oom-score-adj-values`).
    pub oom_score_adj_values: [i64; 3],
    /// SHUTDOWN's flags on SIGINT (`shutdown-on-sigint`, as CONFIG SET
    /// checked them; `server/shutdown.rs` reads them).
    pub shutdown_on_sigint: String,
    /// SHUTDOWN's flags on SIGTERM (`shutdown-on-sigterm`).
    pub shutdown_on_sigterm: String,
    /// Reply limits per client class (`client-output-buffer-limit`).
    pub client_output_buffer_limits: obuf::OutputLimits,
    /// The event loop moves off a core it keeps waiting for
    /// (`event-loop-unstack`, `cpus::Unstack`).
    pub event_loop_unstack: bool,
    /// Synced log stretches leave the page cache (`aof-release-log-cache`).
    pub aof_release_log_cache: bool,
    /// At everysec, also sync once this many bytes wait, 0 only every
    /// second (`aof-everysec-sync-bytes`).
    pub aof_everysec_sync_bytes: u64,
    /// CPUs of the event loop, checked, empty for any (`server_cpulist`).
    pub server_cpulist: String,
    /// CPUs of the rewrite threads, checked (`aof_rewrite_cpulist`).
    pub aof_rewrite_cpulist: String,
    /// What to do above `maxmemory` (`maxmemory-policy`).
    pub maxmemory_policy: MaxmemoryPolicy,
    /// Keys sampled per eviction (`maxmemory-samples`).
    pub maxmemory_samples: u32,
    /// LFU counter growth (`lfu-log-factor`).
    pub lfu_log_factor: u32,
    /// LFU counter decay in minutes (`lfu-decay-time`).
    pub lfu_decay_time_minutes: u32,
    /// Commands slower than this go to the slow log, -1 for none
    /// (`slowlog-log-slower-than`).
    pub slowlog_log_slower_than_us: i64,
    /// Entries the slow log keeps (`slowlog-max-len`).
    pub slowlog_max_len: usize,
    /// Events slower than this are recorded, 0 for none
    /// (`latency-monitor-threshold`).
    pub latency_monitor_threshold_ms: u64,
    /// Keyspace notification classes (`notify-keyspace-events`), as
    /// `keyspace::events` bits.
    pub notify_keyspace_events: u32,
    /// The master this server replicates at start-up, `host port`, or
    /// empty (`replicaof`; REPLICAOF changes the role at run time).
    pub replicaof: String,
    /// Path of the Unix socket to listen on, or empty (`unixsocket`).
    pub unixsocket: String,
    /// Source address of the link to the master, or empty for any
    /// (`bind-source-addr`).
    pub bind_source_addr: String,
    /// Its permission bits; 0 leaves them to the umask (`unixsocketperm`).
    pub unixsocketperm: u32,
    /// How a replica loads a full sync (`repl-diskless-load`): `disabled`,
    /// `on-empty-db` or `swapdb`.
    pub repl_diskless_load: String,
    /// Password for the master (`masterauth`).
    pub masterauth: Option<String>,
    /// User for the master (`masteruser`).
    pub masteruser: Option<String>,
    /// A replica refuses writes from its clients (`replica-read-only`).
    pub replica_read_only: bool,
    /// DEL frees large values on the lazyfree thread, as UNLINK
    /// (`lazyfree-lazy-user-del`).
    pub lazyfree_lazy_user_del: bool,
    /// FLUSHDB and FLUSHALL without an option are ASYNC
    /// (`lazyfree-lazy-user-flush`).
    pub lazyfree_lazy_user_flush: bool,
    /// A replica whose link is down still serves reads
    /// (`replica-serve-stale-data`).
    pub replica_serve_stale_data: bool,
    /// Seconds between PINGs to replicas (`repl-ping-replica-period`).
    pub repl_ping_replica_period_s: u64,
    /// Seconds of silence after which a replication link is dropped
    /// (`repl-timeout`).
    pub repl_timeout_s: u64,
    /// Seconds a master keeps its backlog without replicas, 0 for ever
    /// (`repl-backlog-ttl`).
    pub repl_backlog_ttl_s: i64,
    /// Most entries in a stream's block (`stream-node-max-entries`, 0: no limit).
    pub stream_node_max_entries: u64,
    /// Largest stream block in bytes (`stream-node-max-bytes`, 0: no limit).
    pub stream_node_max_bytes: u64,
    /// The address a replica gives its master (`replica-announce-ip`).
    pub replica_announce_ip: Option<String>,
    /// The port a replica gives its master, 0 for its own
    /// (`replica-announce-port`).
    pub replica_announce_port: u16,
    /// Bytes of stream kept for partial resyncs (`repl-backlog-size`).
    pub repl_backlog_size_bytes: u64,
    /// Full syncs of replicas that read the EOF form wait for more
    /// replicas (`repl-diskless-sync`), this many seconds
    /// (`repl-diskless-sync-delay`) or until this many wait
    /// (`repl-diskless-sync-max-replicas`, 0 for no limit).
    pub repl_diskless_sync: bool,
    pub repl_diskless_sync_delay_s: u64,
    pub repl_diskless_sync_max_replicas: usize,
    /// Replicas a write needs, 0 for none (`min-replicas-to-write`).
    pub min_replicas_to_write: i64,
    /// Seconds since its last ACK for a replica to count
    /// (`min-replicas-max-lag`).
    pub min_replicas_max_lag_s: i64,
    /// Directives accepted without effect, by name, as CONFIG GET shows them.
    pub accepted: BTreeMap<&'static str, String>,
    /// The file the configuration was read from (CONFIG REWRITE writes it).
    pub file: Option<PathBuf>,
    /// Most entries ACL LOG keeps (`acllog-max-len`).
    pub acllog_max_len: usize,
    /// The ACL file, empty for none (`aclfile`).
    pub aclfile: String,
    /// New users may use every channel (`acl-pubsub-default allchannels`).
    pub acl_pubsub_all: bool,
    /// `user <name> <rules...>` lines, name first (`users/`), in order.
    pub users: Vec<Vec<String>>,
}

impl Default for Config {
    fn default() -> Config {
        let mut config = Config {
            port: 0,
            bind: Vec::new(),
            protected_mode: false,
            dir: PathBuf::new(),
            appendonly: false,
            appendfsync: AppendFsync::EverySec,
            appendfilename: String::new(),
            save: String::new(),
            dbfilename: String::new(),
            aof_load_truncated: false,
            log_device: LogDevice::Auto,
            log_wbuf_dir: String::new(),
            log_wbuf_size_bytes: 64 << 20,
            requirepass: None,
            maxclients: 0,
            timeout_s: 0,
            renamed_commands: Vec::new(),
            tls: Default::default(),
            cluster: Default::default(),
            maxmemory_bytes: 0,
            maxmemory_clients: 0,
            maxmemory_dram_bytes: 0,
            pm_tier_path: String::new(),
            pm_tier_size_bytes: 0,
            proto_max_bulk_len_bytes: 0,
            client_query_buffer_limit_bytes: 0,
            databases: 0,
            hz: 0,
            busy_reply_threshold_ms: 0,
            enable_debug_command: ProtectedAction::No,
            enable_module_command: ProtectedAction::No,
            enable_protected_configs: ProtectedAction::No,
            latency_tracking: false,
            latency_percentiles: Vec::new(),
            auto_aof_rewrite_percentage: 0,
            auto_aof_rewrite_min_size_bytes: 0,
            aof_rewrite_threads: 0,
            aof_rewrite_io_share_percent: 0,
            aof_rewrite_cpu_share_percent: 0,
            aof_rewrite_lend_loop_core: false,
            rdb_key_save_delay: 0,
            event_loop_unstack: false,
            client_output_buffer_limits: Default::default(),
            oom_score_adj: Default::default(),
            oom_score_adj_values: [0; 3],
            shutdown_on_sigint: "default".into(),
            shutdown_on_sigterm: "default".into(),
            aof_release_log_cache: false,
            aof_everysec_sync_bytes: 0,
            server_cpulist: String::new(),
            aof_rewrite_cpulist: String::new(),
            maxmemory_policy: MaxmemoryPolicy::NoEviction,
            maxmemory_samples: 0,
            lfu_log_factor: 0,
            lfu_decay_time_minutes: 0,
            slowlog_log_slower_than_us: 0,
            slowlog_max_len: 0,
            latency_monitor_threshold_ms: 0,
            notify_keyspace_events: 0,
            replicaof: String::new(),
            unixsocket: String::new(),
            bind_source_addr: String::new(),
            repl_diskless_load: "disabled".to_string(),
            unixsocketperm: 0,
            masterauth: None,
            masteruser: None,
            replica_read_only: false,
            lazyfree_lazy_user_del: false,
            lazyfree_lazy_user_flush: false,
            replica_serve_stale_data: false,
            repl_ping_replica_period_s: 0,
            repl_timeout_s: 0,
            repl_backlog_ttl_s: 0,
            stream_node_max_entries: 0,
            stream_node_max_bytes: 0,
            replica_announce_ip: None,
            replica_announce_port: 0,
            repl_backlog_size_bytes: 0,
            repl_diskless_sync: false,
            repl_diskless_sync_delay_s: 0,
            repl_diskless_sync_max_replicas: 0,
            min_replicas_to_write: 0,
            min_replicas_max_lag_s: 0,
            accepted: BTreeMap::new(),
            users: Vec::new(),
            acllog_max_len: 0,
            aclfile: String::new(),
            acl_pubsub_all: false,
            file: None,
        };
        // The blanks above are placeholders: every value comes from the
        // table's default text, through the same path as a config file.
        for directive in table::DIRECTIVES {
            config.store(directive, directive.default.to_string());
        }
        config
    }
}

/// Directives Redis 7.0 still reads from a file, and ignores.
const DEPRECATED: [&str; 3] = [
    "list-max-ziplist-entries",
    "list-max-ziplist-value",
    "lua-replicate-commands",
];

/// One `name args...` read from a file or the command line.
struct Line {
    origin: String,
    name: String,
    args: Vec<String>,
}

impl Config {
    /// Reads a config file, then applies `overrides` (`--name value ...`),
    /// as one sequence (the first `save` of either replaces the default).
    pub fn load(file: Option<&std::path::Path>, overrides: &[String]) -> Result<Config> {
        let mut config = Config::default();
        let mut lines = Vec::new();
        if let Some(path) = file {
            let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
                op: "read config",
                path: path.to_path_buf(),
                source,
            })?;
            lines = text_lines(&text, &path.display().to_string())?;
            config.file = Some(std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()));
        }
        lines.extend(flag_lines(overrides)?);
        config.apply_lines(lines)?;
        Ok(config)
    }

    /// Applies redis.conf text; `origin` names it in errors.
    pub fn apply_text(&mut self, text: &str, origin: &str) -> Result<()> {
        let lines = text_lines(text, origin)?;
        self.apply_lines(lines)
    }

    /// Applies command-line `--name value [value...]` pairs.
    pub fn apply_flags(&mut self, flags: &[String]) -> Result<()> {
        let lines = flag_lines(flags)?;
        self.apply_lines(lines)
    }

    fn apply_lines(&mut self, lines: Vec<Line>) -> Result<()> {
        let mut first_save = true;
        for line in lines {
            if line.name == "save" {
                self.set_from(&line.name, &line.args, Source::Startup { first_save })
                    .map_err(|reason| Error::Config {
                        origin: line.origin.clone(),
                        reason,
                    })?;
                first_save = false;
                continue;
            }
            self.set_from(&line.name, &line.args, Source::Startup { first_save: true })
                .map_err(|reason| Error::Config {
                    origin: line.origin,
                    reason,
                })?;
        }
        Ok(())
    }

    /// Sets directive `name` (any case) to `values`, as a config file line
    /// would; the error names the directive and says what is wrong.
    pub fn set(&mut self, name: &str, values: &[String]) -> std::result::Result<(), String> {
        self.set_from(name, values, Source::Startup { first_save: true })
    }

    fn set_from(
        &mut self,
        name: &str,
        values: &[String],
        source: Source,
    ) -> std::result::Result<(), String> {
        let name = name.to_ascii_lowercase();
        if name == "user" && matches!(source, Source::Startup { .. }) {
            return self.add_user_line(values);
        }
        if name == "rename-command" && matches!(source, Source::Startup { .. }) {
            let [old, new] = values else {
                return Err("'rename-command': Bad directive or wrong number of arguments".into());
            };
            self.renamed_commands.push((old.clone(), new.clone()));
            if let Err(e) = crate::commands::rename::check(&self.renamed_commands) {
                self.renamed_commands.pop();
                return Err(e);
            }
            return Ok(());
        }
        let Some(directive) = table::lookup(&name) else {
            if DEPRECATED.contains(&name.as_str()) && values.len() == 1 {
                return Ok(());
            }
            return Err(format!(
                "'{name}': Bad directive or wrong number of arguments"
            ));
        };
        // A multi-argument directive given as one argument (`--save "900 1"`)
        // is split as Redis splits it.
        let split: Vec<String>;
        let values = match values {
            [one] if directive.has(MULTI_ARG) && !one.is_empty() => {
                split = split_args(one.as_bytes())
                    .map_err(|e| format!("'{name}': {e}"))?
                    .iter()
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect();
                &split[..]
            }
            _ => values,
        };
        let previous = self.get(directive.name).unwrap_or_default();
        let text = parse::parse(directive, values, &previous, source)
            .map_err(|e| format!("'{name} {}': {e}", values.join(" ")))?;
        self.store(directive, text);
        Ok(())
    }

    /// A `user` line: checked as Redis checks it at start-up (a name, no
    /// user twice), loaded once the server starts (`users::Acl`).
    fn add_user_line(&mut self, values: &[String]) -> std::result::Result<(), String> {
        let Some(name) = values.first() else {
            return Err("'user': Bad directive or wrong number of arguments".into());
        };
        if self.users.iter().any(|u| u.first() == Some(name)) {
            return Err(format!(
                "Error in user declaration '{name}': Duplicate user found. A user can only be defined once in config files"
            ));
        }
        self.users.push(values.to_vec());
        Ok(())
    }

    fn store(&mut self, directive: &'static Directive, text: String) {
        if !fields::store(self, directive.name, &text) {
            self.accepted.insert(directive.name, text);
        }
    }

    /// The value of a directive (canonical name) as CONFIG GET shows it.
    pub fn get(&self, name: &str) -> Option<String> {
        fields::show(self, name).or_else(|| self.accepted.get(name).cloned())
    }

    /// CONFIG GET for one pattern: an exact name (hidden directives too,
    /// echoed as given) or a glob over every name and alias.
    pub fn get_matching(&self, pattern: &str) -> Vec<(String, String)> {
        let lower = pattern.to_ascii_lowercase();
        if !pattern.contains(['[', '*', '?']) {
            return table::lookup(&lower)
                .and_then(|d| self.get(d.name))
                .map(|v| vec![(pattern.to_string(), v)])
                .unwrap_or_default();
        }
        let mut out = Vec::new();
        for d in table::DIRECTIVES.iter().filter(|d| !d.has(HIDDEN)) {
            for name in std::iter::once(d.name).chain(d.alias) {
                if glob_match(lower.as_bytes(), name.as_bytes()) {
                    out.push((name.to_string(), self.get(d.name).unwrap_or_default()));
                }
            }
        }
        out
    }

    /// CONFIG SET `pairs` all or nothing; `local`: the client is on
    /// loopback (for protected directives). The error is Redis's reply.
    pub fn set_at_runtime(
        &mut self,
        pairs: &[(String, String)],
        local: bool,
    ) -> std::result::Result<(), String> {
        let mut found: Vec<(&'static Directive, String)> = Vec::new();
        let mut refusal: Option<String> = None;
        for (name, _) in pairs {
            let lower = name.to_ascii_lowercase();
            let Some(d) = table::lookup(&lower) else {
                return Err(format!(
                    "ERR Unknown option or number of arguments for CONFIG SET - '{name}'"
                ));
            };
            let entry_name = if d.name == lower {
                d.name
            } else {
                d.alias.unwrap_or(d.name)
            };
            let why = if d.has(IMMUTABLE) {
                Some("can't set immutable config")
            } else if d.has(PROTECTED) && !self.enable_protected_configs.allows(local) {
                Some("can't set protected config")
            } else if found
                .iter()
                .any(|(f, n)| std::ptr::eq(*f, d) && n == entry_name)
            {
                Some("duplicate parameter")
            } else {
                None
            };
            if let (Some(why), None) = (why, &refusal) {
                refusal = Some(failed(name, why));
            }
            found.push((d, entry_name.to_string()));
        }
        if let Some(refusal) = refusal {
            return Err(refusal);
        }
        let mut next = self.clone();
        for ((d, entry_name), (_, value)) in found.iter().zip(pairs) {
            // Redis splits a multi-argument value at each space.
            let values: Vec<String> = match (d.has(MULTI_ARG), value.is_empty()) {
                (true, true) => Vec::new(),
                (true, false) => value.split(' ').map(String::from).collect(),
                (false, _) => vec![value.clone()],
            };
            let previous = next.get(d.name).unwrap_or_default();
            let text = parse::parse(d, &values, &previous, Source::Runtime)
                .map_err(|e| failed(entry_name, &e))?;
            if d.has(STARTUP_ONLY) && text != previous {
                return Err(failed(
                    entry_name,
                    "Ferrite sets this directive only at start-up",
                ));
            }
            next.store(d, text);
        }
        *self = next;
        Ok(())
    }

    /// The bytes clients may hold before client eviction starts, 0 for
    /// no limit, as Redis reads `maxmemory-clients`: a percentage of
    /// `maxmemory` (no limit while that is 0), and never below 128 KiB,
    /// so a mistaken setting cannot shut every client out.
    pub fn client_eviction_limit(&self) -> u64 {
        const FLOOR_BYTES: u64 = 128 * 1024;
        let limit = match self.maxmemory_clients {
            0 => return 0,
            n if n > 0 => n as u64,
            _ if self.maxmemory_bytes == 0 => return 0,
            n => (self.maxmemory_bytes as f64 * n.unsigned_abs() as f64 / 100.0) as u64,
        };
        limit.max(FLOOR_BYTES)
    }

    /// `hz` as the timer runs it: Redis clamps it to 1..=500.
    pub fn hz_effective(&self) -> u32 {
        self.hz.clamp(1, 500)
    }

    /// `aof-release-log-cache`: whether synced stretches of the log leave
    /// the page cache (`ferrite_wal::WalConfig::release_synced_cache`).
    pub fn release_log_cache(&self) -> bool {
        self.aof_release_log_cache
    }

    /// `aof-everysec-sync-bytes`: at `everysec`, the log also syncs once
    /// this many bytes are written but not synced (0: only every second;
    /// `ferrite_wal::WalConfig::periodic_sync_bytes`).
    pub fn everysec_sync_bytes(&self) -> u64 {
        self.aof_everysec_sync_bytes
    }

    /// A CPU list directive (`server_cpulist`, `aof_rewrite_cpulist`),
    /// checked when it was set; `None` when empty.
    pub fn cpulist(&self, name: &str) -> Option<Vec<usize>> {
        let text = match name {
            "server_cpulist" => &self.server_cpulist,
            "aof_rewrite_cpulist" => &self.aof_rewrite_cpulist,
            _ => return None,
        };
        crate::cpus::parse(text).ok().flatten()
    }

    /// The integer value of an accepted directive without effect (for a
    /// feature that starts reading it); `None` for another kind.
    pub fn accepted_int(&self, name: &str) -> Option<i64> {
        self.accepted.get(name)?.parse().ok()
    }

    /// `hll-sparse-max-bytes`: the largest sparse HyperLogLog, in bytes.
    pub fn hll_sparse_max_bytes(&self) -> usize {
        self.accepted_int("hll-sparse-max-bytes")
            .map_or(0, |n| n.max(0) as usize)
    }

    /// Whether `directive` has an effect in Ferrite.
    pub fn acts(directive: &Directive) -> bool {
        directive.effect == Effect::Acts
    }
}

fn failed(name: &str, why: &str) -> String {
    format!("ERR CONFIG SET failed (possibly related to argument '{name}') - {why}")
}

/// The directive lines of config file text.
fn text_lines(text: &str, origin: &str) -> Result<Vec<Line>> {
    let mut out = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let origin = format!("{origin}:{}", number + 1);
        let parts = split_args(line.as_bytes()).map_err(|_| Error::Config {
            origin: origin.clone(),
            reason: "Unbalanced quotes in configuration line".into(),
        })?;
        let mut parts = parts
            .iter()
            .map(|p| String::from_utf8_lossy(p).into_owned());
        if let Some(name) = parts.next() {
            out.push(Line {
                origin,
                name,
                args: parts.collect(),
            });
        }
    }
    Ok(out)
}

/// The directives of command-line `--name value...` flags.
fn flag_lines(flags: &[String]) -> Result<Vec<Line>> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < flags.len() {
        let Some(name) = flags[at].strip_prefix("--") else {
            return Err(Error::Config {
                origin: "command line".into(),
                reason: format!("expected --name value, found {:?}", flags[at]),
            });
        };
        let end = flags[at + 1..]
            .iter()
            .position(|f| f.starts_with("--"))
            .map_or(flags.len(), |p| at + 1 + p);
        out.push(Line {
            origin: "command line".into(),
            name: name.to_string(),
            args: flags[at + 1..end].to_vec(),
        });
        at = end;
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
