//! The command table: one [`CommandSpec`] per command and subcommand, as
//! data. Each family's file declares its own `COMMANDS` slice; this file
//! joins them and holds the types. Arity follows Redis's convention (`n`
//! exactly, `-n` at least, name included); flags are [`super::flags`];
//! key positions are [`Keys`]. Everything that depends on what a command
//! is (arity errors, MULTI queueing, OOM and MISCONF refusals, the
//! rewrite's capture and supersede rules, COMMAND's replies) reads these
//! fields rather than lists of names.

use std::collections::HashMap;
use std::sync::OnceLock;

pub(super) use super::flags::*;
use super::hashes;
use super::{
    acl_cmd, bits, blocking, client, cluster, config, connection, debug, diagnostics, dump,
    failover, functions, geo,
};
use super::{
    hll, introspect, keys, lists, lolwut, memory, migrate, module, object, persistence, pubsub,
};
use super::{replication, scripting, server, sets, sort, streams, strings, transactions, zsets};
use super::{CmdResult, Ctx};
use crate::resp::Args;

/// A command handler.
pub type Handler = fn(&mut Ctx<'_>, &Args<'_>) -> CmdResult;

/// Finds the key arguments of a command whose keys move (ZUNIONSTORE's
/// `numkeys`, SORT's `STORE`): appends their positions to `out`.
pub type KeyFinder = fn(&Args<'_>, &mut Vec<usize>);

/// Where a command's keys are among its arguments.
#[derive(Clone, Copy)]
pub enum Keys {
    /// No key arguments.
    None,
    /// First key, last key (negative: counted from the end, -1 the last
    /// argument), step between keys: Redis's legacy `(first, last, step)`.
    Range(i32, i32, i32),
    /// Movable keys: a function reads the arguments to find them.
    Find(KeyFinder),
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Keys::None => f.write_str("None"),
            Keys::Range(a, b, c) => write!(f, "Range({a}, {b}, {c})"),
            Keys::Find(_) => f.write_str("Find"),
        }
    }
}

impl Keys {
    /// `Range` from a `(first, last, step)` triple; `(0, 0, 0)` is `None`.
    pub const fn range(triple: (i32, i32, i32)) -> Keys {
        if triple.0 == 0 {
            Keys::None
        } else {
            Keys::Range(triple.0, triple.1, triple.2)
        }
    }

    /// Appends the positions of the key arguments in `args` to `out`.
    pub fn positions(&self, args: &Args<'_>, out: &mut Vec<usize>) {
        match *self {
            Keys::None => {}
            Keys::Range(first, last, step) => {
                if first <= 0 || step <= 0 {
                    return;
                }
                let argc = args.len() as i64;
                let end = if last < 0 {
                    argc + i64::from(last)
                } else {
                    i64::from(last).min(argc - 1)
                };
                let mut at = i64::from(first);
                while at <= end {
                    out.push(at as usize);
                    at += i64::from(step);
                }
            }
            Keys::Find(find) => find(args, out),
        }
    }

    /// The `(first, last, step)` COMMAND INFO reports: zeros for movable
    /// keys, as Redis reports them.
    pub fn legacy(&self) -> (i32, i32, i32) {
        match *self {
            Keys::Range(a, b, c) => (a, b, c),
            Keys::None | Keys::Find(_) => (0, 0, 0),
        }
    }

    /// Whether a call may name more than one key.
    pub fn may_be_many(&self) -> bool {
        match *self {
            Keys::None => false,
            Keys::Range(first, last, _) => first != last,
            Keys::Find(_) => true,
        }
    }
}

/// Where a movable-key command's key specification starts looking, as
/// COMMAND INFO describes it (`begin_search`).
#[derive(Debug, Clone, Copy)]
pub enum BeginSearch {
    /// At a fixed argument index.
    Index(i32),
    /// After `keyword`, searched from index `startfrom` (negative: from
    /// the end).
    Keyword(&'static str, i32),
    /// Not describable (the keys depend on values).
    Unknown,
}

/// How a movable-key command's key specification finds its keys from
/// where the search began (`find_keys`).
#[derive(Debug, Clone, Copy)]
pub enum FindKeys {
    /// `lastkey`, `keystep`, `limit`.
    Range(i32, i32, i32),
    /// `keynumidx`, `firstkey`, `keystep`: a count of keys, then the keys.
    Keynum(i32, i32, i32),
    /// Not describable.
    Unknown,
}

/// One key specification of a movable-key command, for COMMAND INFO.
pub type KeySearch = (BeginSearch, FindKeys);

/// Which arguments name Pub/Sub channels, for ACL channel checks (Redis's
/// per-command channel getters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channels {
    /// None.
    None,
    /// The first argument is a channel published to.
    Publish,
    /// Every argument is a channel subscribed to.
    Subscribe,
    /// Every argument is a pattern subscribed to (checked literally).
    Pattern,
}

