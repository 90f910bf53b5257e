//! The raw persist primitives: cache-line flushes, fences, and copies that
//! either stream past the cache or store through it and flush.
//!
//! Everything here works on raw pointers; [`crate::PmemRegion`] checks
//! bounds before calling in. Off x86_64 only the cached path exists and the
//! region falls back to `msync`.

use crate::cpu::{Dispatch, FlushInstruction, Simd, CACHE_LINE};
pub(crate) use crate::stats::StoreCounts;

/// Number of cache lines that overlap `[addr, addr + len)`.
#[inline]
pub(crate) fn lines_spanned(addr: usize, len: usize) -> usize {
    if len == 0 {
        return 0;
    }
    let start = addr & !(CACHE_LINE - 1);
    let end = addr + len;
    (end - start).div_ceil(CACHE_LINE)
}

/// Splits `[addr, addr + len)` into an unaligned head (up to the first
/// cache-line boundary), whole lines, and an unaligned tail: the streaming
/// path stores whole lines and leaves head and tail to cached stores.
#[inline]
fn split_at_lines(addr: usize, len: usize) -> (usize, usize, usize) {
    let head = ((CACHE_LINE - addr % CACHE_LINE) % CACHE_LINE).min(len);
    let lines = (len - head) / CACHE_LINE;
    (head, lines, len - head - lines * CACHE_LINE)
}

/// Writes back every cache line overlapping `[addr, addr + len)` with the
/// given instruction and returns how many lines that was. `Msync` and `None`
/// flush nothing here (the region handles `msync`).
///
/// # Safety
/// The whole range must be mapped memory.
#[inline]
pub(crate) unsafe fn flush_lines(kind: FlushInstruction, addr: *const u8, len: usize) -> u64 {
    let lines = lines_spanned(addr as usize, len);
    let start = (addr as usize) & !(CACHE_LINE - 1);
    match kind {
        FlushInstruction::Clwb => {
            for i in 0..lines {
                // SAFETY: the caller guarantees the line is mapped.
                unsafe { x86::clwb(start + i * CACHE_LINE) };
            }
        }
        FlushInstruction::Clflushopt => {
            for i in 0..lines {
                // SAFETY: the caller guarantees the line is mapped.
                unsafe { x86::clflushopt(start + i * CACHE_LINE) };
            }
        }
        FlushInstruction::Clflush => {
            for i in 0..lines {
                // SAFETY: the caller guarantees the line is mapped.
                unsafe { x86::clflush(start + i * CACHE_LINE) };
            }
        }
        FlushInstruction::Msync | FlushInstruction::None => return 0,
    }
    lines as u64
}

/// Orders every earlier flush and non-temporal store of this thread before
/// any later store: `sfence`.
#[inline]
pub(crate) fn fence() {
    x86::sfence();
}

/// Copies `len` bytes so that, after a later [`fence`] on this thread, they
/// are in the persistence domain (given a flush instruction other than
/// `Msync`/`None`): non-temporal stores for large copies, cached stores and
/// line flushes for small ones and for the unaligned head and tail.
///
/// Only the common streaming case, whole lines at a line-aligned address, is
/// inlined into the caller; every other case is one call away, which keeps
/// the hot path a handful of instructions (it measured ~2% faster at 256 B).
///
/// # Safety
/// `dst..dst+len` must be mapped, writable memory; `src..src+len` readable;
/// the two must not overlap.
#[inline(always)]
pub(crate) unsafe fn copy_nodrain(
    dispatch: &Dispatch,
    dst: *mut u8,
    src: *const u8,
    len: usize,
) -> StoreCounts {
    let whole_lines = (dst as usize | len).is_multiple_of(CACHE_LINE);
    if whole_lines && dispatch.uses_nt(len) && x86::HAS_NT {
        // SAFETY: `dst` is line-aligned and `len` is whole lines, inside
        // both ranges (forwarded from the caller).
        unsafe { x86::nt_copy_lines(dispatch.simd, dst, src, len / CACHE_LINE) };
        return StoreCounts {
            bytes_nt: len as u64,
            ..StoreCounts::default()
        };
    }
    // SAFETY: forwarded from the caller.
    unsafe { copy_nodrain_general(dispatch, dst, src, len) }
}

