//! DRAM's own costs, measured once when the media model starts, so the
//! model charges only what Optane media would add.

use std::hint::black_box;
use std::time::Instant;

use crate::model::DramCosts;
use crate::sim::SplitMix64;

/// Bytes of the buffer chased through: well past the last-level cache.
const BUFFER: usize = 64 << 20;
/// Words per 256-byte media line.
const LINE_WORDS: usize = 256 / 8;
/// Dependent loads timed per pattern.
const STEPS: usize = 200_000;

/// Measures DRAM's random and sequential dependent-load latency per
/// 256-byte line and its bulk copy cost per line.
pub(crate) fn measure() -> DramCosts {
    let lines = BUFFER / 256;
    let mut words = vec![0u64; BUFFER / 8];
    // Sequential: each line points at the next one.
    for line in 0..lines {
        words[line * LINE_WORDS] = (((line + 1) % lines) * LINE_WORDS) as u64;
    }
    let seq_ns = chase(&words);
    // Random: one cycle through every line in a shuffled order (Sattolo's
    // algorithm), so the prefetcher cannot guess the next line.
    let mut order: Vec<usize> = (0..lines).collect();
    let mut rng = SplitMix64::new(0x5eed);
    for i in (1..lines).rev() {
        let j = rng.below(i as u64) as usize;
        order.swap(i, j);
    }
    for (k, &line) in order.iter().enumerate() {
        words[line * LINE_WORDS] = (order[(k + 1) % lines] * LINE_WORDS) as u64;
    }
    let random_ns = chase(&words);
    let line_copy_ns = copy_per_line(&words);
    DramCosts {
        random_ns,
        seq_ns,
        line_copy_ns,
    }
}

/// Nanoseconds per step of following the chain in `words`.
fn chase(words: &[u64]) -> f64 {
    let mut at = 0usize;
    // Warm the page tables along the chain first.
    for _ in 0..STEPS / 4 {
        at = words.get(at).copied().unwrap_or(0) as usize;
    }
    let start = Instant::now();
    for _ in 0..STEPS {
        at = words.get(at).copied().unwrap_or(0) as usize;
    }
    let elapsed = start.elapsed();
    black_box(at);
    elapsed.as_nanos() as f64 / STEPS as f64
}

/// Nanoseconds to copy one 256-byte line as part of a 16 MiB copy.
fn copy_per_line(words: &[u64]) -> f64 {
    let len = (16 << 20) / 8;
    let source = &words[..len.min(words.len())];
    let mut target = vec![0u64; source.len()];
    target.copy_from_slice(source);
    let start = Instant::now();
    target.copy_from_slice(black_box(source));
    let elapsed = start.elapsed();
    black_box(&target);
    elapsed.as_nanos() as f64 / (source.len() * 8 / 256) as f64
}
