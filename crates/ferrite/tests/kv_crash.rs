//! Crash test of the real `ferrite serve` binary: concurrent clients write
//! with `appendfsync always`, the server is killed with SIGKILL at a random
//! moment, restarted, and every acknowledged write must be there while
//! nothing that was never sent may appear (the ledger is
//! `common/ledger.rs`). Runs for the file log and the emulated-PM log, and
//! once with the PM value tier under a small DRAM budget, so that values
//! are demoted and promoted as the server dies; `FERRITE_CRASH_ITERS` sets
//! the rounds per device.

mod common;

use common::ledger::{crash_rounds, crash_rounds_with};
use common::{info_figure, small_dram_budget, Client};

#[test]
fn kill_9_loses_no_acknowledged_write_file_log() {
    crash_rounds("file", &["--log-device", "file"]);
}

#[test]
fn kill_9_loses_no_acknowledged_write_emulated_pm_log() {
    crash_rounds("pmem-emulated", &["--log-device", "pmem-emulated"]);
}

/// The same ledger with 4 KiB values and a DRAM budget 2 MiB above what
/// an empty server uses: values move to the PM tier while the clients
/// write and the server is killed, and every restart rebuilds the tier by
/// replay. The last restart must have demoted values, or the run proved
/// nothing about the tier.
#[test]
fn kill_9_loses_no_acknowledged_write_with_a_small_dram_budget() {
    let flags = small_dram_budget(2 << 20);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let survivor = crash_rounds_with("file, small DRAM budget", &flags, 4096);
    let mut c = Client::connect(survivor.port).expect("connect");
    let demoted = info_figure(&mut c, "memory", "tier_demotions");
    drop(survivor);
    assert!(
        demoted > 0,
        "no value was demoted: the budget was never passed"
    );
}
