//! The per-slot key index (`keyspace/slots.rs`) against a walk of the
//! keyspace: after any sequence of writes, deletes, expiries, flushes and
//! swaps, GETKEYSINSLOT's and COUNTKEYSINSLOT's source lists exactly the
//! keys of database 0 in each slot.

use std::collections::BTreeSet;

use ferrite_kv::cluster::key_slot;
use ferrite_kv::keyspace::{Keyspace, SEGMENTS_PER_DB};
use ferrite_kv::types::Value;
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Set(u8, u8),
    Remove(u8, u8),
    Expire(u8),
    AdvanceClock,
    Read(u8),
    Flush(u8),
    Swap,
    Lookup(u8),
}

fn key(n: u8) -> Vec<u8> {
    // Hash tags put several keys in one slot, as clients do.
    if n.is_multiple_of(3) {
        format!("{{tag{}}}:{n}", n % 4).into_bytes()
    } else {
        format!("key:{n}").into_bytes()
    }
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u8..2, 0u8..40).prop_map(|(db, k)| Op::Set(db, k)),
        2 => (0u8..2, 0u8..40).prop_map(|(db, k)| Op::Remove(db, k)),
        1 => (0u8..40).prop_map(Op::Expire),
        1 => Just(Op::AdvanceClock),
        1 => (0u8..40).prop_map(Op::Read),
        1 => (0u8..2).prop_map(Op::Flush),
        1 => Just(Op::Swap),
        2 => (0u8..40).prop_map(Op::Lookup),
    ]
}

/// The keys of database 0 in `slot`, by walking every segment.
fn walk(ks: &Keyspace, slot: usize) -> BTreeSet<Vec<u8>> {
    let mut out = BTreeSet::new();
    for segment in ks.db(0).segments().iter().take(SEGMENTS_PER_DB) {
        for k in segment.map.keys() {
            if usize::from(key_slot(k)) == slot {
                out.insert(k.to_vec());
            }
        }
    }
    out
}

fn check(ks: &mut Keyspace, slot: usize) -> Result<(), TestCaseError> {
    let expected = walk(ks, slot);
    let listed: BTreeSet<Vec<u8>> = ks
        .keys_in_slot(slot, usize::MAX)
        .iter()
        .map(|k| k.to_vec())
        .collect();
    prop_assert_eq!(&listed, &expected);
    prop_assert_eq!(ks.count_keys_in_slot(slot), expected.len());
    let limited = ks.keys_in_slot(slot, 1);
    prop_assert_eq!(limited.len(), expected.len().min(1));
    Ok(())
}

proptest! {
    #[test]
    fn the_index_lists_exactly_the_keys_of_each_slot(
        ops in proptest::collection::vec(op(), 1..120),
        enable_first in any::<bool>(),
    ) {
        let mut ks = Keyspace::new(2);
        ks.now_ms = 1_000;
        if enable_first {
            ks.enable_slot_index();
        }
        for op in ops {
            match op {
                Op::Set(db, k) => ks.set(usize::from(db), &key(k), Value::Str(b"v"[..].into()), false),
                Op::Remove(db, k) => {
                    ks.remove(usize::from(db), &key(k));
                }
                Op::Expire(k) => ks.set_expire(0, &key(k), ks.now_ms + 5),
                Op::AdvanceClock => ks.now_ms += 10,
                Op::Read(k) => {
                    ks.get(0, &key(k));
                }
                Op::Flush(db) => {
                    ks.flush_db(usize::from(db));
                }
                Op::Swap => ks.swap_db(0, 1),
                Op::Lookup(k) => check(&mut ks, usize::from(key_slot(&key(k))))?,
            }
        }
        for k in 0..40 {
            check(&mut ks, usize::from(key_slot(&key(k))))?;
        }
    }
}

#[test]
fn a_key_removed_by_active_expiry_leaves_its_slot() {
    let mut ks = Keyspace::new(1);
    ks.enable_slot_index();
    ks.now_ms = 1_000;
    ks.set(0, b"{a}x", Value::Str(b"1"[..].into()), false);
    ks.set(0, b"{a}y", Value::Str(b"1"[..].into()), false);
    ks.set_expire(0, b"{a}x", 1_001);
    let slot = usize::from(key_slot(b"a"));
    assert_eq!(ks.count_keys_in_slot(slot), 2);
    ks.now_ms = 2_000;
    ks.active_expire(usize::MAX);
    assert_eq!(ks.count_keys_in_slot(slot), 1);
    let left: Vec<Vec<u8>> = ks
        .keys_in_slot(slot, 10)
        .iter()
        .map(|k| k.to_vec())
        .collect();
    assert_eq!(left, vec![b"{a}y".to_vec()]);
}
