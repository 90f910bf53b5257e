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

use std::sync::Arc;
use std::time::Duration;

use common::{crash_points, Pm, Ssd, World};
use ferrite_io::{Device, SECTOR};
use ferrite_wbuf::{WbufConfig, WriteBuffer};

const BLOCK: usize = 1024;
const REGION: usize = 4096 * 3 + 10 * (BLOCK + 64);
const THREADS: usize = 3;
const BLOCKS_PER_THREAD: usize = 7;
const WRITES_PER_THREAD: usize = 24;
/// Writes longer than this go through to the file (half of the 10 slots).
const BUFFER_HALF: usize = 5 * BLOCK;

fn config(background: bool) -> WbufConfig {
    WbufConfig {
        block_bytes: BLOCK as u32,
        capacity_bytes: REGION,
        max_age: Some(Duration::from_millis(2)),
        // Long enough that a staged write never falls back to a per-block
        // write-through here (a separate test covers that path).
        full_wait: Duration::from_secs(30),
        destage_io_bytes: 4 * BLOCK,
        background,
        ..WbufConfig::default()
    }
}

fn open(world: &Arc<World>, background: bool) -> WriteBuffer<Pm> {
    WriteBuffer::with_medium(
        Pm(Arc::clone(world)),
        "pm",
        Arc::new(Ssd(Arc::clone(world))),
        config(background),
    )
    .expect("open")
}

/// One write of a thread: where, what, and the clock around it.
#[derive(Clone, Debug)]
struct Done {
    offset: usize,
    data: Vec<u8>,
    start: u64,
    end: u64,
}

/// A thread's writes within its own blocks: unaligned, multi-block,
/// overwrites (absorption), and now and then one larger than half the
/// buffer (write-through).
fn thread_writes(world: &Arc<World>, buffer: &WriteBuffer<Pm>, t: usize, seed: u64) -> Vec<Done> {
    let mut rng = fastrand::Rng::with_seed(seed ^ (t as u64 + 1).wrapping_mul(0x9E37));
    let base = t * BLOCKS_PER_THREAD * BLOCK;
    let span = BLOCKS_PER_THREAD * BLOCK;
    let mut done = Vec::new();
    for i in 0..WRITES_PER_THREAD {
        let len = if i % 11 == 10 {
            6 * BLOCK
        } else {
            1 + rng.u64(..2 * BLOCK as u64) as usize
        };
        let offset = base + rng.u64(..((span - len + 1).max(1)) as u64) as usize;
        let data: Vec<u8> = (0..len).map(|_| rng.u64(..) as u8 | 1).collect();
        let start = world.events();
        buffer.write_at(offset as u64, &data).expect("write");
        let end = world.events();
        done.push(Done {
            offset,
            data,
            start,
            end,
        });
    }
    done
}

fn run_workload(world: &Arc<World>, seed: u64) -> Vec<Vec<Done>> {
    run_workload_stats(world, seed).0
}

fn run_workload_stats(world: &Arc<World>, seed: u64) -> (Vec<Vec<Done>>, ferrite_wbuf::WbufStats) {
    let buffer = open(world, true);
    let logs = std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let (world, buffer) = (&world, &buffer);
                s.spawn(move || thread_writes(world, buffer, t, seed))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("writer"))
            .collect()
    });
    let stats = buffer.stats();
    buffer.close().expect("close");
    (logs, stats)
}

fn apply(image: &mut [u8], base: usize, w: &Done) {
    image[w.offset - base..w.offset - base + w.data.len()].copy_from_slice(&w.data);
}

