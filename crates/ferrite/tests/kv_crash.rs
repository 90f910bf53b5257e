//! Crash test of the real `ferrite serve` binary: concurrent clients write
//! with `appendfsync always`, the server is killed with SIGKILL at a random
//! moment, restarted, and every acknowledged write must be there while
//! nothing that was never sent may appear (the ledger is
//! `common/ledger.rs`). Runs for the file log and the emulated-PM log;
//! `FERRITE_CRASH_ITERS` sets the rounds per device.

mod common;

use common::ledger::crash_rounds;

#[test]
fn kill_9_loses_no_acknowledged_write_file_log() {
    crash_rounds("file", &["--log-device", "file"]);
}

#[test]
fn kill_9_loses_no_acknowledged_write_emulated_pm_log() {
    crash_rounds("pmem-emulated", &["--log-device", "pmem-emulated"]);
}
