//! `ferrite-bench tonic`: paper 001's experiments (Tonic: write
//! amplification and lifetime of persistent memory) on emulated PM, with
//! the media accounting of `ferrite_pmem::stats` standing for the DIMM's
//! counters and the Optane media model charging the bandwidth figures.
//!
//! - **Footprint** (the paper's Table 2): one thread rewrites a fixed
//!   footprint, 64 B to 16 KiB, a cache line per flush (clflush, as the
//!   paper): requests that reach the DIMM vs media writes.
//! - **Two threads** (Table 3, with 2 threads where the paper had 28): 256 B
//!   vs 1 KiB footprints each, by flush instruction: bandwidth and write
//!   amplification.
//! - **Structures** (Fig. 2's normalisation): flushes, fences and media
//!   bytes per operation of Ferrite's persistent structures
//!   (`tonic_structures.rs`), each against its payload's own lines.
//! - **Lifetime**: days until a module's rated endurance at the rate each
//!   structure writes the media.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use ferrite_pmem::{
    Dispatch, FlushInstruction, FlushStats, MapMode, MapOptions, ModelChoice, PmemMedium,
    PmemRegion,
};
use serde::Serialize;

use crate::report::{self, median, Panel, Report, Series};
use crate::tonic_structures::{self, StructureFigure};
use crate::Common;

/// Footprints of the single-thread experiment.
const FOOTPRINTS: [usize; 9] = [64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384];
/// Footprints of the two-thread experiment.
const PAIR_FOOTPRINTS: [usize; 2] = [256, 1024];
/// Bytes apart the threads' footprints lie.
const THREAD_STRIDE: usize = 1 << 20;

/// Rated endurance of the module the lifetime estimate assumes: 360 PB
/// written over five years for the 256 GB first-generation Optane DC PMM
/// (Intel's rating as published with the launch, April 2019: StorageReview
/// and Blocks & Files, "about 360 PBW for the 256 GB module").
pub const RATED_ENDURANCE_BYTES: f64 = 360e15;
/// Where [`RATED_ENDURANCE_BYTES`] comes from, for the report.
pub const RATED_ENDURANCE_SOURCE: &str = "Intel Optane DC PMM 256 GB, rated about 360 PB written over 5 years (launch rating, April 2019, as reported by StorageReview and Blocks & Files)";

/// What one footprint run measured.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct FootprintFigure {
    /// 64-byte requests that reached the DIMM per pass over the footprint.
    pub requests_per_pass: f64,
    /// 256-byte media writes per pass.
    pub media_writes_per_pass: f64,
    /// Media bytes per byte the requests carried.
    pub media_bytes_per_request_byte: f64,
    /// Requests absorbed by the combining buffer, as a fraction.
    pub absorbed_fraction: f64,
    /// Read-modify-writes per pass.
    pub read_modify_writes_per_pass: f64,
    /// Bytes rewritten per second under the media model, GB/s.
    pub gb_per_s: f64,
}

fn map(dir: &Path, name: &str, flush: FlushInstruction) -> Result<PmemRegion> {
    let path = dir.join(format!("{name}.pool"));
    let dispatch = Dispatch::for_mode(MapMode::Emulated)
        .with_flush(flush)
        .map_err(|err| anyhow::anyhow!("{flush}: {err}"))?
        .with_nt_threshold(usize::MAX);
    let mut options = MapOptions::new(4 * THREAD_STRIDE);
    options.dispatch = Some(dispatch);
    options.populate = true;
    PmemRegion::map_with_model(&path, options, ModelChoice::Optane)
        .with_context(|| format!("mapping {}", path.display()))
}

/// Rewrites `[base, base + footprint)` a cache line at a time, each line
/// written then flushed and fenced, for `time`; returns passes and seconds.
fn rewrite(
    region: &PmemRegion,
    base: usize,
    footprint: usize,
    time: Duration,
) -> Result<(u64, f64)> {
    let line = [0x7Eu8; 64];
    let start = Instant::now();
    let mut passes = 0u64;
    while start.elapsed() < time {
        for at in (base..base + footprint).step_by(64) {
            region.write(at, &line)?;
            region.persist(at, 64)?;
        }
        passes += 1;
    }
    Ok((passes, start.elapsed().as_secs_f64()))
}

fn footprint_figure(delta: FlushStats, passes: u64, seconds: f64, bytes: u64) -> FootprintFigure {
    let per_pass = |n: u64| n as f64 / passes.max(1) as f64;
    FootprintFigure {
        requests_per_pass: per_pass(delta.requests),
        media_writes_per_pass: per_pass(delta.media_lines),
        media_bytes_per_request_byte: delta.media_bytes_per_request_byte(),
        absorbed_fraction: delta.absorbed as f64 / delta.requests.max(1) as f64,
        read_modify_writes_per_pass: per_pass(delta.read_modify_writes),
        gb_per_s: bytes as f64 / seconds / 1e9,
    }
}

