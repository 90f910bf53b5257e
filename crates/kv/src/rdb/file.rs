//! A whole RDB file, as a master sends it to a replica: the `REDIS` magic
//! and a 4-digit version, then a sequence of opcodes (auxiliary fields,
//! database selection, size hints, expiry and eviction metadata, function
//! libraries) and keys, each key an object type, the key string and the
//! value in the type's encoding ([`super::read_value`], shared with
//! RESTORE), then an EOF opcode and an 8-byte CRC-64 (zero: not computed).
//!
//! The decoder hands each entry to a callback rather than building a
//! keyspace itself, so the caller decides where the data goes. Like the
//! DUMP reader it trusts nothing: a bad file is an error, never a panic.

use super::{crc64, Reader, RDB_VERSION};
use crate::types::Value;

const OPCODE_FUNCTION2: u8 = 0xf5;
const OPCODE_FUNCTION_OLD: u8 = 0xf6;
const OPCODE_MODULE_AUX: u8 = 0xf7;
const OPCODE_IDLE: u8 = 0xf8;
const OPCODE_FREQ: u8 = 0xf9;
const OPCODE_AUX: u8 = 0xfa;
const OPCODE_RESIZE_DB: u8 = 0xfb;
const OPCODE_EXPIRE_MS: u8 = 0xfc;
const OPCODE_EXPIRE_S: u8 = 0xfd;
const OPCODE_SELECT_DB: u8 = 0xfe;
const OPCODE_EOF: u8 = 0xff;

/// One thing an RDB file holds.
#[derive(Debug)]
pub enum Entry {
    /// A key of database `db`, with its absolute expiry in Unix ms.
    Key {
        db: usize,
        key: Vec<u8>,
        value: Value,
        expire_ms: Option<i64>,
    },
    /// A function library's source code (what FUNCTION LOAD takes).
    Library(Vec<u8>),
}

/// Decodes `bytes`, a whole RDB file, calling `each` for every entry in
/// file order. Databases at or past `databases` are an error, as in Redis.
pub fn decode(bytes: &[u8], databases: usize, mut each: impl FnMut(Entry)) -> Result<(), String> {
    let version = header_version(bytes)?;
    let mut r = Reader { data: bytes, at: 9 };
    let mut db = 0usize;
    let mut expire_ms: Option<i64> = None;
    loop {
        let at = r.at;
        let opcode = r.byte().ok_or("the file ends before its EOF opcode")?;
        match opcode {
            OPCODE_EOF => return check_footer(bytes, at, version),
            OPCODE_SELECT_DB => {
                let n = r.plain_len().ok_or("bad SELECTDB length")?;
                if n >= databases {
                    return Err(format!(
                        "the file selects database {n}, past the {databases} configured"
                    ));
                }
                db = n;
            }
            OPCODE_RESIZE_DB => {
                r.plain_len().ok_or("bad RESIZEDB length")?;
                r.plain_len().ok_or("bad RESIZEDB length")?;
            }
            OPCODE_AUX => {
                r.string().ok_or("bad auxiliary field name")?;
                r.string().ok_or("bad auxiliary field value")?;
            }
            OPCODE_EXPIRE_MS => {
                let raw = r.take(8).ok_or("truncated expiry")?;
                let mut b = [0u8; 8];
                b.copy_from_slice(raw);
                expire_ms = Some(i64::from_le_bytes(b));
            }
            OPCODE_EXPIRE_S => {
                let raw = r.take(4).ok_or("truncated expiry")?;
                let secs = i32::from_le_bytes([raw[0], raw[1], raw[2], raw[3]]);
                expire_ms = Some(i64::from(secs) * 1000);
            }
            // Eviction metadata: Ferrite keeps its own access clock.
            OPCODE_IDLE => {
                r.plain_len().ok_or("bad IDLE value")?;
            }
            OPCODE_FREQ => {
                r.byte().ok_or("truncated FREQ value")?;
            }
            OPCODE_FUNCTION2 => {
                let code = r.string().ok_or("bad function library")?;
                each(Entry::Library(code));
            }
            OPCODE_FUNCTION_OLD => {
                return Err("pre-release function format (Redis 7.0 RC) is not supported".into())
            }
            OPCODE_MODULE_AUX => return Err("module data is not supported".into()),
            kind => {
                let key = r.string().ok_or("bad key")?;
                let value = super::read_value(&mut r, kind).ok_or_else(|| {
                    format!(
                        "key {:?}: object type {kind} is not supported or its value is malformed",
                        String::from_utf8_lossy(&key)
                    )
                })?;
                each(Entry::Key {
                    db,
                    key,
                    value,
                    expire_ms: expire_ms.take(),
                });
            }
        }
    }
}

