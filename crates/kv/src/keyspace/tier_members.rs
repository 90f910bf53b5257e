//! The PM tier's moves inside hashes and lists (`docs/tier.md`, "Members
//! of collections"): a hash's field values and a list's elements are
//! [`Str`]s, so a large one moves to the PM heap exactly as a string value
//! does, and every command reads it through the same accessor.
//!
//! A collection can hold millions of members, so no move walks all of it:
//! the sampler looks at [`PROBE`] members from a random offset, and one
//! demotion or promotion looks at most at [`SCAN`] members, wrapping
//! around the end, and stops at its byte budget. A large collection is
//! thus moved over several commands, each paying a bounded cost, and the
//! random offsets reach every member over time.
//!
//! A set's and a sorted set's members are `Str`s too, hashed, compared
//! and ordered by content, so a large member moves as well; since those
//! types find members by their bytes, a move puts the PM form in place of
//! the DRAM one in the table (and a sorted set's order) rather than
//! changing it in place.
//!
//! A collection a rewrite snapshot still shares (its `Arc` has another
//! owner) is left alone: moving its members would copy it.

use std::sync::Arc;

use ferrite_pmem::SlabHeap;

use super::{movable_str, Demoted};
use crate::types::{Str, Value};

/// Members the demotion sampler looks at in one collection.
pub(super) const PROBE: usize = 8;
/// Members one demotion or promotion looks at in one collection.
pub(super) const SCAN: usize = 1024;

/// A hash's, list's, set's or sorted set's member count; 0 for other
/// values.
pub(super) fn len(value: &Value) -> usize {
    match value {
        Value::Hash(h) => h.len(),
        Value::List(l) => l.len(),
        Value::Set(s) => s.len(),
        Value::ZSet(z) => z.len(),
        _ => 0,
    }
}

/// Up to `limit` of the `len` items of `items` from offset `start`
/// (wrapped) on, wrapping around the end: for a table, whose iterator
/// cannot seek, reaching `start` steps over the items before it.
fn from_offset<T>(
    items: impl Iterator<Item = T> + Clone,
    len: usize,
    start: usize,
    limit: usize,
) -> impl Iterator<Item = T> {
    let start = start % len.max(1);
    let tail = len - start;
    let wrapped = items.clone().take(start.min(limit.saturating_sub(tail)));
    items.skip(start).take(tail.min(limit)).chain(wrapped)
}

/// Calls `visit` on up to `limit` members of a hash, list, set or sorted
/// set, from offset `start` (wrapped into the collection) on, wrapping
/// around the end, until it returns `false`.
fn visit<'a>(value: &'a Value, start: usize, limit: usize, mut visit: impl FnMut(&'a Str) -> bool) {
    let mut each = |members: &mut dyn Iterator<Item = &'a Str>| {
        for s in members {
            if !visit(s) {
                return;
            }
        }
    };
    match value {
        Value::Hash(h) => each(&mut from_offset(h.values(), h.len(), start, limit)),
        Value::Set(s) => each(&mut from_offset(s.iter(), s.len(), start, limit)),
        Value::ZSet(z) => each(&mut from_offset(z.members(), z.len(), start, limit)),
        Value::List(l) => {
            let start = start % l.len().max(1);
            let mut members = (0..l.len().min(limit)).filter_map(|k| l.get((start + k) % l.len()));
            each(&mut members)
        }
        _ => {}
    }
}

/// Whether a hash or list holds a movable DRAM member among the
/// [`PROBE`] looked at from `start`.
pub(super) fn probe(value: &Value, start: usize) -> bool {
    let mut found = false;
    visit(value, start, PROBE, |s| {
        found = movable_str(s);
        !found
    });
    found
}

