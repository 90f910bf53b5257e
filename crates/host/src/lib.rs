//! What the server needs from the host that takes `unsafe` and has nothing
//! to do with persistent memory: cache prefetch hints ([`hint`]), DRAM
//! buffers of transparent huge pages for `O_DIRECT` writes ([`IoBuffer`],
//! filled with `ferrite_pmem`'s streaming copy).
//!
//! Every `unsafe` block carries a `// SAFETY:` comment; nothing here hands
//! out a reference into memory it does not own.

#![allow(unsafe_code)]

mod buffer;
pub mod hint;

pub use buffer::{IoBuffer, HUGE_PAGE};
