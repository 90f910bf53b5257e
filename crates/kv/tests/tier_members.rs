//! Large members of hashes and lists on the PM tier (`keyspace/tier.rs`,
//! `tier_members.rs`): demotion moves only movable DRAM members, keeps
//! every member's bytes, stays within its byte budget and its scan bound,
//! reaches every member over repeated calls, leaves a collection a
//! snapshot shares alone, and promotion brings members back within its
//! allowance.

use std::sync::Arc;

use ferrite_kv::keyspace::tier::Demoted;
use ferrite_kv::keyspace::Keyspace;
use ferrite_kv::types::{HashValue, ListValue, Shared, Str, Value};
use ferrite_pmem::SlabHeap;

fn heap(dir: &tempfile::TempDir) -> Arc<SlabHeap> {
    SlabHeap::create(dir.path().join("heap"), 64 << 20, None).expect("heap")
}

/// Member `i`: 1 KiB (movable) for odd `i`, 8 bytes (too small) for even.
fn member(i: usize) -> Vec<u8> {
    let len = if i % 2 == 1 { 1024 } else { 8 };
    (0..len).map(|k| b'a' + ((i * 7 + k) % 26) as u8).collect()
}

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

fn small_members_on_pm(ks: &mut Keyspace, key: &[u8]) -> usize {
    let small_pm = |s: &Str| usize::from(s.is_pm() && s.len() < 64);
    match ks.get(0, key) {
        Some(Value::Hash(h)) => h.values().map(small_pm).sum(),
        Some(Value::List(l)) => l.iter().map(small_pm).sum(),
        _ => 0,
    }
}

#[test]
fn demotion_moves_large_members_within_its_budget_and_keeps_their_bytes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let heap = heap(&dir);
    for (name, value) in [("h", hash_of(400)), ("l", list_of(400))] {
        let mut ks = Keyspace::new(16);
        ks.set(0, name.as_bytes(), value, false);
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
        let mut calls = 0;
        while let Demoted::Moved { .. } =
            ks.demote(0, name.as_bytes(), &heap, 64 * 1024, calls * 131)
        {
            calls += 1;
            assert!(calls < 100, "{name}: demotion does not converge");
        }
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
    let mut ks = Keyspace::new(16);
    ks.set(0, b"l", list_of(10_000), false);
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
    let mut ks = Keyspace::new(16);
    ks.set(0, b"h", hash_of(50), false);
    let snapshot = ks.get(0, b"h").cloned().expect("value");
    assert_eq!(ks.demote(0, b"h", &heap, 1 << 20, 0), Demoted::Skipped);
    assert_eq!(census(&mut ks, b"h"), (0, 0));
    drop(snapshot);
    assert!(matches!(
        ks.demote(0, b"h", &heap, 1 << 20, 0),
        Demoted::Moved { values: 25, .. }
    ));
}

#[test]
fn the_sampler_offers_a_collection_with_movable_members() {
    let mut ks = Keyspace::new(16);
    ks.set(0, b"h", hash_of(64), false);
    // Keys whose values are too small to move: the hash is the only
    // candidate. Probes land in random segments, most of them empty, so
    // the probe budget is large; each probe is constant time.
    for i in 0..2000 {
        ks.set(
            0,
            format!("small:{i}").as_bytes(),
            Value::Str(Str::new(b"x")),
            false,
        );
    }
    let mut n = 0u64;
    let random = move |bound: usize| {
        n = n
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((n >> 33) as usize) % bound.max(1)
    };
    let (db, key) = ks
        .demotion_candidate(1, 1_000_000, random)
        .expect("the hash is offered");
    assert_eq!((db, &key[..]), (0, &b"h"[..]));
}

#[test]
fn promotion_brings_members_back_within_its_allowance() {
    let dir = tempfile::tempdir().expect("tempdir");
    let heap = heap(&dir);
    let mut ks = Keyspace::new(16);
    ks.set(0, b"l", list_of(40), false);
    assert!(matches!(
        ks.demote(0, b"l", &heap, 1 << 20, 0),
        Demoted::Moved { values: 20, .. }
    ));
    // Each read of the recently written key promotes three members'
    // worth of allowance.
    ks.promotion.allowance = 3 * 1024 + 100;
    let _ = ks.get(0, b"l");
    ks.promotion.allowance = 3 * 1024 + 100;
    let _ = ks.get(0, b"l");
    assert_eq!(ks.promotion.promotions, 3 + 3);
    assert_eq!(census(&mut ks, b"l"), (20 - 6, 0));
}
