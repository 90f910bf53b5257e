//! How much CPU time a rewrite's workers may use: the rules, apart from
//! the clocks and sleeps that apply them (`pace.rs`), so that they can be
//! tested with made-up times.
//!
//! The budget is a rate, in percent of one core for all workers together,
//! made of three terms ([`CpuBudget::rate`]):
//!
//! - **The floor**, `aof-rewrite-cpu-share` percent of the machine (of
//!   all the cores the rewrite may run on). The clients lose about the
//!   workers' CPU time however the workers are scheduled, so a share of
//!   the machine bounds what a saturated machine loses whatever its size,
//!   and the rewrite's speed grows with the cores.
//! - **Idle cores**: half of the idle time beyond one core's worth
//!   ([`spare_percent`]). On a big machine running one event loop the
//!   rewrite may use the cores nobody uses; one core's worth of idle time
//!   is left alone, since on a small machine it is spread over the moments
//!   the event loop and its clients wait for each other, which a worker
//!   filling them delays; and half of the rest, so that the load can grow
//!   without first waiting for the rewrite.
//! - **The log**: while the parts written so far hold fewer bytes than the
//!   new incremental log has grown since the rewrite started (scaled by
//!   `auto-aof-rewrite-percentage` when it is under 100, [`Race`]), the
//!   workers do not rest at all, for the CPU or the device.
//!
//! The last term is the invariant that makes every rewrite finish: the
//! rewrite is never behind the log for longer than it takes unpaced
//! workers to catch up, and unpaced workers, in the event loop's
//! scheduling class, serialise far more bytes per second of CPU than the
//! loop appends to the log per second of its own (a key is copied once;
//! a SET is read, parsed, executed, logged and answered). So the parts
//! end holding at least the bytes the log grew by: the rewrite ends before
//! its own log is as large as the dataset it rewrote, and before that log
//! alone would start the next automatic rewrite.
//!
//! The floor and idle terms are a token bucket against elapsed time
//! ([`CpuBudget::charge`]): the budget earns its rate continuously and
//! the workers spend their CPU time from it, so a burst that takes longer
//! in wall time (workers sharing cores with the clients) or a worker held
//! up by its device writes does not lose its share; it spends what it
//! earned meanwhile, up to [`CREDIT_PERIODS`] periods of it. A worker
//! that has spent more than it earned rests until the debt is paid, to the
//! next period boundary (the same instants for every worker: bursts taken
//! together cost the clients less than bursts taken apart,
//! `docs/results/rewrite-cpu-share.md`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// `aof-rewrite-cpu-share` when not configured: percent of the machine's
/// CPU time (all its cores). The clients of a saturated machine lose
/// about this share of their rate to the rewrite's CPU, plus what its
/// device writes cost (`aof-rewrite-io-share`); 5% keeps the two together
/// well under a fifth of the clients' rate.
pub const DEFAULT_CPU_SHARE_PERCENT: u32 = 5;

/// How many periods' worth of CPU time the budget may hold unspent: a
/// worker held up (in a device write, its pacing rest, waiting for the
/// event loop's capture) for up to this many periods makes them up with
/// bursts back to back; a longer pause is not made up.
pub const CREDIT_PERIODS: u32 = 2;

/// How often the machine's idle time is sampled for the idle term.
pub const IDLE_WINDOW: Duration = Duration::from_millis(200);

/// The idle term, in percent of one core: half of the idle time beyond
/// one core's worth, the rewrite's own CPU time counted as idle (it would
/// be without the rewrite, and not counting it would make the term
/// oscillate). `idle` and `own` are CPU time over a `window` of wall time.
pub fn spare_percent(idle: Duration, own: Duration, window: Duration) -> u64 {
    let window = window.as_nanos();
    if window == 0 {
        return 0;
    }
    let free = idle.as_nanos() + own.as_nanos();
    let spare = free.saturating_sub(window);
    u64::try_from(spare * 100 / window / 2).unwrap_or(u64::MAX)
}

/// The machine's idle time so far (idle and iowait over all CPUs) from
/// the first line of `/proc/stat`, given its text; clock ticks of
/// `USER_HZ` (100 a second on every Linux architecture Rust targets).
pub fn parse_proc_stat_idle(text: &str) -> Option<Duration> {
    let line = text.lines().next()?;
    let mut fields = line.split_whitespace();
    if fields.next()? != "cpu" {
        return None;
    }
    let ticks: Vec<u64> = fields.map(|f| f.parse().ok()).collect::<Option<_>>()?;
    let idle = ticks.get(3)? + ticks.get(4).copied().unwrap_or(0);
    Some(Duration::from_millis(idle.saturating_mul(10)))
}

