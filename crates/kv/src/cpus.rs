//! CPU affinity, as Redis's `server_cpulist` and `aof_rewrite_cpulist`
//! configure it.
//!
//! A list is Redis's syntax: comma-separated items, each a CPU (`3`), a
//! range (`0-7`) or a range with a stride (`0-7:2` = 0, 2, 4, 6). An empty
//! list leaves the affinity alone.
//!
//! `server_cpulist` pins the event loop when it starts. Threads started
//! from the loop later would inherit that set, so the rewrite's threads
//! set their own: `aof_rewrite_cpulist`, or else the set the process
//! started with ([`original`]). The log's threads start before the loop
//! pins itself.
//!
//! [`Unstack`] moves an unpinned event loop off a core where it keeps
//! waiting behind another thread.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use rustix::thread::CpuSet;

/// Parses a Redis CPU list; `Ok(None)` for an empty one.
pub fn parse(text: &str) -> Result<Option<Vec<usize>>, String> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    let number = |s: &str| -> Result<usize, String> {
        s.parse::<usize>()
            .ok()
            .filter(|&n| n < CpuSet::MAX_CPU)
            .ok_or_else(|| format!("bad CPU {s:?} (0 to {})", CpuSet::MAX_CPU - 1))
    };
    let mut cpus = Vec::new();
    for item in text.split(',') {
        let (range, stride) = match item.split_once(':') {
            Some((range, stride)) => (range, number(stride)?),
            None => (item, 1),
        };
        let (first, last) = match range.split_once('-') {
            Some((a, b)) => (number(a)?, number(b)?),
            None => {
                let cpu = number(range)?;
                (cpu, cpu)
            }
        };
        if stride == 0 || first > last {
            return Err(format!("bad CPU range {item:?}"));
        }
        cpus.extend((first..=last).step_by(stride));
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(Some(cpus))
}

/// The CPU set the process started with, read on first use (call it
/// before pinning anything).
pub fn original() -> Option<&'static CpuSet> {
    static ORIGINAL: OnceLock<Option<CpuSet>> = OnceLock::new();
    ORIGINAL
        .get_or_init(|| rustix::thread::sched_getaffinity(None).ok())
        .as_ref()
}

/// The CPUs the calling thread may run on, in order; `None` where its
/// affinity is unreadable.
pub fn current_cpus() -> Option<Vec<usize>> {
    let set = rustix::thread::sched_getaffinity(None).ok()?;
    Some((0..CpuSet::MAX_CPU).filter(|&c| set.is_set(c)).collect())
}

/// Pins the calling thread to `cpus`.
pub fn pin_current_thread(cpus: &[usize]) -> std::io::Result<()> {
    let mut set = CpuSet::new();
    for &cpu in cpus {
        set.set(cpu);
    }
    set_current_thread(&set)
}

/// Gives the calling thread `set`.
pub(crate) fn set_current_thread(set: &CpuSet) -> std::io::Result<()> {
    rustix::thread::sched_setaffinity(None, set).map_err(std::io::Error::from)
}

/// Gives the calling thread `cpus` if given, else the process's original
/// set; logs rather than fails (affinity is a placement hint).
pub fn place_current_thread(cpus: Option<&[usize]>, what: &str) {
    let result = match cpus {
        Some(cpus) => pin_current_thread(cpus),
        None => original().map_or(Ok(()), set_current_thread),
    };
    if let Err(e) = result {
        tracing::warn!("cannot set the CPU affinity of the {what}: {e}");
    }
}

/// The calling thread's total time runnable but not running, from
/// `/proc/thread-self/schedstat` (its second field, in nanoseconds);
/// `None` where that file is unreadable.
pub fn run_queue_wait() -> Option<Duration> {
    thread_sched_times().map(|(_, waited)| waited)
}

/// The calling thread's CPU time so far, from its CPU-time clock, which
/// is exact at any moment (`schedstat` is brought up to date only at a
/// tick or a context switch: up to 4 ms behind on a thread that runs).
pub fn thread_cpu_time() -> Option<Duration> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
        let secs = u64::try_from(t.tv_sec).ok()?;
        let nanos = u32::try_from(t.tv_nsec).ok()?;
        Some(Duration::new(secs, nanos))
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    None
}

