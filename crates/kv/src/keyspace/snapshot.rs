//! What a rewrite's workers hold of the keyspace (issue #5), and the
//! copy-before-write that keeps it unchanged without fork.
//!
//! The event loop captures segments for the workers a few at a time
//! (`capture.rs`): a capture clones the segment's `Arc`, no key or value
//! copied. From then on the live keyspace and the worker share the
//! segment until one of two things happens first:
//!
//! - the worker serialises the segment and drops its `Arc`: the live
//!   keyspace owns the segment alone again and writes to it copy nothing;
//! - the event loop writes to the segment: `Arc::make_mut` sees the
//!   worker's reference and gives the live keyspace a copy of the map
//!   first (copy-before-write). Keys and values are reference counted, so
//!   the copy is the map's table, not the data; the worker's version is
//!   freed as soon as it has serialised it.
//!
//! Extra memory is therefore bounded by the segments written while
//! captured and not yet serialised, and it is measured: [`CowStats`] adds
//! an estimate when the event loop copies and the worker subtracts the
//! same estimate when it frees the old version.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use super::capture::{Feed, WakeLoop};
use super::map::KeyMap;
use super::map::ENTRY_BYTES_ESTIMATE;
use super::supersede::{LoopNotes, SegmentQueue};
use super::{Keyspace, Segment, SEGMENTS_PER_DB};

/// Estimated bytes of a segment copied before a write, not counting the
/// map's chunks (shared until written, counted by `copied_entries`): the
/// chunk pointers and the expiry map (16 + 8 + 1 per entry at hashbrown's
/// maximum load of 7/8).
pub fn segment_copy_bytes(segment: &Segment) -> i64 {
    let chunks = (super::map::CHUNKS * 8) as i64;
    chunks + segment.expires.len() as i64 * 25 * 8 / 7
}

/// Copy-before-write accounting of the rewrite in progress.
#[derive(Debug, Default)]
pub struct CowStats {
    /// Segments copied before a write since the rewrite started.
    pub copies: u64,
    /// Largest [`CowStats::current_bytes`] seen during the rewrite.
    pub peak_bytes: u64,
    /// Bytes held by copies whose snapshot version is not freed yet.
    pub(super) current: Arc<AtomicI64>,
}

impl CowStats {
    /// Records that the live keyspace copied `segment` (the new copy).
    pub(super) fn copied_segment(&mut self, segment: &Segment) {
        self.copies += 1;
        self.add(segment_copy_bytes(segment));
    }

    /// Records that the live keyspace copied a chunk of `entries` entries.
    pub(super) fn copied_entries(&mut self, entries: usize) {
        self.add(entries as i64 * ENTRY_BYTES_ESTIMATE);
    }

    fn add(&mut self, bytes: i64) {
        let now = self.current.fetch_add(bytes, Ordering::Relaxed) + bytes;
        self.peak_bytes = self.peak_bytes.max(now.max(0) as u64);
    }

    /// Extra bytes held right now by copy-before-write.
    pub fn current_bytes(&self) -> u64 {
        self.current.load(Ordering::Relaxed).max(0) as u64
    }

    /// Starts the accounting of a new rewrite.
    pub fn reset(&mut self) {
        self.copies = 0;
        self.peak_bytes = 0;
        self.current.store(0, Ordering::Relaxed);
    }
}

/// A contiguous range of global segment indexes (`db * SEGMENTS_PER_DB +
/// segment`), the unit a rewrite worker writes as one base part.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentRange {
    /// First global segment index.
    pub start: u32,
    /// One past the last.
    pub end: u32,
}

/// One worker's share of a rewrite: a range of global segments, captured
/// for it one by one by the event loop (`keyspace/capture.rs`).
#[derive(Debug)]
pub struct Snapshot {
    /// The global segment indexes this share covers.
    pub range: SegmentRange,
    /// The segments captured for the worker, as the event loop captures
    /// them.
    pub feed: Feed,
    /// Keys in the range when the rewrite started (an estimate of the
    /// worker's work).
    pub keys: u64,
    /// What the event loop notes for this part's worker during the
    /// rewrite: keys the clients superseded, which the part may leave
    /// out, and chunks the live keyspace copied, which the worker writes
    /// ahead (`keyspace/supersede.rs`).
    pub notes: Arc<LoopNotes>,
    released: Arc<AtomicI64>,
}

impl Snapshot {
    /// Leaves out the keys the clients superseded since the last call
    /// ([`LoopNotes::leave_out`]) of `segments`, this snapshot's segments
    /// still to serialise.
    pub fn leave_out_superseded(&self, segments: &mut SegmentQueue) {
        self.notes.leave_out(segments, &self.released)
    }

    /// Writes chunks the live keyspace copied ahead of their segments
    /// ([`LoopNotes::write_ahead`]).
    pub fn write_ahead(
        &self,
        segments: &mut SegmentQueue,
        write_piece: impl FnMut(u16, u16, &KeyMap, &super::Expires) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        self.notes
            .write_ahead(segments, &self.released, write_piece)
    }

    /// Drops the snapshot's reference to a serialised segment. If the live
    /// keyspace had copied it meanwhile, this frees the old version and
    /// takes its estimate off the copy-before-write total.
    pub fn release(&self, segment: Arc<Segment>) {
        if let Some(old) = Arc::into_inner(segment) {
            let bytes = segment_copy_bytes(&old);
            let entries = old.map.release() as i64;
            self.released
                .fetch_sub(bytes + entries * ENTRY_BYTES_ESTIMATE, Ordering::Relaxed);
        }
    }
}

