//! The RDB producer: a snapshot of the keyspace taken on the event loop
//! and encoded as an RDB file (version 10) on a worker thread, in bounded
//! chunks handed to a sink (`docs/rdb.md`).
//!
//! The snapshot holds a clone of every segment's `Arc`: the keyspace's
//! copy-before-write (`Arc::make_mut` on every mutation) keeps the
//! worker's segments exactly as they were when the snapshot was taken,
//! without copying a key or a value. The worker drops each segment once it
//! is encoded, so the extra memory is bounded by the segments written
//! meanwhile and not yet encoded.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{crc64, object_type_of, write_len, write_string, write_value};
use crate::keyspace::{Keyspace, Segment};

/// Bytes gathered before a chunk goes to the sink.
pub const CHUNK_BYTES: usize = 256 * 1024;
/// Chunks a channel sink holds before the worker waits for the loop.
pub const CHANNEL_CHUNKS: usize = 4;

const MAGIC: &[u8] = b"REDIS0010";
const OPCODE_FUNCTION2: u8 = 0xf5;
const OPCODE_AUX: u8 = 0xfa;
const OPCODE_RESIZE_DB: u8 = 0xfb;
const OPCODE_EXPIRE_MS: u8 = 0xfc;
const OPCODE_SELECT_DB: u8 = 0xfe;
const OPCODE_EOF: u8 = 0xff;

/// The replication history a snapshot names (Redis's `repl-id`,
/// `repl-offset`, `repl-stream-db` auxiliary fields).
#[derive(Clone, Debug)]
pub struct History {
    pub replid: String,
    pub offset: i64,
    pub stream_db: usize,
}

/// The dataset at one point between two commands.
#[derive(Debug)]
pub struct Snapshot {
    /// Per database, its segments as they were.
    dbs: Vec<Vec<Arc<Segment>>>,
    /// The time of the snapshot (the `ctime` auxiliary field).
    now_ms: i64,
    /// Function libraries' code, written before the keys.
    libraries: Vec<Vec<u8>>,
    history: Option<History>,
    used_mem: u64,
    keys: u64,
}

impl Snapshot {
    /// Takes the snapshot: one `Arc` clone per segment.
    pub fn take(
        keyspace: &Keyspace,
        libraries: Vec<Vec<u8>>,
        history: Option<History>,
        used_mem: u64,
    ) -> Snapshot {
        let mut keys = 0u64;
        let dbs = (0..keyspace.databases())
            .map(|i| {
                let db = keyspace.db(i);
                keys += db.len() as u64;
                db.segments().to_vec()
            })
            .collect();
        Snapshot {
            dbs,
            now_ms: keyspace.now_ms,
            libraries,
            history,
            used_mem,
            keys,
        }
    }

    /// The keys the snapshot holds (expired ones included).
    pub fn keys(&self) -> u64 {
        self.keys
    }
}

/// Where encoded chunks go.
pub trait Sink {
    /// Takes the next bytes of the stream.
    fn write(&mut self, bytes: &[u8]) -> io::Result<()>;
}

/// What the worker shares with the event loop while it encodes.
#[derive(Clone, Debug, Default)]
pub struct Controls {
    /// `rdb-key-save-delay`, written by the loop at every tick.
    pub key_delay: Arc<AtomicI32>,
    /// Keys encoded so far (INFO `current_save_keys_processed`).
    pub processed: Arc<AtomicU64>,
    /// Set to abandon the production (no replica left, shutdown).
    pub stop: Arc<AtomicBool>,
}

