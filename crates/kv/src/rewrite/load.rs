//! Parallel recovery of base parts: several threads decode parts into
//! whole segments, the calling thread installs them (a move, no copy).

use std::sync::mpsc;

use super::dir::AofDir;
use super::manifest::{BaseEntry, Manifest};
use super::part::{LoadedSegment, PartReader};
use super::FormatError;
use crate::error::{Error, Result};
use crate::keyspace::{Keyspace, SEGMENTS_PER_DB};

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

/// Reads one part, sending its segments; checks it against the manifest.
fn read_part(
    dir: &AofDir,
    entry: &BaseEntry,
    generation: Option<u64>,
    out: &mpsc::SyncSender<LoadedSegment>,
) -> Result<u64> {
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
        if out.send(segment).is_err() {
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
    Ok(totals.bytes)
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
    let results: Vec<Result<u64>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let send = send.clone();
                scope.spawn(move || -> Result<u64> {
                    let mut bytes = 0;
                    for entry in manifest.bases.iter().skip(t).step_by(threads) {
                        bytes += read_part(dir, entry, generation, &send)?;
                    }
                    Ok(bytes)
                })
            })
            .collect();
        drop(send);
        let mut installed: Result<u64> = Ok(0);
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
        let mut all: Vec<Result<u64>> = handles
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
    for r in results {
        load.bytes += r?;
    }
    Ok(load)
}

/// The generation of the first part (every part must share it), or `None`
/// without parts.
fn first_generation(dir: &AofDir, manifest: &Manifest) -> Result<Option<u64>> {
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
