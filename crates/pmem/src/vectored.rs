//! Vectored writes from a mapped region to a file: the kernel (and, with
//! `O_DIRECT`, the device's DMA) reads the region's pages in place, so a
//! caller moving bytes from persistent memory to a disk does not copy them
//! through a DRAM buffer first.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

use crate::region::PmemRegion;

/// Vectors per system call: Linux's `IOV_MAX`.
const IOV_MAX: usize = 1024;

/// Writes `ranges` of `region` back to back to `file` at `file_offset`,
/// looping over short writes and `EINTR`.
pub(crate) fn write_ranges(
    region: &PmemRegion,
    file: &File,
    file_offset: u64,
    ranges: &[(usize, usize)],
) -> io::Result<()> {
    let mut iov: Vec<libc::iovec> = Vec::with_capacity(ranges.len());
    for &(offset, len) in ranges {
        if len == 0 {
            continue;
        }
        let base = region
            .at(offset, len)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        iov.push(libc::iovec {
            iov_base: base.cast(),
            iov_len: len,
        });
    }
    let mut first = 0usize;
    let mut at = file_offset;
    while first < iov.len() {
        let batch = &iov[first..iov.len().min(first + IOV_MAX)];
        let pos = libc::off_t::try_from(at)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "file offset too large"))?;
        // SAFETY: every vector points into the mapping (`at` checked its
        // bounds) and the mapping stays mapped while the region lives,
        // which outlives this call; the kernel only reads through them.
        let rc = unsafe {
            libc::pwritev(
                file.as_raw_fd(),
                batch.as_ptr(),
                batch.len() as libc::c_int,
                pos,
            )
        };
        if rc < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        if rc == 0 {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "pwritev wrote nothing",
            ));
        }
        let mut done = rc as usize;
        at += done as u64;
        // Skip the vectors written whole, trim the one written in part.
        while done > 0 {
            let Some(v) = iov.get_mut(first) else { break };
            if done >= v.iov_len {
                done -= v.iov_len;
                first += 1;
            } else {
                // SAFETY: `done < iov_len`: the new base stays inside the
                // vector's checked range.
                v.iov_base = unsafe { v.iov_base.cast::<u8>().add(done) }.cast();
                v.iov_len -= done;
                done = 0;
            }
        }
    }
    Ok(())
}
