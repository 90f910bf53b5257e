//! The kv experiment: Ferrite's server against Debian's redis-server 7 in
//! the same run, with the same load generators (redis-benchmark and
//! [`crate::kvload`]), server pinned to core 0 and clients to core 1:
//! SET and GET of 256-byte values from 50 clients, pipeline 1 and 16, for
//! `appendfsync always | everysec | no`, Redis's AOF on the disk and
//! Ferrite's log on the disk and on emulated PM; plus resident memory for
//! one million 100-byte values; blocking pops (`kv_blocking`): BLPOP
//! woken by LPUSH, and 1,000 blocked clients woken in FIFO order; and
//! scripts and streams (`kv_streams`): EVALSHA, XADD, a consumer group and
//! memory per stream entry; and `appendfsync always` with the log on a
//! file, on PM and behind a PM write buffer (`kv_wbuf_log`). `--only` runs
//! a subset of these parts.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::idle::IdlePolicy;
use crate::report::{self, median, Panel, Report};
use crate::Common;

const CLIENTS: usize = 50;
const VALUE_BYTES: usize = 256;
const PIPELINES: [usize; 2] = [1, 16];
const MEMORY_KEYS: usize = 1_000_000;
const MEMORY_VALUE_BYTES: usize = 100;
const SERVER_CORE: &str = "0";
pub(crate) const CLIENT_CORE: &str = "1";
pub(crate) const BASE_PORT: u16 = 17000;

/// One server configuration of the matrix.
#[derive(Clone, Debug)]
pub(crate) struct ServerSpec {
    /// `redis` or `ferrite`.
    pub(crate) system: &'static str,
    /// `off` (no log), `always`, `everysec`, `no`.
    pub(crate) fsync: &'static str,
    /// `disk` or `pm` (Ferrite only).
    pub(crate) medium: &'static str,
}

impl ServerSpec {
    pub(crate) fn label(&self) -> String {
        match (self.system, self.fsync) {
            ("redis", "off") => "redis_off".into(),
            ("redis", f) => format!("redis_{f}"),
            (_, f) => format!("ferrite_{f}_{}", self.medium),
        }
    }
}

fn matrix() -> Vec<ServerSpec> {
    let mut out = vec![ServerSpec {
        system: "redis",
        fsync: "off",
        medium: "disk",
    }];
    for fsync in ["always", "everysec", "no"] {
        out.push(ServerSpec {
            system: "redis",
            fsync,
            medium: "disk",
        });
        for medium in ["disk", "pm"] {
            out.push(ServerSpec {
                system: "ferrite",
                fsync,
                medium,
            });
        }
    }
    out
}

/// A running server process, killed on drop.
pub(crate) struct Running {
    pub(crate) child: Child,
    pub(crate) port: u16,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn wait_for_port(port: u16) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() > deadline {
            bail!("server on port {port} did not start");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// The command that starts redis-server (`redis`) or Ferrite's server on
/// the bench's server core, output discarded, its files in `dir` (emptied
/// first); the caller adds the settings.
pub(crate) fn server_command(redis: bool, dir: &Path) -> Result<Command> {
    server_command_bin(redis, None, dir)
}

/// [`server_command`], Ferrite's server taken from the build `bin` when
/// given (an A/B of two builds), else from this program.
fn server_command_bin(redis: bool, bin: Option<&Path>, dir: &Path) -> Result<Command> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut cmd = Command::new("taskset");
    cmd.args(["-c", SERVER_CORE])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    match (redis, bin) {
        (true, _) => cmd.arg("redis-server"),
        (false, Some(bin)) => cmd.arg(bin).arg(serve_subcommand(bin)),
        (false, None) => cmd.arg(std::env::current_exe()?).arg("kv-serve"),
    };
    cmd.arg("--dir").arg(dir);
    Ok(cmd)
}

/// The subcommand that runs the kv server in the Ferrite build `bin`: a
/// `ferrite-bench` build serves through its hidden `kv-serve`, the
/// `ferrite` binary through `serve`; both take the same `--name value`
/// settings and run the same server with the same allocator.
pub(crate) fn serve_subcommand(bin: &Path) -> &'static str {
    let name = bin.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if name.contains("bench") {
        "kv-serve"
    } else {
        "serve"
    }
}

