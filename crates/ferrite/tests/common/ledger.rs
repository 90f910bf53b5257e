//! The ledger of the kill -9 tests of the real `ferrite serve` binary
//! (`kv_crash.rs`, `kv_crash_wbuf.rs`): concurrent clients write with
//! `appendfsync always`, the server is killed with SIGKILL at a random
//! moment and restarted, and every acknowledged write must be there while
//! nothing that was never sent may appear.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Child;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use super::{kill_after, start_server, Client, Reply};

/// Rounds per configuration when `FERRITE_CRASH_ITERS` is not set: enough
/// to hit many crash points, small enough for a CI budget of a few minutes.
pub const ROUNDS_DEFAULT: usize = 12;
const CLIENTS: usize = 4;

fn start(dir: &Path, flags: &[&str]) -> (Child, u16) {
    let mut all = vec!["--appendfsync", "always"];
    all.extend_from_slice(flags);
    start_server(dir, &all)
}

/// What the test knows about a key.
#[derive(Clone, Debug, PartialEq)]
pub enum Known {
    /// Acknowledged: must be there with this value, forever.
    Acked(Vec<u8>),
    /// Sent, reply lost in the crash: may be there with this value, or not.
    Maybe(Vec<u8>),
    /// Sent, not acknowledged, and found absent after a restart: must stay absent.
    Absent,
}

pub type Ledger = Arc<Mutex<BTreeMap<Vec<u8>, Known>>>;

/// One client's writes until the connection breaks: plain SETs and
/// two-key MULTI/EXEC transactions, each key written once.
pub fn writer(port: u16, tag: String, value_len: usize, ledger: Ledger, stop: Arc<AtomicBool>) {
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
pub fn verify(port: u16, ledger: &Ledger, round: usize) {
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

/// Runs `FERRITE_CRASH_ITERS` rounds (default [`ROUNDS_DEFAULT`]) of
/// writers killed with the server, started with `appendfsync always` and
/// `flags`, each restart checked against the ledger.
pub fn crash_rounds(name: &str, flags: &[&str]) {
    let (mut child, _) = crash_rounds_with(name, flags, 0);
    let _ = child.kill();
    let _ = child.wait();
}

/// [`crash_rounds`] with each value padded to `value_len` bytes; returns
/// the server of the last restart, still running, and its port.
pub fn crash_rounds_with(name: &str, flags: &[&str], value_len: usize) -> (Child, u16) {
    let rounds = std::env::var("FERRITE_CRASH_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(ROUNDS_DEFAULT);
    let dir = tempfile::tempdir().unwrap();
    let ledger: Ledger = Arc::default();
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15 ^ u64::from(std::process::id());
    eprintln!("crash test on {name}: {rounds} rounds, seed {seed:#x}");
    for round in 0..rounds {
        let (mut child, port) = start(dir.path(), flags);
        verify(port, &ledger, round);
        let stop = Arc::new(AtomicBool::new(false));
        let threads: Vec<_> = (0..CLIENTS)
            .map(|t| {
                let (ledger, stop) = (Arc::clone(&ledger), Arc::clone(&stop));
                let tag = format!("r{round}c{t}");
                std::thread::spawn(move || writer(port, tag, value_len, ledger, stop))
            })
            .collect();
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        kill_after(20 + (seed >> 33) % 250, &mut child, &stop, threads);
    }
    let (child, port) = start(dir.path(), flags);
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
