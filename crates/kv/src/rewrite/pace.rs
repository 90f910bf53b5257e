//! Pacing of a rewrite: the device time of the base parts' writes
//! (`aof-rewrite-io-share`, here) and the workers' CPU time
//! (`aof-rewrite-cpu-share`, whose rules are in `budget.rs`), both lifted
//! while the rewrite is behind its new log (`budget::Race`).
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
//! left out, or a worker on a machine the clients keep busy would be
//! paced for the scheduler's delays as if they were the device's
//! (`docs/results/rewrite-io.md`). The device's own speed sets the pace:
//! a fast device lets a fast rewrite through, and when the log's syncs
//! slow the device the rewrite's writes take longer and it backs off by
//! as much.
//!
//! Idle device time carries over, up to [`CATCH_UP`] of it, and a new
//! pacer starts with that much: a worker that spent a while serialising
//! may then write at full speed for a while, and a rewrite with little to
//! write (about `CATCH_UP * share / (1 - share)` of device time) is not
//! paced at all. A longer bound let whole small rewrites through at the
//! device's full speed, and their clients lost the most in the shortest
//! rewrites (`docs/results/rewrite-io.md`, "Kept and dropped").

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::budget::{machine_idle, CpuBudget, Race};
use super::seat::Seat;
use crate::cpus::{run_queue_wait, thread_cpu_time};

/// The longest idle period whose share a writer may spend later in one
/// burst (and the credit a new pacer starts with): without a bound, time
/// lost early (starved of CPU, say) would be made up later at the
/// device's full speed.
pub const CATCH_UP: Duration = Duration::from_millis(100);

/// `aof-rewrite-io-share` when not configured, in percent of the
/// device's time. A share of time rather than a rate scales with the
/// device: a fast one lets a fast rewrite through. A fifth leaves the log
/// four fifths of the device (its syncs then find a rewrite write in
/// flight at most a fifth of the time), and a rewrite behind its log is
/// not held to it at all (`budget::Race`). Figures for 10% to 40%:
/// `docs/results/rewrite-io.md`.
pub const DEFAULT_SHARE_PERCENT: u32 = 20;

pub use super::budget::DEFAULT_CPU_SHARE_PERCENT;

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

/// The device-time budget shared by the workers of one rewrite, their
/// CPU-time budget (`aof-rewrite-cpu-share`, [`Pacer::cpu_rest`]), and the
/// race against the log that lifts both ([`Race`]).
#[derive(Debug)]
pub struct Pacer {
    percent: u32,
    /// A worker's CPU time between two looks at the budget ([`CPU_BURST`]).
    cpu_burst: Duration,
    catch_up: Duration,
    state: Mutex<State>,
    cpu: Mutex<CpuBudget>,
    /// Whether the CPU budget is unlimited (share 0: `SCHED_IDLE`).
    cpu_unlimited: bool,
    race: Arc<Race>,
    /// Set when nobody is left to share the machine with (shutdown): no
    /// more rests, for the device or the CPU ([`Pacer::lift_handle`]).
    lifted: Arc<AtomicBool>,
    /// The event loop's core, lent to the bursts ([`Seat`]).
    seat: Option<Arc<Seat>>,
    /// `rdb-key-save-delay`, kept current by the event loop
    /// ([`Pacer::key_delay_handle`], [`Pacer::delay_keys`]).
    key_delay: Arc<AtomicI32>,
    /// Set to stop the rewrite (`appendonly no`): the workers end early.
    stopped: Arc<AtomicBool>,
}

/// CPU time a worker runs between two looks at the CPU budget ([`Burst`]).
/// Short bursts cost a system call each (the thread's CPU clock) and a
/// wake-up; long ones keep a core from the clients for longer at a time.
/// A few milliseconds is a scheduler time slice; lengths from 1 to 12 ms
/// are compared in `docs/results/rewrite-cpu-share.md`.
pub const CPU_BURST: Duration = Duration::from_millis(6);

/// Keys the event loop keeps captured ahead of each worker under a CPU
/// share: about a burst's worth of small keys (the loop tops the feed up
/// while the worker runs), so that a worker does not stop in the middle
/// of a burst to wait for the loop.
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