/// Whether `path` names a file, for `--alt-bin` (checked before any server
/// starts, so a typo costs no run).
pub(crate) fn check_alt_bin(path: &Path) -> Result<()> {
    let meta = std::fs::metadata(path).with_context(|| format!("--alt-bin {}", path.display()))?;
    if !meta.is_file() {
        bail!("--alt-bin {}: not a file", path.display());
    }
    Ok(())
}

/// Starts `cmd` and returns once its server accepts connections on `port`.
pub(crate) fn spawn_server(mut cmd: Command, port: u16, what: &str) -> Result<Running> {
    let child = cmd.spawn().with_context(|| format!("starting {what}"))?;
    let running = Running { child, port };
    wait_for_port(port)?;
    Ok(running)
}

pub(crate) fn start(spec: &ServerSpec, port: u16, dir: &Path) -> Result<Running> {
    start_bin(spec, None, port, dir)
}

/// [`start`], a Ferrite server taken from the build `bin` when given.
pub(crate) fn start_bin(
    spec: &ServerSpec,
    bin: Option<&Path>,
    port: u16,
    dir: &Path,
) -> Result<Running> {
    let mut cmd = server_command_bin(spec.system == "redis", bin, dir)?;
    cmd.args(["--port", &port.to_string()]);
    if spec.system == "redis" {
        cmd.args(["--save", ""]);
        match spec.fsync {
            "off" => cmd.args(["--appendonly", "no"]),
            f => cmd.args(["--appendonly", "yes", "--appendfsync", f]),
        };
    } else {
        let device = if spec.medium == "pm" {
            "pmem-emulated"
        } else {
            "file"
        };
        match spec.fsync {
            // No persistence at all, as Redis's `--save ''` beside it.
            "off" => cmd.args(["--appendonly", "no", "--save", ""]),
            f => cmd.args(["--appendfsync", f, "--log-device", device]),
        };
    }
    spawn_server(cmd, port, &spec.label())
}

/// redis-benchmark's requests per second for SET and GET.
fn redis_benchmark(port: u16, pipeline: usize, requests: usize) -> Result<BTreeMap<String, f64>> {
    redis_benchmark_tests(port, "set,get", pipeline, requests, 2)
}

/// redis-benchmark's requests per second for the one test `op` (`set`).
pub(crate) fn redis_benchmark_op(
    port: u16,
    op: &str,
    pipeline: usize,
    requests: usize,
) -> Result<f64> {
    let figures = redis_benchmark_tests(port, op, pipeline, requests, 1)?;
    figures
        .get(op)
        .copied()
        .with_context(|| format!("redis-benchmark gave no {op} figure: {figures:?}"))
}

/// redis-benchmark's requests per second for `tests` (its `-t` list),
/// expecting at least `expected` figures.
fn redis_benchmark_tests(
    port: u16,
    tests: &str,
    pipeline: usize,
    requests: usize,
    expected: usize,
) -> Result<BTreeMap<String, f64>> {
    let output = Command::new("taskset")
        .args([
            "-c",
            CLIENT_CORE,
            "redis-benchmark",
            "-p",
            &port.to_string(),
            "-t",
            tests,
        ])
        .args(["-d", &VALUE_BYTES.to_string(), "-c", &CLIENTS.to_string()])
        .args([
            "-P",
            &pipeline.to_string(),
            "-n",
            &requests.to_string(),
            "--csv",
        ])
        .output()
        .context("running redis-benchmark")?;
    let text = String::from_utf8_lossy(&output.stdout);
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let cells: Vec<&str> = line.split(',').map(|c| c.trim_matches('"')).collect();
        if let [name, rps, ..] = cells.as_slice() {
            if let Ok(rps) = rps.parse::<f64>() {
                out.insert(name.to_ascii_lowercase(), rps);
            }
        }
    }
    if out.len() < expected {
        bail!("redis-benchmark gave no figures: {text}");
    }
    Ok(out)
}