/// The calling thread's total time on a core and time runnable but not
/// running, from `/proc/thread-self/schedstat` (nanoseconds); `None` where
/// that file is unreadable.
pub fn thread_sched_times() -> Option<(Duration, Duration)> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let mut fields = text.split_whitespace().map(|f| f.parse::<u64>().ok());
    let ran = fields.next()??;
    let waited = fields.next()??;
    Some((Duration::from_nanos(ran), Duration::from_nanos(waited)))
}

/// How often [`Unstack`] looks at the event loop's run-queue wait. Over
/// 50 ms the two cases it must tell apart do not overlap (1M x 1 KiB,
/// a load pinned to core 1, the loop's `schedstat` read every 10 ms): a
/// loop stacked on its client's core waited 15-39% of every 10 ms,
/// rewrite or not, while a loop on a core of its own, during a rewrite
/// whose `SCHED_IDLE` workers it preempts at each wake-up, waited 10% or
/// more in 7% of its 10 ms periods but 20% or more in under 1% of its
/// 50 ms ones.
pub const UNSTACK_PERIOD: Duration = Duration::from_millis(50);

/// The share of a period, in percent, the loop may spend runnable but not
/// running before [`Unstack`] moves it to another core.
pub const UNSTACK_WAIT_PERCENT: u32 = 20;

/// The longest [`Unstack`] waits before trying again after moves that did
/// not help (a machine with more busy threads than cores).
pub const UNSTACK_MAX_BACKOFF: Duration = Duration::from_secs(1);

/// Moves the calling thread (the event loop) to another of its allowed
/// cores when it spent [`UNSTACK_WAIT_PERCENT`] of the last
/// [`UNSTACK_PERIOD`] waiting for the one it is on, and keeps it off that
/// core until the next move.
///
/// Linux places a waking thread on an idle core, but on a small machine
/// whose cores look busy on average it skips the search for one
/// (`SIS_UTIL`): once the loop has been woken onto its client's core (say
/// while its own briefly ran another normal thread), every later wake-up
/// by that client finds the loop's previous core and the client's the
/// same and queues the loop there. The two then take turns on one core
/// for as long as the load lasts, while the other core idles or runs only
/// `SCHED_IDLE` rewrite workers (`perf sched`, one client per core: the loop stacked
/// on the client's core both before rewrites and at their start, 21-23 ms
/// of every 50 ms on a core and 10-19 ms queued, against 40-46 ms and
/// none once on its own). A move takes the core out of the loop's set
/// and leaves it out: when the set was given back at once, the next
/// unlucky wake-up stacked the loop again, and runs of 1M x 1 KiB spent
/// whole steady phases or rewrites stacked (idle time 400-490 ms/s
/// against 260-330, 45-55k SET/s against 70-85k).
///
/// A move that does not end the waiting (more busy threads than cores)
/// doubles the time before the next, up to [`UNSTACK_MAX_BACKOFF`].
#[derive(Debug)]
pub struct Unstack {
    /// The cores the loop may use (its set when it started serving);
    /// each move gives it all of them but the one it waited on.
    base: Option<CpuSet>,
    last: Option<(Instant, Duration)>,
    backoff: Duration,
    /// When the next move may come; set by a move, cleared by a period
    /// without waiting.
    next_move: Option<Instant>,
}

impl Default for Unstack {
    fn default() -> Unstack {
        Unstack {
            base: None,
            last: None,
            backoff: UNSTACK_PERIOD,
            next_move: None,
        }
    }
}

/// What [`Unstack::decide`] found in one period.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Not yet a whole period since the last look.
    Early,
    /// The loop did not wait much: nothing to do.
    Fine,
    /// It waited, but a move is not due yet (back-off).
    Waiting,
    /// It waited: move it now.
    Move,
}

impl Unstack {
    /// For the calling thread: its moves stay within the set it has now
    /// (a loop pinned to one core by `server_cpulist` is never moved).
    pub fn for_current_thread() -> Unstack {
        Unstack {
            base: rustix::thread::sched_getaffinity(None).ok(),
            ..Unstack::default()
        }
    }

