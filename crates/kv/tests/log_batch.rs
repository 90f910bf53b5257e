//! The server's log takes a loop turn's records as one batch: each record
//! keeps its own LSN (the ticket its reply waits for), none is in the log
//! file or acknowledged before the flush, one flush makes them all
//! durable on persistent memory with one persist, and a batch the log
//! cannot take is never acknowledged and makes it refuse every later
//! write.

use std::sync::Arc;

use ferrite_io::{Device, PmDevice, PmPolicy, SimFile};
use ferrite_kv::aof::{CommandLog, Ticket, WalLog};
use ferrite_kv::commands::Propagation;
use ferrite_kv::config::AppendFsync;
use ferrite_pmem::SimPmem;
use ferrite_wal::{LogReader, Wal};

fn incr(key: &str) -> Propagation {
    let mut p = Propagation::default();
    p.push(0, &[b"INCR", key.as_bytes()]);
    p
}

fn log_on(device: Arc<dyn Device>) -> WalLog {
    let config = ferrite_kv::aof::wal_config(AppendFsync::Always, device.info().durable_on_write);
    let wal = Wal::open(device, config).expect("open the wal");
    WalLog::new(wal, AppendFsync::Always, Box::new(|| {})).expect("log")
}

fn payloads(device: Arc<dyn Device>) -> Vec<(u64, Vec<u8>)> {
    LogReader::open(device)
        .expect("log header")
        .map(|r| {
            let record = r.expect("record");
            (record.lsn, record.payload)
        })
        .collect()
}

#[test]
fn a_turn_of_records_is_one_persist_on_pm_with_a_ticket_per_record() {
    let pm = Arc::new(
        PmDevice::new(SimPmem::new(0), "batch.aof.pm", PmPolicy::DrainEveryWrite)
            .expect("pm device"),
    );
    let device: Arc<dyn Device> = pm.clone();
    let mut log = log_on(Arc::clone(&device));
    let tickets: Vec<Ticket> = (0..5)
        .map(|i| log.append(&incr(&format!("k{i}"))))
        .collect();
    assert_eq!(tickets, [1, 2, 3, 4, 5]);
    assert_eq!(log.append(&Propagation::default()), 5, "an empty record");
    assert_eq!(
        log.wal().next_lsn(),
        1,
        "nothing reaches the wal before the flush"
    );
    assert_eq!(log.acknowledged(), 0);
    let fences = pm.medium().events();
    log.flush();
    assert_eq!(log.acknowledged(), 5, "durable once flushed, on PM at once");
    let stats = log.wal().stats();
    assert_eq!((stats.records, stats.batches), (5, 1));
    assert!(pm.medium().events() > fences);
    // What the medium holds persisted: the five records, in ticket order.
    let persisted = Arc::new(
        PmDevice::new(
            SimPmem::from_image(pm.medium().persisted_image()),
            "batch.aof.pm",
            PmPolicy::DrainEveryWrite,
        )
        .expect("reopen the image"),
    );
    let records = payloads(persisted);
    let keys: Vec<(u64, String)> = records
        .iter()
        .map(|(lsn, p)| (*lsn, String::from_utf8_lossy(p).into_owned()))
        .collect();
    assert_eq!(keys.len(), 5);
    for (i, (lsn, payload)) in keys.iter().enumerate() {
        assert_eq!(*lsn, i as u64 + 1);
        assert!(payload.ends_with(&format!("k{i}\r\n")), "{payload:?}");
    }
    // The next turn continues the numbering.
    assert_eq!(log.append(&incr("next")), 6);
    log.drain();
    assert_eq!(log.wal().next_lsn(), 7, "drained, without a flush");
    log.close().expect("close");
}

#[test]
fn a_batch_the_log_cannot_take_is_never_acknowledged_and_refuses_later_writes() {
    let file = Arc::new(SimFile::new("batch.aof"));
    let device: Arc<dyn Device> = file.clone();
    let mut log = log_on(device);
    let first = log.append(&incr("before"));
    log.flush();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while log.acknowledged() < first {
        assert!(std::time::Instant::now() < deadline, "never acknowledged");
        std::thread::yield_now();
    }
    // The device is full: the next turn's write fails.
    file.set_space_limit(Some(file.len() as usize));
    let tickets: Vec<Ticket> = (0..3)
        .map(|i| log.append(&incr(&format!("lost{i}"))))
        .collect();
    log.flush();
    while log.failure().is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "the failure never showed"
        );
        std::thread::yield_now();
    }
    for ticket in &tickets {
        assert!(
            log.acknowledged() < *ticket,
            "a failed record was acknowledged"
        );
    }
    assert_eq!(
        log.append(&incr("after")),
        Ticket::MAX,
        "writes are refused"
    );
}
