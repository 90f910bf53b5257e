//! Settings of a write buffer.

use std::time::Duration;

/// How a [`crate::WriteBuffer`] is shaped and when it destages.
#[derive(Clone, Debug, PartialEq)]
pub struct WbufConfig {
    /// Bytes per block: the unit staged in PM and written to the file
    /// (a power of two, 512 B ..= 1 MiB). Fixed when the buffer is created;
    /// an existing buffer keeps its own.
    pub block_bytes: u32,
    /// Bytes of PM for a new buffer (superblock and headers included).
    pub capacity_bytes: usize,
    /// Destaging starts when this fraction of the slots is dirty...
    pub high_watermark: f64,
    /// ...and rounds repeat until at most this fraction is.
    pub low_watermark: f64,
    /// A block dirty for this long is destaged whatever the watermarks say
    /// (`None`: only the watermarks, `flush` and close destage).
    pub max_age: Option<Duration>,
    /// How long a write waits for a free slot while no destage round is
    /// running before it goes through to the file instead (the buffer
    /// stays full with nothing draining it).
    pub full_wait: Duration,
    /// Largest single write to the file when adjacent blocks are merged.
    pub destage_io_bytes: usize,
    /// Merged writes a destage round keeps in flight at once (its I/O
    /// depth): the round's own thread and `destage_depth - 1` helpers each
    /// take the next run. An SSD reaches its sequential write bandwidth
    /// only with several large writes queued; one at a time leaves it idle
    /// between a completion and the next submission.
    pub destage_depth: usize,
    /// Sequential streams: a write continuing a run of consecutive blocks
    /// at least this long counts as sequential, and once such writes have
    /// dirtied a full-depth batch of merged writes (`destage_depth` x
    /// `destage_io_bytes`) a round starts, below the high watermark
    /// (`None`: only the watermarks). A stream's blocks are rarely
    /// rewritten soon, so holding them gains no absorption, while the disk
    /// would idle until the watermark and the buffer fill towards it
    /// (bcache treats sequential I/O past 4 MiB apart the same way, though
    /// it bypasses the cache where this buffer still acknowledges from PM).
    pub stream_writeback_bytes: Option<usize>,
    /// Run a background destage thread. Without one, destaging happens
    /// only in `flush`, in writers that find the buffer full, and at close
    /// (crash tests use this to make every event reproducible).
    pub background: bool,
    /// Cleaner mode: destage everything as soon as it is dirty.
    pub cleaner: bool,
    /// Destage runs of whole 4 KiB-aligned blocks with `O_DIRECT` writes
    /// (no page cache) when the buffer is opened on a file path whose file
    /// system supports it; `destage_source` says where their bytes come
    /// from.
    pub direct_destage: bool,
    /// Where an `O_DIRECT` destage write reads its bytes.
    pub destage_source: DestageSource,
}

/// Where an `O_DIRECT` destage write reads a run's bytes: straight from
/// the PM slots, or from a copy in a huge-page DRAM buffer. A device
/// request carries its memory as a list of physically contiguous segments
/// (`max_segments` per request, 127-254 on common NVMe and virtio queues).
/// Real PM mapped through DAX is contiguous over whole extents, so a run's
/// slots are a few segments, and the device reads PM in place. PM emulated
/// on a page-cache file (tmpfs) is made of separate 4 KiB pages: a 1 MiB
/// run is up to 256 segments, which the queue splits and the device (or a
/// hypervisor's virtual disk) handles one by one, while a copy costs one
/// memory pass (about 0.1 ms per MiB, on the destage helpers, not the
/// writers) and leaves one segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DestageSource {
    /// In place on real PM (a DAX mapping), copied on any other.
    Auto,
    /// Always in place (where the kernel accepts the mapping as a source).
    InPlace,
    /// Always through the DRAM buffer.
    Copy,
}

impl Default for WbufConfig {
    fn default() -> WbufConfig {
        WbufConfig {
            block_bytes: 16 << 10,
            capacity_bytes: 256 << 20,
            high_watermark: 0.50,
            low_watermark: 0.45,
            max_age: Some(Duration::from_secs(5)),
            full_wait: Duration::from_millis(100),
            destage_io_bytes: 1 << 20,
            destage_depth: 4,
            stream_writeback_bytes: Some(4 << 20),
            background: true,
            cleaner: false,
            direct_destage: true,
            destage_source: DestageSource::Auto,
        }
    }
}

impl WbufConfig {
    /// Checks the settings that do not depend on the region.
    pub fn validate(&self) -> Result<(), String> {
        let fraction = |x: f64| (0.0..=1.0).contains(&x);
        if !fraction(self.high_watermark) || !fraction(self.low_watermark) {
            return Err("watermarks must be fractions in 0..=1".into());
        }
        if self.low_watermark > self.high_watermark {
            return Err(format!(
                "low watermark {} above high watermark {}",
                self.low_watermark, self.high_watermark
            ));
        }
        if !(1..=64).contains(&self.destage_depth) {
            return Err(format!(
                "destage_depth {} outside 1..=64",
                self.destage_depth
            ));
        }
        if self.destage_io_bytes < self.block_bytes as usize {
            return Err("destage_io_bytes must hold at least one block".into());
        }
        Ok(())
    }
}
