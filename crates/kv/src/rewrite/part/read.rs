//! Reading a base part: blocks checked one by one (magic, order, CRC32C),
//! segments rebuilt from them, the capture table and the trailer checked
//! against what was read. Every length comes from the file and is treated
//! as untrusted: a damaged one is an error, never a large allocation.

use std::collections::BTreeMap;
use std::io::Read;

use super::{
    array8, u32_at, PartHeader, PartTotals, BLOCK_HEADER_LEN, BLOCK_MAGIC, BLOCK_PIECE,
    CAPTURE_MAGIC, PART_HEADER_LEN, TAG_EXPIRES, TRAILER_LEN, TRAILER_MAGIC, TYPE_MASK,
};
use crate::keyspace::{Segment, SEGMENTS_PER_DB};
use crate::rewrite::FormatError;
use crate::types::{Bytes, HashValue, ListValue, SetValue, Shared, Str, Value, ZSet};

/// A cursor over one block's payload; every read is bounds-checked.
struct Cursor<'a> {
    buf: &'a [u8],
    at: usize,
    base: u64,
}

impl<'a> Cursor<'a> {
    fn err(&self, reason: &str) -> FormatError {
        FormatError {
            offset: self.base + self.at as u64,
            reason: reason.to_string(),
        }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], FormatError> {
        if self.buf.len() - self.at < n {
            return Err(self.err("entry runs past the end of its block"));
        }
        let out = &self.buf[self.at..self.at + n];
        self.at += n;
        Ok(out)
    }

    fn varint(&mut self) -> Result<u64, FormatError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.take(1)?[0];
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(self.err("length varint longer than 10 bytes"))
    }

    /// A count of items that each take at least `min_item` bytes: checked
    /// against what is left so no announced count reserves memory.
    fn count(&mut self, min_item: usize) -> Result<usize, FormatError> {
        let n = self.varint()?;
        let left = (self.buf.len() - self.at) as u64;
        if n.saturating_mul(min_item as u64) > left {
            return Err(self.err("collection count larger than its block"));
        }
        Ok(n as usize)
    }

    /// A length-prefixed byte string.
    fn slice(&mut self) -> Result<&'a [u8], FormatError> {
        let n = self.count(1)?;
        self.take(n)
    }

    fn bytes(&mut self) -> Result<Bytes, FormatError> {
        Ok(Bytes::from(self.slice()?))
    }

    fn i64(&mut self) -> Result<i64, FormatError> {
        Ok(i64::from_le_bytes(array8(self.take(8)?)))
    }
}

fn decode_value(c: &mut Cursor<'_>, kind: u8) -> Result<Value, FormatError> {
    Ok(match kind {
        0 => Value::Str(c.slice()?.into()),
        1 => {
            let n = c.count(2)?;
            let mut h = HashValue::with_capacity(n);
            for _ in 0..n {
                let (f, v) = (c.bytes()?, Str::new(c.slice()?));
                if h.insert(f, v).is_some() {
                    return Err(c.err("duplicate hash field"));
                }
            }
            Value::Hash(Shared::new(h))
        }
        2 => {
            let n = c.count(1)?;
            let mut l = ListValue::with_capacity(n);
            for _ in 0..n {
                l.push_back(Str::new(c.slice()?));
            }
            Value::List(Shared::new(l))
        }
        3 => {
            let n = c.count(1)?;
            let mut s = SetValue::with_capacity(n);
            for _ in 0..n {
                if !s.insert(Str::new(c.slice()?)) {
                    return Err(c.err("duplicate set member"));
                }
            }
            Value::Set(Shared::new(s))
        }
        4 => {
            let n = c.count(9)?;
            let mut z = ZSet::default();
            for _ in 0..n {
                let m = c.bytes()?;
                let score = f64::from_le_bytes(array8(c.take(8)?));
                if score.is_nan() {
                    return Err(c.err("NaN score in a sorted set"));
                }
                if !z.insert(&m, score) {
                    return Err(c.err("duplicate sorted-set member"));
                }
            }
            Value::ZSet(Shared::new(z))
        }
        5 => {
            let rest = c.buf.get(c.at..).unwrap_or_default();
            let (s, used) = crate::types::stream::persist::decode(rest).map_err(|e| c.err(e.0))?;
            c.at += used;
            Value::Stream(Shared::new(s))
        }
        _ => return Err(c.err("unknown value type")),
    })
}

