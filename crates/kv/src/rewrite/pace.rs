//! Pacing of the base parts' writes: `aof-rewrite-io-share`, the share of
//! the time the rewrite may keep the device busy writing.
//!
//! A rewrite writes the whole dataset; at the device's full speed it slows
//! everything else the machine does where writing costs CPU (a virtual
//! disk, whose requests exit to the hypervisor): an unpaced writer of
//! 1 MiB `O_DIRECT` blocks cost a SET load about a third of its rate,
//! against Ferrite and against Redis alike, and a paced one cost a few
//! percent (`docs/results/rewrite-io.md`).
//!
//! A fixed rate would suit one device only, so the pacer measures instead:
//! every direct write's time counts as device time (overlapping writes of
//! several workers are counted once), and before its next write a writer
//! waits until that device time is at most the configured share of the
//! time elapsed (serialising the next buffer overlaps the wait). A write
//! counts up to its completion, not its return: the time the writer then
//! spent waiting for a core (read from `/proc/thread-self/schedstat`) is
//! left out, or a `SCHED_IDLE` worker on a machine the clients keep busy
//! would be paced for the scheduler's delays as if they were the
//! device's (1M x 1 KiB under redis-benchmark: rewrites of 10.2-13.1 s
//! with that wait counted, 6.6-9.2 s without, SET/s during them 0.72 and
//! 0.76 of the rate before, medians of 6). The
//! device's own speed sets the pace: a fast device lets a fast rewrite
//! through, and when the log's syncs slow the device the
//! rewrite's writes take longer and it backs off by as much.
//!
//! Idle device time carries over, up to [`CATCH_UP`] of it, and a new
//! pacer starts with that much: a worker that spent a while serialising
//! may then write at full speed for a while, and a rewrite with little to
//! write (about `CATCH_UP * share / (1 - share)` of device time: 25 ms at
//! the default 20%, 15-25 MB here with 4 MiB writes) is not paced at
//! all. With a bound of 250 ms a whole 1M x 100 B rewrite (120 MB) went
//! through at the device's full speed, and its clients lost the most in
//! the shortest rewrites. Full runs at 100 B
//! (7 rewrites each; SET/s during over steady, against Redis's during its
//! rewrite, duration over Redis's): 250 ms 0.64 and 0.56, 1.80 and 1.63,
//! 0.30 and 0.20; 100 ms 0.68, 1.91, 0.32; none 0.76, 2.28, 0.52 (over
//! the duration bound of 0.5).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::seat::Seat;
use crate::cpus::{run_queue_wait, thread_cpu_time};

/// The longest idle period whose share a writer may spend later in one
/// burst (and the credit a new pacer starts with): without a bound, time
/// lost early (starved of CPU, say) would be made up later at the
/// device's full speed.
pub const CATCH_UP: Duration = Duration::from_millis(100);

/// `aof-rewrite-io-share` when not configured, in percent. With 4 MiB
/// writes from huge pages each second of device time carries about twice
/// the bytes of 1 MiB writes from small pages, and 40% rewrote 1M x 1 KiB in
/// 5.8 s at 0.76 of the clients' rate before it, 20% in 7.6 s at 0.85 and
/// 10% in 13.9 s at 0.96 (medians of 8 alternating rewrites, one server
/// under redis-benchmark), against Redis's 15-21 s; at 100 B the share
/// moved neither (0.74, 0.71, 0.74: the catch-up credit covers most of a
/// 120 MB part, and the workers' CPU sets the pace).
pub const DEFAULT_SHARE_PERCENT: u32 = 20;

#[derive(Debug)]
struct State {
    /// Writes in flight.
    in_flight: u32,
    /// Since when device time is not yet counted (while `in_flight > 0`).
    mark: Instant,
    /// The earliest time the next write should start; `None` before the
    /// first write (which has the whole catch-up as credit).
    next: Option<Instant>,
    /// What the writes took so far ([`Pacer::totals`]).
    totals: PaceTotals,
}

