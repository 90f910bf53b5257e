//! Paper 003's experiment: synchronous writes through the PM write buffer
//! (`ferrite-wbuf`, emulated PM on tmpfs in front of a file on the disk)
//! against the disk's own synchronous write paths, in the same run:
//! `O_SYNC` and `O_DSYNC` `pwrite`, `pwrite` + `fdatasync`, and
//! `O_DIRECT | O_DSYNC`.
//!
//! - The grid: 4 KiB and 16 KiB writes, sequential and random, 1 to 16
//!   threads; writes/s and p50/p99 acknowledgement latency, every point for
//!   the same time (the buffer's past its size, so destaging and
//!   back-pressure are in its figures). Separately, the acknowledgement
//!   path alone: one thread writing 40% of the buffer, below the watermark.
//! - Sustained: 16 KiB sequential writes over 4x the buffer, timed until
//!   the last byte is synced on the disk, against the disk's own direct
//!   sequential write bandwidth (1 MiB `O_DIRECT` writes) measured here;
//!   at destage depths 1, 4 and 8, and with early stream writeback off.
//!   Beside the 16-thread grid point, the most any write-back cache of
//!   this size could reach there with this disk (`wbuf_disk_bound_*`).
//! - Zipf 0.99 overwrites of 16 KiB blocks over twice the buffer: bytes sent
//!   to the disk per byte written (write absorption).

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use ferrite_host::IoBuffer;
use ferrite_io::Device;
use ferrite_wbuf::PmemWriteBuffer;
use serde::Serialize;

use crate::report::{self, median, median_ratio, percentile, Panel, Report, Series};
use crate::Common;

mod sustained;

use sustained::{open_buffer_with, Sustained, Variant};

/// The parts of the experiment, to run a subset while developing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Part {
    /// Every method, size, pattern and thread count for a fixed time.
    Grid,
    /// The stream of 4x the buffer against direct sequential writes.
    Sustained,
    /// Zipf 0.99 overwrites: disk bytes per byte written.
    Zipf,
    /// The acknowledgement path alone, below the watermark.
    Burst,
}

/// Options of the wbuf experiment.
#[derive(Clone, Debug, clap::Args)]
pub struct WbufArgs {
    /// The options every experiment takes.
    #[command(flatten)]
    pub common: Common,
    /// Only these parts (comma-separated; default: all). Ratios whose
    /// parts did not run are left out of the report.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub only: Vec<Part>,
}

const THREADS: [usize; 5] = [1, 2, 4, 8, 16];
const SIZES: [usize; 2] = [4 << 10, 16 << 10];
/// How a write is made durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Method {
    Wbuf,
    OSync,
    ODsync,
    PwriteFdatasync,
    DirectDsync,
}

impl Method {
    const ALL: [Method; 5] = [
        Method::Wbuf,
        Method::OSync,
        Method::ODsync,
        Method::PwriteFdatasync,
        Method::DirectDsync,
    ];

    fn name(self) -> &'static str {
        match self {
            Method::Wbuf => "wbuf",
            Method::OSync => "osync",
            Method::ODsync => "odsync",
            Method::PwriteFdatasync => "pwrite_fdatasync",
            Method::DirectDsync => "direct_dsync",
        }
    }

    fn flags(self) -> i32 {
        match self {
            Method::OSync => libc::O_SYNC,
            Method::ODsync => libc::O_DSYNC,
            Method::DirectDsync => libc::O_DIRECT | libc::O_DSYNC,
            Method::Wbuf | Method::PwriteFdatasync => 0,
        }
    }
}

/// Sizes of one run, from `--quick`.
#[derive(Clone, Copy, Debug, Serialize)]
pub(crate) struct Scale {
    buffer_bytes: usize,
    /// The disk file the grid writes into (random offsets span it).
    file_bytes: usize,
    /// Time per disk configuration of the grid.
    disk_seconds: f64,
}

impl Scale {
    fn of(quick: bool) -> Scale {
        if quick {
            Scale {
                buffer_bytes: 32 << 20,
                file_bytes: 64 << 20,
                disk_seconds: 0.3,
            }
        } else {
            Scale {
                buffer_bytes: 128 << 20,
                file_bytes: 256 << 20,
                disk_seconds: 1.0,
            }
        }
    }
}

