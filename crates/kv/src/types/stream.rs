//! Streams: entries ordered by ID, packed in blocks ([`block`]) kept in a
//! B-tree keyed by each block's first ID (Redis keeps listpacks in a radix
//! tree the same way), the stream's counters, and its consumer groups.

pub mod block;
pub mod blocks;
pub mod persist;

use std::collections::{BTreeMap, BTreeSet};

pub use block::{Block, BlockError, Entry};
use blocks::BlockMap;

use super::{Bytes, Shared};

/// A stream entry ID: milliseconds and a sequence number.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId {
    /// Milliseconds part.
    pub ms: u64,
    /// Sequence part.
    pub seq: u64,
}

impl StreamId {
    /// The smallest ID, `0-0`.
    pub const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    /// The largest ID.
    pub const MAX: StreamId = StreamId {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    /// The next ID; `None` past the largest.
    pub fn next(self) -> Option<StreamId> {
        match (self.ms, self.seq) {
            (u64::MAX, u64::MAX) => None,
            (ms, u64::MAX) => Some(StreamId { ms: ms + 1, seq: 0 }),
            (ms, seq) => Some(StreamId { ms, seq: seq + 1 }),
        }
    }

    /// The previous ID; `None` before the smallest.
    pub fn prev(self) -> Option<StreamId> {
        match (self.ms, self.seq) {
            (0, 0) => None,
            (ms, 0) => Some(StreamId {
                ms: ms - 1,
                seq: u64::MAX,
            }),
            (ms, seq) => Some(StreamId { ms, seq: seq - 1 }),
        }
    }

    /// Whether it is `0-0`.
    pub fn is_zero(self) -> bool {
        self == StreamId::MIN
    }

    /// `ms-seq`, as replies show it. Written digit by digit rather than
    /// with `format!`: XADD writes its new ID twice (the reply and the
    /// logged command), and the formatting machinery was 8.6% of the
    /// server's cycles under an XADD load.
    pub fn text(self) -> String {
        // Only ASCII digits and '-' are written.
        String::from_utf8(self.text_bytes().as_bytes().to_vec()).unwrap_or_default()
    }

    /// [`StreamId::text`] in a buffer of its own on the stack: XADD
    /// writes the new ID into its reply and its logged command, and
    /// needs no allocation for either.
    pub fn text_bytes(self) -> IdText {
        let mut text = IdText {
            buf: [0; ID_TEXT_BYTES_MAX],
            len: 0,
        };
        text.push_u64(self.ms);
        text.push(b'-');
        text.push_u64(self.seq);
        text
    }
}

/// The longest ID text: two 20-digit numbers and the dash.
const ID_TEXT_BYTES_MAX: usize = 41;

/// An ID's text ([`StreamId::text_bytes`]).
#[derive(Clone, Copy, Debug)]
pub struct IdText {
    buf: [u8; ID_TEXT_BYTES_MAX],
    len: usize,
}

impl IdText {
    /// The text's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        self.buf.get(..self.len).unwrap_or_default()
    }

    fn push(&mut self, byte: u8) {
        if let Some(at) = self.buf.get_mut(self.len) {
            *at = byte;
            self.len += 1;
        }
    }

    /// Appends `n` in decimal (at most 20 digits, which the buffer has
    /// room for twice).
    fn push_u64(&mut self, n: u64) {
        let mut digits = [0u8; 20];
        let mut at = digits.len();
        let mut rest = n;
        loop {
            at -= 1;
            digits[at] = b'0' + (rest % 10) as u8;
            rest /= 10;
            if rest == 0 {
                break;
            }
        }
        for &d in &digits[at..] {
            self.push(d);
        }
    }
}

/// A pending entry: delivered to a consumer, not yet acknowledged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Nack {
    /// The consumer it was last delivered to.
    pub consumer: Bytes,
    /// Unix ms of the last delivery.
    pub delivery_time: i64,
    /// How many times it was delivered.
    pub delivery_count: u64,
}

/// A consumer of a group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Consumer {
    /// Unix ms it was last seen (read or claimed).
    pub seen_time: i64,
    /// The IDs pending for it (their [`Nack`]s are in the group's PEL).
    pub pel: BTreeSet<StreamId>,
}

/// A consumer group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Group {
    /// The last ID delivered to the group.
    pub last_id: StreamId,
    /// Entries the group has read (its logical read counter); `-1` when
    /// unknown.
    pub entries_read: i64,
    /// Pending entries of every consumer.
    pub pel: BTreeMap<StreamId, Nack>,
    /// Consumers by name.
    pub consumers: BTreeMap<Bytes, Consumer>,
}

impl Group {
    /// A group that last delivered `last_id`, having read `entries_read`.
    pub fn new(last_id: StreamId, entries_read: i64) -> Group {
        Group {
            last_id,
            entries_read,
            ..Group::default()
        }
    }

