//! Paper 004's redo-log experiment: S sessions, each running N transactions
//! of one ~100-byte record + commit, on a disk file (fdatasync) and on
//! emulated PM, with group commit and with the naive one-sync-per-commit
//! baseline (a mutex around write + sync), in the same run.
//!
//! Per configuration: wall time, commits/s, commit latency p50/p99, the
//! fraction of each session's time spent waiting for the log, and the mean
//! batch size. One fdatasync's latency is measured too, to show how close
//! each mode gets to the device's limit.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Barrier, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use ferrite_io::{Device, FileDevice, PmPolicy, PmemDevice};
use ferrite_wal::record::{encode_record, RECORD_ALIGN};
use ferrite_wal::{Durability, Wal, WalConfig};
use serde::Serialize;

use crate::report::{self, median, percentile, Panel, Report, Series};
use crate::Common;

/// Concurrent sessions measured.
const SESSIONS: [usize; 6] = [1, 2, 4, 8, 16, 64];
/// Payload bytes of one transaction's record (a small RESP `SET`).
const RECORD_BYTES: usize = 100;

/// Which medium the log is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Medium {
    Disk,
    Pm,
}

impl Medium {
    fn name(self) -> &'static str {
        match self {
            Medium::Disk => "disk",
            Medium::Pm => "pm",
        }
    }
}

/// How commits are made durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Mode {
    Group,
    Naive,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Group => "group",
            Mode::Naive => "naive",
        }
    }
}

/// One run of one configuration.
#[derive(Clone, Debug, Default)]
struct RunResult {
    wall_s: f64,
    commits: u64,
    latencies_ns: Vec<f64>,
    wait_fraction: f64,
    batch_mean: f64,
    syncs: u64,
    flushes_per_record: Option<f64>,
}

/// Medians over runs of one configuration, as written to the JSON.
#[derive(Clone, Debug, Serialize)]
struct Figure {
    medium: &'static str,
    mode: &'static str,
    sessions: usize,
    transactions_per_session: usize,
    wall_s: f64,
    commits_per_s: f64,
    commit_p50_us: f64,
    commit_p99_us: f64,
    wait_fraction: f64,
    batch_mean: f64,
    syncs_per_s: f64,
    /// Share of the wall time the device spent in fdatasync, estimated as
    /// syncs x one fdatasync's median latency (disk only): near 1 means the
    /// log keeps the disk busy, i.e. it reached the device's limit.
    sync_utilisation: Option<f64>,
    flushes_per_record: Option<f64>,
}

/// The naive baseline: one mutex around write + sync, same record framing.
#[derive(Debug)]
struct NaiveLog {
    device: Arc<dyn Device>,
    next: Mutex<(u64, u64)>,
}

impl NaiveLog {
    fn new(device: Arc<dyn Device>) -> NaiveLog {
        let end = device.len();
        NaiveLog {
            device,
            next: Mutex::new((1, end)),
        }
    }

    fn commit(&self, payload: &[u8], frame: &mut Vec<u8>) -> Result<()> {
        let mut next = self.next.lock().unwrap_or_else(PoisonError::into_inner);
        let (lsn, offset) = *next;
        frame.clear();
        encode_record(frame, 0, lsn, lsn - 1, payload, RECORD_ALIGN);
        self.device.write_at(offset, frame)?;
        self.device.sync()?;
        *next = (lsn + 1, offset + frame.len() as u64);
        Ok(())
    }
}

/// What the sessions commit through.
enum Log {
    Group(Wal),
    Naive(NaiveLog),
}

impl Log {
    fn commit(&self, payload: &[u8], frame: &mut Vec<u8>) -> Result<()> {
        match self {
            Log::Group(wal) => {
                wal.append_commit(payload)?;
            }
            Log::Naive(naive) => naive.commit(payload, frame)?,
        }
        Ok(())
    }
}

fn open_device(medium: Medium, path: &Path) -> Result<Arc<dyn Device>> {
    let _ = std::fs::remove_file(path);
    let device: Arc<dyn Device> = match medium {
        Medium::Disk => Arc::new(FileDevice::open(path)?),
        Medium::Pm => Arc::new(PmemDevice::open(path, PmPolicy::DrainEveryWrite)?),
    };
    Ok(device)
}

