//! Demotion's second source of candidates (`keyspace/tier.rs`,
//! `Written`): the keys written since demotion last looked, oldest first.
//! When DRAM values are too rare among the keys for random probes to find
//! them (a small DRAM share), the values writes just added are still
//! found, oldest first; keys whose values are gone, small or on PM are
//! passed over; nothing is noted before the tier starts it.

use std::sync::Arc;

use ferrite_kv::keyspace::tier::{Demoted, WRITTEN_MAX};
use ferrite_kv::keyspace::Keyspace;
use ferrite_kv::types::{Str, Value};
use ferrite_pmem::SlabHeap;

fn key(i: usize) -> Vec<u8> {
    format!("key:{i:08}").into_bytes()
}

fn big(byte: u8) -> Value {
    Value::Str(Str::new(&[byte; 1024]))
}

fn heap(dir: &tempfile::TempDir) -> Arc<SlabHeap> {
    SlabHeap::create(dir.path().join("heap"), 64 << 20, None).expect("heap")
}

fn on_pm(ks: &mut Keyspace, i: usize) -> bool {
    matches!(ks.get(0, &key(i)), Some(Value::Str(s)) if s.is_pm())
}

#[test]
fn nothing_is_noted_until_the_tier_starts_it() {
    let mut ks = Keyspace::new(16);
    ks.set(0, &key(0), big(b'a'), false);
    assert!(ks.written.is_empty());
    ks.written.start();
    ks.set(0, &key(1), big(b'b'), false);
    let _ = ks.get_mut(0, &key(0));
    assert_eq!(ks.written.len(), 2, "a SET and a change are writes");
    let _ = ks.get(0, &key(1));
    assert_eq!(ks.written.len(), 2, "a read is not");
}

#[test]
fn the_values_writes_added_are_found_where_probes_miss_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let heap = heap(&dir);
    let mut ks = Keyspace::new(16);
    // 20,000 values on PM, as at a small DRAM share.
    for i in 0..20_000 {
        ks.set(0, &key(i), big(b'p'), false);
        assert!(matches!(
            ks.demote(0, &key(i), &heap, 1 << 20, 0),
            Demoted::Moved { .. }
        ));
    }
    ks.written.start();
    // Writes add 10 DRAM values: one key in 2,000.
    for i in 0..10 {
        ks.set(0, &key(i * 1000), big(b'w'), false);
    }
    // A tiny sample rarely finds one...
    let mut seed = 7u64;
    let random = |n: usize| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((seed >> 33) as usize) % n.max(1)
    };
    assert!(ks.demotion_candidate(1, 16, random).is_none());
    // ...the written keys give all of them, oldest first.
    for i in 0..10 {
        let got = ks.demote_written(&heap, 1 << 20, 0);
        assert_eq!(
            got,
            Demoted::Moved {
                values: 1,
                bytes: 1024
            },
            "{i}"
        );
        assert!(on_pm(&mut ks, i * 1000), "{i}: moved in the order written");
        assert!(
            i == 9 || !on_pm(&mut ks, (i + 1) * 1000),
            "{i}: one at a time"
        );
    }
    assert_eq!(ks.demote_written(&heap, 1 << 20, 0), Demoted::Skipped);
    assert!(ks.written.is_empty());
}

#[test]
fn gone_small_and_pm_values_are_passed_over() {
    let dir = tempfile::tempdir().expect("tempdir");
    let heap = heap(&dir);
    let mut ks = Keyspace::new(16);
    ks.written.start();
    ks.set(0, &key(0), big(b'a'), false);
    ks.set(0, &key(1), Value::Str(Str::new(b"small")), false);
    ks.set(0, &key(2), big(b'c'), false);
    let _ = ks.remove(0, &key(0));
    let _ = ks.demote(0, &key(2), &heap, 1 << 20, 0);
    ks.set(0, &key(3), big(b'd'), false);
    let got = ks.demote_written(&heap, 1 << 20, 0);
    assert_eq!(
        got,
        Demoted::Moved {
            values: 1,
            bytes: 1024
        }
    );
    assert!(on_pm(&mut ks, 3));
    assert!(ks.written.is_empty(), "the keys before it were dropped");
}

#[test]
fn only_the_latest_writes_are_kept() {
    let mut ks = Keyspace::new(16);
    ks.written.start();
    for i in 0..WRITTEN_MAX + 100 {
        ks.set(0, &key(i % 50), big(b'x'), false);
    }
    assert_eq!(ks.written.len(), WRITTEN_MAX);
}