/// One grid configuration's result.
#[derive(Clone, Debug, Serialize)]
struct Point {
    method: &'static str,
    size: usize,
    pattern: &'static str,
    threads: usize,
    writes_per_s: f64,
    mib_per_s: f64,
    p50_us: f64,
    p99_us: f64,
}

/// Where a thread writes.
struct Workload {
    size: usize,
    random: bool,
    threads: usize,
    file_bytes: usize,
    /// Writes per thread at most.
    limit: usize,
    seconds: f64,
}

impl Workload {
    /// Offset of thread `t`'s `i`-th write: its own contiguous region when
    /// sequential, anywhere (size aligned) when random.
    fn offset(&self, t: usize, i: usize, rng: &mut fastrand::Rng) -> u64 {
        let slots = (self.file_bytes / self.size) as u64;
        if self.random {
            return rng.u64(..slots.max(1)) * self.size as u64;
        }
        let per_thread = (slots / self.threads as u64).max(1);
        (t as u64 * per_thread + i as u64 % per_thread) * self.size as u64
    }
}

/// Something a synchronous write goes to.
enum Target<'a> {
    Wbuf(&'a PmemWriteBuffer),
    File(&'a File, bool),
}

impl Target<'_> {
    fn write(&self, offset: u64, data: &[u8]) -> Result<()> {
        match self {
            Target::Wbuf(buffer) => buffer.write_at(offset, data)?,
            Target::File(file, sync) => {
                file.write_all_at(data, offset)?;
                if *sync {
                    file.sync_data()?;
                }
            }
        }
        Ok(())
    }
}

