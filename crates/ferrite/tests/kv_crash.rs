//! Crash test of the real `ferrite serve` binary: concurrent clients write
//! with `appendfsync always`, the server is killed with SIGKILL at a random
//! moment, restarted, and every acknowledged write must be there while
//! nothing that was never sent may appear. Runs for the file log and the
//! emulated-PM log, and once with the PM value tier under a small DRAM
//! budget, so that values are demoted and promoted as the server dies;
//! `FERRITE_CRASH_ITERS` sets the rounds per device.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Child;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use common::{kill_after, start_server, Client, Reply};

/// Rounds per device when `FERRITE_CRASH_ITERS` is not set: enough to hit
/// many crash points, small enough for a CI budget of a few minutes.
const ROUNDS_DEFAULT: usize = 12;
const CLIENTS: usize = 4;

/// How a run is set up: the log's device, extra server flags, and the
/// bytes each value is padded to.
struct Setup<'a> {
    device: &'a str,
    flags: &'a [String],
    value_len: usize,
}

fn start(dir: &Path, setup: &Setup<'_>) -> (Child, u16) {
    let mut flags = vec!["--appendfsync", "always", "--log-device", setup.device];
    flags.extend(setup.flags.iter().map(String::as_str));
    start_server(dir, &flags)
}

/// What the test knows about a key.
#[derive(Clone, Debug, PartialEq)]
enum Known {
    /// Acknowledged: must be there with this value, forever.
    Acked(Vec<u8>),
    /// Sent, reply lost in the crash: may be there with this value, or not.
    Maybe(Vec<u8>),
    /// Sent, not acknowledged, and found absent after a restart: must stay absent.
    Absent,
}

type Ledger = Arc<Mutex<BTreeMap<Vec<u8>, Known>>>;

/// One client's writes until the connection breaks: plain SETs and
/// two-key MULTI/EXEC transactions, each key written once.
fn writer(port: u16, tag: String, value_len: usize, ledger: Ledger, stop: Arc<AtomicBool>) {
    let Ok(mut c) = Client::connect(port) else {
        return;
    };
    let note = |k: &[u8], known: Known| ledger.lock().unwrap().insert(k.to_vec(), known);
    for i in 0.. {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let (k1, k2) = (format!("{tag}:{i}:a"), format!("{tag}:{i}:b"));
        let mut value = format!("value-{tag}-{i}-").into_bytes();
        value.resize(value_len.max(value.len()), b'.');
        if i % 4 == 0 {
            note(k1.as_bytes(), Known::Maybe(value.clone()));
            note(k2.as_bytes(), Known::Maybe(value.clone()));
            let ok = (|| -> std::io::Result<bool> {
                c.call(&[b"MULTI"])?;
                c.call(&[b"SET", k1.as_bytes(), &value])?;
                c.call(&[b"SET", k2.as_bytes(), &value])?;
                Ok(matches!(c.call(&[b"EXEC"])?, Reply::Array(ref a) if a.len() == 2))
            })();
            match ok {
                Ok(true) => {
                    note(k1.as_bytes(), Known::Acked(value.clone()));
                    note(k2.as_bytes(), Known::Acked(value));
                }
                _ => return,
            }
        } else {
            note(k1.as_bytes(), Known::Maybe(value.clone()));
            match c.call(&[b"SET", k1.as_bytes(), &value]) {
                Ok(Reply::Simple(s)) if s == "OK" => {
                    note(k1.as_bytes(), Known::Acked(value));
                }
                _ => return,
            }
        }
    }
}

