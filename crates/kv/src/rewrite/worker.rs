//! Step 2 of a rewrite: N threads, each writing one base part from its
//! share of the snapshot, releasing every segment as soon as it is
//! serialised (which ends the copy-before-write for that segment).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use super::dir::AofDir;
use super::manifest::{BaseEntry, Manifest};
use super::pace::Pacer;
use super::part::{PartHeader, PartWriter};
use super::priority::Promotion;
use crate::aof::SyncWait;
use crate::cpus::thread_sched_times;
use crate::error::{Error, Result};
use crate::keyspace::{SegmentQueue, Snapshot};

/// Progress shared with INFO while workers run.
#[derive(Debug, Default)]
pub struct Progress {
    /// Keys serialised so far.
    pub keys: AtomicU64,
    /// Bytes of base parts written so far.
    pub bytes: AtomicU64,
    /// Nanoseconds the workers that finished spent on a core.
    pub cpu_ns: AtomicU64,
    /// Nanoseconds they spent runnable, waiting for a core.
    pub queued_ns: AtomicU64,
    /// Keys left out of the parts because the clients superseded them
    /// (`keyspace/supersede.rs`): the log must be durable through their
    /// records before a manifest names the parts.
    pub superseded: AtomicU64,
    /// Chunks the live keyspace copied that were written ahead of their
    /// segments, freeing the snapshot's copies early.
    pub pieces: AtomicU64,
    /// Superseded keys kept in the parts all the same: noted while their
    /// worker's queue was full.
    pub unqueued: AtomicU64,
}

fn write_one(
    dir: &AofDir,
    header: PartHeader,
    snapshot: Snapshot,
    progress: &Progress,
    pacer: &Arc<Pacer>,
    mut promotion: Promotion,
) -> Result<BaseEntry> {
    let file = dir.base_name(header.generation, header.index as usize);
    let path = dir.path(&file);
    let io = |op: &'static str| {
        let path = path.clone();
        move |source| Error::Io { op, path, source }
    };
    let mut out = dir.fs.create_streamed(&path).map_err(io("create"))?;
    out.pace(Arc::clone(pacer));
    let mut writer = PartWriter::new(out, &header).map_err(io("write"))?;
    let mut segments = SegmentQueue::new();
    let mut more = true;
    let mut burst = pacer.burst();
    // What the part held when the pacer last heard of it ([`Pacer::wrote`]).
    let mut reported = writer.bytes();
    loop {
        if pacer.is_stopped() {
            return Err(Error::Rewrite {
                reason: "stopped (appendonly turned off)".into(),
            });
        }
        // With none left here, the segments the event loop captured for
        // this worker since it last looked (waiting for them if need be).
        if more && segments.is_empty() {
            more = snapshot.feed.take(&mut segments);
        }
        // Superseded keys out, outside the CPU share: the clients' writes
        // set how many there are, and charged they could take a small
        // share whole. Then chunks the event loop copied, written ahead
        // (their snapshot copies freed), before the next segment.
        // (Timing it costs two system calls: not when there is nothing.)
        if snapshot.notes.has_notes() {
            pacer.uncharged(&mut burst, || {
                snapshot.leave_out_superseded(&mut segments);
            });
        }
        snapshot
            .write_ahead(&mut segments, |db, seg, chunk, expires| {
                progress
                    .keys
                    .fetch_add(chunk.len() as u64, Ordering::Relaxed);
                pacer.delay_keys(chunk.len() as u64);
                writer.write_piece(db, seg, chunk, expires)
            })
            .map_err(io("write"))?;
        let Some((db, seg, segment)) = segments.pop_front() else {
            if more {
                continue;
            }
            break;
        };
        // A segment's entries lie behind a chain of dependent loads (its
        // chunk list, each of its 64 chunks' table header, the table),
        // each a likely cache and TLB miss in a large keyspace: walking
        // them as the encoder reaches them stalled it on every chunk.
        // So the headers are loaded two segments ahead and the tables one.
        if let Some((_, _, later)) = segments.get(1) {
            later.map.prefetch_headers();
        }
        if let Some((_, _, next)) = segments.front() {
            next.map.prefetch_entries();
        }
        writer
            .write_segment(db, seg, &segment)
            .map_err(io("write"))?;
        progress
            .keys
            .fetch_add(segment.map.len() as u64, Ordering::Relaxed);
        pacer.delay_keys(segment.map.len() as u64);
        snapshot.release(segment);
        let bytes = writer.bytes();
        pacer.wrote(bytes.saturating_sub(reported));
        reported = bytes;
        promotion.check();
        pacer.cpu_rest(&mut burst);
    }
    let captures = snapshot.feed.captures();
    let (mut out, totals) = writer.finish(&captures).map_err(io("write"))?;
    out.sync().map_err(io("fsync"))?;
    progress.bytes.fetch_add(totals.bytes, Ordering::Relaxed);
    progress
        .superseded
        .fetch_add(snapshot.notes.dropped(), Ordering::Relaxed);
    progress
        .pieces
        .fetch_add(snapshot.notes.pieces(), Ordering::Relaxed);
    progress
        .unqueued
        .fetch_add(snapshot.notes.unqueued(), Ordering::Relaxed);
    // The thread was started for this part: its totals are the part's.
    if let Some((ran, queued)) = thread_sched_times() {
        let nanos = |d: std::time::Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        progress.cpu_ns.fetch_add(nanos(ran), Ordering::Relaxed);
        progress
            .queued_ns
            .fetch_add(nanos(queued), Ordering::Relaxed);
    }
    Ok(BaseEntry {
        file,
        bytes: totals.bytes,
        keys: totals.keys,
    })
}