/// Decodes one block's entries into `into`.
fn decode_block(
    payload: &[u8],
    entries: u32,
    base: u64,
    into: &mut Segment,
) -> Result<(), FormatError> {
    let mut c = Cursor {
        buf: payload,
        at: 0,
        base,
    };
    for _ in 0..entries {
        let tag = c.take(1)?[0];
        if tag & !(TAG_EXPIRES | TYPE_MASK) != 0 {
            return Err(c.err("unknown entry flags"));
        }
        let key = c.bytes()?;
        let expires = if tag & TAG_EXPIRES != 0 {
            Some(c.i64()?)
        } else {
            None
        };
        let value = decode_value(&mut c, tag & TYPE_MASK)?;
        if value.is_empty_collection() {
            return Err(c.err("empty collection (never stored)"));
        }
        if let Some(at) = expires {
            into.expires.insert(key.clone(), at);
        }
        if into.map.insert(&key, value).is_some() {
            return Err(c.err("duplicate key"));
        }
    }
    if c.at != payload.len() {
        return Err(c.err("bytes after the block's last entry"));
    }
    Ok(())
}

/// Reads a base part segment by segment.
#[derive(Debug)]
pub struct PartReader<R: Read> {
    input: R,
    header: PartHeader,
    version: u16,
    offset: u64,
    /// Global index of the last block that was not a piece.
    last: Option<u32>,
    totals: PartTotals,
    done: bool,
    pending: Option<Block>,
    /// Segments of which only pieces were read so far, by global index.
    pieces: BTreeMap<u32, LoadedSegment>,
    /// The capture table's runs, once read (version 3).
    captures: Option<Vec<(u32, u64)>>,
}

/// A block read ahead: db, segment, payload, entries, payload offset,
/// whether it is a piece.
type Block = (u16, u16, Vec<u8>, u32, u64, bool);

/// One segment's keys as read from a part.
#[derive(Debug)]
pub struct LoadedSegment {
    /// Database index.
    pub db: u16,
    /// Segment index within the database.
    pub seg: u16,
    /// The keys.
    pub segment: Segment,
}

impl<R: Read> PartReader<R> {
    /// Reads and checks the header.
    pub fn new(mut input: R) -> Result<PartReader<R>, FormatError> {
        let mut h = [0u8; PART_HEADER_LEN];
        read_exact(&mut input, &mut h, 0, "header")?;
        let header = PartHeader::decode(&h)?;
        Ok(PartReader {
            input,
            header,
            version: u16::from_le_bytes([h[8], h[9]]),
            offset: PART_HEADER_LEN as u64,
            last: None,
            totals: PartTotals::default(),
            done: false,
            pending: None,
            pieces: BTreeMap::new(),
            captures: None,
        })
    }

    /// The part's header.
    pub fn header(&self) -> &PartHeader {
        &self.header
    }

    fn err(&self, reason: impl Into<String>) -> FormatError {
        FormatError {
            offset: self.offset,
            reason: reason.into(),
        }
    }

