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
use super::{config, connection, hashes, keys, lists, server, sets, strings, transactions, zsets};
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

    /// The same spec with movable keys found by `find`.
    pub const fn with_key_finder(mut self, find: KeyFinder) -> CommandSpec {
        self.keys = Keys::Find(find);
        self
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

/// Every family's table, in COMMAND's order.
const FAMILIES: &[&[CommandSpec]] = &[
    strings::COMMANDS,
    keys::COMMANDS,
    hashes::COMMANDS,
    lists::COMMANDS,
    sets::COMMANDS,
    zsets::COMMANDS,
    transactions::COMMANDS,
    connection::COMMANDS,
    server::COMMANDS,
    config::COMMANDS,
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
