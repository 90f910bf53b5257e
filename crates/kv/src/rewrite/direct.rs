//! Base parts written past the page cache (`O_DIRECT`), on Linux.
//!
//! A base part is written once, front to back, synced, and not read again
//! until the next start. Through the page cache every byte is copied by the
//! kernel, tracked as a dirty page and written back at the sync, on the CPU
//! the event loop needs. With `O_DIRECT` the device reads the writer's
//! buffer itself and the writing thread sleeps while it does (writing
//! 1 GiB cost about a sixth of the system CPU time of a buffered write and
//! `fdatasync`: `docs/results/rewrite-io.md`).
//!
//! Direct I/O wants the buffer's address, the file offset and the length
//! aligned to the device's logical block. The writer keeps a
//! [`ALIGN`]-aligned buffer, writes only whole aligned blocks at aligned
//! offsets, and at a sync writes the last partial block padded with zeros,
//! then cuts the file to its true length, so the file holds exactly the
//! bytes written. A file system that refuses `O_DIRECT` at open, or a device
//! whose blocks are larger than [`ALIGN`] (the first write fails with
//! `EINVAL`), gets the same bytes written through the page cache instead.

use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use ferrite_host::IoBuffer;
use rustix::fs::OFlags;

use super::fs::{FsWriter, WRITE_CHUNK_BYTES};
use super::pace::Pacer;

/// Alignment of buffer, offsets and lengths: the largest logical block
/// size of common devices (512 B and 4 KiB).
pub const ALIGN: usize = 4096;

/// Bytes gathered before one write: large enough that the device streams
/// and each write is one request of few pieces (the buffer is made of
/// huge pages, [`IoBuffer`]), small enough that a sync never waits long
/// for the last one. Where each request, not each byte, is what the other
/// threads pay for (a virtual disk's round trips), fewer larger writes
/// cost them less (see `docs/results/rewrite-io.md`).
const BUF_BYTES: usize = 4 << 20;

/// A file written with `O_DIRECT` where the file system allows it.
///
/// Bytes reach the file when the buffer fills and at [`FsWriter::sync`];
/// unlike a `BufWriter`, dropping the writer without a sync discards the
/// last buffer (a base part is always synced before it is used, and
/// removed if it is not).
#[derive(Debug)]
pub struct DirectWriter {
    file: File,
    /// `BUF_BYTES`, aligned to a huge page (so to [`ALIGN`]); back to the
    /// spares when the writer is dropped.
    storage: Option<IoBuffer>,
    /// Bytes gathered in the aligned buffer, not yet written whole.
    filled: usize,
    /// File offset of the buffer's first byte (a multiple of [`ALIGN`]):
    /// everything before it is written.
    offset: u64,
    direct: bool,
    /// Paces the direct writes ([`FsWriter::pace`]).
    pacer: Option<Arc<Pacer>>,
}

impl DirectWriter {
    /// Creates (or truncates) `path` for writing, with `O_DIRECT` if the
    /// file system accepts it.
    pub fn create(path: &Path) -> io::Result<DirectWriter> {
        DirectWriter::create_with(path, true)
    }

    fn create_with(path: &Path, try_direct: bool) -> io::Result<DirectWriter> {
        let open = |flags: OFlags| {
            std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .custom_flags(flags.bits() as i32)
                .open(path)
        };
        let first = if try_direct {
            OFlags::DIRECT
        } else {
            OFlags::empty()
        };
        let (file, direct) = match open(first) {
            Ok(file) => (file, try_direct),
            Err(e) if e.raw_os_error() == Some(einval()) => (open(OFlags::empty())?, false),
            Err(e) => return Err(e),
        };
        Ok(DirectWriter {
            file,
            storage: Some(take_buffer()?),
            filled: 0,
            offset: 0,
            direct,
            pacer: None,
        })
    }

    /// Whether writes still bypass the page cache.
    pub fn is_direct(&self) -> bool {
        self.direct
    }

    /// The buffer (only `drop` takes it away).
    fn buffer(&mut self) -> io::Result<&mut IoBuffer> {
        self.storage.as_mut().ok_or_else(buffer_gone)
    }

