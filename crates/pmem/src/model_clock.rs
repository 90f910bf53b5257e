//! The media model's clock: the time-stamp counter, read without ordering.
//!
//! The model reads the time right after a thread's flushes, before its
//! fence. Reading it through the OS (`clock_gettime`, which orders the read
//! after earlier instructions) made the thread wait there for the flushed
//! lines, and then again at the fence: in a virtual machine that doubled a
//! random 64-byte persist's host cost, which the model would then have
//! reported as the media's. A plain `rdtsc` is not ordered after the
//! flushes, so the thread waits for them once, at its fence, as without
//! the model. Its ticks are converted with a rate measured at start-up
//! against the OS clock (the counter is invariant on every x86_64 CPU with
//! the persistence instructions this crate uses).

use std::time::{Duration, Instant};

/// Nanoseconds since the clock was made, cheaply.
#[derive(Debug)]
pub(crate) struct Clock {
    epoch: Instant,
    #[cfg(target_arch = "x86_64")]
    base: u64,
    #[cfg(target_arch = "x86_64")]
    ns_per_tick: f64,
}

impl Clock {
    /// A clock starting now; on x86_64 it measures the counter's rate for
    /// about 5 ms.
    pub(crate) fn new() -> Clock {
        let epoch = Instant::now();
        #[cfg(target_arch = "x86_64")]
        {
            let base = ticks();
            let mut elapsed = epoch.elapsed();
            while elapsed < Duration::from_millis(5) {
                std::hint::spin_loop();
                elapsed = epoch.elapsed();
            }
            let counted = ticks().saturating_sub(base).max(1);
            Clock {
                epoch,
                base,
                ns_per_tick: elapsed.as_nanos() as f64 / counted as f64,
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        Clock { epoch }
    }

    /// Nanoseconds since the clock was made.
    #[inline]
    pub(crate) fn now_ns(&self) -> u64 {
        #[cfg(target_arch = "x86_64")]
        {
            (ticks().saturating_sub(self.base) as f64 * self.ns_per_tick) as u64
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            self.epoch.elapsed().as_nanos() as u64
        }
    }

    /// Busy-waits until `until` ns since the clock was made: the thread
    /// stays on its core, as it would stalled on a fence.
    pub(crate) fn spin_until(&self, until: u64) {
        // The OS clock bounds the wait too, should the counter misbehave.
        let deadline = self.epoch + Duration::from_nanos(until);
        while self.now_ns() < until && Instant::now() < deadline {
            std::hint::spin_loop();
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[inline]
fn ticks() -> u64 {
    // SAFETY: rdtsc reads a counter; it has no memory effects.
    unsafe { std::arch::x86_64::_rdtsc() }
}
