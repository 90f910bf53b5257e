//! Base parts: one rewrite worker's point-in-time copy of a range of
//! keyspace segments, in a binary format that loads without parsing
//! commands (drawn in `docs/format.md`).
//!
//! A part is a header, then blocks, then a trailer. A block holds entries
//! of one segment (a large segment spans consecutive blocks), so a loader
//! fills segment maps directly, and each block carries its own CRC32C: a
//! damaged part is detected at the block where the damage is. The trailer
//! counts blocks and keys; a part without one is incomplete and never
//! loaded.
//!
//! Since version 3 a *capture table* precedes the trailer: the position in
//! the log (LSN) at which each segment of the part's range was captured
//! (`keyspace/capture.rs`); replay applies a logged command to a segment
//! only if it follows that position. Parts of versions 1 and 2 were taken
//! whole at the log switch: every logged command after them applies.
//!
//! Segments come in global order, except *pieces* (since version 2): one
//! chunk of a segment the event loop copied during the rewrite, written
//! ahead of the segment's turn so that the snapshot's copy of the chunk is
//! freed at once (`keyspace/supersede.rs`). A piece precedes its segment's
//! other blocks; the reader gathers a segment's pieces until its turn
//! comes (or the part ends).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io::{Read, Write};

use super::FormatError;
use crate::keyspace::{KeyMap, Segment, SegmentRange, SEGMENTS_PER_DB};
use crate::types::{Bytes, HashValue, ListValue, SetValue, Shared, Value, ZSet};

/// First bytes of every base part.
pub const PART_MAGIC: [u8; 8] = *b"FERBASE\0";
/// The format version this code writes; it reads this one, version 2 (no
/// capture table) and version 1 (no pieces either).
pub const PART_VERSION: u16 = 3;
/// Magic of the capture table ("CAPT" little-endian).
pub const CAPTURE_MAGIC: u32 = u32::from_le_bytes(*b"CAPT");
/// Block flag: a piece, one chunk of its segment written ahead.
pub const BLOCK_PIECE: u32 = 1;
/// Bytes in the part header.
pub const PART_HEADER_LEN: usize = 48;
/// Magic of a block header ("SEGB" little-endian).
pub const BLOCK_MAGIC: u32 = u32::from_le_bytes(*b"SEGB");
/// Bytes in a block header.
pub const BLOCK_HEADER_LEN: usize = 28;
/// Magic of the trailer ("PEND" little-endian).
pub const TRAILER_MAGIC: u32 = u32::from_le_bytes(*b"PEND");
/// Bytes in the trailer.
pub const TRAILER_LEN: usize = 28;
/// A block is closed once its payload reaches this size (the next entry
/// starts a new block; one entry is never split).
pub const BLOCK_PAYLOAD_TARGET: usize = 256 * 1024;

/// How many entries ahead of the encoder the part writer prefetches the
/// first lines of values (32 took twice as long at 100 B as 16).
const PREFETCH_AHEAD: usize = 16;
/// How many entries ahead of the encoder the part writer prefetches the
/// table slots that hold them (whose value pointers the prefetch at
/// [`PREFETCH_AHEAD`] reads).
const SLOT_PREFETCH_AHEAD: usize = 64;
/// How many entries ahead of the encoder the part writer prefetches the
/// rest of each value ([`Value::prefetch_rest_once`]), up to
/// [`REST_PREFETCH_LIMIT`] bytes of it.
const REST_PREFETCH_AHEAD: usize = 4;
/// See [`REST_PREFETCH_AHEAD`]: past about 1 KiB the hardware prefetcher
/// streams a value on its own (5 KiB values encode at a fifth of 1 KiB
/// values' cost per byte), and a longer burst of prefetches only stalls.
const REST_PREFETCH_LIMIT: usize = 1024;
const _: () = assert!(REST_PREFETCH_AHEAD >= 1 && REST_PREFETCH_AHEAD <= PREFETCH_AHEAD);

const TAG_EXPIRES: u8 = 0x80;
const TYPE_MASK: u8 = 0x07;