fn footprints(dir: &Path, time: Duration, runs: usize) -> Result<BTreeMap<usize, FootprintFigure>> {
    let region = map(dir, "footprint", FlushInstruction::Clflush)?;
    let mut out = BTreeMap::new();
    for &footprint in &FOOTPRINTS {
        let mut figures = Vec::new();
        for run in 0..runs {
            // A fresh spot per run, so no run inherits the last one's line.
            let base = (run % 4) * THREAD_STRIDE;
            let before = region.stats();
            let (passes, seconds) = rewrite(&region, base, footprint, time)?;
            let delta = region.stats() - before;
            figures.push(footprint_figure(
                delta,
                passes,
                seconds,
                passes * footprint as u64,
            ));
        }
        figures.sort_by(|a, b| a.gb_per_s.total_cmp(&b.gb_per_s));
        out.insert(footprint, figures[figures.len() / 2]);
    }
    Ok(out)
}

/// Two threads, each rewriting its own footprint.
fn pairs(
    dir: &Path,
    time: Duration,
    runs: usize,
    report: &mut Report,
) -> Result<BTreeMap<String, BTreeMap<usize, FootprintFigure>>> {
    let mut out: BTreeMap<String, BTreeMap<usize, FootprintFigure>> = BTreeMap::new();
    for flush in [
        FlushInstruction::Clwb,
        FlushInstruction::Clflushopt,
        FlushInstruction::Clflush,
    ] {
        let region = match map(dir, "pairs", flush) {
            Ok(region) => region,
            Err(err) => {
                report.note(format!("two threads: skipping {flush}: {err}"));
                continue;
            }
        };
        for &footprint in &PAIR_FOOTPRINTS {
            let mut figures = Vec::new();
            for _ in 0..runs {
                let before = region.stats();
                let results: Vec<Result<(u64, f64)>> = std::thread::scope(|scope| {
                    let handles: Vec<_> = (0..2)
                        .map(|t| {
                            let region = &region;
                            scope.spawn(move || rewrite(region, t * THREAD_STRIDE, footprint, time))
                        })
                        .collect();
                    handles
                        .into_iter()
                        .map(|h| {
                            h.join()
                                .unwrap_or_else(|_| Err(anyhow::anyhow!("thread panicked")))
                        })
                        .collect()
                });
                let delta = region.stats() - before;
                let (mut passes, mut seconds) = (0u64, 0f64);
                for result in results {
                    let (p, s) = result?;
                    passes += p;
                    seconds = seconds.max(s);
                }
                figures.push(footprint_figure(
                    delta,
                    passes,
                    seconds,
                    passes * footprint as u64,
                ));
            }
            figures.sort_by(|a, b| a.gb_per_s.total_cmp(&b.gb_per_s));
            out.entry(flush.to_string())
                .or_default()
                .insert(footprint, figures[figures.len() / 2]);
        }
    }
    Ok(out)
}

/// Days until [`RATED_ENDURANCE_BYTES`] at `media_bytes_per_s`.
pub fn days_to_endurance(media_bytes_per_s: f64) -> f64 {
    if media_bytes_per_s <= 0.0 {
        return f64::INFINITY;
    }
    RATED_ENDURANCE_BYTES / media_bytes_per_s / 86_400.0
}

/// Runs the experiment and writes `tonic.json` and `tonic.svg`.
pub fn run(common: &Common) -> Result<()> {
    let mut report = Report::new("tonic", common.quick, common.runs());
    let dir = report::pm_scratch_dir()?.join("tonic");
    std::fs::create_dir_all(&dir)?;
    report.note(format!(
        "emulated PM on {} (DRAM; survives a process crash, not a power failure); media counts from Ferrite's accounting model of the DIMM's write-combining buffer, not hardware counters; footprint and two-thread figures run under the optane media model",
        dir.display()
    ));
    let time = if common.quick {
        Duration::from_millis(50)
    } else {
        Duration::from_millis(250)
    };
    let footprint = footprints(&dir, time, common.runs())?;
    let pair = pairs(&dir, time, common.runs(), &mut report)?;
    let structures = tonic_structures::run(common, &dir, &mut report)?;
    let _ = std::fs::remove_dir_all(&dir);
    for (name, figure) in &structures {
        report.ratio(
            format!("media_bytes_per_user_byte_{name}"),
            figure.media_bytes_per_user_byte,
        );
        report.ratio(format!("flushes_per_op_{name}"), figure.flushes_per_op);
        report.ratio(format!("fences_per_op_{name}"), figure.fences_per_op);
        report.ratio(
            format!("flushes_per_payload_line_{name}"),
            figure.flushes_per_payload_line,
        );
    }
    let lifetime: BTreeMap<String, f64> = structures
        .iter()
        .map(|(name, f)| (name.clone(), days_to_endurance(f.media_bytes_per_s)))
        .collect();
    report.figure("rated_endurance_bytes", RATED_ENDURANCE_BYTES);
    report.figure("rated_endurance_source", RATED_ENDURANCE_SOURCE);
    report.figure("days_to_rated_endurance", &lifetime);
    report.figure("footprint_single_thread", &footprint);
    report.figure("footprint_two_threads", &pair);
    report.figure("structures", &structures);
    print_tables(&footprint, &pair, &structures, &lifetime);
    let json = report.write(&common.out)?;
    let svg = common.out.join("tonic.svg");
    plot(&footprint, &pair, &structures, &svg)?;
    println!("wrote {} and {}", json.display(), svg.display());
    Ok(())
}

