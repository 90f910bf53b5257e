//! The rewrite threads' CPU priority without a CPU share: they run in
//! `SCHED_IDLE` (else at nice 19), so the event loop always has its core
//! first, and the first worker leaves that class if it starves
//! (`Promotion`). Under a share (`aof-rewrite-cpu-share`) they keep the
//! event loop's class and run in bursts instead (`pace.rs`, `Burst`).

use std::time::{Duration, Instant};

use crate::cpus::run_queue_wait;

/// Nice value of the rewrite threads where `SCHED_IDLE` is refused.
const REWRITE_NICE: i32 = 19;

/// Puts the calling thread (and the workers it starts, which inherit it)
/// in Linux's `SCHED_IDLE` class, falling back to nice 19.
///
/// On a machine with few cores the workers otherwise slow the clients in
/// two ways. At nice 0 they take the event loop's core outright: with no
/// idle core, at 1M keys, the loop spent 65-73 ms of every 100 ms waiting
/// in the run queue, and clients got 14.6k and 13.4k SET/s during the
/// rewrite against 27.5k and 26.5k at nice 19. At nice 19 they still make
/// every core look busy to the scheduler's wake-up placement, so the
/// loop, woken by a client, is queued on the client's core behind it
/// instead of running on the core a worker holds: 176-320 ms of every
/// second in the run queue during the rewrite against 21-43 at rest
/// (schedstat, 1M x 100 B, redis-benchmark on the other core). A core
/// running only `SCHED_IDLE` threads counts as idle for that placement,
/// and a waking normal thread preempts them at once: 77-113 ms. The
/// workers then get only the cycles nobody else wants, so a loaded
/// rewrite takes longer; the value prefetch in the part writer keeps what
/// they need of them small, and the first worker goes back to nice 19
/// once starved for [`IDLE_GRACE`] ([`Promotion`]) so the rewrite always
/// progresses.
pub(super) fn lower_cpu_priority() {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    set_class(thread_priority::unix::NormalThreadSchedulePolicy::Idle);
    set_lowest_nice();
}

/// How long the workers run in `SCHED_IDLE` alone before the first one
/// may return to the normal class at nice 19, and the window over which
/// its starvation is judged ([`Promotion`]).
pub(super) const IDLE_GRACE: Duration = Duration::from_secs(1);

/// A worker that spent at least this share of a window runnable but not
/// running (waiting in the run queue) is starved, in percent.
const STARVED_PERCENT: u32 = 50;

/// Puts the calling rewrite worker back in the normal class at nice 19.
///
/// In `SCHED_IDLE` the workers only get cycles nobody else wants, so a
/// machine kept busy by clients could starve a rewrite for as long as the
/// load lasts. One worker at nice 19 has a small guaranteed share; but a
/// waking event loop does not preempt a normal-class thread at once as it
/// does a `SCHED_IDLE` one (the loop's run-queue wait during a rewrite was
/// 176-320 ms of every second at nice 19, 77-113 in `SCHED_IDLE`). Measured
/// at 1M x 100 B (6 interleaved pairs, parts written with `O_DIRECT`):
/// with the first worker at nice 19 from the start, SET/s during the
/// rewrite 0.73 of steady (median) and rewrites of 0.78 s; all workers
/// idle, 0.94 and 0.95 s. Hence the first worker returns to nice 19 only
/// after [`IDLE_GRACE`], and only if starved ([`Promotion`]): most
/// rewrites at 100 B are done by then, and a starved one still progresses.
pub(super) fn keep_a_cpu_share() {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    set_class(thread_priority::unix::NormalThreadSchedulePolicy::Other);
    set_lowest_nice();
}

