//! Which servers and loads one run of the tier experiment measures, and
//! in what order: each server by itself (the default: one server holds
//! memory at a time), or all of them at once taking turns on every load
//! (`--interleave`: A, B, A, B, ... so a drift of the host hits every
//! server alike, and each is filled once).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};

use crate::kv::{wait_for_port, Running};
use crate::report::median;
use crate::tier_load::{self, Dist, KeyChooser, Load, Measured};

const SERVER_CORE: &str = "0";
/// The first server's port; the others follow it.
pub const PORT: u16 = 17600;
const CLIENTS: usize = 8;

/// The loads of a full run, in the order they are measured.
pub const ALL_LOADS: [&str; 4] = ["zipf_get90", "zipf_get50", "uniform_get90", "uniform_get50"];

/// One load: how keys are chosen and the percentage of GETs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoadKind {
    /// Key choice.
    pub dist: Dist,
    /// Percent of GETs.
    pub get_pct: u32,
}

impl LoadKind {
    /// Parses `zipf_get90` or `uniform_get50` (any GET percentage 0-100).
    pub fn parse(text: &str) -> Result<LoadKind> {
        let (dist, pct) = text
            .split_once("_get")
            .with_context(|| format!("load {text:?}: expected zipf_getNN or uniform_getNN"))?;
        let dist = match dist {
            "zipf" => Dist::Zipf,
            "uniform" => Dist::Uniform,
            other => bail!("load {text:?}: unknown key choice {other:?} (zipf or uniform)"),
        };
        let get_pct: u32 = pct
            .parse()
            .ok()
            .filter(|p| *p <= 100)
            .with_context(|| format!("load {text:?}: the GET percentage must be 0-100"))?;
        Ok(LoadKind { dist, get_pct })
    }

    /// The name figures are keyed by (`zipf_get90`).
    pub fn name(self) -> String {
        format!("{}_get{}", self.dist.name(), self.get_pct)
    }
}

/// One measurement of one server.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    /// Throughput and p99.
    pub measured: Measured,
    /// The server's CPU time per command, microseconds (every thread's
    /// time on a CPU, from `/proc`), when it could be read: unlike
    /// throughput, it does not count time the server waited for a CPU
    /// other processes held, so it compares servers on a shared host.
    pub cpu_us: Option<f64>,
}

/// One server of the run.
#[derive(Clone, Debug)]
pub struct Spec {
    /// Its name in the figures (`redis`, `ferrite_dram`, `tier20_off`).
    pub label: String,
    /// redis-server rather than Ferrite.
    pub redis: bool,
    /// DRAM budget in bytes (tiered Ferrite only).
    pub budget: Option<u64>,
    /// The media model (`off` or `optane`).
    pub model: String,
    /// The Ferrite binary to run (`None`: this one).
    pub bin: Option<PathBuf>,
    /// Its port.
    pub port: u16,
}

/// Figures of one server: `<load>_{ops,p99_us}`, and for Ferrite the
/// memory figures after the loads.
pub type Figures = BTreeMap<String, f64>;

/// What every server of a run shares.
#[derive(Clone, Debug)]
pub struct Setup {
    /// Keys of the dataset.
    pub keys: usize,
    /// Bytes of each value.
    pub value_bytes: usize,
    /// Seconds each load is measured.
    pub seconds: u64,
    /// Repetitions of each load.
    pub runs: usize,
    /// Loads, in order.
    pub loads: Vec<LoadKind>,
    /// Directory of the servers' files.
    pub disk: PathBuf,
    /// Directory of the PM heaps (tmpfs).
    pub pm: PathBuf,
}

impl Setup {
    fn heap_bytes(&self) -> u64 {
        let dataset = (self.keys * self.value_bytes) as u64;
        dataset + dataset / 4 + (256 << 20)
    }

    fn heap_path(&self, spec: &Spec) -> PathBuf {
        self.pm.join(format!("{}.heap", spec.label))
    }
}

/// A server started (and, once [`Server::fill`] ran, loaded) for a run.
pub struct Server {
    /// What it is.
    pub spec: Spec,
    running: Running,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").field("spec", &self.spec).finish()
    }
}

