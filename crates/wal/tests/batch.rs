//! `Wal::append_batch`: several records appended as one write keep their
//! own LSNs and frames, and a crash at any event of a batched workload
//! loses no committed record, invents none, and leaves a log that accepts
//! appends (on a simulated disk file and simulated persistent memory).
//!
//! A crash armed at event `E` captures the medium as it was after events
//! `1..E`; a batch committed when the event counter read `c` must survive
//! every crash with `c < E`.

mod common;

use std::collections::HashMap;

use common::{accepts_appends, payload, read_all, test_config, Medium, Sim, MEDIA};
use ferrite_wal::{Batch, Durability, Error, Wal};

/// Every record appended, and each committed batch's last LSN with the
/// event count read after its commit returned.
#[derive(Default)]
struct Outcome {
    appended: HashMap<u64, Vec<u8>>,
    committed: Vec<(u64, u64)>,
}

/// Batches of 1 to 6 records, each committed; a single record now and
/// then through `append`, so the two kinds interleave.
fn workload(sim: &Sim, wal: &Wal, seed: u64, batches: usize) -> Outcome {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut outcome = Outcome::default();
    let mut batch = Batch::new();
    for b in 0..batches {
        let first = wal.next_lsn();
        let mut payloads = Vec::new();
        if rng.u64(..5) == 0 {
            let bytes = payload(&mut rng, 0, b);
            let lsn = wal.append(&bytes).expect("append");
            assert_eq!(lsn, first);
            payloads.push(bytes);
        } else {
            for i in 0..1 + rng.usize(..6) {
                let bytes = payload(&mut rng, b, i);
                batch.push(&bytes);
                payloads.push(bytes);
            }
            let last = wal.append_batch(&mut batch).expect("append a batch");
            assert!(batch.is_empty(), "a batch is emptied by its append");
            assert_eq!(last, first + payloads.len() as u64 - 1);
        }
        let last = first + payloads.len() as u64 - 1;
        for (lsn, bytes) in (first..).zip(payloads) {
            outcome.appended.insert(lsn, bytes);
        }
        wal.commit(last).expect("commit");
        outcome.committed.push((last, sim.events()));
    }
    outcome
}

fn verify(medium: Medium, image: Vec<u8>, outcome: &Outcome, crash_event: u64, seed: u64) {
    let ctx = format!("medium {medium:?}, seed {seed}, crash at event {crash_event}");
    let recovered = Sim::from_image(medium, image);
    let wal = Wal::open(
        recovered.device.clone(),
        test_config(Durability::EveryCommit),
    )
    .unwrap_or_else(|e| panic!("{ctx}: recovery failed: {e}"));
    let records = read_all(recovered.device.clone());
    for (index, (lsn, bytes)) in records.iter().enumerate() {
        assert_eq!(*lsn, index as u64 + 1, "{ctx}: LSNs must be consecutive");
        assert_eq!(
            outcome.appended.get(lsn),
            Some(bytes),
            "{ctx}: record {lsn} was never appended with these bytes"
        );
    }
    let present = records.len() as u64;
    for &(last, events) in &outcome.committed {
        if events < crash_event {
            assert!(
                last <= present,
                "{ctx}: batch ending at {last}, committed at event {events}, was lost ({present} records recovered)"
            );
        }
    }
    drop(wal);
    accepts_appends(&recovered, Durability::EveryCommit);
}

#[test]
fn batches_survive_a_crash_at_every_event() {
    const BATCHES: usize = 12;
    for medium in MEDIA {
        let span = {
            let sim = Sim::new(medium);
            let wal =
                Wal::open(sim.device.clone(), test_config(Durability::EveryCommit)).expect("open");
            let start = sim.events();
            workload(&sim, &wal, 7, BATCHES);
            (sim.events() - start).max(1)
        };
        for at in 1..=span + 1 {
            let seed = 0xBA7C ^ at;
            let sim = Sim::new(medium);
            let wal =
                Wal::open(sim.device.clone(), test_config(Durability::EveryCommit)).expect("open");
            let crash_event = sim.events() + at;
            sim.arm_crash(crash_event, seed);
            // The workload's seed is fixed, so every crash point of the
            // calibrated run is visited.
            let outcome = workload(&sim, &wal, 7, BATCHES);
            let (image, crash_event) = match sim.take_crash_image() {
                Some(image) => (image, crash_event),
                None => (sim.crash_image(seed), u64::MAX),
            };
            drop(wal);
            verify(medium, image, &outcome, crash_event, seed);
        }
    }
}

#[test]
fn a_batch_reads_back_as_its_records_in_order() {
    for medium in MEDIA {
        let sim = Sim::new(medium);
        let wal =
            Wal::open(sim.device.clone(), test_config(Durability::EveryCommit)).expect("open");
        let mut batch = Batch::new();
        assert_eq!(wal.append_batch(&mut batch).expect("empty batch"), 0);
        batch.push(b"one");
        assert!(!batch.push_with(|out| {
            out.extend_from_slice(b"discarded");
            false
        }));
        assert!(batch.push_with(|out| {
            out.extend_from_slice(b"two");
            true
        }));
        batch.push(b"");
        assert_eq!(batch.len(), 3);
        assert_eq!(wal.append_batch(&mut batch).expect("append"), 3);
        assert_eq!(wal.append(b"four").expect("append"), 4);
        wal.commit(4).expect("commit");
        let stats = wal.stats();
        assert_eq!(stats.records, 4);
        drop(wal);
        let records = read_all(sim.device.clone());
        let payloads: Vec<&[u8]> = records.iter().map(|(_, p)| p.as_slice()).collect();
        assert_eq!(payloads, [&b"one"[..], b"two", b"", b"four"], "{medium:?}");
    }
}

#[test]
fn an_oversized_record_or_batch_is_refused_whole() {
    for medium in MEDIA {
        let sim = Sim::new(medium);
        let config = test_config(Durability::EveryCommit);
        let wal = Wal::open(sim.device.clone(), config).expect("open");
        let mut batch = Batch::new();
        batch.push(b"fits");
        batch.push(&vec![b'x'; config.record_bytes_max + 1]);
        let refused = wal.append_batch(&mut batch);
        assert!(
            matches!(refused, Err(Error::RecordTooLarge { .. })),
            "{medium:?}: {refused:?}"
        );
        assert!(batch.is_empty());
        // More records than the in-flight window holds, each within limits.
        for _ in 0..=config.max_in_flight_bytes / config.record_bytes_max {
            batch.push(&vec![b'y'; config.record_bytes_max]);
        }
        let refused = wal.append_batch(&mut batch);
        assert!(
            matches!(refused, Err(Error::BatchTooLarge { .. })),
            "{medium:?}: {refused:?}"
        );
        // Nothing of either batch was appended, and the log goes on.
        assert_eq!(wal.append_commit(b"after").expect("append"), 1);
    }
}
