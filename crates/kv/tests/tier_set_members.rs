//! Large members of sets and sorted sets on the PM tier
//! (`keyspace/tier_members.rs`): a demotion puts the PM form of a member
//! in place of its DRAM form in the set's table (and a sorted set's score
//! table and order), so lookups by bytes, scores, ranks and the order are
//! unchanged; it keeps within its byte budget and scan bound, never moves
//! a small member, leaves a collection a snapshot shares alone, and
//! promotion brings members back within its allowance.

mod common;

use ferrite_kv::keyspace::tier::Demoted;
use ferrite_kv::keyspace::Keyspace;
use ferrite_kv::types::{SetValue, Shared, Str, Value, ZSet};

use common::members::{heap, member, Family};

fn set_of(n: usize) -> Value {
    let set: SetValue = (0..n).map(|i| Str::new(&member(i))).collect();
    Value::Set(Shared::new(set))
}

/// A sorted set whose scores repeat (`i % 3`), so the order also depends
/// on the members' bytes.
fn zset_of(n: usize) -> Value {
    let mut z = ZSet::default();
    for i in 0..n {
        z.insert(&member(i), (i % 3) as f64);
    }
    Value::ZSet(Shared::new(z))
}

const SETS: Family = Family {
    kinds: [("s", set_of), ("z", zset_of)],
    check,
};

/// The members of the set or sorted set at `key` on PM, after checking
/// that every member `0..n` is found by its bytes (with its score, for a
/// sorted set), that nothing else is there, and that a sorted set's order
/// is by (score, bytes).
fn check(ks: &mut Keyspace, key: &[u8], n: usize) -> usize {
    match ks.get(0, key) {
        Some(Value::Set(s)) => {
            assert_eq!(s.len(), n);
            for i in 0..n {
                assert!(s.contains(&member(i)[..]), "member {i} not found");
            }
            s.iter().filter(|m| m.is_pm()).count()
        }
        Some(Value::ZSet(z)) => {
            assert_eq!(z.len(), n);
            for i in 0..n {
                assert_eq!(z.score(&member(i)), Some((i % 3) as f64), "{i}");
            }
            let mut expected: Vec<(u64, Vec<u8>)> =
                (0..n).map(|i| ((i % 3) as u64, member(i))).collect();
            expected.sort();
            let order: Vec<(u64, Vec<u8>)> =
                z.iter().map(|(m, s)| (s as u64, m.to_vec())).collect();
            assert!(order == expected, "the order changed");
            for (rank, (_, m)) in expected.iter().enumerate() {
                assert_eq!(z.rank(m), Some(rank));
            }
            z.members().filter(|m| m.is_pm()).count()
        }
        other => panic!("not a set: {other:?}"),
    }
}

#[test]
fn demotion_moves_large_members_within_its_budget_and_keeps_lookups() {
    SETS.demotion_keeps_its_budget_and_every_member();
}

#[test]
fn one_demotion_looks_at_a_bounded_number_of_members() {
    // Members sit in hash order: about half of those looked at are large.
    SETS.one_demotion_looks_at_a_bounded_number(6000, |_| 400..=624);
}

#[test]
fn changes_to_pm_members_behave_as_in_dram() {
    let dir = tempfile::tempdir().expect("tempdir");
    let heap = heap(&dir);
    let mut ks = Keyspace::new(16);
    ks.set(0, b"z", zset_of(100), false);
    ks.set(0, b"s", set_of(100), false);
    for key in [&b"z"[..], b"s"] {
        while let Demoted::Moved { .. } = ks.demote(0, key, &heap, 1 << 20, 0) {}
    }
    assert_eq!(heap.stats().values, 100);
    let Some(Value::ZSet(z)) = ks.get_mut(0, b"z") else {
        panic!("zset");
    };
    // A new score keeps the member's PM form; removal frees its slot.
    assert!(!z.insert(&member(1), 7.0));
    assert!(z.members().any(|m| m.is_pm() && **m == member(1)[..]));
    assert_eq!(z.rank(&member(1)), Some(99));
    assert!(z.remove(&member(3)));
    assert_eq!(z.score(&member(3)), None);
    let (top, score) = z.pop(true).expect("a member");
    assert_eq!((top, score), (member(1)[..].into(), 7.0));
    let Some(Value::Set(s)) = ks.get_mut(0, b"s") else {
        panic!("set");
    };
    assert!(s.remove(&member(5)[..]));
    assert!(!s.insert(Str::new(&member(7))), "already there on PM");
    assert_eq!(heap.stats().values, 100 - 3);
}

#[test]
fn a_collection_a_snapshot_shares_is_left_alone() {
    SETS.a_snapshot_keeps_members_in_dram();
}

#[test]
fn the_sampler_offers_a_set_with_movable_members() {
    SETS.the_sampler_offers_movable_members();
}

#[test]
fn promotion_brings_members_back_within_its_allowance() {
    SETS.promotion_keeps_its_allowance();
}
