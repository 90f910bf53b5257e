//! `ferrite-bench pmem`: Ferrite's persist primitives against libpmem and
//! memcpy + msync on emulated PM, each flush instruction separately, and
//! `Device` write + sync latency for every backend.
//!
//! Every method writes into the same file on tmpfs (pre-faulted), mapped
//! once per method with that method's dispatch, so all of them store to the
//! same physical pages (separate files gave identical code 5-15% apart at
//! 1 MiB, by where their pages happened to lie). Each walks sequentially
//! through a working set larger than the last-level cache, so flushes write
//! real lines back. Methods are
//! interleaved within each run so drifting machine noise hits all alike; the
//! figures are medians over runs.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use ferrite_io::Backend;
use ferrite_pmem::{Dispatch, FlushInstruction, FlushStats, MapOptions, PmemMedium, PmemRegion};
use serde::Serialize;

use crate::report::{self, median, median_ratio, LatencySummary, Panel, Report, Series};
use crate::Common;

/// Copy sizes of the persist experiment.
pub const PERSIST_SIZES: [usize; 7] = [64, 256, 1024, 4096, 16384, 65536, 1 << 20];
/// Write sizes of the device experiment.
pub const DEVICE_SIZES: [usize; 5] = [64, 256, 1024, 4096, 16384];
/// Slices each method's time per size and run is cut into.
const SLICES: usize = 6;
/// Bytes each method cycles through: larger than the last-level cache.
const WORKING_SET: usize = 64 << 20;

/// One way of persisting a buffer.
#[derive(Clone, Debug)]
enum Method {
    /// Ferrite's `copy_persist` with the given dispatch.
    Ferrite { name: String, dispatch: Dispatch },
    /// libpmem's `pmem_memcpy_persist` (only with the `libpmem` feature).
    #[cfg_attr(not(feature = "libpmem"), allow(dead_code))]
    Libpmem,
}

impl Method {
    fn name(&self) -> &str {
        match self {
            Method::Ferrite { name, .. } => name,
            Method::Libpmem => "libpmem",
        }
    }
}

fn methods(report: &mut Report) -> Vec<Method> {
    // What a region on emulated PM gets by default.
    let best = Dispatch::for_mode(ferrite_pmem::MapMode::Emulated);
    let mut methods = vec![Method::Ferrite {
        name: "ferrite".into(),
        dispatch: best,
    }];
    for flush in [
        FlushInstruction::Clwb,
        FlushInstruction::Clflushopt,
        FlushInstruction::Clflush,
    ] {
        match best.with_flush(flush) {
            Ok(dispatch) => methods.push(Method::Ferrite {
                name: format!("ferrite_{flush}"),
                dispatch,
            }),
            Err(err) => report.note(format!("skipping {flush}: {err}")),
        }
    }
    // The default splits large copies with a helper thread; this is the
    // same code on the caller's core alone, for the per-core comparison.
    methods.push(Method::Ferrite {
        name: "ferrite_one_thread".into(),
        dispatch: best.with_split_min(usize::MAX),
    });
    methods.push(Method::Ferrite {
        name: "ferrite_cached_only".into(),
        dispatch: best.with_nt_threshold(usize::MAX),
    });
    if let Ok(dispatch) = best.with_flush(FlushInstruction::Msync) {
        methods.push(Method::Ferrite {
            name: "memcpy_msync".into(),
            dispatch,
        });
    }
    if cfg!(feature = "libpmem") {
        methods.push(Method::Libpmem);
    } else {
        report.note(
            "libpmem baseline not built: run crates/bench/scripts/bench-pmem.sh (installs libpmem-dev, builds with --features libpmem)",
        );
    }
    methods
}

/// One method at one size, one run.
#[derive(Clone, Copy, Debug, Default, Serialize)]
struct PersistRun {
    ops_per_s: f64,
    ns_per_op: f64,
    stats: StatsPerOp,
}

