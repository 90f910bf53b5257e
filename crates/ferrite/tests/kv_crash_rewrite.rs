//! kill -9 of the real `ferrite serve` binary while log rewrites run all the
//! time: `appendfsync always`, an automatic rewrite at every 1 % of growth
//! and a client sending BGREWRITEAOF in a loop, so the kill lands before,
//! during and after rewrites (log switch, parts, manifest, clean-up).
//! Concurrent clients issue commands whose effect depends on how often they
//! ran (INCR, APPEND, LPUSH, and INCR with LPUSH in one MULTI/EXEC, whose
//! keys lie in different segments) plus SET; after every restart the dataset must
//! be exactly the acknowledged commands, plus at most each client's one
//! command in flight at the kill. Runs for the file log, the emulated-PM
//! log and the log on a write buffer (each new log with its own buffer);
//! `FERRITE_CRASH_ITERS` sets the rounds per device.

mod common;

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use common::rounds::{Ledger, Rounds, Who};
use common::{free_port, Client, Reply};

/// Rounds per device when `FERRITE_CRASH_ITERS` is not set: about 25 s per
/// device on two shared cores with a debug build.
const ROUNDS_DEFAULT: usize = 10;
const CLIENTS: usize = 3;
/// Keys written once before the first round, so a rewrite has enough to
/// do that kills land inside it, and several captures (of about 4096 keys
/// each) for its transactions to straddle.
const FILLER_KEYS: usize = 20_000;

/// The command a client had sent when its connection broke.
#[derive(Clone, Copy, Debug, PartialEq)]
enum InFlight {
    Incr,
    Append(u64),
    Lpush(u64),
    Set(u64),
    /// MULTI, INCR, LPUSH, EXEC: both or neither.
    IncrPush(u64),
}

/// What one client's acknowledged commands imply about its keys.
#[derive(Clone, Debug, Default)]
struct Model {
    counter: i64,
    appended: Vec<u8>,
    /// Newest first, as LRANGE returns an LPUSHed list.
    list: Vec<Vec<u8>>,
    set: Option<Vec<u8>>,
    in_flight: Option<InFlight>,
    /// The sequence number the next command uses.
    next: u64,
}

fn token(n: u64) -> Vec<u8> {
    format!("{n},").into_bytes()
}

/// What the clients' acknowledged commands imply, one [`Model`] a client,
/// and how many rewrites the rewrite client saw complete.
#[derive(Debug, Default)]
struct Models {
    models: Vec<Model>,
    rewrites: u64,
    /// Whether the filler keys were written (before the first check).
    filled: bool,
}

fn keys(client: usize) -> [Vec<u8>; 4] {
    ["cnt", "app", "list", "set"].map(|k| format!("{k}:{client}").into_bytes())
}

/// One client's commands until its connection breaks.
fn worker(port: u16, client: usize, ledger: &Mutex<Models>, stop: &AtomicBool) {
    let Ok(mut c) = Client::connect(port) else {
        return;
    };
    let [cnt, app, list, set] = keys(client);
    while !stop.load(Ordering::Relaxed) {
        let n = ledger.lock().unwrap().models[client].next;
        let op = match n % 5 {
            0 => InFlight::Incr,
            1 => InFlight::Append(n),
            2 => InFlight::Lpush(n),
            3 => InFlight::IncrPush(n),
            _ => InFlight::Set(n),
        };
        ledger.lock().unwrap().models[client].in_flight = Some(op);
        let value = token(n);
        let reply = match op {
            InFlight::Incr => c.call(&[b"INCR", &cnt]),
            InFlight::Append(_) => c.call(&[b"APPEND", &app, &value]),
            InFlight::Lpush(_) => c.call(&[b"LPUSH", &list, &value]),
            InFlight::Set(_) => c.call(&[b"SET", &set, &value]),
            InFlight::IncrPush(_) => c
                .call(&[b"MULTI"])
                .and_then(|_| c.call(&[b"INCR", &cnt]))
                .and_then(|_| c.call(&[b"LPUSH", &list, &value]))
                .and_then(|_| c.call(&[b"EXEC"])),
        };
        let Ok(reply) = reply else {
            return;
        };
        let mut l = ledger.lock().unwrap();
        let m = &mut l.models[client];
        match (op, reply) {
            (InFlight::Incr, Reply::Int(v)) => {
                assert_eq!(v, m.counter + 1, "client {client}: INCR reply");
                m.counter = v;
            }
            (InFlight::Append(_), Reply::Int(len)) => {
                m.appended.extend_from_slice(&value);
                assert_eq!(len as usize, m.appended.len(), "client {client}: APPEND");
            }
            (InFlight::Lpush(_), Reply::Int(len)) => {
                m.list.insert(0, value);
                assert_eq!(len as usize, m.list.len(), "client {client}: LPUSH");
            }
            (InFlight::Set(_), Reply::Simple(ok)) if ok == "OK" => m.set = Some(value),
            (InFlight::IncrPush(_), Reply::Array(items)) => {
                m.counter += 1;
                m.list.insert(0, value);
                let want = [m.counter, m.list.len() as i64].map(Reply::Int);
                assert_eq!(items, want, "client {client}: MULTI/EXEC");
            }
            (op, other) => panic!("client {client}: {op:?} answered {other:?}"),
        }
        m.in_flight = None;
        m.next += 1;
    }
}