impl Server {
    /// Starts `spec`'s server with an empty directory.
    pub fn start(spec: &Spec, setup: &Setup) -> Result<Server> {
        let dir = setup.disk.join(&spec.label);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        std::fs::create_dir_all(&setup.pm)?;
        let port = spec.port.to_string();
        let mut cmd = Command::new("taskset");
        cmd.args(["-c", SERVER_CORE])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .env(ferrite_pmem::model::ENV_MODEL, &spec.model);
        if spec.redis {
            cmd.args(["redis-server", "--port", &port, "--save", ""])
                .args(["--appendonly", "no", "--dir"])
                .arg(&dir);
        } else {
            match &spec.bin {
                Some(bin) => cmd.arg(bin),
                None => cmd.arg(std::env::current_exe()?),
            };
            cmd.args(["kv-serve", "--port", &port, "--appendonly", "no"])
                .args(["--save", "", "--dir"])
                .arg(&dir);
            if let Some(budget) = spec.budget {
                cmd.args(["--maxmemory-dram", &budget.to_string()])
                    .args(["--pm-tier-size", &setup.heap_bytes().to_string()])
                    .arg("--pm-tier-path")
                    .arg(setup.heap_path(spec));
            }
        }
        let child = cmd
            .spawn()
            .with_context(|| format!("starting {}", spec.label))?;
        let running = Running {
            child,
            port: spec.port,
        };
        wait_for_port(spec.port)?;
        Ok(Server {
            spec: spec.clone(),
            running,
        })
    }

    /// Writes the dataset.
    pub fn fill(&self, setup: &Setup) -> Result<()> {
        tier_load::fill(self.running.port, setup.keys, setup.value_bytes)
    }

    /// Nanoseconds the server's threads have spent on a CPU
    /// (`/proc/<pid>/task/*/schedstat`, first field); `None` where that
    /// is not readable.
    pub fn cpu_ns(&self) -> Option<u64> {
        let tasks = format!("/proc/{}/task", self.running.child.id());
        let mut total = 0u64;
        for task in std::fs::read_dir(tasks).ok()? {
            let text = std::fs::read_to_string(task.ok()?.path().join("schedstat")).ok()?;
            total += text.split_whitespace().next()?.parse::<u64>().ok()?;
        }
        Some(total)
    }

    /// An INFO memory field.
    pub fn memory_field(&self, name: &str) -> Result<f64> {
        tier_load::info_field(self.running.port, "memory", name)
    }

    /// Stops the server and removes its files.
    pub fn stop(self, setup: &Setup) {
        let Server { spec, running } = self;
        drop(running);
        let _ = std::fs::remove_dir_all(setup.disk.join(&spec.label));
        let _ = std::fs::remove_file(setup.heap_path(&spec));
    }
}

fn load(setup: &Setup, kind: LoadKind, port: u16, secs: u64) -> Load {
    Load {
        port,
        keys: setup.keys,
        value_bytes: setup.value_bytes,
        get_pct: kind.get_pct,
        clients: CLIENTS,
        duration: Duration::from_secs(secs),
    }
}

/// Measures every load on `servers`, which take turns within each load:
/// a warm-up each (demotion and promotion settle on the mix), then
/// `runs` rounds in which each server is measured once. With one server
/// this is the sequential run. Returns each server's measurements by load.
pub fn measure_loads(
    servers: &[Server],
    setup: &Setup,
) -> Result<Vec<BTreeMap<String, Vec<Sample>>>> {
    let mut out = vec![BTreeMap::new(); servers.len()];
    for &kind in &setup.loads {
        let chooser = Arc::new(KeyChooser::new(setup.keys, kind.dist));
        for server in servers {
            tier_load::run(load(setup, kind, server.spec.port, 1), &chooser)?;
        }
        for round in 0..setup.runs {
            for (i, server) in servers.iter().enumerate() {
                let before = server.cpu_ns();
                let m =
                    tier_load::run(load(setup, kind, server.spec.port, setup.seconds), &chooser)?;
                let commands = m.ops * setup.seconds as f64;
                let cpu_us = match (before, server.cpu_ns()) {
                    (Some(b), Some(a)) if commands > 0.0 => {
                        Some(a.saturating_sub(b) as f64 / 1e3 / commands)
                    }
                    _ => None,
                };
                if servers.len() > 1 {
                    println!(
                        "{:<20} {:<14} round {round}: {:.0} ops/s, p99 {:.0} us, cpu {:.2} us/cmd",
                        server.spec.label,
                        kind.name(),
                        m.ops,
                        m.p99_us,
                        cpu_us.unwrap_or(f64::NAN)
                    );
                }
                let sample = Sample {
                    measured: m,
                    cpu_us,
                };
                out[i]
                    .entry(kind.name())
                    .or_insert_with(Vec::new)
                    .push(sample);
            }
        }
    }
    Ok(out)
}