/// Calls `visit` on up to [`SCAN`] members of an unshared hash, list, set
/// or sorted set, from `start` (wrapped) on, until it returns `false`;
/// `false`, and nothing visited, for a shared collection or another value.
fn visit_mut(value: &mut Value, start: usize, mut visit: impl FnMut(&mut Str) -> bool) -> bool {
    match value {
        Value::Set(s) => {
            let Some(set) = s.get_mut_unshared() else {
                return false;
            };
            let members = from_offset(set.iter(), set.len(), start, SCAN);
            for (_, with) in changes(members, &mut visit) {
                set.replace(with);
            }
            true
        }
        Value::ZSet(z) => {
            let Some(zset) = z.get_mut_unshared() else {
                return false;
            };
            let members = from_offset(zset.members(), zset.len(), start, SCAN);
            for (member, with) in changes(members, &mut visit) {
                zset.replace_member(&member, with);
            }
            true
        }
        Value::Hash(h) => {
            let Some(h) = h.get_mut_unshared() else {
                return false;
            };
            let start = start % h.len().max(1);
            let tail = (h.len() - start).min(SCAN);
            // The members from `start` to the end, then from the first
            // one: two passes, since a map lends one mutable iterator at
            // a time.
            for s in h.values_mut().skip(start).take(tail) {
                if !visit(s) {
                    return true;
                }
            }
            for s in h.values_mut().take(start.min(SCAN - tail)) {
                if !visit(s) {
                    return true;
                }
            }
            true
        }
        Value::List(l) => {
            let Some(l) = l.get_mut_unshared() else {
                return false;
            };
            let len = l.len();
            for k in 0..len.min(SCAN) {
                if let Some(s) = l.get_mut((start + k) % len) {
                    if !visit(s) {
                        break;
                    }
                }
            }
            true
        }
        _ => false,
    }
}

/// Runs `visit` on a copy of each of `members` until it returns `false`:
/// the members whose copy it changed, each with its new form. A set or
/// sorted set finds a member by its bytes, so its members cannot change
/// in place while the table is read; the caller puts the new forms in
/// after. A copy is a reference-count increment.
fn changes<'a>(
    members: impl Iterator<Item = &'a Str>,
    visit: &mut impl FnMut(&mut Str) -> bool,
) -> Vec<(Str, Str)> {
    let mut changed = Vec::new();
    for member in members {
        let mut copy = member.clone();
        let go_on = visit(&mut copy);
        if copy.is_pm() != member.is_pm() {
            changed.push((member.clone(), copy));
        }
        if !go_on {
            break;
        }
    }
    changed
}

/// Moves movable members of a hash, list, set or sorted set to `heap`, up to `budget`
/// bytes. `Full` only when the heap refused the first member it was given.
pub(super) fn demote(
    value: &mut Value,
    heap: &Arc<SlabHeap>,
    budget: usize,
    start: usize,
) -> Demoted {
    let (mut values, mut moved, mut full) = (0, 0, false);
    visit_mut(value, start, |s| {
        if !movable_str(s) {
            return true;
        }
        match s.to_pm(heap) {
            Some(on_pm) => {
                values += 1;
                moved += on_pm.len();
                *s = on_pm;
                moved < budget
            }
            None => {
                full = true;
                false
            }
        }
    });
    match (moved, full) {
        (0, true) => Demoted::Full,
        (0, false) => Demoted::Skipped,
        (bytes, _) => Demoted::Moved { values, bytes },
    }
}

/// Brings PM members of a hash, list, set or sorted set back to DRAM while `allowance`
/// covers them: the members promoted and their bytes.
pub(super) fn promote(value: &mut Value, mut allowance: usize) -> (u64, usize) {
    let (mut promoted, mut bytes) = (0, 0);
    visit_mut(value, 0, |s| {
        if !s.is_pm() {
            return true;
        }
        if s.len() > allowance {
            return false;
        }
        allowance -= s.len();
        bytes += s.len();
        promoted += 1;
        *s = Str::new(s);
        true
    });
    (promoted, bytes)
}
