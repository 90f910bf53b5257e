//! Cache hints for the crates that may not use `unsafe`: the one
//! instruction they need from the CPU is a prefetch.

/// Asks the CPU to start loading the cache line at `addr` into all cache
/// levels. Walking a million separately allocated values (a rewrite
/// serialising the keyspace) misses the cache and the TLB on nearly every
/// value; issuing the loads a few values ahead overlaps those misses.
///
/// A prefetch is only a hint: it never faults, never changes memory, and
/// any address (dangling, null, unmapped) is allowed, so this is safe to
/// call with any pointer. Off x86-64 it does nothing.
#[inline(always)]
pub fn prefetch<T>(addr: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `prefetcht0` needs SSE, which every x86-64 CPU has; it reads
    // no memory architecturally and cannot fault on any address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(addr.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = addr;
}

/// Like [`prefetch`], but asks for the line to be kept out of the outer
/// caches where the CPU allows (`prefetchnta`): for data read once.
#[inline(always)]
pub fn prefetch_once<T>(addr: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: as for `prefetch`.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_NTA }>(addr.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = addr;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_address_is_fine() {
        let v = vec![7u8; 256];
        prefetch(v.as_ptr());
        prefetch(std::ptr::null::<u8>());
        prefetch(usize::MAX as *const u8);
        prefetch_once(v.as_ptr());
        prefetch_once(std::ptr::null::<u8>());
        prefetch_once(usize::MAX as *const u8);
        assert_eq!(v[255], 7);
    }
}
