//! Configuration: a redis.conf-style file plus `--name value` flags, with
//! Redis's directive names where the meaning is the same.

use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::keyspace::glob::glob_match;
use crate::resp::parser::split_args;

/// When the log is made durable, Redis's `appendfsync`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppendFsync {
    /// Reply only after the command is durable (group commit).
    Always,
    /// Make the log durable once a second; a crash of the machine loses up
    /// to about a second, a crash of the process loses nothing.
    EverySec,
    /// Leave flushing to the operating system.
    No,
}

impl AppendFsync {
    /// The configuration name.
    pub fn name(self) -> &'static str {
        match self {
            AppendFsync::Always => "always",
            AppendFsync::EverySec => "everysec",
            AppendFsync::No => "no",
        }
    }

    fn parse(text: &str) -> Option<AppendFsync> {
        match text {
            "always" => Some(AppendFsync::Always),
            "everysec" => Some(AppendFsync::EverySec),
            "no" => Some(AppendFsync::No),
            _ => None,
        }
    }
}

/// What the log is stored on (`log-device`, Ferrite's own directive).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogDevice {
    /// Real persistent memory if the data directory is on DAX, else a file.
    Auto,
    /// A file, made durable with fdatasync.
    File,
    /// Persistent memory; refuses to start unless it is real (DAX).
    Pmem,
    /// A memory-mapped file treated as PM: survives a crash of the process,
    /// **not** a power failure or kernel crash.
    PmemEmulated,
}

impl LogDevice {
    /// The configuration name.
    pub fn name(self) -> &'static str {
        match self {
            LogDevice::Auto => "auto",
            LogDevice::File => "file",
            LogDevice::Pmem => "pmem",
            LogDevice::PmemEmulated => "pmem-emulated",
        }
    }

    fn parse(text: &str) -> Option<LogDevice> {
        match text {
            "auto" => Some(LogDevice::Auto),
            "file" => Some(LogDevice::File),
            "pmem" => Some(LogDevice::Pmem),
            "pmem-emulated" => Some(LogDevice::PmemEmulated),
            _ => None,
        }
    }
}

/// What to do when memory passes `maxmemory` (`maxmemory-policy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MaxmemoryPolicy {
    /// Refuse commands that may grow memory.
    NoEviction,
    /// Evict the least recently used of sampled keys.
    AllKeysLru,
    /// Evict the least frequently used of sampled keys.
    AllKeysLfu,
    /// Evict random keys.
    AllKeysRandom,
    /// As `AllKeysLru` among keys with a TTL.
    VolatileLru,
    /// As `AllKeysLfu` among keys with a TTL.
    VolatileLfu,
    /// Random keys with a TTL.
    VolatileRandom,
    /// The sampled key with a TTL nearest to expiring.
    VolatileTtl,
}

impl MaxmemoryPolicy {
    const ALL: [(MaxmemoryPolicy, &'static str); 8] = [
        (MaxmemoryPolicy::NoEviction, "noeviction"),
        (MaxmemoryPolicy::AllKeysLru, "allkeys-lru"),
        (MaxmemoryPolicy::AllKeysLfu, "allkeys-lfu"),
        (MaxmemoryPolicy::AllKeysRandom, "allkeys-random"),
        (MaxmemoryPolicy::VolatileLru, "volatile-lru"),
        (MaxmemoryPolicy::VolatileLfu, "volatile-lfu"),
        (MaxmemoryPolicy::VolatileRandom, "volatile-random"),
        (MaxmemoryPolicy::VolatileTtl, "volatile-ttl"),
    ];

    /// The configuration name.
    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(p, _)| *p == self)
            .map_or("noeviction", |(_, n)| n)
    }

    fn parse(text: &str) -> Option<MaxmemoryPolicy> {
        let text = text.to_ascii_lowercase();
        Self::ALL.iter().find(|(_, n)| *n == text).map(|(p, _)| *p)
    }

    /// Whether the keys' clocks count accesses (LFU) rather than time.
    pub fn is_lfu(self) -> bool {
        matches!(
            self,
            MaxmemoryPolicy::AllKeysLfu | MaxmemoryPolicy::VolatileLfu
        )
    }
}