/// One command or subcommand.
#[derive(Debug)]
pub struct CommandSpec {
    /// Lower-case name (a subcommand's own name, `list` for CLIENT LIST).
    pub name: &'static str,
    /// `n`: exactly n arguments (name included); `-n`: at least n. A
    /// subcommand counts the container's name and its own.
    pub arity: i32,
    /// [`super::flags`] bits.
    pub flags: u32,
    /// ACL categories beyond those the flags and group imply
    /// ([`super::acl`] bits).
    pub acl: u64,
    /// Where the keys are.
    pub keys: Keys,
    /// Redis's command group (`string`, `sorted-set`, `generic`...).
    pub group: &'static str,
    /// One line for COMMAND DOCS.
    pub summary: &'static str,
    /// The implementation (for a container, run only when it has no
    /// subcommand table).
    pub handler: Handler,
    /// A container's subcommands (CLIENT LIST, CONFIG GET...).
    pub subcommands: &'static [CommandSpec],
    /// Per key specification, its [`key_flags`] bits, in the order Redis
    /// lists the specifications (the first key found takes the first, each
    /// later key the next, the last repeating). Empty: COMMAND derives
    /// them (`commands/introspect.rs`).
    pub key_flags: &'static [u16],
    /// The Redis version that introduced it, for COMMAND DOCS (empty:
    /// not stated).
    pub since: &'static str,
    /// Its time complexity, for COMMAND DOCS (empty: not stated).
    pub complexity: &'static str,
    /// For movable keys ([`Keys::Find`]), the `(first, last, step)`
    /// COMMAND INFO still reports, as Redis does from its first key
    /// specification when that one is a plain index (ZUNIONSTORE's
    /// destination, SORT's source); `(0, 0, 0)` otherwise.
    pub movable_range: (i32, i32, i32),
    /// For movable keys, each key specification's search, in the order
    /// of [`CommandSpec::key_flags`] (empty: COMMAND INFO says
    /// `unknown`). Only COMMAND INFO reads it; the finder places keys.
    pub key_searches: &'static [KeySearch],
    /// COMMAND INFO's tips for clients and proxies
    /// (`nondeterministic_output`, `request_policy:all_shards`...).
    pub tips: &'static [&'static str],
    /// Which arguments are Pub/Sub channels.
    pub channels: Channels,
}

/// Flags of a key specification, as COMMAND INFO and COMMAND
/// GETKEYSANDFLAGS name them: what a command does to the key.
pub mod key_flags {
    /// Reads and writes the key (`RW`).
    pub const RW: u16 = 1;
    /// Only reads it (`RO`).
    pub const RO: u16 = 1 << 1;
    /// Overwrites it without reading it (`OW`).
    pub const OW: u16 = 1 << 2;
    /// Deletes it (`RM`).
    pub const RM: u16 = 1 << 3;
    /// Returns or copies user data from it (`access`).
    pub const ACCESS: u16 = 1 << 4;
    /// Updates its data in place (`update`).
    pub const UPDATE: u16 = 1 << 5;
    /// Only adds data to it (`insert`).
    pub const INSERT: u16 = 1 << 6;
    /// Only removes data from it (`delete`).
    pub const DELETE: u16 = 1 << 7;
    /// Touches no user data (`not_key`).
    pub const NOT_KEY: u16 = 1 << 8;
    /// The key may be absent from the arguments (`incomplete`).
    pub const INCOMPLETE: u16 = 1 << 9;
    /// The flags vary with the arguments (`variable_flags`).
    pub const VARIABLE_FLAGS: u16 = 1 << 10;

