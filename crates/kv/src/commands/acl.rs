//! ACL categories, as bits. A command's categories are those its flags and
//! group imply ([`of`]) plus [`CommandSpec::acl`].

use super::flags;
use super::CommandSpec;

/// Every category with its bit, as ACL CAT lists them.
pub const NAMES: &[&str] = &[
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
];

/// The bit of category `name` (without `@`).
pub const fn bit(name: &str) -> u64 {
    let mut i = 0;
    while i < NAMES.len() {
        if const_eq(NAMES[i], name) {
            return 1 << i;
        }
        i += 1;
    }
    panic!("unknown ACL category")
}

const fn const_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// `@keyspace`.
pub const KEYSPACE: u64 = bit("keyspace");
/// `@dangerous`.
pub const DANGEROUS: u64 = bit("dangerous");
/// `@slow`.
pub const SLOW: u64 = bit("slow");
/// `@connection`.
pub const CONNECTION: u64 = bit("connection");

/// Every category of `spec`: implied by its flags (as Redis implies
/// them: write, read, admin and dangerous, pubsub, fast or slow,
/// blocking), by its group, and listed in the table.
pub fn of(spec: &CommandSpec) -> u64 {
    let mut bits = spec.acl;
    let implied = [
        (flags::WRITE, "write"),
        // Read-only scripts (EVAL_RO) are not `@read`, as in Redis.
        (
            flags::READONLY,
            if spec.group == "scripting" {
                "scripting"
            } else {
                "read"
            },
        ),
        (flags::ADMIN, "admin"),
        (flags::ADMIN, "dangerous"),
        (flags::PUBSUB, "pubsub"),
        (flags::FAST, "fast"),
        (flags::BLOCKING, "blocking"),
    ];
    for (flag, name) in implied {
        if spec.flags & flag != 0 {
            bits |= bit(name);
        }
    }
    if spec.flags & flags::FAST == 0 {
        bits |= SLOW;
    }
    let group = match spec.group {
        "string" => Some("string"),
        "list" => Some("list"),
        "hash" => Some("hash"),
        "set" => Some("set"),
        "sorted-set" => Some("sortedset"),
        "bitmap" => Some("bitmap"),
        "hyperloglog" => Some("hyperloglog"),
        "geo" => Some("geo"),
        "stream" => Some("stream"),
        // Pub/Sub commands are `@pubsub` through their flag only (PUBSUB
        // HELP is not), as in Redis's table.
        "transactions" => Some("transaction"),
        "connection" => Some("connection"),
        "scripting" => Some("scripting"),
        _ => None,
    };
    // A container (PUBSUB, XINFO...) has only `@slow`, as in Redis.
    if let Some(name) = group.filter(|_| spec.subcommands.is_empty()) {
        bits |= bit(name);
    }
    bits
}

/// The names of the categories in `bits`.
pub fn names(bits: u64) -> impl Iterator<Item = &'static str> {
    NAMES
        .iter()
        .enumerate()
        .filter(move |(i, _)| bits & (1 << i) != 0)
        .map(|(_, n)| *n)
}