/// The server configuration.
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
    /// Start with a log whose tail is torn, truncating it (`aof-load-truncated`).
    pub aof_load_truncated: bool,
    /// The log's device (`log-device`).
    pub log_device: LogDevice,
    /// Password of the default user (`requirepass`).
    pub requirepass: Option<String>,
    /// Most connected clients (`maxclients`).
    pub maxclients: usize,
    /// Memory limit in bytes, 0 for none (`maxmemory`).
    pub maxmemory_bytes: u64,
    /// What happens past `maxmemory` (`maxmemory-policy`).
    pub maxmemory_policy: MaxmemoryPolicy,
    /// Keys sampled per eviction (`maxmemory-samples`).
    pub maxmemory_samples: u32,
    /// LFU counter growth damping (`lfu-log-factor`).
    pub lfu_log_factor: u32,
    /// Minutes per LFU counter decrement (`lfu-decay-time`).
    pub lfu_decay_time_minutes: u32,
    /// Commands slower than this many microseconds go to the slow log; -1
    /// disables it (`slowlog-log-slower-than`).
    pub slowlog_log_slower_than_us: i64,
    /// Entries the slow log keeps (`slowlog-max-len`).
    pub slowlog_max_len: usize,
    /// Events slower than this many milliseconds are recorded by the
    /// latency monitor; 0 disables it (`latency-monitor-threshold`).
    pub latency_monitor_threshold_ms: u64,
    /// Longest bulk string in bytes (`proto-max-bulk-len`).
    pub proto_max_bulk_len_bytes: usize,
    /// Largest query buffer per client in bytes (`client-query-buffer-limit`).
    pub client_query_buffer_limit_bytes: usize,
    /// Number of databases (`databases`).
    pub databases: usize,
    /// Timer frequency in Hz (`hz`): active expiry and housekeeping.
    pub hz: u32,
    /// Keyspace notification classes (`notify-keyspace-events`), as
    /// `keyspace::events` bits.
    pub notify_keyspace_events: u32,
    /// Directives accepted for compatibility and reported by CONFIG GET,
    /// without effect (`save`, `timeout`...).
    pub passive: Vec<(String, String)>,
}

/// Largest value accepted for `databases`.
const DATABASES_MAX: usize = 1024;
/// Largest `maxclients`.
const MAXCLIENTS_MAX: usize = 1_000_000;

impl Default for Config {
    fn default() -> Config {
        Config {
            port: 6379,
            bind: vec!["127.0.0.1".into()],
            protected_mode: true,
            dir: PathBuf::from("./ferrite-data"),
            appendonly: true,
            appendfsync: AppendFsync::EverySec,
            appendfilename: "appendonly.aof".into(),
            aof_load_truncated: true,
            log_device: LogDevice::Auto,
            requirepass: None,
            maxclients: 10_000,
            maxmemory_bytes: 0,
            maxmemory_policy: MaxmemoryPolicy::NoEviction,
            maxmemory_samples: 5,
            lfu_log_factor: 10,
            lfu_decay_time_minutes: 1,
            slowlog_log_slower_than_us: 10_000,
            slowlog_max_len: 128,
            latency_monitor_threshold_ms: 0,
            proto_max_bulk_len_bytes: 512 * 1024 * 1024,
            client_query_buffer_limit_bytes: 1024 * 1024 * 1024,
            databases: crate::keyspace::DATABASES_DEFAULT,
            hz: 10,
            notify_keyspace_events: 0,
            passive: [
                ("save", ""),
                ("enable-debug-command", "no"),
                ("timeout", "0"),
                ("tcp-keepalive", "300"),
                ("repl-ping-replica-period", "10"),
                ("loglevel", "notice"),
                ("daemonize", "no"),
                ("auto-aof-rewrite-percentage", "100"),
                ("auto-aof-rewrite-min-size", "67108864"),
                ("aof-rewrite-threads", "0"),
                ("aof-rewrite-io-share", "20"),
                ("aof-rewrite-cpu-share", "11"),
                ("aof-rewrite-lend-loop-core", "yes"),
                ("aof-release-log-cache", "yes"),
                ("aof-everysec-sync-bytes", "16mb"),
                ("tracking-table-max-keys", "1000000"),
                ("server_cpulist", ""),
                ("aof_rewrite_cpulist", ""),
                ("hll-sparse-max-bytes", "3000"),
            ]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        }
    }
}