/// Runs the workload's threads; returns (wall seconds, writes, latencies).
fn drive(target: &Target<'_>, w: &Workload) -> Result<(f64, usize, Vec<f64>)> {
    let barrier = Barrier::new(w.threads);
    let per_thread = std::thread::scope(|s| -> Result<Vec<(Instant, Instant, Vec<f64>)>> {
        let handles: Vec<_> = (0..w.threads)
            .map(|t| {
                let barrier = &barrier;
                s.spawn(move || -> Result<_> {
                    let mut data = IoBuffer::new(w.size)?;
                    data.fill(t as u8 ^ 0x5A);
                    let mut rng = fastrand::Rng::with_seed(t as u64 * 7919 + 1);
                    let mut latencies = Vec::with_capacity(w.limit.min(1 << 16));
                    barrier.wait();
                    let begin = Instant::now();
                    let stop = begin + Duration::from_secs_f64(w.seconds);
                    for i in 0..w.limit {
                        let offset = w.offset(t, i, &mut rng);
                        let t0 = Instant::now();
                        target.write(offset, &data[..w.size])?;
                        let now = Instant::now();
                        latencies.push(now.duration_since(t0).as_nanos() as f64);
                        if now >= stop {
                            break;
                        }
                    }
                    Ok((begin, Instant::now(), latencies))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().map_err(|_| anyhow::anyhow!("writer panicked"))?)
            .collect()
    })?;
    let begin = per_thread.iter().map(|p| p.0).min();
    let end = per_thread.iter().map(|p| p.1).max();
    let wall = match (begin, end) {
        (Some(b), Some(e)) => e.duration_since(b).as_secs_f64().max(1e-9),
        _ => 1e-9,
    };
    let latencies: Vec<f64> = per_thread.into_iter().flat_map(|p| p.2).collect();
    Ok((wall, latencies.len(), latencies))
}

fn point(method: Method, w: &Workload, wall: f64, writes: usize, lat: &[f64]) -> Point {
    Point {
        method: method.name(),
        size: w.size,
        pattern: if w.random { "rand" } else { "seq" },
        threads: w.threads,
        writes_per_s: writes as f64 / wall,
        mib_per_s: (writes * w.size) as f64 / wall / f64::from(1 << 20),
        p50_us: percentile(lat, 50.0) / 1e3,
        p99_us: percentile(lat, 99.0) / 1e3,
    }
}

/// A file of `len` bytes written through once, so the grid's writes
/// overwrite allocated blocks (no allocation in the timed path).
fn prepare_file(path: &Path, len: usize) -> Result<()> {
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    if file.metadata()?.len() as usize >= len {
        return Ok(());
    }
    let chunk = vec![0xA5u8; 1 << 20];
    for at in (0..len).step_by(chunk.len()) {
        file.write_all_at(&chunk, at as u64)?;
    }
    file.sync_all()?;
    Ok(())
}

fn open_buffer(pm: &Path, backing: &Path, scale: &Scale) -> Result<PmemWriteBuffer> {
    open_buffer_with(pm, backing, scale, Variant::default())
}

/// The grid, once: every method, size, pattern and thread count.
fn grid(paths: &Paths, scale: &Scale) -> Result<Vec<Point>> {
    let mut points = Vec::new();
    let buffer = open_buffer(&paths.pm, &paths.backing, scale)?;
    for size in SIZES {
        for random in [false, true] {
            for threads in THREADS {
                for method in Method::ALL {
                    let w = Workload {
                        size,
                        random,
                        threads,
                        file_bytes: scale.file_bytes,
                        limit: usize::MAX,
                        seconds: scale.disk_seconds,
                    };
                    let (wall, writes, lat) = if method == Method::Wbuf {
                        // Timed like the disk's paths: past the buffer's
                        // size, so destaging and back-pressure are in it.
                        let out = drive(&Target::Wbuf(&buffer), &w)?;
                        buffer.flush()?;
                        out
                    } else {
                        let file = OpenOptions::new()
                            .write(true)
                            .custom_flags(method.flags())
                            .open(&paths.disk)
                            .with_context(|| format!("opening {}", paths.disk.display()))?;
                        let sync = method == Method::PwriteFdatasync;
                        drive(&Target::File(&file, sync), &w)?
                    };
                    let p = point(method, &w, wall, writes, &lat);
                    tracing::info!(
                        method = p.method,
                        size,
                        pattern = p.pattern,
                        threads,
                        writes_per_s = p.writes_per_s as u64,
                        p99_us = p.p99_us,
                        "wbuf grid point"
                    );
                    points.push(p);
                }
            }
        }
    }
    buffer.close()?;
    Ok(points)
}

/// The acknowledgement path alone: `threads` threads write 40% of the
/// buffer between them (below the destage watermark), each in its own
/// region, five times, flushed untimed in between; (p50 µs, p99 µs,
/// writes/s).
fn burst(paths: &Paths, scale: &Scale, size: usize, threads: usize) -> Result<(f64, f64, f64)> {
    let buffer = open_buffer(&paths.pm, &paths.backing, scale)?;
    let mut latencies = Vec::new();
    let mut busy = 0.0;
    for _ in 0..5 {
        let w = Workload {
            size,
            random: false,
            threads,
            file_bytes: scale.file_bytes,
            limit: (scale.buffer_bytes * 2 / 5 / size / threads).max(1),
            seconds: 1e6,
        };
        let (wall, _, lat) = drive(&Target::Wbuf(&buffer), &w)?;
        busy += wall;
        latencies.extend(lat);
        buffer.flush()?;
    }
    buffer.close()?;
    let rate = latencies.len() as f64 / busy.max(1e-9);
    Ok((
        percentile(&latencies, 50.0) / 1e3,
        percentile(&latencies, 99.0) / 1e3,
        rate,
    ))
}

/// Block numbers 0..n drawn with probability proportional to 1/(k+1)^s.
struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    fn new(n: usize, s: f64) -> Zipf {
        let mut cdf = Vec::with_capacity(n);
        let mut total = 0.0;
        for k in 0..n {
            total += 1.0 / ((k + 1) as f64).powf(s);
            cdf.push(total);
        }
        for c in &mut cdf {
            *c /= total;
        }
        Zipf { cdf }
    }

    fn sample(&self, rng: &mut fastrand::Rng) -> usize {
        let u = (rng.u64(..) >> 11) as f64 / (1u64 << 53) as f64;
        self.cdf.partition_point(|&c| c < u).min(self.cdf.len() - 1)
    }
}

/// Zipf 0.99 overwrites of 16 KiB blocks over twice the buffer, 4x the
/// buffer written; SSD bytes per user byte (after the final flush).
fn zipf_ssd_per_user(paths: &Paths, scale: &Scale) -> Result<(f64, ferrite_wbuf::WbufStats)> {
    let buffer = open_buffer(&paths.pm, &paths.zipf, scale)?;
    let size = 16 << 10;
    let blocks = 2 * scale.buffer_bytes / size;
    let zipf = Zipf::new(blocks, 0.99);
    let mut rng = fastrand::Rng::with_seed(99);
    let data = vec![0x42u8; size];
    for _ in 0..4 * scale.buffer_bytes / size {
        // Scatter the popular blocks over the file, as keys hash.
        let block = (zipf.sample(&mut rng) as u64).wrapping_mul(2_654_435_761) % blocks as u64;
        buffer.write_at(block * size as u64, &data)?;
    }
    buffer.flush()?;
    let stats = buffer.stats();
    buffer.close()?;
    Ok((stats.ssd_bytes_per_user_byte(), stats))
}

pub(crate) struct Paths {
    pm: PathBuf,
    backing: PathBuf,
    disk: PathBuf,
    sustained: PathBuf,
    direct: PathBuf,
    zipf: PathBuf,
}

impl Paths {
    fn all_disk(&self) -> [&PathBuf; 5] {
        [
            &self.backing,
            &self.disk,
            &self.sustained,
            &self.direct,
            &self.zipf,
        ]
    }
}

/// The acknowledgement path at one write size: (size, p50 µs, p99 µs,
/// writes/s).
type Burst = (usize, f64, f64, f64);

/// One run's figures; a part that did not run leaves its own empty.
struct RunFigures {
    points: Vec<Point>,
    sustained: Option<Sustained>,
    zipf: Option<(f64, ferrite_wbuf::WbufStats)>,
    /// (size, p50 µs, p99 µs, writes/s) of the acknowledgement path.
    bursts: Vec<Burst>,
    /// Writes/s of the acknowledgement path alone, 16 KiB, 16 threads.
    burst_16k_t16: Option<f64>,
}

fn run_once(paths: &Paths, scale: &Scale, wanted: &dyn Fn(Part) -> bool) -> Result<RunFigures> {
    let points = if wanted(Part::Grid) {
        grid(paths, scale)?
    } else {
        Vec::new()
    };
    let sustained = wanted(Part::Sustained)
        .then(|| sustained::measure(paths, scale))
        .transpose()?;
    let zipf = wanted(Part::Zipf)
        .then(|| zipf_ssd_per_user(paths, scale))
        .transpose()?;
    let mut bursts = Vec::new();
    let mut burst_16k_t16 = None;
    if wanted(Part::Burst) {
        for size in SIZES {
            let (p50, p99, rate) = burst(paths, scale, size, 1)?;
            bursts.push((size, p50, p99, rate));
        }
        burst_16k_t16 = Some(burst(paths, scale, 16 << 10, 16)?.2);
    }
    Ok(RunFigures {
        points,
        sustained,
        zipf,
        bursts,
        burst_16k_t16,
    })
}

fn find<'a>(
    points: &'a [Point],
    m: Method,
    size: usize,
    pattern: &str,
    t: usize,
) -> Option<&'a Point> {
    points
        .iter()
        .find(|p| p.method == m.name() && p.size == size && p.pattern == pattern && p.threads == t)
}

