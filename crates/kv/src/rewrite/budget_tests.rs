//! The CPU budget's rules with made-up clocks: no thread sleeps and no
//! CPU clock is read.

use super::*;

const MS: Duration = Duration::from_millis(1);

/// Two workers at `share` percent of a 2-core machine, bursts of 6 ms.
fn budget(share: u32, now: Instant) -> CpuBudget {
    CpuBudget::new(share, 2, 2, 6 * MS, now)
}

#[test]
fn the_floor_is_a_share_of_the_machine_whatever_its_size() {
    let t0 = Instant::now();
    assert_eq!(CpuBudget::new(5, 2, 2, 6 * MS, t0).rate(), 10);
    assert_eq!(CpuBudget::new(5, 64, 64, 6 * MS, t0).rate(), 320);
    // At most one core per worker.
    assert_eq!(CpuBudget::new(50, 64, 4, 6 * MS, t0).rate(), 400);
    assert!(CpuBudget::new(0, 8, 8, 6 * MS, t0).unlimited());
    // Two workers at 10% of a core: 6 ms each every 120 ms.
    assert_eq!(budget(5, t0).period(), 120 * MS);
}

/// Runs `workers` workers for `span` of simulated time, each burst of
/// `burst` CPU time taking `wall` of elapsed time (`wall` > `burst`: they
/// share cores with clients), resting when told; returns the CPU time
/// they got.
fn simulate(
    b: &mut CpuBudget,
    t0: Instant,
    span: Duration,
    burst: Duration,
    wall: Duration,
) -> Duration {
    let mut next = vec![t0; b.workers as usize];
    let mut got = Duration::ZERO;
    loop {
        let (w, start) = next
            .iter()
            .copied()
            .enumerate()
            .min_by_key(|&(_, at)| at)
            .expect("workers");
        if start >= t0 + span {
            return got;
        }
        let end = start + wall;
        got += burst;
        next[w] = b.charge(end, burst, false).unwrap_or(end).max(end);
    }
}

#[test]
fn bursts_slowed_by_the_clients_still_get_the_share() {
    // 10% of a core for 10 s is 1 s of CPU time. Bursts of 6 ms taking
    // 40 ms of wall time: a schedule of fixed boundaries, one burst per
    // worker per 120 ms period, would give the same 1 s only if no burst
    // ran past its boundary; the bucket gives it whatever the wall time.
    let t0 = Instant::now();
    for wall in [6 * MS, 40 * MS, 100 * MS] {
        let mut b = budget(5, t0);
        let got = simulate(&mut b, t0, Duration::from_secs(10), 6 * MS, wall);
        let expected = Duration::from_secs(1);
        assert!(got >= expected - 12 * MS, "wall {wall:?}: {got:?}");
        assert!(
            got <= expected + 2 * 12 * MS + 12 * MS,
            "wall {wall:?}: {got:?}"
        );
    }
    // Bursts of 150 ms cannot reach the share (two workers, 8% of a
    // core): they never rest, and get all they can.
    let mut b = budget(5, t0);
    let got = simulate(&mut b, t0, Duration::from_secs(10), 6 * MS, 150 * MS);
    assert_eq!(b.totals().1, Duration::ZERO);
    assert!(got >= Duration::from_millis(800), "{got:?}");
}

#[test]
fn time_held_up_is_made_up_only_up_to_the_credit_bound() {
    let t0 = Instant::now();
    let mut b = budget(5, t0);
    // Idle for 10 s: the credit is two periods' worth (24 ms), not 1 s.
    let later = t0 + Duration::from_secs(10);
    let mut free = Duration::ZERO;
    while b.charge(later + free, 6 * MS, false).is_none() {
        free += 6 * MS;
    }
    assert_eq!(free, 24 * MS);
}

#[test]
fn a_worker_in_debt_rests_to_a_boundary_shared_by_all() {
    let t0 = Instant::now();
    let mut b = budget(5, t0);
    // 6 ms of CPU at once: 60 ms to pay at 10%, so the boundary at 120 ms.
    let at = b.charge(t0 + 6 * MS, 6 * MS, false).expect("a rest");
    assert_eq!(at, t0 + 120 * MS);
    // The other worker, 2 ms later with its burst: the same boundary.
    let other = b.charge(t0 + 8 * MS, 6 * MS, false).expect("a rest");
    assert_eq!(other, t0 + 120 * MS);
    // Both run again there: 12 ms of CPU in 120 ms is the share.
    assert!(b.charge(t0 + 120 * MS, Duration::ZERO, false).is_none());
}

#[test]
fn behind_the_log_a_worker_never_rests_and_owes_nothing_after() {
    let t0 = Instant::now();
    let mut b = budget(5, t0);
    let mut now = t0;
    for _ in 0..100 {
        now += 6 * MS;
        assert!(b.charge(now, 6 * MS, true).is_none());
    }
    // Caught up, nothing is owed for the 600 ms run free: the budget
    // holds its credit (two periods, 24 ms), spent before the first rest.
    let mut free = 0;
    loop {
        now += 6 * MS;
        if let Some(rest) = b.charge(now, 6 * MS, false) {
            assert!(rest - now <= 120 * MS, "{:?}", rest - now);
            break;
        }
        free += 1;
    }
    assert!((3..=5).contains(&free), "{free} bursts before a rest");
}

