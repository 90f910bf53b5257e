//! The VFS modes and what each may promise SQLite.

use std::fmt;
use std::str::FromStr;

use ferrite_io::PmPolicy;

/// How a VFS writes and syncs its files.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Vanilla-equivalent: `pwrite` on write, `fdatasync` on sync
    /// ([`ferrite_io::FileDevice`]). Files are plain SQLite files.
    File,
    /// The paper's SQLite/MM: the file is mapped, every write is copied,
    /// flushed and fenced before it returns; sync only persists a changed
    /// length.
    Mmap,
    /// The paper's SQLite/PMM: `copy_nodrain` on write, one drain on sync.
    Pmem,
    /// Plain SQLite files on disk, each behind its own PM write buffer
    /// (`crates/wbuf`, paper 003): a write is durable once staged in PM
    /// and reaches the file later; sync orders nothing.
    Wbuf,
}

impl Mode {
    /// The modes of paper 000 (SQLite on PM); [`Mode::EVERY`] adds
    /// `ferrite-wbuf`.
    pub const ALL: [Mode; 3] = [Mode::File, Mode::Mmap, Mode::Pmem];

    /// Every mode, `ferrite-wbuf` included: what `register_defaults_linked`
    /// and the extension register.
    pub const EVERY: [Mode; 4] = [Mode::File, Mode::Mmap, Mode::Pmem, Mode::Wbuf];

    /// Lower-case name: `file`, `mmap`, `pmem` or `wbuf`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::File => "file",
            Mode::Mmap => "mmap",
            Mode::Pmem => "pmem",
            Mode::Wbuf => "wbuf",
        }
    }

    /// The name the VFS is registered under: `ferrite-file`,
    /// `ferrite-mmap`, `ferrite-pmem` or `ferrite-wbuf`.
    pub fn vfs_name(self) -> &'static str {
        match self {
            Mode::File => "ferrite-file",
            Mode::Mmap => "ferrite-mmap",
            Mode::Pmem => "ferrite-pmem",
            Mode::Wbuf => "ferrite-wbuf",
        }
    }

    /// The PM write policy, for the PM modes.
    pub fn policy(self) -> Option<PmPolicy> {
        match self {
            Mode::File | Mode::Wbuf => None,
            Mode::Mmap => Some(PmPolicy::FlushEveryWrite),
            Mode::Pmem => Some(PmPolicy::DrainOnSync),
        }
    }

    /// Whether files of this mode are PM device files (with the 4 KiB
    /// Ferrite header) rather than plain SQLite files.
    pub fn is_pm(self) -> bool {
        matches!(self, Mode::Mmap | Mode::Pmem)
    }

    /// Whether a file of this mode is served by one device per process
    /// that holds state of its own (a PM mapping, a write buffer's index):
    /// connections share it, its length is the device's, other processes
    /// are refused, and a database keeps its rollback journal's device
    /// between transactions.
    pub fn owns_device(self) -> bool {
        self != Mode::File
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Mode {
    type Err = String;

    fn from_str(s: &str) -> Result<Mode, String> {
        Mode::EVERY
            .into_iter()
            .find(|m| m.name() == s || m.vfs_name() == s)
            .ok_or_else(|| format!("unknown VFS mode {s:?}; expected file, mmap, pmem or wbuf"))
    }
}

/// What a VFS instance is: its mode and which device characteristics it
/// advertises. `docs/sqlite.md` gives the reasoning for each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct VfsOptions {
    /// How files are written and synced.
    pub mode: Mode,
    /// Advertise `SQLITE_IOCAP_SAFE_APPEND` on the PM modes. Off by
    /// default: it is unsafe with `journal_mode=PERSIST` (see
    /// `device_characteristics`); on only to measure what it is worth.
    pub safe_append: bool,
    /// Let SQLite read pages in place through `xFetch` (when it asks for
    /// memory-mapped I/O). Turned off when the host SQLite was built with
    /// `SQLITE_MMAP_READWRITE`: that SQLite would then write through the
    /// fetched pointers, bypassing the VFS's flushes and fences, so a
    /// write would not be durable when SQLite believes it is.
    pub in_place_reads: bool,
}

impl VfsOptions {
    /// The defaults for `mode`: the characteristics that hold in every
    /// journal mode.
    pub fn new(mode: Mode) -> VfsOptions {
        VfsOptions {
            mode,
            safe_append: false,
            in_place_reads: true,
        }
    }

    /// `SQLITE_IOCAP_*` bits for `xDeviceCharacteristics`.
    ///
    /// - `POWERSAFE_OVERWRITE` everywhere: a crash never changes bytes
    ///   outside a write's range (the unix VFS assumes the same of disks;
    ///   PM stores only touch the bytes written).
    /// - `SAFE_APPEND` only on request (`safe_append`): the PM length is
    ///   persisted after the data it covers, so appends are safe, but with
    ///   it SQLite leaves the journal's record count to be derived from the
    ///   file's size and skips the sync that publishes the count. In
    ///   `journal_mode=PERSIST` the journal keeps its old, larger size, so
    ///   after a crash before the journal's first sync the size covers this
    ///   transaction's half-written (torn) records, which SQLite's sparse
    ///   checksum can accept and play back into the database. The crash
    ///   test found exactly that (PERSIST, seed 12672194); without the flag
    ///   it recovers correctly.
    /// - `SEQUENTIAL` on `mmap` only: every write is flushed and fenced
    ///   before it returns, so writes persist in call order. `pmem` defers
    ///   the drain to sync, so two writes between syncs are unordered.
    /// - No `ATOMIC*`: PM is failure-atomic only for aligned 8-byte words.
    pub fn device_characteristics(&self) -> i32 {
        use libsqlite3_sys as ffi;
        let mut caps = ffi::SQLITE_IOCAP_POWERSAFE_OVERWRITE;
        if self.mode.is_pm() && self.safe_append {
            caps |= ffi::SQLITE_IOCAP_SAFE_APPEND;
        }
        if self.mode == Mode::Mmap {
            caps |= ffi::SQLITE_IOCAP_SEQUENTIAL;
        }
        caps
    }

    /// `xSectorSize`: 4096 on disk (as the unix VFS reports); SQLite's
    /// minimum of 512 on PM, which never disturbs bytes it was not asked
    /// to write, so the journal need not pad to a disk sector.
    pub fn sector_size(&self) -> i32 {
        if self.mode.is_pm() {
            512
        } else {
            4096
        }
    }
}
