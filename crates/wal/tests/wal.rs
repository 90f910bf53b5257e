//! Behaviour of the log on simulated and real devices: round trips, group
//! commit, failures, corruption and repair, log switch, durability levels.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{read_all, test_config, Medium, Sim, MEDIA};
use ferrite_io::{Backend, Device, GatedSync, PmDevice, PmPolicy};
use ferrite_pmem::{PmemMedium, SimPmem};
use ferrite_wal::{check, repair, Durability, Error, LogReader, Lsn, Wal, WalConfig};

#[test]
fn records_round_trip_through_a_reopen() {
    for medium in MEDIA {
        let sim = Sim::new(medium);
        let wal =
            Wal::open(sim.device.clone(), test_config(Durability::EveryCommit)).expect("open");
        for i in 0..50u32 {
            let lsn = wal
                .append_commit(format!("record {i}").as_bytes())
                .expect("commit");
            assert_eq!(lsn, u64::from(i) + 1);
        }
        assert_eq!(wal.durable_lsn(), 50);
        drop(wal);
        // Only what is certainly on the medium: the last synced state.
        let reopened = Sim::from_image(medium, sim.durable_image());
        let wal = Wal::open(
            reopened.device.clone(),
            test_config(Durability::EveryCommit),
        )
        .expect("reopen");
        assert_eq!(wal.recovery().records, 50);
        assert_eq!(wal.recovery().torn_tail, None);
        let records = read_all(reopened.device.clone());
        assert_eq!(records.len(), 50);
        assert_eq!(records[49], (50, b"record 49".to_vec()));
    }
}

#[test]
fn group_commit_batches_concurrent_commits_on_a_file() {
    let sim = Sim::new(Medium::File);
    let wal = Wal::open(sim.device.clone(), test_config(Durability::EveryCommit)).expect("open");
    std::thread::scope(|s| {
        for t in 0..8 {
            let wal = &wal;
            s.spawn(move || {
                for i in 0..100 {
                    wal.append_commit(format!("{t}:{i}").as_bytes())
                        .expect("commit");
                }
            });
        }
    });
    let stats = wal.stats();
    assert_eq!(stats.records, 800);
    assert_eq!(stats.commits, 800);
    assert!(stats.syncs <= 800 && stats.syncs >= 1);
    // The mean is a float: the batches cover every record, up to rounding.
    let covered = stats.batch_mean * stats.batches as f64;
    assert!(
        (covered - 800.0).abs() < 1e-6,
        "batches cover {covered} records"
    );
    assert_eq!(read_all(sim.device.clone()).len(), 800);
}

#[test]
fn real_devices_take_concurrent_appends() {
    let dir = tempfile::tempdir().expect("tempdir");
    for backend in Backend::ALL {
        let device: Arc<dyn Device> = Arc::from(
            backend
                .open(dir.path().join(backend.name()))
                .expect("open device"),
        );
        let wal = Wal::open(device.clone(), WalConfig::default()).expect("open");
        std::thread::scope(|s| {
            for t in 0..4 {
                let wal = &wal;
                s.spawn(move || {
                    for i in 0..50 {
                        wal.append_commit(format!("{t}:{i}").as_bytes())
                            .expect("commit");
                    }
                });
            }
        });
        let stats = wal.stats();
        if device.info().durable_on_write {
            let flush = stats.flush.expect("PM flush accounting");
            assert!(
                flush.fences >= 200,
                "{backend}: every appender drains itself"
            );
        }
        wal.close().expect("close");
        let mut lsns: Vec<u64> = read_all(device).into_iter().map(|(lsn, _)| lsn).collect();
        lsns.dedup();
        assert_eq!(lsns, (1..=200).collect::<Vec<_>>(), "{backend}");
    }
}