    /// Writes `len` bytes of the buffer (a multiple of [`ALIGN`] when
    /// direct) at the buffer's file offset; falls back to the page cache
    /// if the device refuses the alignment.
    fn write_at_offset(&mut self, len: usize) -> io::Result<()> {
        let storage = self.storage.as_ref().ok_or_else(buffer_gone)?;
        storage.settle();
        if self.direct {
            let whole = &storage[..len];
            let (file, offset) = (&self.file, self.offset);
            let written = match &self.pacer {
                Some(pacer) => pacer.write(|| file.write_all_at(whole, offset)),
                None => file.write_all_at(whole, offset),
            };
            match written {
                Err(e) if e.raw_os_error() == Some(einval()) => {
                    tracing::warn!(
                        "O_DIRECT refused ({e}); writing base parts through the page cache"
                    );
                    let flags = rustix::fs::fcntl_getfl(&self.file)?;
                    rustix::fs::fcntl_setfl(&self.file, flags - OFlags::DIRECT)?;
                    self.direct = false;
                }
                other => return other,
            }
        }
        // Through the page cache, in pieces of at most WRITE_CHUNK_BYTES
        // (see there: a long copy into the page cache holds the core).
        let mut at = 0;
        while at < len {
            let n = (len - at).min(WRITE_CHUNK_BYTES);
            let piece = &storage[at..at + n];
            self.file.write_all_at(piece, self.offset + at as u64)?;
            at += n;
        }
        Ok(())
    }

    /// Writes the full buffer and starts it afresh.
    fn write_full(&mut self) -> io::Result<()> {
        self.write_at_offset(BUF_BYTES)?;
        self.offset += BUF_BYTES as u64;
        self.filled = 0;
        Ok(())
    }
}

impl Drop for DirectWriter {
    fn drop(&mut self) {
        if let Some(buffer) = self.storage.take() {
            let mut spares = SPARES.lock().unwrap_or_else(PoisonError::into_inner);
            if spares.len() < SPARES_MAX {
                spares.push(buffer);
            }
        }
    }
}

/// Buffers of dropped writers, for the next ones: a fresh buffer's pages
/// are allocated, zeroed, by the writes that first touch them, on the
/// writer's core, and a fresh huge page costs several times its small
/// pages where a hypervisor backs it anew (page faults in the copy into a
/// fresh buffer were 7% of a rewrite worker's profile at 1M x 100 B). The
/// server reserves its workers' buffers when it starts
/// ([`reserve_buffers`]).
static SPARES: Mutex<Vec<IoBuffer>> = Mutex::new(Vec::new());

/// Spare buffers kept at most (4 MiB each).
const SPARES_MAX: usize = 16;

fn take_buffer() -> io::Result<IoBuffer> {
    let spare = SPARES.lock().unwrap_or_else(PoisonError::into_inner).pop();
    match spare {
        Some(buffer) => Ok(buffer),
        None => IoBuffer::new(BUF_BYTES),
    }
}

/// Makes sure `count` spare buffers (at most [`SPARES_MAX`]) are allocated
/// and their pages in memory, for writers created later; returns how many
/// bytes it allocated.
pub fn reserve_buffers(count: usize) -> io::Result<usize> {
    let count = count.min(SPARES_MAX);
    let mut allocated = 0;
    loop {
        if SPARES.lock().unwrap_or_else(PoisonError::into_inner).len() >= count {
            return Ok(allocated);
        }
        let mut buffer = IoBuffer::new(BUF_BYTES)?;
        // One write per small page allocates every page, huge or not.
        for page in buffer.chunks_mut(ALIGN) {
            page[0] = 0;
        }
        std::hint::black_box(&mut buffer[..]);
        allocated += BUF_BYTES;
        SPARES
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(buffer);
    }
}

fn buffer_gone() -> io::Error {
    io::Error::other("the writer's buffer is gone")
}

fn einval() -> i32 {
    rustix::io::Errno::INVAL.raw_os_error()
}

impl Write for DirectWriter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if self.filled == BUF_BYTES {
            self.write_full()?;
        }
        let n = data.len().min(BUF_BYTES - self.filled);
        let at = self.filled;
        // Streaming stores: the buffer goes to the device, and through the
        // cache it would evict what the event loop works on.
        self.buffer()?.stream_in(at, &data[..n]);
        self.filled += n;
        Ok(n)
    }

    /// Nothing to do: the buffer is written when full or at a sync (a
    /// partial block cannot be written directly without padding).
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl FsWriter for DirectWriter {
    /// Writes what is gathered, the last block padded with zeros, cuts the
    /// file to its true length and `fdatasync`s it. The gathered bytes stay
    /// in the buffer, so later writes continue the file where it ends.
    fn sync(&mut self) -> io::Result<()> {
        if self.filled == BUF_BYTES {
            self.write_full()?;
        }
        if self.filled > 0 {
            let padded = self.filled.next_multiple_of(ALIGN);
            let filled = self.filled;
            self.buffer()?[filled..padded].fill(0);
            self.write_at_offset(padded)?;
            if padded != self.filled {
                self.file.set_len(self.offset + self.filled as u64)?;
            }
        }
        self.file.sync_data()
    }

    fn pace(&mut self, pacer: Arc<Pacer>) {
        self.pacer = Some(pacer);
    }
}