const _: () = assert!(PART_HEADER_LEN == 8 + 2 + 2 + 4 * 4 + 8 + 8 + 4);
const _: () = assert!(BLOCK_HEADER_LEN == 4 + 2 + 2 + 4 + 4 + 8 + 4);
const _: () = assert!(TRAILER_LEN == 4 + 4 + 8 + 8 + 4);
const _: () = assert!(SEGMENTS_PER_DB <= u16::MAX as usize);

/// What a part's header says about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartHeader {
    /// Rewrite generation the part belongs to.
    pub generation: u64,
    /// This part's index among the generation's parts.
    pub index: u32,
    /// How many parts the generation has.
    pub count: u32,
    /// Global segments the part covers.
    pub range: SegmentRange,
    /// When the snapshot was taken, Unix milliseconds.
    pub created_ms: i64,
}

impl PartHeader {
    fn encode(&self) -> [u8; PART_HEADER_LEN] {
        let mut h = [0u8; PART_HEADER_LEN];
        h[0..8].copy_from_slice(&PART_MAGIC);
        h[8..10].copy_from_slice(&PART_VERSION.to_le_bytes());
        // 10..12: flags, none defined.
        h[12..16].copy_from_slice(&self.index.to_le_bytes());
        h[16..20].copy_from_slice(&self.count.to_le_bytes());
        h[20..24].copy_from_slice(&self.range.start.to_le_bytes());
        h[24..28].copy_from_slice(&self.range.end.to_le_bytes());
        h[28..36].copy_from_slice(&self.created_ms.to_le_bytes());
        h[36..44].copy_from_slice(&self.generation.to_le_bytes());
        let crc = crc32c::crc32c(&h[..44]);
        h[44..48].copy_from_slice(&crc.to_le_bytes());
        h
    }

    fn decode(h: &[u8; PART_HEADER_LEN]) -> Result<PartHeader, FormatError> {
        let bad = |reason: String| Err(FormatError { offset: 0, reason });
        if h[0..8] != PART_MAGIC {
            return bad("not a Ferrite base part (bad magic)".into());
        }
        let version = u16::from_le_bytes([h[8], h[9]]);
        if !(1..=PART_VERSION).contains(&version) {
            return bad(format!(
                "base part format version {version}, this build reads 1 to {PART_VERSION}"
            ));
        }
        if u32_at(h, 44) != crc32c::crc32c(&h[..44]) {
            return bad("header checksum mismatch".into());
        }
        if h[10..12] != [0, 0] {
            return bad("unknown header flags".into());
        }
        let header = PartHeader {
            index: u32_at(h, 12),
            count: u32_at(h, 16),
            range: SegmentRange {
                start: u32_at(h, 20),
                end: u32_at(h, 24),
            },
            created_ms: i64::from_le_bytes(array8(&h[28..36])),
            generation: u64::from_le_bytes(array8(&h[36..44])),
        };
        if header.index >= header.count || header.range.start > header.range.end {
            return bad("header fields out of range".into());
        }
        Ok(header)
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn array8(b: &[u8]) -> [u8; 8] {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    a
}

/// Totals written to or read from a part.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PartTotals {
    /// Blocks.
    pub blocks: u32,
    /// Keys.
    pub keys: u64,
    /// Bytes of the whole file.
    pub bytes: u64,
}

/// Writes one base part to `out` (buffer `out` yourself if it is a file).
#[derive(Debug)]
pub struct PartWriter<W: Write> {
    out: W,
    range: SegmentRange,
    block: Vec<u8>,
    block_at: Option<(u16, u16)>,
    block_flags: u32,
    block_entries: u32,
    totals: PartTotals,
}

impl<W: Write> PartWriter<W> {
    /// Starts a part: writes its header.
    pub fn new(mut out: W, header: &PartHeader) -> std::io::Result<PartWriter<W>> {
        out.write_all(&header.encode())?;
        Ok(PartWriter {
            out,
            range: header.range,
            block: Vec::with_capacity(BLOCK_PAYLOAD_TARGET + 4096),
            block_at: None,
            block_flags: 0,
            block_entries: 0,
            totals: PartTotals {
                bytes: PART_HEADER_LEN as u64,
                ..PartTotals::default()
            },
        })
    }