    /// Removes pending entry `id` from the group and its consumer.
    pub fn remove_pending(&mut self, id: StreamId) -> Option<Nack> {
        let nack = self.pel.remove(&id)?;
        if let Some(c) = self.consumers.get_mut(&nack.consumer) {
            c.pel.remove(&id);
        }
        Some(nack)
    }

    /// Makes `consumer` own pending entry `id` (created if missing).
    pub fn assign(&mut self, id: StreamId, consumer: &Bytes, time: i64, count: Option<u64>) {
        let old = self.pel.get(&id).map(|n| n.consumer.clone());
        if let Some(old) = old.as_ref().filter(|o| *o != consumer) {
            if let Some(c) = self.consumers.get_mut(old) {
                c.pel.remove(&id);
            }
        }
        let nack = self.pel.entry(id).or_insert_with(|| Nack {
            consumer: consumer.clone(),
            delivery_time: time,
            delivery_count: 0,
        });
        nack.consumer = consumer.clone();
        nack.delivery_time = time;
        if let Some(n) = count {
            nack.delivery_count = n;
        }
        if let Some(c) = self.consumers.get_mut(consumer) {
            c.pel.insert(id);
        }
    }
}

/// A stream value.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stream {
    /// Blocks by their first entry's ID, in a persistent tree shared with
    /// a rewrite's capture: the first write after a capture copies a
    /// bounded amount, whatever the stream's length (`stream/blocks.rs`).
    blocks: BlockMap,
    /// Live entries.
    pub length: u64,
    /// The last ID ever added (or set by XSETID).
    pub last_id: StreamId,
    /// The first live entry's ID, `0-0` when empty.
    pub first_id: StreamId,
    /// The largest ID deleted by XDEL.
    pub max_deleted_id: StreamId,
    /// Entries ever added.
    pub entries_added: u64,
    /// Consumer groups by name, behind their own reference count: the
    /// first write after a capture copies the blocks' top (one increment)
    /// and this count, and copies the groups only when it changes them.
    pub groups: Shared<BTreeMap<Bytes, Group>>,
}

/// Limits on a block: `stream-node-max-entries` and `-bytes`.
#[derive(Clone, Copy, Debug)]
pub struct NodeLimits {
    /// Most entries (live and deleted) in a block; 0: no limit.
    pub max_entries: u64,
    /// Largest block in bytes; 0: no limit.
    pub max_bytes: u64,
}

impl NodeLimits {
    /// Redis's defaults.
    pub const DEFAULT: NodeLimits = NodeLimits {
        max_entries: 100,
        max_bytes: 4096,
    };
}

/// The largest block Redis allows, in bytes (`STREAM_LISTPACK_MAX_SIZE`).
pub const BLOCK_BYTES_MAX: u64 = 1 << 30;

/// The most a new block reserves up front (Redis's
/// `STREAM_LISTPACK_MAX_PRE_ALLOCATE`).
const BLOCK_ROOM_BYTES: u64 = 4096;

/// How a trim chooses what to remove.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrimBy {
    /// Keep at most this many entries.
    MaxLen(u64),
    /// Remove entries below this ID.
    MinId(StreamId),
}

impl Stream {
    /// Number of blocks (XINFO's `radix-tree-keys`).
    pub fn block_count(&self) -> usize {
        self.blocks.len()
    }