/// Runs the experiment and writes `wbuf.json` and `wbuf.svg` into `--out`.
pub fn run(args: &WbufArgs) -> Result<()> {
    let common = &args.common.clone().resolved();
    let wanted = |part: Part| args.only.is_empty() || args.only.contains(&part);
    let scale = Scale::of(common.quick);
    let disk = report::disk_scratch_dir()?;
    let pm_dir = report::pm_scratch_dir()?;
    let paths = Paths {
        pm: pm_dir.join("wbuf.pm"),
        backing: disk.join("wbuf-backing.dat"),
        disk: disk.join("wbuf-baseline.dat"),
        sustained: disk.join("wbuf-sustained.dat"),
        direct: disk.join("wbuf-direct.dat"),
        zipf: disk.join("wbuf-zipf.dat"),
    };
    // The grid's random writes and the bursts overwrite these files.
    if wanted(Part::Grid) || wanted(Part::Burst) {
        prepare_file(&paths.backing, scale.file_bytes)?;
        prepare_file(&paths.disk, scale.file_bytes)?;
    }
    let mut runs = Vec::new();
    for run in 0..common.runs() {
        tracing::info!(run, "wbuf run");
        // The sustained and Zipf files start empty in every run.
        for p in [&paths.sustained, &paths.zipf, &paths.direct] {
            let _ = std::fs::remove_file(p);
        }
        runs.push(run_once(&paths, &scale, &wanted)?);
    }
    for p in paths.all_disk() {
        let _ = std::fs::remove_file(p);
    }
    let _ = std::fs::remove_file(&paths.pm);
    let mut report = Report::new("wbuf", common.quick, common.runs());
    record(&mut report, &runs, &scale, &disk, &pm_dir);
    let path = report.write(&common.out)?;
    plot(&common.out.join("wbuf.svg"), &medians(&runs))?;
    tracing::info!("wrote {}", path.display());
    Ok(())
}

