//! Crash test of `ferrite serve` with scripts and streams: clients run
//! two-key scripts, XADD entries and acknowledge them through a consumer
//! group with `appendfsync always`; the server is killed with SIGKILL at a
//! random moment and restarted. After each restart: every acknowledged
//! script's two keys are there and no script is half applied, every
//! acknowledged XADD ID is in its stream and no ID appears that was never
//! returned or sent, and no acknowledged XACK is pending again.
//! `FERRITE_CRASH_ITERS` sets the rounds.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use common::rounds::{self, Rounds, Who};
use common::{entry_ids, Client, Reply};

const ROUNDS_DEFAULT: usize = 6;
const CLIENTS: usize = 3;

/// Writes both keys, or (killed in between) neither after recovery.
const SCRIPT: &[u8] =
    b"redis.call('SET', KEYS[1], ARGV[1]) redis.call('SET', KEYS[2], ARGV[1]) return 1";

/// One script run: its two keys, the value it writes, and whether it was
/// acknowledged (or, after a restart, found applied).
#[derive(Debug)]
struct ScriptRun {
    a: Vec<u8>,
    b: Vec<u8>,
    value: Vec<u8>,
    acked: bool,
}

/// What the test knows, across rounds.
#[derive(Debug, Default)]
struct Ledger {
    scripts: Vec<ScriptRun>,
    /// Per stream: IDs XADD acknowledged.
    added: BTreeMap<Vec<u8>, BTreeSet<Vec<u8>>>,
    /// Per stream: XADDs sent whose reply was lost (their ID unknown).
    unknown_adds: BTreeMap<Vec<u8>, usize>,
    /// Per stream: IDs whose XACK was acknowledged.
    acked: BTreeMap<Vec<u8>, BTreeSet<Vec<u8>>>,
}

fn bulk(reply: &Reply) -> Option<Vec<u8>> {
    match reply {
        Reply::Bulk(Some(v)) => Some(v.clone()),
        _ => None,
    }
}

/// Runs the two-key script as step `i` of client `tag`, noted in the
/// ledger before it is sent and acknowledged once it returns; false once
/// the connection breaks.
fn run_script(c: &mut Client, ledger: &Mutex<Ledger>, tag: &str, i: usize) -> bool {
    let (a, b) = (format!("{tag}:{i}:a"), format!("{tag}:{i}:b"));
    let value = format!("v-{tag}-{i}").into_bytes();
    let at = {
        let mut l = ledger.lock().unwrap();
        l.scripts.push(ScriptRun {
            a: a.clone().into_bytes(),
            b: b.clone().into_bytes(),
            value: value.clone(),
            acked: false,
        });
        l.scripts.len() - 1
    };
    match c.call(&[b"EVAL", SCRIPT, b"2", a.as_bytes(), b.as_bytes(), &value]) {
        Ok(Reply::Int(1)) => ledger.lock().unwrap().scripts[at].acked = true,
        _ => return false,
    }
    true
}

/// Adds entry `i` to `stream` (in doubt until its ID comes back), reads
/// it through the group and acknowledges it, noting the acknowledged XACK;
/// false once the connection breaks.
fn add_read_ack(c: &mut Client, ledger: &Mutex<Ledger>, stream: &[u8], i: usize) -> bool {
    *ledger
        .lock()
        .unwrap()
        .unknown_adds
        .entry(stream.to_vec())
        .or_default() += 1;
    let id = match c.call(&[b"XADD", stream, b"*", b"n", i.to_string().as_bytes()]) {
        Ok(reply) => match bulk(&reply) {
            Some(id) => id,
            None => return false,
        },
        Err(_) => return false,
    };
    {
        let mut l = ledger.lock().unwrap();
        *l.unknown_adds.entry(stream.to_vec()).or_default() -= 1;
        l.added
            .entry(stream.to_vec())
            .or_default()
            .insert(id.clone());
    }
    let read = c.call(&[
        b"XREADGROUP",
        b"GROUP",
        b"g",
        b"c",
        b"COUNT",
        b"1",
        b"STREAMS",
        stream,
        b">",
    ]);
    if read.is_err() {
        return false;
    }
    match c.call(&[b"XACK", stream, b"g", &id]) {
        Ok(Reply::Int(1)) => {
            let mut l = ledger.lock().unwrap();
            l.acked.entry(stream.to_vec()).or_default().insert(id);
            true
        }
        Ok(_) => true,
        Err(_) => false,
    }
}

