//! Capturing segments one at a time for a rewrite's workers (issue #5;
//! the design and its correctness argument are in `docs/capture.md`).
//!
//! A rewrite does not take the whole keyspace at the log switch. The event
//! loop hands each worker the next few segments of its range shortly
//! before the worker serialises them, and notes for each segment `s` its
//! *capture position* `c(s)`: the LSN of the last record appended to the
//! log when it was captured. The part stores those positions; replaying
//! the logs after the parts, a command is applied to segment `s` only if
//! its record's LSN is above `c(s)` ([`Keyspace::replay_decision`]).
//!
//! The point: copy-before-write now only touches the few segments captured
//! and not yet serialised, where a snapshot of everything at the switch
//! made the event loop copy a chunk on three writes in four in the first
//! half second of a rewrite of 1M keys.
//!
//! Rule C1 keeps every command on one side of the captures: before a
//! write command runs, if the segments it may read or write are partly
//! captured, the rest are captured first ([`Keyspace::capture_before`];
//! a transaction does it for all its commands at once, before EXEC runs
//! any). Captures happen only between commands, never inside one.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::sync::Arc;
use std::time::Duration;

use super::supersede::SegmentQueue;
use super::{Db, Keyspace, Segment, SegmentRange, SEGMENTS_PER_DB};

/// `c(s)` of a segment not captured yet.
pub const NOT_CAPTURED: u64 = u64::MAX;

/// A worker is kept at least this many non-empty captured segments ahead.
const READY_SEGMENTS: usize = 2;

/// ... and at least this many keys ahead (about four segments at 1M keys:
/// a millisecond of a worker's time at 100 B, longer than a busy event-loop
/// iteration).
const READY_KEYS: usize = 4096;

/// How long a worker waits for the event loop before asking again (the
/// loop is woken on every ask; this only bounds a lost wake-up).
const WAIT_AGAIN: Duration = Duration::from_millis(50);

/// A function that wakes the event loop.
pub type WakeLoop = Arc<dyn Fn() + Send + Sync>;

/// A captured non-empty segment on its way to a worker: `(db, segment,
/// contents)`.
type Captured = (u16, u16, Arc<Segment>);

/// What the event loop and one worker share about the worker's feed. No
/// lock: the loop must never wait for a worker. A worker runs in
/// `SCHED_IDLE`, so one preempted inside a critical section the loop
/// needs keeps the loop waiting until a core falls idle. With a mutex
/// here the loop waited on it 119 times in the first 1.2 s of a rewrite
/// of 1M x 100 B under load, 19 ms in all.
#[derive(Debug)]
struct FeedShared {
    range: SegmentRange,
    /// Segments sent and not yet taken by the worker, and their keys.
    sent_segments: AtomicUsize,
    sent_keys: AtomicUsize,
    /// `c(s)` of each segment of the range, [`NOT_CAPTURED`] until it is.
    captures: Vec<AtomicU64>,
}

/// One worker's share of a rewrite, as the worker sees it: the segments
/// of its range the event loop captured, in global order.
pub struct Feed {
    shared: Arc<FeedShared>,
    segments: Receiver<Captured>,
    wake: Option<WakeLoop>,
}

impl std::fmt::Debug for Feed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Feed")
            .field("range", &self.shared.range)
            .finish()
    }
}

impl Feed {
    fn wake_loop(&self) {
        if let Some(wake) = &self.wake {
            wake();
        }
    }

    fn took(&self, captured: Captured, into: &mut SegmentQueue) {
        self.shared.sent_segments.fetch_sub(1, Ordering::Relaxed);
        self.shared
            .sent_keys
            .fetch_sub(captured.2.map.len(), Ordering::Relaxed);
        into.push_back(captured);
    }