/// One worker's place in the rewrite's CPU budget (`budget.rs`).
///
/// A worker runs [`CPU_BURST`] of CPU time, then charges it to the budget
/// shared by all workers and rests if the budget is in debt, to a period
/// boundary the workers share. The workers run in the normal scheduling
/// class, one per CPU (`worker.rs`), and the event loop keeps a burst's
/// worth of segments captured ahead of each ([`BURST_AHEAD_KEYS`]).
///
/// Why bursts and not `SCHED_IDLE` (which the workers use without a
/// share): a `SCHED_IDLE` thread fills every idle moment of a core, and
/// each such moment then ends with an interrupt to preempt it, where an
/// idle polling core notices a wake-up by itself; most of the workers'
/// profile samples then fell on the return from an interrupt. Sleeping
/// between bursts leaves the cores idle as they were.
///
/// Why together: on a small machine the event loop and its clients wait
/// for each other, so a worker holding the clients' core idles the loop's
/// core, which the other worker can then use for nothing; a job run in
/// bursts on both cores at the same instants cost a closed loop of clients
/// less than the same job taken by one worker
/// (`docs/results/rewrite-cpu-share.md`).
///
/// Where every core is busy and the event loop can move, a burst may
/// instead take the loop's core, one worker at a time, the loop waiting
/// on the other cores meanwhile ([`Seat`], off by default).
#[derive(Debug)]
pub struct Burst {
    /// The thread's CPU time when its current burst started.
    mark: Option<Duration>,
    /// The wall-clock time then, moved on by the CPU time of work done
    /// outside the burst ([`Pacer::uncharged`]): the CPU time a thread ran
    /// since `mark` is at most the time since `wall`, so until that is a
    /// burst's length the CPU clock (a system call) need not be read.
    wall: Instant,
    /// Whether the budget is unlimited: nothing to count.
    free: bool,
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

/// The number of cores the calling thread may run on.
fn cores() -> u32 {
    std::thread::available_parallelism().map_or(1, |n| u32::try_from(n.get()).unwrap_or(u32::MAX))
}

impl Pacer {
    /// A pacer letting writes keep the device busy `percent` of the time
    /// (clamped to 1..=100; 100 never waits), its workers held to the
    /// default CPU share of this machine.
    pub fn new(percent: u32) -> Pacer {
        Pacer::with_catch_up(percent, CATCH_UP)
    }

    /// A pacer whose idle time carries over up to `catch_up`.
    fn with_catch_up(percent: u32, catch_up: Duration) -> Pacer {
        let now = Instant::now();
        let cores = cores();
        Pacer {
            percent: percent.clamp(1, 100),
            cpu_burst: CPU_BURST,
            catch_up,
            state: Mutex::new(State {
                in_flight: 0,
                mark: now,
                next: None,
                totals: PaceTotals::default(),
            }),
            cpu: Mutex::new(CpuBudget::new(
                DEFAULT_CPU_SHARE_PERCENT,
                cores,
                cores,
                CPU_BURST,
                now,
            )),
            cpu_unlimited: false,
            race: Arc::new(Race::new(100)),
            lifted: Arc::default(),
            seat: None,
            key_delay: Arc::default(),
            stopped: Arc::default(),
        }
    }

    /// This pacer, its `workers` workers held to `percent` of the CPU time
    /// of a machine of `cores` cores together (0 = unlimited).
    pub fn with_cpu_share(mut self, percent: u32, cores: u32, workers: u32) -> Pacer {
        let budget = CpuBudget::new(percent, cores, workers, self.cpu_burst, Instant::now());
        self.cpu_unlimited = budget.unlimited();
        self.cpu = Mutex::new(budget);
        self
    }

    /// This pacer, racing its log at `auto-aof-rewrite-percentage`
    /// `percentage` ([`Race`]).
    pub fn with_race(mut self, percentage: u32) -> Pacer {
        self.race = Arc::new(Race::new(percentage));
        self
    }

    /// The race against the log, for the event loop to report the log's
    /// growth to.
    pub fn race(&self) -> Arc<Race> {
        Arc::clone(&self.race)
    }

    /// This pacer, its bursts (under a CPU share) taking the event loop's
    /// core from `seat` ([`Seat`]).
    pub fn with_seat(mut self, seat: Seat) -> Pacer {
        self.seat = (!self.cpu_unlimited).then(|| Arc::new(seat));
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

    /// The cell the event loop writes `rdb-key-save-delay` to, so that a
    /// CONFIG SET during a rewrite takes effect at its next segment, as
    /// Redis reads the setting at every key.
    pub fn key_delay_handle(&self) -> Arc<AtomicI32> {
        Arc::clone(&self.key_delay)
    }

    /// A flag that, once set, stops the rewrite: its workers end with an
    /// error at their next segment, without resting or waiting first.
    pub fn stop_handle(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.stopped)
    }

