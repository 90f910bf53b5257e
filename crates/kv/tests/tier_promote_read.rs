//! Promotion on reads (`keyspace/tier.rs`, `promote_on_read`), done by
//! the read's own search of the map: a value on PM is brought back to
//! DRAM only when its key is read again while recent and the command's
//! allowance covers it; a single read after a long idle leaves it on PM;
//! a segment a rewrite snapshot shares is left alone; and whatever moves,
//! every read returns the bytes last written (checked against a model).

use std::collections::HashMap;
use std::sync::Arc;

use ferrite_kv::keyspace::tier::Demoted;
use ferrite_kv::keyspace::Keyspace;
use ferrite_kv::types::{Str, Value};
use ferrite_pmem::SlabHeap;
use proptest::prelude::*;

fn key(i: usize) -> Vec<u8> {
    format!("key:{i:04}").into_bytes()
}

fn value(byte: u8, len: usize) -> Value {
    let bytes: Vec<u8> = (0..len).map(|i| byte.wrapping_add(i as u8)).collect();
    Value::Str(Str::new(&bytes))
}

fn heap(dir: &tempfile::TempDir) -> Arc<SlabHeap> {
    SlabHeap::create(dir.path().join("heap"), 64 << 20, None).expect("heap")
}

/// The bytes at `key` and whether they are on PM, read without touching
/// the clock or promoting.
fn peek(ks: &mut Keyspace, k: &[u8]) -> Option<(Vec<u8>, bool)> {
    match ks.peek(0, k) {
        Some(Value::Str(s)) => Some((s.to_vec(), s.is_pm())),
        _ => None,
    }
}

/// A keyspace holding `key(0)` (1 KiB) on PM, idle for `idle_s` seconds.
fn one_on_pm(heap: &Arc<SlabHeap>, idle_s: u64) -> Keyspace {
    let mut ks = Keyspace::new(16);
    ks.now_ms = 10_000_000;
    ks.set(0, &key(0), value(3, 1024), false);
    assert!(matches!(
        ks.demote(0, &key(0), heap, 1 << 20, 0),
        Demoted::Moved { values: 1, .. }
    ));
    ks.set_access(0, &key(0), Some(idle_s), None);
    ks
}

#[test]
fn one_read_after_an_idle_leaves_the_value_and_a_second_promotes_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let heap = heap(&dir);
    let mut ks = one_on_pm(&heap, 60);
    let want = match value(3, 1024) {
        Value::Str(s) => s.to_vec(),
        _ => unreachable!(),
    };
    ks.promotion.allowance = 16 << 10;
    // (The reads' results are checked in place: a clone of a PM value
    // would hold its slot.)
    let first = ks.get(0, &key(0));
    assert!(matches!(first, Some(Value::Str(s)) if s.is_pm() && s[..] == want[..]));
    assert_eq!(ks.promotion.promotions, 0, "a cold value read once stays");
    assert_eq!(peek(&mut ks, &key(0)), Some((want.clone(), true)));
    // The first read made the clock recent: the second promotes, and the
    // read returns the DRAM copy.
    let second = ks.get(0, &key(0));
    assert!(matches!(second, Some(Value::Str(s)) if !s.is_pm() && s[..] == want[..]));
    assert_eq!(ks.promotion.promotions, 1);
    assert_eq!(ks.promotion.allowance, (16 << 10) - 1024);
    assert_eq!(heap.stats().values, 0, "the slot is freed");
}

#[test]
fn nothing_moves_without_allowance_or_past_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let heap = heap(&dir);
    let mut ks = one_on_pm(&heap, 0);
    ks.promotion.allowance = 0;
    for _ in 0..3 {
        let _ = ks.get(0, &key(0));
    }
    assert_eq!(peek(&mut ks, &key(0)).map(|p| p.1), Some(true));
    // An allowance smaller than the value does not cover it either.
    ks.promotion.allowance = 1000;
    let _ = ks.get(0, &key(0));
    assert_eq!(peek(&mut ks, &key(0)).map(|p| p.1), Some(true));
    assert_eq!(ks.promotion.allowance, 1000);
    ks.promotion.allowance = 1024;
    let _ = ks.get(0, &key(0));
    assert_eq!(peek(&mut ks, &key(0)).map(|p| p.1), Some(false));
    assert_eq!(ks.promotion.allowance, 0);
}