/// Encodes `snapshot` as an RDB file into `sink`, with the CRC-64 when
/// `checksum` (else zero); returns the keys written. Each segment is
/// dropped once encoded.
pub fn encode(
    snapshot: Snapshot,
    checksum: bool,
    controls: &Controls,
    sink: &mut dyn Sink,
) -> io::Result<u64> {
    let mut out = Out {
        buf: Vec::with_capacity(CHUNK_BYTES + 4096),
        crc: 0,
        checksum,
        sink,
    };
    let Snapshot {
        dbs,
        now_ms,
        libraries,
        history,
        used_mem,
        ..
    } = snapshot;
    out.buf.extend_from_slice(MAGIC);
    write_aux(&mut out.buf, now_ms, used_mem, history.as_ref());
    for code in &libraries {
        out.buf.push(OPCODE_FUNCTION2);
        write_string(&mut out.buf, code);
    }
    let mut written = 0u64;
    for (index, segments) in dbs.into_iter().enumerate() {
        written += encode_db(&mut out, index, segments, controls)?;
    }
    out.buf.push(OPCODE_EOF);
    if out.checksum {
        out.crc = crc64(out.crc, &out.buf);
    }
    let crc = if out.checksum { out.crc } else { 0 };
    out.buf.extend_from_slice(&crc.to_le_bytes());
    out.sink.write(&out.buf)?;
    Ok(written)
}

/// The encoder's buffer and where full chunks go.
struct Out<'a> {
    buf: Vec<u8>,
    crc: u64,
    checksum: bool,
    sink: &'a mut dyn Sink,
}

impl Out<'_> {
    /// Hands the buffer to the sink once it holds a chunk.
    fn maybe_flush(&mut self) -> io::Result<()> {
        if self.buf.len() < CHUNK_BYTES {
            return Ok(());
        }
        if self.checksum {
            self.crc = crc64(self.crc, &self.buf);
        }
        self.sink.write(&self.buf)?;
        self.buf.clear();
        Ok(())
    }
}

/// The auxiliary fields Redis 7.0 writes first.
fn write_aux(buf: &mut Vec<u8>, now_ms: i64, used_mem: u64, history: Option<&History>) {
    let mut aux = |name: &str, value: &str| {
        buf.push(OPCODE_AUX);
        write_string(buf, name.as_bytes());
        write_string(buf, value.as_bytes());
    };
    aux("redis-ver", "7.0.15");
    aux("redis-bits", "64");
    aux("ctime", &(now_ms / 1000).to_string());
    aux("used-mem", &used_mem.to_string());
    if let Some(h) = history {
        aux("repl-stream-db", &h.stream_db.to_string());
        aux("repl-id", &h.replid);
        aux("repl-offset", &h.offset.to_string());
    }
    aux("aof-base", "0");
}

/// Encodes one database's segments (nothing when it has no live key).
fn encode_db(
    out: &mut Out<'_>,
    index: usize,
    segments: Vec<Arc<Segment>>,
    controls: &Controls,
) -> io::Result<u64> {
    let keys: usize = segments.iter().map(|s| s.map.len()).sum();
    if keys == 0 {
        return Ok(0);
    }
    let expires: usize = segments.iter().map(|s| s.expires.len()).sum();
    out.buf.push(OPCODE_SELECT_DB);
    write_len(&mut out.buf, index as u64);
    out.buf.push(OPCODE_RESIZE_DB);
    write_len(&mut out.buf, keys as u64);
    write_len(&mut out.buf, expires as u64);
    let mut written = 0u64;
    for segment in segments {
        for (key, value) in segment.map.iter() {
            // Keys already expired are written too, as Redis does: the
            // loader (or the replica's master, by its DELs) deletes them,
            // and a master counts them (`rdb_last_load_keys_expired`).
            if let Some(at) = segment.expires.get(key).copied() {
                out.buf.push(OPCODE_EXPIRE_MS);
                out.buf.extend_from_slice(&at.to_le_bytes());
            }
            out.buf.push(object_type_of(value));
            write_string(&mut out.buf, key);
            write_value(&mut out.buf, value);
            written += 1;
            controls.processed.fetch_add(1, Ordering::Relaxed);
            delay_key(controls)?;
            out.maybe_flush()?;
        }
        // The segment is released here: a copy the live keyspace made
        // before writing to it leaves this version to be freed now.
        drop(segment);
    }
    Ok(written)
}

