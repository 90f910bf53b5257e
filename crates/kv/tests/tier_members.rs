//! Large members of hashes and lists on the PM tier (`keyspace/tier.rs`,
//! `tier_members.rs`): demotion moves only movable DRAM members, keeps
//! every member's bytes, stays within its byte budget and its scan bound,
//! reaches every member over repeated calls, leaves a collection a
//! snapshot shares alone, and promotion brings members back within its
//! allowance.

mod common;

use ferrite_kv::keyspace::tier::Demoted;
use ferrite_kv::keyspace::Keyspace;
use ferrite_kv::types::{HashValue, ListValue, Shared, Str, Value};

use common::members::{
    assert_sampler_offers, assert_snapshot_left_alone, demote_until_done, heap, keyspace_with,
    member, promote_twice, small_members_on_pm,
};

fn hash_of(n: usize) -> Value {
    let map: HashValue = (0..n)
        .map(|i| (format!("f{i}").into_bytes().into(), Str::new(&member(i))))
        .collect();
    Value::Hash(Shared::new(map))
}

fn list_of(n: usize) -> Value {
    let list: ListValue = (0..n).map(|i| Str::new(&member(i))).collect();
    Value::List(Shared::new(list))
}

/// (members on PM, members whose bytes differ from [`member`]).
fn census(ks: &mut Keyspace, key: &[u8]) -> (usize, usize) {
    let check = |i: usize, s: &Str| (usize::from(s.is_pm()), usize::from(**s != member(i)[..]));
    let sum = |a: (usize, usize), b: (usize, usize)| (a.0 + b.0, a.1 + b.1);
    match ks.get(0, key) {
        Some(Value::Hash(h)) => h
            .iter()
            .map(|(f, s)| {
                let i: usize = std::str::from_utf8(&f[1..]).unwrap().parse().unwrap();
                check(i, s)
            })
            .fold((0, 0), sum),
        Some(Value::List(l)) => l
            .iter()
            .enumerate()
            .map(|(i, s)| check(i, s))
            .fold((0, 0), sum),
        other => panic!("not a collection: {other:?}"),
    }
}

#[test]
fn demotion_moves_large_members_within_its_budget_and_keeps_their_bytes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let heap = heap(&dir);
    for (name, value) in [("h", hash_of(400)), ("l", list_of(400))] {
        let mut ks = keyspace_with(name, value);
        // A budget of 5 KiB moves five 1 KiB members, not more.
        let got = ks.demote(0, name.as_bytes(), &heap, 5 * 1024, 17);
        assert_eq!(
            got,
            Demoted::Moved {
                values: 5,
                bytes: 5 * 1024
            },
            "{name}"
        );
        assert_eq!(census(&mut ks, name.as_bytes()), (5, 0), "{name}");
        // Repeated calls from varying offsets reach all 200 large members,
        // never a small one, and then find nothing to move.
        demote_until_done(&mut ks, name.as_bytes(), &heap, 64 * 1024);
        assert_eq!(census(&mut ks, name.as_bytes()), (200, 0), "{name}");
        assert_eq!(small_members_on_pm(&mut ks, name.as_bytes()), 0, "{name}");
        assert_eq!(
            ks.demote(0, name.as_bytes(), &heap, 1 << 20, 3),
            Demoted::Skipped
        );
    }
}

#[test]
fn one_demotion_looks_at_a_bounded_number_of_members() {
    let dir = tempfile::tempdir().expect("tempdir");
    let heap = heap(&dir);
    let mut ks = keyspace_with("l", list_of(10_000));
    // An unlimited budget still stops at the scan bound: 1,024 members
    // looked at, half of them movable.
    let got = ks.demote(0, b"l", &heap, usize::MAX, 0);
    assert_eq!(
        got,
        Demoted::Moved {
            values: 512,
            bytes: 512 * 1024
        }
    );
    assert_eq!(census(&mut ks, b"l"), (512, 0));
}

#[test]
fn a_collection_a_snapshot_shares_is_left_alone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let heap = heap(&dir);
    for (name, value) in [("h", hash_of(50)), ("l", list_of(50))] {
        let mut ks = keyspace_with(name, value);
        let on_pm = |ks: &mut Keyspace| {
            let (pm, changed) = census(ks, name.as_bytes());
            assert_eq!(changed, 0, "{name}: bytes changed");
            pm
        };
        assert_snapshot_left_alone(&mut ks, name.as_bytes(), &heap, 25, on_pm);
    }
}

#[test]
fn the_sampler_offers_a_collection_with_movable_members() {
    let mut ks = keyspace_with("h", hash_of(64));
    assert_sampler_offers(&mut ks, b"h");
}

#[test]
fn promotion_brings_members_back_within_its_allowance() {
    let dir = tempfile::tempdir().expect("tempdir");
    let heap = heap(&dir);
    for (name, value) in [("h", hash_of(40)), ("l", list_of(40))] {
        let mut ks = keyspace_with(name, value);
        promote_twice(&mut ks, name.as_bytes(), &heap);
        assert_eq!(census(&mut ks, name.as_bytes()), (20 - 6, 0), "{name}");
    }
}
