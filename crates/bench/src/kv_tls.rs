//! `kv --tls`: SET and GET over TLS, Ferrite against redis-server 7 with
//! its own TLS (OpenSSL) in the same run, both driven by
//! `redis-benchmark --tls`. Same shape as the plain kv experiment (256-byte
//! values, 50 clients, pipeline 1 and 16, server on core 0 and the client
//! on core 1), with persistence off on both so the figures are the event
//! loop and its TLS: handshakes happen once per client, then every request
//! and reply is encrypted and decrypted.
//!
//! The certificates come from `scripts/gen-tls-certs.sh` (an EC P-256
//! server certificate; TLS 1.3 with AES-128-GCM, which both ends pick by
//! default). Clients are not asked for certificates (`tls-auth-clients
//! no`) on either server.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};

use crate::idle::IdlePolicy;
use crate::kv::{ensure_redis, server_command, spawn_server, Running};
use crate::report::{self, median, Panel, Report};
use crate::Common;

const CLIENTS: usize = 50;
const VALUE_BYTES: usize = 256;
const PIPELINES: [usize; 2] = [1, 16];
const CLIENT_CORE: &str = "1";
const BASE_PORT: u16 = 17200;
const SYSTEMS: [&str; 2] = ["redis", "ferrite"];

/// Makes (or reuses) the test certificates in `dir`.
fn certificates(dir: &Path) -> Result<()> {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scripts/gen-tls-certs.sh"
    );
    let status = Command::new("bash")
        .arg(script)
        .arg(dir)
        .stdout(Stdio::null())
        .status()
        .context("running scripts/gen-tls-certs.sh")?;
    if !status.success() {
        bail!("scripts/gen-tls-certs.sh failed");
    }
    Ok(())
}

/// The TLS directives both servers get, as flags.
fn tls_flags(port: u16, certs: &Path) -> Vec<String> {
    let file = |name: &str| certs.join(name).display().to_string();
    vec![
        "--port".into(),
        "0".into(),
        "--tls-port".into(),
        port.to_string(),
        "--tls-cert-file".into(),
        file("server.crt"),
        "--tls-key-file".into(),
        file("server.key"),
        "--tls-ca-cert-file".into(),
        file("ca.crt"),
        "--tls-auth-clients".into(),
        "no".into(),
        "--appendonly".into(),
        "no".into(),
    ]
}

fn start(system: &str, port: u16, dir: &Path, certs: &Path) -> Result<Running> {
    let mut cmd = server_command(system == "redis", dir)?;
    // No snapshots at exit either: persistence is off on both.
    cmd.args(["--save", ""]).args(tls_flags(port, certs));
    spawn_server(cmd, port, system)
}

/// redis-benchmark --tls: requests per second for SET and GET.
fn benchmark(
    port: u16,
    certs: &Path,
    pipeline: usize,
    requests: usize,
) -> Result<BTreeMap<String, f64>> {
    let output = Command::new("taskset")
        .args(["-c", CLIENT_CORE, "redis-benchmark", "--tls", "--cacert"])
        .arg(certs.join("ca.crt"))
        .args(["-p", &port.to_string(), "-t", "set,get"])
        .args(["-d", &VALUE_BYTES.to_string(), "-c", &CLIENTS.to_string()])
        .args(["-P", &pipeline.to_string(), "-n", &requests.to_string()])
        .arg("--csv")
        .output()
        .context("running redis-benchmark --tls")?;
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
        bail!(
            "redis-benchmark --tls gave no figures: {text} {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(out)
}

/// Medians per `{op}_p{pipeline}` for one server. The two servers take
/// turns per repetition, so slow phases of a shared host fall on both.
fn measure_all(
    scratch: &Path,
    certs: &Path,
    common: &Common,
) -> Result<BTreeMap<String, BTreeMap<String, f64>>> {
    let mut samples: BTreeMap<String, BTreeMap<String, Vec<f64>>> = BTreeMap::new();
    let servers: Vec<Running> = SYSTEMS
        .iter()
        .enumerate()
        .map(|(i, s)| start(s, BASE_PORT + i as u16, &scratch.join(s), certs))
        .collect::<Result<_>>()?;
    for _ in 0..common.runs() {
        for pipeline in PIPELINES {
            let requests =
                if common.quick { 20_000 } else { 200_000 } * if pipeline > 1 { 5 } else { 1 };
            for (system, server) in SYSTEMS.iter().zip(&servers) {
                for (op, rps) in benchmark(server.port, certs, pipeline, requests)? {
                    samples
                        .entry(system.to_string())
                        .or_default()
                        .entry(format!("{op}_p{pipeline}"))
                        .or_default()
                        .push(rps);
                }
            }
        }
    }
    drop(servers);
    Ok(samples
        .into_iter()
        .map(|(s, m)| (s, m.into_iter().map(|(k, v)| (k, median(&v))).collect()))
        .collect())
}

fn plot(dir: &Path, results: &BTreeMap<String, BTreeMap<String, f64>>) -> Result<PathBuf> {
    let panels: Vec<Panel> = ["set", "get"]
        .iter()
        .map(|op| Panel {
            title: format!("{} 256 B over TLS, 50 clients", op.to_uppercase()),
            x_label: "pipeline depth".into(),
            y_label: "requests/s".into(),
            log_x: true,
            log_y: false,
            series: report::series_by_system(results, &PIPELINES, |p| format!("{op}_p{p}")),
        })
        .collect();
    let path = dir.join("kv_tls.svg");
    report::plot(
        &path,
        "Ferrite (rustls) vs redis-server 7 (OpenSSL): SET/GET over TLS",
        &panels,
    )?;
    Ok(path)
}

/// Runs the experiment.
pub fn run(common: &Common) -> Result<()> {
    ensure_redis()?;
    let mut report = Report::new("kv_tls", common.quick, common.runs());
    let _idle = IdlePolicy::hold_for(common.host_idle, &mut report);
    // Absolute: redis-server reads its certificates after moving to `dir`.
    let scratch = std::path::absolute(report::disk_scratch_dir()?.join("kv_tls"))?;
    let certs = scratch.join("certs");
    certificates(&certs)?;
    report.note("server pinned to core 0, redis-benchmark --tls to core 1 (taskset); persistence off on both; ratios are Ferrite/Redis, > 1 means Ferrite is faster");
    let results = measure_all(&scratch, &certs, common)?;
    for (system, figures) in &results {
        println!(
            "{system:<8} {}",
            figures
                .iter()
                .map(|(k, v)| format!("{k}={v:.0}"))
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
    if let (Some(f), Some(r)) = (results.get("ferrite"), results.get("redis")) {
        for (key, ours) in f {
            if let Some(theirs) = r.get(key) {
                report.ratio(format!("{key}_tls_vs_redis"), ours / theirs);
            }
        }
    }
    report.figure("throughput_rps", &results);
    let json = report.write(&common.out)?;
    let svg = plot(&common.out, &results)?;
    for (k, v) in report.ratios() {
        println!("{k:<32} {v:.3}");
    }
    println!("wrote {} and {}", json.display(), svg.display());
    let _ = std::fs::remove_dir_all(scratch.join("redis"));
    let _ = std::fs::remove_dir_all(scratch.join("ferrite"));
    Ok(())
}