/// The bench crate's own client, pinned like redis-benchmark.
fn own_client(
    port: u16,
    op: &str,
    pipeline: usize,
    requests: usize,
    value_bytes: usize,
) -> Result<f64> {
    let output = Command::new("taskset")
        .args(["-c", CLIENT_CORE])
        .arg(std::env::current_exe()?)
        .args(["kv-load", "--port", &port.to_string(), "--op", op])
        .args([
            "--clients",
            &CLIENTS.to_string(),
            "--pipeline",
            &pipeline.to_string(),
        ])
        .args([
            "--requests",
            &requests.to_string(),
            "--value-bytes",
            &value_bytes.to_string(),
        ])
        .output()
        .context("running kv-load")?;
    let text = String::from_utf8_lossy(&output.stdout);
    text.trim().parse::<f64>().with_context(|| {
        format!(
            "kv-load said {text:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

/// Measures one server configuration; keys like `set_p1_rb` / `get_p16_own`.
fn measure(
    spec: &ServerSpec,
    port: u16,
    dir: &Path,
    common: &Common,
) -> Result<BTreeMap<String, f64>> {
    let server = start(spec, port, dir)?;
    let mut samples: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for pipeline in PIPELINES {
        let requests =
            if common.quick { 20_000 } else { 200_000 } * if pipeline > 1 { 5 } else { 1 };
        for _ in 0..common.runs() {
            for (op, rps) in redis_benchmark(server.port, pipeline, requests)? {
                samples
                    .entry(format!("{op}_p{pipeline}_rb"))
                    .or_default()
                    .push(rps);
            }
            for op in ["set", "get"] {
                let rps = own_client(server.port, op, pipeline, requests, VALUE_BYTES)?;
                samples
                    .entry(format!("{op}_p{pipeline}_own"))
                    .or_default()
                    .push(rps);
            }
        }
    }
    drop(server);
    let _ = std::fs::remove_dir_all(dir);
    Ok(samples.into_iter().map(|(k, v)| (k, median(&v))).collect())
}

pub(crate) fn resident_bytes(pid: u32) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .context("no VmRSS")?;
    Ok(kb * 1024)
}

/// Resident memory of each server after loading a million 100-byte values.
fn memory(dir: &Path, port: u16) -> Result<BTreeMap<&'static str, f64>> {
    let mut out = BTreeMap::new();
    for system in ["redis", "ferrite"] {
        let spec = ServerSpec {
            system,
            fsync: "off",
            medium: "disk",
        };
        let server = start(&spec, port, dir)?;
        let before = resident_bytes(server.child.id())?;
        own_client(server.port, "fill", 1, MEMORY_KEYS, MEMORY_VALUE_BYTES)?;
        let after = resident_bytes(server.child.id())?;
        tracing::info!(
            "{system}: {} MiB resident after {MEMORY_KEYS} keys ({} MiB empty)",
            after >> 20,
            before >> 20
        );
        out.insert(system, after as f64);
    }
    Ok(out)
}

pub(crate) fn ensure_redis() -> Result<()> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/install-redis.sh");
    let status = Command::new("bash")
        .arg(&script)
        .status()
        .context("running install-redis.sh")?;
    if !status.success() {
        bail!(
            "{} failed: redis-server and redis-benchmark are needed",
            script.display()
        );
    }
    Ok(())
}

fn add_ratios(report: &mut Report, results: &BTreeMap<String, BTreeMap<String, f64>>) {
    let get = |server: &str, key: &str| results.get(server).and_then(|m| m.get(key)).copied();
    for op in ["set", "get"] {
        for p in PIPELINES {
            for fsync in ["always", "everysec", "no"] {
                for medium in ["disk", "pm"] {
                    let ours = get(
                        &format!("ferrite_{fsync}_{medium}"),
                        &format!("{op}_p{p}_rb"),
                    );
                    for base in [format!("redis_{fsync}"), "redis_off".to_string()] {
                        if let (Some(o), Some(t)) = (ours, get(&base, &format!("{op}_p{p}_rb"))) {
                            report.ratio(format!("{op}_p{p}_{fsync}_{medium}_vs_{base}"), o / t);
                        }
                    }
                }
            }
        }
    }
    // GET does not touch the log: Ferrite (everysec on disk, the default)
    // against Redis without persistence.
    for p in PIPELINES {
        if let (Some(o), Some(t)) = (
            get("ferrite_everysec_disk", &format!("get_p{p}_rb")),
            get("redis_off", &format!("get_p{p}_rb")),
        ) {
            let key = if p == 1 {
                "get_p1_vs_redis".to_string()
            } else {
                format!("get_p{p}_vs_redis")
            };
            report.ratio(key, o / t);
        }
    }
}

fn plot(dir: &Path, results: &BTreeMap<String, BTreeMap<String, f64>>) -> Result<PathBuf> {
    let panels: Vec<Panel> = ["set", "get"]
        .iter()
        .map(|op| Panel {
            title: format!("{} 256 B, 50 clients (redis-benchmark)", op.to_uppercase()),
            x_label: "pipeline depth".into(),
            y_label: "requests/s".into(),
            log_x: true,
            log_y: false,
            series: report::series_by_system(results, &PIPELINES, |p| format!("{op}_p{p}_rb")),
        })
        .collect();
    let path = dir.join("kv.svg");
    report::plot(
        &path,
        "Ferrite vs redis-server 7: throughput by durability and medium",
        &panels,
    )?;
    Ok(path)
}

/// Blocking pops on both servers with AOF everysec on the disk (the same
/// durability): `blpop_rtt_p50_ferrite_over_redis` (latency: < 1 means
/// Ferrite wakes a blocked client sooner) and the FIFO figures.
fn blocking(report: &mut Report, disk: &Path, common: &Common) -> Result<()> {
    let mut figures: BTreeMap<String, BTreeMap<String, f64>> = BTreeMap::new();
    for (i, system) in ["redis", "ferrite"].into_iter().enumerate() {
        let spec = ServerSpec {
            system,
            fsync: "everysec",
            medium: "disk",
        };
        let port = BASE_PORT + 200 + i as u16;
        let server = start(&spec, port, &disk.join(format!("blocking-{system}")))?;
        let mut runs: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for _ in 0..common.runs() {
            for (k, v) in crate::kv_blocking::measure(server.port, common.quick)? {
                runs.entry(k).or_default().push(v);
            }
        }
        drop(server);
        let medians: BTreeMap<String, f64> =
            runs.into_iter().map(|(k, v)| (k, median(&v))).collect();
        println!("blocking {system:<8} {medians:?}");
        figures.insert(spec.label(), medians);
    }
    let get = |server: &str, key: &str| figures.get(server).and_then(|m| m.get(key)).copied();
    for (key, ratio) in [
        ("blpop_rtt_us_p50", "blpop_rtt_p50_ferrite_over_redis"),
        ("blpop_rtt_us_p99", "blpop_rtt_p99_ferrite_over_redis"),
        ("fifo_1000_wake_ms", "fifo_1000_wake_ferrite_over_redis"),
    ] {
        if let (Some(f), Some(r)) = (
            get("ferrite_everysec_disk", key),
            get("redis_everysec", key),
        ) {
            report.ratio(ratio, f / r);
        }
    }
    report.figure("blocking", &figures);
    Ok(())
}

/// The parts of the experiment, to run a subset while developing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Part {
    /// SET and GET by `appendfsync` level and log medium.
    Throughput,
    /// BLPOP woken by LPUSH, 1,000 blocked clients woken in order.
    Blocking,
    /// Resident memory for a million 100-byte values.
    Memory,
    /// EVALSHA, XADD, a consumer group, memory per stream entry.
    Streams,
    /// `appendfsync always` with the log on a file, on PM, and on a file
    /// behind a PM write buffer (`kv_wbuf_log`).
    WbufLog,
}

