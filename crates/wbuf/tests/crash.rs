//! Crash tests of the write buffer: simulated PM for the buffer, the
//! simulated file for the SSD, one event clock over both so a crash image
//! of the pair is taken at a single instant. Concurrent writers (and the
//! destage thread) run a workload; a crash is "taken" at an event of any
//! stage (staging, destage writes, the file's sync, the mark, reclaim,
//! write-through, close), then the images are recovered, and every write
//! acknowledged before the crash must read back, with no torn block. Crashes
//! inside recovery itself are taken too, and recovered again.
//!
//! `FERRITE_CRASH_ITERS` sets how many crash points each test visits
//! (default 150).

mod common;

use std::time::Duration;

use common::harness::{timed_write, Done, Harness};
use common::{crash_points, World};
use ferrite_wbuf::{WbufConfig, WriteBuffer};

const BLOCK: usize = 1024;
const BLOCKS_PER_THREAD: usize = 7;
const WRITES_PER_THREAD: usize = 24;

const HARNESS: Harness = Harness {
    region: 4096 * 3 + 10 * (BLOCK + 64),
    config,
    block: BLOCK,
    threads: 3,
    span: BLOCKS_PER_THREAD * BLOCK,
    // Writes longer than half of the 10 slots go through to the file.
    through_above: 5 * BLOCK,
    writer: thread_writes,
};

fn config(background: bool) -> WbufConfig {
    WbufConfig {
        block_bytes: BLOCK as u32,
        capacity_bytes: HARNESS.region,
        max_age: Some(Duration::from_millis(2)),
        // Long enough that a staged write never falls back to a per-block
        // write-through here (a separate test covers that path).
        full_wait: Duration::from_secs(30),
        destage_io_bytes: 4 * BLOCK,
        background,
        ..WbufConfig::default()
    }
}

/// A thread's writes within its own blocks: unaligned, multi-block,
/// overwrites (absorption), and now and then one larger than half the
/// buffer (write-through).
fn thread_writes(
    world: &World,
    buffer: &WriteBuffer<common::Pm>,
    t: usize,
    seed: u64,
) -> Vec<Done> {
    let mut rng = fastrand::Rng::with_seed(seed ^ (t as u64 + 1).wrapping_mul(0x9E37));
    let base = t * HARNESS.span;
    let span = HARNESS.span;
    (0..WRITES_PER_THREAD)
        .map(|i| {
            let len = if i % 11 == 10 {
                6 * BLOCK
            } else {
                1 + rng.u64(..2 * BLOCK as u64) as usize
            };
            let offset = base + rng.u64(..((span - len + 1).max(1)) as u64) as usize;
            let data: Vec<u8> = (0..len).map(|_| rng.u64(..) as u8 | 1).collect();
            timed_write(world, buffer, offset, data)
        })
        .collect()
}

#[test]
fn every_acknowledged_write_survives_a_crash_at_any_event() {
    let seed = 0x5EED_0001;
    let (total, stats) = HARNESS.probe(seed);
    // The workload reaches every stage: rounds, absorption or overwrite of
    // destaged blocks, and write-through.
    assert!(stats.rounds > 0 && stats.bypassed > 0, "{stats:?}");
    assert!(
        stats.write_hits_uncommitted + stats.write_hits_committed > 0,
        "{stats:?}"
    );
    HARNESS.sweep(seed, total, crash_points().max(1), 7);
}

#[test]
fn recovery_survives_crashes_of_its_own() {
    let seed = 0x5EED_0002;
    let points = (crash_points() / 4).max(1);
    let (total, _) = HARNESS.probe(seed);
    for i in 0..points {
        // A crash in the middle of the workload leaves work for recovery.
        let at = total / 3 + i * total / (2 * points);
        let world = HARNESS.world(Some((at, seed + i)));
        let (logs, _) = HARNESS.run(&world, seed);
        let Some(first) = world.captured() else {
            continue;
        };
        // How many events a recovery (and its close) of this image takes.
        let dry = World::new(first.0.clone(), first.1.clone(), None);
        drop(HARNESS.open(&dry, false));
        let recovery_events = dry.events();
        for j in 1..=recovery_events {
            let again = World::new(first.0.clone(), first.1.clone(), Some((j, seed ^ j)));
            drop(HARNESS.open(&again, false));
            let second = again.captured().expect("the crash event came");
            HARNESS.recover_and_verify(
                second,
                &logs,
                at,
                &format!("crash at event {at}, then at recovery event {j}"),
            );
        }
    }
}
