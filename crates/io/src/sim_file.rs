//! [`SimFile`]: a disk file simulated in memory, for crash tests (the model
//! of SQLite's `test6.c`).
//!
//! The simulator keeps what readers see and what the disk durably holds.
//! Writes and length changes since the last successful sync are *pending*.
//! A crash ([`SimFile::crash_image`]) replays the pending operations in order
//! on the durable image, deciding at random (reproducibly from a seed) for
//! each 512-byte sector of each write whether it reached the disk, and for
//! each length change whether it did: so an unsynced write may survive
//! whole, torn at sector boundaries, or not at all, and an extended file
//! may come back longer with zeros where data was lost (as ext4 can).
//!
//! Faults can be injected: a failing sync (which poisons the device, as a
//! real failed `fdatasync` must) and a space limit (writes past it fail with
//! [`Error::NoSpace`]).

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use ferrite_pmem::CrashTrigger;

use crate::device::{Device, DeviceInfo, DeviceKind, SyncScope};
use crate::error::{Error, Result};
use crate::poison::Poison;

/// Granularity at which an unsynced write can tear.
pub const SECTOR: usize = 512;

#[derive(Clone, Debug)]
enum Pending {
    Write { offset: usize, data: Vec<u8> },
    SetLen(usize),
}

#[derive(Debug, Default)]
struct State {
    data: Vec<u8>,
    durable: Vec<u8>,
    pending: Vec<Pending>,
    crash: CrashTrigger,
    fail_syncs: u32,
    space_limit: Option<usize>,
}

/// A simulated disk file; see the module docs.
#[derive(Debug)]
pub struct SimFile {
    path: PathBuf,
    state: Mutex<State>,
    poison: Poison,
}

impl SimFile {
    /// An empty simulated file named `path` in messages.
    pub fn new(path: impl Into<PathBuf>) -> SimFile {
        SimFile::from_image(path, Vec::new())
    }

