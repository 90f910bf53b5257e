//! The tier experiment (issue #40, paper 001's AliusM): a keyspace larger
//! than its DRAM budget. Ferrite with `maxmemory-dram` at 10, 20, 50 and
//! 100% of what the dataset takes in DRAM (the rest of the values on the
//! PM tier, emulated PM), with the media model off and `optane`, against
//! all-DRAM Ferrite and redis-server 7 holding everything in DRAM, in the
//! same run: throughput and p99 of GET:SET 90:10 and 50:50 with keys by
//! Zipf 0.99 and uniform, and the DRAM used against the budget.
//!
//! Servers are pinned to core 0 (taskset), without a log (`appendonly
//! no`): the tier changes where values live, not what is logged. The load
//! runs on this process's threads, unpinned.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

use crate::idle::IdlePolicy;
use crate::kv::ensure_redis;
use crate::report::{self, Panel, Report, Series};
use crate::tier_plan::{self, Figures, LoadKind, Server, Setup, Spec, ALL_LOADS, PORT};
use crate::Common;

/// DRAM shares of the tiered servers in a full run, percent.
const SHARES: [u32; 4] = [10, 20, 50, 100];

/// Options of the tier experiment.
#[derive(Clone, Debug, clap::Args)]
pub struct TierArgs {
    /// The options every experiment takes (`--model` is ignored: the
    /// models of `--models` are run, for the comparison).
    #[command(flatten)]
    pub common: Common,
    /// Keys of the dataset.
    #[arg(long, default_value_t = 1_000_000)]
    pub keys: usize,
    /// Bytes of each value.
    #[arg(long, default_value_t = 1024)]
    pub value_bytes: usize,
    /// Seconds each load is measured (default 10, 3 with --quick).
    #[arg(long)]
    pub seconds: Option<u64>,
    /// DRAM shares of the tiered servers, percent.
    #[arg(long, value_delimiter = ',', default_values_t = SHARES)]
    pub shares: Vec<u32>,
    /// Media models of the tiered servers (`off`, `optane`).
    #[arg(long, value_delimiter = ',', default_values = ["off", "optane"])]
    pub models: Vec<String>,
    /// Loads to measure, in order (`zipf_get90`, `uniform_get50`, ...).
    #[arg(long, value_delimiter = ',', default_values = ALL_LOADS)]
    pub loads: Vec<String>,
    /// Leave out redis-server.
    #[arg(long)]
    pub skip_redis: bool,
    /// Start and fill every server first, then measure them in turns on
    /// each load (A, B, A, B): a drift of the host hits all alike. Every
    /// server holds its dataset for the whole run.
    #[arg(long)]
    pub interleave: bool,
    /// Another Ferrite binary (a `ferrite-bench` build, as it serves
    /// through `kv-serve`): each tiered server is also run with it,
    /// labelled `<label>_alt`, for an A/B of two builds in the same run.
    #[arg(long)]
    pub alt_bin: Option<PathBuf>,
}

/// What the dataset takes in Ferrite's DRAM: `used_memory` after the fill
/// less an empty server's. The filled server is returned: it is the
/// all-DRAM Ferrite of the run.
fn dram_footprint(spec: &Spec, setup: &Setup) -> Result<(u64, u64, Server)> {
    let server = Server::start(spec, setup)?;
    let empty = server.memory_field("used_memory")? as u64;
    server.fill(setup)?;
    let full = server.memory_field("used_memory")? as u64;
    Ok((empty, full, server))
}

fn dram_spec() -> Spec {
    Spec {
        label: "ferrite_dram".into(),
        redis: false,
        budget: None,
        model: "off".into(),
        bin: None,
        port: PORT,
    }
}

fn specs(args: &TierArgs, empty: u64, full: u64) -> Vec<Spec> {
    let mut out = vec![dram_spec()];
    if !args.skip_redis {
        out.push(Spec {
            label: "redis".into(),
            redis: true,
            budget: None,
            model: "off".into(),
            bin: None,
            port: PORT,
        });
    }
    let bins: Vec<(Option<PathBuf>, &str)> = std::iter::once((None, ""))
        .chain(args.alt_bin.clone().map(|b| (Some(b), "_alt")))
        .collect();
    for model in &args.models {
        for &share in &args.shares {
            // The share of what the data takes, on top of what an empty
            // server holds (which no tier can move).
            let budget = empty + (full - empty) * u64::from(share) / 100;
            for (bin, suffix) in &bins {
                out.push(Spec {
                    label: format!("tier{share}_{model}{suffix}"),
                    redis: false,
                    budget: Some(budget),
                    model: model.clone(),
                    bin: bin.clone(),
                    port: PORT,
                });
            }
        }
    }
    for (i, spec) in out.iter_mut().enumerate() {
        spec.port = PORT + i as u16;
    }
    out
}