#[test]
fn a_failed_sync_poisons_every_waiting_and_later_commit() {
    let sim = Sim::new(Medium::File);
    let wal = Wal::open(sim.device.clone(), test_config(Durability::EveryCommit)).expect("open");
    wal.append_commit(b"durable").expect("first commit");
    sim.file().fail_next_syncs(1);
    let lsn = wal.append(b"lost").expect("append is buffered");
    let error = wal.commit(lsn).expect_err("the sync fails");
    assert!(matches!(error, Error::Io(_)), "{error}");
    assert_eq!(wal.durable_lsn(), 1, "nothing reported durable that is not");
    assert!(matches!(wal.commit(lsn), Err(Error::Poisoned { .. })));
    assert!(matches!(wal.append(b"more"), Err(Error::Poisoned { .. })));
    assert!(wal.sync().is_err());
    assert_eq!(
        wal.commit(1).ok(),
        Some(()),
        "an already durable record stays durable"
    );
}

#[test]
fn concurrent_waiters_all_get_the_poison() {
    let sim = Sim::new(Medium::File);
    let wal = Wal::open(sim.device.clone(), test_config(Durability::EveryCommit)).expect("open");
    sim.file().fail_next_syncs(1);
    let results: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..6)
            .map(|t| {
                let wal = &wal;
                s.spawn(move || wal.append_commit(format!("{t}").as_bytes()))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("thread"))
            .collect()
    });
    // The first batch fails; whatever was in it or after it must fail too.
    let durable = wal.durable_lsn();
    for result in results {
        match result {
            Ok(lsn) => assert!(lsn <= durable),
            Err(e) => assert!(matches!(e, Error::Io(_) | Error::Poisoned { .. }), "{e}"),
        }
    }
    assert_eq!(durable, 0);
}

#[test]
fn a_full_disk_is_an_error_not_a_panic() {
    let sim = Sim::new(Medium::File);
    let wal = Wal::open(sim.device.clone(), test_config(Durability::EveryCommit)).expect("open");
    wal.append_commit(b"fits").expect("commit");
    sim.file()
        .set_space_limit(Some(sim.device.len() as usize + 10));
    let lsn = wal.append(&[7u8; 100]).expect("append is buffered");
    let error = wal.commit(lsn).expect_err("no space");
    assert!(error.is_no_space(), "{error}");
    let error = wal.append(b"x").expect_err("poisoned");
    assert!(error.is_no_space(), "later appends say why: {error}");
    drop(wal);
    sim.file().set_space_limit(None);
    let reopened = Sim::from_image(Medium::File, sim.durable_image());
    let wal = Wal::open(
        reopened.device.clone(),
        test_config(Durability::EveryCommit),
    )
    .expect("reopen");
    assert_eq!(wal.recovery().records, 1);
}

#[test]
fn full_persistent_memory_is_an_error_not_a_panic() {
    let pm = SimPmem::new(0);
    let device = Arc::new(PmDevice::new(pm, "full-pm", PmPolicy::DrainEveryWrite).expect("device"));
    device.medium().set_grow_limit(Some(device.medium().len()));
    let wal = Wal::open(device.clone(), test_config(Durability::EveryCommit)).expect("open");
    let mut outcome = Ok(0);
    for _ in 0..100_000 {
        outcome = wal.append_commit(&[1u8; 900]);
        if outcome.is_err() {
            break;
        }
    }
    let error = outcome.expect_err("the medium fills up");
    assert!(error.is_no_space(), "{error}");
    let durable = wal.durable_lsn();
    drop(wal);
    let reopened = Sim::from_image(
        Medium::Pm(PmPolicy::DrainEveryWrite),
        device.medium().persisted_image(),
    );
    let wal = Wal::open(
        reopened.device.clone(),
        test_config(Durability::EveryCommit),
    )
    .expect("reopen");
    assert_eq!(wal.recovery().records, durable);
}