#[derive(Clone, Copy, Debug, Default, Serialize)]
struct StatsPerOp {
    flushes_per_op: f64,
    fences_per_op: f64,
    nt_bytes_per_op: f64,
    media_bytes_per_user_byte: f64,
    requests_per_op: f64,
    read_modify_writes_per_op: f64,
}

impl StatsPerOp {
    fn new(delta: FlushStats, ops: u64, user_bytes: u64) -> StatsPerOp {
        StatsPerOp {
            flushes_per_op: delta.flushes_per_op(ops),
            fences_per_op: delta.fences_per_op(ops),
            nt_bytes_per_op: if ops == 0 {
                0.0
            } else {
                delta.bytes_nt as f64 / ops as f64
            },
            media_bytes_per_user_byte: delta.media_bytes_per_user_byte(user_bytes),
            requests_per_op: per_op(delta.requests, ops),
            read_modify_writes_per_op: per_op(delta.read_modify_writes, ops),
        }
    }
}

fn per_op(count: u64, ops: u64) -> f64 {
    if ops == 0 {
        0.0
    } else {
        count as f64 / ops as f64
    }
}

/// Summary over runs of one method at one size.
#[derive(Clone, Debug, Serialize)]
struct PersistFigure {
    ops_per_s: f64,
    gib_per_s: f64,
    ns_per_op: f64,
    latency: LatencySummary,
    stats: StatsPerOp,
    ops_per_s_runs: Vec<f64>,
}

struct Target {
    region: PmemRegion,
    offset: usize,
}

impl Target {
    fn next(&mut self, size: usize) -> usize {
        if self.offset + size > WORKING_SET {
            self.offset = 0;
        }
        let at = self.offset;
        self.offset += size;
        at
    }
}

fn persist_once(method: &Method, target: &mut Target, data: &[u8]) -> Result<()> {
    let at = target.next(data.len());
    match method {
        Method::Ferrite { .. } => target.region.copy_persist(at, data)?,
        #[cfg(feature = "libpmem")]
        Method::Libpmem => ferrite_pmem::libpmem::memcpy_persist(&target.region, at, data)?,
        #[cfg(not(feature = "libpmem"))]
        Method::Libpmem => anyhow::bail!("libpmem support not compiled in"),
    }
    Ok(())
}

/// Persists timed in one or more slices, summed before they become rates.
#[derive(Clone, Copy, Debug, Default)]
struct Timed {
    ops: u64,
    seconds: f64,
    user_bytes: u64,
    delta: FlushStats,
}

impl Timed {
    fn add(&mut self, other: Timed) {
        self.ops += other.ops;
        self.seconds += other.seconds;
        self.user_bytes += other.user_bytes;
        self.delta = self.delta + other.delta;
    }

    fn run(&self) -> PersistRun {
        PersistRun {
            ops_per_s: self.ops as f64 / self.seconds,
            ns_per_op: self.seconds * 1e9 / self.ops as f64,
            stats: StatsPerOp::new(self.delta, self.ops, self.user_bytes),
        }
    }
}

/// Times batches of persists for `time`.
fn persist_timed(
    method: &Method,
    target: &mut Target,
    data: &[u8],
    time: Duration,
) -> Result<Timed> {
    let batch = (1 << 22) / data.len().max(64);
    let before = target.region.stats();
    let start = Instant::now();
    let mut ops = 0u64;
    while start.elapsed() < time {
        for _ in 0..batch {
            persist_once(method, target, data)?;
        }
        ops += batch as u64;
    }
    Ok(Timed {
        ops,
        seconds: start.elapsed().as_secs_f64(),
        user_bytes: ops * data.len() as u64,
        delta: target.region.stats() - before,
    })
}

/// Times batches of persists for `time` and returns one run's figures.
fn persist_run(
    method: &Method,
    target: &mut Target,
    data: &[u8],
    time: Duration,
) -> Result<PersistRun> {
    Ok(persist_timed(method, target, data, time)?.run())
}