    /// Names in the order Redis prints them.
    pub const NAMES: &[(u16, &str)] = &[
        (RW, "RW"),
        (RO, "RO"),
        (OW, "OW"),
        (RM, "RM"),
        (ACCESS, "access"),
        (UPDATE, "update"),
        (INSERT, "insert"),
        (DELETE, "delete"),
        (NOT_KEY, "not_key"),
        (INCOMPLETE, "incomplete"),
        (VARIABLE_FLAGS, "variable_flags"),
    ];
}

impl CommandSpec {
    /// Whether `argc` arguments (name included) fit the arity.
    pub fn arity_ok(&self, argc: usize) -> bool {
        let argc = argc as i64;
        let arity = i64::from(self.arity);
        if arity >= 0 {
            argc == arity
        } else {
            argc >= -arity
        }
    }

    /// The same spec with extra ACL categories.
    pub const fn with_acl(mut self, acl: u64) -> CommandSpec {
        self.acl |= acl;
        self
    }

    /// The same spec as a container of `subcommands`.
    pub const fn with_subcommands(mut self, subcommands: &'static [CommandSpec]) -> CommandSpec {
        self.subcommands = subcommands;
        self
    }

    /// The same spec with explicit key-specification flags
    /// ([`CommandSpec::key_flags`]).
    pub const fn with_key_flags(mut self, flags: &'static [u16]) -> CommandSpec {
        self.key_flags = flags;
        self
    }

    /// The same spec with COMMAND DOCS's `since` and `complexity`.
    pub const fn with_docs(mut self, since: &'static str, complexity: &'static str) -> CommandSpec {
        self.since = since;
        self.complexity = complexity;
        self
    }

    /// The same spec with movable keys found by `find`.
    pub const fn with_key_finder(mut self, find: KeyFinder) -> CommandSpec {
        self.keys = Keys::Find(find);
        self
    }

    /// The same spec with movable keys found by `find` and the legacy
    /// `(first, last, step)` COMMAND INFO reports for them
    /// ([`CommandSpec::movable_range`]); `find` alone says where the keys
    /// are.
    pub const fn with_key_finder_and_range(
        mut self,
        find: KeyFinder,
        range: (i32, i32, i32),
    ) -> CommandSpec {
        self.keys = Keys::Find(find);
        self.movable_range = range;
        self
    }

    /// The same spec with COMMAND INFO's description of each movable key
    /// specification ([`CommandSpec::key_searches`]).
    pub const fn with_key_searches(mut self, searches: &'static [KeySearch]) -> CommandSpec {
        self.key_searches = searches;
        self
    }

    /// The same spec with COMMAND INFO's tips ([`CommandSpec::tips`]).
    pub const fn with_tips(mut self, tips: &'static [&'static str]) -> CommandSpec {
        self.tips = tips;
        self
    }

    /// The same spec with channel arguments ([`CommandSpec::channels`]).
    pub const fn with_channels(mut self, channels: Channels) -> CommandSpec {
        self.channels = channels;
        self
    }

    /// The `(first, last, step)` COMMAND INFO reports.
    pub fn legacy_keys(&self) -> (i32, i32, i32) {
        match self.keys {
            Keys::Find(_) => self.movable_range,
            keys => keys.legacy(),
        }
    }

    /// Whether it has flag bits `bits` (any of them).
    pub fn has(&self, bits: u32) -> bool {
        self.flags & bits != 0
    }

    /// Finds subcommand `name` (any case) of a container.
    pub fn subcommand(&self, name: &[u8]) -> Option<&'static CommandSpec> {
        self.subcommands
            .iter()
            .find(|s| s.name.as_bytes().eq_ignore_ascii_case(name))
    }
}

/// Write, may grow memory.
pub(super) const W: u32 = WRITE | DENYOOM;
/// Write, may grow memory, fast.
pub(super) const WF: u32 = WRITE | DENYOOM | FAST;
/// Write that frees memory, fast.
pub(super) const D: u32 = WRITE | FAST;
/// Read.
pub(super) const R: u32 = READONLY;
/// Read, fast.
pub(super) const RF: u32 = READONLY | FAST;
/// Neither read nor write, fast.
pub(super) const C: u32 = FAST;