#[test]
fn an_unlimited_budget_never_rests() {
    let t0 = Instant::now();
    let mut b = budget(0, t0);
    assert!(b.charge(t0 + MS, Duration::from_secs(1), false).is_none());
}

#[test]
fn idle_cores_beyond_one_add_half_of_themselves() {
    let s = Duration::from_secs(1);
    // Two cores, one idle: nothing (that core's worth is left alone).
    assert_eq!(spare_percent(s, Duration::ZERO, s), 0);
    // 64 cores, 62 idle and the rewrite using 1: (63 - 1) / 2 cores.
    assert_eq!(spare_percent(62 * s, s, s), 3100);
    assert_eq!(spare_percent(s, s, Duration::ZERO), 0);
    // Sampled: the term follows the window since the previous sample.
    let t0 = Instant::now();
    let mut b = CpuBudget::new(5, 64, 64, 6 * MS, t0);
    assert!(b.idle_due(t0));
    b.idle_sample(t0, 100 * s);
    assert_eq!(b.spare(), 0);
    assert!(!b.idle_due(t0 + IDLE_WINDOW / 2));
    let t1 = t0 + IDLE_WINDOW;
    b.idle_sample(t1, 100 * s + IDLE_WINDOW * 33);
    assert_eq!(b.spare(), 1600);
    assert_eq!(b.rate(), 320 + 1600);
}

#[test]
fn proc_stat_idle_counts_idle_and_iowait() {
    let text = "cpu  100 0 50 1000 20 0 3 0 0 0\ncpu0 50 0 25 500 10 0 1 0 0 0\n";
    assert_eq!(
        parse_proc_stat_idle(text),
        Some(Duration::from_millis(10_200))
    );
    assert_eq!(parse_proc_stat_idle("intr 1 2 3\n"), None);
    assert_eq!(parse_proc_stat_idle("cpu 1 2 x 4\n"), None);
    assert_eq!(parse_proc_stat_idle(""), None);
}

#[test]
fn the_race_compares_bytes_at_the_rewrite_percentage() {
    let race = Race::new(100);
    assert!(!race.behind());
    race.log_grew_to(10);
    assert!(race.behind());
    race.wrote(10);
    assert!(!race.behind());
    // At 50% the parts must hold twice what the log grew by.
    let half = Race::new(50);
    half.log_grew_to(10);
    half.wrote(19);
    assert!(half.behind());
    half.wrote(1);
    assert!(!half.behind());
    // Off (0) and above 100 read as 100.
    for p in [0, 400] {
        let r = Race::new(p);
        r.log_grew_to(10);
        r.wrote(10);
        assert!(!r.behind());
    }
}

/// The invariant in a simulation: a log growing faster than the floor
/// lets the rewrite write; the rewrite still ends, and the parts are
/// never behind the log by more than one step's growth (a resting worker
/// is woken once behind, [`Race::rest`]).
#[test]
fn a_rewrite_outpaces_its_log_whatever_the_load() {
    let t0 = Instant::now();
    // 1 GB to write at 1 GB per second of CPU, 1% of a 2-core machine
    // (100 s at the floor), while the log grows 100 MB a second.
    let dataset: u64 = 1_000_000_000;
    let log_rate: u64 = 100_000_000;
    let step = MS;
    let race = Race::new(100);
    let mut b = CpuBudget::new(1, 2, 1, step, t0);
    let mut now = t0;
    let mut resume = t0;
    let mut lag_max = 0u64;
    while race.written() < dataset {
        now += step;
        assert!(
            now - t0 < Duration::from_secs(20),
            "the rewrite never ended"
        );
        let grown = log_rate * (now - t0).as_millis() as u64 / 1000;
        race.log_grew_to(grown);
        lag_max = lag_max.max(grown.saturating_sub(race.written()));
        if now < resume && !race.behind() {
            continue;
        }
        // One step of CPU writes 1 MB.
        race.wrote(1_000_000);
        resume = b.charge(now, step, race.behind()).unwrap_or(now);
    }
    assert!(lag_max <= log_rate / 1000, "lag {lag_max}");
    // The floor alone would have taken 100 s; the log set the pace: the
    // parts reach the dataset's size about when the log does.
    assert!(now - t0 <= Duration::from_millis(10_010), "{:?}", now - t0);
}

#[test]
fn a_resting_worker_wakes_when_the_rewrite_falls_behind() {
    let race = std::sync::Arc::new(Race::new(100));
    race.wrote(10);
    let waker = std::sync::Arc::clone(&race);
    let started = Instant::now();
    std::thread::scope(|s| {
        s.spawn(|| race.rest(Duration::from_secs(60)));
        // Ahead: no wake-up; then behind.
        waker.log_grew_to(5);
        waker.log_grew_to(11);
    });
    assert!(started.elapsed() < Duration::from_secs(30));
    // Already behind: no rest at all.
    race.rest(Duration::from_secs(60));
}
