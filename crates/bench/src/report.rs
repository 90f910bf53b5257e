//! What every experiment shares: statistics, the JSON result file, plots,
//! and a description of the machine the figures came from.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use plotters::prelude::*;
use serde::Serialize;
use serde_json::{json, Value};

/// Median of `values` (the mean of the middle two for an even count);
/// 0 for none.
pub fn median(values: &[f64]) -> f64 {
    percentile(values, 50.0)
}

/// The median of `a / b` over (a, b) pairs measured side by side, one
/// pair per run, so each ratio compares the two under the same conditions;
/// NaN for none.
pub fn median_ratio(pairs: impl IntoIterator<Item = (f64, f64)>) -> f64 {
    let ratios: Vec<f64> = pairs.into_iter().map(|(a, b)| a / b).collect();
    if ratios.is_empty() {
        return f64::NAN;
    }
    median(&ratios)
}

/// The `p`-th percentile (0..=100) of `values` by linear interpolation;
/// 0 for none.
pub fn percentile(values: &[f64], p: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = (p / 100.0).clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let low = rank.floor() as usize;
    let high = rank.ceil() as usize;
    let weight = rank - low as f64;
    sorted[low] * (1.0 - weight) + sorted[high] * weight
}

/// Latency samples in nanoseconds, summarised.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct LatencySummary {
    /// Number of samples.
    pub count: usize,
    /// Median, in nanoseconds.
    pub p50_ns: f64,
    /// 99th percentile, in nanoseconds.
    pub p99_ns: f64,
    /// Mean, in nanoseconds.
    pub mean_ns: f64,
}

impl LatencySummary {
    /// Summarises samples given in nanoseconds.
    pub fn from_ns(samples: &[f64]) -> LatencySummary {
        let mean = if samples.is_empty() {
            0.0
        } else {
            samples.iter().sum::<f64>() / samples.len() as f64
        };
        LatencySummary {
            count: samples.len(),
            p50_ns: percentile(samples, 50.0),
            p99_ns: percentile(samples, 99.0),
            mean_ns: mean,
        }
    }
}

/// Runs `f` repeatedly for at least `min_time` and `min_iters` iterations
/// and returns the nanoseconds each call took.
pub fn sample_ns(min_iters: usize, min_time: Duration, mut f: impl FnMut()) -> Vec<f64> {
    let mut samples = Vec::with_capacity(min_iters);
    let start = Instant::now();
    while samples.len() < min_iters || start.elapsed() < min_time {
        let t = Instant::now();
        f();
        samples.push(t.elapsed().as_nanos() as f64);
        if samples.len() >= 50_000_000 {
            break;
        }
    }
    samples
}

/// The machine and build the figures came from, recorded with every result.
pub fn machine() -> Value {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|line| line.starts_with("model name"))
                .and_then(|line| line.split(':').nth(1))
                .map(|name| name.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    let features = ferrite_pmem::CpuFeatures::get();
    json!({
        "cpu": cpu,
        "cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        "clwb": features.clwb,
        "clflushopt": features.clflushopt,
        "avx512f": features.avx512f,
        "eadr": features.eadr,
        // The process-wide default, then what a region of each medium
        // uses (the non-temporal threshold differs per medium and vendor).
        "dispatch": ferrite_pmem::Dispatch::global().to_string(),
        "dispatch_emulated": ferrite_pmem::Dispatch::for_mode(ferrite_pmem::MapMode::Emulated).to_string(),
        "dispatch_real_pm": ferrite_pmem::Dispatch::for_mode(ferrite_pmem::MapMode::RealPm).to_string(),
        "kernel": std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim(),
        "debug_build": cfg!(debug_assertions),
        // The PM media model the figures ran under (null: off, DRAM costs).
        "pmem_media_model": media_model(),
    })
}

/// The media model in use, with its parameters and DRAM's measured costs;
/// `null` when off.
pub fn media_model() -> Value {
    match ferrite_pmem::model::describe() {
        None => Value::Null,
        Some(fields) => {
            let mut object = serde_json::Map::new();
            object.insert("model".into(), json!("optane"));
            for (name, value) in fields {
                object.insert(name.into(), json!(value));
            }
            Value::Object(object)
        }
    }
}

