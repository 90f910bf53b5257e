//! The sustained stream of the wbuf experiment: 16 KiB sequential writes
//! of 4x the buffer into an empty file, timed until the last byte is
//! synced, against the disk's direct sequential write bandwidth measured
//! in the same run.

use std::fs::OpenOptions;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};
use ferrite_host::IoBuffer;
use ferrite_io::Device;
use ferrite_wbuf::{DestageSource, PmemWriteBuffer, WbufConfig, WriteBuffer};

use super::{put_ratio, Paths, Scale};
use crate::report::{median, median_ratio, Report};

/// Settings a sustained stream runs with, beside the defaults.
#[derive(Clone, Copy, Debug)]
pub(super) struct Variant {
    pub(super) depth: usize,
    /// Sequential streams destaged early (the default) or only from the
    /// high watermark.
    pub(super) streams: bool,
    /// Where `O_DIRECT` destage writes read their bytes.
    pub(super) source: DestageSource,
}

impl Default for Variant {
    fn default() -> Variant {
        Variant {
            depth: WbufConfig::default().destage_depth,
            streams: true,
            source: WbufConfig::default().destage_source,
        }
    }
}

/// A fresh buffer of the run's size with the variant's settings.
pub(super) fn open_buffer_with(
    pm: &Path,
    backing: &Path,
    scale: &Scale,
    variant: Variant,
) -> Result<PmemWriteBuffer> {
    let _ = std::fs::remove_file(pm);
    let defaults = WbufConfig::default();
    let config = WbufConfig {
        capacity_bytes: scale.buffer_bytes,
        destage_depth: variant.depth,
        stream_writeback_bytes: defaults.stream_writeback_bytes.filter(|_| variant.streams),
        destage_source: variant.source,
        ..defaults
    };
    Ok(WriteBuffer::open(pm, backing, config)?)
}

/// The disk's direct sequential write bandwidth: 1 MiB `O_DIRECT` writes
/// of `bytes`, then `fdatasync`; MiB/s.
pub(super) fn direct_seq_mib_s(path: &Path, bytes: usize) -> Result<f64> {
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(libc::O_DIRECT)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))?;
    let mut chunk = IoBuffer::new(1 << 20)?;
    chunk.fill(0x3C);
    let start = Instant::now();
    for at in (0..bytes).step_by(1 << 20) {
        file.write_all_at(&chunk, at as u64)?;
    }
    file.sync_data()?;
    Ok(bytes as f64 / start.elapsed().as_secs_f64() / f64::from(1 << 20))
}

/// 16 KiB sequential writes over 4x the buffer, until synced on the disk,
/// with the variant's settings; MiB/s and the buffer's counters. The file
/// starts empty.
pub(super) fn sustained_run(
    paths: &Paths,
    scale: &Scale,
    variant: Variant,
) -> Result<(f64, ferrite_wbuf::WbufStats)> {
    let _ = std::fs::remove_file(&paths.sustained);
    let buffer = open_buffer_with(&paths.pm, &paths.sustained, scale, variant)?;
    let size = 16 << 10;
    let bytes = 4 * scale.buffer_bytes;
    let data = vec![0x7Eu8; size];
    let start = Instant::now();
    for at in (0..bytes).step_by(size) {
        buffer.write_at(at as u64, &data)?;
    }
    buffer.flush()?;
    let rate = bytes as f64 / start.elapsed().as_secs_f64() / f64::from(1 << 20);
    let stats = buffer.stats();
    buffer.close()?;
    Ok((rate, stats))
}

/// Destage I/O depths the stream also runs at, beside the default: one
/// write in flight (the design before depth), and more.
const DEPTHS: [usize; 2] = [1, 8];