/// [`copy_nodrain`] for every case: cached copies, and streaming copies
/// with an unaligned head or tail.
///
/// # Safety
/// As [`copy_nodrain`].
#[inline(never)]
unsafe fn copy_nodrain_general(
    dispatch: &Dispatch,
    dst: *mut u8,
    src: *const u8,
    len: usize,
) -> StoreCounts {
    if !dispatch.uses_nt(len) || !x86::HAS_NT {
        // SAFETY: forwarded from the caller.
        unsafe { copy_cached(dst, src, len) };
        // SAFETY: forwarded from the caller.
        let lines = unsafe { flush_lines(dispatch.flush, dst, len) };
        return StoreCounts::cached(lines, len as u64);
    }
    let (head, body_lines, tail) = split_at_lines(dst as usize, len);
    let body = body_lines * CACHE_LINE;
    let mut counts = StoreCounts {
        bytes_nt: body as u64,
        bytes_cached: (head + tail) as u64,
        ..StoreCounts::default()
    };
    if head > 0 {
        // SAFETY: `head <= len`, inside both ranges.
        unsafe {
            copy_cached(dst, src, head);
            counts.lines_flushed += flush_lines(dispatch.flush, dst, head);
        }
    }
    // SAFETY: `dst + head` is cache-line aligned and `body` bytes remain in
    // both ranges.
    unsafe { x86::nt_copy_lines(dispatch.simd, dst.add(head), src.add(head), body_lines) };
    if tail > 0 {
        // SAFETY: the tail is the last `tail` bytes of both ranges.
        unsafe {
            let (d, s) = (dst.add(head + body), src.add(head + body));
            copy_cached(d, s, tail);
            counts.lines_flushed += flush_lines(dispatch.flush, d, tail);
        }
    }
    counts
}

/// Cached copy. Copies of up to 64 bytes (a log record, a header word) are
/// done inline with two overlapping moves instead of a call to `memcpy`,
/// which at that size costs as much as the copy.
///
/// # Safety
/// As [`copy_nodrain`].
#[inline(always)]
unsafe fn copy_cached(dst: *mut u8, src: *const u8, len: usize) {
    // SAFETY: every access below stays inside `[0, len)` of both ranges:
    // the second move of each pair ends exactly at `len`.
    unsafe {
        match len {
            0 => {}
            1..=3 => {
                for i in 0..len {
                    *dst.add(i) = *src.add(i);
                }
            }
            4..=7 => {
                let a = src.cast::<u32>().read_unaligned();
                let b = src.add(len - 4).cast::<u32>().read_unaligned();
                dst.cast::<u32>().write_unaligned(a);
                dst.add(len - 4).cast::<u32>().write_unaligned(b);
            }
            8..=16 => {
                let a = src.cast::<u64>().read_unaligned();
                let b = src.add(len - 8).cast::<u64>().read_unaligned();
                dst.cast::<u64>().write_unaligned(a);
                dst.add(len - 8).cast::<u64>().write_unaligned(b);
            }
            17..=32 => {
                let a = src.cast::<u128>().read_unaligned();
                let b = src.add(len - 16).cast::<u128>().read_unaligned();
                dst.cast::<u128>().write_unaligned(a);
                dst.add(len - 16).cast::<u128>().write_unaligned(b);
            }
            33..=64 => {
                let a = src.cast::<[u128; 2]>().read_unaligned();
                let b = src.add(len - 32).cast::<[u128; 2]>().read_unaligned();
                dst.cast::<[u128; 2]>().write_unaligned(a);
                dst.add(len - 32).cast::<[u128; 2]>().write_unaligned(b);
            }
            _ => std::ptr::copy_nonoverlapping(src, dst, len),
        }
    }
}

