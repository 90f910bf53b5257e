//! Superblocks and slot headers of arbitrary bytes: clear errors, never a
//! panic, and a buffer opened on garbage either recovers or says why not.

use std::sync::Arc;

use ferrite_io::SimFile;
use ferrite_pmem::SimPmem;
use ferrite_wbuf::layout::{decode_superblock, SlotHeader, MAGIC};
use ferrite_wbuf::{WbufConfig, WriteBuffer};
use proptest::prelude::*;

proptest! {
    #[test]
    fn superblock_decoding_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64), len in any::<u64>()) {
        if let Err(e) = decode_superblock(&bytes, len) {
            prop_assert!(!e.reason.is_empty());
        }
    }

    #[test]
    fn magic_with_garbage_fields_is_an_error(rest in proptest::collection::vec(any::<u8>(), 40)) {
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&rest);
        // Valid fields need a matching CRC; garbage almost never has one.
        if let Err(e) = decode_superblock(&bytes, 1 << 30) {
            prop_assert!(!e.reason.is_empty());
        }
    }

    #[test]
    fn slot_header_decoding_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..80), block in any::<u32>()) {
        match SlotHeader::decode(&bytes, block) {
            Ok(Some((h, crc))) => { let _ = h.checks(crc, &bytes); }
            Ok(None) => {}
            Err(e) => prop_assert!(!e.reason.is_empty()),
        }
    }

    #[test]
    fn opening_garbage_pm_errs_or_recovers(garbage in proptest::collection::vec(any::<u8>(), 1..6000), magic in any::<bool>()) {
        let mut image = vec![0u8; 32 << 10];
        image[..garbage.len()].copy_from_slice(&garbage);
        if magic {
            image[..8].copy_from_slice(&MAGIC);
        }
        let config = WbufConfig { block_bytes: 1024, capacity_bytes: 32 << 10, background: false, ..WbufConfig::default() };
        match WriteBuffer::with_medium(SimPmem::from_image(image), "pm", Arc::new(SimFile::new("ssd")), config) {
            Ok(buffer) => drop(buffer),
            Err(e) => prop_assert!(e.to_string().contains("pm")),
        }
    }
}
