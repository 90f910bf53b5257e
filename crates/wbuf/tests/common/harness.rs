//! The crash harness of the write buffer's crash tests: writer threads run
//! a workload on a buffer over a [`World`], each write timed on the world's
//! event clock; a crash is taken at chosen events, the crash images are
//! recovered, and every region must hold each write that ended before the
//! crash, plus at most the one in flight, whole.

use std::sync::Arc;

use ferrite_io::{Device, SECTOR};
use ferrite_wbuf::{WbufConfig, WbufStats, WriteBuffer};

use super::{Pm, Ssd, World};

/// One write of a writer thread: where, what, and the clock around it.
#[derive(Clone, Debug)]
pub struct Done {
    pub offset: usize,
    pub data: Vec<u8>,
    pub start: u64,
    pub end: u64,
}

/// Writes `data` at `offset` through `buffer` and notes the events of the
/// world's clock before and after it.
pub fn timed_write(world: &World, buffer: &WriteBuffer<Pm>, offset: usize, data: Vec<u8>) -> Done {
    let start = world.events();
    buffer.write_at(offset as u64, &data).expect("write");
    Done {
        offset,
        data,
        start,
        end: world.events(),
    }
}

/// One writer thread's writes: thread `t` of a run with seed `seed`.
pub type Writer = fn(&World, &WriteBuffer<Pm>, usize, u64) -> Vec<Done>;

/// A crash test's buffer, workload and layout.
pub struct Harness {
    /// Bytes of the buffer's PM.
    pub region: usize,
    /// The buffer's configuration, with or without its destage thread.
    pub config: fn(bool) -> WbufConfig,
    pub block: usize,
    pub threads: usize,
    /// Bytes of each thread's own part of the file: thread `t`'s starts
    /// at `t * span`.
    pub span: usize,
    /// Writes longer than this go straight to the file, where a write in
    /// flight may tear at sectors like any `pwrite`; staged blocks are
    /// whole or absent.
    pub through_above: usize,
    pub writer: Writer,
}

impl Harness {
    /// The buffer on `world`'s PM and file.
    pub fn open(&self, world: &Arc<World>, background: bool) -> WriteBuffer<Pm> {
        WriteBuffer::with_medium(
            Pm(Arc::clone(world)),
            "pm",
            Arc::new(Ssd(Arc::clone(world))),
            (self.config)(background),
        )
        .expect("open")
    }

    /// A world with empty media, and a crash armed at event `at` if given
    /// (with `seed` for what the crash keeps of unflushed data).
    pub fn world(&self, crash: Option<(u64, u64)>) -> Arc<World> {
        World::new(vec![0; self.region], Vec::new(), crash)
    }

    /// Runs the writer threads on a buffer with its destage thread, closes
    /// it, and returns each thread's writes and the buffer's counters.
    pub fn run(&self, world: &Arc<World>, seed: u64) -> (Vec<Vec<Done>>, WbufStats) {
        let buffer = self.open(world, true);
        let (world, writer) = (&**world, self.writer);
        let logs = std::thread::scope(|s| {
            let mut threads = Vec::with_capacity(self.threads);
            for t in 0..self.threads {
                let buffer = &buffer;
                threads.push(s.spawn(move || writer(world, buffer, t, seed)));
            }
            let joined = threads.into_iter().map(|h| h.join().expect("writer"));
            joined.collect()
        });
        let stats = buffer.stats();
        buffer.close().expect("close");
        (logs, stats)
    }

    /// The events a run without a crash takes, and its counters.
    pub fn probe(&self, seed: u64) -> (u64, WbufStats) {
        let world = self.world(None);
        let (_, stats) = self.run(&world, seed);
        (world.events(), stats)
    }

    /// Crashes `points` runs at events spread evenly over the `total` of a
    /// probe (point `i` at `1 + i * total / points + i % jitter`), recovers
    /// each and verifies it; returns the counters of the crashed runs.
    pub fn sweep(&self, seed: u64, total: u64, points: u64, jitter: u64) -> Vec<WbufStats> {
        (0..points)
            .map(|i| {
                let at = 1 + i * total / points + i % jitter.max(1);
                let world = self.world(Some((at, seed + i)));
                let (logs, stats) = self.run(&world, seed);
                let images = crash_images(&world);
                let what = format!("crash at event {at} (seed {})", seed + i);
                self.recover_and_verify(images, &logs, at, &what);
                stats
            })
            .collect()
    }

    /// Recovers `(pm, file)` images with a plain open and verifies, then
    /// checks the file alone (after a clean close) holds the same.
    pub fn recover_and_verify(
        &self,
        images: (Vec<u8>, Vec<u8>),
        logs: &[Vec<Done>],
        crash: u64,
        what: &str,
    ) {
        let world = World::new(images.0, images.1, None);
        let buffer = self.open(&world, false);
        self.verify(&buffer, logs, crash, what);
        buffer.close().expect("close after recovery");
        self.verify(&world.file, logs, crash, &format!("{what}, file alone"));
    }

    /// Checks a recovered device against the writes acknowledged before
    /// event `crash` (must be there), the one in flight (each unit old or
    /// new, whole), and none after.
    pub fn verify(&self, device: &dyn Device, logs: &[Vec<Done>], crash: u64, what: &str) {
        for (t, log) in logs.iter().enumerate() {
            let base = t * self.span;
            let (must, maybe, in_flight) = self.expected(log, base, crash);
            let mut actual = vec![0u8; self.span];
            let n = device.read_at(base as u64, &mut actual).expect("read");
            actual[n..].fill(0);
            let unit = if in_flight > self.through_above {
                SECTOR
            } else {
                self.block
            };
            for u in 0..self.span / unit {
                let r = u * unit..(u + 1) * unit;
                let ok = actual[r.clone()] == must[r.clone()]
                    || maybe
                        .as_ref()
                        .is_some_and(|m| actual[r.clone()] == m[r.clone()]);
                assert!(
                    ok,
                    "{what}: thread {t} bytes {r:?} are neither the acknowledged nor the in-flight version (in flight: {in_flight} bytes)"
                );
            }
        }
    }

    /// A thread's region with every write that ended before `crash`; the
    /// same with the one in flight at `crash` too, if any; and that one's
    /// length (0 if none).
    fn expected(&self, log: &[Done], base: usize, crash: u64) -> (Vec<u8>, Option<Vec<u8>>, usize) {
        let apply = |image: &mut [u8], w: &Done| {
            let at = w.offset - base;
            image[at..at + w.data.len()].copy_from_slice(&w.data);
        };
        let mut must = vec![0u8; self.span];
        let (mut maybe, mut in_flight) = (None, 0);
        for w in log {
            if w.end < crash {
                apply(&mut must, w);
            } else if w.start + 1 < crash {
                let mut m = must.clone();
                apply(&mut m, w);
                maybe = Some(m);
                in_flight = w.data.len();
            }
        }
        (must, maybe, in_flight)
    }
}

/// The images a crash armed on `world` captured or, if the run ended
/// before that event, the media as they are.
pub fn crash_images(world: &World) -> (Vec<u8>, Vec<u8>) {
    world
        .captured()
        .unwrap_or_else(|| (world.pm.volatile_image(), world.file.durable_image()))
}