/// Median of each grid point over runs.
fn medians(runs: &[RunFigures]) -> Vec<Point> {
    let Some(first) = runs.first() else {
        return Vec::new();
    };
    first
        .points
        .iter()
        .map(|p| {
            let same: Vec<&Point> = runs
                .iter()
                .filter_map(|r| {
                    r.points.iter().find(|q| {
                        q.method == p.method
                            && q.size == p.size
                            && q.pattern == p.pattern
                            && q.threads == p.threads
                    })
                })
                .collect();
            let of =
                |f: &dyn Fn(&Point) -> f64| median(&same.iter().map(|q| f(q)).collect::<Vec<_>>());
            Point {
                writes_per_s: of(&|q| q.writes_per_s),
                mib_per_s: of(&|q| q.mib_per_s),
                p50_us: of(&|q| q.p50_us),
                p99_us: of(&|q| q.p99_us),
                ..p.clone()
            }
        })
        .collect()
}

fn record(report: &mut Report, runs: &[RunFigures], scale: &Scale, disk: &Path, pm: &Path) {
    let points = medians(runs);
    report.figure("scale", scale);
    report.figure("grid", &points);
    for size in SIZES {
        for pattern in ["seq", "rand"] {
            for t in THREADS {
                for base in [
                    Method::OSync,
                    Method::ODsync,
                    Method::PwriteFdatasync,
                    Method::DirectDsync,
                ] {
                    let pairs = runs.iter().filter_map(|r| {
                        let a = find(&r.points, Method::Wbuf, size, pattern, t)?;
                        let b = find(&r.points, base, size, pattern, t)?;
                        Some((a.writes_per_s, b.writes_per_s))
                    });
                    let k = size >> 10;
                    let key = format!("wbuf_vs_{}_{k}k_{pattern}_t{t}", base.name());
                    put_ratio(report, key, median_ratio(pairs));
                }
            }
        }
    }
    // The names: sequential, as the paper measured.
    for t in [1, 16] {
        let pairs = runs.iter().filter_map(|r| {
            let a = find(&r.points, Method::Wbuf, 16 << 10, "seq", t)?;
            let b = find(&r.points, Method::OSync, 16 << 10, "seq", t)?;
            Some((a.writes_per_s, b.writes_per_s))
        });
        put_ratio(
            report,
            format!("wbuf_vs_osync_16k_t{t}"),
            median_ratio(pairs),
        );
    }
    if let Some(p) = find(&points, Method::Wbuf, 16 << 10, "seq", 1) {
        report.ratio("wbuf_p99_us_16k_t1", p.p99_us);
    }
    let bursts_ran = runs.iter().any(|r| !r.bursts.is_empty());
    for (i, size) in SIZES.iter().enumerate().filter(|_| bursts_ran) {
        let of = |f: &dyn Fn(&Burst) -> f64| {
            median(
                &runs
                    .iter()
                    .filter_map(|r| r.bursts.get(i).map(f))
                    .collect::<Vec<_>>(),
            )
        };
        let k = size >> 10;
        report.figure(format!("burst_{k}k_t1_p50_us"), of(&|b| b.1));
        report.figure(format!("burst_{k}k_t1_p99_us"), of(&|b| b.2));
        report.figure(format!("burst_{k}k_t1_writes_per_s"), of(&|b| b.3));
    }
    // The acknowledgement path alone at 16 threads against O_SYNC at 16
    // threads: what the buffer gives while it has room, before the
    // destage stage (the disk) bounds it.
    let pairs = runs.iter().filter_map(|r| {
        let b = find(&r.points, Method::OSync, 16 << 10, "seq", 16)?;
        Some((r.burst_16k_t16?, b.writes_per_s))
    });
    put_ratio(report, "wbuf_burst_vs_osync_16k_t16", median_ratio(pairs));
    let bursts16: Vec<f64> = runs.iter().filter_map(|r| r.burst_16k_t16).collect();
    if !bursts16.is_empty() {
        report.figure("burst_16k_t16_writes_per_s", median(&bursts16));
    }
    let zipf: Vec<f64> = runs
        .iter()
        .filter_map(|r| r.zipf.as_ref())
        .map(|z| z.0)
        .collect();
    if !zipf.is_empty() {
        report.ratio("wbuf_ssd_bytes_per_user_byte_zipf", median(&zipf));
    }
    let streams: Vec<&Sustained> = runs.iter().filter_map(|r| r.sustained.as_ref()).collect();
    sustained::record(report, &streams);
    // What any write-back cache of this size could do at the 16-thread
    // grid point, against O_SYNC: the buffer filled at no cost, then every
    // further byte at the disk's direct sequential bandwidth (no write
    // absorbed), for the point's duration. Above 20 only if the disk allows.
    let bound = runs.iter().filter_map(|r| {
        let osync = find(&r.points, Method::OSync, 16 << 10, "seq", 16)?;
        let direct = r.sustained.as_ref()?.direct_mib_s;
        let bytes = scale.buffer_bytes as f64 + direct * f64::from(1 << 20) * scale.disk_seconds;
        let writes_per_s = bytes / f64::from(16 << 10) / scale.disk_seconds;
        Some((writes_per_s, osync.writes_per_s))
    });
    put_ratio(
        report,
        "wbuf_disk_bound_vs_osync_16k_t16",
        median_ratio(bound),
    );
    if let Some((_, stats)) = runs.last().and_then(|r| r.zipf.as_ref()) {
        report.figure("counters_zipf", format!("{stats:?}"));
    }
    report.note(format!(
        "wbuf: ferrite-wbuf, 16 KiB blocks, {} MiB of emulated PM in {} (survives a process crash, not a power failure), backing file in {}; baselines on a file in the same directory",
        scale.buffer_bytes >> 20,
        pm.display(),
        disk.display()
    ));
    report.note("grid: every point runs for the same fixed time, the wbuf ones past the buffer's size (destaging and back-pressure included; flushed untimed after each point); burst_*: one thread (burst_16k_t16: 16 threads) writing 40% of the buffer, below the destage watermark (the acknowledgement path alone)");
    report.note("wbuf_disk_bound_vs_osync_16k_t16: the most a write-back cache of this size could reach at the 16-thread grid point, (buffer + direct_seq bandwidth x point duration) / 16 KiB / duration, against O_SYNC at 16 threads");
    report.note("wbuf_p99_us_16k_t1 and wbuf_ssd_bytes_per_user_byte_zipf are values, not ratios: lower is better");
}

