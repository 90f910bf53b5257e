//! `Device::prepare` on a PM device: it readies space past the length (the
//! mapping grows, its pages are faulted in) and changes nothing a read, a
//! later growth or a reopen after a crash of the process can see.

use ferrite_io::{Device, PmDevice, PmPolicy, PmemDevice, PM_HEADER_LEN};
use ferrite_pmem::{PmemMedium, SimPmem};

const MIB: u64 = 1 << 20;

const POLICIES: [PmPolicy; 3] = [
    PmPolicy::FlushEveryWrite,
    PmPolicy::DrainEveryWrite,
    PmPolicy::DrainOnSync,
];

/// Device bytes `[from, to)` as the device reads them.
fn read(dev: &dyn Device, from: u64, to: u64) -> Vec<u8> {
    let mut buf = vec![0xEEu8; (to - from) as usize];
    let n = dev.read_at(from, &mut buf).expect("read");
    buf.truncate(n);
    buf
}

#[test]
fn prepare_grows_the_mapping_and_keeps_length_and_bytes() {
    let dir = tempfile::tempdir().expect("tempdir");
    for policy in POLICIES {
        let path = dir.path().join(format!("{policy:?}"));
        let dev = PmemDevice::open(&path, policy).expect("open");
        assert!(dev.prepares(), "a mapped file has pages to populate");
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        dev.append(&data).expect("append");
        dev.sync().expect("sync");
        let file_before = std::fs::read(&path).expect("read file");
        let target = 16 * MIB;
        dev.prepare(target).expect("prepare");
        assert_eq!(dev.len(), data.len() as u64, "{policy:?}: length kept");
        assert!(
            dev.medium().len() >= PM_HEADER_LEN + target as usize,
            "{policy:?}: the mapping covers the prepared end"
        );
        assert_eq!(read(&dev, 0, data.len() as u64), data, "{policy:?}");
        // The file holds the same bytes, and zeros where it grew.
        let file_after = std::fs::read(&path).expect("read file");
        assert!(file_after.len() >= file_before.len());
        assert_eq!(
            file_after[..file_before.len()],
            file_before[..],
            "{policy:?}"
        );
        assert!(file_after[file_before.len()..].iter().all(|&b| b == 0));
        // A growth over the prepared space exposes zeros, then appends land.
        dev.set_len(4 * MIB).expect("grow");
        assert!(read(&dev, data.len() as u64, 4 * MIB)
            .iter()
            .all(|&b| b == 0));
        dev.write_at(4 * MIB - 3, b"end").expect("write");
        dev.sync().expect("sync");
        drop(dev);
        // What a process crash leaves: the mapped file as it is.
        let reopened = PmemDevice::open(&path, policy).expect("reopen");
        assert_eq!(reopened.len(), 4 * MIB, "{policy:?}");
        assert_eq!(read(&reopened, 0, data.len() as u64), data);
        assert_eq!(read(&reopened, 4 * MIB - 3, 4 * MIB), b"end");
    }
}

#[test]
fn prepare_below_the_length_does_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dev = PmemDevice::open(dir.path().join("log"), PmPolicy::DrainEveryWrite).expect("open");
    dev.set_len(MIB).expect("grow");
    let mapped = dev.medium().len();
    dev.prepare(MIB / 2).expect("prepare below");
    dev.prepare(MIB).expect("prepare at the length");
    assert_eq!(dev.len(), MIB);
    assert_eq!(dev.medium().len(), mapped);
}

#[test]
fn stale_bytes_past_the_length_are_still_zeroed_after_prepare() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dev = PmemDevice::open(dir.path().join("log"), PmPolicy::DrainEveryWrite).expect("open");
    dev.append(&[0xAB; 8192]).expect("append");
    // Shrinking leaves stale bytes past the length; preparing over them
    // must not make a later growth skip zeroing them.
    dev.set_len(100).expect("shrink");
    dev.prepare(8 * MIB).expect("prepare");
    dev.set_len(8192).expect("grow back");
    assert_eq!(read(&dev, 0, 100), vec![0xAB; 100]);
    assert!(read(&dev, 100, 8192).iter().all(|&b| b == 0));
}

#[test]
fn a_simulated_medium_is_left_alone() {
    let dev = PmDevice::new(SimPmem::new(0), "sim-pm", PmPolicy::DrainEveryWrite).expect("sim");
    dev.append(b"record").expect("append");
    let mapped = dev.medium().len();
    let stats = dev.medium().stats();
    let image = dev.medium().persisted_image();
    assert!(!dev.prepares());
    dev.prepare(64 * MIB).expect("prepare");
    assert_eq!(dev.medium().len(), mapped);
    assert_eq!(dev.medium().stats() - stats, Default::default());
    assert_eq!(dev.medium().persisted_image(), image);
}