#[allow(clippy::print_stdout)]
fn print_tables(
    footprint: &BTreeMap<usize, FootprintFigure>,
    pair: &BTreeMap<String, BTreeMap<usize, FootprintFigure>>,
    structures: &BTreeMap<String, StructureFigure>,
    lifetime: &BTreeMap<String, f64>,
) {
    println!("\none thread rewriting a footprint (clflush per line): per pass");
    println!(
        "{:>9} {:>10} {:>10} {:>10} {:>9}",
        "footprint", "requests", "media_wr", "media/req", "GB/s"
    );
    for (size, f) in footprint {
        println!(
            "{size:>9} {:>10.1} {:>10.2} {:>10.3} {:>9.3}",
            f.requests_per_pass,
            f.media_writes_per_pass,
            f.media_bytes_per_request_byte,
            f.gb_per_s
        );
    }
    println!("\ntwo threads: write amplification (media/request bytes) and GB/s");
    for (flush, sizes) in pair {
        for (size, f) in sizes {
            println!(
                "{flush:<11} {size:>5} B  wa {:.3}  {:.3} GB/s",
                f.media_bytes_per_request_byte, f.gb_per_s
            );
        }
    }
    println!("\nstructures: flushes/op fences/op media B/op media B/user B  days to endurance");
    for (name, f) in structures {
        println!(
            "{name:<28} {:>7.2} {:>6.2} {:>8.0} {:>7.2} {:>10.0}",
            f.flushes_per_op,
            f.fences_per_op,
            f.media_bytes_per_op,
            f.media_bytes_per_user_byte,
            lifetime.get(name).copied().unwrap_or(f64::NAN)
        );
    }
}

fn plot(
    footprint: &BTreeMap<usize, FootprintFigure>,
    pair: &BTreeMap<String, BTreeMap<usize, FootprintFigure>>,
    structures: &BTreeMap<String, StructureFigure>,
    path: &Path,
) -> Result<()> {
    let table2 = Panel {
        title: "One thread: requests vs media writes per pass".into(),
        x_label: "footprint (bytes)".into(),
        y_label: "per pass".into(),
        log_x: true,
        log_y: true,
        series: vec![
            Series {
                label: "requests (64 B)".into(),
                points: footprint
                    .iter()
                    .map(|(&s, f)| (s as f64, f.requests_per_pass.max(1e-3)))
                    .collect(),
            },
            Series {
                label: "media writes (256 B)".into(),
                points: footprint
                    .iter()
                    .map(|(&s, f)| (s as f64, f.media_writes_per_pass.max(1e-3)))
                    .collect(),
            },
        ],
    };
    let table3 = Panel {
        title: "Two threads: write amplification vs bandwidth".into(),
        x_label: "media bytes per request byte".into(),
        y_label: "GB/s".into(),
        log_x: false,
        log_y: false,
        series: pair
            .iter()
            .map(|(flush, sizes)| Series {
                label: format!("{flush} (256 B, 1 KiB)"),
                points: sizes
                    .values()
                    .map(|f| (f.media_bytes_per_request_byte, f.gb_per_s))
                    .collect(),
            })
            .collect(),
    };
    // One series per structure kind, by payload size, flushes per payload
    // line (Tonic's normalisation to the minimum).
    let mut kinds: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for f in structures.values() {
        kinds
            .entry(f.kind.clone())
            .or_default()
            .push((f.payload_bytes as f64, f.flushes_per_payload_line));
    }
    let fig2 = Panel {
        title: "Flushes per payload line (1 = minimum)".into(),
        x_label: "payload bytes".into(),
        y_label: "flushes / payload line".into(),
        log_x: true,
        log_y: false,
        series: kinds
            .into_iter()
            .map(|(label, mut points)| {
                points.sort_by(|a, b| a.0.total_cmp(&b.0));
                Series { label, points }
            })
            .collect(),
    };
    report::plot(
        path,
        "ferrite-bench tonic (emulated PM, media model)",
        &[table2, table3, fig2],
    )
}

/// The median of `values`, for the structures module.
pub(crate) fn median_of(values: &[f64]) -> f64 {
    median(values)
}