/// The machine's idle time so far, `None` where `/proc/stat` is
/// unreadable (the idle term is then zero).
pub fn machine_idle() -> Option<Duration> {
    parse_proc_stat_idle(&std::fs::read_to_string("/proc/stat").ok()?)
}

/// The rewrite against its new log: bytes written into the parts so far
/// against bytes the log grew by since the switch. Shared by the workers
/// (who add what they write) and the event loop (which sets the log's
/// growth from its timer, and wakes resting workers once they are
/// behind: a rest does not outlast the invariant).
#[derive(Debug)]
pub struct Race {
    written: AtomicU64,
    log_grown: AtomicU64,
    /// `auto-aof-rewrite-percentage`, at most 100 (0 reads as 100).
    percentage: u64,
    /// Resting workers wait on `woken` ([`Race::rest`]).
    resting: Mutex<()>,
    woken: Condvar,
}

impl Race {
    /// A race judged at `auto-aof-rewrite-percentage` `percentage`.
    pub fn new(percentage: u32) -> Race {
        let percentage = match percentage {
            0 => 100,
            p => u64::from(p.min(100)),
        };
        Race {
            written: AtomicU64::new(0),
            log_grown: AtomicU64::new(0),
            percentage,
            resting: Mutex::new(()),
            woken: Condvar::new(),
        }
    }

    /// Rests up to `rest`, or until the rewrite is behind its log.
    pub fn rest(&self, rest: Duration) {
        let guard = self.resting.lock().unwrap_or_else(|p| p.into_inner());
        let _ = self
            .woken
            .wait_timeout_while(guard, rest, |_| !self.behind())
            .unwrap_or_else(|p| p.into_inner());
    }

    /// A worker wrote `bytes` more into its part.
    pub fn wrote(&self, bytes: u64) {
        self.written.fetch_add(bytes, Ordering::Relaxed);
    }

    /// The new log has grown by `bytes` since the rewrite started; wakes
    /// the resting workers if that puts the rewrite behind.
    pub fn log_grew_to(&self, bytes: u64) {
        self.log_grown.store(bytes, Ordering::Relaxed);
        if self.behind() {
            // Under the lock, so that a worker between its check and its
            // wait cannot miss the wake-up.
            let _guard = self.resting.lock().unwrap_or_else(|p| p.into_inner());
            self.woken.notify_all();
        }
    }

    /// Bytes written into the parts so far.
    pub fn written(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
    }

    /// Whether the log has grown by more than the parts hold (at the
    /// percentage): the invariant broken, the workers may not rest.
    pub fn behind(&self) -> bool {
        let written = u128::from(self.written.load(Ordering::Relaxed));
        let grown = u128::from(self.log_grown.load(Ordering::Relaxed));
        written * u128::from(self.percentage) < grown * 100
    }
}

/// The CPU-time token bucket of one rewrite's workers.
#[derive(Debug)]
pub struct CpuBudget {
    /// The floor, in percent of one core (the share of the machine times
    /// its cores); 0 = unlimited.
    floor: u64,
    /// The idle term, in percent of one core ([`spare_percent`]).
    spare: u64,
    /// Most the workers can use: one core each, in percent.
    most: u64,
    workers: u32,
    /// CPU time a worker runs between two looks at the budget.
    burst: Duration,
    /// Period boundaries are counted from here.
    started: Instant,
    /// Until when the budget has been credited.
    credited: Instant,
    /// Earned less spent, in nanoseconds of CPU time (negative: a debt).
    balance: i128,
    /// CPU time spent so far, and rests taken ([`CpuBudget::totals`]).
    used: Duration,
    rested: Duration,
    /// The last idle sample: when, the machine's idle time then, and
    /// `used` then.
    sample: Option<(Instant, Duration, Duration)>,
}

impl CpuBudget {
    /// The budget of `workers` workers allowed `share` percent of a
    /// machine of `cores` cores (0 = unlimited), each running bursts of
    /// `burst`, from `now`.
    pub fn new(share: u32, cores: u32, workers: u32, burst: Duration, now: Instant) -> CpuBudget {
        let workers = workers.max(1);
        CpuBudget {
            floor: u64::from(share) * u64::from(cores.max(1)),
            spare: 0,
            most: u64::from(workers) * 100,
            workers,
            burst,
            started: now,
            credited: now,
            balance: 0,
            used: Duration::ZERO,
            rested: Duration::ZERO,
            sample: None,
        }
    }

