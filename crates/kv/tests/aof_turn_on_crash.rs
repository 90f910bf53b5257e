//! Crash test of `CONFIG SET appendonly yes` at run time on a simulated
//! file system (`docs/aof-runtime.md`): a fault is injected at every
//! file-system operation of the turn-on sequence (the new log's creation,
//! its records, the first rewrite's parts, its manifest, the removal of
//! the old dataset), and every crash image must load to either the old
//! dataset the directory held before, exactly, or the new one (the
//! keyspace at the turn-on plus every acknowledged command, and at most
//! the one in flight): never the new log without its base.
//!
//! The logs here are plain RESP records after an `LSN <lsn> <commands>`
//! marker (as in `rewrite_crash.rs`): the test is about the directory's
//! states, which the wal does not change.
//!
//! `FERRITE_CRASH_ITERS` sets the crash images tried per fault point.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use common::resp_bytes;
use ferrite_kv::commands::{execute, lookup, touched_segments, Ctx, Propagation, Session};
use ferrite_kv::config::Config;
use ferrite_kv::resp::{Limits, Parser, ReplyBuf};
use ferrite_kv::rewrite::dir::{AofDir, Layout};
use ferrite_kv::rewrite::fs::{FsWriter, RewriteFs, SimFs};
use ferrite_kv::rewrite::load::load_bases;
use ferrite_kv::rewrite::manifest::{IncrEntry, IncrKind, Manifest};
use ferrite_kv::rewrite::pace::{Pacer, DEFAULT_SHARE_PERCENT};
use ferrite_kv::rewrite::turn_on;
use ferrite_kv::rewrite::worker::{write_parts, Progress};
use ferrite_kv::state::State;
use ferrite_kv::types::Value;

const NAME: &str = "appendonly.aof";

type Dump = BTreeMap<Vec<u8>, String>;