fn get(c: &mut Client, args: &[&[u8]]) -> Reply {
    c.call(args).expect("query after restart")
}

/// Checks client `client`'s keys on the restarted server against its model,
/// then settles the command that was in flight to what recovery decided.
fn verify_client(c: &mut Client, client: usize, m: &mut Model, round: usize) {
    let [cnt, app, list, set] = keys(client);
    let at = format!("round {round}, client {client}");
    let flight = m.in_flight.take();
    let counter = match get(c, &[b"GET", &cnt]) {
        Reply::Bulk(None) => 0,
        Reply::Bulk(Some(v)) => String::from_utf8(v).unwrap().parse::<i64>().unwrap(),
        other => panic!("{at}: GET counter {other:?}"),
    };
    let both = matches!(flight, Some(InFlight::IncrPush(_)));
    let extra = i64::from(flight == Some(InFlight::Incr) || both);
    assert!(
        counter == m.counter || counter == m.counter + extra,
        "{at}: counter {counter}, acknowledged INCRs {} (in flight {flight:?})",
        m.counter
    );
    let applied_incr = counter != m.counter;
    m.counter = counter;

    let appended = match get(c, &[b"GET", &app]) {
        Reply::Bulk(v) => v.unwrap_or_default(),
        other => panic!("{at}: GET append {other:?}"),
    };
    let mut with = m.appended.clone();
    if let Some(InFlight::Append(n)) = flight {
        with.extend_from_slice(&token(n));
    }
    assert!(
        appended == m.appended || appended == with,
        "{at}: APPEND holds {:?}, acknowledged {:?}",
        String::from_utf8_lossy(&appended),
        String::from_utf8_lossy(&m.appended)
    );
    let applied_append = appended != m.appended;
    m.appended = appended;

    let Reply::Array(items) = get(c, &[b"LRANGE", &list, b"0", b"-1"]) else {
        panic!("{at}: LRANGE failed")
    };
    let got: Vec<Vec<u8>> = items
        .into_iter()
        .map(|i| match i {
            Reply::Bulk(Some(v)) => v,
            other => panic!("{at}: list item {other:?}"),
        })
        .collect();
    let mut with = m.list.clone();
    if let Some(InFlight::Lpush(n) | InFlight::IncrPush(n)) = flight {
        with.insert(0, token(n));
    }
    assert!(
        got == m.list || got == with,
        "{at}: list has {} items, acknowledged {}",
        got.len(),
        m.list.len()
    );
    let applied_push = got != m.list;
    m.list = got;

    let value = match get(c, &[b"GET", &set]) {
        Reply::Bulk(v) => v,
        other => panic!("{at}: GET set {other:?}"),
    };
    let flight_set = match flight {
        Some(InFlight::Set(n)) => Some(token(n)),
        _ => None,
    };
    assert!(
        value == m.set || (flight_set.is_some() && value == flight_set),
        "{at}: SET key holds {value:?}, acknowledged {:?}",
        m.set
    );
    let applied_set = value != m.set;
    m.set = value;
    // A command that did not run may run later under the same number only
    // if it was lost; either way the next one gets a fresh number.
    if flight.is_some() {
        m.next += 1;
    }
    if both {
        assert_eq!(applied_incr, applied_push, "{at}: half a transaction");
    }
    let applied = [applied_incr, applied_append, applied_push, applied_set];
    assert!(
        applied.iter().filter(|a| **a).count() <= 1 + usize::from(both),
        "{at}: two in flight"
    );
}

impl Ledger for Models {
    /// Clients below [`CLIENTS`] run [`worker`]; the last one asks for
    /// rewrites all the time.
    fn client(ledger: &Mutex<Models>, port: u16, who: Who, stop: &AtomicBool) {
        if who.client < CLIENTS {
            worker(port, who.client, ledger, stop);
        } else {
            rewrite_loop(port, ledger, stop);
        }
    }

    /// Fills the keyspace at the first start; then checks every client's
    /// keys against its model, and that no other key appeared.
    fn verify(&mut self, c: &mut Client, round: usize) {
        if !self.filled {
            fill(c);
            self.filled = true;
        }
        for (client, model) in self.models.iter_mut().enumerate() {
            verify_client(c, client, model, round);
        }
        dbsize_is_ours(c, round);
    }
}