/// One experiment's result file: figures, ratios (> 1 means Ferrite, or
/// the first-named system, is better) and notes.
#[derive(Debug)]
pub struct Report {
    name: String,
    quick: bool,
    runs: usize,
    figures: BTreeMap<String, Value>,
    ratios: BTreeMap<String, f64>,
    notes: Vec<String>,
}

impl Report {
    /// An empty report for experiment `name`.
    pub fn new(name: &str, quick: bool, runs: usize) -> Report {
        Report {
            name: name.to_string(),
            quick,
            runs,
            figures: BTreeMap::new(),
            ratios: BTreeMap::new(),
            notes: Vec::new(),
        }
    }

    /// Records a figure (any serialisable value) under `key`.
    pub fn figure(&mut self, key: impl Into<String>, value: impl Serialize) {
        let value = serde_json::to_value(value).unwrap_or(Value::Null);
        self.figures.insert(key.into(), value);
    }

    /// Records a ratio under `key`.
    pub fn ratio(&mut self, key: impl Into<String>, value: f64) {
        self.ratios.insert(key.into(), value);
    }

    /// A figure recorded so far.
    pub fn figure_value(&self, key: &str) -> Option<&Value> {
        self.figures.get(key)
    }

    /// The ratios recorded so far.
    pub fn ratios(&self) -> &BTreeMap<String, f64> {
        &self.ratios
    }

    /// Adds a sentence for the reader (a caveat, a skipped baseline).
    pub fn note(&mut self, note: impl Into<String>) {
        let note = note.into();
        tracing::info!("{note}");
        self.notes.push(note);
    }

    /// Writes `DIR/<name>.json` and returns its path.
    pub fn write(&self, dir: &Path) -> Result<PathBuf> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let path = dir.join(format!("{}.json", self.name));
        let value = json!({
            "experiment": self.name,
            "quick": self.quick,
            "runs": self.runs,
            "statistic": "median of runs",
            "machine": machine(),
            "figures": self.figures,
            "ratios": self.ratios,
            "notes": self.notes,
        });
        let text = serde_json::to_string_pretty(&value)?;
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        Ok(path)
    }
}

/// One line of a plot.
#[derive(Clone, Debug)]
pub struct Series {
    /// Legend label.
    pub label: String,
    /// Points, x ascending.
    pub points: Vec<(f64, f64)>,
}

/// One series per system of `results` (system → figure name → value):
/// the figure `key(x)` at each `x` that has one, e.g. requests/s by
/// pipeline depth.
pub fn series_by_system(
    results: &BTreeMap<String, BTreeMap<String, f64>>,
    xs: &[usize],
    key: impl Fn(usize) -> String,
) -> Vec<Series> {
    results
        .iter()
        .map(|(system, figures)| Series {
            label: system.clone(),
            points: xs
                .iter()
                .filter_map(|x| figures.get(&key(*x)).map(|v| (*x as f64, *v)))
                .collect(),
        })
        .collect()
}

/// One panel of a figure.
#[derive(Clone, Debug)]
pub struct Panel {
    /// Title above the panel.
    pub title: String,
    /// X axis label.
    pub x_label: String,
    /// Y axis label.
    pub y_label: String,
    /// Logarithmic x axis (base 2 ticks suit sizes and thread counts).
    pub log_x: bool,
    /// Logarithmic y axis.
    pub log_y: bool,
    /// The lines.
    pub series: Vec<Series>,
}

fn range_of(values: impl Iterator<Item = f64>, log: bool) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.filter(|v| v.is_finite() && (!log || *v > 0.0)) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return (1.0, 10.0);
    }
    if log {
        (lo / 1.5, hi * 1.5)
    } else {
        // Linear axes start at zero for non-negative data, so bars of
        // throughput are compared from the same base.
        let pad = ((hi - lo) * 0.08).max(hi.abs() * 0.05).max(1e-9);
        let low = if lo >= 0.0 { 0.0 } else { lo - pad };
        (low, hi + pad)
    }
}

