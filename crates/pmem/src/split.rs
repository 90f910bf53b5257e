//! Large persists split with a helper thread.
//!
//! From a few hundred KiB up a persist streams more bytes than one core's
//! caches hold, and two cores move them faster than one (two 1 MiB
//! copies side by side moved 1.6-1.75 times the bytes of one; figures in
//! docs/results/pmem-persist.md). So `copy_persist` of at least [`Dispatch::split_min`] bytes hands the
//! second half of the range, cut at a cache line, to one helper thread,
//! copies the first half itself, and returns when both halves are fenced.
//! Smaller copies lose by it (the hand-over costs more than half the copy
//! saves): see docs/pmem.md, "Splitting large persists", for the sweep.
//!
//! The protocol never makes the caller wait for a helper that has not
//! started: the caller posts the job, copies its half, then takes the job
//! back if the helper has not claimed it yet (a helper that is parked, busy
//! for another region, preempted, or absent after a `fork`) and copies that
//! half too. Only a helper that already runs the job is waited for, and it
//! finishes at about the time the caller does. One helper serves the whole
//! process; a caller that finds it taken by another thread copies alone.
//!
//! The helper spins for [`SPIN`] after each job before it parks, so
//! back-to-back large persists (a checkpoint, a log rewrite) hand over in
//! a cache-line transfer rather than a wake-up; an idle process pays one
//! parked thread.
//!
//! Ordering: the helper fences its own stores (`sfence` on its core) before
//! it publishes `DONE` with release ordering; the caller reads `DONE` with
//! acquire ordering, then fences its own half. So when `copy_persist`
//! returns, both halves are in the persistence domain, as one thread's copy
//! and fence would leave them. The helper's fence is counted with the rest.

use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::thread::Thread;
use std::time::{Duration, Instant};

use crate::arch;
use crate::cpu::{Dispatch, CACHE_LINE};
use crate::stats::StoreCounts;

/// How long the helper keeps polling for the next job before it parks.
const SPIN: Duration = Duration::from_micros(200);

/// Job slot states.
const IDLE: u32 = 0;
const POSTED: u32 = 1;
const RUNNING: u32 = 2;
const DONE: u32 = 3;

/// The job slot: all a hand-over moves between the cores, in one cache
/// line (the job, its state, and the helper's counts back). A first
/// version with a mutex for the job and another for the counts measured
/// the same at 64 KiB and 1 MiB; this one has no lock to poison.
#[repr(align(64))]
struct Slot {
    state: AtomicU32,
    dst: AtomicPtr<u8>,
    src: AtomicPtr<u8>,
    len: AtomicUsize,
    dispatch: AtomicPtr<Dispatch>,
    lines_flushed: AtomicU64,
    bytes_nt: AtomicU64,
    bytes_cached: AtomicU64,
}

/// What callers touch to find the helper, apart from the slot.
#[repr(align(64))]
struct Control {
    /// Held by the caller that owns the slot (try-lock).
    claimed: AtomicBool,
    /// Set while the helper is (about to be) parked.
    sleeping: AtomicBool,
    thread: OnceLock<Thread>,
}

/// The process's one helper.
struct Helper {
    slot: Slot,
    control: Control,
}

impl Helper {
    fn run(&self) {
        let slot = &self.slot;
        loop {
            self.wait_for_job();
            // Relaxed: `post` stored these before its release of POSTED,
            // which `wait_for_job` acquired.
            let (dst, src, len) = (
                slot.dst.load(Ordering::Relaxed),
                slot.src.load(Ordering::Relaxed),
                slot.len.load(Ordering::Relaxed),
            );
            let dispatch = slot.dispatch.load(Ordering::Relaxed);
            // SAFETY: the poster keeps both ranges and the dispatch valid,
            // and the ranges disjoint from its own half, until it sees
            // `DONE`; it cannot take a RUNNING job back.
            let counts = unsafe { arch::copy_nodrain(&*dispatch, dst, src, len) };
            arch::fence();
            slot.lines_flushed
                .store(counts.lines_flushed, Ordering::Relaxed);
            slot.bytes_nt.store(counts.bytes_nt, Ordering::Relaxed);
            slot.bytes_cached
                .store(counts.bytes_cached, Ordering::Relaxed);
            slot.state.store(DONE, Ordering::Release);
        }
    }

    /// Returns once this thread has claimed a posted job.
    fn wait_for_job(&self) {
        let (slot, control) = (&self.slot, &self.control);
        let mut since = Instant::now();
        let mut polls = 0u32;
        loop {
            if slot.state.load(Ordering::Acquire) == POSTED
                && slot
                    .state
                    .compare_exchange(POSTED, RUNNING, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                return;
            }
            polls = polls.wrapping_add(1);
            if polls.is_multiple_of(64) && since.elapsed() > SPIN {
                // Paired with `post`: either the poster sees `sleeping` and
                // unparks, or this sees the job before parking.
                control.sleeping.store(true, Ordering::SeqCst);
                if slot.state.load(Ordering::SeqCst) != POSTED {
                    std::thread::park();
                }
                control.sleeping.store(false, Ordering::SeqCst);
                since = Instant::now();
            } else {
                std::hint::spin_loop();
            }
        }
    }