/// One run's sustained figures.
pub(super) struct Sustained {
    /// The disk's direct sequential write bandwidth, MiB/s.
    pub(super) direct_mib_s: f64,
    /// MiB/s through the buffer with the default settings.
    mib_s: f64,
    /// (destage depth, MiB/s), the default first.
    by_depth: Vec<(usize, f64)>,
    /// MiB/s with early stream writeback off.
    no_streams_mib_s: f64,
    /// MiB/s with every destage write read from PM in place (the default
    /// copies on emulated PM).
    in_place_mib_s: f64,
    /// The default stream's counters.
    stats: ferrite_wbuf::WbufStats,
}

/// The direct baseline, then the stream at the default settings, at the
/// other depths and with stream writeback off.
pub(super) fn measure(paths: &Paths, scale: &Scale) -> Result<Sustained> {
    let direct_mib_s = direct_seq_mib_s(&paths.direct, 4 * scale.buffer_bytes)?;
    let default = Variant::default();
    let (mib_s, stats) = sustained_run(paths, scale, default)?;
    let mut by_depth = vec![(default.depth, mib_s)];
    for depth in DEPTHS.into_iter().filter(|&d| d != default.depth) {
        let variant = Variant { depth, ..default };
        by_depth.push((depth, sustained_run(paths, scale, variant)?.0));
    }
    let no_streams = Variant {
        streams: false,
        ..default
    };
    let no_streams_mib_s = sustained_run(paths, scale, no_streams)?.0;
    let in_place = Variant {
        source: DestageSource::InPlace,
        ..default
    };
    let in_place_mib_s = sustained_run(paths, scale, in_place)?.0;
    tracing::info!(
        direct_mib_s,
        mib_s,
        no_streams_mib_s,
        in_place_mib_s,
        "wbuf sustained"
    );
    Ok(Sustained {
        direct_mib_s,
        mib_s,
        by_depth,
        no_streams_mib_s,
        in_place_mib_s,
        stats,
    })
}

/// The sustained ratios (medians of per-run ratios) and figures.
pub(super) fn record(report: &mut Report, runs: &[&Sustained]) {
    let Some(last) = runs.last() else {
        return;
    };
    put_ratio(
        report,
        "wbuf_sustained_vs_direct_seq",
        median_ratio(runs.iter().map(|r| (r.mib_s, r.direct_mib_s))),
    );
    for &(depth, _) in &last.by_depth {
        let of_depth = |r: &&Sustained| {
            let d = r.by_depth.iter().find(|d| d.0 == depth)?;
            Some((d.1, r.direct_mib_s))
        };
        put_ratio(
            report,
            format!("wbuf_sustained_vs_direct_seq_depth{depth}"),
            median_ratio(runs.iter().filter_map(of_depth)),
        );
    }
    put_ratio(
        report,
        "wbuf_sustained_vs_direct_seq_nostream",
        median_ratio(runs.iter().map(|r| (r.no_streams_mib_s, r.direct_mib_s))),
    );
    put_ratio(
        report,
        "wbuf_sustained_vs_direct_seq_inplace",
        median_ratio(runs.iter().map(|r| (r.in_place_mib_s, r.direct_mib_s))),
    );
    let of = |f: &dyn Fn(&Sustained) -> f64| median(&runs.iter().map(|r| f(r)).collect::<Vec<_>>());
    report.figure("sustained_mib_s", of(&|r| r.mib_s));
    report.figure("direct_seq_mib_s", of(&|r| r.direct_mib_s));
    report.figure("counters_sustained", format!("{:?}", last.stats));
    report.note("sustained: 16 KiB sequential writes of 4x the buffer into an empty file, timed until flushed, at the default destage depth (wbuf_sustained_vs_direct_seq) and at others (_depthN); direct_seq: 1 MiB O_DIRECT writes of the same bytes + fdatasync");
    report.note("wbuf_sustained_vs_direct_seq_nostream: the same stream with early writeback of sequential streams off (destaging from the 50% watermark); _inplace: with O_DIRECT destage writes read from the PM slots in place instead of the default's copy through a huge-page DRAM buffer on emulated PM");
}