    /// A simulated file whose disk holds `image` (what recovery sees after a
    /// crash).
    pub fn from_image(path: impl Into<PathBuf>, image: Vec<u8>) -> SimFile {
        SimFile {
            path: path.into(),
            state: Mutex::new(State {
                data: image.clone(),
                durable: image,
                ..State::default()
            }),
            poison: Poison::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// One mutating step: counts it and takes an armed crash image first.
    fn step(&self) -> MutexGuard<'_, State> {
        let mut state = self.lock();
        if let Some(seed) = state.crash.tick() {
            let image = state.crash_image(seed);
            state.crash.capture(image);
        }
        state
    }

    /// What the disk could hold if the machine crashed now, chosen by `seed`.
    pub fn crash_image(&self, seed: u64) -> Vec<u8> {
        self.lock().crash_image(seed)
    }

    /// What the disk holds for certain: the state at the last sync.
    pub fn durable_image(&self) -> Vec<u8> {
        self.lock().durable.clone()
    }

    /// Mutating operations (writes, length changes, syncs) so far.
    pub fn events(&self) -> u64 {
        self.lock().crash.events()
    }

    /// Takes a crash image, chosen by `seed`, just before event `at_event`
    /// happens; collect it with [`SimFile::take_crash_image`].
    pub fn arm_crash(&self, at_event: u64, seed: u64) {
        let mut state = self.lock();
        if let Some(seed) = state.crash.arm(at_event, seed) {
            let image = state.crash_image(seed);
            state.crash.capture(image);
        }
    }

    /// The image captured by [`SimFile::arm_crash`], if its event came.
    pub fn take_crash_image(&self) -> Option<Vec<u8>> {
        self.lock().crash.take()
    }

    /// Makes the next `count` syncs fail with EIO.
    pub fn fail_next_syncs(&self, count: u32) {
        self.lock().fail_syncs = count;
    }

    /// Makes writes that would end past `limit` bytes fail with
    /// [`Error::NoSpace`].
    pub fn set_space_limit(&self, limit: Option<usize>) {
        self.lock().space_limit = limit;
    }

    fn range(&self, offset: u64, len: usize) -> Result<(usize, usize)> {
        let too_large = || Error::TooLarge {
            path: self.path.clone(),
            offset,
            len: len as u64,
        };
        let start = usize::try_from(offset).map_err(|_| too_large())?;
        let end = start.checked_add(len).ok_or_else(too_large)?;
        Ok((start, end))
    }

    fn write_locked(&self, state: &mut State, start: usize, data: &[u8]) -> Result<()> {
        let end = start + data.len();
        if state.space_limit.is_some_and(|limit| end > limit) {
            return Err(Error::NoSpace {
                path: self.path.clone(),
            });
        }
        if state.data.len() < end {
            state.data.resize(end, 0);
        }
        state.data[start..end].copy_from_slice(data);
        state.pending.push(Pending::Write {
            offset: start,
            data: data.to_vec(),
        });
        Ok(())
    }
}

impl State {
    fn crash_image(&self, seed: u64) -> Vec<u8> {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut image = self.durable.clone();
        for op in &self.pending {
            match op {
                Pending::SetLen(len) => {
                    if rng.u64(..2) == 0 {
                        image.resize(*len, 0);
                    }
                }
                Pending::Write { offset, data } => {
                    let end = offset + data.len();
                    let mut sector_start = offset / SECTOR * SECTOR;
                    while sector_start < end {
                        let from = sector_start.max(*offset);
                        let to = (sector_start + SECTOR).min(end);
                        if rng.u64(..2) == 0 {
                            if image.len() < to {
                                image.resize(to, 0);
                            }
                            image[from..to].copy_from_slice(&data[from - offset..to - offset]);
                        }
                        sector_start += SECTOR;
                    }
                }
            }
        }
        // The size may have reached the disk without some of the data.
        if self.data.len() > image.len() && rng.u64(..8) == 0 {
            image.resize(self.data.len(), 0);
        }
        image
    }
}

impl Device for SimFile {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize> {
        let state = self.lock();
        let len = state.data.len() as u64;
        if offset >= len {
            return Ok(0);
        }
        let start = offset as usize;
        let n = (state.data.len() - start).min(buf.len());
        buf[..n].copy_from_slice(&state.data[start..start + n]);
        Ok(n)
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> Result<()> {
        self.poison.check(&self.path)?;
        let (start, _) = self.range(offset, data.len())?;
        let mut state = self.step();
        self.write_locked(&mut state, start, data)
    }

    fn append(&self, data: &[u8]) -> Result<u64> {
        self.poison.check(&self.path)?;
        let mut state = self.step();
        let start = state.data.len();
        self.range(start as u64, data.len())?;
        self.write_locked(&mut state, start, data)?;
        Ok(start as u64)
    }

    fn sync(&self) -> Result<()> {
        self.poison.check(&self.path)?;
        let mut state = self.step();
        if state.fail_syncs > 0 {
            state.fail_syncs -= 1;
            drop(state);
            let error = Error::io(
                "fdatasync",
                &self.path,
                std::io::Error::from_raw_os_error(5),
            );
            return Err(self.poison.poison(error));
        }
        state.durable = state.data.clone();
        state.pending.clear();
        Ok(())
    }

    fn len(&self) -> u64 {
        self.lock().data.len() as u64
    }

    fn set_len(&self, len: u64) -> Result<()> {
        self.poison.check(&self.path)?;
        let (len, _) = self.range(len, 0)?;
        let mut state = self.step();
        if state.space_limit.is_some_and(|limit| len > limit) {
            return Err(Error::NoSpace {
                path: self.path.clone(),
            });
        }
        state.data.resize(len, 0);
        state.pending.push(Pending::SetLen(len));
        Ok(())
    }

    fn info(&self) -> DeviceInfo {
        DeviceInfo {
            kind: DeviceKind::SimFile,
            pmem_mode: None,
            durable_on_write: false,
            sync_scope: SyncScope::AllThreads,
        }
    }

    fn path(&self) -> &Path {
        &self.path
    }

    fn poisoned(&self) -> Option<String> {
        self.poison.cause()
    }
}
