//! The rewrite as the server runs it: start-up from a manifest (bases in
//! parallel, then the incremental logs), and from the timer, starting a
//! scheduled or automatic rewrite, polling the running one, and the
//! back-off after failures.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use super::budget::Race;
use super::dir::AofDir;
use super::manifest::{IncrEntry, IncrKind, Manifest};
use super::pace::{burst_ahead_keys, Pacer};
use super::priority::lower_cpu_priority;
use super::seat::Seat;
use super::turn_on::{self, TurnOn};
use super::worker::rewrite_and_finish;
use crate::aof::{open_log_device, CommandLog, SyncWait};
use crate::error::{Error, Result};
use crate::state::State;

/// The longest wait before retrying an automatic rewrite after failures.
const BACKOFF_MAX: Duration = Duration::from_secs(60);

/// Copies what the keyspace counted of the rewrite into INFO's figures.
fn note_keyspace_figures(state: &mut State) {
    let rewrite = &mut state.rewrite;
    rewrite.cow_peak_bytes = state.keyspace.cow.peak_bytes;
    rewrite.cow_copies = state.keyspace.cow.copies;
    (rewrite.superseded_keys, rewrite.pieces) = state.keyspace.rewrite_notes();
    rewrite.captured_early = state.keyspace.captured_early();
}

/// `aof-rewrite-threads` (0: the number of cores).
pub fn rewrite_threads(state: &State) -> usize {
    let configured = state.config.aof_rewrite_threads;
    if configured > 0 {
        return configured;
    }
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// `aof-rewrite-io-share`, in percent of the time ([`super::pace`]).
pub fn io_share(state: &State) -> u32 {
    state.config.aof_rewrite_io_share_percent
}

/// `aof-rewrite-cpu-share`, in percent of the machine's CPU time, 0 =
/// unlimited ([`super::budget`]).
pub fn cpu_share(state: &State) -> u32 {
    state.config.aof_rewrite_cpu_share_percent
}

/// The cores the rewrite may run on: those of `aof_rewrite_cpulist`, else
/// those the server may run on.
fn rewrite_cores(state: &State) -> u32 {
    let cores = match state.config.cpulist("aof_rewrite_cpulist") {
        Some(list) => list.len(),
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    u32::try_from(cores).unwrap_or(u32::MAX)
}

/// `aof-rewrite-lend-loop-core`: whether a burst may take the event
/// loop's core ([`super::seat`]).
pub fn lend_loop_core(state: &State) -> bool {
    state.config.aof_rewrite_lend_loop_core
}

#[derive(Debug)]
struct Running {
    started: Instant,
    done: mpsc::Receiver<Result<Manifest>>,
    /// Lifts the rewrite's pacing ([`Pacer::lift_handle`]).
    lift: Arc<AtomicBool>,
    /// The rewrite against its log, and the log's size when it started
    /// ([`Race`]).
    race: Arc<Race>,
    log_base: u64,
    /// `rdb-key-save-delay` as the workers read it ([`Pacer::delay_keys`]).
    key_delay: Arc<AtomicI32>,
    /// Stops the workers ([`Pacer::stop_handle`]).
    stop: Arc<AtomicBool>,
}

/// A rewrite whose new log and manifest are being made durable on the
/// `rewrite-start` thread; the event loop switches to the log when done.
#[derive(Debug)]
struct Preparing {
    requested: Instant,
    done: mpsc::Receiver<Result<Manifest>>,
}

/// Wakes the event loop (its mio waker) from another thread.
#[derive(Clone)]
pub struct Wake(Arc<dyn Fn() + Send + Sync>);

impl Wake {
    /// A wake-up that calls `f`.
    pub fn new(f: impl Fn() + Send + Sync + 'static) -> Wake {
        Wake(Arc::new(f))
    }

    fn wake(&self) {
        (self.0)();
    }

    /// The same wake-up, for the log's committer.
    pub fn boxed(&self) -> Box<dyn Fn() + Send + Sync> {
        let wake = self.clone();
        Box::new(move || wake.wake())
    }
}

impl std::fmt::Debug for Wake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Wake")
    }
}

