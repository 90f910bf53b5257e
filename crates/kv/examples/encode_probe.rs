//! Times the base-part encoder alone: one thread writing every segment of
//! a keyspace of string values to a sink, as a rewrite worker does minus
//! the device. The figures behind `rewrite/part.rs`'s prefetch distances.
//!
//! `cargo run --release -p ferrite-kv --example encode_probe -- [KEYS] [VALUE_BYTES]`
//! (defaults: 1000000 keys of 100 bytes, 16-byte keys; run it pinned,
//! e.g. under `taskset -c 0`). Values are allocated in key order and land
//! in segments by their key's hash, as a loaded server's do. The server's
//! heap is in huge pages (`heap.rs`); run with
//! `GLIBC_TUNABLES=glibc.malloc.hugetlb=1` and keep the runs whose first
//! line says `Some(true)` (glibc 2.36 takes the tunable only some of the
//! time).

use std::io::Write;
use std::time::Instant;

use ferrite_kv::keyspace::{segment_of, KeyMap, Segment, SegmentRange, SEGMENTS_PER_DB};
use ferrite_kv::rewrite::part::{PartHeader, PartWriter};
use ferrite_kv::types::{Str, Value};

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
    for i in 0..keys {
        let key = format!("key:{i:012}");
        let value: Vec<u8> = (0..value_bytes)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        segments[segment_of(key.as_bytes())]
            .map
            .insert(key.as_bytes(), Value::Str(Str::from(value)));
    }
    // The server's heap is in huge pages (`heap.rs`); say whether this
    // one is (run with GLIBC_TUNABLES=glibc.malloc.hugetlb=1 to ask).
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap_or_default();
    writeln!(
        std::io::stdout().lock(),
        "heap advised for huge pages: {:?}",
        ferrite_kv::heap::heap_advised(&smaps)
    )?;
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
        let started = Instant::now();
        let mut writer = PartWriter::new(std::io::sink(), &header)?;
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
