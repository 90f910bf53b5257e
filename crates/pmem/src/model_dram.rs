//! DRAM's own costs, measured once when the media model starts, so the
//! model charges only what Optane media would add.

use std::hint::black_box;
use std::time::Instant;

use crate::cpu::{FlushInstruction, CACHE_LINE};
use crate::model::{DramCosts, HostCosts};

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
    let mut buffer = HugeBuffer::new(BUFFER);
    let mut fallback: Vec<u64>;
    let words: &mut [u64] = match buffer.as_mut() {
        Some(huge) => huge.words(),
        None => {
            fallback = vec![0u64; BUFFER / 8];
            &mut fallback
        }
    };
    // Sequential: each line points at the next one.
    for line in 0..lines {
        words[line * LINE_WORDS] = (((line + 1) % lines) * LINE_WORDS) as u64;
    }
    let seq_ns = chase(words);
    // Random: one cycle through every line in a shuffled order (Sattolo's
    // algorithm), so the prefetcher cannot guess the next line.
    let mut order: Vec<usize> = (0..lines).collect();
    let mut rng = fastrand::Rng::with_seed(0x5eed);
    for i in (1..lines).rev() {
        let j = rng.u64(..(i as u64).max(1)) as usize;
        order.swap(i, j);
    }
    for (k, &line) in order.iter().enumerate() {
        words[line * LINE_WORDS] = (order[(k + 1) % lines] * LINE_WORDS) as u64;
    }
    let random_ns = chase(words);
    let line_copy_ns = copy_per_line(words);
    DramCosts {
        random_ns,
        seq_ns,
        line_copy_ns,
    }
}

/// Measures the host's cost per line stored and flushed, for each flush
/// instruction the CPU has, and per fence: a persist of one line and one of
/// sixteen lines differ by fifteen lines' cost; the rest of the one-line
/// persist is the fence's. Lines are walked in order through a buffer
/// larger than the second-level cache, as a log or a page write would.
pub(crate) fn measure_host() -> HostCosts {
    let mut buffer = vec![0u8; 4 << 20];
    let mut line_ns = [0.0f64; 3];
    let mut fence_ns = f64::INFINITY;
    let kinds = [
        FlushInstruction::Clwb,
        FlushInstruction::Clflushopt,
        FlushInstruction::Clflush,
    ];
    for (slot, kind) in line_ns.iter_mut().zip(kinds) {
        if !kind.is_supported() {
            continue;
        }
        let one = persist_ns(&mut buffer, kind, 1);
        let sixteen = persist_ns(&mut buffer, kind, 16);
        let line = ((sixteen - one) / 15.0).max(0.0);
        *slot = line;
        fence_ns = fence_ns.min((one - line).max(0.0));
    }
    HostCosts {
        clwb_line_ns: line_ns[0],
        clflushopt_line_ns: line_ns[1],
        clflush_line_ns: line_ns[2],
        fence_ns: if fence_ns.is_finite() { fence_ns } else { 0.0 },
    }
}

/// Nanoseconds per persist of `lines` consecutive lines (a store to each,
/// a flush of each with `kind`, one fence).
fn persist_ns(buffer: &mut [u8], kind: FlushInstruction, lines: usize) -> f64 {
    let count = buffer.len() / CACHE_LINE;
    let persists = 2048 / lines.max(1);
    let mut best = f64::INFINITY;
    let mut at = 0usize;
    for _ in 0..PIECES {
        let start = Instant::now();
        for _ in 0..persists {
            for _ in 0..lines {
                let offset = (at % count) * CACHE_LINE;
                at += 1;
                if let Some(byte) = buffer.get_mut(offset) {
                    *byte = byte.wrapping_add(1);
                }
                // SAFETY: `offset` is inside `buffer`, which is mapped and
                // writable (the store above touched it).
                unsafe { crate::arch::flush_lines(kind, buffer.as_ptr().add(offset), 1) };
            }
            crate::arch::fence();
        }
        best = best.min(start.elapsed().as_nanos() as f64 / persists as f64);
    }
    black_box(&buffer);
    best
}

/// Timed pieces per measurement: the fastest counts, as a shared host's
/// preemptions only ever add time.
const PIECES: usize = 8;

/// Nanoseconds per step of following the chain in `words`.
fn chase(words: &[u64]) -> f64 {
    let mut at = 0usize;
    // Warm the page tables along the chain first.
    for _ in 0..STEPS / 4 {
        at = words.get(at).copied().unwrap_or(0) as usize;
    }
    let steps = STEPS / PIECES;
    let mut best = f64::INFINITY;
    for _ in 0..PIECES {
        let start = Instant::now();
        for _ in 0..steps {
            at = words.get(at).copied().unwrap_or(0) as usize;
        }
        best = best.min(start.elapsed().as_nanos() as f64 / steps as f64);
    }
    black_box(at);
    best
}

/// Nanoseconds to copy one 256-byte line as part of a 16 MiB copy.
fn copy_per_line(words: &[u64]) -> f64 {
    let len = (16 << 20) / 8;
    let source = &words[..len.min(words.len())];
    let mut target = vec![0u64; source.len()];
    target.copy_from_slice(source);
    let mut best = f64::INFINITY;
    for _ in 0..PIECES / 2 {
        let start = Instant::now();
        target.copy_from_slice(black_box(source));
        best = best.min(start.elapsed().as_nanos() as f64);
        black_box(&target);
    }
    best / (source.len() * 8 / 256) as f64
}

/// An anonymous mapping advised to use transparent huge pages, so the
/// random chase measures DRAM rather than page walks (which, in a virtual
/// machine, cost more than the load itself). Optane's published latencies
/// were measured the same way.
struct HugeBuffer {
    ptr: *mut u64,
    bytes: usize,
}

impl HugeBuffer {
    fn new(bytes: usize) -> Option<HugeBuffer> {
        // SAFETY: a fresh anonymous private mapping at an address of the
        // kernel's choosing touches no existing memory.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return None;
        }
        // SAFETY: advice on our own fresh mapping; failure (no THP) only
        // leaves small pages.
        unsafe { libc::madvise(ptr, bytes, libc::MADV_HUGEPAGE) };
        Some(HugeBuffer {
            ptr: ptr.cast(),
            bytes,
        })
    }

    fn words(&mut self) -> &mut [u64] {
        // SAFETY: the mapping is ours, readable and writable, zero-filled,
        // page-aligned (so u64-aligned), and lives as long as `self`.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.bytes / 8) }
    }
}

impl Drop for HugeBuffer {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping; no slice of it outlives self.
        unsafe { libc::munmap(self.ptr.cast(), self.bytes) };
    }
}
