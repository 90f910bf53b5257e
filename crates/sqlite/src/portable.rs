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

/// The magic that starts a rollback journal SQLite may still need: a
/// journal whose header is zeroed (`journal_mode=PERSIST`) or that is
/// empty (TRUNCATE) or gone (DELETE) holds nothing to roll back.
const JOURNAL_MAGIC: [u8; 8] = [0xd9, 0xd5, 0x05, 0xf9, 0x20, 0xa1, 0x63, 0xd7];

/// Refuses to export `pm` while changes beside it are not in it: a hot
/// rollback journal (a transaction to roll back) or a WAL with frames (a
/// checkpoint to run). Copying the database alone would then give a
/// corrupt or stale copy.
fn refuse_pending(pm: &Path) -> Result<()> {
    let beside = |suffix: &str| {
        let mut name = pm.as_os_str().to_owned();
        name.push(suffix);
        std::path::PathBuf::from(name)
    };
    let pending = |why: &str, path: &Path| {
        Err(Error::io(
            "export",
            path,
            std::io::Error::other(format!(
                "{why}: open the database once through the extension (ferrite-pmem or ferrite-mmap) and close it cleanly, then export"
            )),
        ))
    };
    let wal = beside("-wal");
    if wal.exists() && PmemDevice::open(&wal, PmPolicy::DrainEveryWrite)?.len() > 0 {
        return pending("a WAL with frames not yet checkpointed", &wal);
    }
    let journal = beside("-journal");
    if journal.exists() {
        let device = PmemDevice::open(&journal, PmPolicy::DrainEveryWrite)?;
        let mut magic = [0u8; 8];
        if device.len() >= magic.len() as u64 {
            ferrite_io::read_exact_at(&device, 0, &mut magic)?;
            if magic == JOURNAL_MAGIC {
                return pending("a hot rollback journal", &journal);
            }
        }
    }
    Ok(())
}

/// Copies the database in PM device file `pm` to a new plain SQLite file
/// `plain`, durably; returns its size. Close every connection to `pm`
/// first: a hot journal or a WAL with frames beside it is refused, since
/// the copy would not include it.
pub fn export(pm: &Path, plain: &Path) -> Result<u64> {
    refuse_existing(plain)?;
    refuse_pending(pm)?;
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