    /// Looks at the loop's run-queue wait at most once per
    /// [`UNSTACK_PERIOD`] and moves the thread if it kept waiting;
    /// returns whether it moved it.
    pub fn check(&mut self, now: Instant) -> bool {
        if self
            .last
            .is_some_and(|(at, _)| now.saturating_duration_since(at) < UNSTACK_PERIOD)
        {
            return false;
        }
        let Some(base) = self.base else {
            return false;
        };
        let Some(waited) = run_queue_wait() else {
            return false;
        };
        if self.decide(now, waited) != Verdict::Move {
            return false;
        }
        move_off_this_core(&base)
    }

    /// The decision for a reading of `waited` (the thread's total run-queue
    /// wait) at `now`, and the bookkeeping for the next one, assuming a
    /// [`Verdict::Move`] is carried out.
    pub fn decide(&mut self, now: Instant, waited: Duration) -> Verdict {
        let Some((at, before)) = self.last.replace((now, waited)) else {
            return Verdict::Fine;
        };
        let period = now.saturating_duration_since(at);
        if period < UNSTACK_PERIOD {
            self.last = Some((at, before));
            return Verdict::Early;
        }
        if !queued_too_long(period, waited.saturating_sub(before)) {
            self.backoff = UNSTACK_PERIOD;
            self.next_move = None;
            return Verdict::Fine;
        }
        match self.next_move {
            Some(due) if now < due => return Verdict::Waiting,
            // Still waiting since the last move: it did not help; wait
            // longer before the next one.
            Some(_) => self.backoff = (self.backoff * 2).min(UNSTACK_MAX_BACKOFF),
            None => {}
        }
        self.next_move = Some(now + self.backoff);
        Verdict::Move
    }
}

/// Whether `waited` out of `period` is [`UNSTACK_WAIT_PERCENT`] or more.
fn queued_too_long(period: Duration, waited: Duration) -> bool {
    !period.is_zero() && waited * 100 >= period * UNSTACK_WAIT_PERCENT
}

