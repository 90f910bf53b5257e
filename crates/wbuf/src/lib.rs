//! A persistent-memory write buffer in front of a file on the SSD (paper
//! 003, in the manner of Linux's dm-writecache).
//!
//! A [`WriteBuffer`] is a [`ferrite_io::Device`]: a write is copied into a
//! free PM slot with a header (logical offset, length, sequence number,
//! CRC) and persisted with one drain, and is durable when it returns
//! ([`ferrite_io::DeviceInfo::durable_on_write`]). A destage thread later
//! writes dirty blocks to the file in rounds, adjacent blocks merged, syncs
//! the file and persists a destage mark; what reaches the file is always a
//! prefix of the acknowledged history. Clean slots serve reads until a
//! writer reclaims them. At open, slots past the mark are replayed to the
//! file in sequence order. `docs/format.md` ("PM write buffer") has the
//! layout and the crash argument, `docs/wbuf.md` the design and settings.
//!
//! ```
//! use std::sync::Arc;
//! use ferrite_io::{Device, SimFile};
//! use ferrite_pmem::SimPmem;
//! use ferrite_wbuf::{WbufConfig, WriteBuffer};
//!
//! let file = Arc::new(SimFile::new("data"));
//! let config = WbufConfig { block_bytes: 4096, capacity_bytes: 1 << 20, ..WbufConfig::default() };
//! let buffer = WriteBuffer::with_medium(SimPmem::new(1 << 20), "pm", file.clone(), config)?;
//! buffer.write_at(100, b"staged in PM")?;
//! let mut back = [0u8; 12];
//! buffer.read_at(100, &mut back)?;
//! assert_eq!(&back, b"staged in PM");
//! buffer.flush()?;
//! assert_eq!(&file.durable_image()[100..112], b"staged in PM");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod buffer;
mod config;
mod destage;
mod direct;
mod inspect;
pub mod layout;
mod prefault;
mod recovery;
mod state;
mod stats;

pub use buffer::{PmemWriteBuffer, WriteBuffer};
pub use config::{DestageSource, WbufConfig};
pub use inspect::{inspect, BufferState};
pub use stats::WbufStats;