/// Draws `panels` side by side into an SVG file.
pub fn plot(path: &Path, title: &str, panels: &[Panel]) -> Result<()> {
    let width = 620 * panels.len().max(1) as u32;
    let root = SVGBackend::new(path, (width, 480)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(title, ("sans-serif", 22))?;
    let areas = root.split_evenly((1, panels.len().max(1)));
    for (area, panel) in areas.iter().zip(panels) {
        draw_panel(area, panel)?;
    }
    root.present()
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    panel: &Panel,
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let xs = panel
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0));
    let ys = panel
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1));
    let (x0, x1) = range_of(xs, panel.log_x);
    let (y0, y1) = range_of(ys, panel.log_y);
    let mut builder = ChartBuilder::on(area);
    builder
        .caption(&panel.title, ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70);
    macro_rules! draw {
        ($chart:expr) => {{
            let mut chart = $chart;
            chart
                .configure_mesh()
                .x_desc(panel.x_label.as_str())
                .y_desc(panel.y_label.as_str())
                .draw()?;
            for (i, series) in panel.series.iter().enumerate() {
                let color = Palette99::pick(i).to_rgba();
                chart
                    .draw_series(LineSeries::new(
                        series.points.iter().copied(),
                        color.stroke_width(2),
                    ))?
                    .label(series.label.as_str())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2))
                    });
                chart.draw_series(
                    series
                        .points
                        .iter()
                        .map(|&p| Circle::new(p, 3, color.filled())),
                )?;
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .position(SeriesLabelPosition::UpperLeft)
                .draw()?;
        }};
    }
    match (panel.log_x, panel.log_y) {
        (true, true) => {
            draw!(builder.build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale())?)
        }
        (true, false) => draw!(builder.build_cartesian_2d((x0..x1).log_scale(), y0..y1)?),
        (false, true) => draw!(builder.build_cartesian_2d(x0..x1, (y0..y1).log_scale())?),
        (false, false) => draw!(builder.build_cartesian_2d(x0..x1, y0..y1)?),
    }
    Ok(())
}

/// A directory for benchmark files on the disk (not tmpfs): `$FERRITE_BENCH_DISK_DIR`
/// or `./bench-scratch`.
pub fn disk_scratch_dir() -> Result<PathBuf> {
    let dir = std::env::var_os("FERRITE_BENCH_DISK_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("bench-scratch"));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

/// A directory on tmpfs for emulated PM: `$FERRITE_BENCH_PM_DIR` or
/// `/dev/shm/ferrite-bench`.
pub fn pm_scratch_dir() -> Result<PathBuf> {
    let dir = std::env::var_os("FERRITE_BENCH_PM_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/dev/shm/ferrite-bench"));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_are_paired_within_runs() {
        // Per-run ratios 1.0, 1.5 and 0.7: their median is 1.0, while the
        // medians' ratio (210 / 200) would read 1.05.
        let pairs = [(100.0, 100.0), (300.0, 200.0), (210.0, 300.0)];
        assert!((median_ratio(pairs) - 1.0).abs() < 1e-12);
        assert!((median_ratio(pairs[..2].to_vec()) - 1.25).abs() < 1e-12);
        assert!(median_ratio([]).is_nan());
    }

    #[test]
    fn percentiles_interpolate() {
        assert_eq!(median(&[]), 0.0);
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(percentile(&[1.0, 2.0, 3.0, 4.0, 5.0], 100.0), 5.0);
        assert_eq!(percentile(&[1.0, 2.0, 3.0, 4.0, 5.0], 0.0), 1.0);
    }

    #[test]
    fn report_and_plot_are_written() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut report = Report::new("unit", true, 1);
        report.figure("x", 1.5);
        report.ratio("a_vs_b", 2.0);
        let path = report.write(dir.path()).expect("write");
        let value: Value =
            serde_json::from_str(&std::fs::read_to_string(path).expect("read")).expect("json");
        assert_eq!(value["ratios"]["a_vs_b"], 2.0);
        let svg = dir.path().join("unit.svg");
        let panel = Panel {
            title: "t".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            log_x: true,
            log_y: false,
            series: vec![Series {
                label: "s".into(),
                points: vec![(1.0, 1.0), (2.0, 4.0)],
            }],
        };
        plot(&svg, "unit", &[panel]).expect("plot");
        assert!(std::fs::read_to_string(svg).expect("svg").contains("<svg"));
    }
}
