//! Ferrite's storage interface: the [`Device`] trait, a durable file, and
//! its backends.
//!
//! | backend | write | sync |
//! |---|---|---|
//! | [`FileDevice`] | `pwrite` | `fdatasync` |
//! | [`PmDevice`] with [`PmPolicy::FlushEveryWrite`] (`mmap`) | memcpy + flush + fence | length only |
//! | [`PmDevice`] with [`PmPolicy::DrainEveryWrite`] (`pmem`) | `copy_nodrain` + drain | length only |
//! | [`PmDevice`] with [`PmPolicy::DrainOnSync`] (`pmem-sync`) | `copy_nodrain` | drain (this thread) |
//! | [`SimFile`] | simulated page cache | simulated disk |
//!
//! A [`PmDevice`] over a [`ferrite_pmem::SimPmem`] and a [`SimFile`] are the
//! simulated media of crash tests: both produce the images a crash could
//! leave, reproducibly from a seed.
//!
//! ```
//! use ferrite_io::{Backend, Device};
//!
//! let dir = tempfile::tempdir()?;
//! for backend in Backend::ALL {
//!     let device = backend.open(dir.path().join(backend.name()))?;
//!     let at = device.append(b"durable")?;
//!     device.sync()?;
//!     let mut back = [0u8; 7];
//!     assert_eq!(device.read_at(at, &mut back)?, 7);
//!     assert_eq!(&back, b"durable");
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod buf;
mod device;
mod error;
mod file;
mod gated;
mod pm;
mod poison;
mod sim_file;

use std::fmt;
use std::path::Path;
use std::str::FromStr;

pub use device::{read_exact_at, Device, DeviceInfo, DeviceKind, SyncScope};
pub use error::{Error, Result};
pub use file::{sync_parent_dir, FileDevice};
pub use gated::GatedSync;
pub use pm::{
    stored_len, PmDevice, PmPolicy, PmemDevice, PM_GROWTH_STEP_MAX, PM_HEADER_LEN,
    PM_INITIAL_CAPACITY, PM_MAGIC,
};
pub use sim_file::{SimFile, SECTOR};

/// A backend to open a device file with, by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
    /// [`FileDevice`].
    File,
    /// [`PmDevice`], [`PmPolicy::FlushEveryWrite`].
    Mmap,
    /// [`PmDevice`], [`PmPolicy::DrainEveryWrite`].
    Pmem,
    /// [`PmDevice`], [`PmPolicy::DrainOnSync`].
    PmemSync,
}

impl Backend {
    /// Every backend.
    pub const ALL: [Backend; 4] = [
        Backend::File,
        Backend::Mmap,
        Backend::Pmem,
        Backend::PmemSync,
    ];

    /// The configuration name.
    pub fn name(self) -> &'static str {
        match self {
            Backend::File => "file",
            Backend::Mmap => "mmap",
            Backend::Pmem => "pmem",
            Backend::PmemSync => "pmem-sync",
        }
    }

    /// Opens (creating) a device of this backend at `path`.
    pub fn open(self, path: impl AsRef<Path>) -> Result<Box<dyn Device>> {
        let path = path.as_ref();
        Ok(match self {
            Backend::File => Box::new(FileDevice::open(path)?),
            Backend::Mmap => Box::new(PmemDevice::open(path, PmPolicy::FlushEveryWrite)?),
            Backend::Pmem => Box::new(PmemDevice::open(path, PmPolicy::DrainEveryWrite)?),
            Backend::PmemSync => Box::new(PmemDevice::open(path, PmPolicy::DrainOnSync)?),
        })
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Backend {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Backend, String> {
        Backend::ALL
            .into_iter()
            .find(|b| b.name() == s)
            .ok_or_else(|| {
                format!("unknown device backend {s:?}; expected file, mmap, pmem or pmem-sync")
            })
    }
}
