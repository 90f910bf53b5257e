//! The dataset as an RDB file (version 10, Redis 7.0's), for SYNC: what a
//! replica loads before the stream of writes. Values use the plain RDB
//! types every Redis 7.0 still loads (string, list, set, hash, sorted set
//! with binary scores), keys keep their absolute expiry, and the checksum
//! is left zero, which Redis reads as "not computed".

use crate::keyspace::Keyspace;
use crate::types::Value;

/// The file's magic and version.
const MAGIC: &[u8] = b"REDIS0010";
const OPCODE_EXPIRE_MS: u8 = 0xfc;
const OPCODE_SELECT_DB: u8 = 0xfe;
const OPCODE_EOF: u8 = 0xff;
const TYPE_STRING: u8 = 0;
const TYPE_LIST: u8 = 1;
const TYPE_SET: u8 = 2;
const TYPE_HASH: u8 = 4;
const TYPE_ZSET_BINARY: u8 = 5;

/// Appends an RDB length: 6, 14, 32 or 64 bits, big-endian.
fn push_len(out: &mut Vec<u8>, len: u64) {
    if len < 1 << 6 {
        out.push(len as u8);
    } else if len < 1 << 14 {
        out.push(0x40 | (len >> 8) as u8);
        out.push(len as u8);
    } else if len <= u64::from(u32::MAX) {
        out.push(0x80);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&len.to_be_bytes());
    }
}

/// Appends a length-prefixed string.
fn push_str(out: &mut Vec<u8>, bytes: &[u8]) {
    push_len(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// Appends `key` = `value` with its type byte.
fn push_entry(out: &mut Vec<u8>, key: &[u8], value: &Value) {
    let kind = match value {
        Value::Str(_) => TYPE_STRING,
        Value::List(_) => TYPE_LIST,
        Value::Set(_) => TYPE_SET,
        Value::Hash(_) => TYPE_HASH,
        Value::ZSet(_) => TYPE_ZSET_BINARY,
    };
    out.push(kind);
    push_str(out, key);
    match value {
        Value::Str(s) => push_str(out, s),
        Value::List(list) => {
            push_len(out, list.len() as u64);
            list.iter().for_each(|item| push_str(out, item));
        }
        Value::Set(set) => {
            push_len(out, set.len() as u64);
            set.iter().for_each(|member| push_str(out, member));
        }
        Value::Hash(hash) => {
            push_len(out, hash.len() as u64);
            for (field, v) in hash.iter() {
                push_str(out, field);
                push_str(out, v);
            }
        }
        Value::ZSet(zset) => {
            push_len(out, zset.len() as u64);
            for (member, score) in zset.iter() {
                push_str(out, member);
                out.extend_from_slice(&score.to_le_bytes());
            }
        }
    }
}

/// The whole dataset as an RDB file; keys already expired at `now_ms` are
/// left out (a replica would drop them on load).
pub fn encode(keyspace: &Keyspace, now_ms: i64) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    for db in 0..keyspace.databases() {
        let mut selected = false;
        for segment in keyspace.db(db).segments() {
            for (key, value) in segment.map.iter() {
                let expiry = segment.expires.get(key).copied();
                if expiry.is_some_and(|at| at <= now_ms) {
                    continue;
                }
                if !selected {
                    out.push(OPCODE_SELECT_DB);
                    push_len(&mut out, db as u64);
                    selected = true;
                }
                if let Some(at) = expiry {
                    out.push(OPCODE_EXPIRE_MS);
                    out.extend_from_slice(&at.to_le_bytes());
                }
                push_entry(&mut out, key, value);
            }
        }
    }
    out.push(OPCODE_EOF);
    out.extend_from_slice(&[0; 8]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_use_the_shortest_form() {
        let mut out = Vec::new();
        for len in [5, 300, 70_000, 1 << 33] {
            push_len(&mut out, len);
        }
        assert_eq!(
            out,
            [
                &[5u8][..],
                &[0x41, 0x2c],
                &[0x80, 0, 1, 0x11, 0x70],
                &[0x81, 0, 0, 0, 2, 0, 0, 0, 0],
            ]
            .concat()
        );
    }

    #[test]
    fn an_empty_dataset_is_magic_and_eof() {
        let keyspace = Keyspace::new(16);
        assert_eq!(encode(&keyspace, 0), b"REDIS0010\xff\0\0\0\0\0\0\0\0");
    }
}