/// When a rewrite worker leaves `SCHED_IDLE` for nice 19
/// ([`keep_a_cpu_share`]): the first worker, once it has been starved
/// for a window of [`IDLE_GRACE`] (at least [`STARVED_PERCENT`] of it in
/// the run queue, from `/proc/thread-self/schedstat`); the others never.
/// Where that is unreadable, after the first window, starved or not.
///
/// A worker at nice 19 costs the clients even when it has nothing to do
/// but wait for the device: a core running a normal-class thread is not
/// idle to the scheduler's wake-up placement, so the loop, woken by a
/// client, is queued on the client's core. In a paced 1M x 1 KiB rewrite
/// the loop was woken onto the client's core 1334 times in a second
/// after the promotion (and SET/s fell from 32-39k to 24-27k at 1.1 s),
/// 123 at rest. So the promotion is kept for what it is for: a rewrite
/// the clients leave no idle cycles to.
#[derive(Debug)]
pub(super) struct Promotion {
    /// Worker 0 until promoted: the start of the current window and the
    /// thread's run-queue wait then (`None` where unreadable).
    window: Option<(Instant, Option<Duration>)>,
}

impl Promotion {
    /// The promotion of worker `index` of a rewrite started at `started`;
    /// called on the worker's thread.
    pub(super) fn for_worker(index: usize, started: Instant) -> Promotion {
        Promotion {
            window: (index == 0).then(|| (started, run_queue_wait())),
        }
    }

    /// No promotion: for workers outside `SCHED_IDLE` (under a CPU share,
    /// `pace.rs`), whose bursts have their share of the CPU already.
    pub(super) fn never() -> Promotion {
        Promotion { window: None }
    }

    /// Promotes the calling thread if it has been starved (once); returns
    /// whether it did.
    pub(super) fn check(&mut self) -> bool {
        let now = Instant::now();
        match self.window {
            // Checked before reading schedstat: this runs after every segment.
            Some((from, _)) if now.saturating_duration_since(from) >= IDLE_GRACE => {
                let promote = self.decide(now, run_queue_wait());
                if promote {
                    keep_a_cpu_share();
                }
                promote
            }
            _ => false,
        }
    }

    /// Whether to promote at `now`, the thread's run-queue wait being
    /// `waited`; starts a new window when not.
    fn decide(&mut self, now: Instant, waited: Option<Duration>) -> bool {
        let Some((from, before)) = self.window else {
            return false;
        };
        let window = now.saturating_duration_since(from);
        if window < IDLE_GRACE {
            return false;
        }
        let starved = match (before, waited) {
            (Some(before), Some(waited)) => {
                waited.saturating_sub(before) * 100 >= window * STARVED_PERCENT
            }
            _ => true,
        };
        self.window = if starved { None } else { Some((now, waited)) };
        starved
    }
}

/// Puts the calling thread in the normal-priority scheduling class
/// `policy`; on failure the thread keeps its class (and the nice value
/// set after this still lowers it).
#[cfg(any(target_os = "linux", target_os = "android"))]
fn set_class(policy: thread_priority::unix::NormalThreadSchedulePolicy) {
    use thread_priority::unix::{
        set_thread_priority_and_policy, thread_native_id, ThreadSchedulePolicy,
    };
    if let Err(e) = set_thread_priority_and_policy(
        thread_native_id(),
        thread_priority::ThreadPriority::Min,
        ThreadSchedulePolicy::Normal(policy),
    ) {
        tracing::debug!("rewrite thread keeps its scheduling class, not {policy:?}: {e:?}");
    }
}

fn set_lowest_nice() {
    // Nice is ignored in SCHED_IDLE, and the one above may have reset it;
    // set it anyway, so the threads stay at the bottom if the class is
    // refused or changed later.
    let thread = rustix::thread::gettid();
    if let Err(e) = rustix::process::setpriority_process(Some(thread), REWRITE_NICE) {
        tracing::debug!("cannot lower the rewrite thread's priority: {e}");
    }
}

#[cfg(test)]
#[cfg(any(target_os = "linux", target_os = "android"))]
mod tests {
    use super::*;
    use thread_priority::unix::{
        thread_schedule_policy, NormalThreadSchedulePolicy, ThreadSchedulePolicy,
    };