/// Parses `1gb`, `100mb`, `512k`, `42` the way redis.conf does.
pub fn parse_memory(text: &str) -> Option<u64> {
    let lower = text.to_ascii_lowercase();
    let units: [(&str, u64); 8] = [
        ("kb", 1024),
        ("mb", 1024 * 1024),
        ("gb", 1024 * 1024 * 1024),
        ("k", 1000),
        ("m", 1_000_000),
        ("g", 1_000_000_000),
        ("b", 1),
        ("", 1),
    ];
    for (suffix, scale) in units {
        if let Some(number) = lower.strip_suffix(suffix) {
            if !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit()) {
                return number.parse::<u64>().ok()?.checked_mul(scale);
            }
        }
    }
    None
}

fn parse_bool(text: &str) -> Option<bool> {
    match text.to_ascii_lowercase().as_str() {
        "yes" => Some(true),
        "no" => Some(false),
        _ => None,
    }
}

fn bad(name: &str, value: &str, expected: &str) -> String {
    format!("invalid value {value:?} for '{name}': expected {expected}")
}

impl Config {
    /// Reads a config file, then applies `overrides` (`--name value ...`).
    pub fn load(file: Option<&std::path::Path>, overrides: &[String]) -> Result<Config> {
        let mut config = Config::default();
        if let Some(path) = file {
            let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
                op: "read config",
                path: path.to_path_buf(),
                source,
            })?;
            config.apply_text(&text, &path.display().to_string())?;
        }
        config.apply_flags(overrides)?;
        Ok(config)
    }

    /// Applies redis.conf text; `origin` names it in errors.
    pub fn apply_text(&mut self, text: &str, origin: &str) -> Result<()> {
        for (number, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let config_err = |reason: String| Error::Config {
                origin: format!("{origin}:{}", number + 1),
                reason,
            };
            let parts = split_args(line.as_bytes()).map_err(|e| config_err(e.to_string()))?;
            let parts: Vec<String> = parts
                .iter()
                .map(|p| String::from_utf8_lossy(p).into_owned())
                .collect();
            if let Some((name, values)) = parts.split_first() {
                self.set(name, values).map_err(config_err)?;
            }
        }
        Ok(())
    }

    /// Applies command-line `--name value [value...]` pairs.
    pub fn apply_flags(&mut self, flags: &[String]) -> Result<()> {
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
            self.set(name, &flags[at + 1..end])
                .map_err(|reason| Error::Config {
                    origin: "command line".into(),
                    reason,
                })?;
            at = end;
        }
        Ok(())
    }

    /// Sets directive `name` (any case) to `values`.
    pub fn set(&mut self, name: &str, values: &[String]) -> std::result::Result<(), String> {
        let name = name.to_ascii_lowercase();
        if name == "bind" {
            if values.is_empty() {
                return Err("'bind' needs at least one address".into());
            }
            self.bind = values.to_vec();
            return Ok(());
        }
        let [value] = values else {
            return Err(format!("'{name}' takes exactly one argument"));
        };
        self.set_one(&name, value)
    }

    fn set_one(&mut self, name: &str, value: &str) -> std::result::Result<(), String> {
        let memory = || parse_memory(value).ok_or_else(|| bad(name, value, "a size like 100mb"));
        let boolean = || parse_bool(value).ok_or_else(|| bad(name, value, "yes or no"));
        match name {
            "port" => {
                self.port = value
                    .parse()
                    .map_err(|_| bad(name, value, "a port number"))?
            }
            "protected-mode" => self.protected_mode = boolean()?,
            "dir" => self.dir = PathBuf::from(value),
            "appendonly" => self.appendonly = boolean()?,
            "appendfsync" => {
                self.appendfsync = AppendFsync::parse(value)
                    .ok_or_else(|| bad(name, value, "always, everysec or no"))?
            }
            "appendfilename" => self.appendfilename = value.to_string(),
            "aof-load-truncated" => self.aof_load_truncated = boolean()?,
            "log-device" => {
                self.log_device = LogDevice::parse(value)
                    .ok_or_else(|| bad(name, value, "auto, file, pmem or pmem-emulated"))?
            }
            "requirepass" => {
                self.requirepass = (!value.is_empty()).then(|| value.to_string());
            }
            "maxclients" => {
                self.maxclients = value
                    .parse()
                    .ok()
                    .filter(|n| (1..=MAXCLIENTS_MAX).contains(n))
                    .ok_or_else(|| bad(name, value, "1 to 1000000"))?
            }
            "maxmemory" => self.maxmemory_bytes = memory()?,
            "proto-max-bulk-len" => {
                self.proto_max_bulk_len_bytes = usize::try_from(memory()?)
                    .ok()
                    .filter(|n| *n >= 1024 * 1024)
                    .ok_or_else(|| bad(name, value, "at least 1mb"))?
            }
            "client-query-buffer-limit" => {
                self.client_query_buffer_limit_bytes = usize::try_from(memory()?)
                    .ok()
                    .filter(|n| *n >= 1024 * 1024)
                    .ok_or_else(|| bad(name, value, "at least 1mb"))?
            }
            "databases" => {
                self.databases = value
                    .parse()
                    .ok()
                    .filter(|n| (1..=DATABASES_MAX).contains(n))
                    .ok_or_else(|| bad(name, value, "1 to 1024"))?
            }
            "hz" => {
                self.hz = value
                    .parse()
                    .ok()
                    .filter(|n| (1..=500).contains(n))
                    .ok_or_else(|| bad(name, value, "1 to 500"))?
            }
            "notify-keyspace-events" => {
                self.notify_keyspace_events = crate::keyspace::events::parse(value)
                    .ok_or("Invalid event class character. Use 'Ag$lshzxeKEtmd'.")?
            }
            "maxmemory-policy" => {
                self.maxmemory_policy = MaxmemoryPolicy::parse(value)
                    .ok_or_else(|| bad(name, value, "a maxmemory policy"))?
            }
            "maxmemory-samples" => {
                self.maxmemory_samples = value
                    .parse()
                    .ok()
                    .filter(|n| (1..=64).contains(n))
                    .ok_or_else(|| bad(name, value, "1 to 64"))?
            }
            "lfu-log-factor" => {
                self.lfu_log_factor = value
                    .parse()
                    .ok()
                    .filter(|n| *n <= i32::MAX as u32)
                    .ok_or_else(|| bad(name, value, "0 or more"))?
            }
            "lfu-decay-time" => {
                self.lfu_decay_time_minutes = value
                    .parse()
                    .ok()
                    .filter(|n| *n <= i32::MAX as u32)
                    .ok_or_else(|| bad(name, value, "0 or more"))?
            }
            "slowlog-log-slower-than" => {
                self.slowlog_log_slower_than_us = value
                    .parse()
                    .ok()
                    .filter(|n| *n >= -1)
                    .ok_or_else(|| bad(name, value, "-1 or more"))?
            }
            "slowlog-max-len" => {
                self.slowlog_max_len = value
                    .parse()
                    .ok()
                    .filter(|n| *n <= i64::MAX as usize)
                    .ok_or_else(|| bad(name, value, "0 or more"))?
            }
            "latency-monitor-threshold" => {
                self.latency_monitor_threshold_ms =
                    value.parse().map_err(|_| bad(name, value, "0 or more"))?
            }
            "aof-rewrite-cpu-share" => {
                value
                    .parse::<u32>()
                    .ok()
                    .filter(|n| *n <= 10_000)
                    .ok_or_else(|| {
                        bad(name, value, "percent of one core, 0 (unlimited) to 10000")
                    })?;
                return self.set_passive(name, value);
            }
            "aof-rewrite-lend-loop-core" | "aof-release-log-cache" => {
                if value != "yes" && value != "no" {
                    return Err(bad(name, value, "yes or no"));
                }
                return self.set_passive(name, value);
            }
            "aof-everysec-sync-bytes" => {
                parse_memory(value).ok_or_else(|| {
                    bad(
                        name,
                        value,
                        "a size (bytes, or with kb, mb, gb), 0 = only every second",
                    )
                })?;
                return self.set_passive(name, value);
            }
            "aof-rewrite-io-share" => {
                value
                    .parse::<u32>()
                    .ok()
                    .filter(|n| (1..=100).contains(n))
                    .ok_or_else(|| bad(name, value, "a percentage from 1 to 100"))?;
                return self.set_passive(name, value);
            }
            "hll-sparse-max-bytes" => {
                let bytes = parse_memory(value)
                    .filter(|n| *n <= i64::MAX as u64)
                    .ok_or_else(|| bad(name, value, "a size like 3000 or 3kb"))?;
                return self.set_passive(name, &bytes.to_string());
            }
            "tracking-table-max-keys" => {
                value
                    .parse::<u64>()
                    .ok()
                    .filter(|n| i64::try_from(*n).is_ok())
                    .ok_or("argument must be between 0 and 9223372036854775807 inclusive")?;
                return self.set_passive(name, value);
            }
            "server_cpulist" | "aof_rewrite_cpulist" => {
                crate::cpus::parse(value).map_err(|e| bad(name, value, &e))?;
                return self.set_passive(name, value);
            }
            _ => return self.set_passive(name, value),
        }
        Ok(())
    }

    /// The value of a directive kept as text (`auto-aof-rewrite-*`,
    /// `aof-rewrite-threads`, the CPU lists), read where it is used.
    pub fn passive_value(&self, name: &str) -> Option<&str> {
        self.passive
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// `aof-release-log-cache`: whether synced stretches of the log leave
    /// the page cache (`ferrite_wal::WalConfig::release_synced_cache`).
    pub fn release_log_cache(&self) -> bool {
        self.passive_value("aof-release-log-cache") != Some("no")
    }

    /// `aof-everysec-sync-bytes`: at `everysec`, the log also syncs once
    /// this many bytes are written but not synced (0: only every second;
    /// `ferrite_wal::WalConfig::periodic_sync_bytes`).
    pub fn everysec_sync_bytes(&self) -> u64 {
        self.passive_value("aof-everysec-sync-bytes")
            .and_then(parse_memory)
            .unwrap_or(0)
    }

    /// `hll-sparse-max-bytes`: the largest sparse HyperLogLog, header
    /// included, before it turns dense (`types/hll.rs`).
    pub fn hll_sparse_max_bytes(&self) -> usize {
        self.passive_value("hll-sparse-max-bytes")
            .and_then(parse_memory)
            .and_then(|n| usize::try_from(n).ok())
            .unwrap_or(crate::types::hll::SPARSE_MAX_BYTES_DEFAULT)
    }

    /// A CPU list directive (`server_cpulist`, `aof_rewrite_cpulist`),
    /// validated when it was set; `None` when empty.
    pub fn cpulist(&self, name: &str) -> Option<Vec<usize>> {
        crate::cpus::parse(self.passive_value(name)?).ok().flatten()
    }

    fn set_passive(&mut self, name: &str, value: &str) -> std::result::Result<(), String> {
        match self.passive.iter_mut().find(|(k, _)| k == name) {
            Some(slot) => {
                slot.1 = value.to_string();
                Ok(())
            }
            None => Err(format!("unknown directive '{name}'")),
        }
    }

    /// Every directive with its current value, for CONFIG GET.
    pub fn entries(&self) -> Vec<(String, String)> {
        let yes_no = |b: bool| if b { "yes" } else { "no" }.to_string();
        let mut out: Vec<(String, String)> = vec![
            ("port".into(), self.port.to_string()),
            ("bind".into(), self.bind.join(" ")),
            ("protected-mode".into(), yes_no(self.protected_mode)),
            ("dir".into(), self.dir.display().to_string()),
            ("appendonly".into(), yes_no(self.appendonly)),
            ("appendfsync".into(), self.appendfsync.name().into()),
            ("appendfilename".into(), self.appendfilename.clone()),
            ("aof-load-truncated".into(), yes_no(self.aof_load_truncated)),
            ("log-device".into(), self.log_device.name().into()),
            (
                "requirepass".into(),
                self.requirepass.clone().unwrap_or_default(),
            ),
            ("maxclients".into(), self.maxclients.to_string()),
            ("maxmemory".into(), self.maxmemory_bytes.to_string()),
            (
                "maxmemory-policy".into(),
                self.maxmemory_policy.name().into(),
            ),
            (
                "maxmemory-samples".into(),
                self.maxmemory_samples.to_string(),
            ),
            ("lfu-log-factor".into(), self.lfu_log_factor.to_string()),
            (
                "lfu-decay-time".into(),
                self.lfu_decay_time_minutes.to_string(),
            ),
            (
                "slowlog-log-slower-than".into(),
                self.slowlog_log_slower_than_us.to_string(),
            ),
            ("slowlog-max-len".into(), self.slowlog_max_len.to_string()),
            (
                "latency-monitor-threshold".into(),
                self.latency_monitor_threshold_ms.to_string(),
            ),
            (
                "proto-max-bulk-len".into(),
                self.proto_max_bulk_len_bytes.to_string(),
            ),
            (
                "client-query-buffer-limit".into(),
                self.client_query_buffer_limit_bytes.to_string(),
            ),
            ("databases".into(), self.databases.to_string()),
            ("hz".into(), self.hz.to_string()),
            (
                "notify-keyspace-events".into(),
                crate::keyspace::events::format(self.notify_keyspace_events),
            ),
        ];
        out.extend(self.passive.iter().cloned());
        out
    }

    /// CONFIG GET: directives matching `pattern`.
    pub fn get_matching(&self, pattern: &str) -> Vec<(String, String)> {
        let pattern = pattern.to_ascii_lowercase();
        self.entries()
            .into_iter()
            .filter(|(k, _)| glob_match(pattern.as_bytes(), k.as_bytes()))
            .collect()
    }

    /// CONFIG SET: only directives that make sense to change at run time.
    pub fn set_at_runtime(&mut self, name: &str, value: &str) -> std::result::Result<(), String> {
        let name = name.to_ascii_lowercase();
        const FIXED: [&str; 10] = [
            "server_cpulist",
            "aof_rewrite_cpulist",
            "port",
            "bind",
            "dir",
            "appendonly",
            "appendfilename",
            "log-device",
            "databases",
            "daemonize",
        ];
        if FIXED.contains(&name.as_str()) {
            return Err(format!("'{name}' can only be set at start-up"));
        }
        self.set_one(&name, value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_and_flags() {
        let mut c = Config::default();
        c.apply_text(
            "# comment\nport 7000\nmaxmemory 100mb\nappendfsync always\nbind 127.0.0.1 ::1\n",
            "t",
        )
        .unwrap();
        c.apply_flags(&[
            "--port".into(),
            "7001".into(),
            "--requirepass".into(),
            "s3cret".into(),
        ])
        .unwrap();
        assert_eq!(c.port, 7001);
        assert_eq!(c.maxmemory_bytes, 100 * 1024 * 1024);
        assert_eq!(c.appendfsync, AppendFsync::Always);
        assert_eq!(c.bind.len(), 2);
        assert_eq!(c.requirepass.as_deref(), Some("s3cret"));
        assert!(c.apply_text("nonsense 1\n", "t").is_err());
        assert!(c
            .apply_flags(&["--appendfsync".into(), "sometimes".into()])
            .is_err());
    }

    #[test]
    fn the_rewrite_io_share_is_a_percentage_changeable_at_run_time() {
        let mut c = Config::default();
        let default = crate::rewrite::pace::DEFAULT_SHARE_PERCENT.to_string();
        assert_eq!(c.passive_value("aof-rewrite-io-share"), Some(&*default));
        for bad in ["0", "101", "-5", "half", ""] {
            let err = c.set_at_runtime("aof-rewrite-io-share", bad).unwrap_err();
            assert!(err.contains("aof-rewrite-io-share"), "{err}");
        }
        assert_eq!(c.passive_value("aof-rewrite-io-share"), Some(&*default));
        c.set_at_runtime("aof-rewrite-io-share", "100").unwrap();
        assert_eq!(c.passive_value("aof-rewrite-io-share"), Some("100"));
    }

    #[test]
    fn the_rewrite_cpu_share_is_a_share_of_one_core_changeable_at_run_time() {
        let mut c = Config::default();
        let default = crate::rewrite::pace::DEFAULT_CPU_SHARE_PERCENT.to_string();
        assert_eq!(c.passive_value("aof-rewrite-cpu-share"), Some(&*default));
        for bad in ["10001", "-1", "a tenth", ""] {
            let err = c.set_at_runtime("aof-rewrite-cpu-share", bad).unwrap_err();
            assert!(err.contains("aof-rewrite-cpu-share"), "{err}");
        }
        assert_eq!(c.passive_value("aof-rewrite-cpu-share"), Some(&*default));
        for good in ["25", "0", "250"] {
            c.set_at_runtime("aof-rewrite-cpu-share", good).unwrap();
            assert_eq!(c.passive_value("aof-rewrite-cpu-share"), Some(good));
        }
    }

    #[test]
    fn lending_the_loop_core_is_yes_or_no_changeable_at_run_time() {
        let mut c = Config::default();
        assert_eq!(c.passive_value("aof-rewrite-lend-loop-core"), Some("yes"));
        for bad in ["1", "true", "maybe", ""] {
            let err = c
                .set_at_runtime("aof-rewrite-lend-loop-core", bad)
                .unwrap_err();
            assert!(err.contains("aof-rewrite-lend-loop-core"), "{err}");
        }
        assert_eq!(c.passive_value("aof-rewrite-lend-loop-core"), Some("yes"));
        c.set_at_runtime("aof-rewrite-lend-loop-core", "no")
            .unwrap();
        assert_eq!(c.passive_value("aof-rewrite-lend-loop-core"), Some("no"));
    }

    #[test]
    fn releasing_the_log_cache_is_yes_or_no_changeable_at_run_time() {
        let mut c = Config::default();
        assert!(c.release_log_cache());
        for bad in ["1", "on", ""] {
            let err = c.set_at_runtime("aof-release-log-cache", bad).unwrap_err();
            assert!(err.contains("aof-release-log-cache"), "{err}");
        }
        assert!(c.release_log_cache());
        c.set_at_runtime("aof-release-log-cache", "no").unwrap();
        assert!(!c.release_log_cache());
    }

    #[test]
    fn the_everysec_sync_bound_is_a_size_changeable_at_run_time() {
        let mut c = Config::default();
        assert_eq!(c.everysec_sync_bytes(), 16 << 20);
        for bad in ["-1", "lots", "16xb", ""] {
            let err = c
                .set_at_runtime("aof-everysec-sync-bytes", bad)
                .unwrap_err();
            assert!(err.contains("aof-everysec-sync-bytes"), "{err}");
        }
        assert_eq!(c.everysec_sync_bytes(), 16 << 20);
        c.set_at_runtime("aof-everysec-sync-bytes", "4mb").unwrap();
        assert_eq!(c.everysec_sync_bytes(), 4 << 20);
        c.set_at_runtime("aof-everysec-sync-bytes", "0").unwrap();
        assert_eq!(c.everysec_sync_bytes(), 0);
    }

    #[test]
    fn memory_units() {
        assert_eq!(parse_memory("1gb"), Some(1 << 30));
        assert_eq!(parse_memory("1k"), Some(1000));
        assert_eq!(parse_memory("12"), Some(12));
        assert_eq!(parse_memory("x"), None);
    }
}