/// Where the writers' time went, summed over writers: for the log line
/// at the end of a rewrite.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PaceTotals {
    /// Writes made.
    pub writes: u64,
    /// Time inside the writes (from call to return).
    pub writing: Duration,
    /// Of `writing`, the time the writer waited for a core after the
    /// device was done.
    pub queued: Duration,
    /// Time the writers rested before writes to keep to the share.
    pub rest: Duration,
}

/// The device-time budget shared by the workers of one rewrite, and their
/// CPU-time budget (`aof-rewrite-cpu-share`, [`Pacer::cpu_rest`]).
#[derive(Debug)]
pub struct Pacer {
    percent: u32,
    /// The CPU share, percent of one core; 0 = unlimited.
    cpu_percent: u32,
    /// A worker's CPU time per burst under the share ([`CPU_BURST`]).
    cpu_burst: Duration,
    /// When the bursts' periods are counted from.
    cpu_started: Instant,
    catch_up: Duration,
    state: Mutex<State>,
    cpu: Mutex<CpuBudget>,
    /// Set when nobody is left to share the machine with (shutdown): no
    /// more rests, for the device or the CPU ([`Pacer::lift_handle`]).
    lifted: Arc<AtomicBool>,
    /// The event loop's core, lent to the bursts ([`Seat`]).
    seat: Option<Arc<Seat>>,
}

/// `aof-rewrite-cpu-share` when not configured: percent of one core, 0 =
/// unlimited (see [`Burst`]). 11 rather than 15: with the workers' write
/// buffers kept from start-up, a lower share still finishes within half
/// of Redis's rewrite time, and at 1M x 100 B under the bench's load the
/// clients lose about the share (11%: 0.885 of their steady rate in
/// rewrites of 0.69-0.81 s; 15%: 0.85 in 0.51-0.52 s), and at 1M x 1 KiB
/// 11% gave 0.899 in 3.2-3.4 s (`docs/results/rewrite-cpu-share.md`).
pub const DEFAULT_CPU_SHARE_PERCENT: u32 = 11;

/// CPU time a worker runs in one burst under a CPU share ([`Burst`]).
/// At 1M x 100 B and 15% (3 runs each, then 3 more at 6 ms), the
/// clients kept 0.849 of their steady rate with bursts of 1 ms, 0.852 with
/// 3 ms, 0.872 with 6 ms and 0.832 with 12 ms, in rewrites of about
/// the same length.
pub const CPU_BURST: Duration = Duration::from_millis(6);

/// Keys the event loop keeps captured ahead of each worker under a CPU
/// share: about two thirds of a burst's worth at 1M x 100 B (at 110-125 ns
/// a key; the loop tops the feed up while the worker runs), so that a
/// worker does not stop in the middle of a burst to wait for the loop.
const BURST_AHEAD_KEYS: usize = 32 * 1024;

/// ... but at most a part's keys over this many, so that a small dataset
/// is still captured in several steps (copy-before-write then stays on the
/// few segments captured and not yet written).
const BURST_AHEAD_STEPS: u64 = 8;

/// How many keys the event loop should keep captured ahead of each
/// worker (`Keyspace::capture_ahead`) when the largest part holds
/// `largest_part` keys: [`BURST_AHEAD_KEYS`], at most a
/// [`BURST_AHEAD_STEPS`]th of that part.
pub fn burst_ahead_keys(largest_part: u64) -> usize {
    let step = usize::try_from(largest_part / BURST_AHEAD_STEPS).unwrap_or(usize::MAX);
    BURST_AHEAD_KEYS.min(step)
}

#[derive(Debug)]
struct CpuBudget {
    /// CPU time the workers ran in bursts that ended so far.
    used: Duration,
    /// Time they rested to keep to the share.
    rested: Duration,
}

