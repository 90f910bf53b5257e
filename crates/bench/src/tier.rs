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
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};

use crate::idle::IdlePolicy;
use crate::kv::{ensure_redis, wait_for_port, Running};
use crate::report::{self, median, Panel, Report, Series};
use crate::tier_load::{self, Dist, KeyChooser, Load, Measured};
use crate::Common;

const SERVER_CORE: &str = "0";
const PORT: u16 = 17600;
/// DRAM shares of the tiered servers, percent.
const SHARES: [u32; 4] = [10, 20, 50, 100];
/// GET percentages of the mixes.
const MIXES: [u32; 2] = [90, 50];
const CLIENTS: usize = 8;

/// Options of the tier experiment.
#[derive(Clone, Debug, clap::Args)]
pub struct TierArgs {
    /// The options every experiment takes (`--model` is ignored: both
    /// models are always run, for the comparison).
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
}

/// One server of the run.
#[derive(Clone, Debug)]
struct Spec {
    label: String,
    redis: bool,
    /// DRAM budget in bytes (tiered Ferrite only).
    budget: Option<u64>,
    model: &'static str,
}

fn start(spec: &Spec, dir: &Path, pm: &Path, heap_bytes: u64) -> Result<Running> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir)?;
    std::fs::create_dir_all(pm)?;
    let mut cmd = Command::new("taskset");
    cmd.args(["-c", SERVER_CORE])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .env(ferrite_pmem::model::ENV_MODEL, spec.model);
    if spec.redis {
        cmd.args(["redis-server", "--port", &PORT.to_string(), "--save", ""])
            .args(["--appendonly", "no", "--dir"])
            .arg(dir);
    } else {
        cmd.arg(std::env::current_exe()?)
            .args([
                "kv-serve",
                "--port",
                &PORT.to_string(),
                "--appendonly",
                "no",
                "--save",
                "",
            ])
            .arg("--dir")
            .arg(dir);
        if let Some(budget) = spec.budget {
            cmd.args(["--maxmemory-dram", &budget.to_string()])
                .args(["--pm-tier-size", &heap_bytes.to_string()])
                .arg("--pm-tier-path")
                .arg(pm.join("tier.heap"));
        }
    }
    let child = cmd
        .spawn()
        .with_context(|| format!("starting {}", spec.label))?;
    let running = Running { child, port: PORT };
    wait_for_port(PORT)?;
    Ok(running)
}

/// Figures of one server: `{zipf,uniform}_get{90,50}_{ops,p99_us}`, and
/// for Ferrite the memory figures after the loads.
type Figures = BTreeMap<String, f64>;

fn measure(spec: &Spec, args: &TierArgs, dirs: (&Path, &Path), runs: usize) -> Result<Figures> {
    let dataset = (args.keys * args.value_bytes) as u64;
    let heap = dataset + dataset / 4 + (256 << 20);
    let server = start(spec, &dirs.0.join(&spec.label), dirs.1, heap)?;
    tier_load::fill(PORT, args.keys, args.value_bytes)?;
    let seconds = args
        .seconds
        .unwrap_or(if args.common.quick { 3 } else { 10 });
    let mut out = Figures::new();
    for dist in [Dist::Zipf, Dist::Uniform] {
        let chooser = Arc::new(KeyChooser::new(args.keys, dist));
        for get_pct in MIXES {
            let load = |secs: u64| Load {
                port: PORT,
                keys: args.keys,
                value_bytes: args.value_bytes,
                get_pct,
                clients: CLIENTS,
                duration: Duration::from_secs(secs),
            };
            // A short warm-up lets demotion and promotion settle on this
            // mix before it is measured.
            tier_load::run(load(1), &chooser)?;
            let samples: Vec<Measured> = (0..runs)
                .map(|_| tier_load::run(load(seconds), &chooser))
                .collect::<Result<_>>()?;
            let name = format!("{}_get{get_pct}", dist.name());
            let ops: Vec<f64> = samples.iter().map(|m| m.ops).collect();
            let p99: Vec<f64> = samples.iter().map(|m| m.p99_us).collect();
            out.insert(format!("{name}_ops"), median(&ops));
            out.insert(format!("{name}_p99_us"), median(&p99));
        }
    }
    if !spec.redis {
        out.insert(
            "used_memory".into(),
            tier_load::info_field(PORT, "memory", "used_memory")?,
        );
    }
    if spec.budget.is_some() {
        for field in [
            "used_memory_pmem",
            "tier_values_dram_pct",
            "tier_demotions",
            "tier_promotions",
            "tier_pm_flushes_per_write",
            "tier_pm_frag_ratio",
            "tier_demote_backoffs",
        ] {
            out.insert(field.into(), tier_load::info_field(PORT, "memory", field)?);
        }
    }
    drop(server);
    let _ = std::fs::remove_dir_all(dirs.0.join(&spec.label));
    let _ = std::fs::remove_file(dirs.1.join("tier.heap"));
    Ok(out)
}

