//! The kv experiment's `wbuf-log` part (issue #38): Ferrite's server with
//! `appendfsync always`, its log in a file on the disk (`fdatasync` per
//! group commit), on emulated persistent memory (the whole log mapped), and
//! in a file on the disk behind a PM write buffer (`log-device wbuf`, the
//! buffer on the same emulated PM). SET of 256-byte values from 50 clients
//! (redis-benchmark), pipeline 1 and 16; the three servers take turns
//! within each run, so host noise falls on all of them alike, and the
//! ratios are medians of the per-run ratios.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result};

use crate::kv::{redis_benchmark_op, wait_for_port, Running, BASE_PORT};
use crate::report::{self, median, median_ratio, Panel, Report, Series};
use crate::Common;

const PIPELINES: [usize; 2] = [1, 16];
/// The log media compared, as `log-device` names them (the PM one is
/// emulated: a mapped file on tmpfs).
const MEDIA: [&str; 3] = ["file", "pmem-emulated", "wbuf"];
const SERVER_CORE: &str = "0";
/// PM per write buffer: the server's default.
const WBUF_BYTES: &str = "64mb";

/// Starts the bench binary's server with its log on `medium`: the data
/// directory on the disk, except for the PM log, whose directory is on
/// the PM scratch; a write buffer's PM goes to the PM scratch too.
fn start(medium: &str, port: u16, disk: &Path, pm: &Path) -> Result<Running> {
    let dir = if medium == "pmem-emulated" {
        pm.join("log-pm")
    } else {
        disk.join(format!("log-{medium}"))
    };
    let buffers = pm.join("log-wbuf-buffers");
    for d in [&dir, &buffers] {
        let _ = std::fs::remove_dir_all(d);
        std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
    }
    let mut cmd = Command::new("taskset");
    cmd.args(["-c", SERVER_CORE])
        .arg(std::env::current_exe()?)
        .args(["kv-serve", "--port", &port.to_string(), "--dir"])
        .arg(&dir)
        .args(["--appendfsync", "always", "--log-device", medium])
        .args(["--log-wbuf-size", WBUF_BYTES, "--log-wbuf-dir"])
        .arg(&buffers)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let child = cmd
        .spawn()
        .with_context(|| format!("starting the server on {medium}"))?;
    let running = Running { child, port };
    wait_for_port(port)?;
    Ok(running)
}

/// SET requests/s by medium and pipeline depth, one value per run.
type Samples = BTreeMap<(String, usize), Vec<f64>>;

fn measure(common: &Common, disk: &Path, pm: &Path) -> Result<Samples> {
    let mut samples = Samples::new();
    for run in 0..common.runs() {
        for (i, medium) in MEDIA.iter().enumerate() {
            let server = start(medium, BASE_PORT + 200 + i as u16, disk, pm)?;
            for pipeline in PIPELINES {
                let requests =
                    if common.quick { 20_000 } else { 200_000 } * if pipeline > 1 { 5 } else { 1 };
                let rps = redis_benchmark_op(server.port, "set", pipeline, requests)?;
                tracing::info!(run, medium, pipeline, rps, "log on {medium}");
                samples
                    .entry((medium.to_string(), pipeline))
                    .or_default()
                    .push(rps);
            }
            drop(server);
        }
    }
    for d in ["log-file", "log-wbuf"] {
        let _ = std::fs::remove_dir_all(disk.join(d));
    }
    for d in ["log-pm", "log-wbuf-buffers"] {
        let _ = std::fs::remove_dir_all(pm.join(d));
    }
    Ok(samples)
}

/// Runs the part: figures `log_always_set_rps` (medians), ratios
/// `log_always_wbuf_vs_pmem_p*` and `log_always_wbuf_vs_file_p*`, and the
/// plot `kv_wbuf_log.svg` in `--out`.
pub fn run(report: &mut Report, disk: &Path, pm: &Path, common: &Common) -> Result<PathBuf> {
    let samples = measure(common, disk, pm)?;
    let get = |medium: &str, p: usize| samples.get(&(medium.to_string(), p));
    for p in PIPELINES {
        for (base, name) in [("pmem-emulated", "pmem"), ("file", "file")] {
            if let (Some(ours), Some(theirs)) = (get("wbuf", p), get(base, p)) {
                let pairs = ours.iter().copied().zip(theirs.iter().copied());
                report.ratio(
                    format!("log_always_wbuf_vs_{name}_p{p}"),
                    median_ratio(pairs),
                );
            }
        }
    }
    let medians: BTreeMap<String, f64> = samples
        .iter()
        .map(|((medium, p), v)| (format!("{medium}_p{p}"), median(v)))
        .collect();
    report.figure("log_always_set_rps", &medians);
    report.note(format!(
        "wbuf-log: appendfsync always, SET 256 B from 50 clients (redis-benchmark); the log in a file on {disk}, on emulated PM in {pm}, and in a file on {disk} behind a {WBUF_BYTES} write buffer on emulated PM in {pm} (both PM cases survive a process crash, not a power failure); the servers take turns within each run",
        disk = disk.display(),
        pm = pm.display()
    ));
    let panel = Panel {
        title: "SET 256 B, 50 clients, appendfsync always".into(),
        x_label: "pipeline depth".into(),
        y_label: "requests/s".into(),
        log_x: true,
        log_y: false,
        series: MEDIA
            .iter()
            .map(|medium| Series {
                label: format!("log on {medium}"),
                points: PIPELINES
                    .iter()
                    .filter_map(|&p| get(medium, p).map(|v| (p as f64, median(v))))
                    .collect(),
            })
            .collect(),
    };
    let path = common.out.join("kv_wbuf_log.svg");
    report::plot(
        &path,
        "Ferrite's log with appendfsync always: file, PM, write buffer",
        &[panel],
    )?;
    Ok(path)
}
