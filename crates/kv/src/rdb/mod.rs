//! Redis's serialisation of one value, as DUMP produces and RESTORE reads
//! it: the RDB object type byte and the value's RDB encoding, then the
//! 2-byte RDB version (little-endian) and a CRC-64 of everything before it
//! (little-endian, [`crc64`]).
//!
//! DUMP writes the plain encodings every Redis since 2.x reads (string,
//! list, set, hash, and sorted sets with binary scores). RESTORE reads
//! everything Redis 7.0 writes and what older versions wrote: the compact
//! forms (listpack, ziplist, zipmap, intset, quicklists of either) and
//! integer- or LZF-encoded strings. Input is never trusted: every length
//! is checked against the bytes that remain, so a bad payload is an error,
//! never a panic or a huge allocation.

mod crc64;
pub mod dump;
pub mod file;
mod lzf;
mod packed;
pub mod persist;
pub mod produce;
mod stream;

use std::collections::{HashMap, HashSet, VecDeque};

use crate::types::{Bytes, Shared, Str, Value, ZSet};

pub use crc64::crc64;

/// The RDB version Redis 7.0 writes (and the newest it reads).
pub const RDB_VERSION: u16 = 10;

/// The object types of the RDB format that Ferrite reads.
mod object_type {
    pub const STRING: u8 = 0;
    pub const LIST: u8 = 1;
    pub const SET: u8 = 2;
    pub const ZSET: u8 = 3;
    pub const HASH: u8 = 4;
    pub const ZSET_2: u8 = 5;
    pub const HASH_ZIPMAP: u8 = 9;
    pub const LIST_ZIPLIST: u8 = 10;
    pub const SET_INTSET: u8 = 11;
    pub const ZSET_ZIPLIST: u8 = 12;
    pub const HASH_ZIPLIST: u8 = 13;
    pub const LIST_QUICKLIST: u8 = 14;
    pub const HASH_LISTPACK: u8 = 16;
    pub const ZSET_LISTPACK: u8 = 17;
    pub const LIST_QUICKLIST_2: u8 = 18;
    pub const STREAM_LISTPACKS: u8 = 15;
    pub const STREAM_LISTPACKS_2: u8 = 19;
}

/// Why a payload cannot be restored, as RESTORE words it.
#[derive(Debug, PartialEq, Eq)]
pub enum RestoreError {
    /// Too short, a newer RDB version, or the checksum does not match.
    VersionOrChecksum,
    /// The value itself is malformed, empty or of an unknown type.
    BadFormat,
}

/// The RDB object type `value` is written as (the plain encodings every
/// Redis reads; sorted sets with binary scores).
pub(crate) fn object_type_of(value: &Value) -> u8 {
    match value {
        Value::Str(_) => object_type::STRING,
        Value::List(_) => object_type::LIST,
        Value::Set(_) => object_type::SET,
        Value::Hash(_) => object_type::HASH,
        Value::ZSet(_) => object_type::ZSET_2,
        Value::Stream(_) => object_type::STREAM_LISTPACKS_2,
    }
}

/// Appends `value`'s RDB encoding, without its type byte: what follows
/// the type in a DUMP payload, and the key in an RDB file.
pub(crate) fn write_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Str(s) => write_string(out, s),
        Value::List(l) => {
            write_len(out, l.len() as u64);
            l.iter().for_each(|e| write_string(out, e));
        }
        Value::Set(s) => {
            write_len(out, s.len() as u64);
            s.iter().for_each(|e| write_string(out, e));
        }
        Value::Hash(h) => {
            write_len(out, h.len() as u64);
            for (field, value) in h.iter() {
                write_string(out, field);
                write_string(out, value);
            }
        }
        Value::ZSet(z) => {
            write_len(out, z.len() as u64);
            for (member, score) in z.iter() {
                write_string(out, member);
                out.extend_from_slice(&score.to_le_bytes());
            }
        }
        Value::Stream(s) => stream::write(out, s),
    }
}

