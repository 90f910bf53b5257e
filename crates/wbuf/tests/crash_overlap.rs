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

use std::time::Duration;

use common::harness::{timed_write, Done, Harness};
use common::{crash_points, Pm, World};
use ferrite_wbuf::{WbufConfig, WriteBuffer};

const BLOCK: usize = 1024;
const SLOTS: usize = 16;
const WRITES_PER_THREAD: usize = 40;

const HARNESS: Harness = Harness {
    region: 4096 * 3 + SLOTS * (BLOCK + 64),
    config,
    block: BLOCK,
    threads: 2,
    // Each thread's region of the file: room for its appends.
    span: WRITES_PER_THREAD * 2 * BLOCK,
    // No append is long enough to go through to the file: every block is
    // staged, so whole or absent.
    through_above: usize::MAX,
    writer: appends,
};

fn config(background: bool) -> WbufConfig {
    WbufConfig {
        block_bytes: BLOCK as u32,
        capacity_bytes: HARNESS.region,
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

/// A thread's appends to its own region, 1 byte to 2 blocks each.
fn appends(world: &World, buffer: &WriteBuffer<Pm>, t: usize, seed: u64) -> Vec<Done> {
    let mut rng = fastrand::Rng::with_seed(seed ^ (t as u64 + 1).wrapping_mul(0x9E37));
    let mut offset = t * HARNESS.span;
    (0..WRITES_PER_THREAD)
        .map(|_| {
            let len = 1 + rng.usize(..2 * BLOCK);
            let data: Vec<u8> = (0..len).map(|_| rng.u8(..) | 1).collect();
            let done = timed_write(world, buffer, offset, data);
            offset += len;
            done
        })
        .collect()
}

#[test]
fn overlapped_rounds_lose_no_acknowledged_append() {
    let seed = 0x5EED_0003;
    let (total, stats) = HARNESS.probe(seed);
    assert!(stats.rounds > 1, "{stats:?}");
    let crashed = HARNESS.sweep(seed, total, crash_points().max(1), 5);
    let overlapped: u64 =
        stats.overlapped_rounds + crashed.iter().map(|s| s.overlapped_rounds).sum::<u64>();
    // The runs did overlap rounds (the path under test), not only run
    // them one at a time.
    assert!(overlapped > 0, "no round overlapped its predecessor's sync");
}
