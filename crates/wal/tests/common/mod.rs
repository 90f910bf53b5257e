//! Simulated media for the wal tests: a disk file and persistent memory,
//! each able to produce crash images.
#![allow(dead_code)]

use std::sync::Arc;

use ferrite_io::{Device, PmDevice, PmPolicy, SimFile};
use ferrite_pmem::SimPmem;
use ferrite_wal::{Durability, LogReader, Wal, WalConfig};

/// Which simulated medium.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Medium {
    File,
    Pm(PmPolicy),
}

pub const MEDIA: [Medium; 3] = [
    Medium::File,
    Medium::Pm(PmPolicy::DrainEveryWrite),
    Medium::Pm(PmPolicy::DrainOnSync),
];

/// A simulated device and a handle to its simulator.
pub struct Sim {
    pub device: Arc<dyn Device>,
    file: Option<Arc<SimFile>>,
    pm: Option<Arc<PmDevice<SimPmem>>>,
}

impl Sim {
    pub fn new(medium: Medium) -> Sim {
        Sim::from_image(medium, Vec::new())
    }

    /// A device whose medium holds `image` (what a crash left).
    pub fn from_image(medium: Medium, image: Vec<u8>) -> Sim {
        match medium {
            Medium::File => {
                let file = Arc::new(SimFile::from_image("sim.log", image));
                Sim {
                    device: file.clone(),
                    file: Some(file),
                    pm: None,
                }
            }
            Medium::Pm(policy) => {
                let pm = SimPmem::from_image(image);
                let device = Arc::new(PmDevice::new(pm, "sim-pm.log", policy).expect("pm device"));
                Sim {
                    device: device.clone(),
                    file: None,
                    pm: Some(device),
                }
            }
        }
    }

    pub fn file(&self) -> &SimFile {
        self.file.as_deref().expect("a simulated file")
    }

    pub fn pm(&self) -> &SimPmem {
        self.pm.as_deref().expect("simulated PM").medium()
    }

    pub fn events(&self) -> u64 {
        match (&self.file, &self.pm) {
            (Some(f), _) => f.events(),
            (_, Some(p)) => p.medium().events(),
            _ => unreachable!(),
        }
    }

    pub fn arm_crash(&self, at_event: u64, seed: u64) {
        match (&self.file, &self.pm) {
            (Some(f), _) => f.arm_crash(at_event, seed),
            (_, Some(p)) => p.medium().arm_crash(at_event, seed),
            _ => unreachable!(),
        }
    }

    pub fn take_crash_image(&self) -> Option<Vec<u8>> {
        match (&self.file, &self.pm) {
            (Some(f), _) => f.take_crash_image(),
            (_, Some(p)) => p.medium().take_crash_image(),
            _ => unreachable!(),
        }
    }

    pub fn crash_image(&self, seed: u64) -> Vec<u8> {
        match (&self.file, &self.pm) {
            (Some(f), _) => f.crash_image(seed),
            (_, Some(p)) => p.medium().crash_image(seed),
            _ => unreachable!(),
        }
    }

    /// What certainly survives: the last synced file, the persisted PM.
    pub fn durable_image(&self) -> Vec<u8> {
        match (&self.file, &self.pm) {
            (Some(f), _) => f.durable_image(),
            (_, Some(p)) => p.medium().persisted_image(),
            _ => unreachable!(),
        }
    }
}

/// Small limits so tests exercise back-pressure and preallocation.
pub fn test_config(durability: Durability) -> WalConfig {
    WalConfig {
        durability,
        max_in_flight_bytes: 8 << 10,
        record_bytes_max: 1 << 10,
        preallocate_bytes: 4 << 10,
        release_synced_cache: true,
        periodic_sync_bytes: 16 << 20,
        base_lsn: 1,
    }
}

/// Every record of the log on `device`, as (LSN, payload).
pub fn read_all(device: Arc<dyn Device>) -> Vec<(u64, Vec<u8>)> {
    LogReader::open(device)
        .expect("log header")
        .map(|r| {
            let record = r.expect("read");
            (record.lsn, record.payload)
        })
        .collect()
}

/// A payload that says who wrote it and is checkable.
pub fn payload(rng: &mut fastrand::Rng, writer: usize, seq: usize) -> Vec<u8> {
    let len = 8 + rng.u64(..200) as usize;
    let mut bytes = format!("w{writer}:{seq}:").into_bytes();
    while bytes.len() < len {
        bytes.push(b'a' + rng.u64(..26) as u8);
    }
    bytes
}

/// Reads the env var `FERRITE_CRASH_ITERS`, or `default`.
pub fn crash_iters(default: u64) -> u64 {
    std::env::var("FERRITE_CRASH_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Opens `sim` and appends+commits one record: the log accepts appends.
pub fn accepts_appends(sim: &Sim, durability: Durability) -> Wal {
    let wal = Wal::open(sim.device.clone(), test_config(durability)).expect("reopen");
    let next = wal.next_lsn();
    let lsn = wal
        .append_commit(b"after recovery")
        .expect("append after recovery");
    assert_eq!(lsn, next);
    wal
}
