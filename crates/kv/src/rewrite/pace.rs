//! Pacing of the base parts' writes: `aof-rewrite-io-share`, the share of
//! the time the rewrite may keep the device busy writing.
//!
//! A rewrite writes the whole dataset; at the device's full speed it slows
//! everything else the machine does. On the measurement VM (ext4 on
//! virtio, 2 cores) a `SCHED_IDLE` thread writing 1 MiB `O_DIRECT` blocks
//! without pause (about 540 MB/s) cost redis-benchmark 30-34% of its SET/s
//! against Ferrite, and as much against Redis 7 with or without its AOF:
//! the cost is the host's, not the server's. Paced, it cost 18% at
//! 350 MB/s, 7-10% at 180-250 MB/s and 3-7% at 60-120 MB/s (SET/s in
//! alternating half-second windows, writer stopped and running, 1 KiB
//! values, `redis-benchmark -c 4`).
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
//! all. The bound was 250 ms until the tenth session; then a whole 1M x
//! 100 B rewrite (120 MB) went through at the device's full speed, and
//! its clients lost the most in the shortest rewrites. Full runs at 100 B
//! (7 rewrites each; SET/s during over steady, against Redis's during its
//! rewrite, duration over Redis's): 250 ms 0.64 and 0.56, 1.80 and 1.63,
//! 0.30 and 0.20; 100 ms 0.68, 1.91, 0.32; none 0.76, 2.28, 0.52 (over
//! the duration bound of 0.5).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::cpus::{run_queue_wait, thread_sched_times};

/// The longest idle period whose share a writer may spend later in one
/// burst (and the credit a new pacer starts with): without a bound, time
/// lost early (starved of CPU, say) would be made up later at the
/// device's full speed.
pub const CATCH_UP: Duration = Duration::from_millis(100);

/// `aof-rewrite-io-share` when not configured, in percent. 40 until the
/// eleventh session; once 4 MiB writes from huge pages made each second of
/// device time carry about twice the bytes, 40% rewrote 1M x 1 KiB in
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
    catch_up: Duration,
    state: Mutex<State>,
    cpu: Mutex<CpuBudget>,
}

/// `aof-rewrite-cpu-share` when not configured: percent of one core, 0 =
/// unlimited.
pub const DEFAULT_CPU_SHARE_PERCENT: u32 = 0;

/// CPU time the workers may use before the CPU share binds: a rewrite of
/// a few megabytes is not slowed.
pub const CPU_CREDIT: Duration = Duration::from_millis(20);

