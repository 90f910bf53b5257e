//! The rewrite experiment (issue #5; paper 002's figures): Ferrite's
//! fork-less parallel log rewrite against Debian's redis-server 7
//! BGREWRITEAOF (RDB preamble yes and no) in the same run.
//!
//! Each server gets a dataset of 16-byte keys (`key:%012d`) with
//! pseudo-random, incompressible values (the load's too), both with
//! `appendonly yes`, `appendfsync everysec`, automatic rewrites off and the
//! data on the disk. A closed-loop SET load of random existing keys runs
//! before, during and shortly after one BGREWRITEAOF; memory (the
//! anonymous memory of the server plus its fork children, each page once)
//! is sampled every 50 ms; then the server
//! is killed and restarted on the same directory, and the time until PING
//! answers is the recovery time. Configurations are interleaved within each
//! run; figures are medians over runs.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::json;

use crate::kv::{ensure_redis, wait_for_port, Running};
use crate::kvload::{self, LoadArgs};
use crate::report::{self, median, Panel, Report, Series};
use crate::Common;

pub(crate) mod probe;

use probe::{info_field, Conn, Done, WriteLoad};

/// Both cores for the servers: the rewrite's point is to use the second
/// one (Redis's fork child, Ferrite's workers). The bench's own client
/// threads are pinned to core 1.
const SERVER_CORES: &str = "0,1";
const CLIENT_CORE: &str = "1";
/// The servers' event loops (`server_cpulist`).
const SERVER_LOOP_CORE: &str = "0";
const BASE_PORT: u16 = 17600;
const MEMORY_PERIOD: Duration = Duration::from_millis(50);
const BUCKET_S: f64 = 0.1;
const REWRITE_TIMEOUT: Duration = Duration::from_secs(600);

/// Options of the rewrite experiment.
#[derive(Clone, Debug, clap::Args)]
pub struct RewriteArgs {
    #[command(flatten)]
    pub common: Common,
    /// Keys per dataset (default 1,000,000; 100,000 with --quick).
    #[arg(long)]
    pub keys: Option<usize>,
    /// Value sizes in bytes, one dataset each (default 100,1024; 100 with
    /// --quick).
    #[arg(long, value_delimiter = ',')]
    pub values: Vec<usize>,
    /// Connections of the closed-loop SET load.
    #[arg(long, default_value_t = 4)]
    pub connections: usize,
    /// Pin both servers' event loops to core 0 (`server_cpulist`) and
    /// their rewrites to cores 0-1 (`aof_rewrite_cpulist`).
    #[arg(long)]
    pub pin_loops: bool,
    /// Seconds of load measured as the steady state before the rewrite
    /// (default 3; 1 with --quick).
    #[arg(long)]
    pub steady: Option<f64>,
    /// Only these configurations (default: all of ferrite_t1, ferrite_t2,
    /// redis_preamble, redis_aof); ratios missing one read NaN.
    #[arg(long, value_delimiter = ',')]
    pub configs: Vec<String>,
}

/// A server configuration of the comparison.
#[derive(Clone, Copy, Debug)]
enum System {
    Ferrite { threads: usize },
    Redis { preamble: bool },
}

const CONFIGS: [(&str, System); 4] = [
    ("ferrite_t1", System::Ferrite { threads: 1 }),
    ("ferrite_t2", System::Ferrite { threads: 2 }),
    ("redis_preamble", System::Redis { preamble: true }),
    ("redis_aof", System::Redis { preamble: false }),
];

/// The Ferrite configuration the ratios use: two threads, the default
/// (`aof-rewrite-threads 0` = cores) on this machine.
const FERRITE: &str = "ferrite_t2";

/// Durations of one run's phases and the dataset.
#[derive(Clone, Copy, Debug)]
struct Plan {
    pin_loops: bool,
    keys: usize,
    value_bytes: usize,
    connections: usize,
    steady: Duration,
    tail: Duration,
}

/// What one run of one configuration measured: scalar figures, and the
/// throughput and memory over time (seconds since BGREWRITEAOF).
struct RunResult {
    figures: BTreeMap<String, f64>,
    throughput: Vec<(f64, f64)>,
    memory: Vec<(f64, f64)>,
}

/// The first run of each configuration that ran, with its label.
type Labelled = Vec<(String, RunResult)>;