    /// Moves the segments captured for the worker (in global order) to the
    /// back of `into`, waiting until there is one or the range is done;
    /// returns whether more may come. Call it when `into` is empty: the
    /// loop refills the feed while the worker serialises what it took, so
    /// it is woken once per batch, not per segment.
    pub fn take(&self, into: &mut SegmentQueue) -> bool {
        loop {
            let more = loop {
                match self.segments.try_recv() {
                    Ok(captured) => self.took(captured, into),
                    Err(TryRecvError::Empty) => break true,
                    Err(TryRecvError::Disconnected) => break false,
                }
            };
            if more {
                // The loop tops the feed up between its iterations; an idle
                // loop sleeps until it is woken.
                self.wake_loop();
            }
            if !more || !into.is_empty() {
                return more;
            }
            match self.segments.recv_timeout(WAIT_AGAIN) {
                Ok(captured) => self.took(captured, into),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return false,
            }
        }
    }

    /// `c(s)` of every segment of the range, once the worker has taken
    /// them all.
    pub fn captures(&self) -> Vec<u64> {
        self.shared
            .captures
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect()
    }
}

/// The event loop's end of one worker's feed.
#[derive(Debug)]
struct FeedSender {
    shared: Arc<FeedShared>,
    /// `None` once every segment of the range is sent, or the worker is
    /// gone.
    segments: Option<Sender<Captured>>,
    /// Every segment of the range below it is captured and sent.
    cursor: u32,
    /// Non-empty segments captured ahead of the cursor (rule C1), sent
    /// when the cursor reaches them, so the worker gets its range in order.
    early: BTreeMap<u32, Captured>,
}

impl FeedSender {
    fn range(&self) -> SegmentRange {
        self.shared.range
    }

    /// Notes that segment `global` is captured at `lsn`; returns it (and
    /// its key count) if it holds keys.
    fn capture(
        &self,
        at: &mut [u64],
        dbs: &[Db],
        global: u32,
        lsn: u64,
    ) -> Option<(Captured, usize)> {
        at[global as usize] = lsn;
        self.shared.captures[(global - self.range().start) as usize].store(lsn, Ordering::Relaxed);
        let (db, seg) = (
            global as usize / SEGMENTS_PER_DB,
            global as usize % SEGMENTS_PER_DB,
        );
        let segment = &dbs[db].segments[seg];
        let keys = segment.map.len();
        (keys > 0).then(|| ((db as u16, seg as u16, Arc::clone(segment)), keys))
    }

    /// Hands `captured` to the worker; false if the worker is gone.
    fn send(&self, captured: Captured, keys: usize) -> bool {
        let Some(tx) = &self.segments else {
            return false;
        };
        self.shared.sent_segments.fetch_add(1, Ordering::Relaxed);
        self.shared.sent_keys.fetch_add(keys, Ordering::Relaxed);
        tx.send(captured).is_ok()
    }

    /// Stops feeding a worker that is gone (its rewrite failed): nothing
    /// more to hold for it.
    fn abandon(&mut self) {
        self.segments = None;
        self.early.clear();
        self.cursor = self.range().end;
    }
}

/// How far [`Keyspace::top_up`] captures.
#[derive(Clone, Copy)]
enum Budget {
    All,
    Ready,
    Segments(u32),
}

/// The event loop's side of the captures.
#[derive(Debug, Default)]
pub(super) struct Capture {
    /// LSN of the last record appended to the log.
    last_lsn: u64,
    /// `c(s)` by global segment while a rewrite captures; empty otherwise.
    at: Vec<u64>,
    /// Segments of `at` captured so far, so that a command that may touch
    /// every segment (a script) learns in constant time whether some are
    /// captured and some not.
    captured: usize,
    /// The workers' feeds, in range order.
    feeds: Vec<FeedSender>,
    /// Segments captured so far by rule C1 ahead of their turn.
    early: u64,
    /// Whether the captures are still going on (some feed is not done).
    active: bool,
    /// Keys each worker is kept ahead beyond [`READY_KEYS`]
    /// ([`Keyspace::capture_ahead`]).
    ahead_keys: usize,
    /// At start-up, `c(s)` by global segment of the base parts loaded,
    /// while the logs after them are replayed; empty otherwise.
    replay: Vec<u64>,
    /// The largest of `replay`: a record after it applies everywhere.
    replay_max: u64,
}

impl Capture {
    /// Whether `global` is captured (always, when no rewrite captures).
    pub(super) fn is_captured(&self, global: u32) -> bool {
        self.at
            .get(global as usize)
            .is_none_or(|&at| at != NOT_CAPTURED)
    }
}

