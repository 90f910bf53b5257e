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
//!
//! **Two clocks never agree for long.** The rate is measured over a few
//! milliseconds, so it is off by a few parts per million at best, and by
//! hundreds when the thread is preempted while it measures; the OS clock
//! is also slewed by NTP. The two therefore drift apart by microseconds
//! per second, and after seconds by more than any charge. So a wait is
//! measured on the counter alone, and the OS clock bounds it only relative
//! to when the wait began (a guard against a counter that jumps), never
//! against a deadline computed from the model's epoch: such a deadline
//! passed early on a counter running slow, and cut every charge to zero a
//! few seconds into a run.

use std::time::{Duration, Instant};

/// How long the start-up measurement of the counter's rate lasts.
#[cfg(target_arch = "x86_64")]
const CALIBRATION: Duration = Duration::from_millis(10);

/// Nanoseconds since the clock was made, cheaply.
#[derive(Debug)]
pub(crate) struct Clock {
    #[cfg(not(target_arch = "x86_64"))]
    epoch: Instant,
    #[cfg(target_arch = "x86_64")]
    base: u64,
    #[cfg(target_arch = "x86_64")]
    ns_per_tick: f64,
}

impl Clock {
    /// A clock starting now; on x86_64 it measures the counter's rate for
    /// about 10 ms.
    pub(crate) fn new() -> Clock {
        #[cfg(target_arch = "x86_64")]
        {
            let (epoch, base) = paired_reading();
            while epoch.elapsed() < CALIBRATION {
                std::hint::spin_loop();
            }
            let (now, ticks) = paired_reading();
            // A counter that did not move is counted as one tick, not a
            // division by zero; its waits then end at the OS clock's bound.
            let counted = ticks.saturating_sub(base).max(1);
            Clock {
                base,
                ns_per_tick: (now - epoch).as_nanos() as f64 / counted as f64,
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        Clock {
            epoch: Instant::now(),
        }
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
        let wait = until.saturating_sub(self.now_ns());
        if wait == 0 {
            return;
        }
        // The OS clock bounds the wait should the counter misbehave (twice
        // the wait, and 50 us for the clocks' disagreement over it),
        // measured from now: see the module comment.
        let bound = Instant::now() + Duration::from_nanos(wait.saturating_mul(2) + 50_000);
        while self.now_ns() < until && Instant::now() < bound {
            std::hint::spin_loop();
        }
    }
}

/// An OS clock reading and the counter at the same moment: the reading
/// bracketed by two counter reads closest together of a few tries (a
/// preemption between them would skew the rate).
#[cfg(target_arch = "x86_64")]
fn paired_reading() -> (Instant, u64) {
    let mut best: Option<(u64, Instant, u64)> = None;
    for _ in 0..16 {
        let before = ticks();
        let now = Instant::now();
        let after = ticks();
        let bracket = after.saturating_sub(before);
        if best.is_none_or(|(width, _, _)| bracket < width) {
            best = Some((bracket, now, before + bracket / 2));
        }
    }
    match best {
        Some((_, now, at)) => (now, at),
        None => (Instant::now(), ticks()),
    }
}

#[cfg(target_arch = "x86_64")]
#[inline]
fn ticks() -> u64 {
    // SAFETY: rdtsc reads a counter; it has no memory effects.
    unsafe { std::arch::x86_64::_rdtsc() }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    /// A clock whose rate is off by `error` (0.01: it reads 1% slow), as a
    /// preempted calibration or a slewed OS clock leave it.
    fn skewed(error: f64) -> Clock {
        let clock = Clock::new();
        Clock {
            ns_per_tick: clock.ns_per_tick * (1.0 - error),
            ..clock
        }
    }

    #[test]
    fn a_wait_lasts_its_length_on_a_clock_drifted_from_the_os_clock() {
        // A clock reading 1% slow lags the OS clock by 1 ms after 100 ms:
        // a wait of 200 us must still last about 200 us (the epoch-based
        // deadline this replaced returned at once).
        let clock = skewed(0.01);
        let (made, counted) = (Instant::now(), clock.now_ns());
        std::thread::sleep(Duration::from_millis(100));
        let lag = made.elapsed().as_nanos() as i128 - i128::from(clock.now_ns() - counted);
        assert!(lag > 500_000, "the skewed clock lags by {lag} ns");
        for _ in 0..3 {
            let start = Instant::now();
            clock.spin_until(clock.now_ns() + 200_000);
            let took = start.elapsed();
            assert!(took >= Duration::from_micros(190), "waited {took:?}");
        }
    }

    #[test]
    fn the_rate_agrees_with_the_os_clock() {
        let clock = Clock::new();
        let (start, counted) = (Instant::now(), clock.now_ns());
        std::thread::sleep(Duration::from_millis(50));
        let os = start.elapsed().as_nanos() as f64;
        let ours = (clock.now_ns() - counted) as f64;
        // Within 1%: a preempted calibration of the old 5 ms window was
        // off by up to 0.03%, a wrong rate by far more.
        assert!(
            (ours / os - 1.0).abs() < 0.01,
            "counter {ours} ns, OS {os} ns"
        );
    }

    #[test]
    fn a_wait_in_the_past_returns_at_once() {
        let clock = Clock::new();
        let start = Instant::now();
        clock.spin_until(0);
        assert!(start.elapsed() < Duration::from_millis(5));
    }
}