/// One worker's place in the rewrite's CPU bursts, under a CPU share
/// (`aof-rewrite-cpu-share`, percent of one core for all workers
/// together).
///
/// Each worker runs [`CPU_BURST`] of CPU time, then sleeps until the next
/// period boundary, the same instants for every worker of the rewrite:
/// `started + k * period`, with `period = workers * CPU_BURST * 100 /
/// share`. The workers run in the normal scheduling class, one per CPU
/// (`worker.rs`), and the event loop keeps a burst's worth of segments
/// captured ahead of each ([`BURST_AHEAD_KEYS`]).
///
/// Why bursts and not `SCHED_IDLE` (which the workers use without a
/// share): a `SCHED_IDLE` thread fills every idle moment of a core, and
/// each such moment then ends with an interrupt to preempt it, where an
/// idle polling core notices a wake-up by itself. Under load at 1M x
/// 100 B the cores took about 10,000 rescheduling interrupts a second
/// during a rewrite against almost none outside one, and three quarters
/// of the workers' profile samples fell on the return from an interrupt.
/// Sleeping between bursts leaves the cores idle as they were; the clients
/// then lose about the workers' CPU time, spread over as long as the share
/// makes the rewrite last (`docs/results/rewrite-cpu-share.md`).
///
/// Why together: on a small machine the event loop and its clients wait
/// for each other, so a worker holding the clients' core idles the loop's
/// core, which the other worker can then use for nothing. Two threads in
/// a closed loop over 4 connections on two cores lost 11-23 ms of their
/// round trips to 28 ms of work in bursts taken together, against 26-34 ms
/// taken by one worker or in `SCHED_IDLE`; in the server the clients still
/// lost about the workers' whole CPU time.
///
/// Where every core is busy and the event loop can move, a burst instead
/// takes the loop's core, one worker at a time, the loop waiting on the
/// other cores meanwhile ([`Seat`]): at 1M x 100 B and 11% the clients
/// then kept 0.923 of their steady rate against 0.886 (medians of 5 x 3
/// alternated runs, `docs/results/rewrite-cpu-share.md`).
#[derive(Debug)]
pub struct Burst {
    /// The thread's CPU time when its current burst started.
    mark: Option<Duration>,
    /// The wall-clock time then, moved on by the CPU time of work done
    /// outside the burst ([`Pacer::uncharged`]): the CPU time a thread ran
    /// since `mark` is at most the time since `wall`, so until that is a
    /// burst's length the CPU clock (a system call) need not be read.
    wall: Instant,
    /// Between two burst starts; zero without a share.
    period: Duration,
    /// The loop's core, held during the burst.
    seat: Option<Arc<Seat>>,
}

impl Drop for Burst {
    fn drop(&mut self) {
        if let Some(seat) = &self.seat {
            seat.leave();
        }
    }
}

impl Pacer {
    /// A pacer letting writes keep the device busy `percent` of the time
    /// (clamped to 1..=100; 100 never waits).
    pub fn new(percent: u32) -> Pacer {
        Pacer::with_catch_up(percent, CATCH_UP)
    }

    /// A pacer whose idle time carries over up to `catch_up`.
    fn with_catch_up(percent: u32, catch_up: Duration) -> Pacer {
        Pacer {
            percent: percent.clamp(1, 100),
            cpu_percent: DEFAULT_CPU_SHARE_PERCENT,
            cpu_burst: CPU_BURST,
            cpu_started: Instant::now(),
            catch_up,
            state: Mutex::new(State {
                in_flight: 0,
                mark: Instant::now(),
                next: None,
                totals: PaceTotals::default(),
            }),
            cpu: Mutex::new(CpuBudget {
                used: Duration::ZERO,
                rested: Duration::ZERO,
            }),
            lifted: Arc::default(),
            seat: None,
        }
    }

    /// This pacer, its workers held to `percent` of one core together
    /// (0 = unlimited), their bursts' periods counted from now.
    pub fn with_cpu_share(mut self, percent: u32) -> Pacer {
        self.cpu_percent = percent;
        self.cpu_started = Instant::now();
        self
    }

