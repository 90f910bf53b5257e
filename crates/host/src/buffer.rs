//! [`IoBuffer`]: a DRAM buffer for large direct (`O_DIRECT`) writes, backed
//! by transparent huge pages where the kernel gives them.
//!
//! Why huge pages: a direct write hands the device the buffer's physical
//! pages. Built from 4 KiB pages, a 1 MiB buffer is 256 scattered pieces,
//! more than many devices take in one request (the queue's
//! `max_segments`), so such a write becomes several requests, each with its
//! own round trip. A buffer made of 2 MiB pages is one physically
//! contiguous piece per huge page, and a write of several MiB goes down as
//! one request; what that saves the other threads is in
//! `docs/results/rewrite-io.md`.
//!
//! Not persistent memory: the contents are lost with the process.

use std::ops::{Deref, DerefMut};

/// Size and alignment of a transparent huge page on x86-64 and arm64 (4 KiB
/// base pages).
pub const HUGE_PAGE: usize = 2 << 20;

/// A zero-initialised, [`HUGE_PAGE`]-aligned buffer of a fixed length,
/// unmapped when dropped.
pub struct IoBuffer {
    /// Start of the whole anonymous mapping.
    map: *mut libc::c_void,
    /// Length of the whole mapping.
    map_len: usize,
    /// The aligned start of the buffer, inside the mapping.
    data: *mut u8,
    len: usize,
}

// SAFETY: the mapping is owned by this value alone (private, anonymous,
// never handed out except through `&self`/`&mut self` borrows), so moving
// it to or sharing it with another thread is as sound as for a `Vec<u8>`.
unsafe impl Send for IoBuffer {}
// SAFETY: as above; `&IoBuffer` only gives out `&[u8]`.
unsafe impl Sync for IoBuffer {}

impl IoBuffer {
    /// Maps `len` bytes (at least one), aligned to [`HUGE_PAGE`], and asks
    /// for huge pages (`MADV_HUGEPAGE`; the kernel may still use small
    /// ones, which only costs the benefit). Pages are allocated as they
    /// are first written.
    pub fn new(len: usize) -> std::io::Result<IoBuffer> {
        let len = len.max(1);
        let rounded = len
            .checked_next_multiple_of(HUGE_PAGE)
            .and_then(|r| r.checked_add(HUGE_PAGE))
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::OutOfMemory))?;
        // SAFETY: a fresh private anonymous mapping at an address of the
        // kernel's choosing touches no existing memory.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                rounded,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let skip = map.cast::<u8>().align_offset(HUGE_PAGE);
        // SAFETY: `skip < HUGE_PAGE` and the mapping has `HUGE_PAGE` bytes
        // more than `len` rounded up, so `data .. data + len` lies inside it.
        let data = unsafe { map.cast::<u8>().add(skip) };
        advise_huge(data, rounded - HUGE_PAGE);
        Ok(IoBuffer {
            map,
            map_len: rounded,
            data,
            len,
        })
    }
}

#[cfg(target_os = "linux")]
fn advise_huge(data: *mut u8, len: usize) {
    // SAFETY: `data .. data + len` is inside a mapping this module owns;
    // `MADV_HUGEPAGE` changes how it is backed, never its contents.
    let rc = unsafe { libc::madvise(data.cast(), len, libc::MADV_HUGEPAGE) };
    if rc != 0 {
        tracing::debug!(
            "madvise(MADV_HUGEPAGE) refused: {}; small pages",
            std::io::Error::last_os_error()
        );
    }
}

#[cfg(not(target_os = "linux"))]
fn advise_huge(_data: *mut u8, _len: usize) {}

impl IoBuffer {
    /// Copies `data` into the buffer at offset `at` with streaming
    /// (non-temporal) stores for its whole cache lines where the CPU has
    /// them, as the persist primitives copy to PM: filling a buffer that
    /// only a device will read then does not pull its lines into the cache
    /// and evict what the other threads work on. Call
    /// [`IoBuffer::settle`] before the device reads the bytes.
    ///
    /// # Panics
    /// If `at + data.len()` is past the buffer's end.
    pub fn stream_in(&mut self, at: usize, data: &[u8]) {
        let end = at.checked_add(data.len()).expect("offset overflows");
        assert!(end <= self.len, "stream_in past the buffer's end");
        ferrite_pmem::stream_copy(&mut self[at..end], data);
    }

    /// Orders the streaming stores of [`IoBuffer::stream_in`] before what
    /// follows (the system call that hands the buffer to the device).
    pub fn settle(&self) {
        ferrite_pmem::stream_fence();
    }
}

impl Deref for IoBuffer {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: `data .. data + len` is mapped readable for the life of
        // `self`, and anonymous memory is initialised (zero-filled).
        unsafe { std::slice::from_raw_parts(self.data, self.len) }
    }
}

impl DerefMut for IoBuffer {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as for `deref`, and `&mut self` makes the borrow unique.
        unsafe { std::slice::from_raw_parts_mut(self.data, self.len) }
    }
}

impl Drop for IoBuffer {
    fn drop(&mut self) {
        // SAFETY: `map .. map + map_len` is the mapping `new` made, and no
        // borrow of it outlives `self`.
        unsafe { libc::munmap(self.map, self.map_len) };
    }
}

impl std::fmt::Debug for IoBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IoBuffer").field("len", &self.len).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_is_aligned_zeroed_and_holds_what_is_written() {
        for len in [0, 1, 4096, HUGE_PAGE - 1, HUGE_PAGE, 3 * HUGE_PAGE + 5] {
            let mut buf = IoBuffer::new(len).expect("map");
            assert_eq!(buf.len(), len.max(1));
            assert_eq!(buf.as_ptr() as usize % HUGE_PAGE, 0, "len {len}");
            assert!(buf.iter().all(|&b| b == 0));
            for (i, b) in buf.iter_mut().enumerate() {
                *b = (i % 251) as u8;
            }
            assert!(buf.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8));
        }
    }

    #[test]
    #[should_panic(expected = "past the buffer's end")]
    fn a_streamed_copy_past_the_end_panics() {
        let mut buf = IoBuffer::new(4096).expect("map");
        buf.stream_in(4000, &[1u8; 200]);
    }

    #[test]
    fn a_buffer_moves_to_another_thread() {
        let mut buf = IoBuffer::new(HUGE_PAGE).expect("map");
        buf[HUGE_PAGE - 1] = 9;
        let back = std::thread::spawn(move || buf[HUGE_PAGE - 1])
            .join()
            .expect("join");
        assert_eq!(back, 9);
    }
}
