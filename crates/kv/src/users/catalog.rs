//! Every command and subcommand with the number ACL bitmaps index it by,
//! built once from the command table. A container's subcommands follow it,
//! so a walk in id order visits a container before its subcommands, as
//! Redis's rule describer expects.

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::commands::{acl, all_commands, CommandSpec};

/// Words in a command bitmap: room for 1024 commands and subcommands.
pub const WORDS: usize = 16;

/// A set of command ids.
pub type Bits = [u64; WORDS];

/// One command or subcommand.
#[derive(Debug)]
pub struct Entry {
    /// `get`, or `config|get` for a subcommand.
    pub full: String,
    /// Its ACL categories ([`acl`] bits).
    pub categories: u64,
    /// The id of its container, for a subcommand.
    pub parent: Option<usize>,
    /// The ids of its subcommands, for a container.
    pub subs: std::ops::Range<usize>,
}

/// The numbered commands.
#[derive(Debug)]
pub struct Catalog {
    /// By id.
    pub entries: Vec<Entry>,
    by_name: HashMap<(&'static str, &'static str), usize>,
}

/// The catalog of this build's command table.
pub fn get() -> &'static Catalog {
    static CATALOG: OnceLock<Catalog> = OnceLock::new();
    CATALOG.get_or_init(build)
}

fn build() -> Catalog {
    let mut entries = Vec::new();
    let mut by_name = HashMap::new();
    for top in all_commands() {
        let id = entries.len();
        let subs = id + 1..id + 1 + top.subcommands.len();
        by_name.insert((top.name, ""), id);
        entries.push(Entry {
            full: top.name.to_string(),
            categories: acl::of(top),
            parent: None,
            subs,
        });
        for sub in top.subcommands {
            by_name.insert((top.name, sub.name), entries.len());
            entries.push(Entry {
                full: format!("{}|{}", top.name, sub.name),
                categories: acl::of(sub),
                parent: Some(id),
                subs: 0..0,
            });
        }
    }
    // A table past the bitmap's room would leave commands no one may
    // run; the test suite builds the catalog, so this fails there first.
    assert!(entries.len() <= WORDS * 64, "ACL command bitmap too small");
    Catalog { entries, by_name }
}

impl Catalog {
    /// The id of `spec` (of `container`, for a subcommand).
    pub fn id_of(&self, container: Option<&CommandSpec>, spec: &CommandSpec) -> Option<usize> {
        let key = match container {
            Some(c) => (c.name, spec.name),
            None => (spec.name, ""),
        };
        self.by_name.get(&key).copied()
    }

    /// Finds a command by full name in any case: `get`, `config|get`;
    /// `None` for an unknown one or a `|` after a command that has no
    /// subcommands (as Redis's strict lookup).
    pub fn find(&self, name: &[u8]) -> Option<usize> {
        let mut parts = name.split(|&b| b == b'|');
        let top = crate::commands::lookup(parts.next()?)?;
        match (parts.next(), parts.next()) {
            (None, _) => self.id_of(None, top),
            (Some(sub), None) => {
                let sub = top.subcommand(sub)?;
                self.id_of(Some(top), sub)
            }
            _ => None,
        }
    }

    /// How many ids there are.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are none (never, with a command table).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Whether bit `id` is set.
pub fn bit(bits: &Bits, id: usize) -> bool {
    bits.get(id / 64).is_some_and(|w| w & (1 << (id % 64)) != 0)
}

/// Sets or clears bit `id`.
pub fn set_bit(bits: &mut Bits, id: usize, on: bool) {
    if let Some(w) = bits.get_mut(id / 64) {
        if on {
            *w |= 1 << (id % 64);
        } else {
            *w &= !(1 << (id % 64));
        }
    }
}

/// The bit of category `name` (any case, without `@`), or `None`.
pub fn category(name: &[u8]) -> Option<u64> {
    acl::NAMES
        .iter()
        .position(|n| n.as_bytes().eq_ignore_ascii_case(name))
        .map(|i| 1u64 << i)
}