/// Appends `n` committed records and returns the durable image.
fn committed_log(medium: Medium, n: u32) -> Vec<u8> {
    let sim = Sim::new(medium);
    let wal = Wal::open(sim.device.clone(), test_config(Durability::EveryCommit)).expect("open");
    for i in 0..n {
        wal.append_commit(format!("record number {i}").as_bytes())
            .expect("commit");
    }
    drop(wal);
    sim.durable_image()
}

#[test]
fn damage_before_durable_records_is_an_error_until_repaired() {
    for medium in MEDIA {
        let image = committed_log(medium, 20);
        let sim = Sim::from_image(medium, image);
        let fifth = LogReader::open(sim.device.clone())
            .expect("reader")
            .nth(4)
            .expect("fifth")
            .expect("intact");
        sim.device
            .write_at(fifth.offset + 40, b"!")
            .expect("damage a payload byte");
        let error = Wal::open(sim.device.clone(), test_config(Durability::EveryCommit))
            .expect_err("corrupt");
        let Error::Corrupt {
            offset, lsn, path, ..
        } = &error
        else {
            panic!("{medium:?}: expected Corrupt, got {error}");
        };
        assert_eq!((*offset, *lsn), (fifth.offset, 5), "{error}");
        assert!(error.to_string().contains(&path.display().to_string()));
        assert!(check(sim.device.as_ref()).is_err(), "check agrees");
        let repaired = repair(sim.device.as_ref(), *offset).expect("repair");
        assert_eq!(repaired.records, 4);
        let wal =
            Wal::open(sim.device.clone(), test_config(Durability::EveryCommit)).expect("reopen");
        assert_eq!(wal.append_commit(b"fresh").expect("append"), 5);
    }
}

#[test]
fn a_torn_tail_is_reported_and_dropped() {
    for medium in MEDIA {
        let image = committed_log(medium, 6);
        let sim = Sim::from_image(medium, image);
        let sixth = LogReader::open(sim.device.clone())
            .expect("reader")
            .nth(5)
            .expect("sixth")
            .expect("intact");
        // The header reached the medium, the end of the payload did not.
        sim.device
            .write_at(sixth.offset + 32, &[0u8; 8])
            .expect("tear");
        let wal = Wal::open(sim.device.clone(), test_config(Durability::EveryCommit))
            .expect("torn tail is fine");
        let tail = wal.recovery().torn_tail.clone().expect("reported");
        assert_eq!(tail.offset, sixth.offset, "{medium:?}");
        assert_eq!(wal.recovery().records, 5);
        assert_eq!(wal.append_commit(b"next").expect("append"), 6);
        assert_eq!(
            read_all(sim.device.clone()).last(),
            Some(&(6, b"next".to_vec()))
        );
    }
}

#[test]
fn log_switch_continues_the_lsn_sequence() {
    for medium in MEDIA {
        let first = Sim::new(medium);
        let second = Sim::new(medium);
        let wal =
            Wal::open(first.device.clone(), test_config(Durability::EveryCommit)).expect("open");
        for i in 0..10 {
            wal.append(format!("a{i}").as_bytes()).expect("append");
        }
        let old = wal.switch(second.device.clone()).expect("switch");
        assert!(Arc::ptr_eq(&old, &first.device));
        assert_eq!(
            wal.durable_lsn(),
            10,
            "the switch made the old file durable"
        );
        assert_eq!(wal.append_commit(b"b0").expect("append"), 11);
        assert!(
            wal.switch(first.device.clone()).is_err(),
            "a used file is refused"
        );
        assert_eq!(wal.append_commit(b"b1").expect("still usable"), 12);
        let header = LogReader::open(second.device.clone())
            .expect("reader")
            .header();
        assert_eq!(header.base_lsn, 11);
        assert_eq!(read_all(first.device.clone()).len(), 10);
        assert_eq!(
            read_all(second.device.clone()),
            vec![(11, b"b0".to_vec()), (12, b"b1".to_vec())]
        );
    }
}

