//! The dataset as an RDB file (version 10, Redis 7.0's), for SYNC: what a
//! replica loads before the stream of writes. Values are written as DUMP
//! writes them (`crate::rdb`: the plain RDB types every Redis 7.0 still
//! loads), keys keep their absolute expiry, and the checksum is left zero,
//! which Redis reads as "not computed".

use crate::keyspace::Keyspace;
use crate::rdb::{object_type_of, write_len as push_len, write_string, write_value};

/// The file's magic and version.
const MAGIC: &[u8] = b"REDIS0010";
const OPCODE_EXPIRE_MS: u8 = 0xfc;
const OPCODE_SELECT_DB: u8 = 0xfe;
const OPCODE_EOF: u8 = 0xff;

/// The whole dataset as an RDB file; keys already expired at `now_ms` are
/// left out (a replica would drop them on load).
#[cfg(test)]
pub fn encode(keyspace: &Keyspace, now_ms: i64) -> Vec<u8> {
    let mut out = Vec::new();
    encode_into(keyspace, now_ms, &mut out);
    out
}

/// Appends the RDB file of `keyspace` to `out` (a full sync writes it
/// straight into the replica's reply buffer, so the payload exists once).
pub fn encode_into(keyspace: &Keyspace, now_ms: i64, out: &mut Vec<u8>) {
    out.extend_from_slice(MAGIC);
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
                    push_len(out, db as u64);
                    selected = true;
                }
                if let Some(at) = expiry {
                    out.push(OPCODE_EXPIRE_MS);
                    out.extend_from_slice(&at.to_le_bytes());
                }
                out.push(object_type_of(value));
                write_string(out, key);
                write_value(out, value);
            }
        }
    }
    out.push(OPCODE_EOF);
    out.extend_from_slice(&[0; 8]);
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