/// Builds a [`CommandSpec`]: name, arity, flags, `(first, last, step)`,
/// group, summary, handler.
macro_rules! cmd {
    ($name:literal, $arity:expr, $flags:expr, $keys:expr, $group:literal, $summary:literal, $handler:path) => {
        $crate::commands::table::CommandSpec {
            name: $name,
            arity: $arity,
            flags: $flags,
            acl: 0,
            keys: $crate::commands::table::Keys::range($keys),
            group: $group,
            summary: $summary,
            handler: $handler,
            subcommands: &[],
            key_flags: &[],
            since: "",
            complexity: "",
            movable_range: (0, 0, 0),
            key_searches: &[],
            tips: &[],
            channels: $crate::commands::table::Channels::None,
        }
    };
}
pub(super) use cmd;

/// One key, the first argument.
pub(super) const K1: (i32, i32, i32) = (1, 1, 1);
/// Every argument after the name is a key.
pub(super) const KALL: (i32, i32, i32) = (1, -1, 1);
/// No keys.
pub(super) const K0: (i32, i32, i32) = (0, 0, 0);

/// A movable key specification: `numkeys` at index `at`, the keys after it.
pub(super) const fn keynum_at(at: i32) -> KeySearch {
    (BeginSearch::Index(at), FindKeys::Keynum(0, 1, 1))
}

/// A movable key specification: the one key at index `at`.
pub(super) const fn one_at(at: i32) -> KeySearch {
    (BeginSearch::Index(at), FindKeys::Range(0, 1, 0))
}

/// A movable key specification: the key after `keyword`, searched from
/// index `from`.
pub(super) const fn after_keyword(keyword: &'static str, from: i32) -> KeySearch {
    (
        BeginSearch::Keyword(keyword, from),
        FindKeys::Range(0, 1, 0),
    )
}

/// A movable key specification COMMAND INFO can only call `unknown`.
pub(super) const UNKNOWN_KEYS: KeySearch = (BeginSearch::Unknown, FindKeys::Unknown);

/// Every family's table, in COMMAND's order.
const FAMILIES: &[&[CommandSpec]] = &[
    strings::COMMANDS,
    bits::COMMANDS,
    keys::COMMANDS,
    sort::COMMANDS,
    scripting::COMMANDS,
    functions::COMMANDS,
    dump::COMMANDS,
    migrate::COMMANDS,
    hashes::COMMANDS,
    lists::COMMANDS,
    blocking::COMMANDS,
    sets::COMMANDS,
    zsets::COMMANDS,
    hll::COMMANDS,
    geo::COMMANDS,
    streams::COMMANDS,
    transactions::COMMANDS,
    connection::COMMANDS,
    client::COMMANDS,
    cluster::COMMANDS,
    failover::COMMANDS,
    lolwut::COMMANDS,
    module::COMMANDS,
    server::COMMANDS,
    replication::COMMANDS,
    pubsub::COMMANDS,
    introspect::COMMANDS,
    object::COMMANDS,
    debug::COMMANDS,
    diagnostics::COMMANDS,
    memory::COMMANDS,
    persistence::COMMANDS,
    config::COMMANDS,
    acl_cmd::COMMANDS,
];

/// Every top-level command Ferrite implements.
pub fn all() -> impl Iterator<Item = &'static CommandSpec> {
    FAMILIES.iter().flat_map(|f| f.iter())
}

/// How many top-level commands there are.
pub fn count() -> usize {
    FAMILIES.iter().map(|f| f.len()).sum()
}

/// Longest command name, in bytes.
const NAME_LEN_MAX: usize = 32;

fn index() -> &'static HashMap<&'static str, &'static CommandSpec> {
    static INDEX: OnceLock<HashMap<&'static str, &'static CommandSpec>> = OnceLock::new();
    INDEX.get_or_init(|| all().map(|c| (c.name, c)).collect())
}

/// Finds a command by name, in any case.
pub fn lookup(name: &[u8]) -> Option<&'static CommandSpec> {
    if name.len() > NAME_LEN_MAX {
        return None;
    }
    let mut lower = [0u8; NAME_LEN_MAX];
    for (d, s) in lower.iter_mut().zip(name) {
        *d = s.to_ascii_lowercase();
    }
    let lower = std::str::from_utf8(&lower[..name.len()]).ok()?;
    index().get(lower).copied()
}
