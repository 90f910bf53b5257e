//! The flush & sync stage: destage rounds and the thread that runs them.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use ferrite_io::{Error, Result};
use ferrite_pmem::PmemMedium;

use crate::buffer::{lock, Inner};
use crate::direct::DIRECT_ALIGN;
use crate::layout::{Mark, MARK_OFFSET};
use crate::stats::bump;

/// A block taken by a round: (logical block, slot, valid length).
type Taken = (u64, u32, u32);

/// How often an idle destage thread looks at the age of dirty blocks.
const TICK_MAX: Duration = Duration::from_millis(100);
/// Pause after a failed round that did not poison (a full disk), so the
/// thread does not spin on it.
const RETRY_PAUSE: Duration = Duration::from_millis(50);

/// Stores and persists the destage mark again with its `clean` bit (at
/// close, after the last round).
pub(crate) fn persist_mark<M: PmemMedium>(inner: &Inner<M>, clean: bool) -> Result<()> {
    let seq = inner.mark.load(Ordering::Acquire);
    let word = Mark { seq, clean }.encode();
    inner.pm.store_u64(MARK_OFFSET, word)?;
    inner.pm.persist(MARK_OFFSET, 8)?;
    inner.mark.store(seq, Ordering::Release);
    Ok(())
}

impl<M: PmemMedium> Inner<M> {
    /// One round: every dirty block up to the settled cutoff goes to the
    /// file (adjacent blocks merged), the file is synced, then the mark is
    /// persisted. Called with the destage lock held.
    pub(crate) fn round(&self) -> Result<()> {
        self.check_poison()?;
        let mut state = lock(&self.state);
        let cutoff = loop {
            if let Some(cutoff) = state.settled_cutoff() {
                break cutoff;
            }
            state = self.wait_changed(state);
        };
        let taken = state.start_round();
        drop(state);
        let started = Instant::now();
        if taken.is_empty() && cutoff <= self.mark.load(Ordering::Acquire) {
            return Ok(());
        }
        let written = self.write_round(&taken);
        let wrote = started.elapsed();
        let written = written.and_then(|()| self.sync_backing());
        tracing::debug!(
            blocks = taken.len(),
            write_ms = wrote.as_secs_f64() * 1e3,
            total_ms = started.elapsed().as_secs_f64() * 1e3,
            "destage round"
        );
        let result = written.and_then(|()| {
            let word = Mark {
                seq: cutoff,
                clean: false,
            }
            .encode();
            self.pm.store_u64(MARK_OFFSET, word)?;
            self.pm.persist(MARK_OFFSET, 8)?;
            self.mark.store(cutoff, Ordering::Release);
            Ok(())
        });
        let mut state = lock(&self.state);
        state.end_round(&taken, result.is_ok(), started);
        drop(state);
        self.changed.notify_all();
        if result.is_ok() {
            bump(&self.counters.rounds, 1);
        }
        result
    }

