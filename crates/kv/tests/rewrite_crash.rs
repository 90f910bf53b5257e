//! Crash tests of the rewrite's directory state machine on a simulated
//! file system: a fault is injected at every file-system operation of a
//! rewrite (each create, write, fsync, rename, remove, directory fsync),
//! while non-idempotent commands (INCR, APPEND, LPUSH...) keep arriving
//! before, during and after it. Every crash image must load to exactly
//! the acknowledged commands (plus, at most, the one in flight).
//!
//! The same runs with a log synced only where the server must sync it
//! (`appendfsync everysec` or `no`: at the log switch, and before a
//! manifest naming parts that left superseded keys out) must load to the
//! state after some prefix of the commands, at least those synced.
//!
//! `FERRITE_CRASH_ITERS` sets the crash images tried per fault point.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use common::resp_bytes;
use ferrite_kv::commands::{execute, lookup, touched_segments, Ctx, Propagation, Session};
use ferrite_kv::config::Config;
use ferrite_kv::keyspace::Snapshot;
use ferrite_kv::resp::{Limits, Parser, ReplyBuf};
use ferrite_kv::rewrite::dir::{AofDir, Layout};
use ferrite_kv::rewrite::fs::{FsWriter, RewriteFs, SimFs};
use ferrite_kv::rewrite::load::load_bases;
use ferrite_kv::rewrite::manifest::{BaseEntry, IncrKind, Manifest};
use ferrite_kv::rewrite::pace::{Pacer, DEFAULT_SHARE_PERCENT};
use ferrite_kv::rewrite::worker::{rewrite_and_finish, write_parts, Progress};
use ferrite_kv::state::State;
use ferrite_kv::types::Value;

const NAME: &str = "appendonly.aof";

/// Commands the replays skipped because a base part held them already.
static SKIPPED: AtomicUsize = AtomicUsize::new(0);