    /// Appends every key of one segment.
    pub fn write_segment(&mut self, db: u16, seg: u16, segment: &Segment) -> std::io::Result<()> {
        if self.block_at != Some((db, seg)) || self.block_flags != 0 {
            self.end_block()?;
            self.block_at = Some((db, seg));
            self.block_flags = 0;
        }
        self.write_entries(&segment.map, &segment.expires)
    }

    /// Appends a piece of segment `seg` of `db`: `chunk`, one chunk of its
    /// map (`KeyMap::take_chunk`), with expiry times from `expires`, ahead
    /// of the segment's other blocks.
    pub fn write_piece(
        &mut self,
        db: u16,
        seg: u16,
        chunk: &KeyMap,
        expires: &HashMap<Bytes, i64>,
    ) -> std::io::Result<()> {
        self.end_block()?;
        self.block_at = Some((db, seg));
        self.block_flags = BLOCK_PIECE;
        self.write_entries(chunk, expires)?;
        self.end_block()?;
        self.block_at = None;
        Ok(())
    }

    fn write_entries(
        &mut self,
        map: &KeyMap,
        expires: &HashMap<Bytes, i64>,
    ) -> std::io::Result<()> {
        // Each value is its own allocation somewhere in the heap: reading
        // them in table order misses the cache and the TLB on nearly every
        // one (95% of the encoder's time at 1M keys). So the walk runs
        // ahead of the encoder and prefetches in three steps:
        // - the table slots `SLOT_PREFETCH_AHEAD` entries ahead (a
        //   segment's entries lie in 64 small tables, about 15 entries
        //   each at 1M keys, too short a run for the hardware prefetcher;
        //   their addresses come from the tables' control bytes);
        // - each value's first two lines `PREFETCH_AHEAD` entries ahead
        //   (reading its pointer from the slot);
        // - the rest of a longer value, up to `REST_PREFETCH_LIMIT`,
        //   `REST_PREFETCH_AHEAD` entries ahead (reading its length from
        //   its first line).
        // The entries between the walk and the encoder wait in `queue`,
        // so the tables are walked once.
        let mut slots = map.slot_addrs();
        for slot in slots.by_ref().take(SLOT_PREFETCH_AHEAD) {
            ferrite_pmem::hint::prefetch(slot);
        }
        let mut ahead = map.iter();
        let mut queue: VecDeque<(&[u8], &Value)> = VecDeque::with_capacity(PREFETCH_AHEAD + 1);
        for (key, value) in ahead.by_ref().take(PREFETCH_AHEAD) {
            value.prefetch();
            queue.push_back((key, value));
        }
        for (_, value) in queue.iter().take(REST_PREFETCH_AHEAD) {
            value.prefetch_rest_once(REST_PREFETCH_LIMIT);
        }
        while let Some((key, value)) = queue.pop_front() {
            if let Some(slot) = slots.next() {
                ferrite_pmem::hint::prefetch(slot);
            }
            if let Some((next_key, next)) = ahead.next() {
                next.prefetch();
                queue.push_back((next_key, next));
            }
            if let Some((_, soon)) = queue.get(REST_PREFETCH_AHEAD - 1) {
                soon.prefetch_rest_once(REST_PREFETCH_LIMIT);
            }
            let at = if expires.is_empty() {
                None
            } else {
                expires.get(key).copied()
            };
            encode_entry(&mut self.block, key, value, at);
            self.block_entries += 1;
            self.totals.keys += 1;
            if self.block.len() >= BLOCK_PAYLOAD_TARGET {
                self.end_block()?;
            }
        }
        Ok(())
    }

    fn end_block(&mut self) -> std::io::Result<()> {
        let Some((db, seg)) = self.block_at else {
            return Ok(());
        };
        if self.block_entries == 0 {
            return Ok(());
        }
        let mut h = [0u8; BLOCK_HEADER_LEN];
        h[0..4].copy_from_slice(&BLOCK_MAGIC.to_le_bytes());
        h[4..6].copy_from_slice(&db.to_le_bytes());
        h[6..8].copy_from_slice(&seg.to_le_bytes());
        h[8..12].copy_from_slice(&self.block_entries.to_le_bytes());
        h[12..16].copy_from_slice(&self.block_flags.to_le_bytes());
        h[16..24].copy_from_slice(&(self.block.len() as u64).to_le_bytes());
        let crc = crc32c::crc32c_append(crc32c::crc32c(&h[..24]), &self.block);
        h[24..28].copy_from_slice(&crc.to_le_bytes());
        self.out.write_all(&h)?;
        self.out.write_all(&self.block)?;
        self.totals.blocks += 1;
        self.totals.bytes += (BLOCK_HEADER_LEN + self.block.len()) as u64;
        self.block.clear();
        self.block_entries = 0;
        Ok(())
    }

