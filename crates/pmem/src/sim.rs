//! [`SimPmem`]: persistent memory simulated in DRAM, for crash tests.
//!
//! The simulator keeps two images: the *volatile* one (what loads see, the
//! CPU caches included) and the *persisted* one (what the media holds). Each
//! 64-byte line is in one of three states:
//!
//! - clean: both images agree;
//! - dirty: stored to, not flushed since;
//! - flushed by thread T: a write-back is in flight with the line's contents
//!   at flush time, and it reaches the persisted image at T's next fence
//!   (clflush is ordered by itself, so it persists at once). A store after
//!   the flush makes the line dirty again, on top of the pending write-back.
//!
//! A crash ([`SimPmem::crash_image`]) keeps the persisted image and decides
//! for every line that is not clean what the media got, at random but
//! reproducibly from a seed: nothing, everything, or a tear in which each
//! 8-byte word independently takes one of the values it can have (the
//! persisted one, the pending write-back's, the volatile one). Aligned
//! 8-byte words are never torn, matching the media's failure atomicity.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::ThreadId;

use crate::cpu::{FlushInstruction, CACHE_LINE};
use crate::error::{Error, Result};
use crate::medium::{MapMode, PmemMedium};
use crate::stats::{FlushStats, StatsSink, StoreCounts};

/// The bookkeeping every simulated medium shares for crash points: an event
/// counter, an armed crash (event, seed), and the image it captured.
#[derive(Debug, Default)]
pub struct CrashTrigger {
    events: u64,
    armed: Option<(u64, u64)>,
    captured: Option<Vec<u8>>,
}

impl CrashTrigger {
    /// Mutating events counted so far.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// Counts one event; returns the seed to take an image with if an armed
    /// crash falls on it (the caller images the state *before* applying it).
    pub fn tick(&mut self) -> Option<u64> {
        self.events += 1;
        match self.armed {
            Some((at, seed)) if self.events >= at => {
                self.armed = None;
                Some(seed)
            }
            _ => None,
        }
    }

    /// Arms a crash at event `at_event`; returns the seed to image with now
    /// if that event has already happened.
    pub fn arm(&mut self, at_event: u64, seed: u64) -> Option<u64> {
        if self.events >= at_event {
            return Some(seed);
        }
        self.armed = Some((at_event, seed));
        None
    }

    /// Keeps the image taken for an armed crash.
    pub fn capture(&mut self, image: Vec<u8>) {
        self.captured = Some(image);
    }

    /// The captured image, if the armed crash happened.
    pub fn take(&mut self) -> Option<Vec<u8>> {
        self.captured.take()
    }
}

#[derive(Clone, Debug)]
enum Line {
    Dirty,
    Flushed {
        by: ThreadId,
        snapshot: Box<[u8; CACHE_LINE]>,
        dirty_after: bool,
    },
}

#[derive(Debug)]
struct State {
    volatile: Vec<u8>,
    persisted: Vec<u8>,
    lines: BTreeMap<usize, Line>,
    crash: CrashTrigger,
    grow_limit: Option<usize>,
}

/// Simulated persistent memory with crash images; see the module docs.
#[derive(Debug)]
pub struct SimPmem {
    state: Mutex<State>,
    ordering: FlushInstruction,
    sink: Arc<StatsSink>,
}

impl SimPmem {
    /// A zeroed simulated region of `len` bytes whose flushes behave like
    /// `clwb` (persisted at the flushing thread's next fence).
    pub fn new(len: usize) -> SimPmem {
        SimPmem::from_image(vec![0; len])
    }

    /// A simulated region whose media holds `image`: what recovery sees
    /// after a crash.
    pub fn from_image(image: Vec<u8>) -> SimPmem {
        SimPmem {
            state: Mutex::new(State {
                volatile: image.clone(),
                persisted: image,
                lines: BTreeMap::new(),
                crash: CrashTrigger::default(),
                grow_limit: None,
            }),
            ordering: FlushInstruction::Clwb,
            sink: StatsSink::new(),
        }
    }

