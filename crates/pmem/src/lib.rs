//! Persistent memory for Ferrite.
//!
//! - [`PmemRegion`] maps a file as persistent memory: real PM when the file is
//!   on a DAX file system and `MAP_SYNC` works, otherwise *emulated* PM
//!   (which survives a process crash but not a power failure; see
//!   [`MapMode`]).
//! - The libpmem contract, through the [`PmemMedium`] trait:
//!   `copy_nodrain`, `memset_nodrain`, `flush`, `drain`, `persist`, with the
//!   flush instruction and non-temporal policy chosen once by CPUID
//!   ([`Dispatch`]) and overridable for experiments.
//! - Flush and media accounting (paper 001): lines flushed, fences, bytes
//!   through each store path, 64-byte requests to the DIMM and the 256-byte
//!   media writes, read-modify-writes and absorbed requests its
//!   write-combining buffer makes of them, per region
//!   ([`PmemMedium::stats`]) and process-wide ([`stats::global`]).
//! - An optional media model ([`model`], `FERRITE_PMEM_MODEL=optane`) that
//!   charges emulated PM what Optane media would cost, by spinning.
//! - [`hint::prefetch`], the one CPU hint the safe layers above need.
//! - [`IoBuffer`], a huge-page-backed DRAM buffer for large `O_DIRECT`
//!   writes (not persistent; here because it needs `mmap`).
//! - [`SimPmem`], simulated PM with reproducible crash images, for crash
//!   tests of every layer above.
//!
//! ```
//! use ferrite_pmem::{PmemMedium, PmemRegion};
//!
//! let dir = tempfile::tempdir()?;
//! let region = PmemRegion::map(dir.path().join("pool"), 1 << 20)?;
//! let before = region.stats();
//! region.copy_persist(0, b"hello, persistent world")?;
//! let mut back = [0u8; 5];
//! region.read(0, &mut back)?;
//! assert_eq!(&back, b"hello");
//! assert_eq!((region.stats() - before).fences, 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![allow(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]

mod arch;
mod combine;
pub mod cpu;
mod error;
#[cfg(feature = "libpmem")]
pub mod libpmem;
mod medium;
pub mod model;
mod model_clock;
mod model_dram;
mod region;
pub mod sim;
pub mod slab;
mod split;
pub mod stats;
mod stream;
mod vectored;

pub use cpu::{CpuFeatures, Dispatch, FlushInstruction, Simd, Vendor, CACHE_LINE};
pub use error::{Error, Result};
pub use medium::{MapMode, PmemMedium};
pub use model::{DramCosts, HostCosts, MediaModel, MediaParams, ModelChoice};
pub use region::{MapOptions, PmemRegion, RESERVE_DEFAULT};
pub use sim::{CrashTrigger, SimPmem};
pub use slab::{SlabHeap, SlabRef, SlabStats};
pub use split::split_persists;
pub use stats::{FlushStats, MediaRead, MediaWork, MEDIA_LINE};
pub use stream::{stream_copy, stream_fence};
