//! Times the base-part encoder alone: one thread writing every segment of
//! a keyspace of string values to a sink, as a rewrite worker does minus
//! the device. The figures behind `rewrite/part.rs`'s prefetch distances.
//!
//! `cargo run --release -p ferrite-kv --example encode_probe -- [KEYS]
//! [VALUE_BYTES] [sink|buffer] [random|local|vlocal]` (defaults: 1000000 keys of
//! 100 bytes, 16-byte keys, written to `io::sink`, values allocated in key
//! order; run it pinned, e.g. under `taskset -c 0`). Values allocated in
//! key order land in segments by their key's hash, as the values of a
//! server filled by clients do; `local` allocates them segment by segment
//! instead, as a server that loaded its base parts has them; `vlocal`
//! allocates the values so but fills the tables in key order, to tell
//! the values' share of the difference from the tables'. `buffer`
//! streams the part into a 4 MiB buffer as the worker does (its copy into
//! the device buffer), without the device.

use std::io::Write;
use std::time::Instant;

use ferrite_kv::keyspace::{segment_of, KeyMap, Segment, SegmentRange, SEGMENTS_PER_DB};
use ferrite_kv::rewrite::part::{PartHeader, PartWriter};
use ferrite_kv::types::{Str, Value};

/// The worker's device buffer without the device: streamed into, then
/// started afresh when full (third argument `buffer`).
struct RingBuffer {
    buffer: ferrite_host::IoBuffer,
    filled: usize,
}

impl RingBuffer {
    fn new() -> std::io::Result<RingBuffer> {
        let mut buffer = ferrite_host::IoBuffer::new(4 << 20)?;
        buffer.fill(1);
        Ok(RingBuffer { buffer, filled: 0 })
    }
}

impl Write for RingBuffer {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        if self.filled == self.buffer.len() {
            self.buffer.settle();
            self.filled = 0;
        }
        let n = data.len().min(self.buffer.len() - self.filled);
        self.buffer.stream_in(self.filled, &data[..n]);
        self.filled += n;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn arg(index: usize, default: usize) -> usize {
    std::env::args()
        .nth(index)
        .map_or(default, |s| s.parse().expect("a number"))
}

fn main() -> std::io::Result<()> {
    let keys = arg(1, 1_000_000);
    let value_bytes = arg(2, 100);
    let mut segments: Vec<Segment> = (0..SEGMENTS_PER_DB)
        .map(|_| Segment {
            map: KeyMap::default(),
            expires: Default::default(),
        })
        .collect();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut order: Vec<usize> = (0..keys).collect();
    if std::env::args().nth(4).as_deref() == Some("local") {
        order.sort_by_key(|i| segment_of(format!("key:{i:012}").as_bytes()));
    }
    let mut values: Vec<Option<Str>> = vec![None; keys];
    let vorder: Vec<usize> = if std::env::args().nth(4).as_deref() == Some("vlocal") {
        let mut o: Vec<usize> = (0..keys).collect();
        o.sort_by_key(|i| segment_of(format!("key:{i:012}").as_bytes()));
        o
    } else {
        order.clone()
    };
    for &i in &vorder {
        let value: Vec<u8> = (0..value_bytes)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        values[i] = Some(Str::from(value));
    }
    for i in order {
        let key = format!("key:{i:012}");
        segments[segment_of(key.as_bytes())]
            .map
            .insert(key.as_bytes(), Value::Str(values[i].take().expect("made")));
    }
    let range = SegmentRange {
        start: 0,
        end: SEGMENTS_PER_DB as u32,
    };
    for round in 0..5 {
        let header = PartHeader {
            generation: 1,
            index: 0,
            count: 1,
            range,
            created_ms: 0,
        };
        // The worker's buffer is reserved at start-up (`direct.rs`): its
        // page faults are not the encoder's.
        let sink: Box<dyn Write> = if std::env::args().nth(3).as_deref() == Some("buffer") {
            Box::new(RingBuffer::new()?)
        } else {
            Box::new(std::io::sink())
        };
        let started = Instant::now();
        let mut writer = PartWriter::new(sink, &header)?;
        for (seg, segment) in segments.iter().enumerate() {
            // As the worker does (`rewrite/worker.rs`).
            if let Some(later) = segments.get(seg + 2) {
                later.map.prefetch_headers();
            }
            if let Some(next) = segments.get(seg + 1) {
                next.map.prefetch_entries();
            }
            writer.write_segment(0, seg as u16, segment)?;
        }
        let (_, totals) = writer.finish(&vec![0; SEGMENTS_PER_DB])?;
        let took = started.elapsed();
        writeln!(
            std::io::stdout().lock(),
            "round {round}: {} keys in {:.1} ms, {:.1} ns per key",
            totals.keys,
            took.as_secs_f64() * 1e3,
            took.as_nanos() as f64 / totals.keys.max(1) as f64
        )?;
    }
    Ok(())
}