/// Maps the pool `name` (shared by every target opened with that name) with
/// `dispatch`.
fn open_target(dir: &Path, name: &str, dispatch: Dispatch) -> Result<Target> {
    let path = dir.join(format!("{name}.pool"));
    let mut options = MapOptions::new(WORKING_SET);
    options.dispatch = Some(dispatch);
    options.populate = true;
    let region = PmemRegion::map_with(&path, options)
        .with_context(|| format!("mapping {}", path.display()))?;
    Ok(Target { region, offset: 0 })
}

fn persist_experiment(
    common: &Common,
    report: &mut Report,
    dir: &Path,
) -> Result<BTreeMap<String, BTreeMap<usize, PersistFigure>>> {
    let methods = methods(report);
    let time = if common.quick {
        Duration::from_millis(60)
    } else {
        Duration::from_millis(300)
    };
    let mut targets = Vec::new();
    for method in &methods {
        let dispatch = match method {
            Method::Ferrite { dispatch, .. } => *dispatch,
            Method::Libpmem => Dispatch::for_mode(ferrite_pmem::MapMode::Emulated),
        };
        targets.push(open_target(dir, "persist", dispatch)?);
    }
    let mut runs: BTreeMap<(usize, usize), Vec<PersistRun>> = BTreeMap::new();
    let mut latencies: BTreeMap<(usize, usize), Vec<f64>> = BTreeMap::new();
    for run in 0..common.runs() {
        for &size in &PERSIST_SIZES {
            let data: Vec<u8> = (0..size).map(|i| (i * 31 + run) as u8).collect();
            // Each method's time is cut into slices taken in turn, the
            // starting method rotating, so a drift of the shared host's
            // memory bandwidth (seconds long) falls on every method alike.
            let mut timed = vec![Timed::default(); methods.len()];
            for slice in 0..SLICES {
                for k in 0..methods.len() {
                    let m = (k + run + slice) % methods.len();
                    let part =
                        persist_timed(&methods[m], &mut targets[m], &data, time / SLICES as u32)?;
                    timed[m].add(part);
                }
            }
            for k in 0..methods.len() {
                let m = (k + run) % methods.len();
                runs.entry((m, size)).or_default().push(timed[m].run());
                let samples = latencies.entry((m, size)).or_default();
                let target = &mut targets[m];
                let method = &methods[m];
                let iters = if size >= 1 << 20 { 200 } else { 2000 };
                for _ in 0..iters {
                    let t = Instant::now();
                    persist_once(method, target, &data)?;
                    samples.push(t.elapsed().as_nanos() as f64);
                }
            }
        }
        tracing::info!("persist run {}/{} done", run + 1, common.runs());
    }
    let mut figures: BTreeMap<String, BTreeMap<usize, PersistFigure>> = BTreeMap::new();
    for ((m, size), results) in runs {
        let ops: Vec<f64> = results.iter().map(|r| r.ops_per_s).collect();
        let best = median(&ops);
        let stats = results[results.len() / 2].stats;
        figures
            .entry(methods[m].name().to_string())
            .or_default()
            .insert(
                size,
                PersistFigure {
                    ops_per_s: best,
                    gib_per_s: best * size as f64 / (1u64 << 30) as f64,
                    ns_per_op: 1e9 / best,
                    latency: LatencySummary::from_ns(&latencies[&(m, size)]),
                    stats,
                    ops_per_s_runs: ops,
                },
            );
    }
    Ok(figures)
}

/// Sizes of the non-temporal threshold sweep.
const THRESHOLD_SIZES: [usize; 10] = [64, 128, 256, 384, 512, 768, 1024, 1536, 2048, 4096];

/// Persists per second by size: (cached + flush, streaming).
type Sweep = BTreeMap<usize, (f64, f64)>;

