//! The crash harness of the write buffer's tests: simulated PM and the
//! simulated file behind one event clock, so that a crash image of the pair
//! is taken at a single instant.

#![allow(dead_code)]

pub mod harness;

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use ferrite_io::{Device, DeviceInfo, Result as IoResult, SimFile};
use ferrite_pmem::{FlushStats, MapMode, PmemMedium, Result as PmResult, SimPmem};

pub fn crash_points() -> u64 {
    std::env::var("FERRITE_CRASH_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(150)
}

#[derive(Debug, Default)]
pub struct Clock {
    events: u64,
    armed: Option<(u64, u64)>,
    captured: Option<(Vec<u8>, Vec<u8>)>,
}

/// The PM and the file behind one event clock.
#[derive(Debug)]
pub struct World {
    clock: Mutex<Clock>,
    pub pm: SimPmem,
    pub file: SimFile,
}

impl World {
    pub fn new(pm: Vec<u8>, file: Vec<u8>, crash_at: Option<(u64, u64)>) -> Arc<World> {
        Arc::new(World {
            clock: Mutex::new(Clock {
                armed: crash_at,
                ..Clock::default()
            }),
            pm: SimPmem::from_image(pm),
            file: SimFile::from_image("ssd", file),
        })
    }

    /// Counts one mutating event, imaging both media first if a crash is
    /// armed on it; the caller performs the event with the clock held.
    pub fn tick(&self) -> MutexGuard<'_, Clock> {
        let mut clock = self.clock.lock().unwrap_or_else(PoisonError::into_inner);
        clock.events += 1;
        if let Some((at, seed)) = clock.armed {
            if clock.events >= at {
                clock.armed = None;
                clock.captured = Some((self.pm.crash_image(seed), self.file.crash_image(seed)));
            }
        }
        clock
    }

    pub fn events(&self) -> u64 {
        self.clock
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .events
    }

    pub fn captured(&self) -> Option<(Vec<u8>, Vec<u8>)> {
        self.clock
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .captured
            .take()
    }
}

#[derive(Debug)]
pub struct Pm(pub Arc<World>);

impl PmemMedium for Pm {
    fn len(&self) -> usize {
        self.0.pm.len()
    }
    fn grow(&self, new_len: usize) -> PmResult<()> {
        self.0.pm.grow(new_len)
    }
    fn read(&self, offset: usize, buf: &mut [u8]) -> PmResult<()> {
        self.0.pm.read(offset, buf)
    }
    fn write(&self, offset: usize, data: &[u8]) -> PmResult<()> {
        let _c = self.0.tick();
        self.0.pm.write(offset, data)
    }
    fn copy_nodrain(&self, offset: usize, data: &[u8]) -> PmResult<()> {
        let _c = self.0.tick();
        self.0.pm.copy_nodrain(offset, data)
    }
    fn memset_nodrain(&self, offset: usize, byte: u8, len: usize) -> PmResult<()> {
        let _c = self.0.tick();
        self.0.pm.memset_nodrain(offset, byte, len)
    }
    fn flush(&self, offset: usize, len: usize) -> PmResult<()> {
        let _c = self.0.tick();
        self.0.pm.flush(offset, len)
    }
    fn drain(&self) {
        let _c = self.0.tick();
        self.0.pm.drain()
    }
    fn store_u64(&self, offset: usize, value: u64) -> PmResult<()> {
        let _c = self.0.tick();
        self.0.pm.store_u64(offset, value)
    }
    fn load_u64(&self, offset: usize) -> PmResult<u64> {
        self.0.pm.load_u64(offset)
    }
    fn mode(&self) -> MapMode {
        MapMode::Simulated
    }
    fn stats(&self) -> FlushStats {
        self.0.pm.stats()
    }
}

#[derive(Debug)]
pub struct Ssd(pub Arc<World>);

impl Device for Ssd {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> IoResult<usize> {
        self.0.file.read_at(offset, buf)
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> IoResult<()> {
        let _c = self.0.tick();
        self.0.file.write_at(offset, data)
    }
    fn append(&self, data: &[u8]) -> IoResult<u64> {
        let _c = self.0.tick();
        self.0.file.append(data)
    }
    fn sync(&self) -> IoResult<()> {
        let _c = self.0.tick();
        self.0.file.sync()
    }
    fn len(&self) -> u64 {
        self.0.file.len()
    }
    fn set_len(&self, len: u64) -> IoResult<()> {
        let _c = self.0.tick();
        self.0.file.set_len(len)
    }
    fn info(&self) -> DeviceInfo {
        self.0.file.info()
    }
    fn path(&self) -> &std::path::Path {
        self.0.file.path()
    }
    fn poisoned(&self) -> Option<String> {
        self.0.file.poisoned()
    }
}
