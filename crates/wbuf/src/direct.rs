//! Destaging with `O_DIRECT`: a round's merged runs go to the file by DMA,
//! bypassing the page cache (a buffered `pwrite` would copy them, and the
//! later `fdatasync` would then write them back). On real PM (a DAX
//! mapping, physically contiguous over its extents) a run is one vectored
//! write straight from its slots, with no copy at all, as dm-writecache
//! hands the device the cache's own pages. On PM emulated by a page-cache
//! file, whose 4 KiB pages would each be a segment of the device request,
//! and wherever the kernel refuses the mapping as a source, a run is copied
//! once into an aligned huge-page DRAM buffer (`DestageSource` has the
//! numbers). The file's `fdatasync` through
//! the ordinary descriptor still follows: it flushes the device's cache and
//! the file's size, whichever descriptor wrote the data.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use ferrite_host::IoBuffer;
use ferrite_io::{Error, Result};
use ferrite_pmem::{MapMode, PmemMedium};

use crate::buffer::lock;
use crate::config::DestageSource;

/// Whether runs go to the device straight from the PM mapping, for the
/// setting and the mapping's kind (`DestageSource`).
pub(crate) fn in_place(source: DestageSource, mode: MapMode) -> bool {
    match source {
        DestageSource::Auto => mode == MapMode::RealPm,
        DestageSource::InPlace => true,
        DestageSource::Copy => false,
    }
}

/// The alignment `O_DIRECT` asks of offsets, lengths and memory here.
pub(crate) const DIRECT_ALIGN: usize = 4096;

/// A second, `O_DIRECT` descriptor on the backing file.
pub(crate) struct DirectWriter {
    file: File,
    path: PathBuf,
    max_bytes: usize,
    /// Aligned buffers for runs copied out of PM, one per run in flight,
    /// made on first need (never, when runs are written in place).
    buffers: Mutex<Vec<IoBuffer>>,
    /// Set when runs are to be copied: by the setting, or once a write
    /// from the mapping in place was refused (a mapping the kernel will not
    /// hand to the device).
    copy_only: AtomicBool,
}

impl std::fmt::Debug for DirectWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirectWriter")
            .field("path", &self.path)
            .finish()
    }
}

impl DirectWriter {
    /// Opens `path` for direct writes of up to `max_bytes`, from PM in
    /// place or copied (`in_place`); `None` where the file system refuses
    /// `O_DIRECT` (tmpfs), so rounds write through the page cache instead.
    pub(crate) fn open(path: &Path, max_bytes: usize, in_place: bool) -> Option<DirectWriter> {
        let file = OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(path);
        let file = match file {
            Ok(file) => file,
            Err(e) => {
                tracing::debug!("no O_DIRECT destage for {}: {e}", path.display());
                return None;
            }
        };
        Some(DirectWriter {
            file,
            path: path.to_path_buf(),
            max_bytes: max_bytes.next_multiple_of(DIRECT_ALIGN),
            buffers: Mutex::new(Vec::new()),
            copy_only: AtomicBool::new(!in_place),
        })
    }

    /// Whether runs of whole blocks are written from PM in place.
    pub(crate) fn in_place(&self) -> bool {
        !self.copy_only.load(Ordering::Acquire)
    }

    /// Extends the file to `end` bytes with allocated (unwritten) blocks if
    /// it is shorter, so that the round's direct writes land inside the
    /// file on allocated blocks. Linux file systems (ext4, XFS) serialise
    /// direct writes that extend a file, or fill holes, under the inode's
    /// lock and complete each before the next starts, which would undo the
    /// round's I/O depth. The size reaches the disk with the round's
    /// `fdatasync`; until then a crash may leave the file longer, with
    /// zeros where the round's blocks go, as any torn round does. A file
    /// system without `fallocate` is left to extend the file as it writes.
    pub(crate) fn preallocate(&self, end: u64) -> Result<()> {
        let len = self
            .file
            .metadata()
            .map_err(|e| Error::io("fstat", &self.path, e))?
            .len();
        if end <= len {
            return Ok(());
        }
        match rustix::fs::fallocate(
            &self.file,
            rustix::fs::FallocateFlags::empty(),
            len,
            end - len,
        ) {
            Ok(()) => Ok(()),
            Err(rustix::io::Errno::OPNOTSUPP) => Ok(()),
            Err(e) => Err(Error::io("fallocate", &self.path, e.into())),
        }
    }

    /// Writes one run of whole blocks at `offset`: `ranges` of `pm` (each a
    /// block's image, block aligned in PM) in place when every image fills
    /// its block (`in_place`), else through a buffer that `fill` fills
    /// with the run's bytes. `offset` and the length are multiples of
    /// [`DIRECT_ALIGN`] and at most the largest run.
    pub(crate) fn write_run<M: PmemMedium>(
        &self,
        pm: &M,
        offset: u64,
        ranges: &[(usize, usize)],
        in_place: bool,
        fill: impl FnOnce(&mut [u8]) -> Result<()>,
    ) -> Result<()> {
        if in_place && !self.copy_only.load(Ordering::Acquire) {
            match pm.write_ranges_to(&self.file, offset, ranges) {
                Ok(true) => return Ok(()),
                Ok(false) => self.copy_only.store(true, Ordering::Release),
                Err(e) if matches!(e.raw_os_error(), Some(libc::EFAULT | libc::EINVAL)) => {
                    tracing::debug!(
                        "{}: PM refused as a direct write source ({e}); copying runs",
                        self.path.display()
                    );
                    self.copy_only.store(true, Ordering::Release);
                }
                Err(e) => return Err(Error::io("pwritev (O_DIRECT)", &self.path, e)),
            }
        }
        let len: usize = ranges.iter().map(|r| r.1).sum();
        let mut buffer = match lock(&self.buffers).pop() {
            Some(buffer) => buffer,
            None => IoBuffer::new(self.max_bytes)
                .map_err(|e| Error::io("allocate a direct-write buffer", &self.path, e))?,
        };
        let result = self.write_copied(&mut buffer, offset, len, fill);
        lock(&self.buffers).push(buffer);
        result
    }

    fn write_copied(
        &self,
        buffer: &mut IoBuffer,
        offset: u64,
        len: usize,
        fill: impl FnOnce(&mut [u8]) -> Result<()>,
    ) -> Result<()> {
        let chunk = buffer.get_mut(..len).ok_or_else(|| Error::TooLarge {
            path: self.path.clone(),
            offset,
            len: len as u64,
        })?;
        fill(chunk)?;
        self.file
            .write_all_at(chunk, offset)
            .map_err(|e| Error::io("pwrite (O_DIRECT)", &self.path, e))
    }
}