/// The non-temporal threshold, measured: for each size, persist throughput
/// with cached stores + flush and with streaming stores; the threshold is the
/// smallest size from which streaming wins at every larger size.
fn threshold_sweep(common: &Common, dir: &Path) -> Result<(usize, Sweep)> {
    let best = Dispatch::for_mode(ferrite_pmem::MapMode::Emulated);
    let cached = Method::Ferrite {
        name: "cached".into(),
        dispatch: best.with_nt_threshold(usize::MAX),
    };
    let streaming = Method::Ferrite {
        name: "streaming".into(),
        dispatch: best.with_nt_threshold(0),
    };
    let mut cached_target = open_target(dir, "sweep", best.with_nt_threshold(usize::MAX))?;
    let mut streaming_target = open_target(dir, "sweep", best.with_nt_threshold(0))?;
    let time = if common.quick {
        Duration::from_millis(40)
    } else {
        Duration::from_millis(150)
    };
    let mut sweep = BTreeMap::new();
    for &size in &THRESHOLD_SIZES {
        let data = vec![0x3Cu8; size];
        let (mut c, mut n) = (Vec::new(), Vec::new());
        for _ in 0..common.runs() {
            c.push(persist_run(&cached, &mut cached_target, &data, time)?.ops_per_s);
            n.push(persist_run(&streaming, &mut streaming_target, &data, time)?.ops_per_s);
        }
        sweep.insert(size, (median(&c), median(&n)));
    }
    let threshold = THRESHOLD_SIZES
        .iter()
        .copied()
        .find(|&from| sweep.range(from..).all(|(_, (c, n))| n >= c))
        .unwrap_or(usize::MAX);
    Ok((threshold, sweep))
}

/// Cost of the flush accounting: 64-byte persists with it on and off.
fn accounting_cost(common: &Common, dir: &Path) -> Result<(f64, f64)> {
    let dispatch = Dispatch::for_mode(ferrite_pmem::MapMode::Emulated);
    let mut target = open_target(dir, "accounting", dispatch)?;
    let method = Method::Ferrite {
        name: "ferrite".into(),
        dispatch,
    };
    let data = [7u8; 64];
    let time = if common.quick {
        Duration::from_millis(60)
    } else {
        Duration::from_millis(300)
    };
    let (mut on, mut off) = (Vec::new(), Vec::new());
    for _ in 0..common.runs() {
        ferrite_pmem::stats::set_enabled(false);
        let result = persist_run(&method, &mut target, &data, time);
        ferrite_pmem::stats::set_enabled(true);
        off.push(result?.ns_per_op);
        on.push(persist_run(&method, &mut target, &data, time)?.ns_per_op);
    }
    Ok((median(&on), median(&off)))
}

#[derive(Clone, Debug, Serialize)]
struct DeviceFigure {
    latency: LatencySummary,
    flushes_per_op: f64,
}

fn device_experiment(
    common: &Common,
    report: &mut Report,
    pm_dir: &Path,
    disk_dir: &Path,
) -> Result<BTreeMap<String, BTreeMap<usize, DeviceFigure>>> {
    let mut figures: BTreeMap<String, BTreeMap<usize, DeviceFigure>> = BTreeMap::new();
    let time = if common.quick {
        Duration::from_millis(100)
    } else {
        Duration::from_millis(500)
    };
    for backend in Backend::ALL {
        let dir = if backend == Backend::File {
            disk_dir
        } else {
            pm_dir
        };
        let path = dir.join(format!("device-{}.dev", backend.name()));
        let _ = std::fs::remove_file(&path);
        let device = backend.open(&path)?;
        device.set_len(4 << 20)?;
        device.sync()?;
        for &size in &DEVICE_SIZES {
            let data = vec![0xA5u8; size];
            let mut samples = Vec::new();
            let before = device.flush_stats().unwrap_or_default();
            let mut offset = 0u64;
            for _ in 0..common.runs() {
                let run = report::sample_ns(20, time / common.runs() as u32, || {
                    if offset + size as u64 > 4 << 20 {
                        offset = 0;
                    }
                    let _ = device.write_at(offset, &data).and_then(|()| device.sync());
                    offset += size as u64;
                });
                samples.extend(run);
            }
            if let Some(cause) = device.poisoned() {
                anyhow::bail!(
                    "{} device failed during the benchmark: {cause}",
                    backend.name()
                );
            }
            let delta = device.flush_stats().unwrap_or_default() - before;
            figures
                .entry(backend.name().to_string())
                .or_default()
                .insert(
                    size,
                    DeviceFigure {
                        latency: LatencySummary::from_ns(&samples),
                        flushes_per_op: delta.flushes_per_op(samples.len() as u64),
                    },
                );
        }
        drop(device);
        let _ = std::fs::remove_file(&path);
    }
    report.note(format!(
        "device file backend measured on {} (pwrite + fdatasync); PM backends on emulated PM in {}",
        disk_dir.display(),
        pm_dir.display()
    ));
    Ok(figures)
}