    /// Bursts of `burst` from now on.
    pub fn set_burst(&mut self, burst: Duration) {
        self.burst = burst;
    }

    /// Whether the workers run without a budget (share 0).
    pub fn unlimited(&self) -> bool {
        self.floor == 0
    }

    /// The rate the budget earns, in percent of one core.
    pub fn rate(&self) -> u64 {
        (self.floor + self.spare).min(self.most).max(1)
    }

    /// Between two burst starts at the current rate: every worker's burst
    /// once.
    pub fn period(&self) -> Duration {
        let nanos =
            self.burst.as_nanos() * u128::from(self.workers) * 100 / u128::from(self.rate());
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }

    /// Credits the time up to `now` at the current rate, up to
    /// [`CREDIT_PERIODS`] periods' worth.
    fn credit(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.credited).as_nanos();
        self.credited = self.credited.max(now);
        let earned = elapsed * u128::from(self.rate()) / 100;
        let cap = self.burst.as_nanos() * u128::from(self.workers) * u128::from(CREDIT_PERIODS);
        let earned = i128::try_from(earned).unwrap_or(i128::MAX);
        let cap = i128::try_from(cap).unwrap_or(i128::MAX);
        self.balance = self.balance.saturating_add(earned).min(cap);
    }

    /// A worker ran `used` of CPU time up to `now`; `behind` says whether
    /// the rewrite is behind its log ([`Race::behind`]). Returns when it
    /// may run again: `None` at once, else a period boundary.
    pub fn charge(&mut self, now: Instant, used: Duration, behind: bool) -> Option<Instant> {
        self.used += used;
        if self.unlimited() {
            return None;
        }
        self.credit(now);
        if behind {
            // Behind the log nothing is charged, and a debt is forgiven:
            // a rewrite that caught up does not then rest for the time it
            // ran free.
            self.balance = self.balance.max(0);
            return None;
        }
        let spent = i128::try_from(used.as_nanos()).unwrap_or(i128::MAX);
        self.balance = self.balance.saturating_sub(spent);
        if self.balance >= 0 {
            return None;
        }
        let debt = u128::try_from(-self.balance).unwrap_or(0);
        let paid = now + nanos(debt * 100 / u128::from(self.rate()));
        Some(self.boundary_at_or_after(paid))
    }

    /// The first period boundary at or after `at`.
    fn boundary_at_or_after(&self, at: Instant) -> Instant {
        let period = self.period().as_nanos().max(1);
        let since = at.saturating_duration_since(self.started).as_nanos();
        let periods = since.div_ceil(period);
        self.started + nanos(periods * period)
    }

    /// A worker rested `rest`.
    pub fn rested(&mut self, rest: Duration) {
        self.rested += rest;
    }

    /// Whether the idle term is due for a new sample at `now`.
    pub fn idle_due(&self, now: Instant) -> bool {
        self.sample
            .is_none_or(|(at, _, _)| now.saturating_duration_since(at) >= IDLE_WINDOW)
    }

    /// The machine had been idle `idle` in all at `now`: sets the idle
    /// term from the window since the previous sample.
    pub fn idle_sample(&mut self, now: Instant, idle: Duration) {
        if let Some((at, idle_then, used_then)) = self.sample {
            let window = now.saturating_duration_since(at);
            if window.is_zero() {
                return;
            }
            // Credit the window at the old rate before changing it.
            self.credit(now);
            self.spare = spare_percent(
                idle.saturating_sub(idle_then),
                self.used.saturating_sub(used_then),
                window,
            );
        }
        self.sample = Some((now, idle, self.used));
    }

    /// The idle term now, in percent of one core.
    pub fn spare(&self) -> u64 {
        self.spare
    }

    /// CPU time the workers reported so far, and time they rested.
    pub fn totals(&self) -> (Duration, Duration) {
        (self.used, self.rested)
    }
}

fn nanos(n: u128) -> Duration {
    Duration::from_nanos(u64::try_from(n).unwrap_or(u64::MAX))
}

#[cfg(test)]
#[path = "budget_tests.rs"]
mod tests;