/// Every figure of every run, per configuration.
type RunsByConfig = BTreeMap<String, Vec<BTreeMap<String, f64>>>;

/// The medians of every figure over runs, per configuration.
type Medians = BTreeMap<String, BTreeMap<String, f64>>;

/// The raw observations of the load phase: every completed SET, the
/// memory samples, and when the rewrite started and ended (seconds since
/// the epoch).
struct Observed {
    done: Vec<Done>,
    memory: Vec<(f64, f64)>,
    start: f64,
    end: f64,
}

fn spawn(system: System, port: u16, dir: &Path, pin_loops: bool) -> Result<Running> {
    let mut cmd = Command::new("taskset");
    cmd.args(["-c", SERVER_CORES])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let port_text = port.to_string();
    let common = [
        "--appendonly",
        "yes",
        "--appendfsync",
        "everysec",
        "--auto-aof-rewrite-percentage",
        "0",
    ];
    // With --pin-loops: both servers' event loops (Redis's main thread) on
    // one core, their rewrites (Redis's fork child, Ferrite's workers) on
    // both, with the directives both servers share.
    if pin_loops {
        cmd.args([
            "--server_cpulist",
            SERVER_LOOP_CORE,
            "--aof_rewrite_cpulist",
            SERVER_CORES,
        ]);
    }
    match system {
        System::Ferrite { threads } => {
            cmd.arg(std::env::current_exe()?)
                .args(["kv-serve", "--port", &port_text, "--dir"])
                .arg(dir)
                .args(common)
                .args(["--log-device", "file", "--aof-rewrite-threads"])
                .arg(threads.to_string());
        }
        System::Redis { preamble } => {
            cmd.args(["redis-server", "--port", &port_text, "--save", "", "--dir"])
                .arg(dir)
                .args(common)
                .args([
                    "--aof-use-rdb-preamble",
                    if preamble { "yes" } else { "no" },
                ]);
        }
    }
    let child = cmd.spawn().context("starting a server")?;
    Ok(Running { child, port })
}