fn iters() -> u64 {
    std::env::var("FERRITE_CRASH_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2)
}

fn fresh_state() -> State {
    State::new(Config {
        dir: "/sim".into(),
        databases: 1,
        ..Config::default()
    })
}

/// Runs one command; returns what it logged.
fn run(state: &mut State, args: &[&[u8]]) -> Vec<u8> {
    let input = resp_bytes(args);
    let mut parser = Parser::new();
    let parsed = parser.parse(&input, &Limits::DEFAULT).expect("valid");
    assert!(parsed.is_some());
    let mut session = Session {
        authenticated: true,
        ..Session::default()
    };
    let (mut reply, mut prop) = (ReplyBuf::default(), Propagation::default());
    let mut ctx = Ctx {
        state,
        session: &mut session,
        reply: &mut reply,
        prop: &mut prop,
        busy: None,
    };
    execute(&mut ctx, &parser.args(&input));
    prop.buf
}

/// The `i`-th command of a workload named `tag`: non-idempotent ones, and
/// MSETs across segments (rule C1 of the captures).
fn command(tag: &str, i: u64) -> Vec<String> {
    let key = |n: u64| format!("{tag}{}", n % 29);
    let words = match i % 5 {
        0 => format!("INCR counter{tag}{}", i % 4),
        1 => format!("APPEND {} x{i}", key(i + 3)),
        2 => format!("LPUSH list{} {i}", i % 3),
        3 => format!("MSET {} m{i} {} m{i}", key(i + 5), key(i + 11)),
        _ => format!("SET {} s{i}", key(i + 7)),
    };
    words.split(' ').map(str::to_string).collect()
}

fn run_command(state: &mut State, tag: &str, i: u64) -> Vec<u8> {
    let words = command(tag, i);
    let args: Vec<&[u8]> = words.iter().map(|w| w.as_bytes()).collect();
    run(state, &args)
}

fn dump(state: &State) -> Dump {
    let mut out = Dump::new();
    for seg in state.keyspace.db(0).segments() {
        for (k, v) in &seg.map {
            let text = match v {
                Value::Str(s) => format!("str {s:?}"),
                Value::List(l) => format!("list {:?}", l.iter().collect::<Vec<_>>()),
                _ => "other".to_string(),
            };
            out.insert(k.to_vec(), text);
        }
    }
    out
}

/// Replays marked records up to a torn tail, skipping what the base parts
/// hold, as the server's replay does.
fn replay(state: &mut State, bytes: &[u8]) {
    state.keyspace.loading = true;
    let mut at = 0;
    let number = |b: &[u8]| -> u64 { std::str::from_utf8(b).expect("text").parse().expect("n") };
    loop {
        let mut parser = Parser::new();
        let Ok(Some(n)) = parser.parse(&bytes[at..], &Limits::DEFAULT) else {
            break;
        };
        let marker = parser.args(&bytes[at..]);
        assert_eq!(marker.get(0), b"LSN", "a record starts with its marker");
        let lsn = number(marker.get(1));
        let start = at + n;
        let mut parser = Parser::new();
        let Ok(Some(used)) = parser.parse(&bytes[start..], &Limits::DEFAULT) else {
            break;
        };
        let args = parser.args(&bytes[start..start + used]);
        let spec = lookup(args.get(0))
            .unwrap_or_else(|| panic!("not a command: {:?}", String::from_utf8_lossy(args.get(0))));
        let mut segments = Vec::new();
        touched_segments(spec, &args, 0, state.keyspace.databases(), &mut segments);
        let apply = state
            .keyspace
            .replay_decision(&segments, lsn)
            .unwrap_or_else(|e| panic!("the replay refused a record: {e}"));
        if apply {
            let words: Vec<&[u8]> = args.iter().collect();
            run(state, &words);
        }
        at = start + used;
    }
    state.keyspace.loading = false;
}

/// What a server with `appendonly yes` would load from `fs`.
fn load(fs: &SimFs) -> anyhow::Result<Dump> {
    let dir = AofDir::new(Arc::new(fs.clone()), Path::new("/sim"), NAME);
    let mut state = fresh_state();
    let incrs = match dir.layout()? {
        Layout::Empty => vec![],
        Layout::Legacy(entry) => {
            dir.remove_orphans(None)?;
            vec![entry]
        }
        Layout::Manifest(m) => {
            dir.remove_orphans(Some(&m))?;
            load_bases(&dir, &m, 2, &mut state.keyspace)?;
            m.incrs
        }
    };
    for incr in incrs {
        let bytes = fs.get(&incr.file).expect("named files exist");
        replay(&mut state, &bytes);
    }
    state.keyspace.end_replay_captures();
    Ok(dump(&state))
}

/// The log the commands go to, synced after each (`appendfsync always`).
struct Log {
    out: Box<dyn FsWriter>,
    lsn: u64,
    /// Commands acknowledged, and the one in flight.
    acked: u64,
    pending: Option<u64>,
}

impl Log {
    fn submit(&mut self, state: &mut State, i: u64) -> std::io::Result<()> {
        let logged = run_command(state, "n", 1000 + i);
        assert!(!logged.is_empty(), "every command of the workload writes");
        self.lsn += 1;
        state.keyspace.logged(self.lsn);
        let lsn = self.lsn.to_string();
        let mut record = resp_bytes(&[b"LSN", lsn.as_bytes(), b"1"]);
        record.extend(logged);
        self.pending = Some(i);
        self.out.write_all(&record)?;
        self.out.sync()?;
        self.acked = i + 1;
        self.pending = None;
        Ok(())
    }
}

/// The directory before the turn-on: a manifest of generation 1 (one base
/// part of the old dataset, a log with more of it), as a server that ran
/// with `appendonly yes` leaves it, and an orphan of an older crash.
fn old_directory() -> (SimFs, Dump) {
    let fs = SimFs::new();
    let dir = AofDir::new(Arc::new(fs.clone()), Path::new("/sim"), NAME);
    let mut state = fresh_state();
    for i in 0..40 {
        run_command(&mut state, "o", i);
    }
    let snapshots = state.keyspace.begin_rewrite(1, 0, None);
    state.keyspace.capture_step(true);
    let progress = Arc::new(Progress::default());
    let bases = write_parts(&dir, 1, snapshots, 0, &progress, Pacer::unpaced()).expect("parts");
    let incr = dir.create_incr(1, IncrKind::File).expect("incr");
    let mut log = Vec::new();
    for (lsn, i) in (40..50).enumerate() {
        let lsn = (lsn + 1).to_string();
        log.extend(resp_bytes(&[b"LSN", lsn.as_bytes(), b"1"]));
        let logged = run_command(&mut state, "o", i);
        assert!(!logged.is_empty(), "every command of the workload writes");
        log.extend(logged);
    }
    fs.put(&incr, &log);
    let manifest = Manifest {
        generation: 1,
        bases,
        incrs: vec![IncrEntry {
            file: incr,
            kind: IncrKind::File,
        }],
    };
    dir.write_manifest(&manifest).expect("manifest");
    fs.put("appendonly.aof.7.base.0", b"an orphan of an older crash");
    (fs, dump(&state))
}

/// The turn-on: the new log, commands before, during and after the first
/// rewrite's parts, its manifest, then the old files' removal; stops at
/// the first failed operation.
fn turn_on_sequence(fs: &SimFs, state: &mut State, log: &mut Log) -> anyhow::Result<()> {
    let dir = AofDir::new(Arc::new(fs.clone()), Path::new("/sim"), NAME);
    let started = turn_on::begin(&dir, Some(IncrKind::File))?;
    let incr = started.incr().expect("a new log").file.clone();
    log.out = fs.append(&dir.path(&incr))?;
    log.lsn = state.keyspace.capture_lsn();
    let snapshots = state.keyspace.begin_rewrite(3, log.lsn, None);
    for i in 0..30 {
        if i % 6 == 0 {
            state.keyspace.capture_segments(100);
        }
        log.submit(state, i)?;
    }
    state.keyspace.capture_step(true);
    state.keyspace.publish_superseded();
    let progress = Arc::new(Progress::default());
    let pacer = Pacer::new(DEFAULT_SHARE_PERCENT);
    let parts = write_parts(
        &dir,
        started.started.generation,
        snapshots,
        0,
        &progress,
        pacer,
    )?;
    for i in 30..40 {
        log.submit(state, i)?;
    }
    let done = dir.finish(&started.started, parts)?;
    for i in 40..45 {
        log.submit(state, i)?;
    }
    turn_on::finish(&dir, &started, &done)?;
    for i in 45..50 {
        log.submit(state, i)?;
    }
    Ok(())
}

/// The live keyspace when the log is turned on: not the old dataset (the
/// server ran with `appendonly no` and `dump.rdb` since).
fn live_state() -> State {
    let mut state = fresh_state();
    for i in 0..60 {
        run_command(&mut state, "n", i);
    }
    // With `appendonly no` every command's ticket is 0.
    state.keyspace.logged(0);
    state
}

/// The new dataset after the turn-on's first `n` commands.
fn new_model(n: u64) -> Dump {
    let mut state = live_state();
    for i in 0..n {
        run_command(&mut state, "n", 1000 + i);
    }
    dump(&state)
}

fn one_run(fault: Option<u64>) -> (SimFs, Log, u64) {
    let (fs, _) = old_directory();
    let mut state = live_state();
    let mut log = Log {
        out: fs.create(Path::new("/sim/unused")).expect("set-up"),
        lsn: 0,
        acked: 0,
        pending: None,
    };
    let base = fs.ops();
    fs.fail_at(fault.map(|f| base + f));
    if turn_on_sequence(&fs, &mut state, &mut log).is_err() {
        assert!(fs.failed(), "the turn-on failed without an injected fault");
    }
    let ops = fs.ops() - base;
    (fs, log, ops)
}

#[test]
fn every_fault_point_of_a_turn_on_loads_the_old_dataset_or_the_new_one() {
    let (_, old) = old_directory();
    let (clean, log, total) = one_run(None);
    assert_eq!(log.acked, 50);
    assert_eq!(load(&clean).expect("loads"), new_model(50), "clean run");
    assert!(
        clean.get("appendonly.aof.1.base.0").is_none(),
        "old base removed"
    );
    assert!(
        clean.get("appendonly.aof.1.incr").is_none(),
        "old log removed"
    );
    assert!(
        clean.get("appendonly.aof.7.base.0").is_none(),
        "orphan removed"
    );
    let (mut saw_old, mut saw_new) = (false, false);
    let mut rng = fastrand::Rng::with_seed(0x0a0f);
    for fault in 1..=total {
        let (fs, log, _) = one_run(Some(fault));
        for _ in 0..iters() {
            let seed = rng.u64(..);
            let image = fs.crash_image(seed);
            let got = load(&image)
                .unwrap_or_else(|e| panic!("fault {fault} seed {seed:#x}: load failed: {e:#}"));
            let is_old = got == old;
            let is_new =
                got == new_model(log.acked) || log.pending.is_some_and(|p| got == new_model(p + 1));
            assert!(
                is_old || is_new,
                "fault {fault} seed {seed:#x}: neither the old dataset nor the new one after {} commands",
                log.acked
            );
            saw_old |= is_old;
            saw_new |= is_new;
            let again = load(&image).expect("second load");
            assert_eq!(again, got, "fault {fault} seed {seed:#x}: reload differs");
        }
    }
    assert!(saw_old && saw_new, "crashes on both sides of the manifest");
}
