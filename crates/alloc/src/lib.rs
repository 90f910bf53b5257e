//! Ferrite's global allocator: jemalloc 5.3 (the allocator Redis 7.0
//! ships with) behind [`Counting`], a wrapper that keeps the bytes
//! allocated in one atomic counter, so a server can compare its memory
//! with `maxmemory` before every command in O(1), as Redis compares its
//! own counter (docs/memory.md).
//!
//! The counter adds each block's *usable* size, the size class the
//! allocator rounds a request up to ([`size_class`], jemalloc's classes
//! computed here), which is what Redis counts through
//! `malloc_usable_size`. It does not ask jemalloc for the size of each
//! block (a lookup per call): the class follows from the request alone.
//!
//! The crate also reads jemalloc's own statistics for INFO and MEMORY
//! ([`stats`], [`malloc_stats`], [`purge`]). Those are only meaningful in
//! a program whose global allocator is [`jemalloc`]; the counter works
//! around any allocator (the kv tests wrap the system allocator).
//!
//! This is the one crate of the workspace that allows `unsafe`: a global
//! allocator is an `unsafe` trait, and jemalloc's purge has only a raw
//! entry point. Each block states why it is sound.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicUsize, Ordering};

pub use tikv_jemallocator::Jemalloc;

/// Bytes in live blocks allocated through any [`Counting`] allocator, in
/// usable sizes.
static ALLOCATED: AtomicUsize = AtomicUsize::new(0);

/// A global allocator that counts the usable bytes of the blocks live in
/// `A`, readable at any time with [`allocated`].
#[derive(Debug)]
pub struct Counting<A> {
    inner: A,
}

impl<A> Counting<A> {
    /// Wraps `inner`; usable in a `static`.
    pub const fn new(inner: A) -> Counting<A> {
        Counting { inner }
    }
}

/// jemalloc behind the counter: the global allocator of Ferrite's binaries.
pub const fn jemalloc() -> Counting<Jemalloc> {
    Counting::new(Jemalloc)
}

/// Bytes allocated now (usable sizes of the live blocks), one relaxed
/// atomic load. Zero in a program whose global allocator is no [`Counting`].
pub fn allocated() -> usize {
    ALLOCATED.load(Ordering::Relaxed)
}

/// The usable size of a block allocated for `layout`.
fn usable(layout: Layout) -> usize {
    // jemalloc serves alignments above its 16-byte quantum from the size
    // class of the size rounded up to the alignment.
    if layout.align() > QUANTUM {
        size_class(layout.size().next_multiple_of(layout.align()))
    } else {
        size_class(layout.size())
    }
}

// SAFETY: every method forwards its arguments unchanged to `inner`, which
// upholds `GlobalAlloc`'s contract by its own implementation; the wrapper
// only updates a counter after the call and never touches the memory.
unsafe impl<A: GlobalAlloc> GlobalAlloc for Counting<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's guarantees on `layout` are passed on as they are.
        let block = unsafe { self.inner.alloc(layout) };
        if !block.is_null() {
            ALLOCATED.fetch_add(usable(layout), Ordering::Relaxed);
        }
        block
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as in `alloc`.
        let block = unsafe { self.inner.alloc_zeroed(layout) };
        if !block.is_null() {
            ALLOCATED.fetch_add(usable(layout), Ordering::Relaxed);
        }
        block
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller guarantees `ptr` came from this allocator
        // (so from `inner`) with `layout`.
        unsafe { self.inner.dealloc(ptr, layout) };
        ALLOCATED.fetch_sub(usable(layout), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees `ptr`, `layout` and `new_size`
        // satisfy `realloc`'s contract, which `inner` shares.
        let block = unsafe { self.inner.realloc(ptr, layout, new_size) };
        if !block.is_null() {
            // `new_size` with the old alignment forms a valid layout: the
            // caller guarantees it does not overflow when rounded up.
            let grown = Layout::from_size_align(new_size, layout.align()).map_or(0, usable);
            ALLOCATED.fetch_add(grown, Ordering::Relaxed);
            ALLOCATED.fetch_sub(usable(layout), Ordering::Relaxed);
        }
        block
    }
}

/// jemalloc's quantum on 64-bit targets: the spacing of the smallest
/// classes above the tiny one.
const QUANTUM: usize = 16;