/// Runs the experiment and writes `pmem.json` and `pmem.svg` into `--out`.
pub fn run(common: &Common) -> Result<()> {
    let mut report = Report::new("pmem", common.quick, common.runs());
    let pm_dir = report::pm_scratch_dir()?.join("pmem");
    std::fs::create_dir_all(&pm_dir)?;
    let disk_dir = report::disk_scratch_dir()?;
    report.note(format!(
        "emulated PM: files on {} mapped without MAP_SYNC",
        pm_dir.display()
    ));
    let persist = persist_experiment(common, &mut report, &pm_dir)?;
    report.note("ratios: the median over runs of each run's ratio; within a run the methods take turns in slices, so a run's ratio compares them under the same host conditions, while the host's speed moves whole runs by up to 10%; ratios_of_medians has the ratio of each method's median too");
    let mut of_medians = BTreeMap::new();
    for &size in &PERSIST_SIZES {
        for (ours, theirs, key) in [
            ("ferrite", "libpmem", "ferrite_vs_libpmem"),
            ("ferrite", "memcpy_msync", "ferrite_vs_msync"),
            (
                "ferrite_one_thread",
                "libpmem",
                "ferrite_one_thread_vs_libpmem",
            ),
        ] {
            let figure = |method: &str| persist.get(method).and_then(|m| m.get(&size));
            if let (Some(ours), Some(theirs)) = (figure(ours), figure(theirs)) {
                report.ratio(
                    format!("{key}_{size}"),
                    paired_ratio(&ours.ops_per_s_runs, &theirs.ops_per_s_runs),
                );
                of_medians.insert(format!("{key}_{size}"), ours.ops_per_s / theirs.ops_per_s);
            }
        }
    }
    report.figure("ratios_of_medians", &of_medians);
    let (threshold, sweep) = threshold_sweep(common, &pm_dir)?;
    report.figure("nt_threshold_measured", threshold);
    report.figure(
        "nt_threshold_sweep_ops_per_s",
        sweep
            .iter()
            .map(|(size, (c, n))| {
                (
                    size.to_string(),
                    serde_json::json!({"cached_flush": c, "streaming": n}),
                )
            })
            .collect::<BTreeMap<_, _>>(),
    );
    let in_use = Dispatch::for_mode(ferrite_pmem::MapMode::Emulated);
    report.figure("nt_threshold_in_use", in_use.nt_threshold);
    report.figure("split_min_in_use", in_use.split_min);
    let (on, off) = accounting_cost(common, &pm_dir)?;
    report.figure("accounting_ns_per_op_64_on", on);
    report.figure("accounting_ns_per_op_64_off", off);
    report.figure("accounting_overhead_ns_64", on - off);
    let device = device_experiment(common, &mut report, &pm_dir, &disk_dir)?;
    report.note("media_validation maps its own regions with the media model off and under optane, whatever --model says; the rest of the report runs under --model (machine.pmem_media_model)");
    let validation = crate::media_validation::run(common, &mut report, &pm_dir)?;
    report.figure("media_validation", &validation);
    let _ = std::fs::remove_dir_all(&pm_dir);
    crate::media_validation::print(&validation);
    print_tables(&persist, &device, &report);
    report.figure("persist", &persist);
    report.figure("device", &device);
    let json = report.write(&common.out)?;
    let svg = common.out.join("pmem.svg");
    plot(&persist, &device, &svg)?;
    println!("wrote {} and {}", json.display(), svg.display());
    Ok(())
}