/// Options of the kv experiment.
#[derive(Clone, Debug, clap::Args)]
pub struct KvArgs {
    /// The options every experiment takes.
    #[command(flatten)]
    pub common: Common,
    /// Only these parts (comma-separated; default: all).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub only: Vec<Part>,
    /// SET/GET over TLS against redis-server's TLS instead (`kv_tls.rs`).
    #[arg(long)]
    pub tls: bool,
    /// Another Ferrite build (the `ferrite` binary, run with `serve`, or a
    /// `ferrite-bench`, run with `kv-serve`): in the streams part each
    /// Ferrite server is also run with it, labelled `<label>_alt`, in the
    /// same runs next to this build's, and the report gains
    /// `<ratio>_alt` (the same ratio for that build) and
    /// `<label>_alt_vs_<label>_<workload>` (its per-run rate over this
    /// build's, median). The other parts do not use it.
    #[arg(long)]
    pub alt_bin: Option<PathBuf>,
}

/// Runs the experiment.
pub fn run(args: &KvArgs) -> Result<()> {
    let common = &args.common.clone().resolved();
    let wanted = |part: Part| args.only.is_empty() || args.only.contains(&part);
    if let Some(bin) = &args.alt_bin {
        check_alt_bin(bin)?;
    }
    ensure_redis()?;
    let mut report = Report::new("kv", common.quick, common.runs());
    let _idle = IdlePolicy::hold_for(common.host_idle, &mut report);
    let disk = report::disk_scratch_dir()?.join("kv");
    let pm = report::pm_scratch_dir()?.join("kv");
    report.note("server pinned to core 0, clients to core 1 (taskset); ratios are Ferrite/Redis, > 1 means Ferrite is faster, except memory where < 1 means Ferrite uses less");
    report.note(format!(
        "Ferrite's PM log is emulated PM on {} (survives process crashes, not power failures)",
        pm.display()
    ));
    let mut results: BTreeMap<String, BTreeMap<String, f64>> = BTreeMap::new();
    if wanted(Part::Throughput) {
        for (i, spec) in matrix().iter().enumerate() {
            let dir = if spec.medium == "pm" {
                pm.join(spec.label())
            } else {
                disk.join(spec.label())
            };
            let figures = measure(spec, BASE_PORT + i as u16, &dir, common)?;
            println!(
                "{:<22} {}",
                spec.label(),
                figures
                    .iter()
                    .map(|(k, v)| format!("{k}={v:.0}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            );
            results.insert(spec.label(), figures);
        }
        add_ratios(&mut report, &results);
    }
    if wanted(Part::Blocking) {
        blocking(&mut report, &disk, common)?;
    }
    if wanted(Part::Memory) {
        let mem = memory(&disk.join("memory"), BASE_PORT + 100)?;
        if let (Some(f), Some(r)) = (mem.get("ferrite"), mem.get("redis")) {
            report.ratio("memory_1m_keys_vs_redis", f / r);
        }
        report.figure("memory_resident_bytes", &mem);
    }
    if wanted(Part::Streams) {
        crate::kv_streams::run(&mut report, &disk, &pm, common, args.alt_bin.as_deref())?;
    }
    if wanted(Part::WbufLog) {
        let svg = crate::kv_wbuf_log::run(&mut report, &disk, &pm, common)?;
        println!("wrote {}", svg.display());
    }
    let json = if results.is_empty() {
        report.write(&common.out)?
    } else {
        report.figure("throughput_rps", &results);
        let json = report.write(&common.out)?;
        let svg = plot(&common.out, &results)?;
        println!("wrote {}", svg.display());
        json
    };
    for (k, v) in report.ratios() {
        println!("{k:<48} {v:.3}");
    }
    println!("wrote {}", json.display());
    Ok(())
}