    /// Cuts the round's blocks (sorted by block) into runs of adjacent
    /// blocks, each at most `destage_io_bytes`.
    fn runs<'a>(&self, taken: &'a [Taken]) -> Vec<&'a [Taken]> {
        let run_max = (self.config.destage_io_bytes / self.block() as usize).max(1);
        let mut runs = Vec::new();
        let mut i = 0;
        while i < taken.len() {
            let mut j = i;
            while j + 1 < taken.len() && taken[j + 1].0 == taken[j].0 + 1 && j + 1 - i < run_max {
                j += 1;
            }
            runs.push(&taken[i..=j]);
            i = j + 1;
        }
        runs
    }

    /// Writes the round's blocks to the file, `destage_depth` runs in
    /// flight: this thread and helpers each take the next run until none is
    /// left or one fails. The order of the runs within a round does not
    /// matter: the file is synced, and the mark moved, only after all of
    /// them (`docs/format.md`).
    fn write_round(&self, taken: &[Taken]) -> Result<()> {
        let runs = self.runs(taken);
        let Some(last) = runs.last() else {
            return Ok(());
        };
        let depth = self.config.destage_depth.clamp(1, runs.len());
        if let (Some(direct), true) = (self.direct.as_ref(), depth > 1) {
            let (lbn, _, len) = last[last.len() - 1];
            direct.preallocate(lbn * self.block() + u64::from(len))?;
        }
        let next = AtomicUsize::new(0);
        let failed: Mutex<Option<Error>> = Mutex::new(None);
        let work = || {
            let mut buf = Vec::new();
            loop {
                if lock(&failed).is_some() {
                    return;
                }
                let Some(run) = runs.get(next.fetch_add(1, Ordering::AcqRel)) else {
                    return;
                };
                if let Err(e) = self.write_run(run, &mut buf) {
                    lock(&failed).get_or_insert(e);
                    return;
                }
            }
        };
        std::thread::scope(|scope| {
            for _ in 1..depth {
                let spawned = std::thread::Builder::new()
                    .name("wbuf-destage-io".into())
                    .spawn_scoped(scope, work);
                if spawned.is_err() {
                    // Fewer helpers only lowers the depth.
                    break;
                }
            }
            work();
        });
        match failed.into_inner().unwrap_or_else(PoisonError::into_inner) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Writes one run: with `O_DIRECT` when its blocks are whole and
    /// aligned, else with a buffered write of the bytes copied into `buf`.
    fn write_run(&self, run: &[Taken], buf: &mut Vec<u8>) -> Result<()> {
        let block = self.block() as usize;
        let offset = run[0].0 * self.block();
        let last_len = run[run.len() - 1].2 as usize;
        let bytes = (run.len() - 1) * block + last_len;
        let direct = self
            .direct
            .as_ref()
            .filter(|_| block.is_multiple_of(DIRECT_ALIGN) && last_len == block);
        if let Some(direct) = direct {
            let whole = run.iter().all(|t| t.2 as usize == block);
            let ranges: Vec<(usize, usize)> = run
                .iter()
                .map(|t| (self.geometry.data_at(t.1), block))
                .collect();
            direct.write_run(&self.pm, offset, &ranges, whole, |out| {
                self.fill_run(run, out)
            })?;
        } else {
            buf.clear();
            buf.resize(bytes, 0);
            self.fill_run(run, buf)?;
            self.backing.write_at(offset, buf)?;
        }
        bump(&self.counters.ssd_bytes, bytes as u64);
        Ok(())
    }

    /// Copies a run's images from PM into `out`, one block apart. A short
    /// image inside a run is followed by zeros (those bytes read as zero on
    /// the device too); `out` ends with the last image.
    fn fill_run(&self, run: &[Taken], out: &mut [u8]) -> Result<()> {
        let block = self.block() as usize;
        for (k, &(_, slot, len)) in run.iter().enumerate() {
            let at = k * block;
            let len = len as usize;
            let end = (at + block).min(out.len());
            let (image, rest) = out[at..end].split_at_mut(len.min(end - at));
            self.pm.read(self.geometry.data_at(slot), image)?;
            rest.fill(0);
        }
        Ok(())
    }

    /// Whether the destage thread has a round to run now.
    fn due(&self, state: &crate::state::State) -> bool {
        if self.should_wake(state) {
            return true;
        }
        match (self.config.max_age, state.oldest_dirty) {
            (Some(age), Some(since)) => state.dirty > 0 && since.elapsed() >= age,
            _ => false,
        }
    }

    /// Whether rounds should go on after one ended.
    fn above_low_watermark(&self) -> bool {
        let state = lock(&self.state);
        let dirty = state.dirty as f64;
        state.dirty > 0
            && (self.cleaner.load(Ordering::Acquire)
                || state.space_waiters > 0
                || dirty > self.config.low_watermark * self.geometry.slots as f64)
    }
}

/// The destage thread: waits for a reason to destage, then runs rounds
/// until the dirty share is at the low watermark; stops at shutdown (the
/// closing thread runs the last round).
pub(crate) fn run<M: PmemMedium>(inner: &Inner<M>) {
    let tick = inner.config.max_age.map_or(TICK_MAX, |age| {
        (age / 2).clamp(Duration::from_millis(1), TICK_MAX)
    });
    loop {
        let mut state = lock(&inner.state);
        while !state.shutdown && (inner.poisoned.load(Ordering::Acquire) || !inner.due(&state)) {
            state.destage_idle = true;
            state = inner
                .wake
                .wait_timeout(state, tick)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
            state.destage_idle = false;
        }
        if state.shutdown {
            return;
        }
        drop(state);
        loop {
            let result = {
                let _round = lock(&inner.destage_lock);
                inner.round()
            };
            if let Err(e) = result {
                tracing::warn!("destage round failed: {e}");
                std::thread::sleep(RETRY_PAUSE);
                break;
            }
            if !inner.above_low_watermark() {
                break;
            }
        }
    }
}