    fn post(&self, dispatch: &Dispatch, dst: *mut u8, src: *const u8, len: usize) {
        let slot = &self.slot;
        slot.dst.store(dst, Ordering::Relaxed);
        slot.src.store(src.cast_mut(), Ordering::Relaxed);
        slot.len.store(len, Ordering::Relaxed);
        slot.dispatch
            .store(std::ptr::from_ref(dispatch).cast_mut(), Ordering::Relaxed);
        slot.state.store(POSTED, Ordering::SeqCst);
        if self.control.sleeping.load(Ordering::SeqCst) {
            if let Some(thread) = self.control.thread.get() {
                thread.unpark();
            }
        }
    }

    /// Takes the posted job back if the helper has not claimed it.
    fn take_back(&self) -> bool {
        self.slot
            .state
            .compare_exchange(POSTED, IDLE, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Waits for the claimed job, frees the slot, and returns its counts.
    fn finish(&self) -> StoreCounts {
        let slot = &self.slot;
        let waited = Instant::now();
        while slot.state.load(Ordering::Acquire) != DONE {
            // The helper is running the job and nothing it does can block;
            // if it was preempted, give it the core.
            if waited.elapsed() > SPIN {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
        let counts = StoreCounts {
            lines_flushed: slot.lines_flushed.load(Ordering::Relaxed),
            bytes_nt: slot.bytes_nt.load(Ordering::Relaxed),
            bytes_cached: slot.bytes_cached.load(Ordering::Relaxed),
        };
        slot.state.store(IDLE, Ordering::Release);
        counts
    }
}

/// Persists handed in part to the helper (posted, whether or not the
/// helper claimed its half), for reports: a workload's count says whether
/// the split touched it at all.
static POSTED_JOBS: AtomicU64 = AtomicU64::new(0);

/// How many persists this process has split with the helper so far (see
/// [`POSTED_JOBS`]).
pub fn split_persists() -> u64 {
    POSTED_JOBS.load(Ordering::Relaxed)
}

/// The helper, started on first use; `None` on a single-CPU machine or if
/// the thread cannot be started (then every copy runs on its caller).
fn helper() -> Option<&'static Helper> {
    static HELPER: OnceLock<Option<&'static Helper>> = OnceLock::new();
    *HELPER.get_or_init(|| {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        if cpus < 2 {
            return None;
        }
        let helper: &'static Helper = Box::leak(Box::new(Helper {
            slot: Slot {
                state: AtomicU32::new(IDLE),
                dst: AtomicPtr::new(std::ptr::null_mut()),
                src: AtomicPtr::new(std::ptr::null_mut()),
                len: AtomicUsize::new(0),
                dispatch: AtomicPtr::new(std::ptr::null_mut()),
                lines_flushed: AtomicU64::new(0),
                bytes_nt: AtomicU64::new(0),
                bytes_cached: AtomicU64::new(0),
            },
            control: Control {
                claimed: AtomicBool::new(false),
                sleeping: AtomicBool::new(false),
                thread: OnceLock::new(),
            },
        }));
        match std::thread::Builder::new()
            .name("pmem-split".into())
            .spawn(move || helper.run())
        {
            Ok(handle) => {
                let _ = helper.control.thread.set(handle.thread().clone());
                Some(helper)
            }
            Err(err) => {
                tracing::warn!("large persists stay on one thread: cannot start a helper: {err}");
                None
            }
        }
    })
}

/// What a split copy did: the stores of both halves, and whether the
/// helper ran its half (and so fenced once on its own core).
pub(crate) struct Split {
    pub counts: StoreCounts,
    pub helper_fenced: bool,
}

/// Copies `len` bytes as [`arch::copy_nodrain`] does, the second half on the
/// helper thread when it is free. The helper's half is fenced on return;
/// the caller's half needs the caller's fence as usual.
///
/// # Safety
/// As [`arch::copy_nodrain`].
pub(crate) unsafe fn copy_nodrain(
    dispatch: &Dispatch,
    dst: *mut u8,
    src: *const u8,
    len: usize,
) -> Split {
    let alone = |dst, src, len| Split {
        // SAFETY: forwarded from the caller.
        counts: unsafe { arch::copy_nodrain(dispatch, dst, src, len) },
        helper_fenced: false,
    };
    let Some(helper) = helper() else {
        return alone(dst, src, len);
    };
    if helper
        .control
        .claimed
        .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        return alone(dst, src, len);
    }
    // Cut at a cache line of the destination, so neither half flushes a
    // line the other writes.
    let middle = ((dst as usize + len / 2) & !(CACHE_LINE - 1)).saturating_sub(dst as usize);
    // SAFETY: `middle <= len`, so both halves lie inside the caller's ranges.
    let (dst_b, src_b) = unsafe { (dst.add(middle), src.add(middle)) };
    helper.post(dispatch, dst_b, src_b, len - middle);
    POSTED_JOBS.fetch_add(1, Ordering::Relaxed);
    // SAFETY: the first `middle` bytes of the caller's ranges.
    let mut counts = unsafe { arch::copy_nodrain(dispatch, dst, src, middle) };
    let (rest, helper_fenced) = if helper.take_back() {
        // SAFETY: the helper never claimed the second half; it is ours.
        (
            unsafe { arch::copy_nodrain(dispatch, dst_b, src_b, len - middle) },
            false,
        )
    } else {
        (helper.finish(), true)
    };
    helper.control.claimed.store(false, Ordering::Release);
    counts += rest;
    Split {
        counts,
        helper_fenced,
    }
}