    /// Makes flushes behave like `clflush` (persisted at once, no fence
    /// needed) instead of `clwb`.
    pub fn with_self_ordering_flush(mut self) -> SimPmem {
        self.ordering = FlushInstruction::Clflush;
        self
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The media image a power failure now could leave, chosen by `seed`.
    pub fn crash_image(&self, seed: u64) -> Vec<u8> {
        self.lock().crash_image(seed)
    }

    /// The media image if the power failed now and every unflushed store
    /// were lost: the least that must survive.
    pub fn persisted_image(&self) -> Vec<u8> {
        self.lock().persisted.clone()
    }

    /// The volatile image (what loads see now).
    pub fn volatile_image(&self) -> Vec<u8> {
        self.lock().volatile.clone()
    }

    /// Number of mutating events (stores, flushes, fences) so far.
    pub fn events(&self) -> u64 {
        self.lock().crash.events()
    }

    /// Takes a crash image, chosen by `seed`, just before event number
    /// `at_event` happens (or at once if it has passed). Collect it with
    /// [`SimPmem::take_crash_image`]. The run itself goes on unaffected, so
    /// concurrent workloads can be "crashed" at any interleaving.
    pub fn arm_crash(&self, at_event: u64, seed: u64) {
        let mut state = self.lock();
        if let Some(seed) = state.crash.arm(at_event, seed) {
            let image = state.crash_image(seed);
            state.crash.capture(image);
        }
    }

    /// The image captured by [`SimPmem::arm_crash`], if its event came.
    pub fn take_crash_image(&self) -> Option<Vec<u8>> {
        self.lock().crash.take()
    }

    /// Makes growing past `limit` bytes fail with [`Error::NoSpace`], to
    /// test full-media handling.
    pub fn set_grow_limit(&self, limit: Option<usize>) {
        self.lock().grow_limit = limit;
    }

    /// Number of lines not yet persisted (dirty or awaiting a fence).
    pub fn unpersisted_lines(&self) -> usize {
        self.lock().lines.len()
    }

    fn check(state: &State, offset: usize, len: usize) -> Result<()> {
        match offset.checked_add(len) {
            Some(end) if end <= state.volatile.len() => Ok(()),
            _ => Err(Error::OutOfBounds {
                offset,
                len,
                mapped: state.volatile.len(),
            }),
        }
    }

    /// One mutating step: counts the event and takes an armed crash image.
    fn step<'a>(&'a self) -> MutexGuard<'a, State> {
        let mut state = self.lock();
        if let Some(seed) = state.crash.tick() {
            let image = state.crash_image(seed);
            state.crash.capture(image);
        }
        state
    }

    fn store(&self, offset: usize, data: &[u8], flush: bool) -> Result<()> {
        let mut state = self.step();
        SimPmem::check(&state, offset, data.len())?;
        state.volatile[offset..offset + data.len()].copy_from_slice(data);
        state.mark_dirty(offset, data.len());
        drop(state);
        if flush {
            self.flush_lines(offset, data.len())?;
        } else {
            self.sink.record_cached(data.len() as u64);
        }
        Ok(())
    }

    fn flush_lines(&self, offset: usize, len: usize) -> Result<()> {
        let mut state = self.lock();
        SimPmem::check(&state, offset, len)?;
        let me = std::thread::current().id();
        let lines = line_range(offset, len);
        let count = lines.len() as u64;
        for line in lines {
            let Some(current) = state.lines.get(&line).cloned() else {
                continue;
            };
            let needs_write_back = match current {
                Line::Dirty => true,
                Line::Flushed { dirty_after, .. } => dirty_after,
            };
            if !needs_write_back {
                continue;
            }
            let start = line * CACHE_LINE;
            let snapshot = state.volatile_line(line);
            if self.ordering == FlushInstruction::Clflush {
                state.persisted[start..start + CACHE_LINE].copy_from_slice(&snapshot[..]);
                state.lines.remove(&line);
            } else {
                state.lines.insert(
                    line,
                    Line::Flushed {
                        by: me,
                        snapshot,
                        dirty_after: false,
                    },
                );
            }
        }
        drop(state);
        self.sink
            .record_stores(offset, len, StoreCounts::cached(count, len as u64));
        Ok(())
    }
}