    /// Every block with its first ID, in order (for the rewrite).
    pub fn blocks(&self) -> impl Iterator<Item = (StreamId, &Block)> + '_ {
        self.blocks.iter()
    }

    /// Adds a block read back from a part, keeping the counters as stored.
    pub fn insert_block(&mut self, first: StreamId, block: Block) {
        self.blocks.insert(first, block);
    }

    /// Appends an entry with ID `id` (checked greater than `last_id` by
    /// the caller), starting a new block when the tail one is full.
    pub fn append(&mut self, id: StreamId, fields: &[(&[u8], &[u8])], limits: NodeLimits) {
        let element_bytes: u64 = fields.iter().map(|(f, v)| (f.len() + v.len()) as u64).sum();
        let max_bytes = match limits.max_bytes {
            0 => BLOCK_BYTES_MAX,
            n => n.min(BLOCK_BYTES_MAX),
        };
        let tail_full = self.blocks.last().is_none_or(|(_, b)| {
            b.bytes() as u64 + element_bytes >= max_bytes
                || (limits.max_entries != 0 && b.slots() >= limits.max_entries)
        });
        if tail_full {
            if let Some((_, last)) = self.blocks.last_mut() {
                last.seal();
            }
            let room = max_bytes.min(BLOCK_ROOM_BYTES) as usize;
            self.blocks.insert(id, Block::with_capacity(fields, room));
        }
        if let Some((first, last)) = self.blocks.last_mut() {
            last.push(first, id, fields);
        }
        if self.length == 0 {
            self.first_id = id;
        }
        self.length += 1;
        self.entries_added += 1;
        self.last_id = id;
    }

    /// Live entries from `start` to `end` inclusive, in order (reversed
    /// with `rev`), produced a block at a time.
    pub fn range(
        &self,
        start: StreamId,
        end: StreamId,
        rev: bool,
    ) -> Box<dyn Iterator<Item = Entry<'_>> + '_> {
        if start > end {
            return Box::new(std::iter::empty());
        }
        let from = self.blocks.floor(start).unwrap_or(start);
        let blocks = self.blocks.range(from, end);
        let in_range = move |e: &Entry<'_>| e.id >= start && e.id <= end;
        if rev {
            Box::new(
                blocks
                    .rev()
                    .flat_map(|(k, b)| b.entries(k).into_iter().rev())
                    .skip_while(move |e| e.id > end)
                    .take_while(move |e| e.id >= start)
                    .filter(in_range),
            )
        } else {
            Box::new(
                blocks
                    .flat_map(|(k, b)| b.entries(k))
                    .skip_while(move |e| e.id < start)
                    .take_while(move |e| e.id <= end)
                    .filter(in_range),
            )
        }
    }

    /// The live entry `id`, if there is one.
    pub fn get(&self, id: StreamId) -> Option<Entry<'_>> {
        self.range(id, id, false).next()
    }

    /// The last live entry's ID (`0-0` when empty).
    pub fn last_valid_id(&self) -> StreamId {
        self.range(StreamId::MIN, StreamId::MAX, true)
            .next()
            .map_or(StreamId::MIN, |e| e.id)
    }

    fn refresh_first_id(&mut self) {
        self.first_id = if self.length == 0 {
            StreamId::MIN
        } else {
            self.range(StreamId::MIN, StreamId::MAX, false)
                .next()
                .map_or(StreamId::MIN, |e| e.id)
        };
    }

    /// Deletes live entry `id`; whether there was one. Updates the first
    /// ID and the largest deleted ID, as XDEL does.
    pub fn delete(&mut self, id: StreamId) -> bool {
        let Some(first) = self.blocks.floor(id) else {
            return false;
        };
        let at = self
            .blocks
            .get(first)
            .and_then(|b| b.decode(first).ok())
            .and_then(|all| all.into_iter().find(|e| e.id == id && !e.deleted))
            .map(|e| e.at);
        let Some(at) = at else {
            return false;
        };
        let Some(block) = self.blocks.get_mut(first) else {
            return false;
        };
        block.mark_deleted(at);
        if block.live() == 0 {
            self.blocks.remove(first);
        }
        self.length -= 1;
        if id > self.max_deleted_id {
            self.max_deleted_id = id;
        }
        if id == self.first_id || self.length == 0 {
            self.refresh_first_id();
        }
        true
    }

    /// Trims as XTRIM and XADD's MAXLEN/MINID do: whole blocks first; with
    /// `approx` only whole blocks; at most `limit` entries (0: no limit).
    /// Returns how many entries it removed.
    pub fn trim(&mut self, by: TrimBy, approx: bool, limit: u64) -> u64 {
        let mut deleted = 0u64;
        while let Some((first, head)) = self.blocks.first() {
            if matches!(by, TrimBy::MaxLen(max) if self.length <= max) {
                break;
            }
            let live = u64::from(head.live());
            if limit != 0 && deleted + live > limit {
                break;
            }
            let whole = match by {
                TrimBy::MaxLen(max) => self.length - live >= max,
                TrimBy::MinId(min) => {
                    let all = head.decode(first).unwrap_or_default();
                    all.last().is_some_and(|e| e.id < min)
                }
            };
            if whole {
                self.blocks.remove(first);
                self.length -= live;
                deleted += live;
                continue;
            }
            if approx {
                break;
            }
            let Some(block) = self.blocks.get_mut(first) else {
                break;
            };
            let doomed: Vec<usize> = {
                let mut length = self.length;
                let mut out = Vec::new();
                for e in block.decode(first).unwrap_or_default() {
                    let stop = match by {
                        TrimBy::MaxLen(max) => length <= max,
                        TrimBy::MinId(min) => e.id >= min,
                    };
                    if stop {
                        break;
                    }
                    if !e.deleted {
                        out.push(e.at);
                        length -= 1;
                    }
                }
                out
            };
            for at in &doomed {
                block.mark_deleted(*at);
            }
            self.length -= doomed.len() as u64;
            deleted += doomed.len() as u64;
            break;
        }
        if deleted > 0 || self.length == 0 {
            self.refresh_first_id();
        }
        deleted
    }

    /// Whether an XDEL'd ID may lie in `start..=end` (Redis's test for
    /// tombstones that make a group's read counter unreliable).
    pub fn range_has_tombstones(&self, start: StreamId, end: StreamId) -> bool {
        if self.length == 0 || self.max_deleted_id.is_zero() {
            return false;
        }
        if self.first_id > self.max_deleted_id {
            return false;
        }
        start <= self.max_deleted_id && self.max_deleted_id <= end
    }

    /// How many entries were added up to and including `id`, when it can
    /// be known; `None` otherwise (Redis's estimate of a read counter).
    pub fn distance_from_first_ever(&self, id: StreamId) -> Option<i64> {
        let added = self.entries_added as i64;
        if self.entries_added == 0 {
            return Some(0);
        }
        if self.length == 0 && id <= self.last_id {
            return Some(added);
        }
        match id.cmp(&self.last_id) {
            std::cmp::Ordering::Equal => return Some(added),
            std::cmp::Ordering::Greater => return None,
            std::cmp::Ordering::Less => {}
        }
        let no_fragments = self.max_deleted_id.is_zero() || self.max_deleted_id < self.first_id;
        if no_fragments {
            match id.cmp(&self.first_id) {
                std::cmp::Ordering::Less => return Some(added - self.length as i64),
                std::cmp::Ordering::Equal => return Some(added - self.length as i64 + 1),
                std::cmp::Ordering::Greater => {}
            }
        }
        None
    }

    /// A group's lag (entries not yet delivered to it), `None` when it
    /// cannot be known.
    pub fn group_lag(&self, group: &Group) -> Option<i64> {
        if self.entries_added == 0 {
            return Some(0);
        }
        if group.entries_read != -1 && !self.range_has_tombstones(group.last_id, StreamId::MAX) {
            return Some(self.entries_added as i64 - group.entries_read);
        }
        self.distance_from_first_ever(group.last_id)
            .map(|read| self.entries_added as i64 - read)
    }

    /// Records that `group` delivered entry `id`, as Redis's read counter
    /// does.
    pub fn advance_group(&self, group: &mut Group, id: StreamId) {
        if id <= group.last_id {
            return;
        }
        if group.entries_read != -1 && !self.range_has_tombstones(id, StreamId::MAX) {
            group.entries_read += 1;
        } else if self.entries_added != 0 {
            group.entries_read = self.distance_from_first_ever(id).unwrap_or(-1);
        }
        group.last_id = id;
    }

    /// Bytes of entry data (fields and values), a rough size for DEBUG.
    pub fn data_bytes(&self) -> usize {
        self.blocks.iter().map(|(_, b)| b.bytes()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(ms: u64, seq: u64) -> StreamId {
        StreamId { ms, seq }
    }

    fn filled(n: u64, limits: NodeLimits) -> Stream {
        let mut s = Stream::default();
        for i in 1..=n {
            let v = i.to_string();
            s.append(id(i, 0), &[(b"f", v.as_bytes())], limits);
        }
        s
    }

    #[test]
    fn blocks_split_at_the_entry_limit_and_ranges_cross_them() {
        let limits = NodeLimits {
            max_entries: 10,
            max_bytes: 0,
        };
        let s = filled(35, limits);
        assert_eq!(s.block_count(), 4);
        let ids: Vec<u64> = s
            .range(id(9, 0), id(12, 0), false)
            .map(|e| e.id.ms)
            .collect();
        assert_eq!(ids, vec![9, 10, 11, 12]);
        let rev: Vec<u64> = s
            .range(id(9, 1), id(21, 0), true)
            .map(|e| e.id.ms)
            .collect();
        assert_eq!(rev, (10..=21).rev().collect::<Vec<_>>());
    }

    #[test]
    fn approximate_trims_remove_only_whole_blocks() {
        let limits = NodeLimits {
            max_entries: 10,
            max_bytes: 0,
        };
        let mut s = filled(35, limits);
        assert_eq!(s.trim(TrimBy::MaxLen(22), true, 0), 10);
        assert_eq!(s.length, 25);
        assert_eq!(s.trim(TrimBy::MaxLen(22), false, 0), 3);
        assert_eq!(s.first_id, id(14, 0));
        assert_eq!(s.trim(TrimBy::MinId(id(30, 0)), false, 0), 16);
        assert_eq!(s.length, 6);
    }

    #[test]
    fn deletes_move_the_first_id_and_drop_empty_blocks() {
        let limits = NodeLimits {
            max_entries: 2,
            max_bytes: 0,
        };
        let mut s = filled(4, limits);
        assert!(s.delete(id(1, 0)));
        assert!(!s.delete(id(1, 0)));
        assert_eq!(s.first_id, id(2, 0));
        assert!(s.delete(id(2, 0)));
        assert_eq!(s.block_count(), 1);
        assert_eq!(s.max_deleted_id, id(2, 0));
        assert_eq!(s.last_valid_id(), id(4, 0));
    }
}