fn iters() -> u64 {
    std::env::var("FERRITE_CRASH_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2)
}

/// Runs one command in database 0; returns what it logged.
fn run(state: &mut State, args: &[&[u8]]) -> Vec<u8> {
    run_in(state, 0, args)
}

/// The i-th command of the workload: non-idempotent ones included.
fn command(i: u64) -> Vec<Vec<u8>> {
    let key = format!("k{}", i % 37).into_bytes();
    // Reads of a key into another one and database swaps, both between a
    // rewrite's snapshot and later SETs of the same keys: such keys must
    // stay in the base parts (`keyspace/supersede.rs`).
    if i % 61 == 20 {
        return vec![b"SWAPDB".to_vec(), b"0".to_vec(), b"1".to_vec()];
    }
    if i % 13 == 11 {
        let read = format!("k{}", (i + 18) % 37).into_bytes();
        return vec![b"RENAME".to_vec(), read, format!("r{}", i % 5).into_bytes()];
    }
    // Commands naming keys in several segments, which a rewrite that
    // captures segments one at a time must keep on one side of every
    // capture (`keyspace/capture.rs`).
    let words =
        |text: String| -> Vec<Vec<u8>> { text.split(' ').map(|w| w.as_bytes().to_vec()).collect() };
    match i % 17 {
        3 => return words(format!("MSET k{} m{i} k{} m{i}", i % 37, (i + 7) % 37)),
        6 => return words(format!("SMOVE set set{} {}", i % 3, i % 11)),
        9 => return words(format!("SINTERSTORE k{} set set{}", i % 37, i % 3)),
        12 => return words(format!("SUNIONSTORE set{} set set{}", i % 3, (i + 1) % 3)),
        _ => {}
    }
    if i % 97 == 50 {
        return words("FLUSHDB".to_string());
    }
    if i % 151 == 75 {
        return words("FLUSHALL".to_string());
    }
    let words: Vec<Vec<u8>> = match i % 7 {
        0 => vec![b"SET".to_vec(), key, format!("v{i}").into_bytes()],
        1 => vec![b"INCR".to_vec(), format!("n{}", i % 5).into_bytes()],
        2 => vec![
            b"APPEND".to_vec(),
            format!("s{}", i % 6).into_bytes(),
            b"x".to_vec(),
        ],
        3 => vec![
            b"LPUSH".to_vec(),
            format!("l{}", i % 4).into_bytes(),
            format!("{i}").into_bytes(),
        ],
        4 => vec![
            b"HINCRBY".to_vec(),
            b"h".to_vec(),
            format!("f{}", i % 3).into_bytes(),
            b"2".to_vec(),
        ],
        5 => vec![
            b"ZINCRBY".to_vec(),
            b"z".to_vec(),
            b"1.5".to_vec(),
            format!("m{}", i % 3).into_bytes(),
        ],
        _ => vec![
            b"SADD".to_vec(),
            b"set".to_vec(),
            format!("{}", i % 11).into_bytes(),
        ],
    };
    words
}

/// Runs command `i` (a transaction of several for some `i`) as the record
/// with LSN `i + 1`; returns what it logged, after an `LSN` marker that
/// only this test's replay knows ([`replay_resp`]).
fn exec(state: &mut State, i: u64) -> Vec<u8> {
    let logged = if i % 23 == 8 {
        let words: [&[u8]; 3] = [b"INCR", b"k1", b"t"];
        let commands = vec![
            command(i),
            vec![
                b"APPEND".to_vec(),
                format!("k{}", (i + 3) % 37).into_bytes(),
                b"t".to_vec(),
            ],
            words.iter().map(|w| w.to_vec()).take(2).collect(),
        ];
        run_transaction(state, &commands)
    } else {
        let words = command(i);
        let args: Vec<&[u8]> = words.iter().map(Vec::as_slice).collect();
        run(state, &args)
    };
    state.keyspace.logged(i + 1);
    let (lsn, commands) = ((i + 1).to_string(), count_commands(&logged).to_string());
    let mut out = resp_bytes(&[b"LSN", lsn.as_bytes(), commands.as_bytes()]);
    out.extend(logged);
    out
}

/// Complete RESP commands at the start of `bytes`.
fn count_commands(bytes: &[u8]) -> usize {
    let (mut at, mut n) = (0, 0);
    let mut parser = Parser::new();
    while let Ok(Some(used)) = parser.parse(&bytes[at..], &Limits::DEFAULT) {
        at += used;
        n += 1;
    }
    n
}

/// Runs `commands` between MULTI and EXEC in one session; returns what
/// the transaction logged.
fn run_transaction(state: &mut State, commands: &[Vec<Vec<u8>>]) -> Vec<u8> {
    let mut session = Session {
        authenticated: true,
        ..Session::default()
    };
    let (mut reply, mut prop) = (ReplyBuf::default(), Propagation::default());
    let mut all = vec![vec![b"MULTI".to_vec()]];
    all.extend(commands.iter().cloned());
    all.push(vec![b"EXEC".to_vec()]);
    for words in &all {
        let args: Vec<&[u8]> = words.iter().map(Vec::as_slice).collect();
        let input = resp_bytes(&args);
        let mut parser = Parser::new();
        parser.parse(&input, &Limits::DEFAULT).expect("valid");
        let mut ctx = Ctx {
            state: &mut *state,
            session: &mut session,
            reply: &mut reply,
            prop: &mut prop,
            busy: None,
        };
        execute(&mut ctx, &parser.args(&input));
    }
    prop.buf
}

/// A canonical dump of every key, for comparing states.
fn dump(state: &State) -> BTreeMap<(usize, Vec<u8>), String> {
    let mut out = BTreeMap::new();
    for db in 0..state.keyspace.databases() {
        for seg in state.keyspace.db(db).segments() {
            for (k, v) in &seg.map {
                let text = match v {
                    Value::Str(s) => format!("str {s:?}"),
                    Value::List(l) => format!("list {:?}", l.iter().collect::<Vec<_>>()),
                    Value::Hash(h) => format!("hash {:?}", h.iter().collect::<BTreeMap<_, _>>()),
                    Value::Set(s) => format!(
                        "set {:?}",
                        s.iter().collect::<std::collections::BTreeSet<_>>()
                    ),
                    Value::ZSet(z) => format!("zset {:?}", z.iter().collect::<Vec<_>>()),
                    Value::Stream(s) => format!("stream {s:?}"),
                };
                let ttl = seg.expires.get(k);
                out.insert((db, k.to_vec()), format!("{text} ttl {ttl:?}"));
            }
        }
    }
    out
}

fn fresh_state() -> State {
    State::new(Config {
        dir: "/sim".into(),
        databases: 2,
        ..Config::default()
    })
}

/// Replays raw RESP records up to a torn tail, skipping the commands the
/// base parts already hold as the server's replay does. (The server's
/// incremental logs are wal files, which keep a record whole or drop it;
/// this test is about the directory's states, so its logs are plain RESP,
/// each record after a marker `LSN <lsn> <commands>`.)
fn replay_resp(state: &mut State, bytes: &[u8]) {
    state.keyspace.loading = true;
    let mut at = 0;
    let number = |b: &[u8]| -> u64 {
        std::str::from_utf8(b)
            .expect("text")
            .parse()
            .expect("a number")
    };
    loop {
        let mut parser = Parser::new();
        let Ok(Some(n)) = parser.parse(&bytes[at..], &Limits::DEFAULT) else {
            break;
        };
        let marker = parser.args(&bytes[at..]);
        assert_eq!(marker.get(0), b"LSN", "a record starts with its marker");
        let (lsn, commands) = (number(marker.get(1)), number(marker.get(2)) as usize);
        at += n;
        let mut ends = Vec::with_capacity(commands);
        let mut end = at;
        while ends.len() < commands {
            let Ok(Some(used)) = parser.parse(&bytes[end..], &Limits::DEFAULT) else {
                break;
            };
            end += used;
            ends.push(end);
        }
        if ends.len() < commands {
            break;
        }
        for end in ends {
            parser
                .parse(&bytes[at..end], &Limits::DEFAULT)
                .expect("parsed before");
            replay_command(state, &parser.args(&bytes[at..end]), lsn);
            at = end;
        }
    }
    state.keyspace.loading = false;
}

/// Runs one replayed command unless the base parts hold it already.
fn replay_command(state: &mut State, args: &ferrite_kv::resp::Args<'_>, lsn: u64) {
    {
        let spec = lookup(args.get(0)).expect("a logged command");
        let mut segments = Vec::new();
        touched_segments(spec, args, 0, state.keyspace.databases(), &mut segments);
        let apply = state
            .keyspace
            .replay_decision(&segments, lsn)
            .unwrap_or_else(|e| panic!("the replay refused a record: {e}"));
        if apply {
            let words: Vec<&[u8]> = args.iter().collect();
            run(state, &words);
        } else {
            SKIPPED.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// What the server would load from `fs`: bases in parallel, then the logs.
fn load(fs: &SimFs) -> anyhow::Result<State> {
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
        replay_resp(&mut state, &bytes);
    }
    state.keyspace.end_replay_captures();
    Ok(state)
}

/// The log the commands go to: acknowledged once written, and synced
/// after each command when `sync_each` (`appendfsync always`).
struct Log {
    out: Box<dyn FsWriter>,
    sync_each: bool,
    acked: u64,
    /// Commands known durable.
    synced: u64,
    pending: Option<u64>,
}

impl Log {
    fn submit(&mut self, state: &mut State, i: u64) -> std::io::Result<()> {
        let record = exec(state, i);
        self.pending = Some(i);
        self.out.write_all(&record)?;
        if self.sync_each {
            self.sync()?;
        }
        self.acked = i + 1;
        self.pending = None;
        Ok(())
    }

    fn sync(&mut self) -> std::io::Result<()> {
        self.out.sync()?;
        self.synced = self.pending.map_or(self.acked, |p| p + 1);
        Ok(())
    }
}

/// One rewrite with commands before, during (after the snapshot, before
/// the parts), between the new manifest and the removal of the replaced
/// files, and after; stops at the first failed operation.
fn scenario(fs: &SimFs, state: &mut State, log: &mut Log, first: u64) -> anyhow::Result<()> {
    let dir = AofDir::new(Arc::new(fs.clone()), Path::new("/sim"), NAME);
    let current = match dir.layout()? {
        Layout::Legacy(entry) => Manifest {
            generation: 0,
            bases: vec![],
            incrs: vec![entry],
        },
        Layout::Manifest(m) => m,
        Layout::Empty => anyhow::bail!("set-up wrote a log"),
    };
    // The server makes the current log durable before the switch.
    log.sync()?;
    let started = dir.start(&current, IncrKind::File)?;
    let incr = started.incrs.last().expect("named").file.clone();
    log.out = fs.append(&dir.path(&incr))?;
    // The segments are captured a few at a time between the commands,
    // as the event loop does for its workers; the rest once they have run.
    let lsn = state.keyspace.capture_lsn();
    let snapshots = state.keyspace.begin_rewrite(3, lsn, None);
    for i in first..first + 40 {
        if (i - first).is_multiple_of(8) {
            state.keyspace.capture_segments(150);
        }
        log.submit(state, i)?;
    }
    state.keyspace.capture_step(true);
    // The loop hands the workers the keys those commands superseded once
    // their records are appended (the SETs among them).
    state.keyspace.publish_superseded();
    let progress = Arc::new(Progress::default());
    let parts = parts(&dir, started.generation, snapshots, &progress)?;
    for i in first + 40..first + 60 {
        log.submit(state, i)?;
    }
    // As `rewrite_and_finish`: the parts are named only once the log
    // holding every record up to their captures (and the SETs of the keys
    // they left out) is durable.
    log.sync()?;
    let done = dir.finish(&started, parts)?;
    // The server reports the rewrite done here and goes on serving while
    // the rewrite thread removes the replaced files.
    for i in first + 60..first + 65 {
        log.submit(state, i)?;
    }
    dir.remove_replaced(&started, &done)?;
    for i in first + 65..first + 70 {
        log.submit(state, i)?;
    }
    Ok(())
}

/// The workers' step of a rewrite, at the default pace.
fn parts(
    dir: &AofDir,
    generation: u64,
    snapshots: Vec<Snapshot>,
    progress: &Arc<Progress>,
) -> ferrite_kv::Result<Vec<BaseEntry>> {
    let pacer = Pacer::new(DEFAULT_SHARE_PERCENT);
    write_parts(dir, generation, snapshots, 0, progress, pacer)
}

/// The expected state after commands `0..n`.
fn model(n: u64) -> BTreeMap<(usize, Vec<u8>), String> {
    let mut state = fresh_state();
    (0..n).for_each(|i| {
        exec(&mut state, i);
    });
    dump(&state)
}

/// A file system holding a legacy log with `n` commands, and the state.
fn setup(n: u64) -> (SimFs, State) {
    let fs = SimFs::new();
    let mut state = fresh_state();
    let mut bytes = Vec::new();
    for i in 0..n {
        bytes.extend(exec(&mut state, i));
    }
    fs.put(NAME, &bytes);
    fs.put("appendonly.aof.9.base.0", b"an orphan from an older crash");
    (fs, state)
}

fn one_run(fault: Option<u64>, rounds: u64, sync_each: bool) -> (SimFs, Log, u64) {
    let (fs, mut state) = setup(200);
    let sink = fs.create(Path::new("/sim/unused")).expect("set-up");
    let mut log = Log {
        out: sink,
        sync_each,
        acked: 200,
        synced: 200,
        pending: None,
    };
    let base = fs.ops();
    fs.fail_at(fault.map(|f| base + f));
    for round in 0..rounds {
        if scenario(&fs, &mut state, &mut log, 200 + round * 70).is_err() {
            assert!(fs.failed(), "a rewrite failed without an injected fault");
            break;
        }
    }
    let ops = fs.ops() - base;
    (fs, log, ops)
}

#[test]
fn every_fault_point_of_two_rewrites_recovers_exactly() {
    every_fault_point(true);
}

#[test]
fn with_a_lazily_synced_log_every_fault_point_recovers_a_prefix() {
    every_fault_point(false);
}

/// Runs two rewrites with a fault at each file operation in turn, then
/// loads crash images of each run: with a log synced per command they must
/// hold exactly the acknowledged commands (or those and the one in
/// flight); otherwise the commands up to some point at or after the last
/// sync.
fn every_fault_point(sync_each: bool) {
    let (clean, log, total) = one_run(None, 2, sync_each);
    let skipped = SKIPPED.load(Ordering::Relaxed);
    let loaded = load(&clean).expect("a clean directory loads");
    assert_eq!(dump(&loaded), model(log.acked), "clean run");
    assert!(
        SKIPPED.load(Ordering::Relaxed) > skipped,
        "segments captured after some of the rewrite's commands"
    );
    assert!(
        clean.get("appendonly.aof.9.base.0").is_none(),
        "orphan cleaned"
    );
    assert!(
        clean.get(NAME).is_none(),
        "legacy log removed after the rewrite"
    );
    let mut models = BTreeMap::new();
    let mut model = |n: u64| models.entry(n).or_insert_with(|| model(n)).clone();
    let mut rng = fastrand::Rng::with_seed(0x5eed);
    for fault in 1..=total {
        let (fs, log, _) = one_run(Some(fault), 2, sync_each);
        let last = log.pending.map_or(log.acked, |p| p + 1);
        for _ in 0..iters() {
            let seed = rng.u64(..);
            let image = fs.crash_image(seed);
            let loaded = load(&image)
                .unwrap_or_else(|e| panic!("fault {fault} seed {seed:#x}: load failed: {e:#}"));
            let got = dump(&loaded);
            let ok = if sync_each {
                got == model(log.acked) || log.pending.is_some_and(|p| got == model(p + 1))
            } else {
                (log.synced..=last).any(|n| got == model(n))
            };
            if !ok {
                let want = model(log.acked);
                for (k, v) in &got {
                    if want.get(k) != Some(v) {
                        eprintln!("got {k:?} = {v}, want {:?}", want.get(k));
                    }
                }
                for (k, v) in &want {
                    if !got.contains_key(k) {
                        eprintln!("missing {k:?} = {v}");
                    }
                }
            }
            assert!(
                ok,
                "fault {fault} seed {seed:#x}: state is not that after {} commands \
                 (with sync_each) or after any of {}..={last}",
                log.acked, log.synced
            );
            // Loading cleaned orphans; loading again gives the same state.
            let again = load(&image).expect("second load");
            assert_eq!(
                dump(&again),
                got,
                "fault {fault} seed {seed:#x}: reload differs"
            );
        }
    }
}

/// Runs one command in database `db`; returns what it logged.
fn run_in(state: &mut State, db: usize, args: &[&[u8]]) -> Vec<u8> {
    let input = resp_bytes(args);
    let mut parser = Parser::new();
    let n = parser.parse(&input, &Limits::DEFAULT).expect("valid");
    assert!(n.is_some());
    let mut session = Session {
        authenticated: true,
        db,
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

/// A simulated directory holding a one-command legacy log, and the
/// manifest its first rewrite starts from.
fn legacy_dir() -> (SimFs, AofDir, Manifest) {
    let fs = SimFs::new();
    fs.put(NAME, &resp_bytes(&[b"PING"]));
    let dir = AofDir::new(Arc::new(fs.clone()), Path::new("/sim"), NAME);
    let Layout::Legacy(entry) = dir.layout().expect("layout") else {
        panic!("a legacy log was put there");
    };
    let current = Manifest {
        generation: 0,
        bases: vec![],
        incrs: vec![entry],
    };
    (fs, dir, current)
}

/// Runs `before`, snapshots, runs `during` (each `(db, command)`), writes
/// the parts, then loads them and replays what `during` logged, as a
/// restart after the rewrite would. Returns the live and the loaded state
/// and how many keys the parts left out.
fn rewrite_around(before: &[(usize, &str)], during: &[(usize, &str)]) -> (State, State, u64) {
    let (_, dir, current) = legacy_dir();
    let words = |command: &str| -> Vec<Vec<u8>> {
        command.split(' ').map(|w| w.as_bytes().to_vec()).collect()
    };
    let run_words = |state: &mut State, db: usize, words: &[Vec<u8>]| {
        run_in(
            state,
            db,
            &words.iter().map(Vec::as_slice).collect::<Vec<_>>(),
        )
    };
    let mut live = fresh_state();
    for (db, command) in before {
        run_words(&mut live, *db, &words(command));
    }
    let started = dir.start(&current, IncrKind::File).expect("start");
    let snapshots = live.keyspace.snapshot(2);
    let logged: Vec<(usize, Vec<u8>)> = during
        .iter()
        .map(|(db, c)| (*db, run_words(&mut live, *db, &words(c))))
        .collect();
    live.keyspace.publish_superseded();
    let progress = Arc::new(Progress::default());
    let bases = parts(&dir, started.generation, snapshots, &progress).expect("parts");
    let mut loaded = fresh_state();
    let parts = Manifest {
        generation: started.generation,
        bases,
        incrs: vec![],
    };
    load_bases(&dir, &parts, 2, &mut loaded.keyspace).expect("load");
    loaded.keyspace.loading = true;
    for (db, record) in logged {
        let mut at = 0;
        let mut parser = Parser::new();
        while let Ok(Some(n)) = parser.parse(&record[at..], &Limits::DEFAULT) {
            let args: Vec<Vec<u8>> = parser
                .args(&record[at..])
                .iter()
                .map(<[u8]>::to_vec)
                .collect();
            run_words(&mut loaded, db, &args);
            at += n;
        }
    }
    loaded.keyspace.loading = false;
    (live, loaded, progress.superseded.load(Ordering::Relaxed))
}

#[test]
fn superseded_keys_are_left_out_of_the_parts() {
    let keys: Vec<String> = (0..2000).map(|i| format!("SET k{i} old")).collect();
    let before: Vec<(usize, &str)> = keys.iter().map(|c| (0, c.as_str())).collect();
    let during = [
        (0, "SET k1 new"),
        (0, "SET k2 new EX 100"),
        (0, "DEL k3"),
        (0, "MSET k4 new k5 new"),
        (0, "APPEND k6 x"),
        (0, "SET k7 new KEEPTTL"),
    ];
    let (live, loaded, left_out) = rewrite_around(&before, &during);
    assert_eq!(left_out, 5, "k1 to k5; not k6 (APPEND) nor k7 (KEEPTTL)");
    assert_eq!(dump(&loaded), dump(&live));
}

#[test]
fn keys_read_into_others_or_swapped_stay_in_the_parts() {
    let rename = rewrite_around(&[(0, "SET a 1")], &[(0, "RENAME a b"), (0, "SET a 2")]);
    assert_eq!(dump(&rename.1), dump(&rename.0), "RENAME, then SET");
    let sets = rewrite_around(
        &[(0, "SADD s 1 2"), (0, "SADD t 2 3")],
        &[(0, "SINTERSTORE u s t"), (0, "DEL s")],
    );
    assert_eq!(dump(&sets.1), dump(&sets.0), "SINTERSTORE, then DEL");
    let swap = rewrite_around(
        &[(0, "SET a 1"), (1, "SET a x")],
        &[(0, "SWAPDB 0 1"), (0, "SET a 2"), (1, "APPEND a y")],
    );
    assert_eq!(dump(&swap.1), dump(&swap.0), "SWAPDB, then SET");
}

/// `rewrite_and_finish`: parts that left superseded keys out are named by
/// a manifest only once the log is durable (its sync runs while the
/// previous manifest is still current); a failed sync fails the rewrite,
/// that manifest stays current and the parts are removed; without a key
/// left out there is nothing to wait for.
#[test]
fn the_log_is_synced_before_a_manifest_naming_parts_that_left_keys_out() {
    for (command, sync_ok, syncs) in [("SET", true, 1), ("SET", false, 1), ("APPEND", true, 1)] {
        let (fs, dir, current) = legacy_dir();
        let mut live = fresh_state();
        for i in 0..2000 {
            run(&mut live, &[b"SET", format!("k{i}").as_bytes(), b"old"]);
        }
        let started = dir.start(&current, IncrKind::File).expect("start");
        let snapshots = live.keyspace.snapshot(2);
        run(&mut live, &[command.as_bytes(), b"k1", b"new"]);
        live.keyspace.publish_superseded();
        let calls = Arc::new(AtomicUsize::new(0));
        let (seen, during) = (Arc::clone(&calls), started.clone());
        let view = AofDir::new(Arc::new(fs.clone()), Path::new("/sim"), NAME);
        let log_durable: ferrite_kv::aof::SyncWait = Box::new(move || {
            seen.fetch_add(1, Ordering::Relaxed);
            let Layout::Manifest(m) = view.layout().expect("layout") else {
                panic!("a manifest is current");
            };
            assert_eq!(m, during, "the sync runs before the new manifest");
            if sync_ok {
                Ok(())
            } else {
                Err(ferrite_kv::Error::Rewrite {
                    reason: "injected sync failure".into(),
                })
            }
        });
        let pacer = Pacer::new(DEFAULT_SHARE_PERCENT);
        let result = rewrite_and_finish(&dir, &started, snapshots, pacer, log_durable);
        assert_eq!(calls.load(Ordering::Relaxed), syncs, "{command}");
        let Layout::Manifest(now) = dir.layout().expect("layout") else {
            panic!("a manifest is current");
        };
        match result {
            Ok(done) => {
                assert!(sync_ok);
                assert_eq!(now, done);
                assert_eq!(done.bases.len(), 2);
            }
            Err(_) => {
                assert!(!sync_ok);
                assert_eq!(now, started, "the previous manifest stays current");
                let part = dir.base_name(started.generation, 0);
                assert!(fs.get(&part).is_none(), "{part} removed");
            }
        }
    }
}
