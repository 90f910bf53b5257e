//! The cluster experiment (issue #42): a Redis Cluster of three primaries
//! of Ferrite against one of redis-server 7, built the same way
//! (`redis-cli --cluster create`) on this machine, under the same client
//! load: `redis-benchmark --cluster -t set,get`, 50 clients, 256-byte
//! values, pipeline 1 and 16. Neither system persists (Redis without AOF
//! or RDB, Ferrite without its log), so the figures compare the command
//! path with cluster routing, not the logs. Every server is pinned to
//! core 0 and the client to core 1, as in the kv experiment; the systems
//! alternate run by run so drift of the shared host hits both.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::kv::{ensure_redis, server_command, spawn_server, Running, CLIENT_CORE};
use crate::report::{self, median, Panel, Report};
use crate::Common;

const PRIMARIES: u16 = 3;
const CLIENTS: usize = 50;
const VALUE_BYTES: usize = 256;
const PIPELINES: [usize; 2] = [1, 16];
/// Client ports from here; the bus ports are 10,000 above.
const BASE_PORT: u16 = 17400;
const SYSTEMS: [&str; 2] = ["redis", "ferrite"];

/// Starts one cluster node of `system` on `port` with its files in `dir`.
fn start_node(system: &str, port: u16, dir: &Path) -> Result<Running> {
    let mut cmd = server_command(system == "redis", dir)?;
    cmd.args(["--appendonly", "no", "--save", ""]).args([
        "--port",
        &port.to_string(),
        "--cluster-enabled",
        "yes",
    ]);
    spawn_server(cmd, port, system)
}

