//! The loads a rewrite is measured under, and where the bench's client
//! thread runs for each.

use std::process::{Command, Stdio};

/// The core the client thread is pinned to under the light load.
pub(super) const CLIENT_CORE: &str = "1";

/// The load during the rewrite.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Workload {
    /// 4 connections whose client thread is pinned to one core: the
    /// servers keep an idle core's worth of time between them, which the
    /// rewrite may use.
    Light,
    /// 20 connections, 1 KiB values, the client thread on any core: every
    /// core is busy, so whatever the rewrite takes comes out of the
    /// clients' rate, and a rewrite that yields too much never ends.
    Saturating,
}

impl Workload {
    pub(super) fn default_connections(self) -> usize {
        match self {
            Workload::Light => 4,
            Workload::Saturating => 20,
        }
    }

    pub(super) fn default_values(self, quick: bool) -> Vec<usize> {
        match (self, quick) {
            (Workload::Saturating, _) => vec![1024],
            (Workload::Light, true) => vec![100],
            (Workload::Light, false) => vec![100, 1024],
        }
    }
}

/// Pins this process (the client threads) to the client core.
pub(super) fn pin_self() {
    let status = Command::new("taskset")
        .args([
            "-a",
            "-p",
            "-c",
            CLIENT_CORE,
            &std::process::id().to_string(),
        ])
        .stdout(Stdio::null())
        .status();
    if !matches!(status, Ok(s) if s.success()) {
        tracing::warn!("could not pin the client to core {CLIENT_CORE}");
    }
}
