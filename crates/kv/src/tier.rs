//! The PM value tier at the server's level (`docs/tier.md`): the settings'
//! checks at start-up, the heap, demotion before each command, and the
//! figures INFO reports. The keyspace's side (which key, the move itself,
//! promotion on reads) is `keyspace/tier.rs`; the heap is `pmem::slab`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ferrite_pmem::slab::PAGE_BYTES;
use ferrite_pmem::SlabHeap;

use crate::config::Config;
use crate::keyspace::tier::Demoted;
use crate::state::State;

/// Bytes demotion may write to PM before one command: "writes hurt"
/// reads on PM, so a burst of client writes is moved over the next
/// commands instead of stalling one.
pub const DEMOTE_BYTES_PER_CMD: usize = 64 << 10;
/// Bytes reads may promote back to DRAM during one command.
pub const PROMOTE_BYTES_PER_CMD: usize = 16 << 10;
/// Values demotion moves before one command at most (each the coldest
/// of its own sample), besides the byte allowance.
const DEMOTE_ROUNDS_MAX: usize = 32;
/// Random entries one demotion round probes, per movable value it wants:
/// with a fifth of the values in DRAM a round finds its sample in about
/// five probes each, and at a tenth of that it gives up after this many.
const PROBES_PER_SAMPLE: usize = 16;
/// Commands demotion sits out after a round that moved nothing (nothing
/// movable was found, or the heap was full), so a DRAM figure held up by
/// what cannot move does not cost every command a sampling.
const BACKOFF_COMMANDS: u32 = 16;
/// The file name of the heap in `dir` when `pm-tier-path` is empty.
pub const DEFAULT_FILE: &str = "ferrite-pm-tier";

/// The tier of a server whose `maxmemory-dram` is set.
#[derive(Debug)]
pub struct Tier {
    /// The PM heap.
    pub heap: Arc<SlabHeap>,
    /// Values moved to PM since start-up.
    pub demotions: u64,
    /// Demotions that found the heap full (the value stayed in DRAM).
    pub full: u64,
    /// Commands left before demotion tries again.
    backoff: u32,
    /// Times demotion found nothing movable (or the heap full) and sat
    /// out the next [`BACKOFF_COMMANDS`] commands.
    pub backoffs: u64,
    /// The memory the server used before loading, as [`Tier::open`] saw it.
    startup_bytes: u64,
}

/// Where the heap lives under `config`.
pub fn heap_path(config: &Config) -> PathBuf {
    if config.pm_tier_path.is_empty() {
        config.dir.join(DEFAULT_FILE)
    } else {
        PathBuf::from(&config.pm_tier_path)
    }
}

fn refused(reason: String) -> crate::Error {
    crate::Error::Config {
        origin: "PM tier".into(),
        reason,
    }
}

/// Bytes free for an unprivileged user on the file system holding `path`
/// (its directory, when the file does not exist yet), plus what the file
/// already takes, since re-creating it gives that back.
fn space_for(path: &Path) -> std::io::Result<u64> {
    let dir = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let fs = rustix::fs::statvfs(dir).map_err(std::io::Error::from)?;
    let existing = std::fs::metadata(path).map_or(0, |m| m.len());
    Ok(fs.f_bavail.saturating_mul(fs.f_frsize) + existing)
}