#[test]
fn a_segment_a_snapshot_shares_is_left_alone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let heap = heap(&dir);
    let mut ks = one_on_pm(&heap, 0);
    let snapshot = ks.snapshot(1);
    let clock = ks.access_clock(0, &key(0));
    ks.promotion.allowance = 16 << 10;
    for _ in 0..3 {
        assert!(matches!(ks.get(0, &key(0)), Some(Value::Str(s)) if s.is_pm()));
    }
    assert_eq!(ks.promotion.promotions, 0);
    assert_eq!(ks.access_clock(0, &key(0)), clock, "the clock stays too");
    drop(snapshot);
}

#[test]
fn under_lfu_a_counter_above_a_new_keys_promotes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let heap = heap(&dir);
    let mut ks = one_on_pm(&heap, 0);
    ks.access.lfu = true;
    ks.promotion.allowance = 16 << 10;
    ks.set_access(0, &key(0), None, Some(5));
    let _ = ks.get(0, &key(0));
    assert_eq!(ks.promotion.promotions, 0, "a new key's counter is not hot");
    ks.set_access(0, &key(0), None, Some(40));
    let _ = ks.get(0, &key(0));
    assert_eq!(ks.promotion.promotions, 1);
    assert_eq!(peek(&mut ks, &key(0)).map(|p| p.1), Some(false));
}

#[derive(Clone, Debug)]
enum Op {
    Set(usize, u8, usize),
    Get(usize),
    Demote(usize),
    Allow(usize),
    Idle(usize, u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..16usize, any::<u8>(), 0..2048usize).prop_map(|(k, b, n)| Op::Set(k, b, n)),
        (0..16usize).prop_map(Op::Get),
        (0..16usize).prop_map(Op::Demote),
        (0..4096usize).prop_map(Op::Allow),
        (0..16usize, 0..5u64).prop_map(|(k, s)| Op::Idle(k, s)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Whatever mix of writes, demotions, reads (and so promotions) and
    /// allowances runs, every read returns the bytes last written, and
    /// the heap holds exactly the values the keyspace says are on PM.
    #[test]
    fn reads_return_what_was_written_wherever_it_lives(ops in prop::collection::vec(op(), 1..200)) {
        let dir = tempfile::tempdir().expect("tempdir");
        let heap = heap(&dir);
        let mut ks = Keyspace::new(16);
        ks.now_ms = 10_000_000;
        let mut model: HashMap<usize, Vec<u8>> = HashMap::new();
        for op in ops {
            match op {
                Op::Set(k, b, n) => {
                    let v = value(b, n);
                    if let Value::Str(s) = &v {
                        model.insert(k, s.to_vec());
                    }
                    ks.set(0, &key(k), v, false);
                }
                Op::Get(k) => {
                    let got = match ks.get(0, &key(k)) {
                        Some(Value::Str(s)) => Some(s.to_vec()),
                        _ => None,
                    };
                    prop_assert_eq!(got.as_ref(), model.get(&k));
                }
                Op::Demote(k) => {
                    let _ = ks.demote(0, &key(k), &heap, 1 << 20, 0);
                }
                Op::Allow(n) => ks.promotion.allowance = n,
                Op::Idle(k, s) => ks.set_access(0, &key(k), Some(s), None),
            }
        }
        let mut on_pm = 0;
        for (k, want) in &model {
            let (bytes, pm) = peek(&mut ks, &key(*k)).expect("every key written is there");
            prop_assert_eq!(&bytes, want);
            on_pm += u64::from(pm);
        }
        prop_assert_eq!(heap.stats().values, on_pm);
    }
}