fn check(args: &TierArgs) -> Result<Vec<LoadKind>> {
    if let Some(m) = args
        .models
        .iter()
        .find(|m| !["off", "optane"].contains(&m.as_str()))
    {
        bail!("--models: unknown model {m:?} (off or optane)");
    }
    if let Some(s) = args.shares.iter().find(|s| !(1..=100).contains(*s)) {
        bail!("--shares: {s} is not a percentage from 1 to 100");
    }
    if let Some(bin) = &args.alt_bin {
        tier_plan::check_bin(bin)?;
    }
    args.loads.iter().map(|l| LoadKind::parse(l)).collect()
}

fn ratios(
    report: &mut Report,
    results: &BTreeMap<String, Figures>,
    budgets: &BTreeMap<String, u64>,
) {
    let get = |server: &str, key: &str| results.get(server).and_then(|f| f.get(key)).copied();
    for (model, suffix) in [("off", ""), ("optane", "_optane")] {
        for (dist, mix) in [("zipf", 90), ("uniform", 90), ("zipf", 50), ("uniform", 50)] {
            let base = format!("{dist}_get{mix}");
            let tier = format!("tier20_{model}");
            if let (Some(t), Some(d)) = (
                get(&tier, &format!("{base}_ops")),
                get("ferrite_dram", &format!("{base}_ops")),
            ) {
                report.ratio(format!("tier20_vs_dram_{base}{suffix}"), t / d);
            }
            if let (Some(t), Some(d)) = (
                get(&tier, &format!("{base}_cpu_us_per_cmd")),
                get("ferrite_dram", &format!("{base}_cpu_us_per_cmd")),
            ) {
                report.ratio(format!("tier20_cpu_per_cmd_vs_dram_{base}{suffix}"), t / d);
            }
            if let (Some(t), Some(d)) = (
                get(&tier, &format!("{base}_p99_us")),
                get("ferrite_dram", &format!("{base}_p99_us")),
            ) {
                report.ratio(format!("tier20_p99_vs_dram_{base}{suffix}"), t / d);
            }
        }
    }
    if let (Some(f), Some(r)) = (
        get("ferrite_dram", "zipf_get90_ops"),
        get("redis", "zipf_get90_ops"),
    ) {
        report.ratio("dram_vs_redis_zipf_get90", f / r);
    }
    // The worst DRAM use against its budget over the tiered servers below
    // 100%.
    let worst = budgets
        .iter()
        .filter(|(label, _)| !label.starts_with("tier100") && !label.ends_with("_alt"))
        .filter_map(|(label, budget)| get(label, "used_memory").map(|u| u / *budget as f64))
        .fold(0.0, f64::max);
    report.ratio("tier_dram_used_vs_budget", worst);
}

fn plot(
    dir: &Path,
    args: &TierArgs,
    loads: &[LoadKind],
    results: &BTreeMap<String, Figures>,
) -> Result<PathBuf> {
    let mut panels = Vec::new();
    for kind in loads {
        let key = format!("{}_ops", kind.name());
        let flat = |label: &str, server: &str| Series {
            label: label.into(),
            points: results
                .get(server)
                .and_then(|f| f.get(&key))
                .map(|v| args.shares.iter().map(|s| (f64::from(*s), *v)).collect())
                .unwrap_or_default(),
        };
        let tier = |model: &str| Series {
            label: format!("Ferrite tier, model {model}"),
            points: args
                .shares
                .iter()
                .filter_map(|s| {
                    results
                        .get(&format!("tier{s}_{model}"))
                        .and_then(|f| f.get(&key))
                        .map(|v| (f64::from(*s), *v))
                })
                .collect(),
        };
        let mut series: Vec<Series> = args.models.iter().map(|m| tier(m)).collect();
        series.push(flat("Ferrite all in DRAM", "ferrite_dram"));
        if !args.skip_redis {
            series.push(flat("redis-server 7 all in DRAM", "redis"));
        }
        panels.push(Panel {
            title: format!(
                "{}, GET:SET {}:{}",
                kind.dist.name(),
                kind.get_pct,
                100 - kind.get_pct
            ),
            x_label: "DRAM share of the dataset, %".into(),
            y_label: "ops/s".into(),
            log_x: false,
            log_y: false,
            series,
        });
    }
    let path = dir.join("tier.svg");
    report::plot(
        &path,
        "A keyspace larger than its DRAM budget: throughput by DRAM share",
        &panels,
    )?;
    Ok(path)
}