/// The version in the `REDISnnnn` header, refusing newer than Ferrite reads.
fn header_version(bytes: &[u8]) -> Result<u16, String> {
    let head = bytes.get(..9).ok_or("shorter than an RDB header")?;
    if &head[..5] != b"REDIS" {
        return Err("not an RDB file (no REDIS magic)".into());
    }
    let version: u16 = std::str::from_utf8(&head[5..])
        .ok()
        .and_then(|t| t.parse().ok())
        .ok_or("bad RDB version digits")?;
    if version == 0 || version > RDB_VERSION {
        return Err(format!("RDB version {version} is not supported"));
    }
    Ok(version)
}

/// Checks the 8-byte checksum after the EOF opcode at `eof_at` (version 5
/// on); zero means the writer did not compute one.
fn check_footer(bytes: &[u8], eof_at: usize, version: u16) -> Result<(), String> {
    if version < 5 {
        return Ok(());
    }
    let end = eof_at + 1;
    let raw = bytes.get(end..end + 8).ok_or("truncated checksum")?;
    let mut b = [0u8; 8];
    b.copy_from_slice(raw);
    let stored = u64::from_le_bytes(b);
    let computed = crc64(0, &bytes[..end]);
    if stored != 0 && stored != computed {
        // Redis words this failure "RDB CRC error"; its suite looks for
        // those words in the log of a server that refuses the file.
        return Err(format!(
            "RDB CRC error: wrong RDB checksum, expected {computed:x} but the file has {stored:x}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A key's database, name and expiry.
    type Seen = (usize, Vec<u8>, Option<i64>);

    fn keys(bytes: &[u8]) -> Result<Vec<Seen>, String> {
        let mut out = Vec::new();
        decode(bytes, 16, |e| {
            if let Entry::Key {
                db, key, expire_ms, ..
            } = e
            {
                out.push((db, key, expire_ms));
            }
        })?;
        Ok(out)
    }

    #[test]
    fn reads_aux_fields_databases_and_expiries() {
        let mut f = b"REDIS0010".to_vec();
        f.extend_from_slice(b"\xfa\x09redis-ver\x067.0.15");
        f.extend_from_slice(b"\xfe\x03\xfb\x01\x01");
        f.extend_from_slice(b"\xfc");
        f.extend_from_slice(&1_700_000_000_000i64.to_le_bytes());
        f.extend_from_slice(b"\x00\x01k\x01v");
        f.extend_from_slice(b"\xf8\x05\x00\x02k2\xc0\x07");
        f.push(0xff);
        let crc = crc64(0, &f);
        f.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(
            keys(&f).unwrap(),
            vec![
                (3, b"k".to_vec(), Some(1_700_000_000_000)),
                (3, b"k2".to_vec(), None)
            ]
        );
        let last = f.len() - 1;
        f[last] ^= 1;
        assert!(keys(&f)
            .unwrap_err()
            .starts_with("RDB CRC error: wrong RDB checksum"));
    }

    #[test]
    fn refuses_truncation_and_bad_databases() {
        assert!(keys(b"REDIS0010\x00\x01k").is_err());
        assert!(keys(b"REDIS0011\xff").is_err());
        assert!(keys(b"REDIS0010\xfe\x20\xff\0\0\0\0\0\0\0\0").is_err());
        assert_eq!(keys(b"REDIS0010\xff\0\0\0\0\0\0\0\0").unwrap(), vec![]);
    }
}
