//! What the event loop tells a rewrite's workers while they run (issue
//! #5): keys the base parts may leave out, and chunks to write ahead.
//!
//! Chunks first: the event loop's first write to a chunk the snapshot
//! still holds copies the chunk's table, and the snapshot's copy lives
//! until its segment's turn. The loop notes each chunk it copies; the
//! worker writes it from its snapshot at once, as a *piece* of its
//! segment (`rewrite/part.rs`), and frees it. Only the order of the keys
//! in the part changes.
//!
//! Then superseded keys.
//! A snapshot keeps every value it holds alive until its worker has
//! serialised the segment, so a value the clients replace during the
//! rewrite is held twice: the snapshot's old one and the live new one. At
//! 1M x 5 KiB under a steady write load that was 0.8 GB at the rewrite's
//! peak (about a quarter of the values written during it).
//!
//! Yet a base part needs a key's state at its segment's capture only if
//! replaying the new incremental log after it depends on that state (a
//! key is noted only once its segment is captured: before, the capture
//! holds the command's effect and the replay skips its record there). When the log
//! holds, after the switch, a record that sets the key's whole state
//! whatever it was before (`SET k v` and `SET k v PXAT t` as SET, SETEX,
//! GETSET and SETNX are logged, `MSET`, `DEL`), everything the replay
//! does to the key from that record on is the same with or without the
//! base's entry; and what it does before that record to this key alone
//! ends up overwritten. So the worker may leave the key out, and the
//! snapshot's old value is freed at once.
//!
//! Two things would break that, and both turn it off:
//!
//! - a logged command that reads the key into *another* key's state before
//!   the superseding record (RENAME, SMOVE, SINTERSTORE, MSETNX: any write
//!   command naming several keys): such keys are *pinned* for the rest of
//!   the rewrite ([`Keyspace::pin`]);
//! - SWAPDB, after which a database index in the log no longer names the
//!   snapshot's database of that index: no key is superseded for the rest
//!   of the rewrite.
//!
//! And one ordering rule makes it crash-safe: the new manifest may name
//! the parts only once every superseding record is durable in the new
//! log (a crash with the parts current but the record lost would lose the
//! key's older, acknowledged state). The event loop hands a superseded
//! key to the workers only after the command's record was appended to the
//! log ([`Keyspace::publish_superseded`], before the loop sleeps), and the
//! rewrite syncs the log after its workers and before its manifest.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use super::map::{Key, KeyMap, ENTRY_BYTES_ESTIMATE};
use super::{segment_of, Keyspace, Segment, SEGMENTS_PER_DB};

/// A worker's segments still to serialise: `(db, segment, contents)`, in
/// global order.
pub type SegmentQueue = VecDeque<(u16, u16, Arc<Segment>)>;

/// What the event loop noted for one worker since it last looked.
#[derive(Debug, Default)]
struct Notes {
    /// `(global segment, key)` superseded.
    keys: Vec<(u32, Key)>,
    /// `(global segment, chunk)` the live keyspace copied.
    chunks: Vec<(u32, u8)>,
}

/// One worker's notes from the event loop: the keys the clients
/// superseded and the chunks the live keyspace copied, in its range.
#[derive(Debug, Default)]
pub struct LoopNotes {
    notes: Mutex<Notes>,
    /// Copied chunks the worker has taken from `notes` and not written yet
    /// (the worker's alone; a mutex only to share the struct).
    waiting: Mutex<VecDeque<(u32, u8)>>,
    /// Keys the worker left out of its part.
    dropped: AtomicU64,
    /// Chunks it wrote ahead of their segments.
    pieces: AtomicU64,
    /// Superseded keys noted while the queue was full: they stay in the
    /// part.
    unqueued: AtomicU64,
}

/// How many entries of copied chunks a worker writes ahead between two of
/// its segments, at most (about one segment's at 1M keys).
pub const PIECE_ENTRIES_PER_CALL: usize = 1024;

