//! Keyspace notification classes (`notify-keyspace-events`) and the
//! events the keyspace itself raises (`expired`, `new`), queued until the
//! Pub/Sub layer publishes them.

use crate::types::Bytes;

/// `K`: publish on `__keyspace@<db>__:<key>`.
pub const KEYSPACE: u32 = 1;
/// `E`: publish on `__keyevent@<db>__:<event>`.
pub const KEYEVENT: u32 = 1 << 1;
/// `g`: generic commands (DEL, EXPIRE, RENAME...).
pub const GENERIC: u32 = 1 << 2;
/// `$`: string commands.
pub const STRING: u32 = 1 << 3;
/// `l`: list commands.
pub const LIST: u32 = 1 << 4;
/// `s`: set commands.
pub const SET: u32 = 1 << 5;
/// `h`: hash commands.
pub const HASH: u32 = 1 << 6;
/// `z`: sorted set commands.
pub const ZSET: u32 = 1 << 7;
/// `x`: keys that expired.
pub const EXPIRED: u32 = 1 << 8;
/// `e`: keys evicted for `maxmemory`.
pub const EVICTED: u32 = 1 << 9;
/// `t`: stream commands.
pub const STREAM: u32 = 1 << 10;
/// `m`: key misses (not part of `A`).
pub const KEY_MISS: u32 = 1 << 11;
/// `d`: module events.
pub const MODULE: u32 = 1 << 13;
/// `n`: new keys (not part of `A`).
pub const NEW: u32 = 1 << 14;
/// `A`: every class but `m` and `n`.
pub const ALL: u32 =
    GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;

/// The letters of the classes `A` is made of, in the order CONFIG GET
/// writes them.
const CLASS_LETTERS: [(u32, char); 11] = [
    (GENERIC, 'g'),
    (STRING, '$'),
    (LIST, 'l'),
    (SET, 's'),
    (HASH, 'h'),
    (ZSET, 'z'),
    (EXPIRED, 'x'),
    (EVICTED, 'e'),
    (STREAM, 't'),
    (MODULE, 'd'),
    (NEW, 'n'),
];

/// Parses a `notify-keyspace-events` value; `None` for a letter that
/// names no class.
pub fn parse(text: &str) -> Option<u32> {
    let mut flags = 0;
    for c in text.chars() {
        flags |= match c {
            'A' => ALL,
            'K' => KEYSPACE,
            'E' => KEYEVENT,
            'm' => KEY_MISS,
            _ => CLASS_LETTERS.iter().find(|(_, l)| *l == c)?.0,
        };
    }
    Some(flags)
}

/// The value CONFIG GET shows: `A` when every class of it is on, else
/// each class's letter; then `K`, `E`, `m`.
pub fn format(flags: u32) -> String {
    let mut text = String::new();
    // As Redis: with `A`, a set `n` is not shown.
    if flags & ALL == ALL {
        text.push('A');
    } else {
        for (bit, letter) in CLASS_LETTERS {
            if flags & bit != 0 {
                text.push(letter);
            }
        }
    }
    for (bit, letter) in [(KEYSPACE, 'K'), (KEYEVENT, 'E'), (KEY_MISS, 'm')] {
        if flags & bit != 0 {
            text.push(letter);
        }
    }
    text
}

/// One event waiting to be published.
#[derive(Clone, Debug)]
pub struct KeyEvent {
    /// Its class (one of the constants above).
    pub class: u32,
    /// Its name (`set`, `expired`...).
    pub event: &'static str,
    /// The database of the key.
    pub db: usize,
    /// The key.
    pub key: Bytes,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_get_normalises_as_redis_does() {
        let cases = [
            ("gKE", "gKE"),
            ("$lshzxeKE", "$lshzxeKE"),
            ("KA", "AK"),
            ("EA", "AE"),
            ("", ""),
            ("AnmKE", "AKEm"),
        ];
        for (set, get) in cases {
            assert_eq!(format(parse(set).unwrap()), get, "{set}");
        }
        assert_eq!(parse("Kw"), None);
    }
}