/// Waits until no rewrite is running or scheduled; returns `aof_rewrites`.
fn wait_rewrites_idle(conn: &mut Conn) -> Result<u64> {
    let deadline = Instant::now() + REWRITE_TIMEOUT;
    loop {
        let info = conn.info("persistence")?;
        let busy = info_field(&info, "aof_rewrite_in_progress").unwrap_or(0)
            + info_field(&info, "aof_rewrite_scheduled").unwrap_or(0);
        if busy == 0 {
            return info_field(&info, "aof_rewrites").context("INFO has no aof_rewrites");
        }
        if Instant::now() > deadline {
            bail!("the rewrite did not finish in {REWRITE_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Sends BGREWRITEAOF and polls INFO until it has finished; returns the
/// INFO text after it.
fn rewrite(conn: &mut Conn) -> Result<String> {
    let before = wait_rewrites_idle(conn)?;
    conn.call(&[b"BGREWRITEAOF"])?;
    loop {
        if wait_rewrites_idle(conn)? > before {
            let info = conn.info("persistence")?;
            if !info.contains("aof_last_bgrewrite_status:ok") {
                bail!("the rewrite failed: {info}");
            }
            return Ok(info);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Mean and maximum of the samples in `[from, to]`.
fn mean_and_max(samples: &[(f64, f64)], from: f64, to: f64) -> (f64, f64) {
    let inside: Vec<f64> = samples
        .iter()
        .filter(|(t, _)| *t >= from && *t <= to)
        .map(|(_, v)| *v)
        .collect();
    if inside.is_empty() {
        // A rewrite shorter than the sampling period: the sample just after.
        let next = samples
            .iter()
            .find(|(t, _)| *t >= from)
            .map_or(0.0, |s| s.1);
        return (next, next);
    }
    let mean = inside.iter().sum::<f64>() / inside.len() as f64;
    (mean, inside.iter().copied().fold(0.0, f64::max))
}

fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

/// Loads, steady phase, BGREWRITEAOF, tail; the load and the memory
/// sampler stop on every path out.
fn measure_rewrite(
    server: &Running,
    plan: &Plan,
    figures: &mut BTreeMap<String, f64>,
) -> Result<Observed> {
    let mut conn = Conn::connect(server.port)?;
    let epoch = Instant::now();
    let stop = AtomicBool::new(false);
    let load = WriteLoad {
        port: server.port,
        connections: plan.connections,
        keys: plan.keys,
        value_bytes: plan.value_bytes,
    };
    let pid = server.child.id();
    std::thread::scope(|s| {
        let writers = s.spawn(|| probe::write_load(load, epoch, &stop));
        let sampler = s.spawn(|| probe::sample_memory(pid, MEMORY_PERIOD, epoch, &stop));
        let rewrite_window = (|| -> Result<(f64, f64, String)> {
            std::thread::sleep(plan.steady);
            let start = epoch.elapsed().as_secs_f64();
            let info = rewrite(&mut conn)?;
            let end = epoch.elapsed().as_secs_f64();
            std::thread::sleep(plan.tail);
            Ok((start, end, info))
        })();
        stop.store(true, Ordering::Relaxed);
        let done = writers
            .join()
            .map_err(|_| anyhow::anyhow!("load panicked"))??;
        let memory = sampler
            .join()
            .map_err(|_| anyhow::anyhow!("sampler panicked"))?;
        let (start, end, info) = rewrite_window?;
        for (field, key) in [
            ("ferrite_rewrite_last_ms", "server_rewrite_ms"),
            ("ferrite_rewrite_cow_peak_bytes", "cow_peak_bytes"),
            ("aof_last_rewrite_time_sec", "server_rewrite_sec"),
        ] {
            if let Some(v) = info_field(&info, field) {
                figures.insert(key.into(), v as f64);
            }
        }
        Ok(Observed {
            done,
            memory,
            start,
            end,
        })
    })
}

/// Kills the server, restarts it on the same directory, and returns the
/// milliseconds until PING answers; checks every key came back.
fn recover(server: Running, system: System, dir: &Path, plan: &Plan) -> Result<(f64, Running)> {
    let port = server.port + 1;
    drop(server);
    let started = Instant::now();
    let server = spawn(system, port, dir, plan.pin_loops)?;
    let mut conn = loop {
        if let Ok(mut conn) = Conn::connect(port) {
            if conn.call(&[b"PING"]).is_ok() {
                break conn;
            }
        }
        if started.elapsed() > REWRITE_TIMEOUT {
            bail!("the restarted server did not answer PING");
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let ms = started.elapsed().as_secs_f64() * 1e3;
    let reply = conn.call(&[b"DBSIZE"])?;
    let keys: usize = String::from_utf8_lossy(&reply)
        .trim()
        .trim_start_matches(':')
        .parse()
        .context("DBSIZE reply")?;
    if keys != plan.keys {
        bail!("recovered {keys} keys, expected {}", plan.keys);
    }
    Ok((ms, server))
}

fn one_run(system: System, port: u16, dir: &Path, plan: &Plan) -> Result<RunResult> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir)?;
    let server = spawn(system, port, dir, plan.pin_loops)?;
    wait_for_port(port)?;
    wait_rewrites_idle(&mut Conn::connect(port)?)?;
    kvload::run_load(&LoadArgs {
        port,
        op: "fill".into(),
        clients: 1,
        pipeline: 1,
        requests: plan.keys,
        value_bytes: plan.value_bytes,
        random_values: true,
    })?;
    let mut figures = BTreeMap::new();
    let Observed {
        done,
        memory,
        start,
        end,
    } = measure_rewrite(&server, plan, &mut figures)?;
    let steady_from = start - plan.steady.as_secs_f64();
    let (steady_ops, steady_p99) = probe::window(&done, steady_from, start);
    let (during_ops, during_p99) = probe::window(&done, start, end);
    // The load's rate in the tail after the rewrite: with the steady phase
    // before it, a baseline that drifts with the machine less than either.
    let (after_ops, _) = probe::window(&done, end, end + plan.tail.as_secs_f64());
    let (steady_memory, _) = mean_and_max(&memory, steady_from, start);
    let (average_memory, peak_memory) = mean_and_max(&memory, start, end);
    figures.extend([
        ("rewrite_ms".to_string(), (end - start) * 1e3),
        ("steady_ops".into(), steady_ops),
        ("during_ops".into(), during_ops),
        ("after_ops".into(), after_ops),
        (
            "during_vs_before_and_after".into(),
            during_ops / ((steady_ops + after_ops) / 2.0),
        ),
        ("steady_p99_us".into(), steady_p99),
        ("during_p99_us".into(), during_p99),
        ("steady_memory_bytes".into(), steady_memory),
        ("average_memory_bytes".into(), average_memory),
        ("peak_memory_bytes".into(), peak_memory),
        ("dir_bytes_after".into(), dir_bytes(dir) as f64),
    ]);
    let (recovery_ms, server) = recover(server, system, dir, plan)?;
    figures.insert("recovery_ms".into(), recovery_ms);
    if let Ok(info) = Conn::connect(server.port)?.info("persistence") {
        if let Some(v) = info_field(&info, "ferrite_load_to_serve_ms") {
            figures.insert("server_load_ms".into(), v as f64);
        }
    }
    drop(server);
    let _ = std::fs::remove_dir_all(dir);
    let end_tail = end + plan.tail.as_secs_f64();
    let shift = |points: Vec<(f64, f64)>| points.into_iter().map(|(t, v)| (t - start, v)).collect();
    Ok(RunResult {
        figures,
        throughput: shift(probe::timeline(&done, steady_from, end_tail, BUCKET_S)),
        memory: shift(
            memory
                .into_iter()
                .filter(|(t, _)| *t >= steady_from && *t <= end_tail)
                .map(|(t, v)| (t, v / (1 << 20) as f64))
                .collect(),
        ),
    })
}

fn medians(runs: &RunsByConfig) -> Medians {
    runs.iter()
        .map(|(label, list)| {
            let mut keys: Vec<&String> = list.iter().flat_map(|m| m.keys()).collect();
            keys.sort();
            keys.dedup();
            let figures = keys
                .into_iter()
                .map(|k| {
                    let values: Vec<f64> = list.iter().filter_map(|m| m.get(k)).copied().collect();
                    (k.clone(), median(&values))
                })
                .collect();
            (label.clone(), figures)
        })
        .collect()
}

/// One ratio: its key, numerator and denominator as (configuration,
/// figure), the target (NaN: none) and whether lower is the goal.
type RatioSpec = (
    &'static str,
    (&'static str, &'static str),
    (&'static str, &'static str),
    f64,
    bool,
);

const RP: &str = "redis_preamble";
const RA: &str = "redis_aof";

/// The ratios, Ferrite/Redis unless named `_vs_own_`.
const RATIOS: [RatioSpec; 12] = [
    (
        "duration_vs_redis_preamble",
        (FERRITE, "rewrite_ms"),
        (RP, "rewrite_ms"),
        0.5,
        true,
    ),
    (
        "duration_t1_vs_redis_preamble",
        ("ferrite_t1", "rewrite_ms"),
        (RP, "rewrite_ms"),
        f64::NAN,
        true,
    ),
    (
        "duration_vs_redis_aof",
        (FERRITE, "rewrite_ms"),
        (RA, "rewrite_ms"),
        f64::NAN,
        true,
    ),
    (
        "throughput_during_vs_redis",
        (FERRITE, "during_ops"),
        (RP, "during_ops"),
        1.8,
        false,
    ),
    (
        "throughput_during_vs_redis_aof",
        (FERRITE, "during_ops"),
        (RA, "during_ops"),
        f64::NAN,
        false,
    ),
    (
        "throughput_during_vs_own_steady",
        (FERRITE, "during_ops"),
        (FERRITE, "steady_ops"),
        0.9,
        false,
    ),
    (
        "p99_during_vs_redis",
        (FERRITE, "during_p99_us"),
        (RP, "during_p99_us"),
        f64::NAN,
        true,
    ),
    (
        "peak_memory_vs_redis",
        (FERRITE, "peak_memory_bytes"),
        (RP, "peak_memory_bytes"),
        0.6,
        true,
    ),
    (
        "peak_memory_vs_redis_aof",
        (FERRITE, "peak_memory_bytes"),
        (RA, "peak_memory_bytes"),
        f64::NAN,
        true,
    ),
    (
        "peak_memory_vs_own_steady",
        (FERRITE, "peak_memory_bytes"),
        (FERRITE, "steady_memory_bytes"),
        1.15,
        true,
    ),
    (
        "recovery_vs_redis_preamble",
        (FERRITE, "recovery_ms"),
        (RP, "recovery_ms"),
        1.0,
        true,
    ),
    (
        "recovery_vs_redis_aof",
        (FERRITE, "recovery_ms"),
        (RA, "recovery_ms"),
        f64::NAN,
        true,
    ),
];

/// The ratios of the medians: (key, value, target, lower is better).
fn ratios(m: &Medians) -> Vec<(&'static str, f64, f64, bool)> {
    let get = |(label, key): (&str, &str)| {
        m.get(label)
            .and_then(|f| f.get(key))
            .copied()
            .unwrap_or(f64::NAN)
    };
    RATIOS
        .iter()
        .map(|&(key, num, den, target, lower)| (key, get(num) / get(den), target, lower))
        .collect()
}

fn plot(path: &Path, plan: &Plan, timelines: &BTreeMap<String, RunResult>) -> Result<()> {
    let panel = |title: &str, y: &str, pick: fn(&RunResult) -> &Vec<(f64, f64)>| Panel {
        title: title.into(),
        x_label: "seconds since BGREWRITEAOF".into(),
        y_label: y.into(),
        log_x: false,
        log_y: false,
        series: timelines
            .iter()
            .map(|(label, r)| Series {
                label: label.clone(),
                points: pick(r).clone(),
            })
            .collect(),
    };
    let title = format!(
        "Log rewrite under SET load: {} keys x {} B (first run)",
        plan.keys, plan.value_bytes
    );
    report::plot(
        path,
        &title,
        &[
            panel("client throughput (100 ms buckets)", "SET/s", |r| {
                &r.throughput
            }),
            panel("memory: PSS of server + fork children", "MiB", |r| {
                &r.memory
            }),
        ],
    )
}

/// Runs every configuration `runs` times, interleaved, on one dataset.
fn dataset(
    plan: &Plan,
    index: usize,
    common: &Common,
    scratch: &Path,
    configs: &[String],
) -> Result<(Medians, Labelled, RunsByConfig)> {
    let mut all = RunsByConfig::new();
    let mut first = Vec::new();
    for run in 0..common.runs() {
        for (i, (label, system)) in CONFIGS.iter().enumerate() {
            if !configs.is_empty() && !configs.iter().any(|c| c == label) {
                continue;
            }
            let port = BASE_PORT + (index * 100 + run * 10 + i * 2) as u16;
            let result = one_run(*system, port, &scratch.join(label), plan)
                .with_context(|| format!("{label}, run {run}"))?;
            println!(
                "{:>5} B run {run} {label:<15} rewrite {:>8.0} ms  SET/s {:>7.0} -> {:>7.0} -> {:>7.0}  p99 {:>6.0} -> {:>6.0} us  PSS {:>5.0} -> peak {:>5.0} MiB  recovery {:>6.0} ms",
                plan.value_bytes,
                result.figures["rewrite_ms"],
                result.figures["steady_ops"],
                result.figures["during_ops"],
                result.figures["after_ops"],
                result.figures["steady_p99_us"],
                result.figures["during_p99_us"],
                result.figures["steady_memory_bytes"] / (1 << 20) as f64,
                result.figures["peak_memory_bytes"] / (1 << 20) as f64,
                result.figures["recovery_ms"],
            );
            all.entry(label.to_string())
                .or_default()
                .push(result.figures.clone());
            if run == 0 {
                first.push((label.to_string(), result));
            }
        }
    }
    Ok((medians(&all), first, all))
}

/// Pins this process (the client threads) to the client core.
fn pin_self() {
    let status = Command::new("taskset")
        .args([
            "-a",
            "-p",
            "-c",
            CLIENT_CORE,
            &std::process::id().to_string(),
        ])
        .stdout(Stdio::null())
        .status();
    if !matches!(status, Ok(s) if s.success()) {
        tracing::warn!("could not pin the client to core {CLIENT_CORE}");
    }
}

/// Records the ratios of one dataset (unsuffixed too for the first one)
/// and whether each meets the target.
fn record_ratios(report: &mut Report, m: &Medians, name: &str, first: bool) {
    let mut targets = BTreeMap::new();
    for (key, value, target, lower) in ratios(m) {
        report.ratio(format!("{key}_{name}"), value);
        if first {
            report.ratio(key, value);
        }
        if target.is_finite() {
            let met = if lower {
                value <= target
            } else {
                value >= target
            };
            targets.insert(
                key,
                json!({"value": value, "target": target, "lower_is_better": lower, "met": met}),
            );
        }
    }
    report.figure(format!("targets_{name}"), &targets);
}

/// Plots the first run's timelines and records them.
fn record_timelines(
    report: &mut Report,
    svg: &Path,
    plan: &Plan,
    name: &str,
    first: Labelled,
) -> Result<()> {
    if let Some(dir) = svg.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let timelines: BTreeMap<String, RunResult> = first.into_iter().collect();
    plot(svg, plan, &timelines)?;
    report.figure(
        format!("timelines_{name}"),
        timelines
            .iter()
            .map(|(l, r)| {
                (
                    l.clone(),
                    json!({"throughput_ops": r.throughput, "memory_mib": r.memory}),
                )
            })
            .collect::<BTreeMap<_, _>>(),
    );
    Ok(())
}

/// Runs the experiment.
pub fn run(args: &RewriteArgs) -> Result<()> {
    let common = args.common.clone().resolved();
    ensure_redis()?;
    pin_self();
    let keys = args
        .keys
        .unwrap_or(if common.quick { 100_000 } else { 1_000_000 });
    let values = match (&args.values[..], common.quick) {
        ([], true) => vec![100],
        ([], false) => vec![100, 1024],
        (v, _) => v.to_vec(),
    };
    let (steady, tail) = if common.quick { (1.0, 0.5) } else { (3.0, 1.0) };
    let steady = args.steady.unwrap_or(steady);
    let scratch = report::disk_scratch_dir()?.join("rewrite");
    let mut report = Report::new("rewrite", common.quick, common.runs());
    report.note(format!("servers on cores {SERVER_CORES}{}, the bench's {} SET connections (one event-driven thread, one SET outstanding each) pinned to core {CLIENT_CORE}; data on {} (the disk)", if args.pin_loops { format!(" (--pin-loops: event loops on core {SERVER_LOOP_CORE} by server_cpulist, rewrites on {SERVER_CORES} by aof_rewrite_cpulist)") } else { String::new() }, args.connections, scratch.display()));
    report.note(format!("ratios are {FERRITE} (aof-rewrite-threads 2 = cores) over redis_preamble (aof-use-rdb-preamble yes) unless named otherwise; for durations, memory, latency and recovery lower is better, for throughput higher; ratios of medians"));
    report.note("rewrite_ms: BGREWRITEAOF sent until INFO persistence shows it finished (polled every 5 ms); memory: anonymous + shmem memory of the server, every 50 ms: RssAnon + RssShmem from /proc/PID/status while it has no children, Pss_Anon + Pss_Shmem from smaps_rollup of it and its fork children otherwise; recovery_ms: restart after SIGKILL until PING answers (DBSIZE checked)");
    let mut all_medians = BTreeMap::new();
    let mut all_runs = BTreeMap::new();
    for (index, value_bytes) in values.iter().enumerate() {
        let plan = Plan {
            pin_loops: args.pin_loops,
            keys,
            value_bytes: *value_bytes,
            connections: args.connections,
            steady: Duration::from_secs_f64(steady),
            tail: Duration::from_secs_f64(tail),
        };
        let (m, first, runs) = dataset(&plan, index, &common, &scratch, &args.configs)?;
        let name = format!("v{value_bytes}");
        record_ratios(&mut report, &m, &name, index == 0);
        let svg_name = if index == 0 {
            "rewrite.svg".to_string()
        } else {
            format!("rewrite_{name}.svg")
        };
        record_timelines(&mut report, &common.out.join(svg_name), &plan, &name, first)?;
        all_medians.insert(
            name.clone(),
            json!({"keys": keys, "value_bytes": value_bytes, "medians": m}),
        );
        all_runs.insert(name, runs);
    }
    report.figure("datasets", &all_medians);
    report.figure("runs", &all_runs);
    let json_path = report.write(&common.out)?;
    for (k, v) in report.ratios() {
        println!("{k:<44} {v:.3}");
    }
    println!(
        "wrote {} and the plots in {}",
        json_path.display(),
        common.out.display()
    );
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(())
}
