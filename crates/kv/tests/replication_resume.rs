//! A restarted replica resumes with a partial sync: its log keeps the
//! replication ID and offset in the records it applied from the stream
//! (`aof/repl_mark.rs`). After a clean stop and after a crash at every
//! record boundary and inside every record of its last log, the restarted
//! replica asks `PSYNC id offset+1`, the master answers `+CONTINUE`
//! (`sync_partial_ok`), and a counter incremented on the master ends equal
//! on both: no write of the stream is applied twice or lost.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::repl::{call, eventually, info_field};
use common::{Raw, TestServer};
use ferrite_io::{Device, FileDevice};
use ferrite_wal::LogReader;

fn start_replica(dir: &Path, master: &TestServer) -> TestServer {
    let port = master.addr.port();
    TestServer::start_with(dir, |c| c.replicaof = format!("127.0.0.1 {port}"))
}

/// Waits for the replica's link and for its offset to reach the master's.
fn caught_up(master: &mut Raw, replica: &mut Raw) {
    eventually("the link", || {
        info_field(replica, "master_link_status") == "up"
    });
    eventually("the offsets to meet", || {
        info_field(replica, "master_repl_offset") == info_field(master, "master_repl_offset")
    });
}

fn counter(c: &mut Raw) -> String {
    call(c, &["GET", "counter"])
}

fn syncs(master: &mut Raw) -> (String, String) {
    (
        info_field(master, "sync_full"),
        info_field(master, "sync_partial_ok"),
    )
}

/// A master, and a replica in `dir` that synced in full and then applied
/// `incrs` INCRs from the stream.
fn replicated(master_dir: &Path, dir: &Path, incrs: usize) -> (TestServer, TestServer) {
    let master = TestServer::start(master_dir);
    let mut m = master.raw();
    call(&mut m, &["CONFIG", "SET", "repl-diskless-sync-delay", "0"]);
    call(&mut m, &["SET", "before", "the sync"]);
    let replica = start_replica(dir, &master);
    let mut r = replica.raw();
    caught_up(&mut m, &mut r);
    for _ in 0..incrs {
        call(&mut m, &["INCR", "counter"]);
    }
    caught_up(&mut m, &mut r);
    (master, replica)
}

#[test]
fn a_replica_stopped_and_restarted_continues_partially() {
    let master_dir = tempfile::tempdir().expect("tempdir");
    let dir = tempfile::tempdir().expect("tempdir");
    let (master, replica) = replicated(master_dir.path(), dir.path(), 5);
    let mut m = master.raw();
    assert_eq!(syncs(&mut m), ("1".into(), "0".into()));
    replica.stop();
    // Writes while the replica is away come from the backlog.
    for _ in 0..7 {
        call(&mut m, &["INCR", "counter"]);
    }
    let replica = start_replica(dir.path(), &master);
    let mut r = replica.raw();
    caught_up(&mut m, &mut r);
    assert_eq!(syncs(&mut m), ("1".into(), "1".into()));
    assert_eq!(counter(&mut r), "$2\r\n12\r\n");
    assert_eq!(call(&mut r, &["GET", "before"]), "$8\r\nthe sync\r\n");
    // The resumed replica keeps following.
    call(&mut m, &["INCR", "counter"]);
    caught_up(&mut m, &mut r);
    assert_eq!(counter(&mut r), "$2\r\n13\r\n");
}

/// The log the replica appends to: the last incr its manifest names.
fn last_log(dir: &Path) -> PathBuf {
    let manifest = std::fs::read_dir(dir)
        .expect("dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "manifest"))
        .expect("a full sync leaves a manifest");
    let text = std::fs::read_to_string(manifest).expect("manifest");
    let name = text
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("incr "))
        .and_then(|l| l.split(' ').next())
        .expect("an incr log")
        .to_string();
    dir.join(name)
}

/// Where the log's records start and where the last one ends.
fn record_bounds(log: &Path) -> Vec<u64> {
    let device: Arc<dyn Device> = Arc::new(FileDevice::open_existing(log).expect("log"));
    let mut bounds: Vec<u64> = LogReader::open(device)
        .expect("reader")
        .map(|r| r.expect("intact").offset)
        .collect();
    bounds.push(std::fs::metadata(log).expect("size").len());
    bounds
}

fn copy_dir(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).expect("dir") {
        let path = entry.expect("entry").path();
        if path.is_file() {
            std::fs::copy(&path, to.join(path.file_name().expect("name"))).expect("copy");
        }
    }
}