impl Keyspace {
    /// Starts a rewrite whose log switch happened after record `lsn`:
    /// `parts` contiguous ranges of global segments holding about the same
    /// number of keys each (never fewer than one part; empty parts are
    /// possible for tiny datasets), none captured yet. The event loop then
    /// captures them as the workers go ([`Keyspace::capture_step`]), and
    /// `wake` wakes it when a worker wants more.
    pub fn begin_rewrite(
        &mut self,
        parts: usize,
        lsn: u64,
        wake: Option<WakeLoop>,
    ) -> Vec<Snapshot> {
        self.cow.reset();
        let parts = parts.max(1);
        let total_segments = (self.dbs.len() * SEGMENTS_PER_DB) as u32;
        let total_keys: usize = self.dbs.iter().map(|d| d.len).sum();
        let per_part = total_keys.div_ceil(parts).max(1);
        let mut ranges: Vec<(SegmentRange, u64)> = Vec::with_capacity(parts);
        let mut current = (SegmentRange { start: 0, end: 0 }, 0u64);
        for (db_index, db) in self.dbs.iter().enumerate() {
            for (seg_index, segment) in db.segments.iter().enumerate() {
                let global = (db_index * SEGMENTS_PER_DB + seg_index) as u32;
                if current.1 as usize >= per_part && ranges.len() + 1 < parts {
                    current.0.end = global;
                    let next = (
                        SegmentRange {
                            start: global,
                            end: global,
                        },
                        0,
                    );
                    ranges.push(std::mem::replace(&mut current, next));
                }
                current.1 += segment.map.len() as u64;
            }
        }
        current.0.end = total_segments;
        ranges.push(current);
        while ranges.len() < parts {
            let empty = SegmentRange {
                start: total_segments,
                end: total_segments,
            };
            ranges.push((empty, 0));
        }
        let just_ranges: Vec<SegmentRange> = ranges.iter().map(|r| r.0).collect();
        let feeds = self.start_capture(&just_ranges, lsn, wake);
        let out: Vec<Snapshot> = ranges
            .into_iter()
            .zip(feeds)
            .map(|((range, keys), feed)| Snapshot {
                range,
                feed,
                keys,
                notes: Arc::default(),
                released: Arc::clone(&self.cow.current),
            })
            .collect();
        self.supersede.start(
            out.iter()
                .map(|p| (p.range.end, Arc::clone(&p.notes)))
                .collect(),
        );
        out
    }

    /// A point-in-time snapshot in `parts` parts: [`Keyspace::begin_rewrite`]
    /// with every segment captured at once, after the last record logged
    /// (importing a file, tests).
    pub fn snapshot(&mut self, parts: usize) -> Vec<Snapshot> {
        let lsn = self.capture_lsn();
        let out = self.begin_rewrite(parts, lsn, None);
        self.capture_step(true);
        out
    }

    /// Replaces segment `seg` of `db` with `segment` (loading base parts).
    pub fn install_segment(&mut self, db: usize, seg: usize, segment: Segment) {
        let old = Arc::clone(&self.dbs[db].segments[seg]);
        self.slot_segment_replaced(db, &old, &segment);
        let database = &mut self.dbs[db];
        database.len -= database.segments[seg].map.len();
        database.len += segment.map.len();
        database.segments[seg] = Arc::new(segment);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Value;

    fn value(s: &str) -> Value {
        Value::Str(s.as_bytes().into())
    }

    #[test]
    fn snapshot_is_point_in_time_and_copies_only_written_segments() {
        let mut ks = Keyspace::new(2);
        for i in 0..5000 {
            ks.set(i % 2, format!("k{i}").as_bytes(), value("old"), false);
        }
        let parts = ks.snapshot(3);
        assert_eq!(parts.len(), 3);
        assert_eq!(parts.iter().map(|p| p.keys).sum::<u64>(), 5000);
        assert_eq!(parts[0].range.start, 0);
        assert_eq!(parts[2].range.end, 2 * SEGMENTS_PER_DB as u32);
        assert_eq!(parts[0].range.end, parts[1].range.start);
        ks.set(0, b"k0", value("new"), false);
        ks.set(0, b"k2", value("new"), false);
        assert!(ks.cow.copies >= 1 && ks.cow.copies <= 2);
        assert!(ks.cow.current_bytes() > 0);
        let taken: Vec<SegmentQueue> = parts
            .iter()
            .map(|p| {
                let mut q = SegmentQueue::new();
                assert!(!p.feed.take(&mut q), "all captured");
                q
            })
            .collect();
        let seen: Vec<&Value> = taken
            .iter()
            .flat_map(|q| q.iter())
            .filter_map(|(db, _, s)| (*db == 0).then(|| s.map.get(&b"k0"[..])).flatten())
            .collect();
        assert_eq!(seen, vec![&value("old")]);
        for (part, queue) in parts.iter().zip(taken) {
            for (_, _, s) in queue {
                part.release(s);
            }
        }
        assert_eq!(ks.cow.current_bytes(), 0);
        assert_eq!(ks.get(0, b"k0"), Some(&value("new")));
    }
}