/// The payload DUMP replies with for `value`.
pub fn dump(value: &Value) -> Vec<u8> {
    let mut out = vec![object_type_of(value)];
    write_value(&mut out, value);
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64(0, &out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// The value a DUMP payload holds.
pub fn restore(payload: &[u8]) -> Result<Value, RestoreError> {
    restore_checked(payload, true)
}

/// The value a DUMP payload holds; with `check_crc` false the footer's
/// version is still checked but its CRC-64 is not (DEBUG
/// SET-SKIP-CHECKSUM-VALIDATION, which lets tests feed hand-made payloads
/// to the value readers). The readers check every length either way.
pub fn restore_checked(payload: &[u8], check_crc: bool) -> Result<Value, RestoreError> {
    verify(payload, check_crc)?;
    let mut r = Reader {
        data: &payload[..payload.len() - 10],
        at: 0,
    };
    read_object(&mut r).ok_or(RestoreError::BadFormat)
}

/// Checks the footer: an RDB version Redis 7.0 reads, and the checksum
/// unless `check_crc` is false.
fn verify(payload: &[u8], check_crc: bool) -> Result<(), RestoreError> {
    let footer_at = payload
        .len()
        .checked_sub(10)
        .ok_or(RestoreError::VersionOrChecksum)?;
    let footer = &payload[footer_at..];
    let version = u16::from_le_bytes([footer[0], footer[1]]);
    let mut stored = [0u8; 8];
    stored.copy_from_slice(&footer[2..]);
    if version > RDB_VERSION
        || (check_crc && crc64(0, &payload[..footer_at + 2]) != u64::from_le_bytes(stored))
    {
        return Err(RestoreError::VersionOrChecksum);
    }
    Ok(())
}

/// Appends an RDB length: 6 bits, 14 bits, or a marker and 32 or 64 bits
/// big-endian.
pub(crate) fn write_len(out: &mut Vec<u8>, len: u64) {
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

/// Appends a string, as an integer encoding when it is the canonical
/// text of a 32-bit integer (as Redis saves such strings), else raw.
pub(crate) fn write_string(out: &mut Vec<u8>, s: &[u8]) {
    let as_int = (s.len() <= 11)
        .then(|| crate::types::number::parse_i64(s))
        .flatten()
        .filter(|n| n.to_string().as_bytes() == s);
    match as_int {
        Some(n) if i8::try_from(n).is_ok() => {
            out.extend_from_slice(&[0xc0, n as i8 as u8]);
        }
        Some(n) if i16::try_from(n).is_ok() => {
            out.push(0xc1);
            out.extend_from_slice(&(n as i16).to_le_bytes());
        }
        Some(n) if i32::try_from(n).is_ok() => {
            out.push(0xc2);
            out.extend_from_slice(&(n as i32).to_le_bytes());
        }
        _ => {
            write_len(out, s.len() as u64);
            out.extend_from_slice(s);
        }
    }
}

/// A cursor over the value part of a payload.
struct Reader<'a> {
    data: &'a [u8],
    at: usize,
}

/// A length field: a plain length, or a string encoding marker.
enum Len {
    Plain(u64),
    Encoded(u8),
}

impl<'a> Reader<'a> {
    fn remaining(&self) -> usize {
        self.data.len() - self.at
    }

    fn byte(&mut self) -> Option<u8> {
        let b = *self.data.get(self.at)?;
        self.at += 1;
        Some(b)
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.at.checked_add(n)?;
        let slice = self.data.get(self.at..end)?;
        self.at = end;
        Some(slice)
    }

    fn len_field(&mut self) -> Option<Len> {
        let first = self.byte()?;
        Some(match first >> 6 {
            0 => Len::Plain(u64::from(first & 0x3f)),
            1 => Len::Plain((u64::from(first & 0x3f) << 8) | u64::from(self.byte()?)),
            3 => Len::Encoded(first & 0x3f),
            _ if first == 0x80 => {
                let b = self.take(4)?;
                Len::Plain(u64::from(u32::from_be_bytes([b[0], b[1], b[2], b[3]])))
            }
            _ if first == 0x81 => {
                let mut raw = [0u8; 8];
                raw.copy_from_slice(self.take(8)?);
                Len::Plain(u64::from_be_bytes(raw))
            }
            _ => return None,
        })
    }

    /// A length that counts items of at least one byte each: never more
    /// than the bytes left, so no count can make us allocate past them.
    fn count(&mut self) -> Option<usize> {
        match self.len_field()? {
            Len::Plain(n) if n <= self.remaining() as u64 => Some(n as usize),
            _ => None,
        }
    }

    fn string(&mut self) -> Option<Vec<u8>> {
        match self.len_field()? {
            Len::Plain(n) => {
                let n = usize::try_from(n).ok()?;
                Some(self.take(n)?.to_vec())
            }
            Len::Encoded(0) => Some(int_text(i64::from(self.byte()? as i8))),
            Len::Encoded(1) => {
                let b = self.take(2)?;
                Some(int_text(i64::from(i16::from_le_bytes([b[0], b[1]]))))
            }
            Len::Encoded(2) => {
                let b = self.take(4)?;
                Some(int_text(i64::from(i32::from_le_bytes([
                    b[0], b[1], b[2], b[3],
                ]))))
            }
            Len::Encoded(3) => {
                let compressed = self.plain_len()?;
                let original = self.plain_len()?;
                // One LZF reference of 3 bytes yields at most 264 bytes;
                // and no string is longer than Redis's largest.
                if original > compressed.saturating_mul(LZF_EXPANSION_MAX)
                    || original > STRING_LEN_MAX
                {
                    return None;
                }
                lzf::decompress(self.take(compressed)?, original)
            }
            Len::Encoded(_) => None,
        }
    }

    fn plain_len(&mut self) -> Option<usize> {
        match self.len_field()? {
            Len::Plain(n) => usize::try_from(n).ok(),
            Len::Encoded(_) => None,
        }
    }

    /// A sorted set score of the old ZSET type: a length byte (253 NaN,
    /// 254 +inf, 255 -inf) then that much decimal text.
    fn text_score(&mut self) -> Option<f64> {
        match self.byte()? {
            253 => None,
            254 => Some(f64::INFINITY),
            255 => Some(f64::NEG_INFINITY),
            n => score_from_text(self.take(usize::from(n))?),
        }
    }
}

/// The longest string a payload may decompress to (Redis's
/// `proto-max-bulk-len` default, 512 MiB).
const STRING_LEN_MAX: usize = 512 << 20;

/// How much larger than its compressed form an LZF string can be.
const LZF_EXPANSION_MAX: usize = 90;

fn int_text(value: i64) -> Vec<u8> {
    value.to_string().into_bytes()
}

fn score_from_text(text: &[u8]) -> Option<f64> {
    let score = crate::types::number::parse_f64(text)?;
    (!score.is_nan()).then_some(score)
}

fn read_object(r: &mut Reader<'_>) -> Option<Value> {
    let kind = r.byte()?;
    read_value(r, kind)
}

/// The value of RDB object type `kind` (already read): in a DUMP payload
/// it follows the type byte, in an RDB file the key.
fn read_value(r: &mut Reader<'_>, kind: u8) -> Option<Value> {
    use object_type as t;
    let value = match kind {
        t::STRING => Value::Str(r.string()?.into()),
        t::LIST => list((0..r.count()?).map(|_| r.string()).collect::<Option<_>>()?),
        t::SET => set((0..r.count()?).map(|_| r.string()).collect::<Option<_>>()?)?,
        t::ZSET | t::ZSET_2 => {
            let n = r.count()?;
            // The count is checked against the bytes left, not against the
            // memory a pair takes here: the vector grows as pairs parse.
            let mut pairs = Vec::new();
            for _ in 0..n {
                let member = r.string()?;
                let score = if kind == t::ZSET_2 {
                    let mut raw = [0u8; 8];
                    raw.copy_from_slice(r.take(8)?);
                    Some(f64::from_le_bytes(raw)).filter(|s| !s.is_nan())?
                } else {
                    r.text_score()?
                };
                pairs.push((member, score));
            }
            zset(pairs)?
        }
        t::HASH => hash(
            (0..r.count()?.checked_mul(2)?)
                .map(|_| r.string())
                .collect::<Option<_>>()?,
        )?,
        t::LIST_QUICKLIST | t::LIST_QUICKLIST_2 => quicklist(r, kind == t::LIST_QUICKLIST_2)?,
        t::STREAM_LISTPACKS | t::STREAM_LISTPACKS_2 => {
            Value::Stream(Shared::new(stream::read(r, kind == t::STREAM_LISTPACKS_2)?))
        }
        _ => packed_value(kind, &r.string()?)?,
    };
    // Redis never stores an empty collection, and refuses to load one.
    (!value.is_empty_collection()).then_some(value)
}

/// The value of a compact blob (zipmap, ziplist, intset, listpack) of
/// object type `kind`. A blob that fails its checks, duplicates included,
/// is logged as an integrity check failure, the words Redis logs for it
/// and its suite looks for; the caller refuses the payload or file.
fn packed_value(kind: u8, blob: &[u8]) -> Option<Value> {
    use object_type as t;
    let (name, value) = match kind {
        // As Redis's check, a zipmap with no pair is malformed.
        t::HASH_ZIPMAP => (
            "Zipmap",
            packed::zipmap(blob)
                .filter(|items| !items.is_empty())
                .and_then(hash),
        ),
        t::LIST_ZIPLIST => ("List ziplist", packed::ziplist(blob).map(list)),
        t::SET_INTSET => ("Intset", packed::intset(blob).and_then(set)),
        t::ZSET_ZIPLIST => (
            "Zset ziplist",
            packed::ziplist(blob).and_then(score_pairs).and_then(zset),
        ),
        t::ZSET_LISTPACK => (
            "Zset listpack",
            packed::listpack(blob).and_then(score_pairs).and_then(zset),
        ),
        t::HASH_ZIPLIST => ("Hash ziplist", packed::ziplist(blob).and_then(hash)),
        t::HASH_LISTPACK => ("Hash listpack", packed::listpack(blob).and_then(hash)),
        _ => return None,
    };
    if value.is_none() {
        integrity_failed(name);
    }
    value
}

/// Logs a compact blob that failed its checks.
fn integrity_failed(name: &str) {
    tracing::warn!("Refused a serialized value: {name} integrity check failed");
}

/// A quicklist: nodes that are ziplists (the first version) or, in the
/// second, a container kind (1 a single plain element, 2 a listpack)
/// and its blob. Empty nodes are skipped, as Redis skips them.
fn quicklist(r: &mut Reader<'_>, second: bool) -> Option<Value> {
    let nodes = r.count()?;
    let mut items = Vec::new();
    for _ in 0..nodes {
        let container = if second { r.plain_len()? } else { 2 };
        let blob = r.string()?;
        // A node of no bytes is malformed whatever its container, as
        // Redis's reader says (an empty listpack still has its header).
        if blob.is_empty() {
            return None;
        }
        let node = match (second, container) {
            (_, 1) => {
                items.push(blob);
                continue;
            }
            (true, 2) => packed::listpack(&blob),
            (false, _) => packed::ziplist(&blob),
            _ => {
                integrity_failed("Quicklist");
                return None;
            }
        };
        let Some(node) = node else {
            integrity_failed(if second { "Listpack" } else { "Ziplist" });
            return None;
        };
        items.extend(node);
    }
    Some(list(items))
}

fn list(items: Vec<Vec<u8>>) -> Value {
    let list: VecDeque<Str> = items.into_iter().map(Str::from).collect();
    Value::List(Shared::new(list))
}

/// A set, refusing duplicate members (a corrupt payload).
fn set(items: Vec<Vec<u8>>) -> Option<Value> {
    let n = items.len();
    let set: HashSet<Str> = items.into_iter().map(Str::from).collect();
    (set.len() == n).then(|| Value::Set(Shared::new(set)))
}

/// A hash from alternating fields and values, refusing an odd count and
/// duplicate fields.
fn hash(items: Vec<Vec<u8>>) -> Option<Value> {
    if !items.len().is_multiple_of(2) {
        return None;
    }
    let n = items.len() / 2;
    let mut map = HashMap::with_capacity(n);
    let mut iter = items.into_iter();
    while let (Some(field), Some(value)) = (iter.next(), iter.next()) {
        map.insert(Bytes::from(field), Str::from(value));
    }
    (map.len() == n).then(|| Value::Hash(Shared::new(map)))
}

/// Members and scores from alternating entries of a compact sorted set.
fn score_pairs(items: Vec<Vec<u8>>) -> Option<Vec<(Vec<u8>, f64)>> {
    if !items.len().is_multiple_of(2) {
        return None;
    }
    let mut pairs = Vec::with_capacity(items.len() / 2);
    let mut iter = items.into_iter();
    while let (Some(member), Some(score)) = (iter.next(), iter.next()) {
        pairs.push((member, score_from_text(&score)?));
    }
    Some(pairs)
}

/// A sorted set, refusing duplicate members.
fn zset(pairs: Vec<(Vec<u8>, f64)>) -> Option<Value> {
    let mut z = ZSet::default();
    for (member, score) in pairs {
        if !z.insert(&member, score) {
            return None;
        }
    }
    Some(Value::ZSet(Shared::new(z)))
}

#[cfg(test)]
mod tests;

/// RDB's opcode before a function library (`RDB_OPCODE_FUNCTION2`).
const OPCODE_FUNCTION2: u8 = 245;

/// FUNCTION DUMP's payload for libraries with these codes: each as the
/// function opcode and the code as an RDB string, then the footer (RDB
/// version and CRC-64) as DUMP has it, so real Redis restores it.
pub fn dump_functions<'a>(codes: impl Iterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    for code in codes {
        out.push(OPCODE_FUNCTION2);
        write_string(&mut out, code);
    }
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64(0, &out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Why a FUNCTION RESTORE payload cannot be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FunctionsError {
    /// The footer's version or checksum is wrong.
    VersionOrChecksum,
    /// A type byte is missing.
    NoType,
    /// A type byte is not the function opcode.
    NotFunction,
    /// A library's code is malformed.
    BadCode,
}

/// The library codes of a FUNCTION DUMP payload (Redis's or Ferrite's;
/// LZF-compressed strings included); `check_crc` as for
/// [`restore_checked`].
pub fn restore_functions(payload: &[u8], check_crc: bool) -> Result<Vec<Vec<u8>>, FunctionsError> {
    verify(payload, check_crc).map_err(|_| FunctionsError::VersionOrChecksum)?;
    let mut r = Reader {
        data: &payload[..payload.len() - 10],
        at: 0,
    };
    let mut codes = Vec::new();
    while r.remaining() > 0 {
        match r.byte() {
            None => return Err(FunctionsError::NoType),
            Some(OPCODE_FUNCTION2) => {}
            Some(_) => return Err(FunctionsError::NotFunction),
        }
        codes.push(r.string().ok_or(FunctionsError::BadCode)?);
    }
    Ok(codes)
}