impl Keyspace {
    /// The log took a record with this LSN (the server calls it after
    /// every append, so a capture knows which records it covers).
    pub fn logged(&mut self, lsn: u64) {
        if lsn != u64::MAX {
            self.capture.last_lsn = lsn;
        }
    }

    /// LSN of the last record appended to the log, as last told.
    pub fn capture_lsn(&self) -> u64 {
        self.capture.last_lsn
    }

    /// The lowest LSN a log opened now may start at: after the last record
    /// of the logs loaded so far and after every capture position of the
    /// base parts loaded.
    pub fn next_lsn_floor(&self) -> u64 {
        self.capture.last_lsn.max(self.capture.replay_max) + 1
    }

    /// Starts capturing for a rewrite whose log switch happened after
    /// record `lsn`: one feed per range (`ranges`), nothing captured yet.
    pub(super) fn start_capture(
        &mut self,
        ranges: &[SegmentRange],
        lsn: u64,
        wake: Option<WakeLoop>,
    ) -> Vec<Feed> {
        let total = self.dbs.len() * SEGMENTS_PER_DB;
        let (senders, feeds) = ranges
            .iter()
            .map(|&range| {
                let shared = Arc::new(FeedShared {
                    range,
                    sent_segments: AtomicUsize::new(0),
                    sent_keys: AtomicUsize::new(0),
                    captures: (range.start..range.end)
                        .map(|_| AtomicU64::new(NOT_CAPTURED))
                        .collect(),
                });
                let (tx, rx) = mpsc::channel();
                let sender = FeedSender {
                    shared: Arc::clone(&shared),
                    segments: Some(tx),
                    cursor: range.start,
                    early: BTreeMap::new(),
                };
                let feed = Feed {
                    shared,
                    segments: rx,
                    wake: wake.clone(),
                };
                (sender, feed)
            })
            .unzip();
        self.capture = Capture {
            last_lsn: lsn,
            at: vec![NOT_CAPTURED; total],
            feeds: senders,
            active: true,
            ..Capture::default()
        };
        feeds
    }

    /// Start-up: the base parts loaded say where each segment was captured
    /// (`table`, by global segment; 0 for parts written whole at the log
    /// switch). Until [`Keyspace::end_replay_captures`], the replay of the
    /// logs after them asks [`Keyspace::replay_decision`].
    pub fn set_replay_captures(&mut self, table: Vec<u64>) {
        self.capture.replay_max = table.iter().copied().max().unwrap_or(0);
        self.capture.replay = table;
    }

    /// The logs after the base parts are replayed.
    pub fn end_replay_captures(&mut self) {
        self.capture.replay = Vec::new();
        self.capture.replay_max = 0;
    }

    /// Whether the record with LSN `lsn` may precede some segment's
    /// capture, so that the replay must decide per command.
    pub fn replay_needs_decision(&self, lsn: u64) -> bool {
        lsn <= self.capture.replay_max
    }

    /// Whether replay applies a command of the record with LSN `lsn` that
    /// touches `segments` (global indexes): yes if the record follows the
    /// capture of every one of them, no if it precedes all (the parts hold
    /// its effect). A command on both sides cannot have run (rule C1): the
    /// parts and the log disagree, and the error says so.
    pub fn replay_decision(&self, segments: &[u32], lsn: u64) -> Result<bool, String> {
        let at = |g: u32| self.capture.replay.get(g as usize).copied().unwrap_or(0);
        let after = segments.iter().filter(|&&g| lsn > at(g)).count();
        if after == segments.len() {
            Ok(true)
        } else if after == 0 {
            Ok(false)
        } else {
            Err(format!(
                "record {lsn} has a command touching segments that the base parts captured \
                 both before and after it ({after} of {} after): the parts do not belong \
                 with this log",
                segments.len()
            ))
        }
    }

    /// Keeps each worker of the running rewrite at least `keys` keys ahead
    /// from now on: workers that run in bursts (`rewrite/pace.rs`) find a
    /// whole burst's worth captured when they start one, instead of
    /// waiting for the loop, whose core one of them may hold.
    pub fn capture_ahead(&mut self, keys: usize) {
        self.capture.ahead_keys = keys;
    }

