//! The parallel log rewrite without fork and without a rewrite buffer
//! (issue #5; paper 002, PAOF, taken further).
//!
//! - [`part`]: base parts, the compact binary snapshot of a range of
//!   segments each worker writes.
//! - [`manifest`]: the file naming the base parts and incremental logs.
//! - [`dir`]: the data directory's state machine (start, finish, orphans);
//!   [`turn_on`]: its side of `CONFIG SET appendonly yes`;
//!   [`open_dir`]: opening one to serve or read it.
//! - [`worker`]: the threads writing the parts; [`load`]: parallel loading.
//! - [`pace`]: the device and CPU time they may use ([`budget`]: the rules).
//! - [`fs`]: the file-system trait, real and simulated with faults.
//! - [`check`]: `ferrite check` of a whole data directory.
//! - [`import`]: start-up from a Redis append-only file (RESP);
//!   [`export`]: the dataset as one.
//!
//! The keyspace side (point-in-time snapshots by copy-before-write at
//! segment granularity) is in `keyspace/snapshot.rs`.

pub mod budget;
pub mod check;
pub mod dir;
#[cfg(target_os = "linux")]
pub mod direct;
pub mod driver;
pub mod export;
pub mod fs;
pub mod import;
pub mod load;
pub mod manifest;
pub mod open_dir;
pub mod pace;
pub mod part;
mod priority;
pub mod seat;
pub mod turn_on;
pub mod worker;

use std::fmt;

/// A decoder found bytes it cannot accept: where, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FormatError {
    /// Byte offset in the file.
    pub offset: u64,
    /// What is wrong there.
    pub reason: String,
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at offset {}: {}", self.offset, self.reason)
    }
}

impl std::error::Error for FormatError {}
