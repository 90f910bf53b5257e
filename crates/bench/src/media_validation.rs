//! The media model's validation (part of `ferrite-bench pmem`): the shapes
//! of FAST'20's figures (Yang et al., "An Empirical Guide to the Behavior
//! and Use of Scalable Persistent Memory") measured on emulated PM with the
//! model off and under `optane`, side by side in the same run:
//!
//! - write bandwidth vs access size, sequential and random (the 256-byte
//!   knee: below a media line every access still costs a whole line);
//! - sequential vs random, writes and reads through the PM API;
//! - persist latency vs size;
//! - the cost of each flush instruction (clwb <= clflushopt <= clflush), on
//!   isolated persists read back afterwards.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use ferrite_pmem::{
    Dispatch, FlushInstruction, MapMode, MapOptions, ModelChoice, PmemMedium, PmemRegion,
};
use serde::Serialize;

use crate::report::{median, LatencySummary, Report};
use crate::Common;

/// Bytes each pattern walks through: larger than the last-level cache.
const WORKING_SET: usize = 64 << 20;
/// Access sizes of the bandwidth figure.
pub const SIZES: [usize; 6] = [64, 128, 256, 512, 1024, 4096];
/// Access sizes of the read figure.
const READ_SIZES: [usize; 3] = [64, 256, 4096];
/// Sizes of the persist latency figure.
const LATENCY_SIZES: [usize; 6] = [64, 256, 1024, 4096, 16384, 65536];
/// Sizes of the flush instruction figure.
const FLUSH_SIZES: [usize; 2] = [256, 4096];

/// Figures by model name, then pattern or instruction, then size.
type BySize = BTreeMap<usize, f64>;
type Figure = BTreeMap<String, BTreeMap<String, BySize>>;

/// Everything the validation measured.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Validation {
    /// Persist bandwidth in GB/s (10^9 bytes per second) by model, pattern
    /// (`sequential`, `random`) and access size.
    pub write_gb_per_s: Figure,
    /// Read bandwidth through `PmemMedium::read`, GB/s, likewise.
    pub read_gb_per_s: Figure,
    /// Persist latency p50 in ns by model and size (back to back,
    /// sequential).
    pub persist_p50_ns: BTreeMap<String, BySize>,
    /// Nanoseconds of a persist and a read of the same bytes back, p50, by
    /// model, flush instruction and size (cached stores, the instruction, a
    /// fence, then a read through the API; each isolated, with the DIMM
    /// idle before it): what tells the instructions apart (module comment).
    pub flush_ns_per_op: Figure,
    /// Of which the persist alone, p50.
    pub flush_persist_ns: Figure,
    /// Of which the read back alone, p50.
    pub flush_read_back_ns: Figure,
    /// 64-byte writes, sixteen per fence, GB/s by model and pattern: the
    /// bandwidth-bound shape, with the host's fence (which bounds one
    /// persist at a time) paid once per sixteen lines.
    pub batched_64_gb_per_s: BTreeMap<String, BTreeMap<String, f64>>,
    /// The host's persist costs the model credits, measured at its
    /// start-up (ns): per line for each flush instruction, per fence.
    pub host_costs_ns: BTreeMap<String, f64>,
}