/// The alternative build's throughput over this build's, per tiered
/// server and load (`<label>_alt_vs_<label>_<load>`), with `--alt-bin`;
/// and, from an interleaved run, its CPU time per command over this
/// build's (`..._cpu_per_cmd`: above 1, the alternative costs more).
fn alt_ratios(report: &mut Report, results: &BTreeMap<String, Figures>) {
    for (label, figures) in results {
        let Some(base) = label.strip_suffix("_alt") else {
            continue;
        };
        let Some(ours) = results.get(base) else {
            continue;
        };
        for (key, alt) in figures {
            let Some(own) = ours.get(key) else {
                continue;
            };
            if let Some(load) = key.strip_suffix("_ops") {
                report.ratio(format!("{label}_vs_{base}_{load}"), alt / own);
            }
            if let Some(load) = key.strip_suffix("_cpu_us_per_cmd") {
                report.ratio(format!("{label}_vs_{base}_{load}_cpu_per_cmd"), alt / own);
            }
        }
    }
}

/// Runs the experiment.
pub fn run(args: &TierArgs) -> Result<()> {
    let common = &args.common.clone().resolved();
    let loads = check(args)?;
    if !args.skip_redis {
        ensure_redis()?;
    }
    let mut report = Report::new("tier", common.quick, common.runs());
    let _idle = IdlePolicy::hold_for(common.host_idle, &mut report);
    let setup = Setup {
        keys: args.keys,
        value_bytes: args.value_bytes,
        seconds: args.seconds.unwrap_or(if common.quick { 3 } else { 10 }),
        runs: common.runs(),
        loads: loads.clone(),
        disk: report::disk_scratch_dir()?.join("tier"),
        pm: report::pm_scratch_dir()?.join("tier"),
    };
    report.note("servers pinned to core 0 (taskset), no log; 8 closed-loop clients on this process's threads, one command in flight each");
    report.note(format!(
        "the PM tier is emulated PM on {} (a mapped file: survives a process crash, not a power failure); the heap is rebuilt from the log at start-up",
        setup.pm.display()
    ));
    report.note("ratios: tiered Ferrite at a 20% DRAM share over all-DRAM Ferrite (> 1 faster; p99 ratios < 1 better); tier_dram_used_vs_budget is the largest used_memory / maxmemory-dram over the tiered servers below 100%");
    if args.interleave {
        report.note("interleaved: every server started and filled first, then measured in turns on each load (A, B, A, B)");
    }
    report.figure("keys", args.keys);
    report.figure("value_bytes", args.value_bytes);
    let (empty, full, dram) = dram_footprint(&dram_spec(), &setup)?;
    report.figure("dram_empty_bytes", empty);
    report.figure("dram_full_bytes", full);
    let specs = specs(args, empty, full);
    let budgets: BTreeMap<String, u64> = specs
        .iter()
        .filter_map(|s| s.budget.map(|b| (s.label.clone(), b)))
        .collect();
    let results = tier_plan::run_all(&specs, &setup, args.interleave, Some(dram))?;
    ratios(&mut report, &results, &budgets);
    alt_ratios(&mut report, &results);
    report.figure("budgets", &budgets);
    report.figure("servers", &results);
    let json = report.write(&common.out)?;
    let svg = plot(&common.out, args, &loads, &results)?;
    for (k, v) in report.ratios() {
        println!("{k:<48} {v:.3}");
    }
    println!("wrote {} and {}", json.display(), svg.display());
    Ok(())
}