/// A session's transaction: build the command, then commit it.
fn transaction_payload(session: usize, i: usize) -> Vec<u8> {
    let mut payload =
        format!("*3\r\n$3\r\nSET\r\n$16\r\nkey:{session:05}:{i:06}\r\n$64\r\n").into_bytes();
    payload.resize(RECORD_BYTES - 2, b'v');
    payload.extend_from_slice(b"\r\n");
    payload
}

/// Runs `sessions` threads of `per_session` transactions on a fresh log.
fn run_once(
    medium: Medium,
    mode: Mode,
    sessions: usize,
    per_session: usize,
    path: &Path,
) -> Result<RunResult> {
    let device = open_device(medium, path)?;
    let log = match mode {
        Mode::Group => Log::Group(Wal::open(
            Arc::clone(&device),
            WalConfig::with_durability(Durability::EveryCommit),
        )?),
        Mode::Naive => Log::Naive(NaiveLog::new(Arc::clone(&device))),
    };
    let barrier = Barrier::new(sessions + 1);
    let per_thread = std::thread::scope(|s| -> Result<_> {
        let handles: Vec<_> = (0..sessions)
            .map(|session| {
                let (log, barrier) = (&log, &barrier);
                s.spawn(move || session_loop(log, barrier, session, per_session))
            })
            .collect();
        barrier.wait();
        let mut per_thread = Vec::with_capacity(sessions);
        for handle in handles {
            let joined = handle
                .join()
                .map_err(|_| anyhow::anyhow!("a session thread panicked"))?;
            per_thread.push(joined?);
        }
        Ok(per_thread)
    })?;
    // Sessions time themselves: the main thread may run late after the
    // barrier, so its clock would miss the start.
    let start = per_thread.iter().map(|t| t.begin).min();
    let end = per_thread.iter().map(|t| t.end).max();
    let wall_s = match (start, end) {
        (Some(start), Some(end)) => end.duration_since(start).as_secs_f64(),
        _ => 0.0,
    };
    let mut result = RunResult {
        wall_s,
        commits: (sessions * per_session) as u64,
        wait_fraction: per_thread.iter().map(|t| t.wait_fraction).sum::<f64>() / sessions as f64,
        batch_mean: 1.0,
        ..RunResult::default()
    };
    for t in &per_thread {
        result.latencies_ns.extend_from_slice(&t.latencies_ns);
    }
    match &log {
        Log::Group(wal) => {
            let stats = wal.stats();
            result.batch_mean = stats.batch_mean;
            result.syncs = stats.syncs;
            result.flushes_per_record = stats.flushes_per_record();
        }
        Log::Naive(_) => {
            result.syncs = result.commits;
            result.flushes_per_record = device
                .flush_stats()
                .map(|f| f.flushes_per_op(result.commits));
        }
    }
    // A disk log is deleted at the end of the whole experiment: deleting it
    // now would make the next configuration's first syncs pay for freeing
    // (and, with `discard`, trimming) its blocks.
    drop(log);
    drop(device);
    Ok(result)
}

struct SessionResult {
    begin: Instant,
    end: Instant,
    latencies_ns: Vec<f64>,
    wait_fraction: f64,
}

fn session_loop(
    log: &Log,
    barrier: &Barrier,
    session: usize,
    per_session: usize,
) -> Result<SessionResult> {
    let mut latencies_ns = Vec::with_capacity(per_session);
    let mut frame = Vec::with_capacity(256);
    let mut waiting = Duration::ZERO;
    barrier.wait();
    let begin = Instant::now();
    for i in 0..per_session {
        let payload = transaction_payload(session, i);
        let t = Instant::now();
        log.commit(&payload, &mut frame)?;
        let took = t.elapsed();
        waiting += took;
        latencies_ns.push(took.as_nanos() as f64);
    }
    let end = Instant::now();
    let total = end.duration_since(begin).as_secs_f64().max(1e-12);
    Ok(SessionResult {
        begin,
        end,
        latencies_ns,
        wait_fraction: waiting.as_secs_f64() / total,
    })
}

/// One fdatasync's latency on the disk: small write + fdatasync, median ns.
fn fdatasync_ns(dir: &Path, samples: usize) -> Result<f64> {
    let path = dir.join("wal-fdatasync-probe");
    let device = open_device(Medium::Disk, &path)?;
    let data = [0x5Au8; 128];
    let mut times = Vec::with_capacity(samples);
    for i in 0..samples {
        device.write_at(i as u64 * 128, &data)?;
        let t = Instant::now();
        device.sync()?;
        times.push(t.elapsed().as_nanos() as f64);
    }
    drop(device);
    let _ = std::fs::remove_file(&path);
    Ok(median(&times))
}