    /// The next block, or `None` after a valid trailer (and checks that
    /// nothing follows it).
    fn next_block(&mut self) -> Result<Option<Block>, FormatError> {
        let mut magic = [0u8; 4];
        read_exact(&mut self.input, &mut magic, self.offset, "block header")?;
        if u32::from_le_bytes(magic) == CAPTURE_MAGIC && self.version >= 3 {
            self.read_captures(magic)?;
            read_exact(&mut self.input, &mut magic, self.offset, "trailer")?;
            if u32::from_le_bytes(magic) != TRAILER_MAGIC {
                return Err(self.err("expected the trailer after the capture table"));
            }
        }
        if u32::from_le_bytes(magic) == TRAILER_MAGIC {
            if self.version >= 3 && self.captures.is_none() {
                return Err(self.err("a version 3 part without its capture table"));
            }
            self.read_trailer(magic)?;
            return Ok(None);
        }
        if u32::from_le_bytes(magic) != BLOCK_MAGIC {
            return Err(self.err("expected a block or the trailer (bad magic)"));
        }
        let mut h = [0u8; BLOCK_HEADER_LEN];
        h[..4].copy_from_slice(&magic);
        read_exact(&mut self.input, &mut h[4..], self.offset, "block header")?;
        let (db, seg) = (
            u16::from_le_bytes([h[4], h[5]]),
            u16::from_le_bytes([h[6], h[7]]),
        );
        let entries = u32_at(&h, 8);
        let len = u64::from_le_bytes(array8(&h[16..24]));
        let global = u32::from(db) * SEGMENTS_PER_DB as u32 + u32::from(seg);
        let range = self.header.range;
        if usize::from(seg) >= SEGMENTS_PER_DB || global < range.start || global >= range.end {
            return Err(self.err(format!(
                "block for db {db} segment {seg} outside the part's range"
            )));
        }
        let flags = u32_at(&h, 12);
        let piece = flags == BLOCK_PIECE && self.version >= 2;
        // A piece comes before every other block of its segment.
        let behind = if piece {
            self.last.is_some_and(|l| l >= global)
        } else {
            self.last.is_some_and(|l| l > global)
        };
        if behind || entries == 0 || (flags != 0 && !piece) {
            return Err(self.err("block out of order, empty, or with unknown flags"));
        }
        let payload = self.read_bytes(len, "a block")?;
        let crc = crc32c::crc32c_append(crc32c::crc32c(&h[..24]), &payload);
        if crc != u32_at(&h, 24) {
            return Err(self.err("block checksum mismatch"));
        }
        let base = self.offset + BLOCK_HEADER_LEN as u64;
        self.offset = base + len;
        if !piece {
            self.last = Some(global);
        }
        self.totals.blocks += 1;
        self.totals.keys += u64::from(entries);
        Ok(Some((db, seg, payload, entries, base, piece)))
    }

    /// The next `len` bytes, read as they come: a damaged length is never
    /// a large allocation, only a short read (an incomplete part).
    fn read_bytes(&mut self, len: u64, what: &str) -> Result<Vec<u8>, FormatError> {
        let mut bytes = Vec::new();
        let got = (&mut self.input)
            .take(len)
            .read_to_end(&mut bytes)
            .map_err(|e| self.err(format!("read error: {e}")))?;
        if got as u64 != len {
            return Err(self.err(format!("part ends inside {what} (incomplete part)")));
        }
        Ok(bytes)
    }

    fn read_captures(&mut self, magic: [u8; 4]) -> Result<(), FormatError> {
        let mut count = [0u8; 4];
        read_exact(&mut self.input, &mut count, self.offset, "capture table")?;
        let runs = u32::from_le_bytes(count);
        let want = u64::from(runs) * 12 + 4;
        let table = self.read_bytes(want, "its capture table")?;
        let (body, crc) = table.split_at(table.len() - 4);
        let mut sum = crc32c::crc32c(&magic);
        sum = crc32c::crc32c_append(sum, &count);
        sum = crc32c::crc32c_append(sum, body);
        if sum != u32_at(crc, 0) {
            return Err(self.err("capture table checksum mismatch"));
        }
        let runs: Vec<(u32, u64)> = body
            .chunks_exact(12)
            .map(|r| (u32_at(r, 0), u64::from_le_bytes(array8(&r[4..]))))
            .collect();
        let covered: u64 = runs.iter().map(|(len, _)| u64::from(*len)).sum();
        let range = self.header.range;
        if covered != u64::from(range.end - range.start) || runs.iter().any(|(len, _)| *len == 0) {
            return Err(self.err(format!(
                "capture table covers {covered} segments, the part's range {}",
                range.end - range.start
            )));
        }
        self.captures = Some(runs);
        self.offset += 8 + want;
        Ok(())
    }