/// How many superseded keys wait for one worker, at most; the event loop
/// queues no more until the worker takes them (the rest stay in the part,
/// which is always correct). 8 MiB at 32 bytes a key: a worker takes its
/// queue whole between two segments, a few thousand keys at most under
/// the bench's loads, so only a worker that does not run for seconds
/// under a heavy write load reaches it.
pub const NOTE_KEYS_QUEUED_MAX: usize = 256 * 1024;

fn global_of(db: u16, seg: u16) -> u32 {
    u32::from(db) * SEGMENTS_PER_DB as u32 + u32::from(seg)
}

/// Segment `global` of `segments`, if it is still to serialise and the
/// worker's alone (the live keyspace copied it).
fn own(segments: &mut SegmentQueue, global: u32) -> Option<(u16, u16, &mut Segment)> {
    let index = segments
        .binary_search_by_key(&global, |(db, seg, _)| global_of(*db, *seg))
        .ok()?;
    let (db, seg, segment) = &mut segments[index];
    Some((*db, *seg, Arc::get_mut(segment)?))
}

/// Notes a worker could not take yet: superseded keys and copied chunks.
type NotesBack = (Vec<(u32, Key)>, Vec<(u32, u8)>);

impl LoopNotes {
    /// Hands the worker `keys` and `chunks`; gives them back if the worker
    /// holds the notes right now. The event loop never waits for a worker
    /// (see `FeedShared` in `capture.rs`); it tries again later.
    fn try_push(&self, mut keys: Vec<(u32, Key)>, chunks: Vec<(u32, u8)>) -> Result<(), NotesBack> {
        let mut notes = match self.notes.try_lock() {
            Ok(notes) => notes,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return Err((keys, chunks)),
        };
        let room = NOTE_KEYS_QUEUED_MAX.saturating_sub(notes.keys.len());
        if keys.len() > room {
            self.unqueued
                .fetch_add((keys.len() - room) as u64, Ordering::Relaxed);
            keys.truncate(room);
        }
        notes.keys.extend(keys);
        notes.chunks.extend(chunks);
        Ok(())
    }

    /// Whether the event loop noted keys or chunks since the worker last
    /// took the notes ([`LoopNotes::leave_out`]).
    pub fn has_notes(&self) -> bool {
        let notes = self.notes.lock().unwrap_or_else(PoisonError::into_inner);
        !notes.keys.is_empty() || !notes.chunks.is_empty()
    }

    /// Superseded keys kept in the part because the worker's queue was
    /// full when they were noted.
    pub fn unqueued(&self) -> u64 {
        self.unqueued.load(Ordering::Relaxed)
    }

    /// Keys left out of the part so far.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Chunks written ahead of their segments so far.
    pub fn pieces(&self) -> u64 {
        self.pieces.load(Ordering::Relaxed)
    }

    /// Takes the notes since the last call: leaves each superseded key out
    /// of `segments`, the worker's segments still to serialise, and queues
    /// the copied chunks for [`LoopNotes::write_ahead`]. A segment the live
    /// keyspace has not copied is still shared with it and is left alone,
    /// as is a chunk still shared. Entries freed take their estimate off
    /// the copy-before-write total `released`.
    pub fn leave_out(&self, segments: &mut SegmentQueue, released: &AtomicI64) {
        let notes = std::mem::take(&mut *self.notes.lock().unwrap_or_else(PoisonError::into_inner));
        self.waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend(notes.chunks);
        let mut dropped = 0;
        for (global, key) in notes.keys {
            let Some((_, _, segment)) = own(segments, global) else {
                continue;
            };
            let key = key.as_bytes();
            if segment.map.remove_unshared(key) {
                segment.expires.remove(key);
                dropped += 1;
            }
        }
        self.dropped.fetch_add(dropped, Ordering::Relaxed);
        released.fetch_sub(dropped as i64 * ENTRY_BYTES_ESTIMATE, Ordering::Relaxed);
    }

