//! Parallel recovery of base parts: several threads decode parts into
//! whole segments, the calling thread installs them (a move, no copy).

use std::sync::mpsc;

use super::dir::AofDir;
use super::manifest::{BaseEntry, Manifest};
use super::part::{LoadedSegment, PartReader};
use super::FormatError;
use crate::error::{Error, Result};
use crate::keyspace::{Keyspace, SegmentRange, SEGMENTS_PER_DB};

/// Segments a loader may have decoded ahead of installation.
const LOADED_QUEUE_MAX: usize = 256;

/// What loading the bases did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BaseLoad {
    /// Parts loaded.
    pub parts: usize,
    /// Keys loaded.
    pub keys: u64,
    /// Bytes read.
    pub bytes: u64,
    /// Threads used.
    pub threads: usize,
}

fn corrupt(dir: &AofDir, entry: &BaseEntry, e: FormatError) -> Error {
    Error::CorruptBase {
        path: dir.path(&entry.file),
        offset: e.offset,
        reason: e.reason,
    }
}

/// What [`read_part`] found besides the segments.
#[derive(Debug)]
pub struct PartRead {
    /// Bytes of the part.
    pub bytes: u64,
    /// The part's range, and its capture table as runs of `(segments,
    /// c(s))` (`None` for a part of version 1 or 2).
    pub captures: Option<(SegmentRange, Vec<(u32, u64)>)>,
}

/// Reads one part, handing each segment to `sink` (which returns `false`
/// to stop early); checks the part against the manifest. `ferrite check`
/// runs it with a sink that drops the segments.
pub fn read_part(
    dir: &AofDir,
    entry: &BaseEntry,
    generation: Option<u64>,
    mut sink: impl FnMut(LoadedSegment) -> bool,
) -> Result<PartRead> {
    let path = dir.path(&entry.file);
    let input = dir.fs.open(&path).map_err(|source| Error::Io {
        op: "open",
        path: path.clone(),
        source,
    })?;
    let mut reader = PartReader::new(input).map_err(|e| corrupt(dir, entry, e))?;
    if generation.is_some_and(|g| g != reader.header().generation) {
        return Err(corrupt(
            dir,
            entry,
            FormatError {
                offset: 0,
                reason: "part of another rewrite generation than its siblings".into(),
            },
        ));
    }
    while let Some(segment) = reader.next_segment().map_err(|e| corrupt(dir, entry, e))? {
        if !sink(segment) {
            break;
        }
    }
    let totals = reader.totals();
    if (totals.bytes, totals.keys) != (entry.bytes, entry.keys) {
        return Err(corrupt(
            dir,
            entry,
            FormatError {
                offset: totals.bytes,
                reason: format!(
                    "holds {} bytes and {} keys, the manifest says {} and {}",
                    totals.bytes, totals.keys, entry.bytes, entry.keys
                ),
            },
        ));
    }
    let range = reader.header().range;
    Ok(PartRead {
        bytes: totals.bytes,
        captures: reader.captures().map(|runs| (range, runs.to_vec())),
    })
}

/// The capture positions of every global segment of `databases`
/// databases, from the parts' tables (0 where a part has none: it was
/// taken whole at the log switch, and every logged record after it
/// applies).
pub fn capture_table(databases: usize, parts: &[PartRead]) -> Vec<u64> {
    let mut table = vec![0; databases * SEGMENTS_PER_DB];
    for (range, runs) in parts.iter().filter_map(|p| p.captures.as_ref()) {
        let mut at = range.start as usize;
        for &(len, lsn) in runs {
            let end = (at + len as usize).min(table.len());
            if at < end {
                table[at..end].fill(lsn);
            }
            at += len as usize;
        }
    }
    table
}

/// Loads `manifest`'s base parts into `keyspace` with up to `threads`
/// threads. The keyspace must be empty.
pub fn load_bases(
    dir: &AofDir,
    manifest: &Manifest,
    threads: usize,
    keyspace: &mut Keyspace,
) -> Result<BaseLoad> {
    let threads = threads.clamp(1, manifest.bases.len().max(1));
    let generation = first_generation(dir, manifest)?;
    let (send, receive) = mpsc::sync_channel::<LoadedSegment>(LOADED_QUEUE_MAX);
    let databases = keyspace.databases();
    let mut seen = vec![false; databases * SEGMENTS_PER_DB];
    let mut load = BaseLoad {
        parts: manifest.bases.len(),
        threads,
        ..BaseLoad::default()
    };
    let results: Vec<Result<Vec<PartRead>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let send = send.clone();
                scope.spawn(move || -> Result<Vec<PartRead>> {
                    let mut read = Vec::new();
                    for entry in manifest.bases.iter().skip(t).step_by(threads) {
                        read.push(read_part(dir, entry, generation, |s| send.send(s).is_ok())?);
                    }
                    Ok(read)
                })
            })
            .collect();
        drop(send);
        let mut installed: Result<Vec<PartRead>> = Ok(Vec::new());
        for loaded in receive.iter() {
            let global = usize::from(loaded.db) * SEGMENTS_PER_DB + usize::from(loaded.seg);
            if installed.is_err() {
                continue;
            }
            if usize::from(loaded.db) >= databases || seen[global] {
                installed = Err(Error::Rewrite {
                    reason: format!(
                        "base parts hold db {} segment {} twice, or a db beyond `databases`",
                        loaded.db, loaded.seg
                    ),
                });
                continue;
            }
            seen[global] = true;
            load.keys += loaded.segment.map.len() as u64;
            keyspace.install_segment(
                usize::from(loaded.db),
                usize::from(loaded.seg),
                loaded.segment,
            );
        }
        let mut all: Vec<Result<Vec<PartRead>>> = handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(Error::Rewrite {
                        reason: "a loader thread panicked".into(),
                    })
                })
            })
            .collect();
        all.push(installed);
        all
    });
    let mut parts = Vec::new();
    for r in results {
        parts.extend(r?);
    }
    load.bytes = parts.iter().map(|p| p.bytes).sum();
    keyspace.set_replay_captures(capture_table(databases, &parts));
    Ok(load)
}

/// The generation of the first part (every part must share it), or `None`
/// without parts.
pub fn first_generation(dir: &AofDir, manifest: &Manifest) -> Result<Option<u64>> {
    let Some(first) = manifest.bases.first() else {
        return Ok(None);
    };
    let path = dir.path(&first.file);
    let input = dir.fs.open(&path).map_err(|source| Error::Io {
        op: "open",
        path,
        source,
    })?;
    let reader = PartReader::new(input).map_err(|e| corrupt(dir, first, e))?;
    Ok(Some(reader.header().generation))
}
