//! Large members of hashes and lists on the PM tier (`keyspace/tier.rs`,
//! `tier_members.rs`): demotion moves only movable DRAM members, keeps
//! every member's bytes, stays within its byte budget and its scan bound,
//! reaches every member over repeated calls, leaves a collection a
//! snapshot shares alone, and promotion brings members back within its
//! allowance.

mod common;

use ferrite_kv::keyspace::Keyspace;
use ferrite_kv::types::{HashValue, ListValue, Shared, Str, Value};

use common::members::{member, Family};

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

const HASHES_AND_LISTS: Family = Family {
    kinds: [("h", hash_of), ("l", list_of)],
    check,
};

/// Checks that the hash or list at `key` holds exactly members `0..n`
/// with their bytes (a hash's field `f{i}` holding member `i`, a list in
/// order), and returns how many are on PM.
fn check(ks: &mut Keyspace, key: &[u8], n: usize) -> usize {
    let on_pm = |i: usize, s: &Str| {
        assert!(**s == member(i)[..], "member {i}: bytes changed");
        usize::from(s.is_pm())
    };
    match ks.get(0, key) {
        Some(Value::Hash(h)) => {
            assert_eq!(h.len(), n);
            (0..n)
                .map(|i| {
                    let field = format!("f{i}");
                    on_pm(i, h.get(field.as_bytes()).expect("field"))
                })
                .sum()
        }
        Some(Value::List(l)) => {
            assert_eq!(l.len(), n);
            l.iter().enumerate().map(|(i, s)| on_pm(i, s)).sum()
        }
        other => panic!("not a collection: {other:?}"),
    }
}

#[test]
fn demotion_moves_large_members_within_its_budget_and_keeps_their_bytes() {
    HASHES_AND_LISTS.demotion_keeps_its_budget_and_every_member();
}

#[test]
fn one_demotion_looks_at_a_bounded_number_of_members() {
    // A list's members are looked at in order, exactly half of them
    // large; a hash's in hash order, about half.
    HASHES_AND_LISTS.one_demotion_looks_at_a_bounded_number(10_000, |name| match name {
        "l" => 512..=512,
        _ => 400..=624,
    });
}

#[test]
fn a_collection_a_snapshot_shares_is_left_alone() {
    HASHES_AND_LISTS.a_snapshot_keeps_members_in_dram();
}

#[test]
fn the_sampler_offers_a_collection_with_movable_members() {
    HASHES_AND_LISTS.the_sampler_offers_movable_members();
}

#[test]
fn promotion_brings_members_back_within_its_allowance() {
    HASHES_AND_LISTS.promotion_keeps_its_allowance();
}