/// Under a CPU share, pins worker `index` to one CPU of those it may run
/// on (the `index`-th, round robin), so that the workers' bursts, which
/// start together, run on different cores ([`super::pace::Burst`]).
fn take_own_cpu(index: usize) {
    let Some(cpus) = crate::cpus::current_cpus().filter(|c| c.len() >= 2) else {
        return;
    };
    if let Err(e) = crate::cpus::pin_current_thread(&[cpus[index % cpus.len()]]) {
        tracing::debug!("rewrite worker {index} keeps its CPU set: {e}");
    }
}

/// Writes one part per snapshot, each on its own thread, their device
/// writes paced together by `pacer`, then syncs the directory. On failure
/// the parts written are removed (best effort).
pub fn write_parts(
    dir: &AofDir,
    generation: u64,
    snapshots: Vec<Snapshot>,
    created_ms: i64,
    progress: &Arc<Progress>,
    pacer: Pacer,
) -> Result<Vec<BaseEntry>> {
    let pacer = Arc::new(pacer);
    let count = snapshots.len() as u32;
    let started = Instant::now();
    let results: Vec<Result<BaseEntry>> = std::thread::scope(|scope| {
        let handles: Vec<_> = snapshots
            .into_iter()
            .enumerate()
            .map(|(index, snapshot)| {
                let header = PartHeader {
                    generation,
                    index: index as u32,
                    count,
                    range: snapshot.range,
                    created_ms,
                };
                let progress = Arc::clone(progress);
                let pacer = &pacer;
                std::thread::Builder::new()
                    .name(format!("rewrite-{index}"))
                    .spawn_scoped(scope, move || {
                        let promotion = if !pacer.cpu_paced() {
                            Promotion::for_worker(index, started)
                        } else {
                            take_own_cpu(index);
                            Promotion::never()
                        };
                        write_one(dir, header, snapshot, &progress, pacer, promotion)
                    })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| match h {
                Ok(handle) => handle.join().unwrap_or_else(|_| {
                    Err(Error::Rewrite {
                        reason: "a rewrite worker panicked".into(),
                    })
                }),
                Err(e) => Err(Error::Rewrite {
                    reason: format!("cannot start a rewrite worker: {e}"),
                }),
            })
            .collect()
    });
    let paced = pacer.totals();
    let cpu = match pacer.cpu_paced() {
        false => String::new(),
        true => {
            let (used, rested) = pacer.cpu_totals();
            let (rate, spare) = pacer.cpu_rate();
            let seat = pacer
                .bursts_on_loop_core()
                .map_or(String::new(), |n| format!(", {n} on the event loop's core"));
            format!(
                "; CPU budget {rate}% of a core at the end ({spare}% of it from idle cores), rested {} ms for {} ms of bursts{seat}",
                rested.as_millis(),
                used.as_millis()
            )
        }
    };
    let unqueued = match progress.unqueued.load(Ordering::Relaxed) {
        0 => String::new(),
        n => format!(" ({n} more kept: noted while their worker's queue was full)"),
    };
    let ms = |d: std::time::Duration| d.as_millis();
    let ns_ms = |a: &AtomicU64| a.load(Ordering::Relaxed) / 1_000_000;
    tracing::info!(
        "rewrite workers: {count} parts in {} ms; on a core {} ms, waiting for one {} ms; \
         {} device writes took {} ms (of which {} ms waiting for a core after the device), \
         pacing rest {} ms{cpu}; {} superseded keys left out{unqueued}, \
         {} copied chunks written ahead",
        ms(started.elapsed()),
        ns_ms(&progress.cpu_ns),
        ns_ms(&progress.queued_ns),
        paced.writes,
        ms(paced.writing),
        ms(paced.queued),
        ms(paced.rest),
        progress.superseded.load(Ordering::Relaxed),
        progress.pieces.load(Ordering::Relaxed),
    );
    let parts: Result<Vec<BaseEntry>> = results.into_iter().collect();
    match parts {
        Ok(parts) => {
            dir.fs.sync_dir(&dir.dir).map_err(|source| Error::Io {
                op: "fsync directory",
                path: dir.dir.clone(),
                source,
            })?;
            Ok(parts)
        }
        Err(e) => {
            dir.abandon(generation, count as usize);
            Err(e)
        }
    }
}

/// Steps 2 to 4 of a rewrite started with manifest `started`: the parts
/// ([`write_parts`]), then the log made durable through every record
/// appended so far with `log_durable` (the parts hold the effects of
/// records up to their last capture, and of those that superseded the
/// keys they left out: a manifest naming the parts must never outlive
/// those records), then the new manifest. Returns it.
pub fn rewrite_and_finish(
    dir: &AofDir,
    started: &Manifest,
    snapshots: Vec<Snapshot>,
    pacer: Pacer,
    log_durable: SyncWait,
) -> Result<Manifest> {
    let progress = Arc::new(Progress::default());
    let created_ms = crate::state::unix_ms();
    let parts = write_parts(
        dir,
        started.generation,
        snapshots,
        created_ms,
        &progress,
        pacer,
    )?;
    let finishing = Instant::now();
    if let Err(e) = log_durable() {
        dir.abandon(started.generation, parts.len());
        return Err(e);
    }
    let finished = dir.finish(started, parts);
    tracing::info!(
        "rewrite finish (log sync and manifest) took {} ms",
        finishing.elapsed().as_millis()
    );
    finished
}
