//! The kv experiment: Ferrite's server against Debian's redis-server 7 in
//! the same run, with the same load generators (redis-benchmark and
//! [`crate::kvload`]), server pinned to core 0 and clients to core 1:
//! SET and GET of 256-byte values from 50 clients, pipeline 1 and 16, for
//! `appendfsync always | everysec | no`, Redis's AOF on the disk and
//! Ferrite's log on the disk and on emulated PM; a BLPOP served by an
//! LPUSH, one client pair, round trips per second; plus resident memory
//! for one million 100-byte values.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::idle::IdlePolicy;
use crate::report::{self, median, Panel, Report, Series};
use crate::Common;

const CLIENTS: usize = 50;
const VALUE_BYTES: usize = 256;
const PIPELINES: [usize; 2] = [1, 16];
const MEMORY_KEYS: usize = 1_000_000;
const MEMORY_VALUE_BYTES: usize = 100;
const SERVER_CORE: &str = "0";
const CLIENT_CORE: &str = "1";
const BASE_PORT: u16 = 17000;

/// One server configuration of the matrix.
#[derive(Clone, Debug)]
struct ServerSpec {
    /// `redis` or `ferrite`.
    system: &'static str,
    /// `off` (no log), `always`, `everysec`, `no`.
    fsync: &'static str,
    /// `disk` or `pm` (Ferrite only).
    medium: &'static str,
}

impl ServerSpec {
    fn label(&self) -> String {
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

fn start(spec: &ServerSpec, port: u16, dir: &Path) -> Result<Running> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir)?;
    let mut cmd = Command::new("taskset");
    cmd.args(["-c", SERVER_CORE])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if spec.system == "redis" {
        cmd.args([
            "redis-server",
            "--port",
            &port.to_string(),
            "--save",
            "",
            "--dir",
        ])
        .arg(dir);
        match spec.fsync {
            "off" => cmd.args(["--appendonly", "no"]),
            f => cmd.args(["--appendonly", "yes", "--appendfsync", f]),
        };
    } else {
        cmd.arg(std::env::current_exe()?)
            .args(["kv-serve", "--port", &port.to_string(), "--dir"])
            .arg(dir);
        let device = if spec.medium == "pm" {
            "pmem-emulated"
        } else {
            "file"
        };
        match spec.fsync {
            "off" => cmd.args(["--appendonly", "no"]),
            f => cmd.args(["--appendfsync", f, "--log-device", device]),
        };
    }
    let child = cmd
        .spawn()
        .with_context(|| format!("starting {}", spec.label()))?;
    let running = Running { child, port };
    wait_for_port(port)?;
    Ok(running)
}

/// redis-benchmark's requests per second for SET and GET.
fn redis_benchmark(port: u16, pipeline: usize, requests: usize) -> Result<BTreeMap<String, f64>> {
    let output = Command::new("taskset")
        .args([
            "-c",
            CLIENT_CORE,
            "redis-benchmark",
            "-p",
            &port.to_string(),
            "-t",
            "set,get",
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
    if out.len() < 2 {
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

/// BLPOP served by LPUSH: one connection blocks on a key, another pushes
/// to it, and a round ends when the blocked client has its element.
/// Returns rounds per second (one client pair, so latency-bound).
fn blpop_roundtrips(port: u16, rounds: usize) -> Result<f64> {
    use std::io::{Read, Write};
    use std::net::TcpStream;
    let mut blocker = TcpStream::connect(("127.0.0.1", port))?;
    let mut pusher = TcpStream::connect(("127.0.0.1", port))?;
    blocker.set_nodelay(true)?;
    pusher.set_nodelay(true)?;
    // Whichever command the server reads first, the push answers 1 and
    // the pop gets the element.
    let pushed: &[u8] = b":1\r\n";
    let popped: &[u8] = b"*2\r\n$8\r\nbench:bq\r\n$1\r\nv\r\n";
    let mut buf = [0u8; 64];
    let started = Instant::now();
    for _ in 0..rounds {
        blocker.write_all(b"BLPOP bench:bq 0\r\n")?;
        pusher.write_all(b"LPUSH bench:bq v\r\n")?;
        pusher.read_exact(&mut buf[..pushed.len()])?;
        if &buf[..pushed.len()] != pushed {
            bail!(
                "LPUSH answered {:?}",
                String::from_utf8_lossy(&buf[..pushed.len()])
            );
        }
        blocker.read_exact(&mut buf[..popped.len()])?;
        if &buf[..popped.len()] != popped {
            bail!(
                "BLPOP answered {:?}",
                String::from_utf8_lossy(&buf[..popped.len()])
            );
        }
    }
    Ok(rounds as f64 / started.elapsed().as_secs_f64())
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
    for _ in 0..common.runs() {
        let rounds = if common.quick { 2_000 } else { 20_000 };
        samples
            .entry("blpop_lpush_own".into())
            .or_default()
            .push(blpop_roundtrips(server.port, rounds)?);
    }
    drop(server);
    let _ = std::fs::remove_dir_all(dir);
    Ok(samples.into_iter().map(|(k, v)| (k, median(&v))).collect())
}

fn resident_bytes(pid: u32) -> Result<u64> {
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
    // A blocked pop served by a push, against Redis at the same fsync.
    for fsync in ["always", "everysec", "no"] {
        for medium in ["disk", "pm"] {
            if let (Some(o), Some(t)) = (
                get(&format!("ferrite_{fsync}_{medium}"), "blpop_lpush_own"),
                get(&format!("redis_{fsync}"), "blpop_lpush_own"),
            ) {
                report.ratio(
                    format!("blpop_lpush_{fsync}_{medium}_vs_redis_{fsync}"),
                    o / t,
                );
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
            series: results
                .iter()
                .map(|(server, figures)| Series {
                    label: server.clone(),
                    points: PIPELINES
                        .iter()
                        .filter_map(|p| {
                            figures
                                .get(&format!("{op}_p{p}_rb"))
                                .map(|v| (*p as f64, *v))
                        })
                        .collect(),
                })
                .collect(),
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

/// Runs the experiment.
pub fn run(common: &Common) -> Result<()> {
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
    let mem = memory(&disk.join("memory"), BASE_PORT + 100)?;
    if let (Some(f), Some(r)) = (mem.get("ferrite"), mem.get("redis")) {
        report.ratio("memory_1m_keys_vs_redis", f / r);
    }
    report.figure("memory_resident_bytes", &mem);
    report.figure("throughput_rps", &results);
    let json = report.write(&common.out)?;
    let svg = plot(&common.out, &results)?;
    for (k, v) in report.ratios() {
        println!("{k:<48} {v:.3}");
    }
    println!("wrote {} and {}", json.display(), svg.display());
    Ok(())
}