impl Tier {
    /// The tier `config` asks for, checked, with its heap mapped; `None`
    /// when `maxmemory-dram` is 0. `startup_bytes` is the memory the
    /// server uses before loading (0 when it cannot tell): a budget at or
    /// below it could never be met.
    pub fn open(config: &Config, startup_bytes: u64) -> crate::Result<Option<Tier>> {
        let budget = config.maxmemory_dram_bytes;
        if budget == 0 {
            return Ok(None);
        }
        if config.maxmemory_bytes > 0 && budget > config.maxmemory_bytes {
            return Err(refused(format!(
                "maxmemory-dram ({budget}) is larger than maxmemory ({}), which limits DRAM and PM together",
                config.maxmemory_bytes
            )));
        }
        if budget <= startup_bytes {
            return Err(refused(format!(
                "maxmemory-dram ({budget}) is below the {startup_bytes} bytes the server uses before loading any key"
            )));
        }
        let size = config.pm_tier_size_bytes;
        if size < PAGE_BYTES as u64 {
            return Err(refused(format!(
                "pm-tier-size ({size}) is below one heap page ({PAGE_BYTES} bytes)"
            )));
        }
        let path = heap_path(config);
        let free = space_for(&path)
            .map_err(|e| refused(format!("pm-tier-path {}: {e}", path.display())))?;
        if size > free {
            return Err(refused(format!(
                "pm-tier-size ({size}) is larger than the {free} bytes free on the file system of {}",
                path.display()
            )));
        }
        let capacity = usize::try_from(size)
            .map_err(|_| refused(format!("pm-tier-size ({size}) does not fit this machine")))?;
        let heap = SlabHeap::create(&path, capacity, None)
            .map_err(|e| refused(format!("pm-tier-path {}: {e}", path.display())))?;
        Ok(Some(Tier {
            heap,
            demotions: 0,
            full: 0,
            backoff: 0,
            backoffs: 0,
            startup_bytes,
        }))
    }
}

/// Refuses a `maxmemory-dram` below what the loaded keys take in DRAM
/// with every movable value on PM (their slots in the key index, and the
/// handles of PM values) on top of the server's memory before loading,
/// once replay is done.
pub fn check_index(state: &State) -> crate::Result<()> {
    let budget = state.config.maxmemory_dram_bytes;
    let Some(tier) = &state.tier else {
        return Ok(());
    };
    let keys: u64 = (0..state.keyspace.databases())
        .map(|db| state.keyspace.db(db).len() as u64)
        .sum();
    // Each key's slot never leaves DRAM, and a value moved to PM leaves
    // its handle behind: with every movable value on PM, DRAM still holds
    // both.
    let handles = state.keyspace.tierable_values() * crate::keyspace::tier::PM_HANDLE_BYTES;
    let index = keys * crate::keyspace::map::ENTRY_BYTES_ESTIMATE as u64 + handles;
    if tier.startup_bytes + index > budget {
        return Err(refused(format!(
            "maxmemory-dram ({budget}) is below the key index's size: {keys} keys take {index} bytes of DRAM (their slots and {handles} bytes of PM values' handles), which the tier cannot move, over the {} the server uses before loading",
            tier.startup_bytes
        )));
    }
    Ok(())
}

/// Before each command: lets reads promote while DRAM is under its budget,
/// and moves the coldest movable values to PM while it is over, up to
/// [`DEMOTE_BYTES_PER_CMD`]. A no-op without a tier.
pub fn before_command(state: &mut State) {
    if state.tier.is_none() {
        return;
    }
    let budget = state.config.maxmemory_dram_bytes;
    let dram = state.used_memory();
    state.keyspace.promotion.allowance = if dram < budget {
        PROMOTE_BYTES_PER_CMD
    } else {
        0
    };
    if dram <= budget {
        return;
    }
    state.keyspace.written.start();
    demote(state, budget);
}