/// Waits what `rdb-key-save-delay` asks for one key (a testing knob, 0 in
/// production): a positive value is microseconds, `-n` one microsecond
/// with a chance of one in `n`. Long waits are cut in slices so that a
/// stop or a CONFIG SET to 0 acts at once. A stop is an error.
fn delay_key(controls: &Controls) -> io::Result<()> {
    let stopped = || {
        if controls.stop.load(Ordering::Relaxed) {
            Err(io::Error::new(
                io::ErrorKind::Interrupted,
                "production stopped",
            ))
        } else {
            Ok(())
        }
    };
    let delay = controls.key_delay.load(Ordering::Relaxed);
    let micros = match delay {
        0 => return stopped(),
        d if d > 0 => u64::from(d.unsigned_abs()),
        d => u64::from(fastrand::u64(0..u64::from(d.unsigned_abs())) == 0),
    };
    let until = Instant::now() + Duration::from_micros(micros);
    loop {
        stopped()?;
        let now = Instant::now();
        if now >= until || controls.key_delay.load(Ordering::Relaxed) == 0 {
            return Ok(());
        }
        std::thread::sleep((until - now).min(Duration::from_millis(10)));
    }
}

/// A message from a worker to the event loop.
#[derive(Debug)]
pub enum Msg {
    /// The next bytes of the stream (channel sinks only).
    Chunk(Vec<u8>),
    /// The production ended: keys written, or why it failed.
    Done(Result<u64, String>),
}

/// A sink that sends chunks to the event loop over a bounded channel,
/// waking it after each one.
pub struct ChannelSink {
    tx: SyncSender<Msg>,
    wake: Arc<dyn Fn() + Send + Sync>,
}

impl std::fmt::Debug for ChannelSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChannelSink").finish_non_exhaustive()
    }
}

impl Sink for ChannelSink {
    fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.tx
            .send(Msg::Chunk(bytes.to_vec()))
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "no one reads the stream"))?;
        (self.wake)();
        Ok(())
    }
}

/// A production running on its worker thread.
#[derive(Debug)]
pub struct Running {
    pub started: Instant,
    pub keys_total: u64,
    pub controls: Controls,
    pub rx: Receiver<Msg>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Running {
    /// Asks the worker to stop and waits for it to end.
    pub fn stop_and_join(&mut self) {
        self.controls.stop.store(true, Ordering::SeqCst);
        // Drain so a worker blocked on the full channel can see the stop.
        while let Ok(_msg) = self.rx.try_recv() {}
        if let Some(thread) = self.thread.take() {
            while !thread.is_finished() {
                while let Ok(_msg) = self.rx.try_recv() {}
                std::thread::sleep(Duration::from_millis(1));
            }
            let _ = thread.join();
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

/// Starts `job` on a thread named `name`; it gets the channel sink (which
/// a file job ignores) and its result is sent as [`Msg::Done`].
pub fn spawn(
    name: &str,
    keys_total: u64,
    controls: Controls,
    wake: Arc<dyn Fn() + Send + Sync>,
    job: impl FnOnce(&Controls, &mut ChannelSink) -> Result<u64, String> + Send + 'static,
) -> io::Result<Running> {
    let (tx, rx) = sync_channel(CHANNEL_CHUNKS);
    let worker_controls = controls.clone();
    let thread = std::thread::Builder::new()
        .name(name.to_string())
        .spawn(move || {
            let mut sink = ChannelSink {
                tx: tx.clone(),
                wake: Arc::clone(&wake),
            };
            let result = job(&worker_controls, &mut sink);
            let _ = tx.send(Msg::Done(result));
            wake();
        })?;
    Ok(Running {
        started: Instant::now(),
        keys_total,
        controls,
        rx,
        thread: Some(thread),
    })
}