/// What the dataset takes in Ferrite's DRAM: `used_memory` after the fill
/// less an empty server's.
fn dram_footprint(args: &TierArgs, disk: &Path, pm: &Path) -> Result<(u64, u64)> {
    let spec = Spec {
        label: "footprint".into(),
        redis: false,
        budget: None,
        model: "off",
    };
    let server = start(&spec, &disk.join("footprint"), pm, 0)?;
    let empty = tier_load::info_field(PORT, "memory", "used_memory")? as u64;
    tier_load::fill(PORT, args.keys, args.value_bytes)?;
    let full = tier_load::info_field(PORT, "memory", "used_memory")? as u64;
    drop(server);
    Ok((empty, full))
}

fn specs(empty: u64, full: u64) -> Vec<Spec> {
    let mut out = vec![
        Spec {
            label: "redis".into(),
            redis: true,
            budget: None,
            model: "off",
        },
        Spec {
            label: "ferrite_dram".into(),
            redis: false,
            budget: None,
            model: "off",
        },
    ];
    for model in ["off", "optane"] {
        for share in SHARES {
            // The share of what the data takes, on top of what an empty
            // server holds (which no tier can move).
            let budget = empty + (full - empty) * u64::from(share) / 100;
            out.push(Spec {
                label: format!("tier{share}_{model}"),
                redis: false,
                budget: Some(budget),
                model,
            });
        }
    }
    out
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
        .filter(|(label, _)| !label.starts_with("tier100"))
        .filter_map(|(label, budget)| get(label, "used_memory").map(|u| u / *budget as f64))
        .fold(0.0, f64::max);
    report.ratio("tier_dram_used_vs_budget", worst);
}

fn plot(dir: &Path, results: &BTreeMap<String, Figures>) -> Result<PathBuf> {
    let mut panels = Vec::new();
    for dist in ["zipf", "uniform"] {
        for mix in MIXES {
            let key = format!("{dist}_get{mix}_ops");
            let flat = |label: &str, server: &str| Series {
                label: label.into(),
                points: results
                    .get(server)
                    .and_then(|f| f.get(&key))
                    .map(|v| SHARES.iter().map(|s| (f64::from(*s), *v)).collect())
                    .unwrap_or_default(),
            };
            let tier = |model: &str| Series {
                label: format!("Ferrite tier, model {model}"),
                points: SHARES
                    .iter()
                    .filter_map(|s| {
                        results
                            .get(&format!("tier{s}_{model}"))
                            .and_then(|f| f.get(&key))
                            .map(|v| (f64::from(*s), *v))
                    })
                    .collect(),
            };
            panels.push(Panel {
                title: format!("{dist}, GET:SET {mix}:{}", 100 - mix),
                x_label: "DRAM share of the dataset, %".into(),
                y_label: "ops/s".into(),
                log_x: false,
                log_y: false,
                series: vec![
                    tier("off"),
                    tier("optane"),
                    flat("Ferrite all in DRAM", "ferrite_dram"),
                    flat("redis-server 7 all in DRAM", "redis"),
                ],
            });
        }
    }
    let path = dir.join("tier.svg");
    report::plot(
        &path,
        "A keyspace larger than its DRAM budget: throughput by DRAM share",
        &panels,
    )?;
    Ok(path)
}

/// Runs the experiment.
pub fn run(args: &TierArgs) -> Result<()> {
    let common = &args.common.clone().resolved();
    ensure_redis()?;
    let mut report = Report::new("tier", common.quick, common.runs());
    let _idle = IdlePolicy::hold_for(common.host_idle, &mut report);
    let disk = report::disk_scratch_dir()?.join("tier");
    let pm = report::pm_scratch_dir()?.join("tier");
    report.note("servers pinned to core 0 (taskset), no log; 8 closed-loop clients on this process's threads, one command in flight each");
    report.note(format!(
        "the PM tier is emulated PM on {} (a mapped file: survives a process crash, not a power failure); the heap is rebuilt from the log at start-up",
        pm.display()
    ));
    report.note("ratios: tiered Ferrite at a 20% DRAM share over all-DRAM Ferrite (> 1 faster; p99 ratios < 1 better); tier_dram_used_vs_budget is the largest used_memory / maxmemory-dram over the tiered servers below 100%");
    report.figure("keys", args.keys);
    report.figure("value_bytes", args.value_bytes);
    let (empty, full) = dram_footprint(args, &disk, &pm)?;
    report.figure("dram_empty_bytes", empty);
    report.figure("dram_full_bytes", full);
    let mut results = BTreeMap::new();
    let mut budgets = BTreeMap::new();
    for spec in specs(empty, full) {
        let figures = measure(&spec, args, (&disk, &pm), common.runs())?;
        println!(
            "{:<16} {}",
            spec.label,
            figures
                .iter()
                .map(|(k, v)| format!("{k}={v:.0}"))
                .collect::<Vec<_>>()
                .join(" ")
        );
        if let Some(budget) = spec.budget {
            budgets.insert(spec.label.clone(), budget);
        }
        results.insert(spec.label, figures);
    }
    ratios(&mut report, &results, &budgets);
    report.figure("budgets", &budgets);
    report.figure("servers", &results);
    let json = report.write(&common.out)?;
    let svg = plot(&common.out, &results)?;
    for (k, v) in report.ratios() {
        println!("{k:<48} {v:.3}");
    }
    println!("wrote {} and {}", json.display(), svg.display());
    Ok(())
}
