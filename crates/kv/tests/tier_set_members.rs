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

use common::members::{
    assert_sampler_offers, assert_snapshot_left_alone, demote_until_done, heap, keyspace_with,
    member, promote_twice, small_members_on_pm,
};

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
    let dir = tempfile::tempdir().expect("tempdir");
    let heap = heap(&dir);
    for (name, value) in [("s", set_of(400)), ("z", zset_of(400))] {
        let mut ks = keyspace_with(name, value);
        let got = ks.demote(0, name.as_bytes(), &heap, 5 * 1024, 17);
        assert_eq!(
            got,
            Demoted::Moved {
                values: 5,
                bytes: 5 * 1024
            },
            "{name}"
        );
        assert_eq!(check(&mut ks, name.as_bytes(), 400), 5, "{name}");
        demote_until_done(&mut ks, name.as_bytes(), &heap, 64 * 1024);
        assert_eq!(check(&mut ks, name.as_bytes(), 400), 200, "{name}");
        assert_eq!(small_members_on_pm(&mut ks, name.as_bytes()), 0);
        assert_eq!(heap.stats().values, 200, "{name}: no slot leaked");
        // One PM copy a member: the table and a sorted set's order share
        // it, so dropping the collection frees every slot.
        ks.remove(0, name.as_bytes());
        assert_eq!(heap.stats().values, 0, "{name}: slots freed");
    }
}

#[test]
fn one_demotion_looks_at_a_bounded_number_of_members() {
    let dir = tempfile::tempdir().expect("tempdir");
    let heap = heap(&dir);
    for (name, value) in [("s", set_of(6000)), ("z", zset_of(6000))] {
        let mut ks = keyspace_with(name, value);
        // An unlimited budget still stops at the scan bound: 1,024
        // members looked at, about half of them movable.
        let Demoted::Moved { values, bytes } = ks.demote(0, name.as_bytes(), &heap, usize::MAX, 0)
        else {
            panic!("{name}: nothing moved");
        };
        assert!((400..=624).contains(&values), "{name}: {values}");
        assert_eq!(bytes as u64, values * 1024);
        assert_eq!(check(&mut ks, name.as_bytes(), 6000) as u64, values);
    }
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
    let dir = tempfile::tempdir().expect("tempdir");
    let heap = heap(&dir);
    for (name, value) in [("s", set_of(50)), ("z", zset_of(50))] {
        let mut ks = keyspace_with(name, value);
        let on_pm = |ks: &mut Keyspace| check(ks, name.as_bytes(), 50);
        assert_snapshot_left_alone(&mut ks, name.as_bytes(), &heap, 25, on_pm);
    }
}

#[test]
fn the_sampler_offers_a_set_with_movable_members() {
    let mut ks = keyspace_with("z", zset_of(64));
    assert_sampler_offers(&mut ks, b"z");
}

#[test]
fn promotion_brings_members_back_within_its_allowance() {
    let dir = tempfile::tempdir().expect("tempdir");
    let heap = heap(&dir);
    for (name, value) in [("s", set_of(40)), ("z", zset_of(40))] {
        let mut ks = keyspace_with(name, value);
        promote_twice(&mut ks, name.as_bytes(), &heap);
        assert_eq!(check(&mut ks, name.as_bytes(), 40), 20 - 6, "{name}");
        assert_eq!(heap.stats().values, 20 - 6, "{name}: slots freed");
    }
}