fn transactions_total(medium: Medium, quick: bool) -> usize {
    match (medium, quick) {
        (Medium::Disk, false) => 8_000,
        (Medium::Disk, true) => 2_000,
        (Medium::Pm, false) => 64_000,
        (Medium::Pm, true) => 16_000,
    }
}

type Key = (Medium, Mode, usize);

fn summarise(key: Key, per_session: usize, runs: &[RunResult], fsync_ns: f64) -> Figure {
    let (medium, mode, sessions) = key;
    let of = |f: &dyn Fn(&RunResult) -> f64| median(&runs.iter().map(f).collect::<Vec<_>>());
    let wall_s = of(&|r| r.wall_s);
    let syncs_per_s = of(&|r| r.syncs as f64 / r.wall_s.max(1e-12));
    Figure {
        medium: medium.name(),
        mode: mode.name(),
        sessions,
        transactions_per_session: per_session,
        wall_s,
        commits_per_s: of(&|r| r.commits as f64 / r.wall_s.max(1e-12)),
        commit_p50_us: of(&|r| percentile(&r.latencies_ns, 50.0)) / 1e3,
        commit_p99_us: of(&|r| percentile(&r.latencies_ns, 99.0)) / 1e3,
        wait_fraction: of(&|r| r.wait_fraction),
        batch_mean: of(&|r| r.batch_mean),
        syncs_per_s,
        sync_utilisation: (medium == Medium::Disk).then(|| syncs_per_s * fsync_ns / 1e9),
        flushes_per_record: runs
            .iter()
            .map(|r| r.flushes_per_record)
            .collect::<Option<Vec<_>>>()
            .map(|v| median(&v)),
    }
}

/// Runs the experiment and writes `wal.json` and `wal.svg` into `--out`.
pub fn run(common: &Common) -> Result<()> {
    let mut report = Report::new("wal", common.quick, common.runs());
    let disk_dir = report::disk_scratch_dir()?;
    let pm_dir = report::pm_scratch_dir()?;
    let fsync_samples = if common.quick { 200 } else { 1000 };
    let mut fsync_runs = Vec::new();
    let mut results: BTreeMap<Key, Vec<RunResult>> = BTreeMap::new();
    let mut disk_logs: Vec<std::path::PathBuf> = Vec::new();
    for run in 0..common.runs() {
        fsync_runs.push(fdatasync_ns(&disk_dir, fsync_samples)?);
        for medium in [Medium::Disk, Medium::Pm] {
            let dir = if medium == Medium::Disk {
                &disk_dir
            } else {
                &pm_dir
            };
            for mode in [Mode::Group, Mode::Naive] {
                for sessions in SESSIONS {
                    let per_session = (transactions_total(medium, common.quick) / sessions).max(20);
                    let path = dir.join(format!(
                        "wal-{}-{}-s{sessions}-run{run}.log",
                        medium.name(),
                        mode.name()
                    ));
                    let result = run_once(medium, mode, sessions, per_session, &path)
                        .with_context(|| {
                            format!("{} {} s{sessions}", medium.name(), mode.name())
                        })?;
                    tracing::info!(
                        run,
                        medium = medium.name(),
                        mode = mode.name(),
                        sessions,
                        commits_per_s = result.commits as f64 / result.wall_s,
                        batch = result.batch_mean,
                        "wal configuration done"
                    );
                    results
                        .entry((medium, mode, sessions))
                        .or_default()
                        .push(result);
                    if medium == Medium::Disk {
                        disk_logs.push(path);
                    } else {
                        let _ = std::fs::remove_file(&path);
                    }
                }
            }
        }
    }
    for log in &disk_logs {
        let _ = std::fs::remove_file(log);
    }
    let fsync_ns = median(&fsync_runs);
    let figures: Vec<Figure> = results
        .iter()
        .map(|(&key, runs)| {
            let per_session = (transactions_total(key.0, common.quick) / key.2).max(20);
            summarise(key, per_session, runs, fsync_ns)
        })
        .collect();
    record(&mut report, &figures, fsync_ns, &disk_dir, &pm_dir);
    let path = report.write(&common.out)?;
    plot(&common.out.join("wal.svg"), &figures)?;
    tracing::info!("wrote {}", path.display());
    Ok(())
}