#[test]
fn a_replica_crashed_at_any_point_of_its_log_continues_without_loss_or_repeat() {
    const INCRS: usize = 6;
    let master_dir = tempfile::tempdir().expect("tempdir");
    let dir = tempfile::tempdir().expect("tempdir");
    let (master, replica) = replicated(master_dir.path(), dir.path(), INCRS);
    replica.stop();
    let log = last_log(dir.path());
    let bounds = record_bounds(&log);
    // Every record boundary, and a cut inside every record (a torn tail).
    let mut cuts: Vec<u64> = bounds.clone();
    cuts.extend(bounds.windows(2).map(|w| (w[0] + w[1]) / 2));
    cuts.sort_unstable();
    cuts.dedup();
    let mut m = master.raw();
    let mut partial = 0;
    for cut in cuts {
        let crashed = tempfile::tempdir().expect("tempdir");
        copy_dir(dir.path(), crashed.path());
        let copy = crashed.path().join(log.file_name().expect("name"));
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(&copy)
            .expect("open copy");
        file.set_len(cut).expect("truncate");
        drop(file);
        let before = syncs(&mut m);
        let replica = start_replica(crashed.path(), &master);
        let mut r = replica.raw();
        caught_up(&mut m, &mut r);
        let after = syncs(&mut m);
        assert_eq!(
            counter(&mut r),
            format!("$1\r\n{INCRS}\r\n"),
            "crash at byte {cut} of {}",
            copy.display()
        );
        // Past the record that marks the full sync's history, the restart
        // continues; before it, the replica has no history and syncs in full.
        if after.1 != before.1 {
            assert_eq!(after.0, before.0, "a partial sync is not also a full one");
            partial += 1;
        }
        replica.stop();
    }
    // Every cut from the first whole marked record on resumes partially.
    assert!(
        partial >= 2 * INCRS,
        "only {partial} crash points resumed partially"
    );
}

#[test]
fn a_master_restarted_cleanly_continues_its_replicas_partially() {
    let master_dir = tempfile::tempdir().expect("tempdir");
    let dir = tempfile::tempdir().expect("tempdir");
    let (master, replica) = replicated(master_dir.path(), dir.path(), 3);
    let port = master.addr.port();
    let mut m = master.raw();
    let old_id = info_field(&mut m, "master_replid");
    let offset = info_field(&mut m, "master_repl_offset");
    master.stop();
    let master = TestServer::start_with(master_dir.path(), |c| c.port = port);
    let mut m = master.raw();
    // A new history of its own, the old one valid up to the offset.
    assert_ne!(info_field(&mut m, "master_replid"), old_id);
    assert_eq!(info_field(&mut m, "master_replid2"), old_id);
    let next: i64 = offset.parse::<i64>().expect("offset") + 1;
    assert_eq!(info_field(&mut m, "second_repl_offset"), next.to_string());
    let mut r = replica.raw();
    caught_up(&mut m, &mut r);
    assert_eq!(syncs(&mut m), ("0".into(), "1".into()));
    call(&mut m, &["INCR", "counter"]);
    caught_up(&mut m, &mut r);
    assert_eq!(counter(&mut r), "$1\r\n4\r\n");
}

#[test]
fn a_resumed_stream_stays_in_the_database_it_had_selected() {
    let master_dir = tempfile::tempdir().expect("tempdir");
    let dir = tempfile::tempdir().expect("tempdir");
    let (master, replica) = replicated(master_dir.path(), dir.path(), 0);
    let mut m = master.raw();
    call(&mut m, &["SELECT", "9"]);
    call(&mut m, &["INCR", "counter"]);
    let mut r = replica.raw();
    caught_up(&mut m, &mut r);
    // A cut link: the master continues its stream without a new SELECT.
    assert_eq!(
        call(&mut r, &["CLIENT", "KILL", "TYPE", "MASTER"]),
        ":1\r\n"
    );
    eventually("the partial resync", || syncs(&mut m).1 == "1");
    call(&mut m, &["INCR", "counter"]);
    caught_up(&mut m, &mut r);
    call(&mut r, &["SELECT", "9"]);
    assert_eq!(counter(&mut r), "$1\r\n2\r\n");
    replica.stop();
    // A restart: the log's mark names the database as well.
    call(&mut m, &["INCR", "counter"]);
    let replica = start_replica(dir.path(), &master);
    let mut r = replica.raw();
    caught_up(&mut m, &mut r);
    assert_eq!(syncs(&mut m), ("1".into(), "2".into()));
    assert_eq!(counter(&mut r), "$-1\r\n", "nothing landed in database 0");
    call(&mut r, &["SELECT", "9"]);
    assert_eq!(counter(&mut r), "$1\r\n3\r\n");
}
