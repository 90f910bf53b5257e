//! The system libpmem (PMDK), linked only with the `libpmem` feature, so the
//! benchmarks can run it side by side with Ferrite's primitives on the same
//! mapping. Install it with `apt-get install libpmem-dev`; run with
//! `PMEM_IS_PMEM_FORCE=1` so it treats emulated PM as PM (flushes instead of
//! msync).

use std::ffi::c_void;

use crate::error::{Error, Result};
use crate::medium::PmemMedium;
use crate::region::PmemRegion;

#[link(name = "pmem")]
extern "C" {
    fn pmem_memcpy_persist(dest: *mut c_void, src: *const c_void, len: usize) -> *mut c_void;
    fn pmem_memcpy_nodrain(dest: *mut c_void, src: *const c_void, len: usize) -> *mut c_void;
    fn pmem_drain();
    fn pmem_is_pmem(addr: *const c_void, len: usize) -> i32;
}

fn check(region: &PmemRegion, offset: usize, len: usize) -> Result<*mut u8> {
    match offset.checked_add(len) {
        Some(end) if end <= region.len() => {
            // SAFETY: the range is inside the region's mapping.
            Ok(unsafe { region.base_ptr().add(offset) })
        }
        _ => Err(Error::OutOfBounds {
            offset,
            len,
            mapped: region.len(),
        }),
    }
}

/// libpmem's `pmem_memcpy_persist` into `region` at `offset`.
pub fn memcpy_persist(region: &PmemRegion, offset: usize, data: &[u8]) -> Result<()> {
    let dst = check(region, offset, data.len())?;
    // SAFETY: `dst` spans `data.len()` mapped bytes of the region; `data` is
    // a distinct Rust buffer.
    unsafe { pmem_memcpy_persist(dst.cast(), data.as_ptr().cast(), data.len()) };
    Ok(())
}

/// libpmem's `pmem_memcpy_nodrain` into `region` at `offset`.
pub fn memcpy_nodrain(region: &PmemRegion, offset: usize, data: &[u8]) -> Result<()> {
    let dst = check(region, offset, data.len())?;
    // SAFETY: as for `memcpy_persist`.
    unsafe { pmem_memcpy_nodrain(dst.cast(), data.as_ptr().cast(), data.len()) };
    Ok(())
}

/// libpmem's `pmem_drain`.
pub fn drain() {
    // SAFETY: no arguments, no memory-safety preconditions.
    unsafe { pmem_drain() };
}

/// Whether libpmem considers the whole region persistent memory (true on
/// emulated PM only with `PMEM_IS_PMEM_FORCE=1`).
pub fn is_pmem(region: &PmemRegion) -> bool {
    // SAFETY: the range is the region's mapping.
    unsafe { pmem_is_pmem(region.base_ptr().cast(), region.len()) != 0 }
}