    /// Whether the rewrite was asked to stop ([`Pacer::stop_handle`]).
    pub fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::Relaxed)
    }

    /// Waits what `rdb-key-save-delay` asks for `keys` keys written: a
    /// testing knob (Redis's test suite slows rewrites with it), 0 in
    /// production. A positive value is microseconds a key; a negative
    /// `-n` is one microsecond with a chance of one in `n` a key, Redis's
    /// way of asking for less than a microsecond. The wait is taken once
    /// for the keys of a segment, so it needs one system call, not one a
    /// key.
    pub fn delay_keys(&self, keys: u64) {
        let delay = self.key_delay.load(Ordering::Relaxed);
        let micros = match delay {
            0 => return,
            d if d > 0 => keys.saturating_mul(u64::from(d.unsigned_abs())),
            d => {
                let one_in = u64::from(d.unsigned_abs());
                (0..keys).filter(|_| fastrand::u64(0..one_in) == 0).count() as u64
            }
        };
        // In slices, so that a stop does not wait out a long delay.
        let until = Instant::now() + Duration::from_micros(micros);
        while !self.is_lifted() && !self.is_stopped() {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            std::thread::sleep(left.min(Duration::from_millis(10)));
        }
    }

    fn is_lifted(&self) -> bool {
        self.lifted.load(Ordering::Relaxed)
    }

    /// Whether the writes and bursts may go unpaced: shut down, or behind
    /// the log.
    fn is_free(&self) -> bool {
        self.is_lifted() || self.race.behind()
    }

    /// This pacer with bursts of `burst` of CPU time (tests: short ones).
    #[cfg(test)]
    fn with_cpu_burst(mut self, burst: Duration) -> Pacer {
        self.cpu_burst = burst;
        self.budget().set_burst(burst);
        self
    }

    /// The calling worker's first burst, starting now.
    pub fn burst(&self) -> Burst {
        if let Some(seat) = &self.seat {
            seat.take();
        }
        Burst {
            mark: thread_cpu_time(),
            wall: Instant::now(),
            free: self.cpu_unlimited,
            seat: self.seat.clone(),
        }
    }

    fn budget(&self) -> std::sync::MutexGuard<'_, CpuBudget> {
        self.cpu.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A worker wrote `bytes` more into its part ([`Race`]).
    pub fn wrote(&self, bytes: u64) {
        self.race.wrote(bytes);
    }

    /// For a worker between two pieces of work: once it has run its burst
    /// of CPU time ([`CPU_BURST`]) since its burst started, charges it to
    /// the budget and rests as long as the budget says ([`Burst`]).
    /// Nothing without a share, after shutdown, or behind the log.
    pub fn cpu_rest(&self, burst: &mut Burst) {
        if burst.free || self.is_lifted() || burst.wall.elapsed() < self.cpu_burst {
            return;
        }
        let (Some(mark), Some(cpu_now)) = (burst.mark, thread_cpu_time()) else {
            return;
        };
        let used = cpu_now.saturating_sub(mark);
        if used < self.cpu_burst {
            return;
        }
        let now = Instant::now();
        let resume = {
            let mut budget = self.budget();
            if budget.idle_due(now) {
                if let Some(idle) = machine_idle() {
                    budget.idle_sample(now, idle);
                }
            }
            budget.charge(now, used, self.race.behind())
        };
        burst.mark = Some(cpu_now);
        burst.wall = now;
        let Some(resume) = resume else {
            return;
        };
        if let Some(seat) = &burst.seat {
            seat.leave();
        }
        self.race.rest(resume.saturating_duration_since(now));
        if let Some(seat) = &burst.seat {
            seat.take();
        }
        self.budget().rested(now.elapsed());
        burst.mark = thread_cpu_time();
        burst.wall = Instant::now();
    }

    /// Runs `work` outside the worker's burst: its CPU time is not
    /// charged to the budget. For leaving out the keys the clients
    /// superseded: how many there are follows the clients' writes, and
    /// charged, that work could take a small share whole and keep a
    /// rewrite from ever reaching its segments.
    pub fn uncharged<T>(&self, burst: &mut Burst, work: impl FnOnce() -> T) -> T {
        if burst.free {
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

    /// Whether the workers have a CPU budget (else they run unpaced in
    /// `SCHED_IDLE`).
    pub fn cpu_paced(&self) -> bool {
        !self.cpu_unlimited
    }

    /// The CPU budget's rate now, percent of one core, and its idle term.
    pub fn cpu_rate(&self) -> (u64, u64) {
        let budget = self.budget();
        (budget.rate(), budget.spare())
    }

    /// CPU time run in bursts and time rested between them so far.
    pub fn cpu_totals(&self) -> (Duration, Duration) {
        self.budget().totals()
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
        if self.percent >= 100 || self.is_free() {
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
            self.race.rest(wait);
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
    fn a_worker_rests_once_its_bursts_spent_the_budget() {
        if thread_cpu_time().is_none() {
            return; // no thread CPU clock: nothing is paced either
        }
        // Short bursts: the tests run beside others on few cores.
        let pacer = Pacer::new(100)
            .with_cpu_share(10, 1, 1)
            .with_cpu_burst(MS / 2);
        let mut burst = pacer.burst();
        // Within its burst a worker goes on.
        let before = Instant::now();
        pacer.cpu_rest(&mut burst);
        assert_eq!(pacer.cpu_totals(), (Duration::ZERO, Duration::ZERO));
        // 2 ms of CPU is more than the budget can hold as credit (two
        // bursts' worth), however long the spin took: a debt, paid at 10%
        // of a core in 10 ms at most.
        spin_for_cpu(2 * MS);
        pacer.cpu_rest(&mut burst);
        let (used, rested) = pacer.cpu_totals();
        assert!(used >= 2 * MS, "{used:?}");
        assert!(rested > Duration::ZERO && rested <= Instant::now() - before);
        // A new burst starts: the next call does not rest again.
        pacer.cpu_rest(&mut burst);
        assert_eq!(pacer.cpu_totals().0, used);
    }

    #[test]
    fn behind_its_log_a_rewrite_rests_for_nothing() {
        let pacer = Pacer::with_catch_up(10, Duration::ZERO)
            .with_cpu_share(1, 1, 1)
            .with_cpu_burst(MS / 2);
        let t0 = Instant::now();
        pacer.started_at(t0);
        // 5 ms of device time at 10% earns 45 ms of rest.
        assert_eq!(pacer.finished_at(t0 + 5 * MS, Duration::ZERO), 45 * MS);
        assert_eq!(pacer.wait_at(t0 + 5 * MS), 45 * MS);
        // The log grew by more than the parts hold: no device rest...
        pacer.race().log_grew_to(1);
        assert_eq!(pacer.wait_at(t0 + 5 * MS), Duration::ZERO);
        // ... and no CPU rest.
        if thread_cpu_time().is_some() {
            let mut burst = pacer.burst();
            spin_for_cpu(MS);
            pacer.cpu_rest(&mut burst);
            assert_eq!(pacer.cpu_totals().1, Duration::ZERO);
        }
        // Caught up, the share holds again.
        pacer.wrote(1);
        assert_eq!(pacer.wait_at(t0 + 5 * MS), 45 * MS);
    }

    #[test]
    fn a_lifted_pacer_rests_no_more() {
        let pacer = Pacer::with_catch_up(10, Duration::ZERO)
            .with_cpu_share(1, 1, 1)
            .with_cpu_burst(MS / 2);
        let t0 = Instant::now();
        pacer.started_at(t0);
        // 5 ms of writing at 10% earns 45 ms of rest.
        assert_eq!(pacer.finished_at(t0 + 5 * MS, Duration::ZERO), 45 * MS);
        assert_eq!(pacer.wait_at(t0 + 5 * MS), 45 * MS);
        pacer.lift_handle().store(true, Ordering::Relaxed);
        assert_eq!(pacer.wait_at(t0 + 5 * MS), Duration::ZERO);
        if thread_cpu_time().is_some() {
            let mut burst = pacer.burst();
            spin_for_cpu(MS);
            let before = Instant::now();
            pacer.cpu_rest(&mut burst);
            // A burst at 1% of a core would rest 50 ms.
            assert!(before.elapsed() < 20 * MS);
            assert_eq!(pacer.cpu_totals().1, Duration::ZERO);
        }
    }

    #[test]
    fn work_run_uncharged_moves_the_burst_mark_by_its_cpu_time() {
        if thread_cpu_time().is_none() {
            return;
        }
        let pacer = Pacer::new(100).with_cpu_share(1, 1, 1).with_cpu_burst(MS);
        let mut burst = pacer.burst();
        let start = burst.mark.expect("read");
        pacer.uncharged(&mut burst, || spin_for_cpu(2 * MS));
        let moved = burst.mark.expect("set") - start;
        assert!(moved >= 2 * MS, "{moved:?}");
        // So the 2 ms do not end the 1 ms burst.
        pacer.cpu_rest(&mut burst);
        assert_eq!(pacer.cpu_totals().1, Duration::ZERO);
        // Without a share nothing is read and the mark stays.
        let unpaced = Pacer::new(100).with_cpu_share(0, 1, 1);
        let mut free = unpaced.burst();
        let mark = free.mark;
        unpaced.uncharged(&mut free, || ());
        assert_eq!(free.mark, mark);
    }

    #[test]
    fn a_zero_cpu_share_never_rests() {
        let pacer = Pacer::new(20)
            .with_cpu_share(0, 2, 2)
            .with_cpu_burst(MS / 2);
        let mut burst = pacer.burst();
        assert!(burst.free && !pacer.cpu_paced());
        if thread_cpu_time().is_some() {
            spin_for_cpu(MS / 2);
        }
        pacer.cpu_rest(&mut burst);
        assert_eq!(pacer.cpu_totals(), (Duration::ZERO, Duration::ZERO));
    }
}