/// Records a ratio unless the parts it compares did not run (NaN).
pub(crate) fn put_ratio(report: &mut Report, key: impl Into<String>, value: f64) {
    if value.is_finite() {
        report.ratio(key, value);
    }
}

fn plot(path: &Path, points: &[Point]) -> Result<()> {
    let series = |size: usize, pattern: &str, value: &dyn Fn(&Point) -> f64| -> Vec<Series> {
        Method::ALL
            .iter()
            .map(|&m| Series {
                label: m.name().into(),
                points: THREADS
                    .iter()
                    .filter_map(|&t| {
                        find(points, m, size, pattern, t).map(|p| (t as f64, value(p)))
                    })
                    .collect(),
            })
            .collect()
    };
    let panel = |title: &str, y: &str, s: Vec<Series>| Panel {
        title: title.into(),
        x_label: "threads".into(),
        y_label: y.into(),
        log_x: true,
        log_y: true,
        series: s,
    };
    let panels = [
        panel(
            "16 KiB sequential",
            "writes/s",
            series(16 << 10, "seq", &|p| p.writes_per_s),
        ),
        panel(
            "4 KiB random",
            "writes/s",
            series(4 << 10, "rand", &|p| p.writes_per_s),
        ),
        panel(
            "16 KiB sequential p99",
            "µs",
            series(16 << 10, "seq", &|p| p.p99_us),
        ),
    ];
    report::plot(path, "ferrite-bench wbuf (paper 003)", &panels)
}