/// Sets `len` bytes to `byte`, persisted after a later [`fence`] like
/// [`copy_nodrain`].
///
/// # Safety
/// `dst..dst+len` must be mapped, writable memory.
#[inline]
pub(crate) unsafe fn memset_nodrain(
    dispatch: &Dispatch,
    dst: *mut u8,
    byte: u8,
    len: usize,
) -> StoreCounts {
    if !dispatch.uses_nt(len) || !x86::HAS_NT {
        // SAFETY: forwarded from the caller.
        unsafe { std::ptr::write_bytes(dst, byte, len) };
        // SAFETY: forwarded from the caller.
        let lines = unsafe { flush_lines(dispatch.flush, dst, len) };
        return StoreCounts::cached(lines, len as u64);
    }
    let (head, body_lines, tail) = split_at_lines(dst as usize, len);
    let body = body_lines * CACHE_LINE;
    let mut counts = StoreCounts {
        bytes_nt: body as u64,
        bytes_cached: (head + tail) as u64,
        ..StoreCounts::default()
    };
    // SAFETY: head, body and tail partition the caller's range; the body
    // starts on a cache-line boundary.
    unsafe {
        if head > 0 {
            std::ptr::write_bytes(dst, byte, head);
            counts.lines_flushed += flush_lines(dispatch.flush, dst, head);
        }
        x86::nt_set_lines(dispatch.simd, dst.add(head), byte, body_lines);
        if tail > 0 {
            let d = dst.add(head + body);
            std::ptr::write_bytes(d, byte, tail);
            counts.lines_flushed += flush_lines(dispatch.flush, d, tail);
        }
    }
    counts
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::asm;
    use std::arch::x86_64::*;

    use super::Simd;

    pub(super) const HAS_NT: bool = true;

    // The flush instructions take no `nomem` option on purpose: the compiler
    // must treat them as reading the line, so earlier stores to it are
    // emitted before the flush.

    /// # Safety
    /// `line` must be the address of mapped memory.
    #[inline(always)]
    pub(super) unsafe fn clwb(line: usize) {
        // SAFETY: clwb only writes a mapped line back; the caller checked
        // the CPU supports it through the dispatch.
        unsafe { asm!("clwb [{0}]", in(reg) line, options(nostack, preserves_flags)) };
    }

    /// # Safety
    /// `line` must be the address of mapped memory.
    #[inline(always)]
    pub(super) unsafe fn clflushopt(line: usize) {
        // SAFETY: as for `clwb`.
        unsafe { asm!("clflushopt [{0}]", in(reg) line, options(nostack, preserves_flags)) };
    }

    /// # Safety
    /// `line` must be the address of mapped memory.
    #[inline(always)]
    pub(super) unsafe fn clflush(line: usize) {
        // SAFETY: as for `clwb`; clflush is baseline on x86_64.
        unsafe { asm!("clflush [{0}]", in(reg) line, options(nostack, preserves_flags)) };
    }

    #[inline(always)]
    pub(super) fn sfence() {
        // SAFETY: sfence has no operands and touches no memory; it is
        // baseline on x86_64.
        unsafe { asm!("sfence", options(nostack, preserves_flags)) };
    }

    /// Streams `lines` whole cache lines from `src` to the line-aligned `dst`.
    ///
    /// # Safety
    /// `dst` is 64-byte aligned; both ranges span `lines * 64` mapped bytes;
    /// the CPU supports `simd`.
    #[inline]
    pub(super) unsafe fn nt_copy_lines(simd: Simd, dst: *mut u8, src: *const u8, lines: usize) {
        // SAFETY: forwarded; the dispatch only selects supported widths.
        unsafe {
            match simd {
                Simd::Avx512 => copy_avx512(dst, src, lines),
                Simd::Avx => copy_avx(dst, src, lines),
                Simd::Sse2 => copy_sse2(dst, src, lines),
            }
        }
    }

    /// Streams `byte` into `lines` whole cache lines at the line-aligned `dst`.
    ///
    /// # Safety
    /// As [`nt_copy_lines`], for `dst` only.
    #[inline]
    pub(super) unsafe fn nt_set_lines(simd: Simd, dst: *mut u8, byte: u8, lines: usize) {
        // SAFETY: forwarded; the dispatch only selects supported widths.
        unsafe {
            match simd {
                Simd::Avx512 => set_avx512(dst, byte, lines),
                Simd::Avx => set_avx(dst, byte, lines),
                Simd::Sse2 => set_sse2(dst, byte, lines),
            }
        }
    }

    #[target_feature(enable = "avx512f")]
    unsafe fn copy_avx512(dst: *mut u8, src: *const u8, lines: usize) {
        let mut i = 0;
        // Four lines per iteration: loads issued before the streams keep the
        // write-combining buffers full.
        while i + 4 <= lines {
            // SAFETY: lines i..i+4 are inside both ranges; dst is aligned.
            unsafe {
                let s = src.add(i * 64);
                let d = dst.add(i * 64);
                let a = _mm512_loadu_si512(s.cast());
                let b = _mm512_loadu_si512(s.add(64).cast());
                let c = _mm512_loadu_si512(s.add(128).cast());
                let e = _mm512_loadu_si512(s.add(192).cast());
                _mm512_stream_si512(d.cast(), a);
                _mm512_stream_si512(d.add(64).cast(), b);
                _mm512_stream_si512(d.add(128).cast(), c);
                _mm512_stream_si512(d.add(192).cast(), e);
            }
            i += 4;
        }
        while i < lines {
            // SAFETY: line i is inside both ranges; dst is aligned.
            unsafe {
                let a = _mm512_loadu_si512(src.add(i * 64).cast());
                _mm512_stream_si512(dst.add(i * 64).cast(), a);
            }
            i += 1;
        }
    }

    /// Lines per iteration of the AVX copy: eight lines are sixteen 32-byte
    /// loads, every `ymm` register, issued before the sixteen streams.
    const AVX_BATCH_LINES: usize = 8;

    /// Copies `L` whole lines: all `2L` loads, then all `2L` streams, so
    /// the streams of a batch issue back to back (as libpmem's loop does).
    ///
    /// # Safety
    /// `L` lines are inside both ranges; `dst` is 64-byte aligned; AVX.
    #[target_feature(enable = "avx")]
    #[inline]
    unsafe fn avx_batch<const L: usize>(dst: *mut u8, src: *const u8) {
        // SAFETY: forwarded; every 32-byte half of an aligned line is
        // aligned.
        unsafe {
            let mut v = [_mm256_setzero_si256(); 16];
            for (k, reg) in v.iter_mut().take(2 * L).enumerate() {
                *reg = _mm256_loadu_si256(src.add(k * 32).cast());
            }
            for (k, reg) in v.iter().take(2 * L).enumerate() {
                _mm256_stream_si256(dst.add(k * 32).cast(), *reg);
            }
        }
    }

    #[target_feature(enable = "avx")]
    unsafe fn copy_avx(dst: *mut u8, src: *const u8, lines: usize) {
        let mut i = 0;
        // Batches of 8 lines, then one of 4, 2 and 1 as the remainder
        // needs: a 256-byte copy is one 4-line batch, not four 1-line ones.
        // On AMD Zen both measured the same (bound by the memory's write
        // bandwidth from 256 B on; docs/pmem.md).
        while i + AVX_BATCH_LINES <= lines {
            // SAFETY: lines i..i+8 are inside both ranges; dst is aligned.
            unsafe { avx_batch::<AVX_BATCH_LINES>(dst.add(i * 64), src.add(i * 64)) };
            i += AVX_BATCH_LINES;
        }
        let rest = lines - i;
        if rest & 4 != 0 {
            // SAFETY: 4 of the remaining lines.
            unsafe { avx_batch::<4>(dst.add(i * 64), src.add(i * 64)) };
            i += 4;
        }
        if rest & 2 != 0 {
            // SAFETY: 2 of the remaining lines.
            unsafe { avx_batch::<2>(dst.add(i * 64), src.add(i * 64)) };
            i += 2;
        }
        if rest & 1 != 0 {
            // SAFETY: the last line.
            unsafe { avx_batch::<1>(dst.add(i * 64), src.add(i * 64)) };
        }
    }

    unsafe fn copy_sse2(dst: *mut u8, src: *const u8, lines: usize) {
        for i in 0..lines {
            // SAFETY: line i is inside both ranges; dst is 16-byte aligned.
            unsafe {
                let s = src.add(i * 64);
                let d = dst.add(i * 64);
                for k in 0..4 {
                    let v = _mm_loadu_si128(s.add(k * 16).cast());
                    _mm_stream_si128(d.add(k * 16).cast(), v);
                }
            }
        }
    }

    #[target_feature(enable = "avx512f")]
    unsafe fn set_avx512(dst: *mut u8, byte: u8, lines: usize) {
        let v = _mm512_set1_epi8(byte as i8);
        for i in 0..lines {
            // SAFETY: line i is inside the range and aligned.
            unsafe { _mm512_stream_si512(dst.add(i * 64).cast(), v) };
        }
    }

    #[target_feature(enable = "avx")]
    unsafe fn set_avx(dst: *mut u8, byte: u8, lines: usize) {
        let v = _mm256_set1_epi8(byte as i8);
        for i in 0..lines {
            // SAFETY: line i is inside the range and aligned.
            unsafe {
                _mm256_stream_si256(dst.add(i * 64).cast(), v);
                _mm256_stream_si256(dst.add(i * 64 + 32).cast(), v);
            }
        }
    }

    unsafe fn set_sse2(dst: *mut u8, byte: u8, lines: usize) {
        // SAFETY: SSE2 is baseline on x86_64.
        let v = unsafe { _mm_set1_epi8(byte as i8) };
        for i in 0..lines {
            for k in 0..4 {
                // SAFETY: line i is inside the range and aligned.
                unsafe { _mm_stream_si128(dst.add(i * 64 + k * 16).cast(), v) };
            }
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod x86 {
    //! Portable stand-ins: no flush instructions and no streaming stores.
    //! The dispatch never selects them off x86_64 (it picks `Msync`).
    use super::Simd;

    pub(super) const HAS_NT: bool = false;

    pub(super) unsafe fn clwb(_line: usize) {}
    pub(super) unsafe fn clflushopt(_line: usize) {}
    pub(super) unsafe fn clflush(_line: usize) {}

    pub(super) fn sfence() {
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
    }

    pub(super) unsafe fn nt_copy_lines(_: Simd, _: *mut u8, _: *const u8, _: usize) {}
    pub(super) unsafe fn nt_set_lines(_: Simd, _: *mut u8, _: u8, _: usize) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_spanned_counts_partial_lines() {
        assert_eq!(lines_spanned(0, 0), 0);
        assert_eq!(lines_spanned(0, 1), 1);
        assert_eq!(lines_spanned(63, 2), 2);
        assert_eq!(lines_spanned(64, 64), 1);
        assert_eq!(lines_spanned(10, 128), 3);
    }

    #[test]
    fn copies_are_exact_on_every_path() {
        let base = Dispatch::detect();
        let mut dispatches = vec![
            base.with_nt_threshold(usize::MAX),
            base.with_nt_threshold(0),
        ];
        for simd in [Simd::Sse2, Simd::Avx, Simd::Avx512] {
            if let Ok(d) = base.with_nt_threshold(0).with_simd(simd) {
                dispatches.push(d);
            }
        }
        let src: Vec<u8> = (0..5000u32).map(|i| (i * 7 + 3) as u8).collect();
        for dispatch in &dispatches {
            for (offset, len) in [
                (0, 0),
                (1, 1),
                (3, 63),
                (0, 64),
                (5, 700),
                (64, 4096),
                (17, 4900),
            ] {
                let mut dst = vec![0xEEu8; 5100];
                // SAFETY: both buffers are large enough and distinct.
                let counts = unsafe {
                    copy_nodrain(dispatch, dst.as_mut_ptr().add(offset), src.as_ptr(), len)
                };
                fence();
                assert_eq!(
                    &dst[offset..offset + len],
                    &src[..len],
                    "{dispatch} {offset} {len}"
                );
                assert!(dst[..offset].iter().all(|&b| b == 0xEE));
                assert!(dst[offset + len..].iter().all(|&b| b == 0xEE));
                assert_eq!(counts.bytes_nt + counts.bytes_cached, len as u64);
                // SAFETY: as above.
                unsafe { memset_nodrain(dispatch, dst.as_mut_ptr().add(offset), 0x5A, len) };
                fence();
                assert!(dst[offset..offset + len].iter().all(|&b| b == 0x5A));
                assert!(dst[offset + len..].iter().all(|&b| b == 0xEE));
            }
        }
    }
}