    /// Hands copied chunks queued by [`LoopNotes::leave_out`] to
    /// `write_piece` (db, segment, the chunk as a map, the segment's
    /// expiry times), about [`PIECE_ENTRIES_PER_CALL`] entries' worth,
    /// oldest first, and frees the snapshot's copy of each. The rest wait
    /// for the next call: under a load that copies every chunk within
    /// seconds, writing them all at once kept superseded keys waiting
    /// behind seconds of paced writes (at 5 KiB the peak rose from 1.07 to
    /// 1.17 of steady memory). A chunk whose segment or table the live
    /// keyspace still shares is skipped, as in `leave_out`.
    pub fn write_ahead(
        &self,
        segments: &mut SegmentQueue,
        released: &AtomicI64,
        mut write_piece: impl FnMut(u16, u16, &KeyMap, &super::Expires) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        let mut waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
        let (mut pieces, mut written, mut freed) = (0, 0, 0);
        let result = loop {
            if written >= PIECE_ENTRIES_PER_CALL {
                break Ok(());
            }
            let Some((global, chunk)) = waiting.pop_front() else {
                break Ok(());
            };
            let Some((db, seg, segment)) = own(segments, global) else {
                continue;
            };
            let Some(piece) = segment.map.take_chunk(usize::from(chunk)) else {
                continue;
            };
            if !piece.is_empty() {
                if let Err(e) = write_piece(db, seg, &piece, &segment.expires) {
                    break Err(e);
                }
                pieces += 1;
                written += piece.len();
            }
            freed += piece.release() as i64;
        };
        self.pieces.fetch_add(pieces, Ordering::Relaxed);
        released.fetch_sub(freed * ENTRY_BYTES_ESTIMATE, Ordering::Relaxed);
        result
    }
}

/// The event loop's side, while a rewrite's workers run.
#[derive(Debug, Default)]
pub struct Supersede {
    /// `(end of the worker's global segment range, its notes)`, in order;
    /// empty when no rewrite runs.
    queues: Vec<(u32, Arc<LoopNotes>)>,
    /// Superseded by commands whose records may not be appended yet.
    pending: Vec<(u32, Key)>,
    /// Chunks copied since the notes were last handed over.
    copied: Vec<(u32, u8)>,
    /// Keys read into another key's state since the snapshot, by
    /// database (looked up by `&[u8]`, without a copy of the key).
    pinned: HashMap<usize, HashSet<Box<[u8]>>>,
    /// Set by SWAPDB: nothing is superseded for the rest of the rewrite.
    off: bool,
    /// Keys left out and chunks written ahead by the workers of the last
    /// rewrite, once they are done.
    finished: (u64, u64),
}

impl Supersede {
    /// Starts taking notes for a new snapshot, one queue per worker range.
    pub(super) fn start(&mut self, queues: Vec<(u32, Arc<LoopNotes>)>) {
        *self = Supersede {
            queues,
            ..Supersede::default()
        };
    }

    fn active(&self) -> bool {
        !self.queues.is_empty() && !self.off
    }

    /// Keys left out and chunks written ahead so far by this rewrite's
    /// workers, or by the last one's.
    fn totals(&self) -> (u64, u64) {
        if self.queues.is_empty() {
            return self.finished;
        }
        self.queues.iter().fold((0, 0), |(keys, pieces), (_, q)| {
            (keys + q.dropped(), pieces + q.pieces())
        })
    }

    /// The live keyspace copied chunk `chunk` of global segment `global`
    /// from a snapshot that holds it.
    pub(super) fn copied(&mut self, global: usize, chunk: usize) {
        if !self.queues.is_empty() {
            self.copied.push((global as u32, chunk as u8));
        }
    }
}

impl Keyspace {
    /// Whether a rewrite's workers may still leave superseded keys out.
    pub fn superseding(&self) -> bool {
        self.supersede.active()
    }

    /// Keys the running (else the last) rewrite's parts left out as
    /// superseded, and chunks its workers wrote ahead, for INFO.
    pub fn rewrite_notes(&self) -> (u64, u64) {
        self.supersede.totals()
    }