/// The server holds the filler keys and the clients' keys, no others.
fn dbsize_is_ours(c: &mut Client, round: usize) {
    match get(c, &[b"DBSIZE"]) {
        Reply::Int(n) => {
            let ours = (n as usize).saturating_sub(FILLER_KEYS);
            assert!(
                ours <= CLIENTS * 4,
                "round {round}: {n} keys, never written"
            );
        }
        other => panic!("DBSIZE {other:?}"),
    }
}

/// Fills the keyspace so that a rewrite takes a while.
fn fill(c: &mut Client) {
    for i in 0..FILLER_KEYS {
        c.send(&[b"SET", format!("filler:{i}").as_bytes(), &[b'x'; 64]])
            .expect("send");
    }
    for _ in 0..FILLER_KEYS {
        assert_eq!(c.read().expect("reply"), Reply::Simple("OK".into()));
    }
}

/// Asks for a rewrite every few milliseconds and counts the completed ones.
fn rewrite_loop(port: u16, ledger: &Mutex<Models>, stop: &AtomicBool) {
    let Ok(mut c) = Client::connect(port) else {
        return;
    };
    let mut seen = 0;
    while !stop.load(Ordering::Relaxed) {
        if c.call(&[b"BGREWRITEAOF"]).is_err() {
            return;
        }
        let Ok(Reply::Bulk(Some(info))) = c.call(&[b"INFO", b"persistence"]) else {
            return;
        };
        let text = String::from_utf8_lossy(&info).into_owned();
        let rewrites = text
            .lines()
            .find_map(|l| l.strip_prefix("aof_rewrites:"))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0);
        ledger.lock().unwrap().rewrites += rewrites.saturating_sub(seen);
        seen = seen.max(rewrites);
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn crash_rounds(device: &str) {
    // Rewrites as often as the server allows, so kills land inside them.
    let flags = [
        "--appendfsync",
        "always",
        "--log-device",
        device,
        "--auto-aof-rewrite-percentage",
        "1",
        "--auto-aof-rewrite-min-size",
        "1",
        "--aof-rewrite-threads",
        "2",
        "--hz",
        "50",
    ];
    let name = format!("rewrite crash test on {device}");
    let survivor = Rounds {
        name: &name,
        flags: &flags,
        rounds: ROUNDS_DEFAULT,
        // One more than the writers: the client asking for rewrites.
        clients: CLIENTS + 1,
        seed: 0x2545_f491_4f6c_dd1d,
        kill_ms: 100..1000,
    }
    .run(Models {
        models: vec![Model::default(); CLIENTS],
        ..Models::default()
    });
    let (acked, rewrites): (i64, u64) = (
        survivor.ledger.models.iter().map(|m| m.counter).sum(),
        survivor.ledger.rewrites,
    );
    eprintln!("{device}: {rewrites} rewrites completed, {acked} INCRs survived");
    assert!(
        acked > survivor.rounds as i64,
        "too few acknowledged INCRs ({acked})"
    );
    assert!(
        rewrites >= 1,
        "no rewrite completed: the test tested nothing"
    );
    let dir = survivor.stop();
    let manifest = std::fs::read_to_string(dir.path().join("appendonly.aof.manifest"))
        .expect("a rewrite leaves a manifest");
    assert!(manifest.starts_with("ferrite-aof-manifest"), "{manifest}");
    // The log of a PM directory is named and recorded as PM, and a server
    // asked to use the other kind of device refuses to start on it.
    let (want, other) = match device {
        "file" => (" file", "pmem-emulated"),
        "wbuf" => (".wbuf wbuf", "file"),
        _ => (".pm pm", "file"),
    };
    let incrs: Vec<&str> = manifest
        .lines()
        .filter(|l| l.starts_with("incr "))
        .collect();
    assert!(incrs.iter().all(|l| l.ends_with(want)), "{manifest}");
    let refused = Command::new(env!("CARGO_BIN_EXE_ferrite"))
        .args(["serve", "--port", &free_port().to_string(), "--dir"])
        .arg(dir.path())
        .args(["--log-device", other])
        .output()
        .expect("ferrite runs");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "started on the wrong device");
    assert!(stderr.contains("use the matching log-device"), "{stderr}");
}

#[test]
fn kill_9_during_rewrites_loses_nothing_file_log() {
    crash_rounds("file");
}

#[test]
fn kill_9_during_rewrites_loses_nothing_emulated_pm_log() {
    crash_rounds("pmem-emulated");
}

#[test]
fn kill_9_during_rewrites_loses_nothing_wbuf_log() {
    crash_rounds("wbuf");
}