/// A three-primary cluster of `system`, joined by `redis-cli --cluster
/// create`, returned once every node reports `cluster_state:ok`.
fn start_cluster(system: &str, base: u16, dir: &Path) -> Result<Vec<Running>> {
    let mut nodes = Vec::new();
    for i in 0..PRIMARIES {
        nodes.push(start_node(
            system,
            base + i,
            &dir.join(format!("{system}-{i}")),
        )?);
    }
    let addresses: Vec<String> = nodes
        .iter()
        .map(|n| format!("127.0.0.1:{}", n.port))
        .collect();
    let status = Command::new("redis-cli")
        .args(["--cluster", "create"])
        .args(&addresses)
        .arg("--cluster-yes")
        .stdout(Stdio::null())
        .status()
        .context("running redis-cli --cluster create")?;
    if !status.success() {
        bail!("redis-cli --cluster create failed for {system}");
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    for node in &nodes {
        loop {
            let out = Command::new("redis-cli")
                .args(["-p", &node.port.to_string(), "cluster", "info"])
                .output()
                .context("running redis-cli cluster info")?;
            if String::from_utf8_lossy(&out.stdout).contains("cluster_state:ok") {
                break;
            }
            if Instant::now() > deadline {
                bail!("{system} cluster never reached cluster_state:ok");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    Ok(nodes)
}

/// One `redis-benchmark --cluster` run: per test (`set`, `get`), its
/// requests per second and p99 latency in ms.
fn benchmark(port: u16, pipeline: usize, requests: usize) -> Result<BTreeMap<String, (f64, f64)>> {
    let output = Command::new("taskset")
        .args(["-c", CLIENT_CORE, "redis-benchmark", "--cluster"])
        .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-t", "set,get"])
        .args(["-d", &VALUE_BYTES.to_string(), "-c", &CLIENTS.to_string()])
        .args(["-P", &pipeline.to_string(), "-n", &requests.to_string()])
        .args(["-r", "100000", "--csv"])
        .output()
        .context("running redis-benchmark --cluster")?;
    let text = String::from_utf8_lossy(&output.stdout);
    let mut out = BTreeMap::new();
    // "test","rps","avg","min","p50","p95","p99","max"
    for line in text.lines() {
        let cells: Vec<&str> = line.split(',').map(|c| c.trim_matches('"')).collect();
        if let [name, rps, _, _, _, _, p99, ..] = cells.as_slice() {
            if let (Ok(rps), Ok(p99)) = (rps.parse::<f64>(), p99.parse::<f64>()) {
                out.insert(name.to_ascii_lowercase(), (rps, p99));
            }
        }
    }
    if out.len() < 2 || !output.status.success() {
        bail!(
            "redis-benchmark --cluster gave no figures: {text} {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(out)
}

/// Figures of one system: `<op>_p<pipeline>_rps` and `..._p99_ms`,
/// medians over the runs.
type Figures = BTreeMap<String, f64>;

/// Runs the experiment.
pub fn run(common: &Common) -> Result<()> {
    ensure_redis()?;
    let runs = common.runs();
    let mut report = Report::new("cluster", common.quick, runs);
    let _idle = crate::idle::IdlePolicy::hold_for(common.host_idle, &mut report);
    let dir = report::disk_scratch_dir()?.join("cluster");
    report.note("three primaries per system on one machine (loopback), every server pinned to core 0, redis-benchmark --cluster pinned to core 1; neither system persists");
    report.note("ratios: throughput Ferrite/Redis (> 1 means Ferrite is faster), p99 Redis/Ferrite (> 1 means Ferrite's p99 is lower)");
    let requests = if common.quick { 50_000 } else { 200_000 };
    let mut samples: BTreeMap<&str, BTreeMap<String, Vec<f64>>> = BTreeMap::new();
    for run in 0..runs {
        for (s, system) in SYSTEMS.iter().enumerate() {
            let base = BASE_PORT + (s as u16) * 10;
            let nodes = start_cluster(system, base, &dir)?;
            for p in PIPELINES {
                let figures = benchmark(nodes[0].port, p, requests * p.min(4))?;
                for (op, (rps, p99)) in figures {
                    let into = samples.entry(system).or_default();
                    into.entry(format!("{op}_p{p}_rps")).or_default().push(rps);
                    into.entry(format!("{op}_p{p}_p99_ms"))
                        .or_default()
                        .push(p99);
                    println!("run {run} {system:<8} {op} P{p}: {rps:.0} rps, p99 {p99:.3} ms");
                }
            }
            drop(nodes);
        }
    }
    let results: BTreeMap<String, Figures> = samples
        .iter()
        .map(|(system, figures)| {
            let medians = figures
                .iter()
                .map(|(k, v)| (k.clone(), median(v)))
                .collect();
            (system.to_string(), medians)
        })
        .collect();
    add_ratios(&mut report, &results);
    report.figure("figures", &results);
    let json = report.write(&common.out)?;
    let svg = plot(&common.out, &results)?;
    for (k, v) in report.ratios() {
        println!("{k:<40} {v:.3}");
    }
    println!("wrote {} and {}", json.display(), svg.display());
    Ok(())
}

fn add_ratios(report: &mut Report, results: &BTreeMap<String, Figures>) {
    let get = |system: &str, key: &str| results.get(system).and_then(|f| f.get(key)).copied();
    for op in ["set", "get"] {
        for p in PIPELINES {
            let rps = format!("{op}_p{p}_rps");
            if let (Some(f), Some(r)) = (get("ferrite", &rps), get("redis", &rps)) {
                report.ratio(format!("{op}_p{p}_rps_vs_redis"), f / r);
            }
            let p99 = format!("{op}_p{p}_p99_ms");
            if let (Some(f), Some(r)) = (get("ferrite", &p99), get("redis", &p99)) {
                if f > 0.0 {
                    report.ratio(format!("{op}_p{p}_p99_redis_over_ferrite"), r / f);
                }
            }
        }
    }
}

fn plot(dir: &Path, results: &BTreeMap<String, Figures>) -> Result<std::path::PathBuf> {
    let panel = |op: &str, what: &str, label: &str| Panel {
        title: format!("{} 256 B, 50 clients, 3 primaries", op.to_uppercase()),
        x_label: "pipeline depth".into(),
        y_label: label.into(),
        log_x: true,
        log_y: false,
        series: report::series_by_system(results, &PIPELINES, |p| format!("{op}_p{p}_{what}")),
    };
    let panels = vec![
        panel("set", "rps", "requests/s"),
        panel("get", "rps", "requests/s"),
        panel("set", "p99_ms", "p99 latency (ms)"),
        panel("get", "p99_ms", "p99 latency (ms)"),
    ];
    let path = dir.join("cluster.svg");
    report::plot(
        &path,
        "Redis Cluster of Ferrite vs of redis-server 7 (redis-benchmark --cluster)",
        &panels,
    )?;
    Ok(path)
}