#[cfg(test)]
#[cfg(target_os = "linux")]
mod tests {
    use super::*;

    fn pattern(len: usize, seed: u8) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect()
    }

    /// The spare buffers are shared by the whole process: tests that
    /// count them or rely on them run one at a time.
    static SPARES_TEST: Mutex<()> = Mutex::new(());

    fn spares() -> usize {
        SPARES.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    #[test]
    fn a_writer_takes_a_reserved_buffer_and_gives_it_back() {
        let _one = SPARES_TEST.lock().unwrap_or_else(PoisonError::into_inner);
        let dir = tempfile::tempdir().expect("tempdir");
        reserve_buffers(2).expect("reserve");
        assert!(spares() >= 2);
        assert_eq!(
            reserve_buffers(2).expect("reserve again"),
            0,
            "already there"
        );
        let before = spares();
        let first = DirectWriter::create(&dir.path().join("a")).expect("create");
        let address = first.storage.as_deref().map(<[u8]>::as_ptr);
        assert_eq!(spares(), before - 1, "taken from the spares");
        drop(first);
        assert_eq!(spares(), before, "given back");
        // The next writer gets the same pages, whatever they held.
        let mut second = DirectWriter::create(&dir.path().join("b")).expect("create");
        assert_eq!(second.storage.as_deref().map(<[u8]>::as_ptr), address);
        second.write_all(b"fresh").expect("write");
        second.sync().expect("sync");
        assert_eq!(std::fs::read(dir.path().join("b")).expect("read"), b"fresh");
    }

    #[test]
    fn files_hold_exactly_the_bytes_written() {
        // Buffers come back dirty from earlier cases: none of it may reach
        // a file.
        let _one = SPARES_TEST.lock().unwrap_or_else(PoisonError::into_inner);
        let dir = tempfile::tempdir().expect("tempdir");
        for (case, (len, try_direct)) in [
            0usize,
            1,
            4095,
            4096,
            4097,
            BUF_BYTES,
            BUF_BYTES + 10_001,
            3 * BUF_BYTES - 7,
        ]
        .into_iter()
        .flat_map(|len| [(len, true), (len, false)])
        .enumerate()
        {
            let path = dir.path().join(format!("part{case}"));
            let data = pattern(len, case as u8);
            let mut w = DirectWriter::create_with(&path, try_direct).expect("create");
            assert!(try_direct || !w.is_direct());
            if case % 4 == 0 {
                w.pace(Arc::new(Pacer::new(50)));
            }
            // Uneven pieces, as the part writer hands them over.
            for piece in data.chunks(7919) {
                w.write_all(piece).expect("write");
            }
            w.sync().expect("sync");
            drop(w);
            assert_eq!(std::fs::read(&path).expect("read"), data, "length {len}");
        }
    }

    #[test]
    fn writes_after_a_sync_continue_the_file() {
        let _one = SPARES_TEST.lock().unwrap_or_else(PoisonError::into_inner);
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("part");
        let (a, b) = (pattern(5000, 1), pattern(BUF_BYTES, 2));
        let mut w = DirectWriter::create(&path).expect("create");
        w.write_all(&a).expect("write");
        w.sync().expect("sync");
        assert_eq!(std::fs::read(&path).expect("read"), a);
        w.write_all(&b).expect("write");
        w.sync().expect("sync");
        let mut both = a.clone();
        both.extend_from_slice(&b);
        assert_eq!(std::fs::read(&path).expect("read"), both);
    }

    #[test]
    fn an_existing_file_is_truncated() {
        let _one = SPARES_TEST.lock().unwrap_or_else(PoisonError::into_inner);
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("part");
        std::fs::write(&path, vec![7u8; 3 * ALIGN]).expect("write");
        let mut w = DirectWriter::create(&path).expect("create");
        w.write_all(b"short").expect("write");
        w.sync().expect("sync");
        assert_eq!(std::fs::read(&path).expect("read"), b"short");
    }
}