/// Checks a recovered device against the writes acknowledged before event
/// `crash` (must be there), the one in flight (each block old or new,
/// whole), and none after.
fn verify(device: &dyn Device, logs: &[Vec<Done>], crash: u64, what: &str) {
    for (t, log) in logs.iter().enumerate() {
        let base = t * BLOCKS_PER_THREAD * BLOCK;
        let span = BLOCKS_PER_THREAD * BLOCK;
        let mut must = vec![0u8; span];
        let mut maybe: Option<Vec<u8>> = None;
        let mut maybe_len = 0;
        for w in log {
            if w.end < crash {
                apply(&mut must, base, w);
            } else if w.start + 1 < crash {
                let mut m = must.clone();
                apply(&mut m, base, w);
                maybe = Some(m);
                maybe_len = w.data.len();
            }
        }
        let mut actual = vec![0u8; span];
        let n = device.read_at(base as u64, &mut actual).expect("read");
        actual[n..].fill(0);
        // A write larger than half the buffer goes straight to the file;
        // while in flight it may tear there at sectors, as any `pwrite`.
        // Staged blocks are whole or absent.
        let unit = if maybe_len > BUFFER_HALF {
            SECTOR
        } else {
            BLOCK
        };
        for u in 0..span / unit {
            let r = u * unit..(u + 1) * unit;
            let ok = actual[r.clone()] == must[r.clone()]
                || maybe
                    .as_ref()
                    .is_some_and(|m| actual[r.clone()] == m[r.clone()]);
            assert!(
                ok,
                "{what}: thread {t} bytes {r:?} are neither the acknowledged nor the in-flight version (in flight: {maybe_len} bytes)"
            );
        }
    }
}

/// Recovers `(pm, file)` images with a plain open and verifies, then checks
/// the file alone (after a clean close) holds the same.
fn recover_and_verify(images: (Vec<u8>, Vec<u8>), logs: &[Vec<Done>], crash: u64, what: &str) {
    let world = World::new(images.0, images.1, None);
    let buffer = open(&world, false);
    verify(&buffer, logs, crash, what);
    buffer.close().expect("close after recovery");
    verify(&world.file, logs, crash, &format!("{what}, file alone"));
}

#[test]
fn every_acknowledged_write_survives_a_crash_at_any_event() {
    let seed = 0x5EED_0001;
    let probe = World::new(vec![0; REGION], Vec::new(), None);
    let (_, stats) = run_workload_stats(&probe, seed);
    // The workload reaches every stage: rounds, absorption or overwrite of
    // destaged blocks, and write-through.
    assert!(stats.rounds > 0 && stats.bypassed > 0, "{stats:?}");
    assert!(
        stats.write_hits_uncommitted + stats.write_hits_committed > 0,
        "{stats:?}"
    );
    let total = probe.events();
    let points = crash_points().max(1);
    for i in 0..points {
        let at = 1 + i * total / points + (i % 7);
        let world = World::new(vec![0; REGION], Vec::new(), Some((at, seed + i)));
        let logs = run_workload(&world, seed);
        let images = world
            .captured()
            .unwrap_or_else(|| (world.pm.volatile_image(), world.file.durable_image()));
        recover_and_verify(
            images,
            &logs,
            at,
            &format!("crash at event {at} (seed {})", seed + i),
        );
    }
}

#[test]
fn recovery_survives_crashes_of_its_own() {
    let seed = 0x5EED_0002;
    let points = (crash_points() / 4).max(1);
    let probe = World::new(vec![0; REGION], Vec::new(), None);
    run_workload(&probe, seed);
    let total = probe.events();
    for i in 0..points {
        // A crash in the middle of the workload leaves work for recovery.
        let at = total / 3 + i * total / (2 * points);
        let world = World::new(vec![0; REGION], Vec::new(), Some((at, seed + i)));
        let logs = run_workload(&world, seed);
        let Some(first) = world.captured() else {
            continue;
        };
        // How many events a recovery (and its close) of this image takes.
        let dry = World::new(first.0.clone(), first.1.clone(), None);
        drop(open(&dry, false));
        let recovery_events = dry.events();
        for j in 1..=recovery_events {
            let again = World::new(first.0.clone(), first.1.clone(), Some((j, seed ^ j)));
            drop(open(&again, false));
            let second = again.captured().expect("the crash event came");
            recover_and_verify(
                second,
                &logs,
                at,
                &format!("crash at event {at}, then at recovery event {j}"),
            );
        }
    }
}
