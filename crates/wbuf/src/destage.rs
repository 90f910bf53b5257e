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

/// A round whose writes have all completed, awaiting its sync and mark.
struct Written {
    taken: Vec<Taken>,
    /// Every write numbered up to this is in the round (or earlier ones).
    cutoff: u64,
    started: Instant,
}

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
        match self.write_next_round()? {
            Some(written) => self.finish_round(written),
            None => Ok(()),
        }
    }

    /// The first half of a round: takes the settled cutoff and every dirty
    /// block, and writes them to the file; `None` when there is nothing to
    /// destage. A failed write ends the round at once (its blocks dirty
    /// again). Called with the destage lock held.
    fn write_next_round(&self) -> Result<Option<Written>> {
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
            return Ok(None);
        }
        if let Err(e) = self.write_round(&taken) {
            self.end_round(&taken, false, started);
            return Err(e);
        }
        tracing::debug!(
            blocks = taken.len(),
            write_ms = started.elapsed().as_secs_f64() * 1e3,
            "destage round written"
        );
        Ok(Some(Written {
            taken,
            cutoff,
            started,
        }))
    }

    /// The second half of a round: `fdatasync`s the file, then persists
    /// the mark; the round's blocks become clean (or, if the sync failed,
    /// dirty again, the buffer poisoned). Every write of the round has
    /// completed before this starts.
    fn finish_round(&self, written: Written) -> Result<()> {
        let Written {
            taken,
            cutoff,
            started,
        } = written;
        let synced = Instant::now();
        let result = self.sync_backing().and_then(|()| {
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
        tracing::debug!(
            blocks = taken.len(),
            sync_ms = synced.elapsed().as_secs_f64() * 1e3,
            total_ms = started.elapsed().as_secs_f64() * 1e3,
            "destage round synced"
        );
        self.end_round(&taken, result.is_ok(), started);
        if result.is_ok() {
            bump(&self.counters.rounds, 1);
        }
        result
    }

    fn end_round(&self, taken: &[Taken], synced: bool, started: Instant) {
        let mut state = lock(&self.state);
        state.end_round(taken, synced, started);
        drop(state);
        self.changed.notify_all();
    }

    /// Rounds back to back while [`Inner::more_rounds`] says so, each
    /// round's writes overlapping the previous round's sync: the disk
    /// receives the next round's data while the file system commits the
    /// last one, instead of idling through every `fdatasync`. The marks
    /// still move in round order, each after its own round's sync (which
    /// follows every write of that round), so the crash argument of a
    /// single round holds (`docs/format.md`, "Overlapped rounds"). Holds
    /// the destage lock throughout, and ends (its last round synced) when
    /// a flush or a write-through asks for the lock.
    pub(crate) fn run_rounds(&self) -> Result<()> {
        let _round = lock(&self.destage_lock);
        let Some(mut pending) = self.write_next_round()? else {
            return Ok(());
        };
        loop {
            let go_on = self.more_rounds() && self.destage_wanted.load(Ordering::Acquire) == 0;
            if !go_on {
                return self.finish_round(pending);
            }
            // The pending round is taken by whichever thread syncs it: a
            // helper, or this thread if no helper can be started.
            let cell = Mutex::new(Some(pending));
            let sync_pending = || match lock(&cell).take() {
                Some(written) => self.finish_round(written),
                None => Ok(()),
            };
            let outcome = std::thread::scope(|scope| {
                let helper = std::thread::Builder::new()
                    .name("wbuf-destage-sync".into())
                    .spawn_scoped(scope, sync_pending);
                match helper {
                    Ok(helper) => {
                        let next = self.write_next_round();
                        let synced = helper.join().unwrap_or_else(|_| {
                            Err(self.poison(Error::Poisoned {
                                path: self.backing.path().to_path_buf(),
                                cause: "the destage sync thread panicked".into(),
                            }))
                        });
                        (synced, next, true)
                    }
                    Err(_) => match sync_pending() {
                        Ok(()) => (Ok(()), self.write_next_round(), false),
                        Err(e) => (Err(e), Ok(None), false),
                    },
                }
            });
            let (synced, next, overlapped) = outcome;
            match (synced, next) {
                (Ok(()), Ok(Some(written))) => {
                    if overlapped {
                        bump(&self.counters.overlapped_rounds, 1);
                    }
                    pending = written;
                }
                (Ok(()), Ok(None)) => return Ok(()),
                (Err(e), Ok(Some(written))) => {
                    // The earlier round failed: this one cannot be marked
                    // (the mark would pass the failed round's blocks).
                    self.end_round(&written.taken, false, written.started);
                    return Err(e);
                }
                (Err(e), _) | (Ok(()), Err(e)) => return Err(e),
            }
        }
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

    /// Whether another round should follow the one just written: the
    /// dirty share is above the low watermark, a writer waits for a slot,
    /// cleaner mode is on, or a sequential stream has dirtied a full
    /// destage batch.
    fn more_rounds(&self) -> bool {
        let state = lock(&self.state);
        let dirty = state.dirty as f64;
        state.dirty > 0
            && (self.cleaner.load(Ordering::Acquire)
                || state.space_waiters > 0
                || state.stream_due()
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
        if let Err(e) = inner.run_rounds() {
            tracing::warn!("destage round failed: {e}");
            std::thread::sleep(RETRY_PAUSE);
        }
    }
}
