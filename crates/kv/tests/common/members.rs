//! The scaffold of the tests of collection members on the PM tier
//! (`tier_members.rs` for hashes and lists, `tier_set_members.rs` for sets
//! and sorted sets): the heap, the members (half of them large enough to
//! move), and the checks every kind of collection must pass the same way:
//! demotion converges and never moves a small member, the sampler offers
//! a collection with movable members, a collection a snapshot shares is
//! left alone, and promotion brings members back within its allowance.

use std::sync::Arc;

use ferrite_kv::keyspace::tier::Demoted;
use ferrite_kv::keyspace::Keyspace;
use ferrite_kv::types::{Str, Value};
use ferrite_pmem::SlabHeap;

/// Members of this size or more may move to PM; smaller ones never do.
const THRESHOLD: usize = 64;

pub fn heap(dir: &tempfile::TempDir) -> Arc<SlabHeap> {
    SlabHeap::create(dir.path().join("heap"), 64 << 20, None).expect("heap")
}

/// Member `i`: 1 KiB (movable) for odd `i`, 8 bytes (too small) for even;
/// its first 8 bytes are `i` in decimal, so no two members are equal.
pub fn member(i: usize) -> Vec<u8> {
    let len = if i % 2 == 1 { 1024 } else { 8 };
    let mut m = format!("{i:08}").into_bytes();
    m.extend((8..len).map(|k| b'a' + ((i * 7 + k) % 26) as u8));
    m
}

/// A keyspace holding `value` at `name` in database 0.
pub fn keyspace_with(name: &str, value: Value) -> Keyspace {
    let mut ks = Keyspace::new(16);
    ks.set(0, name.as_bytes(), value, false);
    ks
}

/// How many members of the collection at `key` are on PM although smaller
/// than the tier's threshold (a correct tier leaves this at 0).
pub fn small_members_on_pm(ks: &mut Keyspace, key: &[u8]) -> usize {
    let small_pm = |s: &Str| usize::from(s.is_pm() && s.len() < THRESHOLD);
    match ks.get(0, key) {
        Some(Value::Set(s)) => s.iter().map(small_pm).sum(),
        Some(Value::ZSet(z)) => z.members().map(small_pm).sum(),
        Some(Value::Hash(h)) => h.values().map(small_pm).sum(),
        Some(Value::List(l)) => l.iter().map(small_pm).sum(),
        _ => 0,
    }
}

/// Demotes from the collection at `key` with `budget` bytes a call, from
/// offsets that vary between calls, until nothing more moves; fails if
/// that takes 100 calls (demotion does not converge).
pub fn demote_until_done(ks: &mut Keyspace, key: &[u8], heap: &Arc<SlabHeap>, budget: usize) {
    let mut calls = 0;
    while let Demoted::Moved { .. } = ks.demote(0, key, heap, budget, calls * 131) {
        calls += 1;
        let name = String::from_utf8_lossy(key);
        assert!(calls < 100, "{name}: demotion does not converge");
    }
}

/// With 2,000 keys too small to move beside it, the sampler offers the
/// collection at `key` (the only one with movable members). Probes land
/// in random segments, most of them empty, so the probe budget is large;
/// each probe is constant time.
pub fn assert_sampler_offers(ks: &mut Keyspace, key: &[u8]) {
    for i in 0..2000 {
        let small = format!("small:{i}");
        ks.set(0, small.as_bytes(), Value::Str(Str::new(b"x")), false);
    }
    let mut n = 0u64;
    let random = move |bound: usize| {
        n = n
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((n >> 33) as usize) % bound.max(1)
    };
    let (db, offered) = ks
        .demotion_candidate(1, 1_000_000, random)
        .expect("the collection is offered");
    assert_eq!((db, &offered[..]), (0, key));
}

/// A collection a snapshot shares is skipped, with none of its members on
/// PM (`on_pm` counts them); once the snapshot is gone, its `movable`
/// large members move.
pub fn assert_snapshot_left_alone(
    ks: &mut Keyspace,
    key: &[u8],
    heap: &Arc<SlabHeap>,
    movable: u64,
    on_pm: impl Fn(&mut Keyspace) -> usize,
) {
    let snapshot = ks.get(0, key).cloned().expect("value");
    assert_eq!(ks.demote(0, key, heap, 1 << 20, 0), Demoted::Skipped);
    assert_eq!(on_pm(ks), 0);
    drop(snapshot);
    let moved = ks.demote(0, key, heap, 1 << 20, 0);
    assert!(
        matches!(moved, Demoted::Moved { values, .. } if values == movable),
        "{moved:?}"
    );
}

/// Demotes the 20 large members of the 40-member collection at `key`, then
/// reads it twice, each time with an allowance of three members' bytes:
/// six members come back to DRAM.
pub fn promote_twice(ks: &mut Keyspace, key: &[u8], heap: &Arc<SlabHeap>) {
    assert!(matches!(
        ks.demote(0, key, heap, 1 << 20, 0),
        Demoted::Moved { values: 20, .. }
    ));
    for _ in 0..2 {
        ks.promotion.allowance = 3 * 1024 + 100;
        let _ = ks.get(0, key);
    }
    assert_eq!(ks.promotion.promotions, 3 + 3);
}