#[test]
fn durability_none_writes_without_syncing() {
    let sim = Sim::new(Medium::File);
    let wal = Wal::open(sim.device.clone(), test_config(Durability::None)).expect("open");
    let lsn = wal.append_commit(b"handed to the OS").expect("commit");
    assert_eq!(wal.durable_lsn(), 0);
    assert_eq!(
        read_all(sim.device.clone()),
        vec![(lsn, b"handed to the OS".to_vec())]
    );
    assert_eq!(wal.stats().syncs, 0);
    // Back-pressure: the in-flight window forces a sync eventually.
    for _ in 0..100 {
        wal.append_commit(&[0u8; 500]).expect("commit");
    }
    assert!(wal.stats().syncs >= 1 && wal.durable_lsn() > 0);
    assert!(wal.stats().backpressure_waits >= 1);
    assert_eq!(wal.sync().expect("sync"), 101);
}

/// Waits for a background sync to make `lsn` durable: a timer-driven
/// feature, so its effect is polled, with a deadline.
fn wait_durable(wal: &Wal, lsn: Lsn, failure: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while wal.durable_lsn() < lsn {
        assert!(Instant::now() < deadline, "{failure}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn periodic_durability_syncs_in_the_background() {
    let sim = Sim::new(Medium::File);
    let config = test_config(Durability::Periodic(Duration::from_millis(5)));
    let wal = Wal::open(sim.device.clone(), config).expect("open");
    let lsn = wal.append_commit(b"everysec").expect("commit");
    wait_durable(&wal, lsn, "the periodic sync never ran");
    assert!(wal.stats().syncs >= 1);
    wal.close().expect("close");
}

#[test]
fn sync_soon_runs_the_periodic_sync_before_its_interval() {
    let sim = Sim::new(Medium::File);
    let config = test_config(Durability::Periodic(Duration::from_secs(3600)));
    let wal = Wal::open(sim.device.clone(), config).expect("open");
    let lsn = wal.append_commit(b"before a log switch").expect("commit");
    assert_eq!(wal.durable_lsn(), 0, "written, not synced, at everysec");
    wal.sync_soon();
    // An hour's interval: only the request can make the record durable
    // within the deadline.
    wait_durable(&wal, lsn, "sync_soon did not sync");
    assert_eq!(wal.stats().syncs, 1);
    // Other levels have no syncer: nothing happens, nothing breaks.
    let every =
        Wal::open(Sim::new(Medium::File).device, test_config(Durability::None)).expect("open");
    let lsn = every.append_commit(b"no syncer").expect("commit");
    every.sync_soon();
    assert_eq!(every.durable_lsn(), 0);
    assert_eq!(every.sync().expect("sync"), lsn);
    wal.close().expect("close");
}

#[test]
fn oversized_records_and_bad_configs_are_refused() {
    let sim = Sim::new(Medium::File);
    let wal = Wal::open(sim.device.clone(), test_config(Durability::EveryCommit)).expect("open");
    assert!(matches!(
        wal.append(&[0u8; 2000]),
        Err(Error::RecordTooLarge { .. })
    ));
    assert!(matches!(wal.commit(99), Err(Error::Config { .. })));
    let bad = WalConfig {
        max_in_flight_bytes: 100,
        ..WalConfig::default()
    };
    assert!(matches!(
        Wal::open(Sim::new(Medium::File).device, bad),
        Err(Error::Config { .. })
    ));
}

#[test]
fn a_file_that_is_not_a_log_is_refused() {
    let sim = Sim::new(Medium::File);
    sim.device
        .write_at(0, b"#!/bin/sh\necho this is not a log\n")
        .expect("write");
    let error = Wal::open(sim.device.clone(), WalConfig::default()).expect_err("not a log");
    assert!(matches!(error, Error::BadHeader { .. }), "{error}");
}

#[test]
fn a_write_postponed_behind_a_slow_sync_is_never_reported_written() {
    let sim = Sim::new(Medium::File);
    let gated = Arc::new(GatedSync::new(sim.device.clone()));
    let config = test_config(Durability::Periodic(Duration::from_secs(3600)));
    // Opening a log syncs its header: the gate is open until here.
    let wal = Wal::open(gated.clone(), config).expect("open");
    gated.close();
    // If an assertion fails with the gate closed, the log's drop would
    // wait for the hanging sync: open it on the way out.
    struct OpenOnDrop(Arc<GatedSync>);
    impl Drop for OpenOnDrop {
        fn drop(&mut self) {
            self.0.open();
        }
    }
    let _open = OpenOnDrop(gated.clone());
    let first = wal.append_commit(b"before the sync").expect("commit");
    assert_eq!(wal.written_lsn(), first);
    // The background sync starts and hangs at the gate.
    wal.sync_soon();
    gated.wait_for_sync();
    let second = wal.append(b"while the sync hangs").expect("append");
    // Everysec postpones the write rather than wait behind the sync (as
    // Redis does), and says so: the record is not in the OS's hands.
    wal.commit(second).expect("commit");
    assert_eq!(wal.written_lsn(), first, "postponed, not written");
    assert_eq!(wal.stats().postponed_writes, 1);
    assert_eq!(wal.durable_lsn(), 0, "the sync still hangs");
    // A commit whose caller acknowledges what it commits writes instead,
    // and does not wait for the sync to end: the sync holds no writer
    // back, it covers what was written before it began.
    std::thread::scope(|s| {
        let writer = s.spawn(|| wal.commit_written(second));
        let deadline = Instant::now() + Duration::from_secs(30);
        while !writer.is_finished() {
            if Instant::now() > deadline {
                gated.open();
                panic!("the write waited for the sync");
            }
            std::thread::yield_now();
        }
        writer.join().expect("writer").expect("commit_written");
    });
    assert!(wal.written_lsn() >= second, "returned before the write");
    assert_eq!(wal.durable_lsn(), 0, "written while the sync hangs");
    gated.open();
    // The sync that hung covered the first record only; the second waits
    // for the next one.
    let deadline = Instant::now() + Duration::from_secs(30);
    while wal.durable_lsn() < first {
        assert!(Instant::now() < deadline, "the sync never ended");
        std::thread::yield_now();
    }
    let records = read_all(sim.device.clone());
    assert_eq!(records.last().map(|r| r.0), Some(second));
    wal.sync().expect("sync");
    assert_eq!(wal.durable_lsn(), second);
    wal.close().expect("close");
}

#[test]
fn the_periodic_syncer_syncs_early_once_enough_bytes_are_written() {
    let sim = Sim::new(Medium::File);
    let mut config = test_config(Durability::Periodic(Duration::from_secs(3600)));
    config.max_in_flight_bytes = 8 << 20;
    config.periodic_sync_bytes = 1 << 20;
    let wal = Wal::open(sim.device.clone(), config).expect("open");
    let record = [3u8; 1000];
    let mut last = 0;
    for _ in 0..1100 {
        last = wal.append(&record).expect("append");
        wal.commit(last).expect("commit");
    }
    // Over 1 MiB written: the syncer syncs long before its hour is up.
    let deadline = Instant::now() + Duration::from_secs(30);
    while wal.durable_lsn() < 1000 {
        assert!(Instant::now() < deadline, "no early sync");
        std::thread::yield_now();
    }
    assert!(wal.durable_lsn() <= last);
    wal.close().expect("close");

    // Without the byte bound (here turned off while open) only the
    // interval, or a request, syncs.
    let sim = Sim::new(Medium::File);
    let wal = Wal::open(sim.device.clone(), config).expect("open");
    wal.set_periodic_sync_bytes(0);
    let syncs = wal.stats().syncs;
    for _ in 0..1100 {
        let lsn = wal.append(&record).expect("append");
        wal.commit(lsn).expect("commit");
    }
    assert_eq!(wal.stats().syncs, syncs);
    assert_eq!(wal.durable_lsn(), 0);
    wal.close().expect("close");
}