/// The size jemalloc 5 (default build: 16-byte quantum, four classes per
/// doubling) serves a request of `size` bytes from: 8; then multiples of
/// 16 up to 64; then, between 2^k and 2^(k+1), four classes spaced
/// 2^(k-2) apart (80, 96, 112, 128, 160, ...). Redis's MEMORY USAGE and
/// `used_memory` count these rounded sizes.
pub const fn size_class(size: usize) -> usize {
    if size <= 8 {
        return 8;
    }
    if size <= 4 * QUANTUM {
        return size.next_multiple_of(QUANTUM);
    }
    // The class group is the one ending at the next power of two; its
    // four classes are an eighth of that power apart.
    let Some(top) = size.checked_next_power_of_two() else {
        return size;
    };
    size.next_multiple_of(top / 8)
}

/// jemalloc's own figures, in bytes (see `man jemalloc`, `stats.*`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Bytes in blocks the application holds.
    pub allocated: usize,
    /// Bytes in the pages that hold those blocks.
    pub active: usize,
    /// Bytes of physically resident pages the allocator maps.
    pub resident: usize,
    /// Bytes in mapped extents (active and dirty).
    pub mapped: usize,
    /// Bytes of the allocator's own bookkeeping.
    pub metadata: usize,
    /// Bytes kept mapped but returned to the system.
    pub retained: usize,
}

/// jemalloc's statistics, refreshed (`epoch`) first: a call costs a few
/// microseconds, for INFO and MEMORY, not for every command.
pub fn stats() -> Option<Stats> {
    use tikv_jemalloc_ctl::{epoch, stats};
    epoch::advance().ok()?;
    Some(Stats {
        allocated: stats::allocated::read().ok()?,
        active: stats::active::read().ok()?,
        resident: stats::resident::read().ok()?,
        mapped: stats::mapped::read().ok()?,
        metadata: stats::metadata::read().ok()?,
        retained: stats::retained::read().ok()?,
    })
}

/// `jemalloc-X.Y.Z`, as Redis names its allocator in INFO.
pub fn name() -> String {
    let version = tikv_jemalloc_ctl::version::read().unwrap_or("5.3.0");
    let release = version.split('-').next().unwrap_or(version);
    format!("jemalloc-{release}")
}

/// jemalloc's full statistics report (`malloc_stats_print`), for MEMORY
/// MALLOC-STATS.
pub fn malloc_stats() -> String {
    let mut out = Vec::new();
    if tikv_jemalloc_ctl::stats_print::stats_print(&mut out, Default::default()).is_err() {
        return String::new();
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Returns every arena's dirty pages to the system now (MEMORY PURGE);
/// whether jemalloc accepted the request.
pub fn purge() -> bool {
    // `arena.<MALLCTL_ARENAS_ALL>.purge`: 4096 names all arenas.
    let name = c"arena.4096.purge";
    // SAFETY: `name` is a NUL-terminated string that outlives the call;
    // this control takes no input and returns no output, so both pointer
    // pairs are null with zero lengths, as `mallctl` allows.
    let code = unsafe {
        tikv_jemalloc_sys::mallctl(
            name.as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        )
    };
    code == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_match_jemalloc() {
        // Every request size up to 4 MiB, against jemalloc's own answer.
        let mut size = 1;
        while size <= 4 << 20 {
            let layout = Layout::from_size_align(size, 1).unwrap();
            // SAFETY: `layout` has a non-zero size; the block is freed
            // with the same layout right after its size is read.
            let usable_size = unsafe {
                let block = Jemalloc.alloc(layout);
                assert!(!block.is_null());
                let n = tikv_jemallocator::usable_size(block);
                Jemalloc.dealloc(block, layout);
                n
            };
            assert_eq!(size_class(size), usable_size, "request of {size} bytes");
            size += if size < 70_000 { 1 } else { size / 97 };
        }
    }

    #[test]
    fn classes_known_values() {
        let cases = [
            (1, 8),
            (9, 16),
            (17, 32),
            (65, 80),
            (129, 160),
            (100_001, 114_688),
        ];
        for (size, class) in cases {
            assert_eq!(size_class(size), class);
        }
    }
}
