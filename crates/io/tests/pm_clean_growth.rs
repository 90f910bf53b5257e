//! Growth of a PM device over space the medium grew by stores nothing but
//! the length word (that space reads as zeros already), while bytes that
//! may be stale (stored since the device was opened, or inside the medium
//! when it was opened) are still zeroed before a growth exposes them, in
//! every crash image.

use ferrite_io::{Device, PmDevice, PmPolicy, PM_HEADER_LEN};
use ferrite_pmem::{PmemMedium, SimPmem};

const MIB: u64 = 1 << 20;

const POLICIES: [PmPolicy; 3] = [
    PmPolicy::FlushEveryWrite,
    PmPolicy::DrainEveryWrite,
    PmPolicy::DrainOnSync,
];

fn device(medium: SimPmem, policy: PmPolicy) -> PmDevice<SimPmem> {
    PmDevice::new(medium, "sim-pm", policy).expect("sim pm device")
}

/// Device bytes `[from, to)` as the device reads them.
fn read(dev: &PmDevice<SimPmem>, from: u64, to: u64) -> Vec<u8> {
    let mut buf = vec![0xEEu8; (to - from) as usize];
    let n = dev.read_at(from, &mut buf).expect("read");
    buf.truncate(n);
    buf
}

#[test]
fn growth_over_fresh_space_stores_only_the_length() {
    for policy in POLICIES {
        let dev = device(SimPmem::new(0), policy);
        let capacity = (dev.medium().len() - PM_HEADER_LEN) as u64;
        // The first growth zeroes the space the medium had at open (it
        // could hold anything), then takes fresh space.
        dev.set_len(capacity + MIB).expect("grow");
        let before = dev.medium().stats();
        dev.set_len(capacity + 8 * MIB)
            .expect("grow over fresh space");
        let delta = dev.medium().stats() - before;
        // The length word only: one line reaches the DIMM, nothing else is
        // stored or streamed.
        assert_eq!(delta.requests, 1, "{policy:?}: {delta}");
        assert!(delta.lines_flushed <= 1, "{policy:?}: {delta}");
        assert_eq!(delta.bytes_nt, 0, "{policy:?}: {delta}");
        let bytes = read(&dev, capacity, capacity + 8 * MIB);
        assert!(bytes.iter().all(|&b| b == 0), "{policy:?}");
        // And a crash leaves zeros there too.
        let image = dev.medium().persisted_image();
        let start = PM_HEADER_LEN + capacity as usize;
        let end = PM_HEADER_LEN + (capacity + 8 * MIB) as usize;
        assert!(image[start..end].iter().all(|&b| b == 0), "{policy:?}");
    }
}

#[test]
fn bytes_stored_in_fresh_space_are_zeroed_before_regrowth() {
    for policy in POLICIES {
        let dev = device(SimPmem::new(0), policy);
        let capacity = (dev.medium().len() - PM_HEADER_LEN) as u64;
        let grown = capacity + 8 * MIB;
        dev.set_len(grown).expect("grow");
        // Stores in space that was clean make it dirty again.
        let at = capacity + 6 * MIB;
        dev.write_at(at, &[0xCD; 4096]).expect("write");
        dev.sync().expect("sync");
        dev.set_len(capacity + 5 * MIB).expect("shrink");
        dev.set_len(grown).expect("regrow");
        let bytes = read(&dev, at, at + 4096);
        assert!(bytes.iter().all(|&b| b == 0), "{policy:?}");
        // Appends past the length do the same through the extending path.
        dev.set_len(capacity).expect("shrink");
        dev.append(&[0xAB; 300]).expect("append");
        dev.sync().expect("sync");
        dev.set_len(capacity).expect("shrink");
        dev.set_len(capacity + 300).expect("regrow");
        let bytes = read(&dev, capacity, capacity + 300);
        assert!(bytes.iter().all(|&b| b == 0), "{policy:?}");
    }
}

/// A device whose medium holds stale bytes past its length when opened:
/// growth must zero them; a crash at any point of the growth leaves either
/// the old length or zeros under the new one.
#[test]
fn stale_bytes_inside_the_medium_at_open_are_zeroed_at_every_crash_point() {
    for policy in POLICIES {
        let first = device(SimPmem::new(0), policy);
        first.write_at(0, &[0x5A; 64 * 1024]).expect("write");
        first.sync().expect("sync");
        first.set_len(0).expect("shrink");
        first.sync().expect("sync");
        let image = first.medium().persisted_image();
        // Count the growth's events on one run, then crash at each.
        let probe = device(SimPmem::from_image(image.clone()), policy);
        let start = probe.medium().events();
        probe.set_len(64 * 1024).expect("grow");
        probe.sync().expect("sync");
        let events = probe.medium().events() - start;
        assert!(read(&probe, 0, 64 * 1024).iter().all(|&b| b == 0));
        for at in 1..=events + 1 {
            let sim = SimPmem::from_image(image.clone());
            let dev = device(sim, policy);
            let base = dev.medium().events();
            dev.medium().arm_crash(base + at, at);
            dev.set_len(64 * 1024).expect("grow");
            dev.sync().expect("sync");
            let Some(crashed) = dev.medium().take_crash_image() else {
                continue;
            };
            let after = device(SimPmem::from_image(crashed), policy);
            let len = after.len();
            assert!(len == 0 || len == 64 * 1024, "{policy:?} at {at}: {len}");
            let bytes = read(&after, 0, len);
            assert!(
                bytes.iter().all(|&b| b == 0),
                "{policy:?}: stale bytes exposed by a crash at event {at}"
            );
        }
    }
}