    /// The capture table, once the whole part was read: runs of
    /// `(segments, c(s))` covering the header's range in order; `None`
    /// for a part of version 1 or 2 (taken whole at the log switch).
    pub fn captures(&self) -> Option<&[(u32, u64)]> {
        self.captures.as_deref()
    }

    fn read_trailer(&mut self, magic: [u8; 4]) -> Result<(), FormatError> {
        let mut t = [0u8; TRAILER_LEN];
        t[..4].copy_from_slice(&magic);
        read_exact(&mut self.input, &mut t[4..], self.offset, "trailer")?;
        if crc32c::crc32c(&t[..24]) != u32_at(&t, 24) {
            return Err(self.err("trailer checksum mismatch"));
        }
        let said = (
            u32_at(&t, 4),
            u64::from_le_bytes(array8(&t[8..16])),
            u64::from_le_bytes(array8(&t[16..24])),
        );
        if said != (self.totals.blocks, self.totals.keys, self.offset) {
            return Err(self.err("trailer totals do not match the blocks read"));
        }
        let mut extra = [0u8; 1];
        match self.input.read(&mut extra) {
            Ok(0) => {}
            Ok(_) => return Err(self.err("bytes after the trailer")),
            Err(e) => return Err(self.err(format!("read error: {e}"))),
        }
        self.offset += TRAILER_LEN as u64;
        self.totals.bytes = self.offset;
        self.done = true;
        Ok(())
    }

    /// The next whole segment, or `None` once the trailer was read and
    /// checked. A segment larger than one block spans consecutive blocks;
    /// they are merged here, with one block of look-ahead. Pieces are
    /// kept until their segment's other blocks come, or until a later
    /// segment's do (the segment had nothing else), or the part ends.
    pub fn next_segment(&mut self) -> Result<Option<LoadedSegment>, FormatError> {
        loop {
            if let Some(entry) = self.pieces.first_entry() {
                if self.done || self.last.is_some_and(|l| l > *entry.key()) {
                    return Ok(Some(entry.remove()));
                }
            }
            let block = match self.pending.take() {
                Some(block) => block,
                None if self.done => return Ok(None),
                None => match self.next_block()? {
                    Some(block) => block,
                    None => continue,
                },
            };
            let (db, seg) = (block.0, block.1);
            let global = u32::from(db) * SEGMENTS_PER_DB as u32 + u32::from(seg);
            let mut loaded = self.pieces.remove(&global).unwrap_or(LoadedSegment {
                db,
                seg,
                segment: Segment::default(),
            });
            decode_block(&block.2, block.3, block.4, &mut loaded.segment)?;
            if block.5 {
                self.pieces.insert(global, loaded);
                continue;
            }
            while let Some(next) = self.next_block()? {
                if (next.0, next.1) != (db, seg) || next.5 {
                    self.pending = Some(next);
                    break;
                }
                decode_block(&next.2, next.3, next.4, &mut loaded.segment)?;
            }
            return Ok(Some(loaded));
        }
    }

    /// Totals read so far (complete once `next_segment` returned `None`).
    pub fn totals(&self) -> PartTotals {
        self.totals
    }
}

fn read_exact(
    input: &mut impl Read,
    buf: &mut [u8],
    offset: u64,
    what: &str,
) -> Result<(), FormatError> {
    input.read_exact(buf).map_err(|e| FormatError {
        offset,
        reason: if e.kind() == std::io::ErrorKind::UnexpectedEof {
            format!("part ends inside its {what} (incomplete part)")
        } else {
            format!("read error in {what}: {e}")
        },
    })
}