#[derive(Debug)]
struct CpuBudget {
    started: Instant,
    /// CPU time charged by the workers so far.
    used: Duration,
    /// Time they rested to keep to the share.
    rested: Duration,
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
            catch_up,
            state: Mutex::new(State {
                in_flight: 0,
                mark: Instant::now(),
                next: None,
                totals: PaceTotals::default(),
            }),
            cpu: Mutex::new(CpuBudget {
                started: Instant::now(),
                used: Duration::ZERO,
                rested: Duration::ZERO,
            }),
        }
    }

    /// This pacer, its workers held to `percent` of one core together
    /// (0 = unlimited), counted from now.
    pub fn with_cpu_share(mut self, percent: u32) -> Pacer {
        self.cpu_percent = percent;
        self.cpu
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .started = Instant::now();
        self
    }

    /// Charges `used` of a worker's CPU time to the rewrite and returns how
    /// long that worker should now rest so the workers together keep to
    /// the CPU share (after [`CPU_CREDIT`]).
    fn cpu_charge_at(&self, now: Instant, used: Duration) -> Duration {
        let mut cpu = self.cpu.lock().unwrap_or_else(|p| p.into_inner());
        cpu.used += used;
        if self.cpu_percent == 0 {
            return Duration::ZERO;
        }
        let elapsed = now.saturating_duration_since(cpu.started);
        let allowed = elapsed * self.cpu_percent / 100 + CPU_CREDIT;
        let over = cpu.used.saturating_sub(allowed);
        over * 100 / self.cpu_percent
    }

    /// For a worker between two pieces of work: charges the CPU time it
    /// used since `since` (its run time from `/proc/thread-self/schedstat`,
    /// updated) and sleeps as long as the CPU share requires.
    pub fn cpu_rest(&self, since: &mut Option<Duration>) {
        if self.cpu_share() == 0 {
            return;
        }
        let Some((ran, _)) = thread_sched_times() else {
            return;
        };
        let used = since.map_or(ran, |before| ran.saturating_sub(before));
        *since = Some(ran);
        let rest = self.cpu_charge_at(Instant::now(), used);
        if !rest.is_zero() {
            std::thread::sleep(rest);
            self.cpu.lock().unwrap_or_else(|p| p.into_inner()).rested += rest;
        }
    }

    /// Runs `work` without charging its CPU time to the share: moves the
    /// worker's mark ([`Pacer::cpu_rest`]) on by what `work` used. For
    /// leaving out the keys the clients superseded: how many there are
    /// follows the clients' writes, and charged that work could take a
    /// small share whole (at 1% of a core, 90k SET/s at 1M x 100 B kept a
    /// rewrite from ever reaching its segments).
    pub fn uncharged<T>(&self, since: &mut Option<Duration>, work: impl FnOnce() -> T) -> T {
        if self.cpu_share() == 0 {
            return work();
        }
        let before = thread_sched_times();
        let result = work();
        if let (Some((start, _)), Some((end, _))) = (before, thread_sched_times()) {
            *since = Some(since.unwrap_or(Duration::ZERO) + end.saturating_sub(start));
        }
        result
    }

    /// The CPU share, in percent of one core (0 = unlimited).
    pub fn cpu_share(&self) -> u32 {
        self.cpu_percent
    }

    /// CPU time charged and time rested for the CPU share so far (nothing
    /// is charged without a share).
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
        if self.percent >= 100 {
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
        let result = f();
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
        pacer.write(write);
        // 5 ms of writing at 50% earns 5 ms of rest before the second.
        assert!(Instant::now() - first_done >= 10 * MS);
        assert!(Instant::now() - t0 >= 15 * MS);
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
    fn workers_rest_once_their_cpu_time_together_passes_the_share() {
        let pacer = Pacer::new(100).with_cpu_share(25);
        let t0 = pacer.cpu.lock().unwrap().started;
        // Within the credit: no rest.
        assert_eq!(pacer.cpu_charge_at(t0, CPU_CREDIT), Duration::ZERO);
        // Two workers charge 10 ms each by 40 ms: 40 ms at 25% allows
        // 10 ms plus the credit, so 10 ms over is 40 ms of rest.
        assert_eq!(pacer.cpu_charge_at(t0 + 40 * MS, 10 * MS), Duration::ZERO);
        assert_eq!(pacer.cpu_charge_at(t0 + 40 * MS, 10 * MS), 40 * MS);
        // Time passing pays it back.
        assert_eq!(
            pacer.cpu_charge_at(t0 + 80 * MS, Duration::ZERO),
            Duration::ZERO
        );
        assert_eq!(pacer.cpu_totals().0, 40 * MS);
    }

    #[test]
    fn work_run_uncharged_moves_the_mark_by_its_cpu_time() {
        let Some((start, _)) = thread_sched_times() else {
            return; // no schedstat here: nothing is charged either way
        };
        let pacer = Pacer::new(100).with_cpu_share(1);
        let mut mark = Some(start);
        // Busy until the thread has used 5 ms more CPU time.
        pacer.uncharged(&mut mark, || loop {
            let (now, _) = thread_sched_times().expect("read above");
            if now.saturating_sub(start) >= 5 * MS {
                break;
            }
        });
        // All but the few microseconds before `uncharged` read the time.
        let moved = mark.expect("set") - start;
        assert!(moved >= 4 * MS, "{moved:?}");
        // Without a share nothing is read and the mark stays.
        let mut untouched = Some(start);
        Pacer::new(100).uncharged(&mut untouched, || ());
        assert_eq!(untouched, Some(start));
    }

    #[test]
    fn a_zero_cpu_share_never_rests() {
        let pacer = Pacer::new(20);
        let t0 = Instant::now();
        assert_eq!(pacer.cpu_charge_at(t0, 10 * CPU_CREDIT), Duration::ZERO);
        let mut mark = None;
        pacer.cpu_rest(&mut mark);
        assert_eq!(pacer.cpu_totals().1, Duration::ZERO);
    }
}