/// Gives the calling thread every core of `base` but the one it is on,
/// which makes the kernel move it at once, and leaves it that set; false
/// when `base` has fewer than two cores, does not hold the current one
/// (someone else set the affinity), or the call fails.
fn move_off_this_core(base: &CpuSet) -> bool {
    let here = rustix::thread::sched_getcpu();
    if base.count() < 2 || !base.is_set(here) {
        return false;
    }
    let mut elsewhere = *base;
    elsewhere.unset(here);
    set_current_thread(&elsewhere).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `percent` of a period, as a wait.
    fn share(percent: u32) -> Duration {
        UNSTACK_PERIOD * percent / 100
    }

    #[test]
    fn the_loop_moves_when_it_waited_its_share_of_a_period_and_backs_off_when_that_did_not_help() {
        let p = UNSTACK_PERIOD;
        let mut u = Unstack::default();
        let t0 = Instant::now();
        assert_eq!(u.decide(t0, Duration::ZERO), Verdict::Fine);
        assert_eq!(u.decide(t0 + p / 2, share(40)), Verdict::Early);
        // Just under the share in a whole period: fine.
        let under = share(UNSTACK_WAIT_PERCENT) - Duration::from_micros(1);
        assert_eq!(u.decide(t0 + p, under), Verdict::Fine);
        // The share in the next period: move.
        let w = under + share(UNSTACK_WAIT_PERCENT);
        assert_eq!(u.decide(t0 + 2 * p, w), Verdict::Move);
        // Still waiting a period later: the move did not help, so the next
        // is due two periods after this one, then four, ...
        let half = share(50);
        assert_eq!(u.decide(t0 + 3 * p, w + half), Verdict::Move);
        assert_eq!(u.decide(t0 + 4 * p, w + 2 * half), Verdict::Waiting);
        assert_eq!(u.decide(t0 + 5 * p, w + 3 * half), Verdict::Move);
        assert_eq!(u.decide(t0 + 6 * p, w + 4 * half), Verdict::Waiting);
        assert_eq!(u.decide(t0 + 8 * p, w + 6 * half), Verdict::Waiting);
        assert_eq!(u.decide(t0 + 9 * p, w + 7 * half), Verdict::Move);
        // A quiet period resets the back-off.
        assert_eq!(u.decide(t0 + 10 * p, w + 7 * half), Verdict::Fine);
        assert_eq!(u.decide(t0 + 11 * p, w + 8 * half), Verdict::Move);
    }

    #[test]
    fn a_short_burst_of_waiting_inside_a_period_is_not_a_move() {
        // What a loop preempting `SCHED_IDLE` workers sees: one 10 ms stretch
        // at 30%, the rest of the period quiet.
        let mut u = Unstack::default();
        let t0 = Instant::now();
        u.decide(t0, Duration::ZERO);
        let burst = Duration::from_millis(10) * 30 / 100;
        assert!(burst < share(UNSTACK_WAIT_PERCENT));
        assert_eq!(u.decide(t0 + UNSTACK_PERIOD, burst), Verdict::Fine);
    }

    #[test]
    fn the_back_off_is_bounded() {
        let mut u = Unstack::default();
        let mut t = Instant::now();
        let mut waited = Duration::ZERO;
        u.decide(t, waited);
        let mut moves = Vec::new();
        for _ in 0..2000 {
            t += UNSTACK_PERIOD;
            waited += share(50);
            if u.decide(t, waited) == Verdict::Move {
                moves.push(t);
            }
        }
        let gaps: Vec<Duration> = moves.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(
            gaps.iter()
                .all(|g| *g <= UNSTACK_MAX_BACKOFF + UNSTACK_PERIOD),
            "{gaps:?}"
        );
        assert!(
            gaps.last().is_some_and(|g| *g >= UNSTACK_MAX_BACKOFF),
            "{gaps:?}"
        );
    }

    #[test]
    fn a_thread_with_one_allowed_core_is_not_moved() {
        let here = rustix::thread::sched_getcpu();
        std::thread::spawn(move || {
            pin_current_thread(&[here]).expect("pin");
            let base = rustix::thread::sched_getaffinity(None).expect("affinity");
            assert!(!move_off_this_core(&base));
            let after = rustix::thread::sched_getaffinity(None).expect("affinity");
            assert_eq!(after, base);
        })
        .join()
        .expect("thread");
    }

    #[test]
    fn a_moved_thread_stays_off_the_core_it_left() {
        let Some(base) = original().copied().filter(|b| b.count() >= 2) else {
            return; // one core: nowhere to move (covered above)
        };
        let (left, now_on, set) = std::thread::spawn(move || {
            let left = rustix::thread::sched_getcpu();
            assert!(move_off_this_core(&base));
            let set = rustix::thread::sched_getaffinity(None).expect("affinity");
            (left, rustix::thread::sched_getcpu(), set)
        })
        .join()
        .expect("thread");
        assert_ne!(now_on, left);
        assert!(!set.is_set(left), "the core it left is out of its set");
        assert_eq!(set.count(), base.count() - 1);
    }

    #[test]
    fn redis_cpu_lists_parse() {
        assert_eq!(parse(""), Ok(None));
        assert_eq!(parse("3"), Ok(Some(vec![3])));
        assert_eq!(parse("0-3"), Ok(Some(vec![0, 1, 2, 3])));
        assert_eq!(parse("0-7:2"), Ok(Some(vec![0, 2, 4, 6])));
        assert_eq!(parse("5,1-2,1"), Ok(Some(vec![1, 2, 5])));
        for bad in ["x", "1-", "-1", "3-1", "0-4:0", "1,,2", "0-3:x", "99999"] {
            assert!(parse(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn a_thread_is_pinned_and_placed_back() {
        let original = original().copied();
        let (pinned, placed) = std::thread::spawn(move || {
            let first = (0..CpuSet::MAX_CPU)
                .find(|&c| original.is_some_and(|s| s.is_set(c)))
                .unwrap_or(0);
            pin_current_thread(&[first]).unwrap();
            let pinned = rustix::thread::sched_getaffinity(None).unwrap();
            place_current_thread(None, "test thread");
            let placed = rustix::thread::sched_getaffinity(None).unwrap();
            (
                (pinned.count(), pinned.is_set(first)),
                placed == original.unwrap(),
            )
        })
        .join()
        .unwrap();
        assert_eq!(pinned, (1, true));
        assert!(placed, "the original set is restored");
    }
}
