//! The DRAM side of the buffer: slot states, the index logical block →
//! slot, block write locks, and the sequence numbers in flight. Kept under
//! one mutex; nothing here touches PM or the file.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::time::Instant;

/// Sequential streams tracked at once: enough for a writer per core of a
/// large server, each appending to its own file region.
const STREAMS: usize = 64;

/// A run of consecutive blocks being written in order.
#[derive(Clone, Copy, Debug, Default)]
struct Stream {
    /// The block the stream wrote last.
    last: u64,
    /// Consecutive blocks it has written (0: an unused entry).
    blocks: u64,
}

/// What a slot holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SlotState {
    /// Nothing (its PM bytes, if any, are at or below the destage mark).
    Free,
    /// Taken by a writer that is copying into it.
    Writing,
    /// The newest version of its block, not yet in the file.
    Dirty,
    /// Being written to the file by a round; still the newest version.
    Writeback,
    /// Being written by a round, but a newer version exists: freed when
    /// the round ends.
    WritebackSuperseded,
    /// The newest version of its block, already in the synced file.
    Clean,
}

/// One slot's DRAM metadata.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Slot {
    pub state: SlotState,
    pub lbn: u64,
    pub seq: u64,
    pub len: u32,
}

/// What a published write replaced, for the counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Replaced {
    Nothing,
    /// A version not yet destaged, whose bytes are now never written.
    Uncommitted {
        absorbed_bytes: u32,
    },
    /// A version already (or being) destaged.
    Committed,
}

/// The buffer's DRAM state.
#[derive(Debug)]
pub(crate) struct State {
    pub slots: Vec<Slot>,
    free: Vec<u32>,
    /// Candidates for reclaim, oldest first; entries may be stale (checked
    /// when popped).
    clean: VecDeque<u32>,
    pub index: HashMap<u64, u32>,
    locked: HashSet<u64>,
    pub next_seq: u64,
    in_flight: BTreeSet<u64>,
    pub dirty: usize,
    pub writeback: usize,
    /// When the oldest dirty block became dirty (at most).
    pub oldest_dirty: Option<Instant>,
    /// Writers waiting for a slot.
    /// Threads waiting on `Inner::changed` now: the hot paths (a block's
    /// unlock, a publish) signal it only when someone waits, sparing a
    /// futex call per write.
    pub changed_waiters: usize,
    pub space_waiters: usize,
    /// The destage thread waits for work on `Inner::wake`: a writer that
    /// crosses the watermark signals it only then (during a round it would
    /// be a system call for nothing).
    pub destage_idle: bool,
    pub shutdown: bool,
    /// Recent sequential streams, replaced round-robin.
    streams: [Stream; STREAMS],
    next_stream: usize,
    /// A stream counts once it has written this many consecutive blocks.
    stream_min_blocks: u64,
    /// Blocks published by counted streams since the last round started.
    stream_dirty: usize,
    /// `stream_dirty` that calls for a round: a full-depth batch of
    /// merged writes.
    stream_batch: usize,
}

/// When sequential streams start destaging early (see
/// [`State::stream_due`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct StreamPolicy {
    /// Consecutive blocks that make a write sequential (`u64::MAX`: never).
    pub min_blocks: u64,
    /// Stream blocks that make a round due.
    pub batch: usize,
}

impl State {
    /// `slots` free slots; sequence numbers continue after `mark`.
    pub fn new(slots: u32, mark: u64, streams: StreamPolicy) -> State {
        let empty = Slot {
            state: SlotState::Free,
            lbn: 0,
            seq: 0,
            len: 0,
        };
        State {
            slots: vec![empty; slots as usize],
            // Popped from the end: slot 0 first.
            free: (0..slots).rev().collect(),
            clean: VecDeque::new(),
            index: HashMap::new(),
            locked: HashSet::new(),
            next_seq: mark + 1,
            in_flight: BTreeSet::new(),
            dirty: 0,
            writeback: 0,
            oldest_dirty: None,
            space_waiters: 0,
            changed_waiters: 0,
            destage_idle: false,
            shutdown: false,
            streams: [Stream::default(); STREAMS],
            next_stream: 0,
            stream_min_blocks: streams.min_blocks.max(1),
            stream_dirty: 0,
            stream_batch: streams.batch.max(1),
        }
    }

