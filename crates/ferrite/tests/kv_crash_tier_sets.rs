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
use std::sync::{Arc, Mutex};

use common::ledger::{Known, ROUNDS_DEFAULT};
use common::{kill_after, start_server, Client, Reply};

const CLIENTS: usize = 4;
/// Bytes of each member: well above the tier's 64-byte threshold.
const MEMBER_BYTES: usize = 2048;

/// (set or sorted-set key, member index) → what the test knows of it.
type Ledger = Arc<Mutex<BTreeMap<(String, usize), Known>>>;

fn member(key: &str, i: usize) -> Vec<u8> {
    let mut m = format!("{key}-{i}-").into_bytes();
    m.resize(MEMBER_BYTES, b'.');
    m
}

/// One client's writes until the connection breaks: SADD to its set and
/// ZADD (score `i`) to its sorted set, one new member each.
fn writer(port: u16, tag: String, ledger: Ledger, stop: Arc<AtomicBool>) {
    let Ok(mut c) = Client::connect(port) else {
        return;
    };
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

/// Checks the restarted server against the ledger, settling the `Maybe`
/// members to what recovery decided, and that each collection holds no
/// member the ledger does not know.
fn verify(port: u16, ledger: &Ledger, round: usize) {
    let mut c = Client::connect(port).expect("connect after restart");
    let mut ledger = ledger.lock().unwrap();
    let mut counts: BTreeMap<String, i64> = BTreeMap::new();
    for ((key, i), known) in ledger.iter_mut() {
        let m = member(key, *i);
        let here = present(&mut c, key, *i, &m);
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

#[test]
fn kill_9_loses_no_acknowledged_set_or_zset_member_on_the_pm_tier() {
    let probe = tempfile::tempdir().unwrap();
    let (mut child, port) = start_server(probe.path(), &[]);
    let empty = info_memory(port, "used_memory");
    let _ = child.kill();
    let _ = child.wait();
    let budget = (empty + (1 << 20)).to_string();
    let flags = [
        "--appendfsync",
        "always",
        "--log-device",
        "file",
        "--maxmemory-dram",
        budget.as_str(),
        "--pm-tier-size",
        "256mb",
    ];
    let rounds = std::env::var("FERRITE_CRASH_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(ROUNDS_DEFAULT);
    let dir = tempfile::tempdir().unwrap();
    let ledger: Ledger = Arc::default();
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d ^ u64::from(std::process::id());
    eprintln!("set/zset tier crash test: {rounds} rounds, seed {seed:#x}");
    for round in 0..rounds {
        let (mut child, port) = start_server(dir.path(), &flags);
        verify(port, &ledger, round);
        let stop = Arc::new(AtomicBool::new(false));
        let threads: Vec<_> = (0..CLIENTS)
            .map(|t| {
                let (ledger, stop) = (Arc::clone(&ledger), Arc::clone(&stop));
                let tag = format!("r{round}c{t}");
                std::thread::spawn(move || writer(port, tag, ledger, stop))
            })
            .collect();
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        kill_after(50 + (seed >> 33) % 300, &mut child, &stop, threads);
    }
    let (mut child, port) = start_server(dir.path(), &flags);
    verify(port, &ledger, rounds);
    let demoted = info_memory(port, "tier_pm_values");
    let _ = child.kill();
    let _ = child.wait();
    let acked = ledger
        .lock()
        .unwrap()
        .values()
        .filter(|k| matches!(k, Known::Acked(_)))
        .count();
    assert!(acked > rounds, "too few acknowledged members ({acked})");
    // The replay of the last restart put members on PM, or the run
    // proved nothing about the tier.
    assert!(demoted > 0, "no member on PM after the last restart");
}