/// Indices of the lines overlapping `[offset, offset + len)`.
fn line_range(offset: usize, len: usize) -> std::ops::Range<usize> {
    if len == 0 {
        return 0..0;
    }
    offset / CACHE_LINE..(offset + len).div_ceil(CACHE_LINE)
}

impl State {
    fn volatile_line(&self, line: usize) -> Box<[u8; CACHE_LINE]> {
        let mut snapshot = Box::new([0u8; CACHE_LINE]);
        let start = line * CACHE_LINE;
        let end = (start + CACHE_LINE).min(self.volatile.len());
        snapshot[..end - start].copy_from_slice(&self.volatile[start..end]);
        snapshot
    }

    fn mark_dirty(&mut self, offset: usize, len: usize) {
        for line in line_range(offset, len) {
            match self.lines.get_mut(&line) {
                Some(Line::Flushed { dirty_after, .. }) => *dirty_after = true,
                Some(Line::Dirty) => {}
                None => {
                    self.lines.insert(line, Line::Dirty);
                }
            }
        }
    }

    fn fence(&mut self, me: ThreadId) {
        let ready: Vec<usize> = self
            .lines
            .iter()
            .filter(|(_, line)| matches!(line, Line::Flushed { by, .. } if *by == me))
            .map(|(index, _)| *index)
            .collect();
        for index in ready {
            let Some(Line::Flushed {
                snapshot,
                dirty_after,
                ..
            }) = self.lines.remove(&index)
            else {
                continue;
            };
            let start = index * CACHE_LINE;
            let end = (start + CACHE_LINE).min(self.persisted.len());
            self.persisted[start..end].copy_from_slice(&snapshot[..end - start]);
            if dirty_after {
                self.lines.insert(index, Line::Dirty);
            }
        }
    }

    fn crash_image(&self, seed: u64) -> Vec<u8> {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut image = self.persisted.clone();
        for (&index, line) in &self.lines {
            let start = index * CACHE_LINE;
            let end = (start + CACHE_LINE).min(image.len());
            let pending = match line {
                Line::Flushed { snapshot, .. } => Some(&snapshot[..end - start]),
                Line::Dirty => None,
            };
            let volatile = &self.volatile[start..end];
            match rng.u64(..4) {
                // Nothing of the line reached the media.
                0 => {}
                // The whole current line was evicted.
                1 => image[start..end].copy_from_slice(volatile),
                // The in-flight write-back landed (or, if none, eviction).
                2 => image[start..end].copy_from_slice(pending.unwrap_or(volatile)),
                // Torn at 8-byte granularity.
                _ => {
                    for word in (0..end - start).step_by(8) {
                        let word_end = (word + 8).min(end - start);
                        let source = match (rng.u64(..3), pending) {
                            (0, _) => continue,
                            (1, Some(snapshot)) => &snapshot[word..word_end],
                            _ => &volatile[word..word_end],
                        };
                        image[start + word..start + word_end].copy_from_slice(source);
                    }
                }
            }
        }
        image
    }
}

impl PmemMedium for SimPmem {
    fn len(&self) -> usize {
        self.lock().volatile.len()
    }

    fn grow(&self, new_len: usize) -> Result<()> {
        let mut state = self.lock();
        if new_len <= state.volatile.len() {
            return Ok(());
        }
        if state.grow_limit.is_some_and(|limit| new_len > limit) {
            return Err(Error::NoSpace {
                path: "simulated-pmem".into(),
                len: new_len as u64,
            });
        }
        state.volatile.resize(new_len, 0);
        state.persisted.resize(new_len, 0);
        Ok(())
    }

    fn read(&self, offset: usize, buf: &mut [u8]) -> Result<()> {
        let state = self.lock();
        SimPmem::check(&state, offset, buf.len())?;
        buf.copy_from_slice(&state.volatile[offset..offset + buf.len()]);
        Ok(())
    }

    fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        self.store(offset, data, false)
    }

    fn copy_nodrain(&self, offset: usize, data: &[u8]) -> Result<()> {
        // Non-temporal and flushed cached stores end the same way: in flight
        // until this thread's next fence.
        self.store(offset, data, true)
    }

    fn memset_nodrain(&self, offset: usize, byte: u8, len: usize) -> Result<()> {
        self.store(offset, &vec![byte; len], true)
    }

    fn flush(&self, offset: usize, len: usize) -> Result<()> {
        drop(self.step());
        self.flush_lines(offset, len)
    }

    fn drain(&self) {
        let me = std::thread::current().id();
        self.step().fence(me);
        self.sink.record_fence();
    }

    fn store_u64(&self, offset: usize, value: u64) -> Result<()> {
        if !offset.is_multiple_of(8) {
            return Err(Error::Unaligned { offset });
        }
        self.store(offset, &value.to_le_bytes(), false)
    }

    fn load_u64(&self, offset: usize) -> Result<u64> {
        if !offset.is_multiple_of(8) {
            return Err(Error::Unaligned { offset });
        }
        let mut word = [0u8; 8];
        self.read(offset, &mut word)?;
        Ok(u64::from_le_bytes(word))
    }

    fn mode(&self) -> MapMode {
        MapMode::Simulated
    }

    fn stats(&self) -> FlushStats {
        self.sink.snapshot()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unflushed_stores_may_vanish_persisted_ones_never() {
        let pm = SimPmem::new(4096);
        pm.copy_persist(0, &[7u8; 100]).expect("in bounds");
        pm.write(200, &[9u8; 16]).expect("in bounds");
        let mut lost = false;
        for seed in 0..64 {
            let image = pm.crash_image(seed);
            assert!(image[..100].iter().all(|&b| b == 7));
            lost |= image[200] == 0;
        }
        assert!(lost, "some crash should drop the unflushed store");
        assert_eq!(pm.persisted_image()[200], 0);
    }

    #[test]
    fn a_fence_on_another_thread_does_not_persist_my_flush() {
        let pm = SimPmem::new(4096);
        pm.copy_nodrain(0, &[1u8; 64]).expect("in bounds");
        std::thread::scope(|s| {
            s.spawn(|| pm.drain());
        });
        assert_eq!(pm.persisted_image()[0], 0);
        pm.drain();
        assert_eq!(pm.persisted_image()[0], 1);
    }

    #[test]
    fn clflush_needs_no_fence() {
        let pm = SimPmem::new(4096).with_self_ordering_flush();
        pm.write(64, &[3u8; 8]).expect("in bounds");
        pm.flush(64, 8).expect("in bounds");
        assert_eq!(pm.persisted_image()[64], 3);
    }

    #[test]
    fn store_after_flush_keeps_the_flushed_value_pending() {
        let pm = SimPmem::new(128);
        pm.write(0, &[1u8; 8]).expect("in bounds");
        pm.flush(0, 8).expect("in bounds");
        pm.write(0, &[2u8; 8]).expect("in bounds");
        pm.drain();
        // The fence persisted the flushed value; the later store is dirty.
        assert_eq!(pm.persisted_image()[0], 1);
        assert_eq!(pm.unpersisted_lines(), 1);
    }

    #[test]
    fn armed_crash_captures_the_state_before_the_event() {
        let pm = SimPmem::new(128);
        pm.copy_persist(0, &[5u8; 8]).expect("in bounds");
        let next = pm.events() + 1;
        pm.arm_crash(next, 1);
        pm.copy_persist(8, &[6u8; 8]).expect("in bounds");
        let image = pm.take_crash_image().expect("captured");
        assert_eq!(image[0], 5);
        assert_eq!(image[8], 0);
    }

    #[test]
    fn grow_limit_reports_no_space() {
        let pm = SimPmem::new(64);
        pm.set_grow_limit(Some(128));
        assert!(pm.grow(128).is_ok());
        assert!(matches!(pm.grow(129), Err(Error::NoSpace { .. })));
    }
}