/// The demotion loop of [`before_command`].
fn demote(state: &mut State, budget: u64) {
    let samples = (state.config.maxmemory_samples as usize).max(5);
    let counting = crate::memory::probe().is_some();
    let State {
        keyspace,
        tier,
        rng,
        used_memory_bytes,
        ..
    } = state;
    let Some(tier) = tier.as_mut() else {
        return;
    };
    if tier.backoff > 0 {
        tier.backoff -= 1;
        return;
    }
    let (mut moved, mut sampling) = (0, true);
    for _ in 0..DEMOTE_ROUNDS_MAX {
        // A round whose probes find nothing movable turns to the keys
        // written since (`keyspace::tier::Written`): values too rare for
        // random probes to find, as at a small DRAM share, are the ones
        // writes just added. The command's next rounds go there directly:
        // more probes would search the same mostly-PM keyspace again.
        let picked = match sampling {
            true => keyspace.demotion_candidate(samples, samples * PROBES_PER_SAMPLE, |n| {
                rng.u64(..(n as u64).max(1)) as usize
            }),
            false => None,
        };
        let (start, budget_left) = (
            rng.u64(..) as usize,
            DEMOTE_BYTES_PER_CMD.saturating_sub(moved).max(1),
        );
        let outcome = match picked {
            Some((db, key)) => keyspace.demote(db, &key, &tier.heap, budget_left, start),
            None => {
                sampling = false;
                keyspace.demote_written(&tier.heap, budget_left, start)
            }
        };
        match outcome {
            Demoted::Moved { values, bytes: len } => {
                tier.demotions += values;
                moved += len;
                if !counting {
                    // Without the allocator's counter the cached figure
                    // would not fall: take the value's bytes off it.
                    *used_memory_bytes = used_memory_bytes.saturating_sub(len as u64);
                }
            }
            Demoted::Full => {
                tier.full += 1;
                break;
            }
            Demoted::Skipped if sampling => continue,
            Demoted::Skipped => break,
        }
        let dram = match crate::memory::probe() {
            Some(probe) => (probe.allocated)(),
            None => *used_memory_bytes,
        };
        if moved >= DEMOTE_BYTES_PER_CMD || dram <= budget {
            return;
        }
    }
    if moved == 0 {
        tier.backoff = BACKOFF_COMMANDS;
        tier.backoffs += 1;
    }
}

/// PM bytes the dataset takes (the slots in use), 0 without a tier.
pub fn pm_used(state: &State) -> u64 {
    state
        .tier
        .as_ref()
        .map_or(0, |tier| tier.heap.stats().slot_bytes)
}

/// INFO memory's tier fields (`docs/tier.md`), Redis's format.
pub fn info(state: &State, out: &mut String) {
    use std::fmt::Write;
    let dram = state.used_memory();
    let (stats, flushes) = match &state.tier {
        Some(tier) => (tier.heap.stats(), tier.heap.flush_stats().requests),
        None => Default::default(),
    };
    // The dataset's bytes in DRAM (what the server holds beyond its
    // start-up memory) against those plus the values' bytes on PM: string
    // values and collection members alike, which a count of keys could
    // not weigh.
    let startup = state.tier.as_ref().map_or(0, |t| t.startup_bytes);
    let dataset_dram = dram.saturating_sub(startup);
    let total = dataset_dram + stats.value_bytes;
    let dram_pct = if total == 0 {
        100.0
    } else {
        100.0 * dataset_dram as f64 / total as f64
    };
    let (demotions, full, backoffs) = state
        .tier
        .as_ref()
        .map_or((0, 0, 0), |t| (t.demotions, t.full, t.backoffs));
    let per_write = if stats.stores == 0 {
        0.0
    } else {
        flushes as f64 / stats.stores as f64
    };
    let _ = write!(
        out,
        "used_memory_dram:{dram}\r\nused_memory_pmem:{}\r\ntier_values_dram_pct:{dram_pct:.2}\r\ntier_demotions:{demotions}\r\ntier_promotions:{}\r\ntier_pm_read_bytes:{}\r\ntier_pm_flushes_per_write:{per_write:.2}\r\ntier_pm_values:{}\r\ntier_pm_value_bytes:{}\r\ntier_pm_free_bytes:{}\r\ntier_pm_frag_ratio:{:.2}\r\ntier_pm_full:{full}\r\ntier_demote_backoffs:{backoffs}\r\n",
        stats.slot_bytes,
        state.keyspace.promotion.promotions,
        stats.read_bytes,
        stats.values,
        stats.value_bytes,
        stats.free_bytes(),
        stats.frag_ratio(),
    );
}
