//! Destaging with `O_DIRECT`: a round's merged runs are copied once from
//! PM into an aligned DRAM buffer and written by DMA, bypassing the page
//! cache (a buffered `pwrite` would copy them a second time, and the later
//! `fdatasync` would then write them back). The file's `fdatasync` through
//! the ordinary descriptor still follows: it flushes the device's cache and
//! the file's size, whichever descriptor wrote the data.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use ferrite_host::IoBuffer;
use ferrite_io::{Error, Result};

/// The alignment `O_DIRECT` asks of offsets, lengths and memory here.
pub(crate) const DIRECT_ALIGN: usize = 4096;

/// A second, `O_DIRECT` descriptor on the backing file and its buffer.
pub(crate) struct DirectWriter {
    file: File,
    path: PathBuf,
    buffer: Mutex<IoBuffer>,
}

impl std::fmt::Debug for DirectWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirectWriter")
            .field("path", &self.path)
            .finish()
    }
}

impl DirectWriter {
    /// Opens `path` for direct writes of up to `max_bytes`; `None` where
    /// the file system refuses `O_DIRECT` (tmpfs), so rounds write through
    /// the page cache instead.
    pub(crate) fn open(path: &Path, max_bytes: usize) -> Option<DirectWriter> {
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
        let buffer = IoBuffer::new(max_bytes.next_multiple_of(DIRECT_ALIGN)).ok()?;
        Some(DirectWriter {
            file,
            path: path.to_path_buf(),
            buffer: Mutex::new(buffer),
        })
    }

    /// Fills the buffer's first `len` bytes with `fill`, then writes them
    /// at `offset` (both multiples of [`DIRECT_ALIGN`], `len` at most the
    /// buffer's size).
    pub(crate) fn write(
        &self,
        offset: u64,
        len: usize,
        fill: impl FnOnce(&mut [u8]) -> Result<()>,
    ) -> Result<()> {
        let mut buffer = crate::buffer::lock(&self.buffer);
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
