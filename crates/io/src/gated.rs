//! A device whose syncs wait at a gate that a test opens: a slow disk on
//! demand, for testing what a log does while a sync hangs.

use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use crate::{Device, DeviceInfo, Result};

#[derive(Debug, Default)]
struct Gate {
    /// A sync is waiting at the gate (or went through it).
    sync_arrived: bool,
    open: bool,
}

/// Wraps a device; its [`Device::sync`] waits until [`GatedSync::open`].
/// Everything else passes through.
#[derive(Debug)]
pub struct GatedSync {
    inner: Arc<dyn Device>,
    gate: Mutex<Gate>,
    changed: Condvar,
}

impl GatedSync {
    /// `inner` behind a gate, open: syncs pass until [`GatedSync::close`].
    pub fn new(inner: Arc<dyn Device>) -> GatedSync {
        GatedSync {
            inner,
            gate: Mutex::new(Gate {
                sync_arrived: false,
                open: true,
            }),
            changed: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Gate> {
        self.gate.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Closes the gate: the next syncs wait.
    pub fn close(&self) {
        *self.lock() = Gate {
            sync_arrived: false,
            open: false,
        };
    }

    /// Opens the gate: waiting syncs go on.
    pub fn open(&self) {
        self.lock().open = true;
        self.changed.notify_all();
    }

    /// Waits until a sync has reached the gate since it closed.
    pub fn wait_for_sync(&self) {
        let mut gate = self.lock();
        while !gate.sync_arrived {
            gate = self
                .changed
                .wait(gate)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

impl Device for GatedSync {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize> {
        self.inner.read_at(offset, buf)
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> Result<()> {
        self.inner.write_at(offset, data)
    }

    fn append(&self, data: &[u8]) -> Result<u64> {
        self.inner.append(data)
    }

    fn sync(&self) -> Result<()> {
        let mut gate = self.lock();
        gate.sync_arrived = true;
        self.changed.notify_all();
        while !gate.open {
            gate = self
                .changed
                .wait(gate)
                .unwrap_or_else(PoisonError::into_inner);
        }
        drop(gate);
        self.inner.sync()
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }

    fn set_len(&self, len: u64) -> Result<()> {
        self.inner.set_len(len)
    }

    fn release_cache(&self, offset: u64, len: u64) {
        self.inner.release_cache(offset, len)
    }

    fn info(&self) -> DeviceInfo {
        self.inner.info()
    }

    fn path(&self) -> &Path {
        self.inner.path()
    }

    fn poisoned(&self) -> Option<String> {
        self.inner.poisoned()
    }
}
