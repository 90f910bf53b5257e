//! What the event loop copies when it writes a stream a rewrite's capture
//! still holds, counted in bytes through the allocator's counter: it must
//! not grow with the stream's length (`docs/streams.md`, "The value").
//!
//! A capture holds the stream's `Shared` handle (through its segment), so
//! the loop's first write after it copies the stream's top level; every
//! later change copies only what the capture still shares. The test takes
//! the same steps on a stream of a few blocks and on one of many
//! thousands: a capture (a clone of the handle), then an append, a
//! deletion in the middle, a trim at the front, each measured as the
//! bytes allocated and not freed while the capture lives.

use std::alloc::System;
use std::collections::BTreeMap;
use std::ops::DerefMut;
use std::sync::Arc;

use ferrite_kv::types::stream::{Group, NodeLimits, Stream, StreamId, TrimBy};
use ferrite_kv::types::Shared;

#[global_allocator]
static ALLOCATOR: ferrite_alloc::Counting<System> = ferrite_alloc::Counting::new(System);

/// Bytes still allocated after `f` that were not before (the counter is
/// global: this file has one test, so nothing else allocates meanwhile).
fn kept_by(f: impl FnOnce()) -> usize {
    let before = ferrite_alloc::allocated();
    f();
    ferrite_alloc::allocated().saturating_sub(before)
}

fn id(ms: u64) -> StreamId {
    StreamId { ms, seq: 0 }
}

/// A stream of `n` entries of three fields, as the bench's XADD adds,
/// with a consumer group holding a few pending entries.
fn filled(n: u64) -> Shared<Stream> {
    let mut s = Stream::default();
    for i in 1..=n {
        let v = i.to_string();
        let fields: [(&[u8], &[u8]); 3] = [
            (b"name", b"user"),
            (b"age", v.as_bytes()),
            (b"city", b"paris"),
        ];
        s.append(id(i), &fields, NodeLimits::DEFAULT);
    }
    let mut group = Group::new(id(0), 0);
    let consumer: ferrite_kv::types::Bytes = b"alice"[..].into();
    for i in 1..=10 {
        group.assign(id(i), &consumer, 1, None);
    }
    s.groups.insert(b"g"[..].into(), group);
    Shared::new(s)
}

/// Bytes the three writes keep while a capture holds the stream.
fn copies_under_capture(n: u64) -> [usize; 3] {
    let mut live = filled(n);
    let mut costs = [0; 3];
    // The first write after the capture: the append copies the stream's
    // top level and its last block.
    let captured = live.clone();
    costs[0] = kept_by(|| {
        let fields: [(&[u8], &[u8]); 3] = [(b"name", b"user"), (b"age", b"1"), (b"city", b"paris")];
        live.deref_mut()
            .append(id(n + 1), &fields, NodeLimits::DEFAULT);
    });
    drop(captured);
    // A deletion in the middle: the tree copies its path to the block.
    let captured = live.clone();
    costs[1] = kept_by(|| assert!(live.deref_mut().delete(id(n / 2))));
    drop(captured);
    // A trim of the front block: the path to the first block.
    let captured = live.clone();
    costs[2] = kept_by(|| {
        live.deref_mut().trim(TrimBy::MaxLen(n - 5), false, 0);
    });
    drop(captured);
    costs
}

/// What copying the blocks' index whole costs at `blocks` blocks, as the
/// first write after a capture did when the index was a `BTreeMap` of
/// `Arc`s: the reference this test's bound must stay well under.
fn whole_index_copy(blocks: u64) -> usize {
    let index: BTreeMap<StreamId, Arc<Vec<u8>>> =
        (0..blocks).map(|i| (id(i), Arc::new(Vec::new()))).collect();
    let mut copy = None;
    let kept = kept_by(|| copy = Some(index.clone()));
    drop(copy);
    kept
}

#[test]
fn a_write_under_capture_copies_the_same_whatever_the_stream_length() {
    // A few blocks, then about 5,000 (100 entries a block).
    let small = copies_under_capture(300);
    let large = copies_under_capture(500_000);
    let whole = whole_index_copy(5_000);
    eprintln!("bytes kept (append, delete, trim): 300 entries {small:?}, 500,000 entries {large:?}; a whole index of 5,000 blocks {whole}");
    assert!(whole > 64 * 1024, "{whole}");
    for (what, (s, l)) in ["append", "delete", "trim"]
        .iter()
        .zip(small.iter().zip(large.iter()))
    {
        // One block (at most `stream-node-max-bytes`, 4 KiB) and a few
        // tree nodes of 16 entries: a map copied whole would be over
        // 100 KiB at 5,000 blocks.
        assert!(*l <= 16 * 1024, "{what}: {l} bytes kept at 500,000 entries");
        // The tree's depth grows as log16 of the blocks (two levels more,
        // a node of 16 keys each), and the larger stream's blocks hold
        // longer values; nothing grows with the number of blocks.
        assert!(
            *l <= *s + 4 * 1024,
            "{what}: {s} bytes kept at 300 entries, {l} at 500,000"
        );
    }
}
