//! Crash test of `ferrite serve` under pipelined writes, where the log
//! takes all the records of a loop turn as one batch: clients send XADD
//! and INCR in pipelines of 16 with `appendfsync always`, the server is
//! killed with SIGKILL at a random moment and restarted. After each
//! restart every acknowledged XADD ID is in its stream, no entry appears
//! that was never sent, and every counter holds at least the last value an
//! INCR acknowledged and at most the INCRs sent. Runs with the log on
//! emulated PM (a file mmapped: it survives a process crash, not a power
//! failure) and on a file. `FERRITE_CRASH_ITERS` sets the rounds.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::rounds::{Ledger, Rounds, Who};
use common::{entry_ids, info_figure, Client, Reply};

const ROUNDS_DEFAULT: usize = 5;
const CLIENTS: usize = 3;
/// Commands per pipeline: XADD and INCR alternating.
const DEPTH: usize = 16;

/// What one client's stream and counter must hold.
#[derive(Debug, Default)]
struct Track {
    /// XADD IDs acknowledged (or found after a restart).
    added: BTreeSet<Vec<u8>>,
    /// XADDs sent whose reply was not read.
    unknown_adds: usize,
    /// The highest value an INCR acknowledged (or found after a restart).
    counter_acked: i64,
    /// INCRs sent so far, acknowledged or not: the counter's upper bound.
    counter_sent: i64,
}

/// Each client's [`Track`], by its tag.
type Tracks = BTreeMap<String, Track>;

fn stream_key(tag: &str) -> Vec<u8> {
    format!("s:{tag}").into_bytes()
}

fn counter_key(tag: &str) -> Vec<u8> {
    format!("n:{tag}").into_bytes()
}

/// Sends one pipeline and notes what was sent before any reply is read.
fn send_pipeline(c: &mut Client, tag: &str, seq: usize, ledger: &Mutex<Tracks>) -> bool {
    let (stream, counter) = (stream_key(tag), counter_key(tag));
    {
        let mut l = ledger.lock().unwrap();
        let track = l.entry(tag.to_string()).or_default();
        track.unknown_adds += DEPTH / 2;
        track.counter_sent += (DEPTH / 2) as i64;
    }
    for j in 0..DEPTH {
        let sent = if j % 2 == 0 {
            let value = format!("{seq}.{j}");
            c.send(&[b"XADD", &stream, b"*", b"v", value.as_bytes()])
        } else {
            c.send(&[b"INCR", &counter])
        };
        if sent.is_err() {
            return false;
        }
    }
    true
}

impl Ledger for Tracks {
    /// One client's work until the connection breaks.
    fn client(ledger: &Mutex<Tracks>, port: u16, who: Who, stop: &AtomicBool) {
        let Ok(mut c) = Client::connect(port) else {
            return;
        };
        let tag = who.tag();
        for seq in 0.. {
            if stop.load(Ordering::Relaxed) || !send_pipeline(&mut c, &tag, seq, ledger) {
                return;
            }
            for j in 0..DEPTH {
                let Ok(reply) = c.read() else {
                    return;
                };
                let mut l = ledger.lock().unwrap();
                let track = l.entry(tag.clone()).or_default();
                match (j % 2, reply) {
                    (0, Reply::Bulk(Some(id))) => {
                        track.unknown_adds -= 1;
                        track.added.insert(id);
                    }
                    (1, Reply::Int(n)) => track.counter_acked = track.counter_acked.max(n),
                    (_, other) => panic!("client {tag}: unexpected reply {other:?}"),
                }
            }
        }
    }

    /// Checks the restarted server against the ledger, then settles the
    /// ledger to what recovery kept.
    fn verify(&mut self, c: &mut Client, round: usize) {
        for (tag, track) in self.iter_mut() {
            let present = entry_ids(c.call(&[b"XRANGE", &stream_key(tag), b"-", b"+"]).unwrap());
            for id in &track.added {
                assert!(
                    present.contains(id),
                    "round {round}, client {tag}: acknowledged XADD {} lost",
                    String::from_utf8_lossy(id)
                );
            }
            let extra = present.difference(&track.added).count();
            assert!(
                extra <= track.unknown_adds,
                "round {round}, client {tag}: {extra} entries appeared, {} were sent unacknowledged",
                track.unknown_adds
            );
            track.added = present;
            track.unknown_adds = 0;
            let value = match c.call(&[b"GET", &counter_key(tag)]).unwrap() {
                Reply::Bulk(None) => 0,
                Reply::Bulk(Some(v)) => String::from_utf8_lossy(&v).parse().expect("a number"),
                other => panic!("GET answered {other:?}"),
            };
            assert!(
                value >= track.counter_acked,
                "round {round}, client {tag}: counter {value} below the acknowledged {}",
                track.counter_acked
            );
            assert!(
                value <= track.counter_sent,
                "round {round}, client {tag}: counter {value} above the {} INCRs sent",
                track.counter_sent
            );
            track.counter_acked = value;
            track.counter_sent = value;
        }
    }
}

/// A pipeline of 100 INCRs reaches the log in far fewer batches than
/// records, or the crash rounds tested one record per append only.
fn assert_pipelines_are_batched(port: u16, label: &str) {
    let mut c = Client::connect(port).expect("connect");
    let appends = info_figure(&mut c, "persistence", "ferrite_log_appends");
    let commits = info_figure(&mut c, "persistence", "ferrite_log_commits");
    for _ in 0..100 {
        c.send(&[b"INCR", b"batch-probe"]).expect("send");
    }
    for _ in 0..100 {
        assert!(matches!(c.read(), Ok(Reply::Int(_))));
    }
    // INFO's log figures are refreshed by the server's timer: wait for
    // the one that counts the 100 records.
    let deadline = Instant::now() + Duration::from_secs(20);
    let appended = loop {
        let appended = info_figure(&mut c, "persistence", "ferrite_log_appends") - appends;
        if appended >= 100 || Instant::now() > deadline {
            break appended;
        }
        std::thread::yield_now();
    };
    let committed = info_figure(&mut c, "persistence", "ferrite_log_commits") - commits;
    assert_eq!(appended, 100, "{label}: one record per INCR");
    assert!(
        committed * 2 <= appended,
        "{label}: {appended} records took {committed} batches"
    );
}

fn crash_rounds(label: &str, flags: &[&str]) {
    let name = format!("{label}: pipelined crash test");
    let survivor = Rounds {
        name: &name,
        flags,
        rounds: ROUNDS_DEFAULT,
        clients: CLIENTS,
        seed: 0x9e37_79b9_7f4a_7c15,
        kill_ms: 30..280,
    }
    .run(Tracks::new());
    let acked: usize = survivor.ledger.values().map(|t| t.added.len()).sum();
    assert!(
        acked > survivor.rounds * DEPTH,
        "{label}: too little acknowledged work ({acked} entries) to mean anything"
    );
    assert_pipelines_are_batched(survivor.port, label);
}

#[test]
fn kill_9_under_pipelined_xadd_and_incr_emulated_pm_log() {
    crash_rounds(
        "pmem-emulated",
        &["--appendfsync", "always", "--log-device", "pmem-emulated"],
    );
}

#[test]
fn kill_9_under_pipelined_xadd_and_incr_file_log() {
    crash_rounds("file", &["--appendfsync", "always", "--log-device", "file"]);
}