    /// This pacer, its bursts (under a CPU share) taking the event loop's
    /// core from `seat` ([`Seat`]).
    pub fn with_seat(mut self, seat: Seat) -> Pacer {
        self.seat = (self.cpu_percent > 0).then(|| Arc::new(seat));
        self
    }

    /// Bursts run on the event loop's core so far ([`Seat`]); `None`
    /// where the bursts do not take it.
    pub fn bursts_on_loop_core(&self) -> Option<u64> {
        self.seat.as_ref().map(|seat| seat.bursts())
    }

    /// A flag that, once set, lifts the pacing for good: the writers and
    /// workers rest no more (a clean shutdown waits for a running rewrite,
    /// and no client is left to leave the device or the CPU to).
    pub fn lift_handle(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.lifted)
    }

    fn is_lifted(&self) -> bool {
        self.lifted.load(Ordering::Relaxed)
    }

    /// This pacer with bursts of `burst` of CPU time (tests: short ones).
    #[cfg(test)]
    fn with_cpu_burst(mut self, burst: Duration) -> Pacer {
        self.cpu_burst = burst;
        self
    }

    /// The calling worker's first burst, starting now, as one of
    /// `workers` sharing the CPU share.
    pub fn burst(&self, workers: u32) -> Burst {
        let period = match self.cpu_percent {
            0 => Duration::ZERO,
            share => self.cpu_burst * workers.max(1) * 100 / share,
        };
        if let Some(seat) = &self.seat {
            seat.take();
        }
        Burst {
            mark: thread_cpu_time(),
            wall: Instant::now(),
            period,
            seat: self.seat.clone(),
        }
    }

    /// When the burst after `now` starts: the first period boundary
    /// strictly after it.
    fn next_burst_at(&self, now: Instant, period: Duration) -> Instant {
        if period.is_zero() {
            return now;
        }
        let since = now.saturating_duration_since(self.cpu_started).as_nanos();
        let periods = since / period.as_nanos() + 1;
        // Periods are milliseconds: u32 of them is weeks of rewrite.
        self.cpu_started + period * u32::try_from(periods).unwrap_or(u32::MAX)
    }

    /// For a worker between two pieces of work: once it has run its burst
    /// of CPU time ([`CPU_BURST`]) since its burst started, sleeps until the
    /// next burst ([`Burst`]). Nothing without a share.
    pub fn cpu_rest(&self, burst: &mut Burst) {
        if burst.period.is_zero() || self.is_lifted() || burst.wall.elapsed() < self.cpu_burst {
            return;
        }
        let (Some(mark), Some(now)) = (burst.mark, thread_cpu_time()) else {
            return;
        };
        let used = now.saturating_sub(mark);
        if used < self.cpu_burst {
            return;
        }
        if let Some(seat) = &burst.seat {
            seat.leave();
        }
        let at = Instant::now();
        let rest = self
            .next_burst_at(at, burst.period)
            .saturating_duration_since(at);
        std::thread::sleep(rest);
        if let Some(seat) = &burst.seat {
            seat.take();
        }
        {
            let mut cpu = self.cpu.lock().unwrap_or_else(|p| p.into_inner());
            cpu.used += used;
            cpu.rested += at.elapsed();
        }
        burst.mark = thread_cpu_time();
        burst.wall = Instant::now();
    }

    /// Runs `work` outside the worker's burst: its CPU time is not
    /// counted towards [`CPU_BURST`]. For leaving out the keys the
    /// clients superseded: how many there are follows the clients'
    /// writes, and counted, that work could take a small share whole (at
    /// 1% of a core, 90k SET/s at 1M x 100 B kept a rewrite from ever
    /// reaching its segments).
    pub fn uncharged<T>(&self, burst: &mut Burst, work: impl FnOnce() -> T) -> T {
        if burst.period.is_zero() {
            return work();
        }
        let before = thread_cpu_time();
        let result = work();
        if let (Some(start), Some(end), Some(mark)) = (before, thread_cpu_time(), burst.mark) {
            let outside = end.saturating_sub(start);
            burst.mark = Some(mark + outside);
            burst.wall += outside;
        }
        result
    }

    /// The CPU share, in percent of one core (0 = unlimited).
    pub fn cpu_share(&self) -> u32 {
        self.cpu_percent
    }

    /// CPU time run in finished bursts and time rested between them so far
    /// (nothing without a share).
    pub fn cpu_totals(&self) -> (Duration, Duration) {
        let cpu = self.cpu.lock().unwrap_or_else(|p| p.into_inner());
        (cpu.used, cpu.rested)
    }

    /// A pacer that never waits.
    pub fn unpaced() -> Pacer {
        Pacer::new(100)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records that a write started at `now`.
    fn started_at(&self, now: Instant) {
        let mut s = self.lock();
        if s.in_flight == 0 {
            s.mark = now;
        }
        s.in_flight += 1;
    }

    /// Records that a write started earlier returned at `now`, its thread
    /// having waited `queued` of that time in the run queue (after the
    /// device finished: the wake-up of a thread in `SCHED_IDLE` on a busy
    /// machine); returns how long from `now` the next write should wait
    /// ([`Pacer::wait_at`]).
    fn finished_at(&self, now: Instant, queued: Duration) -> Duration {
        let mut s = self.lock();
        let device_done = now.checked_sub(queued).unwrap_or(now);
        let busy = device_done.saturating_duration_since(s.mark);
        s.mark = now;
        s.in_flight = s.in_flight.saturating_sub(1);
        if self.percent >= 100 {
            return Duration::ZERO;
        }
        // The device time `busy` entitles the writers to it again only
        // after `busy * 100 / percent` of elapsed time, counted from when
        // it started (or from the previous write's entitlement, if later).
        let began = device_done.checked_sub(busy).unwrap_or(device_done);
        let floor = began.checked_sub(self.catch_up).unwrap_or(began);
        let from = s.next.map_or(floor, |next| next.max(floor));
        let due = from + busy * 100 / self.percent;
        s.next = Some(due);
        due.saturating_duration_since(now)
    }

    /// How long a write about to start at `now` should wait first.
    fn wait_at(&self, now: Instant) -> Duration {
        if self.percent >= 100 || self.is_lifted() {
            return Duration::ZERO;
        }
        self.lock()
            .next
            .map_or(Duration::ZERO, |next| next.saturating_duration_since(now))
    }

    /// Runs the write `f`, after sleeping as long as the share requires.
    ///
    /// The rest a write earns is taken before the *next* write, not right
    /// after it: a worker serialises its next buffer meanwhile, and only
    /// waits for what is left. A rewrite bound by the CPU (small values)
    /// thus loses nothing to the pacing; one bound by the device (large
    /// values) keeps it busy `percent` of the time.
    pub fn write<T>(&self, f: impl FnOnce() -> T) -> T {
        let rest_from = Instant::now();
        let wait = self.wait_at(rest_from);
        if !wait.is_zero() {
            std::thread::sleep(wait);
        }
        let queued_before = run_queue_wait();
        let started = Instant::now();
        self.started_at(started);
        let result = match &self.seat {
            Some(seat) => seat.step_aside(f),
            None => f(),
        };
        // A writer whose write completed but who then waited for a core
        // (a `SCHED_IDLE` worker on a machine kept busy by clients) did
        // not keep the device busy meanwhile: that wait is not device time.
        let queued = match (queued_before, run_queue_wait()) {
            (Some(before), Some(after)) => after.saturating_sub(before),
            _ => Duration::ZERO,
        };
        let now = Instant::now();
        self.finished_at(now, queued);
        let mut s = self.lock();
        s.totals.writes += 1;
        s.totals.writing += now.saturating_duration_since(started);
        s.totals.queued += queued;
        s.totals.rest += started.saturating_duration_since(rest_from);
        result
    }

    /// Where the writes' time went so far.
    pub fn totals(&self) -> PaceTotals {
        self.lock().totals
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_full_share_never_waits() {
        let pacer = Pacer::new(100);
        let t0 = Instant::now();
        pacer.started_at(t0);
        assert_eq!(
            pacer.finished_at(t0 + 30 * MS, Duration::ZERO),
            Duration::ZERO
        );
        assert_eq!(pacer.wait_at(t0 + 30 * MS), Duration::ZERO);
        assert_eq!(pacer.write(|| 7), 7);
    }

    #[test]
    fn one_writer_rests_until_its_device_time_is_the_share() {
        let pacer = Pacer::with_catch_up(40, Duration::ZERO);
        let t0 = Instant::now();
        pacer.started_at(t0);
        // 2 ms of device time at 40% is 5 ms of elapsed time: rest 3 ms.
        assert_eq!(pacer.finished_at(t0 + 2 * MS, Duration::ZERO), 3 * MS);
        // Serialising the next buffer took 1 ms of those 3.
        assert_eq!(pacer.wait_at(t0 + 3 * MS), 2 * MS);
        assert_eq!(pacer.wait_at(t0 + 6 * MS), Duration::ZERO);
        // Starting on time, the next write is charged from the entitlement.
        pacer.started_at(t0 + 5 * MS);
        assert_eq!(pacer.finished_at(t0 + 9 * MS, Duration::ZERO), 6 * MS);
    }

    #[test]
    fn time_queued_for_a_core_is_not_device_time() {
        let pacer = Pacer::with_catch_up(50, Duration::ZERO);
        let t0 = Instant::now();
        pacer.started_at(t0);
        // 10 ms from start to return, the last 8 waiting for a core: 2 ms
        // of device time at 50% is due again at 4 ms, long past; counted
        // as 10 ms of device time it would rest until 20 ms.
        assert_eq!(pacer.finished_at(t0 + 10 * MS, 8 * MS), Duration::ZERO);
        assert_eq!(pacer.wait_at(t0 + 10 * MS), Duration::ZERO);
        pacer.started_at(t0 + 10 * MS);
        assert_eq!(pacer.finished_at(t0 + 12 * MS, Duration::ZERO), 2 * MS);
    }

    #[test]
    fn overlapping_writes_count_their_device_time_once() {
        let pacer = Pacer::with_catch_up(50, Duration::ZERO);
        let t0 = Instant::now();
        pacer.started_at(t0);
        pacer.started_at(t0 + MS);
        // Busy 0..2 ms: due at 4 ms.
        assert_eq!(pacer.finished_at(t0 + 2 * MS, Duration::ZERO), 2 * MS);
        // Busy 2..4 ms, counted from the first entitlement: due at 8 ms.
        // Counting the second write's whole 3 ms would make it 10 ms.
        assert_eq!(pacer.finished_at(t0 + 4 * MS, Duration::ZERO), 4 * MS);
    }

    #[test]
    fn idle_time_carries_over_only_up_to_the_catch_up_bound() {
        let catch_up = 50 * MS;
        let pacer = Pacer::with_catch_up(50, catch_up);
        let t0 = Instant::now();
        pacer.started_at(t0);
        let _ = pacer.finished_at(t0 + MS, Duration::ZERO);
        // A second later, writes of 10 ms back to back: the idle second
        // lends at most `catch_up`, so waits start within a few writes.
        let mut now = t0 + Duration::from_secs(1);
        let mut free = 0;
        let mut waited = Duration::ZERO;
        for _ in 0..20 {
            pacer.started_at(now);
            now += 10 * MS;
            let wait = pacer.finished_at(now, Duration::ZERO);
            if wait.is_zero() && waited.is_zero() {
                free += 1;
            }
            waited += wait;
            now += wait;
        }
        assert!((1..=6).contains(&free), "{free} writes without a wait");
        // Over the whole run the device was busy half of the time, less
        // what the carried-over idle time allowed.
        let elapsed = now - (t0 + Duration::from_secs(1));
        let busy = 200 * MS;
        assert!(elapsed >= 2 * busy - catch_up - 10 * MS, "{elapsed:?}");
        assert!(elapsed <= 2 * busy, "{elapsed:?}");
    }

    #[test]
    fn a_new_pacer_lets_its_catch_up_through_at_full_speed() {
        let pacer = Pacer::new(40);
        let t0 = Instant::now();
        let mut now = t0;
        // 40% of CATCH_UP / 60%: about 67 ms of device time go free.
        let mut free = Duration::ZERO;
        loop {
            pacer.started_at(now);
            now += 10 * MS;
            if !pacer.finished_at(now, Duration::ZERO).is_zero() {
                break;
            }
            free += 10 * MS;
        }
        assert!(free >= 50 * MS && free <= 70 * MS, "{free:?}");
    }

    #[test]
    fn write_rests_before_the_next_write() {
        let pacer = Pacer::with_catch_up(50, Duration::ZERO);
        let t0 = Instant::now();
        let write = || std::thread::sleep(5 * MS);
        pacer.write(write);
        let first_done = Instant::now();
        let first = pacer.totals();
        pacer.write(write);
        // The first write's device time d (its time less what it then
        // waited for a core: 5 ms on an idle machine) at 50% earns d of
        // rest after it, so the second, itself 5 ms, ends 2d + 5 ms or
        // more after the start.
        let device = first.writing.saturating_sub(first.queued);
        assert!(device + first.queued >= 5 * MS, "{first:?}");
        assert!(Instant::now() - t0 >= 2 * device + 5 * MS, "{first:?}");
        let totals = pacer.totals();
        assert_eq!(totals.writes, 2);
        assert!(totals.writing >= 10 * MS, "{totals:?}");
        // The rest falls inside the second call, after the first returned.
        assert!(totals.rest <= Instant::now() - first_done, "{totals:?}");
        assert!(totals.queued <= totals.writing, "{totals:?}");
    }

    #[test]
    fn shares_are_clamped_to_a_percentage() {
        assert_eq!(Pacer::new(0).percent, 1);
        assert_eq!(Pacer::new(250).percent, 100);
    }

    #[test]
    fn every_worker_starts_its_bursts_at_the_same_boundaries() {
        let pacer = Pacer::new(100).with_cpu_share(20).with_cpu_burst(3 * MS);
        let t0 = pacer.cpu_started;
        // Two workers at 20% of a core: 3 ms each every 30 ms.
        let period = pacer.burst(2).period;
        assert_eq!(period, 30 * MS);
        assert_eq!(pacer.burst(1).period, 15 * MS);
        assert_eq!(pacer.next_burst_at(t0 + MS, period), t0 + 30 * MS);
        assert_eq!(pacer.next_burst_at(t0 + 29 * MS, period), t0 + 30 * MS);
        // A worker at a boundary waits for the next one, not none.
        assert_eq!(pacer.next_burst_at(t0 + 30 * MS, period), t0 + 60 * MS);
        assert_eq!(pacer.next_burst_at(t0 + 95 * MS, period), t0 + 120 * MS);
    }

    #[test]
    fn a_burst_ahead_but_a_small_part_in_several_steps() {
        assert_eq!(burst_ahead_keys(500_000), BURST_AHEAD_KEYS);
        assert_eq!(burst_ahead_keys(10_000), 1_250);
        assert_eq!(burst_ahead_keys(0), 0);
    }

    /// Spins until the calling thread has used `cpu` more CPU time.
    fn spin_for_cpu(cpu: Duration) {
        let start = thread_cpu_time().expect("a thread CPU clock");
        while thread_cpu_time().expect("read above") - start < cpu {
            std::hint::spin_loop();
        }
    }

    #[test]
    fn a_worker_rests_after_its_burst_until_the_next_boundary() {
        if thread_cpu_time().is_none() {
            return; // no thread CPU clock: nothing is paced either
        }
        // Short bursts: the tests run beside others on few cores.
        let pacer = Pacer::new(100).with_cpu_share(50).with_cpu_burst(MS / 2);
        let mut burst = pacer.burst(1);
        assert_eq!(burst.period, MS);
        // Within its burst a worker goes on.
        let before = Instant::now();
        pacer.cpu_rest(&mut burst);
        assert_eq!(pacer.cpu_totals(), (Duration::ZERO, Duration::ZERO));
        spin_for_cpu(MS / 2);
        let due = pacer.next_burst_at(Instant::now(), burst.period);
        pacer.cpu_rest(&mut burst);
        assert!(Instant::now() >= due, "rested until the next boundary");
        let (used, rested) = pacer.cpu_totals();
        assert!(used >= MS / 2, "{used:?}");
        assert!(rested > Duration::ZERO && rested <= Instant::now() - before);
        // A new burst starts: the next call does not rest again.
        pacer.cpu_rest(&mut burst);
        assert_eq!(pacer.cpu_totals().0, used);
    }

    #[test]
    fn a_lifted_pacer_rests_no_more() {
        let pacer = Pacer::with_catch_up(10, Duration::ZERO)
            .with_cpu_share(1)
            .with_cpu_burst(MS / 2);
        let write = || std::thread::sleep(5 * MS);
        pacer.write(write);
        // 5 ms of writing at 10% would earn 45 ms of rest.
        assert!(pacer.wait_at(Instant::now()) > 30 * MS);
        pacer.lift_handle().store(true, Ordering::Relaxed);
        assert_eq!(pacer.wait_at(Instant::now()), Duration::ZERO);
        if thread_cpu_time().is_some() {
            let mut burst = pacer.burst(1);
            spin_for_cpu(MS);
            let before = Instant::now();
            pacer.cpu_rest(&mut burst);
            // A burst at 1% would rest 50 ms.
            assert!(before.elapsed() < 20 * MS);
            assert_eq!(pacer.cpu_totals().1, Duration::ZERO);
        }
    }

    #[test]
    fn work_run_uncharged_moves_the_burst_mark_by_its_cpu_time() {
        if thread_cpu_time().is_none() {
            return;
        }
        let pacer = Pacer::new(100).with_cpu_share(1).with_cpu_burst(MS);
        let mut burst = pacer.burst(1);
        let start = burst.mark.expect("read");
        pacer.uncharged(&mut burst, || spin_for_cpu(2 * MS));
        let moved = burst.mark.expect("set") - start;
        assert!(moved >= 2 * MS, "{moved:?}");
        // So the 2 ms do not end the 1 ms burst.
        pacer.cpu_rest(&mut burst);
        assert_eq!(pacer.cpu_totals().1, Duration::ZERO);
        // Without a share nothing is read and the mark stays.
        let unpaced = Pacer::new(100).with_cpu_share(0);
        let mut free = unpaced.burst(1);
        let mark = free.mark;
        unpaced.uncharged(&mut free, || ());
        assert_eq!(free.mark, mark);
    }

    #[test]
    fn a_zero_cpu_share_never_rests() {
        let pacer = Pacer::new(20).with_cpu_share(0).with_cpu_burst(MS / 2);
        let mut burst = pacer.burst(2);
        assert_eq!(burst.period, Duration::ZERO);
        if thread_cpu_time().is_some() {
            spin_for_cpu(MS / 2);
        }
        pacer.cpu_rest(&mut burst);
        assert_eq!(pacer.cpu_totals(), (Duration::ZERO, Duration::ZERO));
    }
}