/// The median over runs of `ours[i] / theirs[i]`: each run's figures come
/// from the same interleaved slices.
fn paired_ratio(ours: &[f64], theirs: &[f64]) -> f64 {
    median_ratio(ours.iter().copied().zip(theirs.iter().copied()))
}

fn plot(
    persist: &BTreeMap<String, BTreeMap<usize, PersistFigure>>,
    device: &BTreeMap<String, BTreeMap<usize, DeviceFigure>>,
    path: &Path,
) -> Result<()> {
    let throughput = Panel {
        title: "Persist throughput (emulated PM)".into(),
        x_label: "bytes per persist".into(),
        y_label: "GiB/s".into(),
        log_x: true,
        log_y: true,
        series: persist
            .iter()
            .map(|(name, by_size)| Series {
                label: name.clone(),
                points: by_size
                    .iter()
                    .map(|(&s, f)| (s as f64, f.gib_per_s))
                    .collect(),
            })
            .collect(),
    };
    let latency = Panel {
        title: "Device write + sync latency (p50)".into(),
        x_label: "bytes per write".into(),
        y_label: "microseconds".into(),
        log_x: true,
        log_y: true,
        series: device
            .iter()
            .map(|(name, by_size)| Series {
                label: name.clone(),
                points: by_size
                    .iter()
                    .map(|(&s, f)| (s as f64, f.latency.p50_ns / 1e3))
                    .collect(),
            })
            .collect(),
    };
    let ratio_to = |(method, baseline): (&str, &str)| -> Option<Series> {
        let ours = persist.get(method)?;
        let theirs = persist.get(baseline)?;
        Some(Series {
            label: format!("{method} / {baseline}"),
            points: ours
                .iter()
                .filter_map(|(s, f)| {
                    theirs.get(s).map(|t| {
                        (
                            *s as f64,
                            paired_ratio(&f.ops_per_s_runs, &t.ops_per_s_runs),
                        )
                    })
                })
                .collect(),
        })
    };
    let ratios = Panel {
        title: "Throughput ratio (> 1: Ferrite faster)".into(),
        x_label: "bytes per persist".into(),
        y_label: "ratio".into(),
        log_x: true,
        log_y: false,
        series: [
            ("ferrite", "libpmem"),
            ("ferrite", "memcpy_msync"),
            ("ferrite_one_thread", "libpmem"),
        ]
        .into_iter()
        .filter_map(ratio_to)
        .collect(),
    };
    report::plot(path, "ferrite-bench pmem", &[throughput, ratios, latency])
}

fn print_tables(
    persist: &BTreeMap<String, BTreeMap<usize, PersistFigure>>,
    device: &BTreeMap<String, BTreeMap<usize, DeviceFigure>>,
    report: &Report,
) {
    println!("\npersist throughput, Mops/s (median) [flushes/op]");
    print!("{:<22}", "method");
    for size in PERSIST_SIZES {
        print!("{:>16}", size);
    }
    println!();
    for (name, by_size) in persist {
        print!("{name:<22}");
        for size in PERSIST_SIZES {
            match by_size.get(&size) {
                Some(f) => print!(
                    "{:>9.3} [{:>4.1}]",
                    f.ops_per_s / 1e6,
                    f.stats.flushes_per_op
                ),
                None => print!("{:>16}", "-"),
            }
        }
        println!();
    }
    if let Some(threshold) = report_threshold(report) {
        println!("\nmeasured non-temporal threshold: {threshold} bytes");
    }
    println!("\ndevice write+sync latency p50 / p99, us");
    for (name, by_size) in device {
        print!("{name:<10}");
        for (size, f) in by_size {
            print!(
                "  {size}: {:.2}/{:.2}",
                f.latency.p50_ns / 1e3,
                f.latency.p99_ns / 1e3
            );
        }
        println!();
    }
    println!("\nratios (> 1: Ferrite faster)");
    for (key, value) in report.ratios() {
        println!("  {key:<32} {value:.3}");
    }
}

fn report_threshold(report: &Report) -> Option<String> {
    report
        .figure_value("nt_threshold_measured")
        .map(|v| v.to_string())
}
