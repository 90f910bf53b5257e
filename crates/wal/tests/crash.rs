//! Crash tests: concurrent appends and commits on a simulated disk file and
//! simulated persistent memory, "crashed" at many points; recovery must keep
//! every acknowledged record intact, invent nothing, and accept appends.
//!
//! A crash armed at event `E` captures the medium as it was after events
//! `1..E`. A commit acknowledged when the simulator's event counter read
//! `c` was made durable by an event numbered at most `c`; so every commit
//! with `c < E` must survive. Seeds are in every failure message; rerun one
//! with `FERRITE_CRASH_SEED=<seed>`, and scale the loops with
//! `FERRITE_CRASH_ITERS`.

mod common;

use std::collections::HashMap;
use std::sync::Mutex;

use common::{accepts_appends, crash_iters, payload, read_all, test_config, Medium, Sim, MEDIA};
use ferrite_wal::{Durability, Wal};

/// What the workload did: every record appended, and each acknowledged
/// commit with the event count read after it returned.
#[derive(Default)]
struct Outcome {
    appended: HashMap<u64, Vec<u8>>,
    acked: Vec<(u64, u64)>,
}

fn workload(sim: &Sim, wal: &Wal, seed: u64, threads: usize, per_thread: usize) -> Outcome {
    let outcome = Mutex::new(Outcome::default());
    std::thread::scope(|s| {
        for t in 0..threads {
            let outcome = &outcome;
            s.spawn(move || {
                let mut rng = fastrand::Rng::with_seed(seed ^ (t as u64).wrapping_mul(0x9E37_79B9));
                for i in 0..per_thread {
                    let bytes = payload(&mut rng, t, i);
                    let lsn = wal.append(&bytes).expect("append");
                    outcome.lock().expect("lock").appended.insert(lsn, bytes);
                    if rng.u64(..4) == 0 && i + 1 < per_thread {
                        continue; // leave some records uncommitted for a while
                    }
                    let acked = if rng.u64(..8) == 0 {
                        wal.sync().map(|_| ())
                    } else {
                        wal.commit(lsn)
                    };
                    acked.expect("commit");
                    let events = sim.events();
                    outcome.lock().expect("lock").acked.push((lsn, events));
                }
            });
        }
    });
    outcome.into_inner().expect("lock")
}

/// Recovers `image` and checks it against what the workload did.
fn verify(
    medium: Medium,
    image: Vec<u8>,
    outcome: &Outcome,
    crash_event: u64,
    every_commit: bool,
    seed: u64,
) {
    let ctx = format!("medium {medium:?}, seed {seed}, crash at event {crash_event}");
    let recovered = Sim::from_image(medium, image);
    let wal = Wal::open(
        recovered.device.clone(),
        test_config(Durability::EveryCommit),
    )
    .unwrap_or_else(|e| panic!("{ctx}: recovery failed: {e}"));
    let records = read_all(recovered.device.clone());
    for (index, (lsn, bytes)) in records.iter().enumerate() {
        assert_eq!(*lsn, index as u64 + 1, "{ctx}: LSNs must be consecutive");
        let appended = outcome.appended.get(lsn);
        assert_eq!(
            appended,
            Some(bytes),
            "{ctx}: record {lsn} was never appended with these bytes"
        );
    }
    let present = records.len() as u64;
    assert_eq!(wal.next_lsn(), present + 1, "{ctx}");
    if every_commit {
        for &(lsn, events) in &outcome.acked {
            if events < crash_event {
                assert!(
                    lsn <= present,
                    "{ctx}: commit of {lsn} acknowledged at event {events} was lost ({present} records recovered)"
                );
            }
        }
    }
    drop(wal);
    accepts_appends(&recovered, Durability::EveryCommit);
}

/// Events a workload of this shape takes, measured once without a crash.
fn calibrate(medium: Medium, durability: Durability, threads: usize, per_thread: usize) -> u64 {
    let sim = Sim::new(medium);
    let wal = Wal::open(sim.device.clone(), test_config(durability)).expect("open");
    let start = sim.events();
    workload(&sim, &wal, 1, threads, per_thread);
    (sim.events() - start).max(1)
}

fn crash_once(
    medium: Medium,
    durability: Durability,
    seed: u64,
    span: u64,
    threads: usize,
    per_thread: usize,
) {
    let sim = Sim::new(medium);
    let wal = Wal::open(sim.device.clone(), test_config(durability)).expect("open");
    let mut rng = fastrand::Rng::with_seed(seed);
    // A few crashes land after the end, where everything acknowledged is
    // durable.
    let at = sim.events() + 1 + rng.u64(..(span + span / 8).max(1));
    sim.arm_crash(at, seed);
    let outcome = workload(&sim, &wal, seed, threads, per_thread);
    let (image, crash_event) = match sim.take_crash_image() {
        Some(image) => (image, at),
        None => (sim.crash_image(seed), u64::MAX),
    };
    drop(wal);
    verify(
        medium,
        image,
        &outcome,
        crash_event,
        durability == Durability::EveryCommit,
        seed,
    );
}

fn base_seed() -> u64 {
    std::env::var("FERRITE_CRASH_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5EED_0004)
}

fn concurrent_crashes(durability: Durability, default_iters: u64) {
    let (threads, per_thread) = (3, 24);
    for medium in MEDIA {
        let span = calibrate(medium, durability, threads, per_thread);
        for i in 0..crash_iters(default_iters) {
            let seed = base_seed().wrapping_add(i);
            crash_once(medium, durability, seed, span, threads, per_thread);
        }
    }
}

#[test]
fn concurrent_commits_survive_crashes_at_random_points() {
    concurrent_crashes(Durability::EveryCommit, 100);
}

#[test]
fn without_syncs_a_crash_still_recovers_a_clean_prefix() {
    concurrent_crashes(Durability::None, 30);
}

/// One writer is deterministic, so every single event can be the crash point.
#[test]
fn a_single_writer_survives_a_crash_at_every_event() {
    for medium in MEDIA {
        let span = calibrate(medium, Durability::EveryCommit, 1, 10);
        for at in 1..=span + 1 {
            let seed = base_seed() ^ at;
            let sim = Sim::new(medium);
            let wal =
                Wal::open(sim.device.clone(), test_config(Durability::EveryCommit)).expect("open");
            let crash_event = sim.events() + at;
            sim.arm_crash(crash_event, seed);
            let outcome = workload(&sim, &wal, seed, 1, 10);
            let (image, crash_event) = match sim.take_crash_image() {
                Some(image) => (image, crash_event),
                None => (sim.crash_image(seed), u64::MAX),
            };
            drop(wal);
            verify(medium, image, &outcome, crash_event, true, seed);
        }
    }
}

/// A crash while the log file itself is being created leaves a file that
/// opens as a new, empty log.
#[test]
fn a_crash_during_creation_leaves_an_openable_log() {
    for medium in MEDIA {
        for at in 1..12 {
            let sim = Sim::new(medium);
            let start = sim.events();
            sim.arm_crash(start + at, at);
            let wal =
                Wal::open(sim.device.clone(), test_config(Durability::EveryCommit)).expect("open");
            drop(wal);
            let image = sim
                .take_crash_image()
                .unwrap_or_else(|| sim.crash_image(at));
            let recovered = Sim::from_image(medium, image);
            let wal = accepts_appends(&recovered, Durability::EveryCommit);
            assert_eq!(wal.durable_lsn(), 1, "medium {medium:?}, crash at {at}");
        }
    }
}