    /// Writes the capture table (`captures`: `c(s)` of every segment of
    /// the range, in order) and the trailer; returns the output and what
    /// was written. The caller still has to make the output durable.
    pub fn finish(mut self, captures: &[u64]) -> std::io::Result<(W, PartTotals)> {
        self.end_block()?;
        if captures.len() as u64 != u64::from(self.range.end - self.range.start) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "{} capture positions for a range of {} segments",
                    captures.len(),
                    self.range.end - self.range.start
                ),
            ));
        }
        // Runs of equal positions: segments captured together (all of an
        // idle server's at once) take one run.
        let mut runs: Vec<(u32, u64)> = Vec::new();
        for &c in captures {
            match runs.last_mut() {
                Some((len, at)) if *at == c => *len += 1,
                _ => runs.push((1, c)),
            }
        }
        let mut table = Vec::with_capacity(12 + runs.len() * 12);
        table.extend_from_slice(&CAPTURE_MAGIC.to_le_bytes());
        table.extend_from_slice(&(runs.len() as u32).to_le_bytes());
        for (len, at) in runs {
            table.extend_from_slice(&len.to_le_bytes());
            table.extend_from_slice(&at.to_le_bytes());
        }
        let crc = crc32c::crc32c(&table);
        table.extend_from_slice(&crc.to_le_bytes());
        self.out.write_all(&table)?;
        self.totals.bytes += table.len() as u64;
        let mut t = [0u8; TRAILER_LEN];
        t[0..4].copy_from_slice(&TRAILER_MAGIC.to_le_bytes());
        t[4..8].copy_from_slice(&self.totals.blocks.to_le_bytes());
        t[8..16].copy_from_slice(&self.totals.keys.to_le_bytes());
        t[16..24].copy_from_slice(&self.totals.bytes.to_le_bytes());
        let crc = crc32c::crc32c(&t[..24]);
        t[24..28].copy_from_slice(&crc.to_le_bytes());
        self.out.write_all(&t)?;
        self.totals.bytes += TRAILER_LEN as u64;
        self.out.flush()?;
        Ok((self.out, self.totals))
    }
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn encode_entry(out: &mut Vec<u8>, key: &[u8], value: &Value, expires: Option<i64>) {
    let kind = match value {
        Value::Str(_) => 0,
        Value::Hash(_) => 1,
        Value::List(_) => 2,
        Value::Set(_) => 3,
        Value::ZSet(_) => 4,
    };
    out.push(kind | if expires.is_some() { TAG_EXPIRES } else { 0 });
    put_bytes(out, key);
    if let Some(at) = expires {
        out.extend_from_slice(&at.to_le_bytes());
    }
    match value {
        Value::Str(s) => put_bytes(out, s),
        Value::Hash(h) => {
            put_varint(out, h.len() as u64);
            for (f, v) in h.iter() {
                put_bytes(out, f);
                put_bytes(out, v);
            }
        }
        Value::List(l) => {
            put_varint(out, l.len() as u64);
            l.iter().for_each(|e| put_bytes(out, e));
        }
        Value::Set(s) => {
            put_varint(out, s.len() as u64);
            s.iter().for_each(|m| put_bytes(out, m));
        }
        Value::ZSet(z) => {
            put_varint(out, z.len() as u64);
            for (m, score) in z.iter() {
                put_bytes(out, m);
                out.extend_from_slice(&score.to_le_bytes());
            }
        }
    }
}

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
                let (f, v) = (c.bytes()?, c.bytes()?);
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
                l.push_back(c.bytes()?);
            }
            Value::List(Shared::new(l))
        }
        3 => {
            let n = c.count(1)?;
            let mut s = SetValue::with_capacity(n);
            for _ in 0..n {
                if !s.insert(c.bytes()?) {
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