fn find(figures: &[Figure], medium: Medium, mode: Mode, sessions: usize) -> Option<&Figure> {
    figures
        .iter()
        .find(|f| f.medium == medium.name() && f.mode == mode.name() && f.sessions == sessions)
}

fn record(report: &mut Report, figures: &[Figure], fsync_ns: f64, disk_dir: &Path, pm_dir: &Path) {
    report.figure("configurations", figures);
    report.figure("fdatasync_p50_us", fsync_ns / 1e3);
    let fsync_bound = 1e9 / fsync_ns.max(1.0);
    report.figure("one_sync_per_commit_bound_commits_per_s", fsync_bound);
    for sessions in SESSIONS {
        let get = |medium, mode| find(figures, medium, mode, sessions).map(|f| f.commits_per_s);
        let ratio = |a: Option<f64>, b: Option<f64>| a.zip(b).map(|(a, b)| a / b.max(1e-9));
        let pairs = [
            (
                "group_vs_naive_disk",
                get(Medium::Disk, Mode::Group),
                get(Medium::Disk, Mode::Naive),
            ),
            (
                "group_vs_naive_pm",
                get(Medium::Pm, Mode::Group),
                get(Medium::Pm, Mode::Naive),
            ),
            (
                "pm_vs_disk_group",
                get(Medium::Pm, Mode::Group),
                get(Medium::Disk, Mode::Group),
            ),
            (
                "pm_vs_disk_naive",
                get(Medium::Pm, Mode::Naive),
                get(Medium::Disk, Mode::Naive),
            ),
        ];
        for (name, a, b) in pairs {
            if let Some(value) = ratio(a, b) {
                report.ratio(format!("{name}_s{sessions}"), value);
            }
        }
        if let Some(f) = find(figures, Medium::Disk, Mode::Group, sessions) {
            report.figure(
                format!("disk_group_vs_sync_bound_s{sessions}"),
                f.commits_per_s / fsync_bound,
            );
        }
    }
    if let Some(f) = find(figures, Medium::Pm, Mode::Group, 1) {
        report.figure("pm_commit_p50_us_s1", f.commit_p50_us);
    }
    if let Some(f) = find(figures, Medium::Disk, Mode::Group, 1) {
        report.figure("disk_commit_p50_us_s1", f.commit_p50_us);
    }
    report.note(format!(
        "disk: FileDevice (pwrite + fdatasync) in {}; PM: PmemDevice (copy_nodrain + drain per write) on emulated PM in {}",
        disk_dir.display(),
        pm_dir.display()
    ));
    report.note(
        "naive = one mutex around write + sync per commit; group = ferrite-wal at EveryCommit",
    );
    report.note(
        "disk_group_vs_sync_bound_sN = group commits/s over 1/fdatasync (the one-sync-per-commit limit)",
    );
}

fn plot(path: &Path, figures: &[Figure]) -> Result<()> {
    let series = |value: &dyn Fn(&Figure) -> f64| -> Vec<Series> {
        let mut out = Vec::new();
        for medium in [Medium::Disk, Medium::Pm] {
            for mode in [Mode::Group, Mode::Naive] {
                let points = SESSIONS
                    .iter()
                    .filter_map(|&s| find(figures, medium, mode, s).map(|f| (s as f64, value(f))))
                    .collect();
                out.push(Series {
                    label: format!("{} {}", medium.name(), mode.name()),
                    points,
                });
            }
        }
        out
    };
    let panel = |title: &str, y: &str, log_y: bool, values: Vec<Series>| Panel {
        title: title.into(),
        x_label: "sessions".into(),
        y_label: y.into(),
        log_x: true,
        log_y,
        series: values,
    };
    let panels = [
        panel("commits/s", "commits/s", true, series(&|f| f.commits_per_s)),
        panel(
            "time waiting for the log",
            "fraction of session time",
            false,
            series(&|f| f.wait_fraction),
        ),
        panel(
            "records per sync / drain batch",
            "mean batch",
            true,
            series(&|f| f.batch_mean),
        ),
    ];
    report::plot(path, "ferrite-bench wal (paper 004)", &panels)
}
