//! A log on a mapped PM file readies its device ahead of the appends
//! (`Device::prepare`, on threads of their own) while appenders extend
//! and write it: every record survives, in order, through a reopen.

mod common;

use std::sync::Arc;

use common::read_all;
use ferrite_io::{Device, PmPolicy, PmemDevice};
use ferrite_wal::{Durability, Wal, WalConfig};

fn config(preallocate_bytes: u64) -> WalConfig {
    WalConfig {
        durability: Durability::EveryCommit,
        preallocate_bytes,
        ..WalConfig::default()
    }
}

#[test]
fn concurrent_appends_survive_preparation_ahead() {
    let dir = tempfile::tempdir().expect("tempdir");
    for policy in [PmPolicy::DrainEveryWrite, PmPolicy::DrainOnSync] {
        let path = dir.path().join(format!("{policy:?}.log"));
        let device: Arc<dyn Device> = Arc::new(PmemDevice::open(&path, policy).expect("open"));
        assert!(device.prepares());
        // Small steps, so the log passes many of them and preparations
        // overlap the appenders' extensions.
        let wal = Wal::open(device.clone(), config(16 << 10)).expect("open log");
        std::thread::scope(|s| {
            for t in 0..4 {
                let wal = &wal;
                s.spawn(move || {
                    for i in 0..500 {
                        let payload = format!("{t}:{i}:{}", "x".repeat(200));
                        wal.append_commit(payload.as_bytes()).expect("commit");
                    }
                });
            }
        });
        wal.close().expect("close");
        drop(device);
        let device: Arc<dyn Device> = Arc::new(PmemDevice::open(&path, policy).expect("reopen"));
        let wal = Wal::open(device.clone(), config(16 << 10)).expect("recover");
        assert_eq!(wal.recovery().records, 2000, "{policy:?}");
        assert_eq!(wal.recovery().torn_tail, None, "{policy:?}");
        drop(wal);
        let records = read_all(device);
        let lsns: Vec<u64> = records.iter().map(|(lsn, _)| *lsn).collect();
        assert_eq!(lsns, (1..=2000).collect::<Vec<_>>(), "{policy:?}");
        for t in 0..4 {
            let mine: Vec<usize> = records
                .iter()
                .filter_map(|(_, p)| {
                    let text = std::str::from_utf8(p).expect("utf-8 payload");
                    let mut parts = text.split(':');
                    let writer: usize = parts.next()?.parse().ok()?;
                    (writer == t).then(|| parts.next()?.parse().ok())?
                })
                .collect();
            assert_eq!(mine, (0..500).collect::<Vec<_>>(), "writer {t} in order");
        }
    }
}
