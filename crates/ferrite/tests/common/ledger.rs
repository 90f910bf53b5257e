//! The ledger of the kill -9 tests of the real `ferrite serve` binary
//! (`kv_crash.rs`, `kv_crash_wbuf.rs`): concurrent clients write with
//! `appendfsync always`, the server is killed with SIGKILL at a random
//! moment and restarted, and every acknowledged write must be there while
//! nothing that was never sent may appear.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use super::rounds::{self, Rounds, Survivor, Who};
use super::{Client, Reply};

/// Rounds per configuration when `FERRITE_CRASH_ITERS` is not set: enough
/// to hit many crash points, small enough for a CI budget of a few minutes.
pub const ROUNDS_DEFAULT: usize = 12;
const CLIENTS: usize = 4;

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

impl Known {
    /// How many of `known` are acknowledged (or settled as present).
    pub fn acked<'a>(known: impl IntoIterator<Item = &'a Known>) -> usize {
        known
            .into_iter()
            .filter(|k| matches!(k, Known::Acked(_)))
            .count()
    }
}

/// Every key the clients wrote, and the length their values are padded to.
#[derive(Debug, Default)]
pub struct Keys {
    pub value_len: usize,
    pub known: BTreeMap<Vec<u8>, Known>,
}

impl rounds::Ledger for Keys {
    /// Plain SETs and two-key MULTI/EXEC transactions until the connection
    /// breaks, each key written once.
    fn client(ledger: &Mutex<Keys>, port: u16, who: Who, stop: &AtomicBool) {
        let Ok(mut c) = Client::connect(port) else {
            return;
        };
        let (tag, value_len) = (who.tag(), ledger.lock().unwrap().value_len);
        let note = |k: &[u8], known: Known| ledger.lock().unwrap().known.insert(k.to_vec(), known);
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

    /// Every key on the server was written, every acknowledged value is
    /// there, every `Maybe` holds its value or nothing, and a transaction
    /// is all there or all absent.
    fn verify(&mut self, c: &mut Client, round: usize) {
        let Reply::Array(keys) = c.call(&[b"KEYS", b"*"]).unwrap() else {
            panic!("KEYS failed")
        };
        for k in keys {
            let Reply::Bulk(Some(k)) = k else {
                panic!("bad key")
            };
            assert!(
                self.known.contains_key(&k),
                "round {round}: key {:?} was never written",
                String::from_utf8_lossy(&k)
            );
        }
        let mut pairs: BTreeMap<String, Vec<bool>> = BTreeMap::new();
        for (key, known) in self.known.iter_mut() {
            let got = match c.call(&[b"GET", key]).unwrap() {
                Reply::Bulk(v) => v,
                other => panic!("GET: {other:?}"),
            };
            let name = String::from_utf8_lossy(key).into_owned();
            settle(known, got.as_ref(), &name, round);
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
}

/// Checks the value `got` of key `name` against what is known of it, and
/// settles a `Maybe` to what recovery decided.
fn settle(known: &mut Known, got: Option<&Vec<u8>>, name: &str, round: usize) {
    match known.clone() {
        Known::Acked(v) => assert_eq!(got, Some(&v), "round {round}: acknowledged {name} lost"),
        Known::Maybe(v) => {
            assert!(
                got.is_none() || got == Some(&v),
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
}

/// Runs `FERRITE_CRASH_ITERS` rounds (default [`ROUNDS_DEFAULT`]) of
/// writers killed with the server, started with `appendfsync always` and
/// `flags`, each restart checked against the ledger.
pub fn crash_rounds(name: &str, flags: &[&str]) {
    drop(crash_rounds_with(name, flags, 0));
}

/// [`crash_rounds`] with each value padded to `value_len` bytes; returns
/// the server of the last restart, still running.
pub fn crash_rounds_with(name: &str, flags: &[&str], value_len: usize) -> Survivor<Keys> {
    let mut all = vec!["--appendfsync", "always"];
    all.extend_from_slice(flags);
    let test = format!("crash test on {name}");
    let survivor = Rounds {
        name: &test,
        flags: &all,
        rounds: ROUNDS_DEFAULT,
        clients: CLIENTS,
        seed: 0x9e37_79b9_7f4a_7c15,
        kill_ms: 20..270,
    }
    .run(Keys {
        value_len,
        known: BTreeMap::new(),
    });
    let acked = Known::acked(survivor.ledger.known.values());
    assert!(
        acked > survivor.rounds,
        "too few acknowledged writes ({acked}) to mean anything"
    );
    survivor
}