    #[test]
    fn rewrite_threads_and_their_children_run_in_sched_idle() {
        let (own, child) = std::thread::spawn(|| {
            lower_cpu_priority();
            let child = std::thread::spawn(|| thread_schedule_policy().unwrap())
                .join()
                .unwrap();
            (thread_schedule_policy().unwrap(), child)
        })
        .join()
        .unwrap();
        let idle = ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Idle);
        assert_eq!(own, idle);
        assert_eq!(child, idle, "workers inherit the class");
        // The test thread itself is untouched.
        assert_ne!(thread_schedule_policy().unwrap(), idle);
    }

    #[test]
    fn only_the_first_worker_is_promoted_and_only_once_starved() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut other = Promotion::for_worker(1, t0);
        assert!(!other.decide(t0 + 10 * IDLE_GRACE, Some(10 * IDLE_GRACE)));
        let mut first = Promotion {
            window: Some((t0, Some(ms(100)))),
        };
        // Not before a whole window, however starved.
        assert!(!first.decide(t0 + IDLE_GRACE / 2, Some(ms(600))));
        // 300 ms of 1 s in the run queue: not starved; a new window.
        assert!(!first.decide(t0 + IDLE_GRACE, Some(ms(400))));
        assert!(!first.decide(t0 + IDLE_GRACE + ms(900), Some(ms(1300))));
        // 600 ms of the next second: starved, promoted once.
        assert!(first.decide(t0 + 2 * IDLE_GRACE, Some(ms(1000))));
        assert!(!first.decide(t0 + 9 * IDLE_GRACE, Some(ms(9000))));
        // Without schedstat, the first window decides alone.
        let mut blind = Promotion {
            window: Some((t0, None)),
        };
        assert!(!blind.decide(t0 + ms(999), None));
        assert!(blind.decide(t0 + IDLE_GRACE, None));
    }

    #[test]
    fn schedstat_counts_the_time_a_thread_waits_for_its_core() {
        // Two threads spinning on one core: each spends part of the
        // time runnable while the other runs.
        let cpu = crate::cpus::current_cpus().unwrap()[0];
        let spin = move || {
            crate::cpus::pin_current_thread(&[cpu]).unwrap();
            let before = run_queue_wait().expect("schedstat on Linux");
            let start = Instant::now();
            while start.elapsed() < Duration::from_millis(60) {
                std::hint::spin_loop();
            }
            run_queue_wait().expect("schedstat on Linux") - before
        };
        let other = std::thread::spawn(spin);
        let waited = spin() + other.join().unwrap();
        assert!(waited > Duration::ZERO);
    }

    #[test]
    fn a_starved_first_worker_leaves_sched_idle_for_nice_19() {
        let policies = std::thread::spawn(|| {
            lower_cpu_priority();
            let mut other = Promotion::for_worker(1, Instant::now() - 2 * IDLE_GRACE);
            let mut fresh = Promotion::for_worker(0, Instant::now());
            // Started a window ago, and then (we pretend) starved: its
            // run-queue wait at the start is unknown.
            let mut due = Promotion {
                window: Some((Instant::now() - IDLE_GRACE, None)),
            };
            let mut seen = vec![(other.check(), thread_schedule_policy().unwrap())];
            seen.push((fresh.check(), thread_schedule_policy().unwrap()));
            seen.push((due.check(), thread_schedule_policy().unwrap()));
            seen.push((due.check(), thread_schedule_policy().unwrap()));
            seen
        })
        .join()
        .unwrap();
        let idle = ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Idle);
        let other = ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Other);
        assert_eq!(
            policies,
            vec![(false, idle), (false, idle), (true, other), (false, other)]
        );
    }

    #[test]
    fn the_first_worker_returns_to_the_normal_class_at_nice_19() {
        let (policy, nice) = std::thread::spawn(|| {
            lower_cpu_priority();
            keep_a_cpu_share();
            let tid = rustix::thread::gettid();
            (
                thread_schedule_policy().unwrap(),
                rustix::process::getpriority_process(Some(tid)).unwrap(),
            )
        })
        .join()
        .unwrap();
        assert_eq!(
            policy,
            ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Other)
        );
        assert_eq!(nice, REWRITE_NICE);
    }
}
