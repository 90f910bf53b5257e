//! Crash test of the real `ferrite serve` binary: concurrent clients write
//! with `appendfsync always`, the server is killed with SIGKILL at a random
//! moment, restarted, and every acknowledged write must be there while
//! nothing that was never sent may appear (the ledger is
//! `common/ledger.rs`). Runs for the file log and the emulated-PM log, and
//! once with the PM value tier under a small DRAM budget, so that values
//! are demoted and promoted as the server dies; `FERRITE_CRASH_ITERS` sets
//! the rounds per device.

mod common;

use std::process::Child;

use common::ledger::{crash_rounds, crash_rounds_with};
use common::{start_server, Client, Reply};

#[test]
fn kill_9_loses_no_acknowledged_write_file_log() {
    crash_rounds("file", &["--log-device", "file"]);
}

#[test]
fn kill_9_loses_no_acknowledged_write_emulated_pm_log() {
    crash_rounds("pmem-emulated", &["--log-device", "pmem-emulated"]);
}

fn stop(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// An INFO memory field of the server on `port`.
fn info_memory(port: u16, name: &str) -> u64 {
    let mut c = Client::connect(port).expect("connect");
    let Ok(Reply::Bulk(Some(text))) = c.call(&[b"INFO", b"memory"]) else {
        panic!("INFO failed")
    };
    String::from_utf8_lossy(&text)
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("INFO memory has no {name}"))
}

/// The same ledger with 4 KiB values and a DRAM budget 2 MiB above what
/// an empty server uses: values move to the PM tier while the clients
/// write and the server is killed, and every restart rebuilds the tier by
/// replay. The last restart must have demoted values, or the run proved
/// nothing about the tier.
#[test]
fn kill_9_loses_no_acknowledged_write_with_a_small_dram_budget() {
    let probe = tempfile::tempdir().unwrap();
    let (child, port) = start_server(probe.path(), &[]);
    let empty = info_memory(port, "used_memory");
    stop(child);
    let budget = (empty + (2 << 20)).to_string();
    let flags = [
        "--log-device",
        "file",
        "--maxmemory-dram",
        budget.as_str(),
        "--pm-tier-size",
        "256mb",
    ];
    let (child, port) = crash_rounds_with("file, small DRAM budget", &flags, 4096);
    let demoted = info_memory(port, "tier_demotions");
    stop(child);
    assert!(
        demoted > 0,
        "no value was demoted: the budget was never passed"
    );
}
