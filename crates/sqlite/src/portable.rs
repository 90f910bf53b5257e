//! Moving databases between PM device files and plain SQLite files.
//!
//! A database on `ferrite-mmap` or `ferrite-pmem` is a PM device file: a
//! 4 KiB Ferrite header (magic, version, checksum and the failure-atomic
//! logical length), then the SQLite bytes. Stock SQLite cannot open it;
//! these functions convert. (From SQLite itself, `VACUUM INTO` or the
//! backup API across VFSes do the same; see `docs/sqlite.md`.)

use std::path::Path;

use ferrite_io::{Device, FileDevice, PmPolicy, PmemDevice};

use crate::error::{Error, Result};

/// Bytes copied per step.
const CHUNK: usize = 1 << 20;

fn copy(from: &dyn Device, to: &dyn Device) -> Result<u64> {
    let len = from.len();
    let mut buf = vec![0u8; CHUNK];
    let mut offset = 0;
    while offset < len {
        let n = (len - offset).min(CHUNK as u64) as usize;
        ferrite_io::read_exact_at(from, offset, &mut buf[..n])?;
        to.write_at(offset, &buf[..n])?;
        offset += n as u64;
    }
    to.set_len(len)?;
    to.sync()?;
    Ok(len)
}

fn refuse_existing(path: &Path) -> Result<()> {
    if path.exists() {
        return Err(Error::io(
            "create",
            path,
            std::io::Error::new(std::io::ErrorKind::AlreadyExists, "refusing to overwrite"),
        ));
    }
    Ok(())
}

/// Copies the database in PM device file `pm` to a new plain SQLite file
/// `plain`, durably; returns its size. Close every connection to `pm`
/// first (a hot journal or WAL beside it is not included).
pub fn export(pm: &Path, plain: &Path) -> Result<u64> {
    refuse_existing(plain)?;
    let from = PmemDevice::open(pm, PmPolicy::DrainEveryWrite)?;
    let to = FileDevice::open(plain)?;
    copy(&from, &to)
}

/// Copies plain SQLite file `plain` into a new PM device file `pm`,
/// durably; returns the database size.
pub fn import(plain: &Path, pm: &Path) -> Result<u64> {
    refuse_existing(pm)?;
    let from = FileDevice::open_existing(plain)?;
    let to = PmemDevice::open(pm, PmPolicy::DrainEveryWrite)?;
    copy(&from, &to)
}