    /// Whether sequential streams have dirtied enough blocks for a round
    /// of full-sized merged writes: a stream's blocks are rarely rewritten
    /// soon (nothing to absorb by waiting), and destaging them as they come
    /// keeps the disk busy from the start of the stream instead of from the
    /// high watermark, and leaves little to drain when it ends.
    pub fn stream_due(&self) -> bool {
        self.stream_dirty >= self.stream_batch
    }

    /// Notes a write of block `lbn`; returns whether it continues a
    /// stream long enough to count as sequential. A rewrite of a stream's
    /// last block (an append growing it) keeps the stream as it is.
    fn note_stream(&mut self, lbn: u64) -> bool {
        let min = self.stream_min_blocks;
        for s in self.streams.iter_mut().filter(|s| s.blocks > 0) {
            if s.last == lbn {
                return s.blocks >= min;
            }
            if s.last.checked_add(1) == Some(lbn) {
                s.last = lbn;
                s.blocks += 1;
                return s.blocks >= min;
            }
        }
        let at = self.next_stream;
        self.next_stream = (at + 1) % STREAMS;
        if let Some(s) = self.streams.get_mut(at) {
            *s = Stream {
                last: lbn,
                blocks: 1,
            };
        }
        min <= 1
    }

    pub fn free_count(&self) -> usize {
        self.free.len()
    }

