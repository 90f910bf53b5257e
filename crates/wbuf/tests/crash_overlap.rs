//! Crash tests of back-to-back destage rounds whose writes overlap the
//! previous round's sync, started early by sequential streams: writers
//! append to their own regions of the file (each a stream), so rounds
//! start below the high watermark and follow one another while the
//! streams go on. A crash is taken at evenly spread events (staging, the
//! destage writes of one round during the sync of the one before, the
//! syncs, the marks, reclaim), the images are recovered, and every
//! acknowledged write must read back, with no torn block, from the
//! recovered buffer and from the file alone after it closes.
//!
//! `FERRITE_CRASH_ITERS` sets how many crash points the test visits
//! (default 150).

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{crash_points, Pm, Ssd, World};
use ferrite_io::Device;
use ferrite_wbuf::{WbufConfig, WbufStats, WriteBuffer};

const BLOCK: usize = 1024;
const SLOTS: usize = 16;
const REGION: usize = 4096 * 3 + SLOTS * (BLOCK + 64);
const THREADS: usize = 2;
const WRITES_PER_THREAD: usize = 40;
/// Each thread's region of the file: room for its appends.
const SPAN: usize = WRITES_PER_THREAD * 2 * BLOCK;

fn config(background: bool) -> WbufConfig {
    WbufConfig {
        block_bytes: BLOCK as u32,
        capacity_bytes: REGION,
        // Only streams, waiting writers and the watermarks start rounds.
        max_age: None,
        full_wait: Duration::from_secs(30),
        destage_io_bytes: 2 * BLOCK,
        destage_depth: 2,
        // A stream counts from its second block; a batch is 4 blocks.
        stream_writeback_bytes: Some(2 * BLOCK),
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

/// One append: where, what, and the clock around it.
#[derive(Clone, Debug)]
struct Done {
    offset: usize,
    data: Vec<u8>,
    start: u64,
    end: u64,
}

/// A thread's appends to its own region, 1 byte to 2 blocks each.
fn appends(world: &World, buffer: &WriteBuffer<Pm>, t: usize, seed: u64) -> Vec<Done> {
    let mut rng = fastrand::Rng::with_seed(seed ^ (t as u64 + 1).wrapping_mul(0x9E37));
    let mut offset = t * SPAN;
    let mut done = Vec::new();
    for _ in 0..WRITES_PER_THREAD {
        let len = 1 + rng.usize(..2 * BLOCK);
        let data: Vec<u8> = (0..len).map(|_| rng.u8(..) | 1).collect();
        let start = world.events();
        buffer.write_at(offset as u64, &data).expect("write");
        let end = world.events();
        done.push(Done {
            offset,
            data,
            start,
            end,
        });
        offset += len;
    }
    done
}

fn run_workload(world: &Arc<World>, seed: u64) -> (Vec<Vec<Done>>, WbufStats) {
    let buffer = open(world, true);
    let logs = std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let (world, buffer) = (&world, &buffer);
                s.spawn(move || appends(world, buffer, t, seed))
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

/// The thread's region with every append that ended before `crash`, and
/// with the one in flight at `crash` too, if any.
fn expected(log: &[Done], base: usize, crash: u64) -> (Vec<u8>, Option<Vec<u8>>) {
    let mut must = vec![0u8; SPAN];
    let mut maybe = None;
    for w in log {
        let at = w.offset - base;
        if w.end < crash {
            must[at..at + w.data.len()].copy_from_slice(&w.data);
        } else if w.start + 1 < crash {
            let mut m = must.clone();
            m[at..at + w.data.len()].copy_from_slice(&w.data);
            maybe = Some(m);
        }
    }
    (must, maybe)
}

/// Every block of each region must be its acknowledged contents or, for
/// the append in flight, its new contents: whole blocks, never torn.
fn verify(device: &dyn Device, logs: &[Vec<Done>], crash: u64, what: &str) {
    for (t, log) in logs.iter().enumerate() {
        let base = t * SPAN;
        let (must, maybe) = expected(log, base, crash);
        let mut actual = vec![0u8; SPAN];
        let n = device.read_at(base as u64, &mut actual).expect("read");
        actual[n..].fill(0);
        for b in 0..SPAN / BLOCK {
            let r = b * BLOCK..(b + 1) * BLOCK;
            let ok = actual[r.clone()] == must[r.clone()]
                || maybe
                    .as_ref()
                    .is_some_and(|m| actual[r.clone()] == m[r.clone()]);
            assert!(
                ok,
                "{what}: thread {t} block {b} is neither the acknowledged nor the in-flight version"
            );
        }
    }
}

#[test]
fn overlapped_rounds_lose_no_acknowledged_append() {
    let seed = 0x5EED_0003;
    let probe = World::new(vec![0; REGION], Vec::new(), None);
    let (_, stats) = run_workload(&probe, seed);
    assert!(stats.rounds > 1, "{stats:?}");
    let total = probe.events();
    let points = crash_points().max(1);
    let mut overlapped = stats.overlapped_rounds;
    for i in 0..points {
        let at = 1 + i * total / points + (i % 5);
        let world = World::new(vec![0; REGION], Vec::new(), Some((at, seed + i)));
        let (logs, stats) = run_workload(&world, seed);
        overlapped += stats.overlapped_rounds;
        let images = world
            .captured()
            .unwrap_or_else(|| (world.pm.volatile_image(), world.file.durable_image()));
        let what = format!("crash at event {at} (seed {})", seed + i);
        let recovered = World::new(images.0, images.1, None);
        let buffer = open(&recovered, false);
        verify(&buffer, &logs, at, &what);
        buffer.close().expect("close after recovery");
        verify(&recovered.file, &logs, at, &format!("{what}, file alone"));
    }
    // The runs did overlap rounds (the path under test), not only run
    // them one at a time.
    assert!(overlapped > 0, "no round overlapped its predecessor's sync");
}