    /// Whether a rewrite is still capturing segments.
    pub fn capturing(&self) -> bool {
        self.capture.active
    }

    /// Segments captured ahead of their turn by rule C1 in the running (or
    /// last) rewrite.
    pub fn captured_early(&self) -> u64 {
        self.capture.early
    }

    /// Tops every worker's feed up to a few segments ahead (once per
    /// event-loop iteration while a rewrite runs); `all` captures every
    /// segment left (shutdown, or a rewrite with no loop running).
    pub fn capture_step(&mut self, all: bool) {
        self.top_up(if all { Budget::All } else { Budget::Ready });
    }

    /// Captures the next `n` segments of every worker's range, however
    /// many are ready (tests of the captures' crash safety).
    pub fn capture_segments(&mut self, n: u32) {
        self.top_up(Budget::Segments(n));
    }

    fn top_up(&mut self, budget: Budget) {
        if !self.capture.active {
            return;
        }
        let ready_keys = READY_KEYS.max(self.capture.ahead_keys);
        let Capture {
            last_lsn,
            at,
            captured: count,
            feeds,
            ..
        } = &mut self.capture;
        let mut running = false;
        for feed in feeds.iter_mut() {
            if Arc::strong_count(&feed.shared) == 1 {
                feed.abandon();
            }
            let end = feed.range().end;
            let before = feed.cursor;
            while feed.cursor < end
                && match budget {
                    Budget::All => true,
                    Budget::Ready => {
                        feed.shared.sent_segments.load(Ordering::Relaxed) < READY_SEGMENTS
                            || feed.shared.sent_keys.load(Ordering::Relaxed) < ready_keys
                    }
                    Budget::Segments(n) => feed.cursor - before < n,
                }
            {
                let global = feed.cursor;
                let captured = if at[global as usize] == NOT_CAPTURED {
                    *count += 1;
                    feed.capture(at, &self.dbs, global, *last_lsn)
                } else {
                    feed.early.remove(&global).map(|c| {
                        let keys = c.2.map.len();
                        (c, keys)
                    })
                };
                feed.cursor += 1;
                if let Some((captured, keys)) = captured {
                    if !feed.send(captured, keys) {
                        feed.abandon();
                    }
                }
            }
            if feed.cursor >= end {
                // Everything sent: the worker sees the end once it has
                // taken the rest.
                feed.segments = None;
            }
            running |= feed.cursor < end;
        }
        self.capture.active = running;
    }

    /// Rule C1: before a command that may read or write the global
    /// segments `segments` runs, if some of them are captured and some
    /// not, captures the rest, so that the command's record falls wholly
    /// after or wholly before the capture of every segment it touches.
    pub fn capture_before(&mut self, segments: &[u32]) {
        let capture = &mut self.capture;
        if !capture.active || segments.len() < 2 {
            return;
        }
        let captured = segments.iter().filter(|&&g| capture.is_captured(g)).count();
        if captured == 0 || captured == segments.len() {
            return;
        }
        self.capture_rest(segments.iter().copied());
    }

    /// Rule C1 for a command that may read or write any segment (a script
    /// may name keys it did not declare): if some segment is captured and
    /// some not, captures the rest. Constant time once every segment is
    /// captured, as it is after the first script of a rewrite, or while
    /// none is.
    pub fn capture_all_before(&mut self) {
        let capture = &self.capture;
        if !capture.active || capture.captured == 0 || capture.captured >= capture.at.len() {
            return;
        }
        self.capture_rest(0..capture.at.len() as u32);
    }

