//! The scaffold of the tests of collection members on the PM tier
//! (`tier_members.rs` for hashes and lists, `tier_set_members.rs` for sets
//! and sorted sets): the heap, the members (half of them large enough to
//! move), and, as methods of a [`Family`] of two collection kinds, the
//! scenarios every kind must pass the same way: demotion keeps its budget,
//! converges, never moves a small member and leaks no slot; one demotion
//! looks at a bounded number of members; a collection a snapshot shares
//! is left alone; promotion brings members back within its allowance; and
//! the sampler offers a collection with movable members.

use std::ops::RangeInclusive;
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

/// A kind of collection: its key, and how to make one of members `0..n`.
pub type Kind = (&'static str, fn(usize) -> Value);

/// Two kinds of collection the tier handles alike, and their check.
pub struct Family {
    pub kinds: [Kind; 2],
    /// Checks that the collection at the key holds exactly members `0..n`
    /// with their bytes (and whatever else the kind keeps: scores, the
    /// order), and returns how many of them are on PM.
    pub check: fn(&mut Keyspace, &[u8], usize) -> usize,
}

impl Family {
    /// Runs `scenario` on each kind: its name, a keyspace holding its
    /// collection of `n` members, and a fresh heap.
    fn each(&self, n: usize, scenario: impl Fn(&str, &mut Keyspace, &Arc<SlabHeap>)) {
        for (name, make) in self.kinds {
            let dir = tempfile::tempdir().expect("tempdir");
            let heap = heap(&dir);
            scenario(name, &mut keyspace_with(name, make(n)), &heap);
        }
    }

    /// A budget of 5 KiB moves five 1 KiB members, not more; repeated calls
    /// from varying offsets reach all 200 large members of 400, never a
    /// small one, and then find nothing to move; one PM copy a member, so
    /// dropping the collection frees every slot.
    pub fn demotion_keeps_its_budget_and_every_member(&self) {
        self.each(400, |name, ks, heap| {
            let key = name.as_bytes();
            let got = ks.demote(0, key, heap, 5 * 1024, 17);
            let five = Demoted::Moved {
                values: 5,
                bytes: 5 * 1024,
            };
            assert_eq!(got, five, "{name}");
            assert_eq!((self.check)(ks, key, 400), 5, "{name}");
            demote_until_done(ks, key, heap, 64 * 1024);
            assert_eq!((self.check)(ks, key, 400), 200, "{name}");
            assert_eq!(small_members_on_pm(ks, key), 0, "{name}");
            let again = ks.demote(0, key, heap, 1 << 20, 3);
            assert_eq!(again, Demoted::Skipped, "{name}");
            assert_eq!(heap.stats().values, 200, "{name}: no slot leaked");
            ks.remove(0, key);
            assert_eq!(heap.stats().values, 0, "{name}: slots freed");
        });
    }

    /// An unlimited budget still stops at the scan bound of 1,024 members
    /// looked at, about half of them movable: `moved(name)` is how many
    /// may move from kind `name`'s collection of `n`.
    pub fn one_demotion_looks_at_a_bounded_number(
        &self,
        n: usize,
        moved: fn(&str) -> RangeInclusive<u64>,
    ) {
        self.each(n, |name, ks, heap| {
            let key = name.as_bytes();
            let Demoted::Moved { values, bytes } = ks.demote(0, key, heap, usize::MAX, 0) else {
                panic!("{name}: nothing moved");
            };
            assert!(moved(name).contains(&values), "{name}: {values}");
            assert_eq!(bytes as u64, values * 1024, "{name}");
            assert_eq!((self.check)(ks, key, n) as u64, values, "{name}");
        });
    }

    /// A collection a snapshot shares is skipped, none of its members on
    /// PM; once the snapshot is gone, its 25 large members of 50 move.
    pub fn a_snapshot_keeps_members_in_dram(&self) {
        self.each(50, |name, ks, heap| {
            let key = name.as_bytes();
            let snapshot = ks.get(0, key).cloned().expect("value");
            assert_eq!(ks.demote(0, key, heap, 1 << 20, 0), Demoted::Skipped);
            assert_eq!((self.check)(ks, key, 50), 0, "{name}");
            drop(snapshot);
            let moved = ks.demote(0, key, heap, 1 << 20, 0);
            assert!(
                matches!(moved, Demoted::Moved { values: 25, .. }),
                "{name}: {moved:?}"
            );
        });
    }

    /// With the 20 large members of 40 on PM, two reads of the recently
    /// written key, each with an allowance of three members' bytes, bring
    /// six back to DRAM and free their slots.
    pub fn promotion_keeps_its_allowance(&self) {
        self.each(40, |name, ks, heap| {
            let key = name.as_bytes();
            let moved = ks.demote(0, key, heap, 1 << 20, 0);
            assert!(
                matches!(moved, Demoted::Moved { values: 20, .. }),
                "{name}: {moved:?}"
            );
            for _ in 0..2 {
                ks.promotion.allowance = 3 * 1024 + 100;
                let _ = ks.get(0, key);
            }
            assert_eq!(ks.promotion.promotions, 3 + 3, "{name}");
            assert_eq!((self.check)(ks, key, 40), 20 - 6, "{name}");
            assert_eq!(heap.stats().values, 20 - 6, "{name}: slots freed");
        });
    }

    /// With 2,000 keys too small to move beside it, the sampler offers
    /// each kind's collection of 64 (the only one with movable members).
    pub fn the_sampler_offers_movable_members(&self) {
        self.each(64, |name, ks, _| assert_sampler_offers(ks, name.as_bytes()));
    }
}
