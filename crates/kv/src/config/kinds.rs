//! The enumerated settings' types: each names its values as the
//! configuration spells them and parses them back.

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

    pub(super) fn parse(text: &str) -> Option<AppendFsync> {
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
    /// A file on the disk behind a persistent-memory write buffer
    /// (`ferrite-wbuf`, `log-wbuf-dir`, `log-wbuf-size`): an append is
    /// durable once it is in the buffer, which destages to the file.
    Wbuf,
}

impl LogDevice {
    /// The configuration name.
    pub fn name(self) -> &'static str {
        match self {
            LogDevice::Auto => "auto",
            LogDevice::File => "file",
            LogDevice::Pmem => "pmem",
            LogDevice::PmemEmulated => "pmem-emulated",
            LogDevice::Wbuf => "wbuf",
        }
    }

    pub(super) fn parse(text: &str) -> Option<LogDevice> {
        match text {
            "auto" => Some(LogDevice::Auto),
            "file" => Some(LogDevice::File),
            "pmem" => Some(LogDevice::Pmem),
            "pmem-emulated" => Some(LogDevice::PmemEmulated),
            "wbuf" => Some(LogDevice::Wbuf),
            _ => None,
        }
    }
}

/// Who may use a protected feature (`enable-debug-command`,
/// `enable-protected-configs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProtectedAction {
    /// Nobody.
    No,
    /// Every client.
    Yes,
    /// Clients connected over loopback.
    Local,
}

impl ProtectedAction {
    /// The configuration name.
    pub fn name(self) -> &'static str {
        match self {
            ProtectedAction::No => "no",
            ProtectedAction::Yes => "yes",
            ProtectedAction::Local => "local",
        }
    }

    pub(super) fn parse(text: &str) -> ProtectedAction {
        match text {
            "yes" => ProtectedAction::Yes,
            "local" => ProtectedAction::Local,
            _ => ProtectedAction::No,
        }
    }

    /// Whether a client (`local`: connected over loopback) may.
    pub fn allows(self, local: bool) -> bool {
        self == ProtectedAction::Yes || (self == ProtectedAction::Local && local)
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

    /// The policy named `text` (any case).
    pub fn parse(text: &str) -> Option<MaxmemoryPolicy> {
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
