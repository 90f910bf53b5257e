//! Rule C1 for scripts (`Keyspace::capture_all_before`): a script may
//! touch any segment, so before it runs during a rewrite every segment is
//! captured if some are and some are not; and nothing is captured while
//! none is, or once all are. Each worker still receives its whole range,
//! in order, once.

use ferrite_kv::keyspace::{segment_of, Keyspace, SegmentQueue, SEGMENTS_PER_DB};
use ferrite_kv::types::Value;

const DATABASES: usize = 2;

fn keyspace(keys: usize) -> Keyspace {
    let mut ks = Keyspace::new(DATABASES);
    for i in 0..keys {
        let key = format!("k{i}");
        ks.set(0, key.as_bytes(), Value::Str(b"v"[..].into()), false);
    }
    ks
}

/// The global segments of database 0 that hold keys, in order.
fn non_empty_segments(keys: usize) -> Vec<u32> {
    let mut segments: Vec<u32> = (0..keys)
        .map(|i| segment_of(format!("k{i}").as_bytes()) as u32)
        .collect();
    segments.sort_unstable();
    segments.dedup();
    segments
}

#[test]
fn nothing_is_captured_while_no_segment_is() {
    let mut ks = keyspace(1_000);
    let _parts = ks.begin_rewrite(2, 7, None);
    ks.capture_all_before();
    assert_eq!(ks.captured_early(), 0);
    // Again: still nothing to keep on one side of.
    ks.capture_all_before();
    assert_eq!(ks.captured_early(), 0);
    assert!(ks.capturing());
}

#[test]
fn a_partly_captured_keyspace_is_captured_whole_once() {
    let keys = 5_000;
    let mut ks = keyspace(keys);
    let parts = ks.begin_rewrite(2, 7, None);
    // Each of the two workers' ranges gets its first three segments.
    ks.capture_segments(3);
    ks.capture_all_before();
    let total = (DATABASES * SEGMENTS_PER_DB) as u64;
    assert_eq!(ks.captured_early(), total - 6);
    // Everything is captured now: a second script captures nothing more.
    ks.capture_all_before();
    assert_eq!(ks.captured_early(), total - 6);
    // The workers still get every non-empty segment, in order, once.
    ks.capture_step(true);
    let mut received = Vec::new();
    for part in &parts {
        let mut queue = SegmentQueue::new();
        while part.feed.take(&mut queue) {}
        received.extend(
            queue
                .iter()
                .map(|(db, seg, _)| *db as u32 * SEGMENTS_PER_DB as u32 + *seg as u32),
        );
    }
    assert_eq!(received, non_empty_segments(keys));
    assert!(!ks.capturing());
}

#[test]
fn outside_a_rewrite_nothing_happens() {
    let mut ks = keyspace(100);
    ks.capture_all_before();
    assert_eq!(ks.captured_early(), 0);
    assert!(!ks.capturing());
}