fn models() -> [(ModelChoice, &'static str); 2] {
    [(ModelChoice::Off, "off"), (ModelChoice::Optane, "optane")]
}

fn map(dir: &Path, name: &str, dispatch: Dispatch, model: ModelChoice) -> Result<PmemRegion> {
    let path = dir.join(format!("{name}.pool"));
    let mut options = MapOptions::new(WORKING_SET);
    options.dispatch = Some(dispatch);
    options.populate = true;
    PmemRegion::map_with_model(&path, options, model)
        .with_context(|| format!("mapping {}", path.display()))
}

/// Runs `op(i)` for `time` and returns operations per second.
fn rate(time: Duration, mut op: impl FnMut(usize) -> Result<()>) -> Result<f64> {
    let start = Instant::now();
    let mut done = 0usize;
    while start.elapsed() < time {
        for _ in 0..64 {
            op(done)?;
            done += 1;
        }
    }
    Ok(done as f64 / start.elapsed().as_secs_f64())
}

/// Offset of the `i`-th access of `size` bytes: sequential or random.
fn offset_of(i: usize, size: usize, random: bool, rng: &mut fastrand::Rng) -> usize {
    let slots = WORKING_SET / size;
    if random {
        rng.u64(..(slots as u64).max(1)) as usize * size
    } else {
        (i % slots) * size
    }
}

fn bandwidth(
    region: &PmemRegion,
    time: Duration,
    sizes: &[usize],
    read: bool,
) -> Result<BTreeMap<String, BySize>> {
    let mut out: BTreeMap<String, BySize> = BTreeMap::new();
    let mut rng = fastrand::Rng::with_seed(39);
    let mut buffer = vec![0x5Au8; 4096];
    for &size in sizes {
        for (pattern, random) in [("sequential", false), ("random", true)] {
            let ops = rate(time, |i| {
                let at = offset_of(i, size, random, &mut rng);
                if read {
                    region.read(at, &mut buffer[..size])?;
                } else {
                    region.copy_persist(at, &buffer[..size])?;
                }
                Ok(())
            })?;
            out.entry(pattern.into())
                .or_default()
                .insert(size, ops * size as f64 / 1e9);
        }
    }
    Ok(out)
}

/// 64-byte writes, sixteen copied and flushed per drain, sequential and
/// random: GB/s by pattern.
fn batched_64(region: &PmemRegion, time: Duration) -> Result<BTreeMap<String, f64>> {
    const PER_FENCE: usize = 16;
    let mut out = BTreeMap::new();
    let mut rng = fastrand::Rng::with_seed(64);
    let data = [0xA5u8; 64];
    for (pattern, random) in [("sequential", false), ("random", true)] {
        let batches = rate(time, |i| {
            for k in 0..PER_FENCE {
                let at = offset_of(i * PER_FENCE + k, 64, random, &mut rng);
                region.copy_nodrain(at, &data)?;
            }
            region.drain();
            Ok(())
        })?;
        out.insert(pattern.to_string(), batches * (PER_FENCE * 64) as f64 / 1e9);
    }
    Ok(out)
}

fn latency(region: &PmemRegion, time: Duration) -> Result<BySize> {
    let mut out = BySize::new();
    let data = vec![0xC3u8; *LATENCY_SIZES.last().unwrap_or(&65536)];
    for &size in &LATENCY_SIZES {
        let mut offset = 0usize;
        let mut failure = None;
        let samples = crate::report::sample_ns(200, time, || {
            if offset + size > WORKING_SET {
                offset = 0;
            }
            if let Err(err) = region.copy_persist(offset, &data[..size]) {
                failure = Some(err);
            }
            offset += size;
        });
        if let Some(err) = failure {
            return Err(err.into());
        }
        out.insert(size, LatencySummary::from_ns(&samples).p50_ns);
    }
    Ok(out)
}

/// The flush figure's three medians, by instruction and size.
#[derive(Default)]
struct FlushFigures {
    whole: BTreeMap<String, BySize>,
    persist: BTreeMap<String, BySize>,
    read_back: BTreeMap<String, BySize>,
}

/// One op of the flush figure: the persist's and the read back's ns.
fn persist_then_read(
    region: &PmemRegion,
    at: usize,
    data: &[u8],
    back: &mut [u8],
) -> Result<(f64, f64)> {
    let start = Instant::now();
    region.copy_persist(at, data)?;
    let persisted = Instant::now();
    region.read(at, back)?;
    let read = Instant::now();
    Ok((
        (persisted - start).as_nanos() as f64,
        (read - persisted).as_nanos() as f64,
    ))
}

/// Spins for `gap`: the DIMM finishes what earlier ops left in its queue,
/// so that every op starts on an idle DIMM (a stream of persists would be
/// bandwidth-bound, and the DIMM's time for a line is the same whichever
/// instruction wrote it back).
fn idle(gap: Duration) {
    let start = Instant::now();
    while start.elapsed() < gap {
        std::hint::spin_loop();
    }
}

/// The flush instructions' figure. Each op stores `size` bytes through the
/// cache, writes them back with the instruction, fences, and reads them
/// back through the API, at a new place each time (a 64 MiB walk, larger
/// than the cache) after the DIMM went idle. This is where the hardware
/// tells them apart (Yang et al., FAST'20; Intel SDM): `clflush` waits for
/// each line in turn; `clflushopt` and `clwb` overlap in the write queue;
/// `clflushopt` invalidates the lines, so the read back misses, while
/// `clwb` keeps them cached and the read hits. Medians of `REPS` ops per
/// run, the instructions interleaved within each run, then the median over
/// runs.
fn flush_readback(
    common: &Common,
    report: &mut Report,
    dir: &Path,
    best: Dispatch,
    choice: ModelChoice,
) -> Result<FlushFigures> {
    let mut regions = Vec::new();
    for flush in [
        FlushInstruction::Clwb,
        FlushInstruction::Clflushopt,
        FlushInstruction::Clflush,
    ] {
        match best.with_flush(flush) {
            Ok(dispatch) => {
                let name = format!("validate-{flush}");
                let region = map(dir, &name, dispatch.with_nt_threshold(usize::MAX), choice)?;
                regions.push((flush.to_string(), region));
            }
            Err(_) => report.note(format!("validation: {flush} not available on this CPU")),
        }
    }
    let reps = if common.quick { 5000 } else { 20000 };
    // The DIMM's write time for a media line (pacing only: the figures
    // come from the ops themselves).
    let line_ns = ferrite_pmem::model::MediaParams::from_env()
        .map(|p| 256.0 / p.dimm_write_gbps)
        .unwrap_or(111.0);
    let mut runs: Vec<[BTreeMap<String, BySize>; 3]> = Vec::new();
    for run in 0..common.runs().max(3) {
        let mut medians: [BTreeMap<String, BySize>; 3] = Default::default();
        for &size in &FLUSH_SIZES {
            let data = vec![0x11u8; size];
            let mut back = vec![0u8; size];
            // Twice the DIMM's write time for the op's lines, and 1 us.
            let gap =
                Duration::from_nanos((2.0 * size.div_ceil(256) as f64 * line_ns) as u64 + 1000);
            for i in 0..regions.len() {
                let (flush, region) = &regions[(i + run) % regions.len()];
                let mut samples = [Vec::new(), Vec::new(), Vec::new()];
                for op in 0..(reps + reps / 10) {
                    let at = (op * size) % (WORKING_SET - size);
                    idle(gap);
                    let (persist, read) = persist_then_read(region, at, &data, &mut back)?;
                    // The first tenth warms up (page faults, the clock).
                    if op >= reps / 10 {
                        samples[0].push(persist + read);
                        samples[1].push(persist);
                        samples[2].push(read);
                    }
                }
                for (figure, values) in medians.iter_mut().zip(&samples) {
                    figure
                        .entry(flush.clone())
                        .or_default()
                        .insert(size, median(values));
                }
            }
        }
        runs.push(medians);
    }
    let over_runs =
        |k: usize| median_figure(&runs.iter().map(|r| r[k].clone()).collect::<Vec<_>>());
    Ok(FlushFigures {
        whole: over_runs(0),
        persist: over_runs(1),
        read_back: over_runs(2),
    })
}

/// Runs the validation into `report` (figures `media_validation` and
/// ratios `model_*`).
pub fn run(common: &Common, report: &mut Report, dir: &Path) -> Result<Validation> {
    let time = if common.quick {
        Duration::from_millis(40)
    } else {
        Duration::from_millis(150)
    };
    let best = Dispatch::for_mode(MapMode::Emulated);
    let mut validation = Validation::default();
    for (choice, name) in models() {
        let region = map(dir, "validate", best, choice)?;
        let mut writes = Vec::new();
        let mut reads = Vec::new();
        let mut batched = Vec::new();
        for _ in 0..common.runs() {
            writes.push(bandwidth(&region, time, &SIZES, false)?);
            reads.push(bandwidth(&region, time, &READ_SIZES, true)?);
            batched.push(BTreeMap::from([(64, batched_64(&region, time)?)]));
        }
        let batched = median_figure(&batched.iter().map(transpose).collect::<Vec<_>>());
        validation.batched_64_gb_per_s.insert(
            name.into(),
            batched
                .into_iter()
                .filter_map(|(pattern, sizes)| Some((pattern, *sizes.get(&64)?)))
                .collect(),
        );
        validation
            .write_gb_per_s
            .insert(name.into(), median_figure(&writes));
        validation
            .read_gb_per_s
            .insert(name.into(), median_figure(&reads));
        validation
            .persist_p50_ns
            .insert(name.into(), latency(&region, time)?);
        let flushes = flush_readback(common, report, dir, best, choice)?;
        validation
            .flush_ns_per_op
            .insert(name.into(), flushes.whole);
        validation
            .flush_persist_ns
            .insert(name.into(), flushes.persist);
        validation
            .flush_read_back_ns
            .insert(name.into(), flushes.read_back);
    }
    if let Some(model) = ferrite_pmem::model::active() {
        let host = model.host();
        validation.host_costs_ns = BTreeMap::from([
            ("clwb_line".to_string(), host.clwb_line_ns),
            ("clflushopt_line".to_string(), host.clflushopt_line_ns),
            ("clflush_line".to_string(), host.clflush_line_ns),
            ("fence".to_string(), host.fence_ns),
        ]);
    }
    add_ratios(report, &validation);
    Ok(validation)
}

/// A run's batched figure keyed by pattern then size, as `median_figure`
/// takes it.
fn transpose(run: &BTreeMap<usize, BTreeMap<String, f64>>) -> BTreeMap<String, BySize> {
    let mut out: BTreeMap<String, BySize> = BTreeMap::new();
    for (size, patterns) in run {
        for (pattern, value) in patterns {
            out.entry(pattern.clone())
                .or_default()
                .insert(*size, *value);
        }
    }
    out
}

/// The median over runs of each (pattern, size) point.
fn median_figure(runs: &[BTreeMap<String, BySize>]) -> BTreeMap<String, BySize> {
    let mut out: BTreeMap<String, BySize> = BTreeMap::new();
    if let Some(first) = runs.first() {
        for (pattern, sizes) in first {
            for size in sizes.keys() {
                let values: Vec<f64> = runs
                    .iter()
                    .filter_map(|run| run.get(pattern).and_then(|s| s.get(size)).copied())
                    .collect();
                out.entry(pattern.clone())
                    .or_default()
                    .insert(*size, median(&values));
            }
        }
    }
    out
}

fn point(figure: &Figure, model: &str, pattern: &str, size: usize) -> Option<f64> {
    figure.get(model)?.get(pattern)?.get(&size).copied()
}

/// The shapes as ratios, for each model: `model_<name>_...`.
fn add_ratios(report: &mut Report, v: &Validation) {
    for (_, name) in models() {
        let w = |pattern, size| point(&v.write_gb_per_s, name, pattern, size);
        let r = |pattern, size| point(&v.read_gb_per_s, name, pattern, size);
        let pairs = [
            (
                "write_seq_vs_random_64",
                w("sequential", 64),
                w("random", 64),
            ),
            (
                "read_seq_vs_random_64",
                r("sequential", 64),
                r("random", 64),
            ),
            // The knee: random bandwidth grows with size up to a media line
            // (each access costs a whole line), then flattens.
            ("write_random_256_vs_64", w("random", 256), w("random", 64)),
            (
                "write_random_4096_vs_256",
                w("random", 4096),
                w("random", 256),
            ),
        ];
        let batched = |pattern: &str| {
            v.batched_64_gb_per_s
                .get(name)
                .and_then(|b| b.get(pattern))
                .copied()
        };
        if let (Some(seq), Some(random)) = (batched("sequential"), batched("random")) {
            report.ratio(
                format!("model_{name}_write_seq_vs_random_64_sixteen_per_fence"),
                seq / random,
            );
        }
        for (key, ours, theirs) in pairs {
            if let (Some(a), Some(b)) = (ours, theirs) {
                report.ratio(format!("model_{name}_{key}"), a / b);
            }
        }
        for size in FLUSH_SIZES {
            let ns = |flush: &str| {
                v.flush_ns_per_op
                    .get(name)
                    .and_then(|f| f.get(flush))
                    .and_then(|s| s.get(&size))
                    .copied()
            };
            if let (Some(clwb), Some(opt), Some(clflush)) =
                (ns("clwb"), ns("clflushopt"), ns("clflush"))
            {
                report.ratio(
                    format!("model_{name}_clflushopt_vs_clwb_cost_{size}"),
                    opt / clwb,
                );
                report.ratio(
                    format!("model_{name}_clflush_vs_clflushopt_cost_{size}"),
                    clflush / opt,
                );
            }
        }
    }
}

/// Prints the validation table.
#[allow(clippy::print_stdout)]
pub fn print(v: &Validation) {
    println!("\nmedia model validation: persist GB/s by access size (off | optane)");
    for pattern in ["sequential", "random"] {
        print!("{pattern:<12}");
        for size in SIZES {
            let off = point(&v.write_gb_per_s, "off", pattern, size).unwrap_or(f64::NAN);
            let on = point(&v.write_gb_per_s, "optane", pattern, size).unwrap_or(f64::NAN);
            print!("  {size}: {off:.2}|{on:.2}");
        }
        println!();
    }
    println!("read GB/s (off | optane)");
    for pattern in ["sequential", "random"] {
        print!("{pattern:<12}");
        for size in READ_SIZES {
            let off = point(&v.read_gb_per_s, "off", pattern, size).unwrap_or(f64::NAN);
            let on = point(&v.read_gb_per_s, "optane", pattern, size).unwrap_or(f64::NAN);
            print!("  {size}: {off:.2}|{on:.2}");
        }
        println!();
    }
    for (model, by_flush) in &v.flush_ns_per_op {
        for (flush, sizes) in by_flush {
            let part = |figure: &Figure| {
                figure
                    .get(model)
                    .and_then(|f| f.get(flush))
                    .cloned()
                    .unwrap_or_default()
            };
            println!(
                "{model:<7} {flush:<11} persist + read back p50 ns {sizes:?} (persist {:?}, read {:?})",
                part(&v.flush_persist_ns),
                part(&v.flush_read_back_ns)
            );
        }
    }
    for (model, sizes) in &v.persist_p50_ns {
        println!("{model:<7} persist p50 ns {sizes:?}");
    }
    for (model, patterns) in &v.batched_64_gb_per_s {
        println!("{model:<7} 64 B x16 per fence GB/s {patterns:?}");
    }
    println!("host persist costs ns {:?}", v.host_costs_ns);
}