    pub fn clean_count(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| s.state == SlotState::Clean)
            .count()
    }

    pub fn is_locked(&self, lbn: u64) -> bool {
        self.locked.contains(&lbn)
    }

    /// Takes block `lbn`'s write lock; the caller checked it is free.
    pub fn lock_block(&mut self, lbn: u64) {
        self.locked.insert(lbn);
    }

    pub fn unlock_block(&mut self, lbn: u64) {
        self.locked.remove(&lbn);
    }

    /// The slot holding `lbn`'s newest version and its valid length.
    pub fn lookup(&self, lbn: u64) -> Option<(u32, u32)> {
        let slot = *self.index.get(&lbn)?;
        let len = self.slots.get(slot as usize)?.len;
        Some((slot, len))
    }

    /// A slot to stage into: a free one, else the oldest clean one whose
    /// block is not being written (dropped from the index).
    pub fn take_slot(&mut self) -> Option<u32> {
        if let Some(slot) = self.free.pop() {
            return Some(slot);
        }
        for _ in 0..self.clean.len() {
            let slot = self.clean.pop_front()?;
            let Some(meta) = self.slots.get(slot as usize).copied() else {
                continue;
            };
            if meta.state != SlotState::Clean {
                continue;
            }
            if self.locked.contains(&meta.lbn) {
                self.clean.push_back(slot);
                continue;
            }
            self.index.remove(&meta.lbn);
            self.set_free(slot);
            self.free.pop();
            return Some(slot);
        }
        None
    }

    /// Marks a taken slot as being written with a fresh sequence number.
    pub fn begin_write(&mut self, slot: u32, lbn: u64, len: u32) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.in_flight.insert(seq);
        if let Some(meta) = self.slots.get_mut(slot as usize) {
            *meta = Slot {
                state: SlotState::Writing,
                lbn,
                seq,
                len,
            };
        }
        seq
    }

    /// A write whose copy failed: its slot is free again, its number done.
    pub fn abort_write(&mut self, slot: u32, seq: u64) {
        self.in_flight.remove(&seq);
        self.set_free(slot);
    }

    /// Publishes a persisted slot as its block's newest version.
    pub fn publish(&mut self, slot: u32, seq: u64, now: Instant) -> Replaced {
        self.in_flight.remove(&seq);
        let Some(meta) = self.slots.get_mut(slot as usize) else {
            return Replaced::Nothing;
        };
        meta.state = SlotState::Dirty;
        let lbn = meta.lbn;
        self.dirty += 1;
        if self.note_stream(lbn) {
            self.stream_dirty += 1;
        }
        self.oldest_dirty.get_or_insert(now);
        let Some(old) = self.index.insert(lbn, slot) else {
            return Replaced::Nothing;
        };
        let Some(old_meta) = self.slots.get_mut(old as usize) else {
            return Replaced::Nothing;
        };
        match old_meta.state {
            SlotState::Dirty => {
                let absorbed_bytes = old_meta.len;
                self.dirty -= 1;
                self.set_free(old);
                Replaced::Uncommitted { absorbed_bytes }
            }
            SlotState::Writeback => {
                old_meta.state = SlotState::WritebackSuperseded;
                Replaced::Committed
            }
            SlotState::Clean => {
                self.set_free(old);
                Replaced::Committed
            }
            _ => Replaced::Nothing,
        }
    }

    /// The last sequence number handed out, if every write holding a
    /// number up to it is published; `None` while one is still copying.
    pub fn settled_cutoff(&self) -> Option<u64> {
        let cutoff = self.next_seq - 1;
        match self.in_flight.first() {
            Some(&first) if first <= cutoff => None,
            _ => Some(cutoff),
        }
    }

    /// Moves every dirty slot under writeback; returns (lbn, slot, len),
    /// sorted by block.
    pub fn start_round(&mut self) -> Vec<(u64, u32, u32)> {
        let mut taken: Vec<(u64, u32, u32)> = Vec::with_capacity(self.dirty);
        for (&lbn, &slot) in &self.index {
            if let Some(meta) = self.slots.get(slot as usize) {
                if meta.state == SlotState::Dirty {
                    taken.push((lbn, slot, meta.len));
                }
            }
        }
        for &(_, slot, _) in &taken {
            if let Some(meta) = self.slots.get_mut(slot as usize) {
                meta.state = SlotState::Writeback;
            }
        }
        self.dirty -= taken.len();
        self.writeback += taken.len();
        self.stream_dirty = 0;
        taken.sort_unstable_by_key(|t| t.0);
        taken
    }

    /// Ends a round. `synced`: its blocks are in the synced file (they
    /// become clean); otherwise they are dirty again.
    pub fn end_round(&mut self, taken: &[(u64, u32, u32)], synced: bool, started: Instant) {
        for &(_, slot, _) in taken {
            let Some(meta) = self.slots.get_mut(slot as usize) else {
                continue;
            };
            match (meta.state, synced) {
                (SlotState::Writeback, true) => {
                    meta.state = SlotState::Clean;
                    self.clean.push_back(slot);
                }
                (SlotState::Writeback, false) => {
                    meta.state = SlotState::Dirty;
                    self.dirty += 1;
                    self.oldest_dirty = Some(started);
                }
                (SlotState::WritebackSuperseded, _) => self.set_free(slot),
                _ => {}
            }
        }
        self.writeback -= taken.len();
        if self.dirty == 0 {
            self.oldest_dirty = None;
        } else if synced {
            // What is dirty now was published after the round started.
            self.oldest_dirty = Some(started);
        }
        if self.clean.len() > 2 * self.slots.len() {
            self.rebuild_clean_queue();
        }
    }

    /// Drops block `lbn`'s clean version from the index (write-through
    /// wrote newer bytes to the file).
    pub fn drop_clean(&mut self, lbn: u64) {
        if let Some(&slot) = self.index.get(&lbn) {
            if self.slots.get(slot as usize).map(|s| s.state) == Some(SlotState::Clean) {
                self.index.remove(&lbn);
                self.set_free(slot);
            }
        }
    }

    fn set_free(&mut self, slot: u32) {
        if let Some(meta) = self.slots.get_mut(slot as usize) {
            meta.state = SlotState::Free;
            self.free.push(slot);
        }
    }

    fn rebuild_clean_queue(&mut self) {
        let mut clean: Vec<(u64, u32)> = self
            .slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.state == SlotState::Clean)
            .map(|(i, s)| (s.seq, i as u32))
            .collect();
        clean.sort_unstable();
        self.clean = clean.into_iter().map(|(_, slot)| slot).collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NO_STREAMS: StreamPolicy = StreamPolicy {
        min_blocks: u64::MAX,
        batch: usize::MAX,
    };

    fn publish_block(state: &mut State, lbn: u64) {
        let slot = state.take_slot().expect("free");
        let seq = state.begin_write(slot, lbn, 10);
        state.publish(slot, seq, Instant::now());
    }

    #[test]
    fn a_sequential_stream_makes_a_round_due_after_a_batch() {
        let policy = StreamPolicy {
            min_blocks: 3,
            batch: 4,
        };
        let mut state = State::new(64, 0, policy);
        // Scattered blocks never count.
        for lbn in [40, 10, 30, 20, 50, 0] {
            publish_block(&mut state, lbn);
        }
        assert!(!state.stream_due());
        // Blocks 1.. continue the stream at 0: 1 and 2 bring it to three
        // blocks, so 2, 3 and 4 count.
        for lbn in 1..=4 {
            publish_block(&mut state, lbn);
        }
        assert!(!state.stream_due(), "{}", state.stream_dirty);
        // A rewrite of the stream's last block (an append) counts too.
        publish_block(&mut state, 4);
        assert!(state.stream_due());
        state.start_round();
        assert!(!state.stream_due());
    }

    #[test]
    fn interleaved_streams_are_told_apart() {
        let policy = StreamPolicy {
            min_blocks: 4,
            batch: 16,
        };
        let mut state = State::new(64, 0, policy);
        for i in 0..8u64 {
            for t in 0..4u64 {
                publish_block(&mut state, t * 1000 + i);
            }
        }
        // Four streams of 8 blocks, each counting from its fourth block.
        assert_eq!(state.stream_dirty, 4 * 5);
    }

    #[test]
    fn absorption_frees_the_older_dirty_version() {
        let mut state = State::new(4, 0, NO_STREAMS);
        let now = Instant::now();
        let a = state.take_slot().expect("free");
        let sa = state.begin_write(a, 7, 10);
        assert_eq!(state.publish(a, sa, now), Replaced::Nothing);
        let b = state.take_slot().expect("free");
        let sb = state.begin_write(b, 7, 10);
        assert_eq!(
            state.publish(b, sb, now),
            Replaced::Uncommitted { absorbed_bytes: 10 }
        );
        assert_eq!(state.dirty, 1);
        assert_eq!(state.free_count(), 3);
    }

    #[test]
    fn a_version_under_writeback_is_freed_after_its_round() {
        let mut state = State::new(4, 0, NO_STREAMS);
        let now = Instant::now();
        let a = state.take_slot().expect("free");
        let sa = state.begin_write(a, 1, 10);
        state.publish(a, sa, now);
        assert_eq!(state.settled_cutoff(), Some(1));
        let round = state.start_round();
        let b = state.take_slot().expect("free");
        let sb = state.begin_write(b, 1, 10);
        assert_eq!(state.settled_cutoff(), None);
        assert_eq!(state.publish(b, sb, now), Replaced::Committed);
        assert_eq!(
            state.slots[a as usize].state,
            SlotState::WritebackSuperseded
        );
        state.end_round(&round, true, now);
        assert_eq!(state.slots[a as usize].state, SlotState::Free);
        assert_eq!(state.dirty, 1);
    }

    #[test]
    fn clean_slots_are_reclaimed_unless_their_block_is_locked() {
        let mut state = State::new(1, 0, NO_STREAMS);
        let now = Instant::now();
        let a = state.take_slot().expect("free");
        let sa = state.begin_write(a, 3, 10);
        state.publish(a, sa, now);
        let round = state.start_round();
        state.end_round(&round, true, now);
        state.lock_block(3);
        assert_eq!(state.take_slot(), None);
        state.unlock_block(3);
        assert_eq!(state.take_slot(), Some(a));
        assert!(state.lookup(3).is_none());
    }
}