/// Medians of the measurements and, for Ferrite, the memory figures the
/// server reports after the loads.
/// With `cpu`, also the median CPU time per command
/// (`<load>_cpu_us_per_cmd`).
pub fn figures(
    server: &Server,
    measured: &BTreeMap<String, Vec<Sample>>,
    cpu: bool,
) -> Result<Figures> {
    let mut out = Figures::new();
    for (name, samples) in measured {
        let ops: Vec<f64> = samples.iter().map(|s| s.measured.ops).collect();
        let p99: Vec<f64> = samples.iter().map(|s| s.measured.p99_us).collect();
        out.insert(format!("{name}_ops"), median(&ops));
        out.insert(format!("{name}_p99_us"), median(&p99));
        let cpu_us: Vec<f64> = samples.iter().filter_map(|s| s.cpu_us).collect();
        if cpu && !cpu_us.is_empty() {
            out.insert(format!("{name}_cpu_us_per_cmd"), median(&cpu_us));
        }
    }
    if !server.spec.redis {
        out.insert("used_memory".into(), server.memory_field("used_memory")?);
    }
    if server.spec.budget.is_some() {
        for field in [
            "used_memory_pmem",
            "tier_values_dram_pct",
            "tier_demotions",
            "tier_promotions",
            "tier_pm_flushes_per_write",
            "tier_pm_frag_ratio",
            "tier_demote_backoffs",
        ] {
            out.insert(field.into(), server.memory_field(field)?);
        }
    }
    Ok(out)
}

/// Runs `specs`: each by itself (started, filled, measured, stopped), or
/// with `interleave` all started and filled first and then measured in
/// turns. `ready` is a server already started and filled for the spec of
/// its label (the footprint's, reused as all-DRAM Ferrite).
pub fn run_all(
    specs: &[Spec],
    setup: &Setup,
    interleave: bool,
    mut ready: Option<Server>,
) -> Result<BTreeMap<String, Figures>> {
    let mut take_or_start = |spec: &Spec| -> Result<Server> {
        if let Some(server) = ready.take_if(|s| s.spec.label == spec.label) {
            return Ok(server);
        }
        let server = Server::start(spec, setup)?;
        server.fill(setup)?;
        Ok(server)
    };
    let mut results = BTreeMap::new();
    let groups: Vec<Vec<Server>> = if interleave {
        vec![specs
            .iter()
            .map(&mut take_or_start)
            .collect::<Result<_>>()?]
    } else {
        Vec::new()
    };
    let mut measure_group = |servers: Vec<Server>| -> Result<()> {
        let measured = measure_loads(&servers, setup)?;
        for (server, by_load) in servers.into_iter().zip(measured) {
            // The CPU figures are the interleaved runs' (a full run's
            // figures stay those it always reported).
            let figures = figures(&server, &by_load, interleave)?;
            print_figures(&server.spec.label, &figures);
            results.insert(server.spec.label.clone(), figures);
            server.stop(setup);
        }
        Ok(())
    };
    if interleave {
        for group in groups {
            measure_group(group)?;
        }
    } else {
        for spec in specs {
            let server = take_or_start(spec)?;
            measure_group(vec![server])?;
        }
    }
    if let Some(unused) = ready {
        unused.stop(setup);
    }
    Ok(results)
}

fn print_figures(label: &str, figures: &Figures) {
    println!(
        "{:<20} {}",
        label,
        figures
            .iter()
            .map(|(k, v)| format!("{k}={v:.0}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
}

/// Whether `path` names an executable file (for `--alt-bin`).
pub fn check_bin(path: &Path) -> Result<()> {
    let meta = std::fs::metadata(path).with_context(|| format!("--alt-bin {}", path.display()))?;
    if !meta.is_file() {
        bail!("--alt-bin {}: not a file", path.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loads_parse_and_bad_ones_are_refused() {
        let got = LoadKind::parse("zipf_get90").expect("parses");
        assert_eq!(
            got,
            LoadKind {
                dist: Dist::Zipf,
                get_pct: 90
            }
        );
        assert_eq!(got.name(), "zipf_get90");
        for name in ALL_LOADS {
            assert_eq!(LoadKind::parse(name).expect(name).name(), name);
        }
        for bad in [
            "zipf",
            "zipf_get101",
            "normal_get50",
            "uniform_get",
            "uniform_getx",
        ] {
            assert!(LoadKind::parse(bad).is_err(), "{bad}");
        }
    }
}