    /// A command whose log record sets `key`'s whole state, whatever it
    /// was, has just run (see the module's documentation for which).
    pub fn supersede(&mut self, db: usize, key: &[u8]) {
        let s = &mut self.supersede;
        if !s.active() || s.pinned.get(&db).is_some_and(|keys| keys.contains(key)) {
            return;
        }
        let global = (db * SEGMENTS_PER_DB + segment_of(key)) as u32;
        // A segment captured later holds this command's effect already:
        // the replay skips its record there, so the key must stay.
        if self.capture.is_captured(global) {
            s.pending.push((global, Key::new(key)));
        }
    }

    /// A command about to run may read `key` into another key's state:
    /// `key` is never superseded for the rest of the rewrite.
    pub fn pin(&mut self, db: usize, key: &[u8]) {
        if self.supersede.active() {
            self.supersede
                .pinned
                .entry(db)
                .or_default()
                .insert(key.into());
        }
    }

    /// SWAPDB ran: no key is superseded for the rest of the rewrite.
    pub fn stop_superseding(&mut self) {
        self.supersede.off = true;
    }

    /// Hands the keys superseded and the chunks copied so far to their
    /// workers. Call only once the commands that superseded those keys
    /// are appended to the log. Once every worker is done this ends the
    /// rewrite's notes.
    pub fn publish_superseded(&mut self) {
        let s = &mut self.supersede;
        if s.queues.is_empty() {
            return;
        }
        // A worker that finished dropped its snapshot, and with it its
        // notes: only the keyspace's reference is left.
        if s.queues.iter().all(|(_, q)| Arc::strong_count(q) == 1) {
            *s = Supersede {
                finished: s.totals(),
                ..Supersede::default()
            };
            return;
        }
        if s.pending.is_empty() && s.copied.is_empty() {
            return;
        }
        let mut keys = std::mem::take(&mut s.pending);
        let mut chunks = std::mem::take(&mut s.copied);
        keys.sort_unstable_by_key(|(global, _)| *global);
        chunks.sort_unstable();
        let (mut keys, mut chunks) = (keys.into_iter().peekable(), chunks.into_iter().peekable());
        for (end, queue) in &s.queues {
            let mine_keys: Vec<_> = std::iter::from_fn(|| keys.next_if(|(g, _)| g < end)).collect();
            let mine_chunks: Vec<_> =
                std::iter::from_fn(|| chunks.next_if(|(g, _)| g < end)).collect();
            let any = !mine_keys.is_empty() || !mine_chunks.is_empty();
            if any && Arc::strong_count(queue) > 1 {
                if let Err((k, c)) = queue.try_push(mine_keys, mine_chunks) {
                    s.pending.extend(k);
                    s.copied.extend(c);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Value;
    use std::collections::BTreeMap;

    /// A worker's notes and its segments.
    type Part = (Arc<LoopNotes>, SegmentQueue);
    /// What the workers wrote as pieces: `(db, key)` → value.
    type Written = BTreeMap<(u16, Vec<u8>), Value>;

    fn value(s: &str) -> Value {
        Value::Str(s.as_bytes().into())
    }

    fn keyspace(keys: usize) -> Keyspace {
        let mut ks = Keyspace::new(2);
        for i in 0..keys {
            ks.set(0, format!("k{i}").as_bytes(), value("old"), false);
        }
        ks
    }

    /// `key` of db 0 as the parts will hold it: in a piece written, or in
    /// a segment still to serialise.
    fn in_parts<'a>(parts: &'a [Part], written: &'a Written, key: &[u8]) -> Option<&'a Value> {
        written.get(&(0, key.to_vec())).or_else(|| {
            parts
                .iter()
                .flat_map(|(_, segments)| segments.iter())
                .find_map(|(db, _, s)| (*db == 0).then(|| s.map.get(key)).flatten())
        })
    }

    fn take_parts(ks: &mut Keyspace) -> Vec<Part> {
        ks.snapshot(2)
            .into_iter()
            .map(|p| {
                let mut segments = SegmentQueue::new();
                p.feed.take(&mut segments);
                (Arc::clone(&p.notes), segments)
            })
            .collect()
    }

    /// A keyspace of `keys` keys, its snapshot in two parts, and nothing
    /// written ahead yet.
    fn started(keys: usize) -> (Keyspace, Vec<Part>, Written) {
        let mut ks = keyspace(keys);
        let parts = take_parts(&mut ks);
        (ks, parts, Written::new())
    }

    /// What a worker does between two segments, for every worker.
    fn apply_all(ks: &Keyspace, parts: &mut [Part], written: &mut Written) {
        for (notes, segments) in parts.iter_mut() {
            notes.leave_out(segments, &ks.cow.current);
            notes
                .write_ahead(segments, &ks.cow.current, |db, _, chunk, _| {
                    for (k, v) in chunk.iter() {
                        let fresh = written.insert((db, k.to_vec()), v.clone()).is_none();
                        assert!(fresh, "a key written twice");
                    }
                    Ok(())
                })
                .expect("no write fails here");
        }
    }

    #[test]
    fn a_superseded_key_leaves_the_parts_once_published() {
        let (mut ks, mut parts, mut written) = started(3000);
        ks.set(0, b"k1", value("new"), false);
        ks.supersede(0, b"k1");
        ks.set(0, b"k2", value("new"), false);
        apply_all(&ks, &mut parts, &mut written);
        assert!(written.is_empty(), "nothing published yet");
        assert_eq!(in_parts(&parts, &written, b"k1"), Some(&value("old")));
        ks.publish_superseded();
        apply_all(&ks, &mut parts, &mut written);
        assert_eq!(in_parts(&parts, &written, b"k1"), None);
        assert_eq!(in_parts(&parts, &written, b"k2"), Some(&value("old")));
        assert_eq!(written.get(&(0, b"k2".to_vec())), Some(&value("old")));
        assert_eq!(in_parts(&parts, &written, b"k3"), Some(&value("old")));
        let dropped: u64 = parts.iter().map(|(q, _)| q.dropped()).sum();
        let pieces: u64 = parts.iter().map(|(q, _)| q.pieces()).sum();
        assert_eq!(dropped, 1);
        assert!((1..=2).contains(&pieces), "the chunks of k1 and k2");
        assert_eq!(ks.get(0, b"k1"), Some(&value("new")));
        // Every key but k1 is still in the parts, exactly once.
        let in_segments: usize = parts
            .iter()
            .flat_map(|(_, segments)| segments.iter())
            .map(|(_, _, s)| s.map.len())
            .sum();
        assert_eq!(in_segments + written.len(), 2999);
        assert_eq!(ks.rewrite_notes(), (1, pieces));
        drop(parts);
        ks.publish_superseded();
        assert!(!ks.superseding(), "every worker is done");
        assert_eq!(ks.rewrite_notes(), (1, pieces), "INFO's figures stay");
    }

    #[test]
    fn copied_chunks_are_written_ahead_a_bounded_batch_at_a_time() {
        let (mut ks, mut parts, mut written) = started(50_000);
        for i in (0..50_000).step_by(17) {
            ks.set(0, format!("k{i}").as_bytes(), value("new"), false);
        }
        ks.publish_superseded();
        apply_all(&ks, &mut parts, &mut written);
        let first = written.len();
        assert!(first > 0, "some chunks written ahead");
        // Each worker stops once it wrote its batch (plus the chunk that
        // crossed the bound: a chunk holds a few keys here).
        assert!(first <= 2 * (PIECE_ENTRIES_PER_CALL + 64), "{first}");
        for _ in 0..100 {
            apply_all(&ks, &mut parts, &mut written);
        }
        assert!(written.len() > first, "the rest followed");
        let waiting: usize = parts
            .iter()
            .map(|(q, _)| q.waiting.lock().expect("lock").len())
            .sum();
        assert_eq!(waiting, 0);
        let in_segments: usize = parts
            .iter()
            .flat_map(|(_, segments)| segments.iter())
            .map(|(_, _, s)| s.map.len())
            .sum();
        assert_eq!(in_segments + written.len(), 50_000, "every key once");
        assert_eq!(in_parts(&parts, &written, b"k17"), Some(&value("old")));
    }

    #[test]
    fn notes_a_worker_holds_are_published_at_the_next_try() {
        let (mut ks, mut parts, mut written) = started(3000);
        ks.set(0, b"k1", value("new"), false);
        ks.supersede(0, b"k1");
        {
            // Every worker inside its notes: the loop must not wait.
            let _held: Vec<_> = parts
                .iter()
                .map(|(q, _)| q.notes.lock().expect("lock"))
                .collect();
            ks.publish_superseded();
        }
        apply_all(&ks, &mut parts, &mut written);
        assert_eq!(in_parts(&parts, &written, b"k1"), Some(&value("old")));
        ks.publish_superseded();
        apply_all(&ks, &mut parts, &mut written);
        assert_eq!(in_parts(&parts, &written, b"k1"), None, "published later");
    }

    #[test]
    fn keys_noted_while_a_queue_is_full_stay_in_the_parts() {
        let (mut ks, mut parts, mut written) = started(3000);
        // Fill each queue to ten keys short of the bound (keys of a
        // segment no worker holds, which a worker skips).
        for (q, _) in &parts {
            let filler = vec![(u32::MAX, Key::new(b"filler")); NOTE_KEYS_QUEUED_MAX - 10];
            assert!(q.try_push(filler, Vec::new()).is_ok(), "not held");
        }
        for i in 0..100 {
            let key = format!("k{i}");
            ks.set(0, key.as_bytes(), value("new"), false);
            ks.supersede(0, key.as_bytes());
        }
        ks.publish_superseded();
        let unqueued: u64 = parts.iter().map(|(q, _)| q.unqueued()).sum();
        for (q, _) in &parts {
            assert!(q.notes.lock().expect("lock").keys.len() <= NOTE_KEYS_QUEUED_MAX);
        }
        assert!(
            unqueued >= 100 - 2 * 10,
            "at most ten more each: {unqueued}"
        );
        apply_all(&ks, &mut parts, &mut written);
        let dropped: u64 = parts.iter().map(|(q, _)| q.dropped()).sum();
        assert_eq!(dropped + unqueued, 100, "each queued key left out");
        // The keys noted beyond the bound are in the parts, with their
        // value at the snapshot; the others are not.
        let kept: Vec<usize> = (0..100)
            .filter(|i| in_parts(&parts, &written, format!("k{i}").as_bytes()).is_some())
            .collect();
        assert_eq!(kept.len() as u64, unqueued);
        for i in kept {
            let key = format!("k{i}");
            assert_eq!(
                in_parts(&parts, &written, key.as_bytes()),
                Some(&value("old"))
            );
        }
    }

    #[test]
    fn pinned_keys_and_keys_after_swapdb_stay_in_the_parts() {
        let (mut ks, mut parts, mut written) = started(3000);
        ks.pin(0, b"k1");
        ks.set(0, b"k1", value("new"), false);
        ks.supersede(0, b"k1");
        ks.stop_superseding();
        assert!(!ks.superseding());
        ks.set(0, b"k2", value("new"), false);
        ks.supersede(0, b"k2");
        ks.publish_superseded();
        apply_all(&ks, &mut parts, &mut written);
        assert_eq!(in_parts(&parts, &written, b"k1"), Some(&value("old")));
        assert_eq!(in_parts(&parts, &written, b"k2"), Some(&value("old")));
    }

    #[test]
    fn notes_end_with_the_workers_and_a_segment_not_copied_is_kept() {
        let (mut ks, mut parts, mut written) = started(100);
        // Superseded without a write (no copy-before-write): the snapshot
        // still shares the segment with the live keyspace.
        ks.supersede(0, b"k5");
        ks.publish_superseded();
        apply_all(&ks, &mut parts, &mut written);
        assert_eq!(in_parts(&parts, &written, b"k5"), Some(&value("old")));
        assert!(written.is_empty());
        let during = ks.rewrite_notes();
        drop(parts);
        ks.supersede(0, b"k6");
        ks.publish_superseded();
        assert!(!ks.superseding(), "every worker is done");
        assert_eq!(ks.rewrite_notes(), during, "the totals outlive the workers");
        ks.supersede(0, b"k6");
        assert!(ks.supersede.pending.is_empty());
    }
}
