//! Kill -9 of the real `ferrite serve` binary while clients add large
//! members to sets and sorted sets under a DRAM budget far below them:
//! members move to the PM tier as the server dies (`docs/tier.md`,
//! "Members of collections"), and every restart must hold every
//! acknowledged member (with its score), no member never sent, and keep
//! absent a member found absent once. The heap is emulated PM (a mapped
//! file: it survives the process's crash, not a power failure), and the
//! log is the only source of the data. `FERRITE_CRASH_ITERS` sets the
//! rounds.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use common::ledger::{Known, ROUNDS_DEFAULT};
use common::rounds::{Ledger, Rounds, Who};
use common::{info_figure, small_dram_budget, Client, Reply};

const CLIENTS: usize = 4;
/// Bytes of each member: well above the tier's 64-byte threshold.
const MEMBER_BYTES: usize = 2048;

/// (set or sorted-set key, member index) → what the test knows of it.
type Members = BTreeMap<(String, usize), Known>;

fn member(key: &str, i: usize) -> Vec<u8> {
    let mut m = format!("{key}-{i}-").into_bytes();
    m.resize(MEMBER_BYTES, b'.');
    m
}

/// Whether member `i` of `key` is there (with score `i` in a sorted set).
fn present(c: &mut Client, key: &str, i: usize, m: &[u8]) -> bool {
    if key.starts_with("s:") {
        c.call(&[b"SISMEMBER", key.as_bytes(), m]).unwrap() == Reply::Int(1)
    } else {
        match c.call(&[b"ZSCORE", key.as_bytes(), m]).unwrap() {
            Reply::Bulk(None) => false,
            Reply::Bulk(Some(score)) => {
                assert_eq!(score, i.to_string().into_bytes(), "{key} member {i}: score");
                true
            }
            other => panic!("ZSCORE: {other:?}"),
        }
    }
}

impl Ledger for Members {
    /// One client's writes until the connection breaks: SADD to its set and
    /// ZADD (score `i`) to its sorted set, one new member each.
    fn client(ledger: &Mutex<Members>, port: u16, who: Who, stop: &AtomicBool) {
        let Ok(mut c) = Client::connect(port) else {
            return;
        };
        let tag = who.tag();
        let (set, zset) = (format!("s:{tag}"), format!("z:{tag}"));
        for i in 0.. {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            let key = if i % 2 == 0 { &set } else { &zset };
            let m = member(key, i);
            let id = (key.clone(), i);
            ledger
                .lock()
                .unwrap()
                .insert(id.clone(), Known::Maybe(m.clone()));
            let score = i.to_string();
            let reply = if i % 2 == 0 {
                c.call(&[b"SADD", key.as_bytes(), &m])
            } else {
                c.call(&[b"ZADD", key.as_bytes(), score.as_bytes(), &m])
            };
            match reply {
                Ok(Reply::Int(1)) => {
                    ledger.lock().unwrap().insert(id, Known::Acked(m));
                }
                _ => return,
            }
        }
    }

    /// Checks the restarted server against the ledger, settling the `Maybe`
    /// members to what recovery decided, and that each collection holds no
    /// member the ledger does not know.
    fn verify(&mut self, c: &mut Client, round: usize) {
        let mut counts: BTreeMap<String, i64> = BTreeMap::new();
        for ((key, i), known) in self.iter_mut() {
            let m = member(key, *i);
            let here = present(c, key, *i, &m);
            match known {
                Known::Acked(_) => assert!(here, "round {round}: acknowledged {key} {i} lost"),
                Known::Maybe(_) => {
                    *known = if here { Known::Acked(m) } else { Known::Absent };
                }
                Known::Absent => assert!(!here, "round {round}: {key} {i} came back"),
            }
            *counts.entry(key.clone()).or_default() += i64::from(here);
        }
        for (key, count) in counts {
            let card: &[u8] = if key.starts_with("s:") {
                b"SCARD"
            } else {
                b"ZCARD"
            };
            let got = c.call(&[card, key.as_bytes()]).unwrap();
            assert_eq!(
                got,
                Reply::Int(count),
                "round {round}: {key} holds strangers"
            );
        }
    }
}

#[test]
fn kill_9_loses_no_acknowledged_set_or_zset_member_on_the_pm_tier() {
    let budget = small_dram_budget(1 << 20);
    let flags: Vec<&str> = ["--appendfsync", "always"]
        .into_iter()
        .chain(budget.iter().map(String::as_str))
        .collect();
    let survivor = Rounds {
        name: "set/zset tier crash test",
        flags: &flags,
        rounds: ROUNDS_DEFAULT,
        clients: CLIENTS,
        seed: 0x2545_f491_4f6c_dd1d,
        kill_ms: 50..350,
    }
    .run(Members::new());
    let mut c = Client::connect(survivor.port).expect("connect");
    let demoted = info_figure(&mut c, "memory", "tier_pm_values");
    let acked = Known::acked(survivor.ledger.values());
    assert!(
        acked > survivor.rounds,
        "too few acknowledged members ({acked})"
    );
    // The replay of the last restart put members on PM, or the run
    // proved nothing about the tier.
    assert!(demoted > 0, "no member on PM after the last restart");
}