impl rounds::Ledger for Ledger {
    /// One client's work until the connection breaks.
    fn client(ledger: &Mutex<Ledger>, port: u16, who: Who, stop: &AtomicBool) {
        let Ok(mut c) = Client::connect(port) else {
            return;
        };
        let tag = who.tag();
        let stream = format!("stream:{tag}").into_bytes();
        if !matches!(
            c.call(&[b"XGROUP", b"CREATE", &stream, b"g", b"0", b"MKSTREAM"]),
            Ok(Reply::Simple(_))
        ) {
            return;
        }
        for i in 0.. {
            if stop.load(Ordering::Relaxed)
                || !run_script(&mut c, ledger, &tag, i)
                || !add_read_ack(&mut c, ledger, &stream, i)
            {
                return;
            }
        }
    }

    /// Every acknowledged script's keys are there and no script is half
    /// applied; every acknowledged XADD ID is in its stream, no entry appears
    /// beyond the XADDs in doubt, and no acknowledged XACK is pending again.
    fn verify(&mut self, c: &mut Client, round: usize) {
        let l = self;
        for run in l.scripts.iter_mut() {
            let ScriptRun { a, b, value, acked } = run;
            let got_a = bulk(&c.call(&[b"GET", a]).unwrap());
            let got_b = bulk(&c.call(&[b"GET", b]).unwrap());
            assert_eq!(got_a, got_b, "round {round}: a script was half applied");
            if *acked {
                assert_eq!(
                    got_a.as_ref(),
                    Some(&*value),
                    "round {round}: acknowledged script lost"
                );
            } else {
                assert!(got_a.is_none() || got_a.as_ref() == Some(&*value));
                // Settled: present now means it stays.
                *acked = got_a.is_some();
            }
        }
        let streams: Vec<Vec<u8>> = l
            .added
            .keys()
            .chain(l.unknown_adds.keys())
            .cloned()
            .collect();
        for stream in streams {
            let present = entry_ids(c.call(&[b"XRANGE", &stream, b"-", b"+"]).unwrap());
            let added = l.added.get(&stream).cloned().unwrap_or_default();
            for id in &added {
                assert!(
                    present.contains(id),
                    "round {round}: acknowledged XADD lost"
                );
            }
            let extra = present.difference(&added).count();
            let unknown = l.unknown_adds.get(&stream).copied().unwrap_or(0);
            assert!(
                extra <= unknown,
                "round {round}: an entry appeared that was never added"
            );
            // What recovery kept of the unknown adds is now known.
            l.added.insert(stream.clone(), present);
            l.unknown_adds.insert(stream.clone(), 0);
            let pending = entry_ids(
                c.call(&[b"XPENDING", &stream, b"g", b"-", b"+", b"1000000"])
                    .unwrap(),
            );
            for id in l.acked.get(&stream).into_iter().flatten() {
                assert!(
                    !pending.contains(id),
                    "round {round}: an acknowledged XACK is pending again"
                );
            }
        }
    }
}

#[test]
fn kill_9_keeps_acknowledged_scripts_stream_entries_and_acks() {
    let survivor = Rounds {
        name: "script and stream crash test",
        flags: &["--appendfsync", "always", "--log-device", "file"],
        rounds: ROUNDS_DEFAULT,
        clients: CLIENTS,
        seed: 0x2545_f491_4f6c_dd1d,
        kill_ms: 30..280,
    }
    .run(Ledger::default());
    let (l, rounds) = (&survivor.ledger, survivor.rounds);
    let acked_scripts = l.scripts.iter().filter(|s| s.acked).count();
    let acked_acks: usize = l.acked.values().map(BTreeSet::len).sum();
    assert!(
        acked_scripts > rounds && acked_acks > rounds,
        "too little acknowledged work ({acked_scripts} scripts, {acked_acks} acks) to mean anything"
    );
}
