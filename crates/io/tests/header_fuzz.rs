//! The PM device header decoder on arbitrary bytes: a clear result, never a
//! panic, and never a length beyond what the medium holds.

use ferrite_io::{Device, PmDevice, PmPolicy, PM_MAGIC};
use ferrite_pmem::{PmemMedium, SimPmem};
use proptest::prelude::*;

fn medium_with(header: &[u8], capacity: usize) -> SimPmem {
    let pm = SimPmem::new(capacity);
    pm.write(0, header).expect("header fits");
    pm
}

proptest! {
    #[test]
    fn arbitrary_headers_never_panic(header in proptest::collection::vec(any::<u8>(), 0..64)) {
        let pm = medium_with(&header, 8192);
        if let Ok(device) = PmDevice::new(pm, "fuzz", PmPolicy::DrainEveryWrite) {
            prop_assert!(device.len() <= 8192 - 4096);
            let mut buf = vec![0u8; 64];
            device.read_at(0, &mut buf).expect("reads within the length work");
        }
    }

    #[test]
    fn valid_magic_with_arbitrary_rest_never_panics(rest in proptest::collection::vec(any::<u8>(), 24), len in any::<u64>()) {
        let mut header = PM_MAGIC.to_vec();
        header.extend_from_slice(&rest);
        header[16..24].copy_from_slice(&len.to_le_bytes());
        let pm = medium_with(&header, 8192);
        match PmDevice::new(pm, "fuzz", PmPolicy::DrainOnSync) {
            Ok(device) => prop_assert!(device.len() <= 8192 - 4096),
            Err(err) => prop_assert!(err.to_string().contains("fuzz"), "error names the file: {}", err),
        }
    }
}

#[test]
fn a_length_beyond_the_file_is_reported_not_trusted() {
    let pm = SimPmem::new(0);
    let device = PmDevice::new(pm, "long", PmPolicy::DrainEveryWrite).expect("fresh");
    device.write_at(0, b"abc").expect("write");
    let image = device.medium().persisted_image();
    let mut bad = image.clone();
    bad[16..24].copy_from_slice(&(1u64 << 40).to_le_bytes());
    let err = PmDevice::new(SimPmem::from_image(bad), "long", PmPolicy::DrainEveryWrite)
        .expect_err("length past the end");
    assert!(err.to_string().contains("exceeds"), "{err}");
    let good = PmDevice::new(
        SimPmem::from_image(image),
        "long",
        PmPolicy::DrainEveryWrite,
    )
    .expect("intact");
    assert_eq!(good.len(), 3);
}

#[test]
fn stored_len_reads_the_persisted_length_without_mapping() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("dev");
    let device = ferrite_io::PmemDevice::open(&path, PmPolicy::DrainOnSync).expect("open");
    assert_eq!(ferrite_io::stored_len(&path).expect("fresh"), Some(0));
    device.write_at(0, b"not yet synced").expect("write");
    // DrainOnSync persists the length at sync: before it, a crash (and so
    // the header) still says empty.
    assert_eq!(ferrite_io::stored_len(&path).expect("unsynced"), Some(0));
    device.sync().expect("sync");
    assert_eq!(ferrite_io::stored_len(&path).expect("synced"), Some(14));
    device.set_len(0).expect("truncate");
    assert_eq!(ferrite_io::stored_len(&path).expect("truncated"), Some(0));
    drop(device);

    let zeros = dir.path().join("zeros");
    std::fs::write(&zeros, [0u8; 100]).expect("write zeros");
    assert_eq!(ferrite_io::stored_len(&zeros).expect("zeros"), Some(0));
    std::fs::write(&zeros, []).expect("empty");
    assert_eq!(ferrite_io::stored_len(&zeros).expect("empty"), Some(0));
    let foreign = dir.path().join("foreign");
    std::fs::write(&foreign, b"SQLite format 3\0").expect("write foreign");
    assert_eq!(ferrite_io::stored_len(&foreign).expect("foreign"), None);
    let mut torn = PM_MAGIC.to_vec();
    torn.extend_from_slice(&[1u8; 24]);
    std::fs::write(&foreign, &torn).expect("write torn");
    assert!(
        ferrite_io::stored_len(&foreign).is_err(),
        "bad CRC is an error"
    );
}
