//! Recovery on arbitrarily damaged logs: an error or a clean prefix of what
//! was written, never a panic, never a record that was not written.

mod common;

use std::sync::OnceLock;

use common::{read_all, test_config, Medium, Sim, MEDIA};
use ferrite_io::PmPolicy;
use ferrite_wal::{check, check_visiting, Durability, Error, Visit, Wal};
use proptest::prelude::*;

const RECORDS: u32 = 24;

fn payload(i: u32) -> Vec<u8> {
    format!("SET key:{i} {}", "v".repeat(i as usize % 50)).into_bytes()
}

/// A log of `RECORDS` committed records and a few uncommitted ones, per
/// medium, built once.
fn base_image(medium_index: usize) -> &'static (Vec<u8>, usize) {
    static IMAGES: OnceLock<Vec<(Vec<u8>, usize)>> = OnceLock::new();
    &IMAGES.get_or_init(|| {
        MEDIA
            .iter()
            .map(|&medium| {
                let sim = Sim::new(medium);
                let wal = Wal::open(sim.device.clone(), test_config(Durability::EveryCommit))
                    .expect("open");
                for i in 0..RECORDS {
                    let lsn = wal.append(&payload(i)).expect("append");
                    if i < RECORDS - 3 {
                        wal.commit(lsn).expect("commit");
                    }
                }
                drop(wal);
                let log_start = match medium {
                    Medium::File => 0,
                    Medium::Pm(_) => ferrite_io::PM_HEADER_LEN,
                };
                (sim.crash_image(7), log_start)
            })
            .collect()
    })[medium_index]
}

fn recover_damaged(medium: Medium, image: Vec<u8>) {
    if let Medium::Pm(policy) = medium {
        // The PM device layer checks its own header first.
        if ferrite_io::PmDevice::new(
            ferrite_pmem::SimPmem::from_image(image.clone()),
            "x",
            policy,
        )
        .is_err()
        {
            return;
        }
    }
    let sim = Sim::from_image(medium, image);
    let _ = check(sim.device.as_ref());
    let mut visited = Vec::new();
    let opened = Wal::open_visiting(
        sim.device.clone(),
        test_config(Durability::EveryCommit),
        &mut |v: Visit<'_>| {
            visited.push((v.lsn, v.payload.to_vec()));
            true
        },
    );
    let Ok(wal) = opened else {
        return;
    };
    let records = read_all(sim.device.clone());
    assert_eq!(
        visited, records,
        "recovery handed over exactly the records kept"
    );
    for (index, (lsn, bytes)) in records.iter().enumerate() {
        assert_eq!(*lsn, index as u64 + 1);
        assert!(*lsn <= u64::from(RECORDS), "record {lsn} was never written");
        assert_eq!(bytes, &payload(*lsn as u32 - 1), "record {lsn} altered");
    }
    let _ = wal.append_commit(b"after damage");
}

#[test]
fn a_visitor_sees_the_kept_records_in_order_and_can_stop_the_scan() {
    for (index, &medium) in MEDIA.iter().enumerate() {
        let (image, _) = base_image(index);
        let sim = Sim::from_image(medium, image.clone());
        let mut seen = Vec::new();
        let recovery = check_visiting(sim.device.as_ref(), &mut |v| {
            seen.push((v.lsn, v.payload.to_vec()));
            true
        })
        .expect("an intact log");
        assert_eq!(seen.len() as u64, recovery.records);
        for (i, (lsn, bytes)) in seen.iter().enumerate() {
            assert_eq!(*lsn, i as u64 + 1);
            assert_eq!(bytes, &payload(i as u32));
        }

        let mut calls = 0;
        let stopped = Wal::open_visiting(
            sim.device.clone(),
            test_config(Durability::EveryCommit),
            &mut |v| {
                calls += 1;
                v.lsn < 5
            },
        );
        match stopped {
            Err(Error::Stopped { lsn: 5, .. }) => {}
            other => panic!("expected a stop at record 5, got {other:?}"),
        }
        assert_eq!(calls, 5);
        let after = check(sim.device.as_ref()).expect("still a log");
        assert_eq!(after, recovery, "a stopped scan changes nothing");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn recovery_of_damaged_bytes_never_panics(
        medium_index in 0..MEDIA.len(),
        flips in prop::collection::vec((any::<u32>(), any::<u8>()), 0..12),
        truncate in prop::option::of(any::<u32>()),
    ) {
        let (base, log_start) = base_image(medium_index);
        let mut image = base.clone();
        let log_len = image.len() - log_start;
        for (at, byte) in flips {
            let at = log_start + at as usize % log_len.min(8 << 10);
            image[at] = byte;
        }
        if let (Some(cut), Medium::File) = (truncate, MEDIA[medium_index]) {
            image.truncate(cut as usize % (image.len() + 1));
        }
        recover_damaged(MEDIA[medium_index], image);
    }

    #[test]
    fn recovery_of_arbitrary_bytes_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..4096)) {
        recover_damaged(Medium::File, bytes.clone());
        let mut pm = vec![0u8; ferrite_io::PM_INITIAL_CAPACITY];
        let (base, log_start) = base_image(1);
        pm[..*log_start].copy_from_slice(&base[..*log_start]);
        pm[*log_start..*log_start + bytes.len()].copy_from_slice(&bytes);
        recover_damaged(Medium::Pm(PmPolicy::DrainEveryWrite), pm);
    }
}