    /// Captures those of `segments` not captured yet (rule C1's second half).
    fn capture_rest(&mut self, segments: impl Iterator<Item = u32>) {
        let Capture {
            last_lsn,
            at,
            captured,
            feeds,
            early,
            ..
        } = &mut self.capture;
        for global in segments {
            if at.get(global as usize) != Some(&NOT_CAPTURED) {
                continue;
            }
            let index = feeds.partition_point(|f| f.range().end <= global);
            // A feed closed with segments not captured lost its worker:
            // nothing more is held for it.
            let Some(feed) = feeds
                .get_mut(index)
                .filter(|f| f.range().start <= global && f.segments.is_some())
            else {
                continue;
            };
            *captured += 1;
            if let Some((segment, _)) = feed.capture(at, &self.dbs, global, *last_lsn) {
                feed.early.insert(global, segment);
            }
            *early += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Value;

    fn keyspace(keys: usize) -> Keyspace {
        let mut ks = Keyspace::new(2);
        for i in 0..keys {
            ks.set(
                0,
                format!("k{i}").as_bytes(),
                Value::Str(b"v"[..].into()),
                false,
            );
        }
        ks
    }

    fn global(key: &str) -> u32 {
        super::super::segment_of(key.as_bytes()) as u32
    }

    #[test]
    fn workers_in_bursts_are_kept_a_burst_ahead() {
        let mut ks = keyspace(40_000);
        let parts = ks.begin_rewrite(2, 7, None);
        ks.capture_ahead(3 * READY_KEYS);
        ks.capture_step(false);
        let mut taken = SegmentQueue::new();
        assert!(parts[0].feed.take(&mut taken));
        let keys: usize = taken.iter().map(|(_, _, s)| s.map.len()).sum();
        assert!(
            (3 * READY_KEYS..3 * READY_KEYS + 100).contains(&keys),
            "{keys} keys ahead"
        );
        // A new rewrite starts at the default again.
        let mut ks = keyspace(40_000);
        ks.capture_ahead(3 * READY_KEYS);
        let parts = ks.begin_rewrite(2, 9, None);
        ks.capture_step(false);
        let mut taken = SegmentQueue::new();
        assert!(parts[0].feed.take(&mut taken));
        let keys: usize = taken.iter().map(|(_, _, s)| s.map.len()).sum();
        assert!((READY_KEYS..READY_KEYS + 100).contains(&keys), "{keys}");
    }

    #[test]
    fn the_loop_keeps_each_worker_a_few_segments_ahead_in_order() {
        let mut ks = keyspace(20_000);
        let parts = ks.begin_rewrite(2, 7, None);
        assert!(ks.capturing());
        ks.capture_step(false);
        let mut taken = SegmentQueue::new();
        assert!(parts[0].feed.take(&mut taken), "more to come");
        let keys: usize = taken.iter().map(|(_, _, s)| s.map.len()).sum();
        assert!(
            (READY_KEYS..READY_KEYS + 100).contains(&keys),
            "{keys} keys ahead"
        );
        let globals: Vec<u32> = taken
            .iter()
            .map(|(db, seg, _)| u32::from(*db) * SEGMENTS_PER_DB as u32 + u32::from(*seg))
            .collect();
        assert!(globals.windows(2).all(|w| w[0] < w[1]), "in global order");
        // The rest is captured later, at a later position.
        ks.logged(9);
        ks.capture_step(true);
        assert!(!ks.capturing());
        let mut rest = SegmentQueue::new();
        while parts[0].feed.take(&mut rest) {}
        let captures = parts[0].feed.captures();
        assert!(captures.iter().all(|&c| c == 7 || c == 9));
        assert!(captures.contains(&7) && captures.contains(&9));
    }

    #[test]
    fn a_command_across_captured_and_uncaptured_segments_captures_first() {
        let mut ks = keyspace(20_000);
        let parts = ks.begin_rewrite(1, 3, None);
        let key_in = |range: std::ops::Range<u32>| {
            (0..)
                .map(|i| format!("k{i}"))
                .find(|k| range.contains(&global(k)))
                .map(|k| global(&k))
        };
        let (a, b) = (
            key_in(0..50).expect("a key"),
            key_in(900..1024).expect("a key"),
        );
        // Nothing captured yet: no capture needed.
        ks.capture_before(&[a, b]);
        assert_eq!(ks.captured_early(), 0);
        ks.capture_step(false);
        assert!(ks.capture.is_captured(a) && !ks.capture.is_captured(b));
        ks.logged(5);
        ks.capture_before(&[a, b]);
        assert_eq!(ks.captured_early(), 1);
        assert!(ks.capture.is_captured(b));
        ks.capture_step(true);
        // The worker still gets its range in order, the early segment once.
        let mut all = SegmentQueue::new();
        while parts[0].feed.take(&mut all) {}
        let globals: Vec<u32> = all
            .iter()
            .map(|(db, seg, _)| u32::from(*db) * SEGMENTS_PER_DB as u32 + u32::from(*seg))
            .collect();
        assert!(globals.windows(2).all(|w| w[0] < w[1]), "in global order");
        assert!(globals.contains(&a) && globals.contains(&b));
        let keys: usize = all.iter().map(|(_, _, s)| s.map.len()).sum();
        assert_eq!(keys, 20_000, "every key once");
        let captures = parts[0].feed.captures();
        assert_eq!(captures[b as usize], 5, "captured at the last record");
        assert!(captures.iter().all(|&c| c != NOT_CAPTURED));
    }

    #[test]
    fn a_worker_that_is_gone_is_fed_nothing_more() {
        let mut ks = keyspace(20_000);
        let mut parts = ks.begin_rewrite(2, 3, None);
        let gone = parts.remove(0).range;
        let live = parts[0].range;
        ks.capture_step(false);
        let key_in = |range: SegmentRange| {
            (0..)
                .map(|i| global(&format!("k{i}")))
                .find(|g| (range.start..range.end).contains(g))
                .expect("a key")
        };
        let (a, b) = (key_in(live), key_in(gone));
        let a = if ks.capture.is_captured(a) {
            a
        } else {
            live.start
        };
        assert!(ks.capture.is_captured(a) && !ks.capture.is_captured(b));
        ks.capture_before(&[a, b]);
        assert_eq!(ks.captured_early(), 0, "nothing held for the lost worker");
        ks.capture_step(true);
        let mut all = SegmentQueue::new();
        while parts[0].feed.take(&mut all) {}
        let keys: usize = all.iter().map(|(_, _, s)| s.map.len()).sum();
        assert_eq!(keys as u64, parts[0].keys, "the live worker gets its range");
    }

    #[test]
    fn replay_applies_after_the_capture_skips_before_and_refuses_both() {
        let mut ks = Keyspace::new(1);
        let mut table = vec![0; SEGMENTS_PER_DB];
        table[1] = 10;
        table[2] = 20;
        ks.set_replay_captures(table);
        assert!(ks.replay_needs_decision(20) && !ks.replay_needs_decision(21));
        assert_eq!(ks.replay_decision(&[1, 2], 21), Ok(true));
        assert_eq!(ks.replay_decision(&[1, 2], 10), Ok(false));
        assert_eq!(ks.replay_decision(&[0, 1], 11), Ok(true));
        assert_eq!(ks.replay_decision(&[], 5), Ok(true), "no key: always");
        let err = ks.replay_decision(&[1, 2], 15).expect_err("straddles");
        assert!(err.contains("record 15"), "{err}");
        ks.end_replay_captures();
        assert_eq!(ks.replay_decision(&[1, 2], 15), Ok(true));
    }

    #[test]
    fn a_worker_that_waits_is_fed_once_the_loop_steps() {
        let mut ks = keyspace(3000);
        let woken = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let seen = Arc::clone(&woken);
        let wake: WakeLoop = Arc::new(move || {
            seen.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        });
        let part = ks.begin_rewrite(1, 0, Some(wake)).remove(0);
        let worker = std::thread::spawn(move || {
            let mut all = SegmentQueue::new();
            while part.feed.take(&mut all) {}
            all.iter().map(|(_, _, s)| s.map.len()).sum::<usize>()
        });
        // The loop steps only when the worker asks, as an idle server.
        let mut asked = 0;
        while ks.capturing() {
            while woken.load(std::sync::atomic::Ordering::Relaxed) == asked {
                std::thread::yield_now();
            }
            asked = woken.load(std::sync::atomic::Ordering::Relaxed);
            ks.capture_step(false);
        }
        assert_eq!(worker.join().expect("worker"), 3000);
    }
}
