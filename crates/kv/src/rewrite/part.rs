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

use std::io::Write;

use super::FormatError;
use crate::keyspace::{Expires, KeyMap, Segment, SegmentRange, SEGMENTS_PER_DB};
use crate::types::Value;

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

/// Entries the part writer gathers, prefetching their values' first two
/// lines, one batch ahead of its encoder. A tight loop over the tables
/// keeps many misses in flight; the old walk, which prefetched 16 entries
/// ahead of the encoder itself, stalled on them (1M x 100 B in one thread,
/// `examples/encode_probe.rs`: 80 ms before, 65 after; 1 KiB unchanged).
/// 64 took 72 ms, 1024 64 ms.
const GATHER_BATCH: usize = 256;
/// How many entries ahead of the encoder the part writer prefetches the
/// last line of a short string ([`SHORT_REST_MAX`] bytes at most): one
/// that starts mid-line ends in a third line, which [`Value::prefetch`]
/// does not ask for (3/4 of 100-byte values). 4 ahead took 67 ms in the
/// probe above, 16 took 62-65, 32 took 66.
const SHORT_REST_AHEAD: usize = 16;
/// Longest string whose rest is prefetched [`SHORT_REST_AHEAD`] entries
/// ahead; longer ones are [`REST_PREFETCH_AHEAD`] ahead (16 ahead, 1 KiB
/// values took 375 ms against 245).
const SHORT_REST_MAX: usize = 200;
/// How many entries ahead of the encoder the part writer prefetches the
/// rest of each longer value ([`Value::prefetch_rest_once`]), up to
/// [`REST_PREFETCH_LIMIT`] bytes of it.
const REST_PREFETCH_AHEAD: usize = 4;
/// See [`REST_PREFETCH_AHEAD`]: past about 1 KiB the hardware prefetcher
/// streams a value on its own (5 KiB values encode at a fifth of 1 KiB
/// values' cost per byte), and a longer burst of prefetches only stalls.
const REST_PREFETCH_LIMIT: usize = 1024;
const _: () = assert!(REST_PREFETCH_AHEAD >= 1 && REST_PREFETCH_AHEAD <= GATHER_BATCH);
const _: () = assert!(SHORT_REST_AHEAD >= 1 && SHORT_REST_AHEAD <= GATHER_BATCH);
// Each string's rest is prefetched at one of the two distances only.
const _: () = assert!(SHORT_REST_AHEAD != REST_PREFETCH_AHEAD);

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

    /// Bytes encoded so far, the open block's included.
    pub fn bytes(&self) -> u64 {
        self.totals.bytes + self.block.len() as u64
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
        expires: &Expires,
    ) -> std::io::Result<()> {
        self.end_block()?;
        self.block_at = Some((db, seg));
        self.block_flags = BLOCK_PIECE;
        self.write_entries(chunk, expires)?;
        self.end_block()?;
        self.block_at = None;
        Ok(())
    }

    fn write_entries(&mut self, map: &KeyMap, expires: &Expires) -> std::io::Result<()> {
        // Each value is its own allocation somewhere in the heap: reading
        // them in table order misses the cache and the TLB on nearly every
        // one. So the entries are gathered a batch at a time, a tight loop
        // that starts loading each value's first lines as it goes (many
        // misses in flight at once), one batch ahead of the encoder. The
        // rest of a string, whose length the gathered first line tells, is
        // asked for `SHORT_REST_AHEAD` entries ahead of the encoder when
        // short, `REST_PREFETCH_AHEAD` when longer (up to
        // `REST_PREFETCH_LIMIT` bytes): each entry at one distance only.
        let mut entries = map.iter();
        let mut current = Vec::with_capacity(GATHER_BATCH);
        let mut next = Vec::with_capacity(GATHER_BATCH);
        gather(&mut current, &mut entries);
        while !current.is_empty() {
            gather(&mut next, &mut entries);
            for i in 0..current.len() {
                let ahead = |d: usize| {
                    current
                        .get(i + d)
                        .or_else(|| next.get(i + d - current.len()))
                };
                for distance in [SHORT_REST_AHEAD, REST_PREFETCH_AHEAD] {
                    if let Some((_, soon)) = ahead(distance) {
                        if soon.str_len().map(rest_distance) == Some(distance) {
                            soon.prefetch_rest_once(REST_PREFETCH_LIMIT);
                        }
                    }
                }
                let (key, value) = current[i];
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
            std::mem::swap(&mut current, &mut next);
            next.clear();
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
        Value::Stream(_) => 5,
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
        Value::Stream(s) => crate::types::stream::persist::encode(out, s),
    }
}

mod read;
pub use read::{LoadedSegment, PartReader};

/// How many entries ahead of the encoder the rest of a string of `len`
/// bytes is prefetched.
fn rest_distance(len: usize) -> usize {
    if len <= SHORT_REST_MAX {
        SHORT_REST_AHEAD
    } else {
        REST_PREFETCH_AHEAD
    }
}

/// Takes up to [`GATHER_BATCH`] entries from `entries` into `batch`,
/// starting to load each value's first lines.
fn gather<'a>(
    batch: &mut Vec<(&'a [u8], &'a Value)>,
    entries: &mut impl Iterator<Item = (&'a [u8], &'a Value)>,
) {
    for (key, value) in entries.by_ref().take(GATHER_BATCH) {
        value.prefetch();
        batch.push((key, value));
    }
}
