//! The persist primitives' copy, offered for ordinary memory: a safe
//! streaming copy between slices, for buffers that only a device will read
//! (the kv rewrite's `O_DIRECT` buffers, `ferrite_host::IoBuffer`).

use crate::cpu::Dispatch;

/// Copies `src` into `dst` with the stores the persist primitives use:
/// non-temporal for whole cache lines where the CPU has them, so that
/// filling a buffer nobody on this CPU will read does not evict what the
/// other threads work on. Call [`stream_fence`] before handing `dst` to
/// another agent (a system call that starts a device's DMA).
///
/// # Panics
/// If the slices differ in length.
pub fn stream_copy(dst: &mut [u8], src: &[u8]) {
    assert_eq!(dst.len(), src.len(), "stream_copy needs equal lengths");
    let dispatch = Dispatch::global();
    // SAFETY: both ranges are live slices of `len` bytes, `dst` writable
    // and unique (`&mut`), so they cannot overlap.
    unsafe { crate::arch::copy_nodrain(&dispatch, dst.as_mut_ptr(), src.as_ptr(), src.len()) };
}

/// Orders this thread's earlier [`stream_copy`] stores before what follows.
pub fn stream_fence() {
    crate::arch::fence();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streamed_copies_land_exactly_at_any_offset_and_length() {
        let src: Vec<u8> = (0..20_000u32).map(|i| (i % 253) as u8 + 1).collect();
        let mut buf = vec![0u8; 64 * 1024];
        for (at, len) in [
            (0, 0),
            (0, 1),
            (3, 61),
            (64, 64),
            (100, 300),
            (4000, 20_000),
        ] {
            stream_copy(&mut buf[at..at + len], &src[..len]);
            stream_fence();
            assert_eq!(&buf[at..at + len], &src[..len]);
        }
    }
}
