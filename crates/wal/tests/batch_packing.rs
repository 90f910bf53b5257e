//! On persistent memory a batch's records lie back to back at the format's
//! 8-byte alignment and only the last one is padded, so the batch ends on a
//! cache line; single appends still take whole lines. No two appenders'
//! ranges share a line, whatever the mix of batches and single appends
//! from concurrent threads. (A crash at every event of a batched workload
//! is `batch.rs`'s test, which runs over this layout.)

mod common;

use std::sync::Arc;

use common::{read_all, test_config, Medium, Sim};
use ferrite_io::{Device, PmPolicy, PmemDevice};
use ferrite_wal::record::{framed_len, PM_RECORD_ALIGN, RECORD_ALIGN};
use ferrite_wal::{Batch, Durability, LogReader, Wal, WalConfig};

const LINE: u64 = PM_RECORD_ALIGN as u64;

/// Every record of the log on `device`: (offset, payload).
fn offsets(device: Arc<dyn Device>) -> Vec<(u64, Vec<u8>)> {
    LogReader::open(device)
        .expect("log header")
        .map(|r| {
            let record = r.expect("read");
            (record.offset, record.payload)
        })
        .collect()
}

#[test]
fn a_batch_on_pm_is_packed_and_ends_on_a_line() {
    let lens = [101usize, 7, 0, 300, 57];
    for policy in [PmPolicy::DrainEveryWrite, PmPolicy::DrainOnSync] {
        let sim = Sim::new(Medium::Pm(policy));
        let wal =
            Wal::open(sim.device.clone(), test_config(Durability::EveryCommit)).expect("open");
        let mut batch = Batch::new();
        for (i, len) in lens.iter().enumerate() {
            batch.push(&vec![b'a' + i as u8; *len]);
        }
        let last = wal.append_batch(&mut batch).expect("batch");
        wal.append(b"single").expect("append");
        wal.commit(last + 1).expect("commit");
        let packed: u64 = lens
            .iter()
            .map(|&l| framed_len(l, RECORD_ALIGN) as u64)
            .sum();
        let single = framed_len(6, PM_RECORD_ALIGN) as u64;
        assert_eq!(
            wal.stats().device_bytes,
            packed.next_multiple_of(LINE) + single,
            "{policy:?}"
        );
        drop(wal);
        let records = offsets(sim.device.clone());
        assert_eq!(records.len(), lens.len() + 1);
        let start = records[0].0;
        assert_eq!(start % LINE, 0, "{policy:?}: the batch starts on a line");
        let mut at = start;
        for ((offset, payload), len) in records.iter().zip(lens) {
            assert_eq!(*offset, at, "{policy:?}: records back to back");
            assert_eq!(payload.len(), len);
            at += framed_len(len, RECORD_ALIGN) as u64;
        }
        let (single_at, single_payload) = &records[lens.len()];
        assert_eq!(*single_at, start + packed.next_multiple_of(LINE));
        assert_eq!(single_payload.as_slice(), b"single");
    }
}

#[test]
fn a_batch_on_a_file_is_unchanged_by_packing() {
    let sim = Sim::new(Medium::File);
    let wal = Wal::open(sim.device.clone(), test_config(Durability::EveryCommit)).expect("open");
    let mut batch = Batch::new();
    for len in [101usize, 7, 13] {
        batch.push(&vec![b'x'; len]);
    }
    let last = wal.append_batch(&mut batch).expect("batch");
    wal.commit(last).expect("commit");
    let expected: u64 = [101usize, 7, 13]
        .iter()
        .map(|&l| framed_len(l, RECORD_ALIGN) as u64)
        .sum();
    assert_eq!(wal.stats().device_bytes, expected);
    drop(wal);
    assert_eq!(read_all(sim.device.clone()).len(), 3);
}

/// Which appender wrote a payload: `("b", thread, batch)` for a batch's
/// records, `("s", thread, seq)` for single appends.
fn writer_of(payload: &[u8]) -> (String, usize, usize) {
    let text = std::str::from_utf8(payload).expect("utf-8 payload");
    let mut parts = text.split(':');
    let kind = parts.next().expect("kind").to_string();
    let thread = parts.next().and_then(|p| p.parse().ok()).expect("thread");
    let unit = parts.next().and_then(|p| p.parse().ok()).expect("unit");
    (kind, thread, unit)
}

#[test]
fn concurrent_batches_and_appends_never_share_a_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    for policy in [PmPolicy::DrainEveryWrite, PmPolicy::DrainOnSync] {
        let path = dir.path().join(format!("{policy:?}.log"));
        let device: Arc<dyn Device> = Arc::new(PmemDevice::open(&path, policy).expect("open"));
        let config = WalConfig {
            durability: Durability::EveryCommit,
            preallocate_bytes: 16 << 10,
            ..WalConfig::default()
        };
        let wal = Wal::open(device.clone(), config).expect("open log");
        std::thread::scope(|s| {
            for t in 0..2 {
                let wal = &wal;
                s.spawn(move || {
                    let mut batch = Batch::new();
                    for b in 0..300 {
                        for i in 0..1 + (b + t) % 7 {
                            let pad = "y".repeat((b * 13 + i * 5) % 90);
                            batch.push(format!("b:{t}:{b}:{i}:{pad}").as_bytes());
                        }
                        let last = wal.append_batch(&mut batch).expect("batch");
                        wal.commit(last).expect("commit");
                    }
                });
                s.spawn(move || {
                    for i in 0..300 {
                        let pad = "z".repeat(i % 70);
                        wal.append_commit(format!("s:{t}:{i}:{pad}").as_bytes())
                            .expect("append");
                    }
                });
            }
        });
        wal.close().expect("close");
        drop(device);
        let device: Arc<dyn Device> = Arc::new(PmemDevice::open(&path, policy).expect("reopen"));
        let wal = Wal::open(device.clone(), config).expect("recover");
        assert_eq!(wal.recovery().torn_tail, None, "{policy:?}");
        drop(wal);
        let records = offsets(device);
        // Each appender's range: a single record, or a batch's run of
        // records. Every range starts and ends on a line.
        let mut ranges: Vec<((String, usize, usize), u64, u64)> = Vec::new();
        for (i, (offset, payload)) in records.iter().enumerate() {
            let who = writer_of(payload);
            let end = records.get(i + 1).map(|(next, _)| *next);
            match ranges.last_mut() {
                Some((last, _, range_end)) if *last == who && who.0 == "b" => {
                    *range_end = end.unwrap_or(u64::MAX);
                }
                _ => ranges.push((who, *offset, end.unwrap_or(u64::MAX))),
            }
        }
        for kind in ["s", "b"] {
            let count = ranges.iter().filter(|r| r.0 .0 == kind).count();
            assert_eq!(count, 600, "{policy:?}: ranges of kind {kind}");
        }
        for (who, start, end) in &ranges {
            assert_eq!(start % LINE, 0, "{policy:?}: {who:?} starts mid-line");
            if *end != u64::MAX {
                assert_eq!(end % LINE, 0, "{policy:?}: {who:?} ends mid-line");
            }
        }
    }
}