/// Owns the manifest and the rewrite in progress.
#[derive(Debug)]
pub struct Rewriter {
    dir: AofDir,
    manifest: Manifest,
    kind: IncrKind,
    preparing: Option<Preparing>,
    running: Option<Running>,
    /// Rewrite threads that may still be removing the files of a replaced
    /// manifest after reporting their rewrite done; joined at shutdown.
    threads: Vec<std::thread::JoinHandle<()>>,
    next_auto: Instant,
    size_ref: u64,
    /// Called by the rewrite's threads when a step is done, so an idle
    /// loop does not sleep until its next timer tick before moving on.
    wake: Wake,
    /// The log was turned on at run time and its first rewrite has not
    /// completed: the log is named by no manifest yet
    /// (`docs/aof-runtime.md`).
    turn_on: Option<TurnOn>,
}

/// Allocates, off the event loop, the buffers the rewrite workers write
/// their parts from (`direct.rs`), so that no rewrite pays for their
/// pages: 4 MiB per worker, held from start-up on.
pub(super) fn reserve_write_buffers(workers: usize) {
    #[cfg(target_os = "linux")]
    {
        let spawned = std::thread::Builder::new()
            .name("rewrite-buffers".into())
            .spawn(move || {
                let started = Instant::now();
                match super::direct::reserve_buffers(workers) {
                    Ok(bytes) => tracing::info!(
                        "rewrite: {} MiB of write buffers reserved in {} ms",
                        bytes >> 20,
                        started.elapsed().as_millis()
                    ),
                    Err(e) => tracing::warn!(
                        "rewrite: cannot reserve write buffers ({e}); each rewrite allocates its own"
                    ),
                }
            });
        if let Err(e) = spawned {
            tracing::warn!("rewrite: cannot start the thread reserving write buffers: {e}");
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = workers;
}

impl Rewriter {
    /// The rewriter of the data directory `dir`, whose current manifest is
    /// `manifest` and whose logs are of `kind`; automatic rewrites count
    /// growth from `size_ref` bytes.
    pub(super) fn new(
        dir: AofDir,
        manifest: Manifest,
        kind: IncrKind,
        size_ref: u64,
        wake: Wake,
    ) -> Rewriter {
        Rewriter {
            dir,
            manifest,
            kind,
            preparing: None,
            running: None,
            threads: Vec::new(),
            next_auto: Instant::now(),
            size_ref,
            wake,
            turn_on: None,
        }
    }

    /// The rewriter of a log just turned on at run time (`turn_on`): its
    /// first rewrite starts at the next [`Rewriter::tick`] and, until one
    /// completes, every rewrite is such a first one (no log switch, no
    /// manifest before the parts).
    pub fn turned_on(dir: AofDir, turn_on: TurnOn, wake: Wake) -> Rewriter {
        let kind = turn_on.incr().map_or(IncrKind::File, |i| i.kind);
        let mut rewriter = Rewriter::new(dir, turn_on.started.clone(), kind, 1, wake);
        rewriter.turn_on = Some(turn_on);
        rewriter
    }

    /// Stops a starting or running rewrite and waits for its threads
    /// (`appendonly no`); returns whether one was running. A stopped first
    /// rewrite after a turn-on leaves the directory as it was before it
    /// (`turn_on::abandon`). A stop is not a failure, as in Redis: the
    /// rewrite status stays what it was.
    pub fn stop(&mut self, state: &mut State) -> bool {
        let busy = self.busy();
        if let Some(running) = &self.running {
            running.stop.store(true, Ordering::Relaxed);
        }
        let status = (state.rewrite.last_ok, state.rewrite.failures_in_row);
        self.wait(state);
        if busy {
            (state.rewrite.last_ok, state.rewrite.failures_in_row) = status;
        }
        if let Some(turn_on) = self.turn_on.take() {
            match turn_on::abandon(&self.dir, &turn_on) {
                Ok(files) if !files.is_empty() => tracing::info!(
                    "removed the files of the unfinished first rewrite: {}",
                    files.join(", ")
                ),
                Ok(_) => {}
                Err(e) => tracing::warn!(
                    "cannot remove the files of the unfinished first rewrite ({e}); \
                     the next start removes them"
                ),
            }
        }
        busy
    }

    /// Makes `keyspace` the whole durable dataset (a replica's full sync):
    /// base parts of the next generation written from it and an empty
    /// incremental log, then a manifest naming only them, whose durable
    /// rename is the switch; the files the old manifest named are removed
    /// after. The caller waited for any rewrite and closed the log. A crash
    /// before the rename leaves the old dataset, after it the new one.
    pub fn install(
        &mut self,
        keyspace: &mut crate::keyspace::Keyspace,
        threads: usize,
    ) -> Result<()> {
        let generation = self.manifest.generation + 1;
        let snapshots = keyspace.snapshot(threads);
        let bases = super::worker::write_parts(
            &self.dir,
            generation,
            snapshots,
            crate::state::unix_ms(),
            &Arc::new(super::worker::Progress::default()),
            Pacer::unpaced(),
        )?;
        let incr = self.dir.create_incr(generation, self.kind)?;
        let next = Manifest {
            generation,
            bases,
            incrs: vec![IncrEntry {
                file: incr,
                kind: self.kind,
            }],
        };
        self.dir.write_manifest(&next)?;
        if let Err(e) = self.dir.remove_replaced(&self.manifest, &next) {
            // Orphans: the next start removes them.
            tracing::warn!("full sync: old log files left behind: {e}");
        }
        // A log turned on at run time is complete now: no first rewrite
        // is owed, and the dataset from before it goes too.
        if let Some(turn_on) = self.turn_on.take() {
            if let Err(e) = turn_on::finish(&self.dir, &turn_on, &next) {
                tracing::warn!("full sync: old log files left behind: {e}");
            }
        }
        self.manifest = next;
        Ok(())
    }

    /// Whether a rewrite is starting or running.
    pub fn busy(&self) -> bool {
        self.running.is_some() || self.preparing.is_some()
    }

    /// Called from the server timer, between commands, and after every
    /// event-loop iteration while a rewrite is requested or running.
    pub fn tick(&mut self, state: &mut State, log: &mut dyn CommandLog) {
        self.poll(state);
        self.poll_prepared(state, log);
        if let Some(running) = &self.running {
            // The log's size is refreshed by the server's timer.
            let grown = state.log.current_size.saturating_sub(running.log_base);
            running.race.log_grew_to(grown);
            running
                .key_delay
                .store(state.config.rdb_key_save_delay, Ordering::Relaxed);
        }
        if self.running.is_some() || self.preparing.is_some() {
            note_keyspace_figures(state);
            return;
        }
        let first = self.turn_on.is_some() && Instant::now() >= self.next_auto;
        let wanted = state.rewrite.scheduled || self.auto_due(state) || first;
        if !wanted || state.log_failure.is_some() {
            return;
        }
        state.rewrite.scheduled = false;
        if self.turn_on.is_some() {
            // The log is new and no manifest names it: no switch, the
            // parts capture the keyspace against its records.
            let started = self.manifest.clone();
            let lsn = state.keyspace.capture_lsn();
            let now = Instant::now();
            if let Err(e) = self.launch(state, log, started, now, lsn, Duration::ZERO) {
                tracing::warn!("the first rewrite of the log could not start: {e}");
                self.failed(state);
            }
            return;
        }
        // While the manifest is prepared off the loop, the current log's
        // tail is synced off it too, and the start is reported only once
        // that sync is done: the switch then waits for what came in since,
        // not for up to a second of writes (6-8 ms on the loop when it
        // found the background sync still running).
        let synced = log.prepare_switch();
        if let Err(e) = self.prepare(state, synced) {
            tracing::warn!("log rewrite could not start: {e}");
            self.failed(state);
        }
    }

    /// Step 1a, off the event loop: creates the new incremental log and
    /// makes a manifest naming it durable (`AofDir::start`, ~4 fsyncs),
    /// then waits for `synced` (the current log's records so far durable).
    /// The loop keeps appending to the current log meanwhile, which the
    /// new manifest still names, so every crash window stays the same.
    fn prepare(&mut self, state: &mut State, synced: SyncWait) -> Result<()> {
        let (send, done) = mpsc::channel();
        let (dir, current, kind) = (self.dir.clone(), self.manifest.clone(), self.kind);
        let wake = self.wake.clone();
        let cpus = state.config.cpulist("aof_rewrite_cpulist");
        std::thread::Builder::new()
            .name("rewrite-start".into())
            .spawn(move || {
                crate::cpus::place_current_thread(cpus.as_deref(), "log rewrite");
                let started = dir.start(&current, kind);
                let _ = send.send(started.and_then(|manifest| synced().map(|()| manifest)));
                wake.wake();
            })
            .map_err(|e| Error::Rewrite {
                reason: format!("cannot start the rewrite thread: {e}"),
            })?;
        state.rewrite.running_since = Some(Instant::now());
        self.preparing = Some(Preparing {
            requested: Instant::now(),
            done,
        });
        Ok(())
    }

    /// Step 1b, on the event loop once the manifest is durable: the log
    /// switch, the snapshot and the workers.
    fn poll_prepared(&mut self, state: &mut State, log: &mut dyn CommandLog) {
        let Some(preparing) = &self.preparing else {
            return;
        };
        let result = match preparing.done.try_recv() {
            Ok(result) => result,
            Err(mpsc::TryRecvError::Empty) => return,
            Err(mpsc::TryRecvError::Disconnected) => Err(Error::Rewrite {
                reason: "the rewrite start thread ended without a result".into(),
            }),
        };
        let requested = preparing.requested;
        self.preparing = None;
        if let Err(e) = result.and_then(|started| self.start(state, log, started, requested)) {
            tracing::warn!("log rewrite could not start: {e}");
            self.failed(state);
        }
    }

    fn auto_due(&self, state: &State) -> bool {
        let percentage = u64::from(state.config.auto_aof_rewrite_percentage);
        let min = state.config.auto_aof_rewrite_min_size_bytes;
        // The log counts its commands' bytes, as Redis's AOF file holds
        // them, not its frames and PM padding: the file's size made a
        // stream of XADDs rewrite about twice as often as Redis would.
        let size = state.rewrite.base_bytes + state.log.command_bytes;
        let base = self.size_ref.max(1);
        percentage > 0
            && Instant::now() >= self.next_auto
            && size >= min
            && size.saturating_sub(base) * 100 / base >= percentage
    }

    fn start(
        &mut self,
        state: &mut State,
        log: &mut dyn CommandLog,
        started: Manifest,
        requested: Instant,
    ) -> Result<()> {
        // The new manifest is durable and names every file; it is the
        // current one from here on, whatever happens to the rewrite.
        self.manifest = started.clone();
        let incr = started
            .incrs
            .last()
            .map(|i| i.file.clone())
            .unwrap_or_default();
        let on_loop = Instant::now();
        let device = open_log_device(&self.dir.path(&incr), self.kind, &state.config)?;
        let point = log.switch(device)?;
        log_preamble(state, log);
        let switched = on_loop.elapsed();
        self.launch(state, log, started, requested, point.last_in_old, switched)
    }

    /// Starts the workers of rewrite `started`, whose base parts hold the
    /// records up to `last_in_old` and those before each segment's
    /// capture; `switched` is what the log switch took.
    fn launch(
        &mut self,
        state: &mut State,
        log: &mut dyn CommandLog,
        started: Manifest,
        requested: Instant,
        last_in_old: u64,
        switched: Duration,
    ) -> Result<()> {
        let threads = rewrite_threads(state);
        let on_loop = Instant::now();
        log.info(&mut state.log);
        let log_base = state.log.current_size;
        // Nothing is captured yet: the loop captures segments as the
        // workers go (`keyspace/capture.rs`).
        let snapshots =
            state
                .keyspace
                .begin_rewrite(threads, last_in_old, Some(Arc::clone(&self.wake.0)));
        let workers = u32::try_from(threads).unwrap_or(u32::MAX);
        let mut pacer = Pacer::new(io_share(state))
            .with_cpu_share(cpu_share(state), rewrite_cores(state), workers)
            .with_race(state.config.auto_aof_rewrite_percentage);
        // Where `aof_rewrite_cpulist` places the rewrite, its workers stay
        // there: they do not take the loop's core.
        if lend_loop_core(state) && state.config.cpulist("aof_rewrite_cpulist").is_none() {
            // On the event loop's thread: the seat names it.
            pacer = pacer.with_seat(Seat::for_current_thread());
        }
        if pacer.cpu_paced() {
            let largest = snapshots.iter().map(|s| s.keys).max().unwrap_or(0);
            state.keyspace.capture_ahead(burst_ahead_keys(largest));
        }
        tracing::info!(
            "log rewrite {} started: {} threads, log switched after record {} (switch {} µs, set-up {} µs on the event loop)",
            started.generation,
            threads,
            last_in_old,
            switched.as_micros(),
            on_loop.elapsed().as_micros()
        );
        let (send, done) = mpsc::channel();
        let dir = self.dir.clone();
        let wake = self.wake.clone();
        let cpus = state.config.cpulist("aof_rewrite_cpulist");
        let lift = pacer.lift_handle();
        let key_delay = pacer.key_delay_handle();
        key_delay.store(state.config.rdb_key_save_delay, Ordering::Relaxed);
        let race = pacer.race();
        let stop = pacer.stop_handle();
        let replaced = self.turn_on.clone();
        let log_durable = log.sync_wait();
        let thread = std::thread::Builder::new()
            .name("rewrite".into())
            .spawn(move || {
                // The workers inherit this thread's set and class: the
                // event loop's class under a CPU share, whose bursts keep
                // them to it (`pace.rs`), `SCHED_IDLE` without.
                crate::cpus::place_current_thread(cpus.as_deref(), "log rewrite");
                if !pacer.cpu_paced() {
                    lower_cpu_priority();
                }
                let result = rewrite_and_finish(&dir, &started, snapshots, pacer, log_durable);
                let done = result.as_ref().ok().cloned();
                let _ = send.send(result);
                wake.wake();
                // The rewrite is done and reported; what only the replaced
                // manifest named goes now, as Redis removes its history
                // files in the background. Leftovers are orphans, removed at
                // the next start.
                if let Some(done) = done {
                    let removing = Instant::now();
                    let removed = dir.remove_replaced(&started, &done).and_then(|mut files| {
                        if let Some(turn_on) = &replaced {
                            files.extend(turn_on::finish(&dir, turn_on, &done)?);
                        }
                        Ok(files)
                    });
                    match removed {
                        Ok(files) => tracing::info!(
                            "rewrite cleanup: removed {} replaced files in {} ms",
                            files.len(),
                            removing.elapsed().as_millis()
                        ),
                        Err(e) => tracing::warn!(
                            "rewrite cleanup: {e}; the files are removed at the next start"
                        ),
                    }
                }
            })
            .map_err(|e| Error::Rewrite {
                reason: format!("cannot start the rewrite thread: {e}"),
            })?;
        self.threads.retain(|t| !t.is_finished());
        self.threads.push(thread);
        state.rewrite.running_since = Some(requested);
        state.rewrite.changes_at_start = state.rewrite.changes_since_save;
        state.rewrite.threads = threads;
        self.running = Some(Running {
            started: requested,
            done,
            lift,
            race,
            log_base,
            key_delay,
            stop,
        });
        Ok(())
    }

    fn poll(&mut self, state: &mut State) {
        let Some(running) = &self.running else {
            return;
        };
        let result = match running.done.try_recv() {
            Ok(result) => result,
            Err(mpsc::TryRecvError::Empty) => return,
            Err(mpsc::TryRecvError::Disconnected) => Err(Error::Rewrite {
                reason: "the rewrite thread ended without a result".into(),
            }),
        };
        let elapsed = running.started.elapsed();
        self.running = None;
        note_keyspace_figures(state);
        let rewrite = &mut state.rewrite;
        rewrite.running_since = None;
        rewrite.last_duration_ms = elapsed.as_millis() as u64;
        rewrite.last_duration_s = elapsed.as_secs() as i64;
        match result {
            Ok(done) => {
                rewrite.base_bytes = done.bases.iter().map(|b| b.bytes).sum();
                rewrite.parts = done.bases.len();
                rewrite.completed += 1;
                rewrite.last_ok = true;
                // The new base is a snapshot: what LASTSAVE reports, and
                // the changes it holds are saved.
                state.start_unix_s = crate::state::unix_ms() / 1000;
                let saved = rewrite.changes_at_start;
                rewrite.changes_since_save = rewrite.changes_since_save.saturating_sub(saved);
                rewrite.failures_in_row = 0;
                // As Redis's aof_rewrite_base_size: the whole size once the
                // rewrite is done, new log included. The base alone (what
                // this was) let a rewrite under load that wrote a large log
                // meanwhile, or left many superseded keys out of a small
                // base, start the next one at once.
                self.size_ref = (rewrite.base_bytes + state.log.command_bytes).max(1);
                tracing::info!(
                    "log rewrite {} done in {} ms: {} parts, {} bytes; {} segments captured \
                     ahead of their turn for commands across segments",
                    done.generation,
                    rewrite.last_duration_ms,
                    rewrite.parts,
                    rewrite.base_bytes,
                    rewrite.captured_early
                );
                self.manifest = done;
                self.turn_on = None;
            }
            Err(e) => {
                tracing::warn!("log rewrite failed: {e}");
                self.failed(state);
            }
        }
    }

    fn failed(&mut self, state: &mut State) {
        let rewrite = &mut state.rewrite;
        rewrite.last_ok = false;
        rewrite.running_since = None;
        rewrite.failures_in_row += 1;
        let wait = Duration::from_secs(1u64 << rewrite.failures_in_row.min(6)).min(BACKOFF_MAX);
        self.next_auto = Instant::now() + wait;
    }

    /// Waits for a running rewrite (clean shutdown). A rewrite still
    /// preparing only gets its manifest: the log was not switched, so the
    /// new incremental log stays empty and the current one keeps every
    /// command, which is what that manifest loads.
    pub fn wait(&mut self, state: &mut State) {
        // No command runs from here on: whatever the workers still need
        // is captured now, at the last record.
        state.keyspace.capture_step(true);
        if let Some(preparing) = self.preparing.take() {
            match preparing.done.recv() {
                Ok(Ok(started)) => self.manifest = started,
                Ok(Err(e)) => tracing::warn!("log rewrite could not start: {e}"),
                Err(_) => tracing::warn!("the rewrite start thread ended without a result"),
            }
            self.failed(state);
        }
        if let Some(running) = &self.running {
            // The clients are gone: nothing to pace the rewrite for.
            running.lift.store(true, Ordering::Relaxed);
            let result = running.done.recv().unwrap_or_else(|_| {
                Err(Error::Rewrite {
                    reason: "the rewrite thread ended without a result".into(),
                })
            });
            let (send, done) = mpsc::channel();
            let _ = send.send(result);
            self.running = Some(Running {
                started: running.started,
                done,
                lift: Arc::clone(&running.lift),
                race: Arc::clone(&running.race),
                log_base: running.log_base,
                key_delay: Arc::clone(&running.key_delay),
                stop: Arc::clone(&running.stop),
            });
            self.poll(state);
        }
        for thread in self.threads.drain(..) {
            if thread.join().is_err() {
                tracing::warn!("a rewrite thread panicked");
            }
        }
    }
}

/// Appends what a new log starts with, since base parts do not hold it:
/// the function libraries (`docs/scripting.md` has the crash argument)
/// and the replication history, so that a replica restarted before its
/// next write still resumes (`aof/repl_mark.rs`).
pub fn log_preamble(state: &State, log: &mut dyn CommandLog) {
    if let Some(record) = crate::commands::functions_record(&state.functions) {
        log.append(&record);
    }
    if let Some(record) = state.repl.mark_record() {
        log.append(&record);
    }
}