/// Checks the restarted server against the ledger, and settles the
/// `Maybe` keys to what recovery decided.
fn verify(port: u16, ledger: &Ledger, round: usize) {
    let mut c = Client::connect(port).expect("connect after restart");
    let mut ledger = ledger.lock().unwrap();
    let Reply::Array(keys) = c.call(&[b"KEYS", b"*"]).unwrap() else {
        panic!("KEYS failed")
    };
    for k in keys {
        let Reply::Bulk(Some(k)) = k else {
            panic!("bad key")
        };
        assert!(
            ledger.contains_key(&k),
            "round {round}: key {:?} was never written",
            String::from_utf8_lossy(&k)
        );
    }
    let mut pairs: BTreeMap<String, Vec<bool>> = BTreeMap::new();
    for (key, known) in ledger.iter_mut() {
        let got = match c.call(&[b"GET", key]).unwrap() {
            Reply::Bulk(v) => v,
            other => panic!("GET: {other:?}"),
        };
        let name = String::from_utf8_lossy(key).into_owned();
        match known.clone() {
            Known::Acked(v) => assert_eq!(
                got.as_ref(),
                Some(&v),
                "round {round}: acknowledged {name} lost"
            ),
            Known::Maybe(v) => {
                assert!(
                    got.is_none() || got.as_ref() == Some(&v),
                    "round {round}: {name} has a value never written"
                );
                *known = if got.is_some() {
                    Known::Acked(v)
                } else {
                    Known::Absent
                };
            }
            Known::Absent => assert!(
                got.is_none(),
                "round {round}: {name} came back after being absent"
            ),
        }
        if let Some(stem) = name.strip_suffix(":a").or_else(|| name.strip_suffix(":b")) {
            pairs
                .entry(stem.to_string())
                .or_default()
                .push(got.is_some());
        }
    }
    for (stem, present) in pairs {
        let index: usize = stem
            .rsplit(':')
            .next()
            .and_then(|i| i.parse().ok())
            .unwrap_or(1);
        if index.is_multiple_of(4) {
            assert!(
                present.iter().all(|p| *p == present[0]),
                "round {round}: transaction {stem} half applied"
            );
        }
    }
}

fn crash_rounds(setup: &Setup<'_>) -> (Child, u16) {
    let rounds = std::env::var("FERRITE_CRASH_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(ROUNDS_DEFAULT);
    let dir = tempfile::tempdir().unwrap();
    let ledger: Ledger = Arc::default();
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15 ^ u64::from(std::process::id());
    let device = setup.device;
    eprintln!("crash test on {device}: {rounds} rounds, seed {seed:#x}");
    for round in 0..rounds {
        let (mut child, port) = start(dir.path(), setup);
        verify(port, &ledger, round);
        let stop = Arc::new(AtomicBool::new(false));
        let threads: Vec<_> = (0..CLIENTS)
            .map(|t| {
                let (ledger, stop) = (Arc::clone(&ledger), Arc::clone(&stop));
                let tag = format!("r{round}c{t}");
                let value_len = setup.value_len;
                std::thread::spawn(move || writer(port, tag, value_len, ledger, stop))
            })
            .collect();
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        kill_after(20 + (seed >> 33) % 250, &mut child, &stop, threads);
    }
    let (child, port) = start(dir.path(), setup);
    verify(port, &ledger, rounds);
    let acked = ledger
        .lock()
        .unwrap()
        .values()
        .filter(|k| matches!(k, Known::Acked(_)))
        .count();
    assert!(
        acked > rounds,
        "too few acknowledged writes ({acked}) to mean anything"
    );
    (child, port)
}

fn stop(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn kill_9_loses_no_acknowledged_write_file_log() {
    let (child, _) = crash_rounds(&Setup {
        device: "file",
        flags: &[],
        value_len: 0,
    });
    stop(child);
}

#[test]
fn kill_9_loses_no_acknowledged_write_emulated_pm_log() {
    let (child, _) = crash_rounds(&Setup {
        device: "pmem-emulated",
        flags: &[],
        value_len: 0,
    });
    stop(child);
}

/// An INFO memory field of the server on `port`.
fn info_memory(port: u16, name: &str) -> u64 {
    let mut c = Client::connect(port).expect("connect");
    let Ok(Reply::Bulk(Some(text))) = c.call(&[b"INFO", b"memory"]) else {
        panic!("INFO failed")
    };
    String::from_utf8_lossy(&text)
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("INFO memory has no {name}"))
}

/// The same ledger with 4 KiB values and a DRAM budget 2 MiB above what
/// an empty server uses: values move to the PM tier while the clients
/// write and the server is killed, and every restart rebuilds the tier by
/// replay. The last restart must have demoted values, or the run proved
/// nothing about the tier.
#[test]
fn kill_9_loses_no_acknowledged_write_with_a_small_dram_budget() {
    let probe = tempfile::tempdir().unwrap();
    let (child, port) = start_server(probe.path(), &[]);
    let empty = info_memory(port, "used_memory");
    stop(child);
    let flags = [
        "--maxmemory-dram".to_string(),
        (empty + (2 << 20)).to_string(),
        "--pm-tier-size".to_string(),
        "256mb".to_string(),
    ];
    let (child, port) = crash_rounds(&Setup {
        device: "file",
        flags: &flags,
        value_len: 4096,
    });
    let demoted = info_memory(port, "tier_demotions");
    stop(child);
    assert!(
        demoted > 0,
        "no value was demoted: the budget was never passed"
    );
}
