//! The keys of each hash slot, kept only in cluster mode (`docs/cluster.md`).
//!
//! Resharding asks a node for the keys of one slot at a time (CLUSTER
//! GETKEYSINSLOT, COUNTKEYSINSLOT); without an index each call walks the
//! whole keyspace, and moving 1,000 slots of a loaded node then takes
//! minutes. Redis keeps a list of keys per slot for this; here each slot
//! has a set of its key names in database 0, the only database cluster
//! mode uses.
//!
//! The index is absent until cluster mode asks for it, so a node outside
//! cluster mode pays one branch per key added or removed. Every place in
//! the keyspace that adds a key to database 0's maps or takes one out
//! calls [`Keyspace::slot_key_added`] or [`Keyspace::slot_key_removed`];
//! the places that replace whole databases or segments (FLUSHDB, SWAPDB,
//! loading) drop the index, and the next query rebuilds it from the maps.
//! A keyspace replaced wholesale (a replica's full sync) starts without
//! one and is indexed the same way on first use. Keys whose TTL passed but
//! that are not removed yet are in the index, as they are in Redis's.

use std::collections::HashSet;

use super::{Keyspace, Segment};
use crate::cluster::{key_slot, SLOTS};
use crate::types::Bytes;

/// One set of key names per slot.
#[derive(Debug)]
pub struct SlotIndex {
    slots: Vec<HashSet<Bytes>>,
}

impl SlotIndex {
    fn new() -> SlotIndex {
        SlotIndex {
            slots: (0..SLOTS).map(|_| HashSet::new()).collect(),
        }
    }

    fn add(&mut self, key: &[u8]) {
        if let Some(set) = self.slots.get_mut(usize::from(key_slot(key))) {
            if !set.contains(key) {
                set.insert(key.into());
            }
        }
    }

    fn remove(&mut self, key: &[u8]) {
        if let Some(set) = self.slots.get_mut(usize::from(key_slot(key))) {
            set.remove(key);
        }
    }
}

impl Keyspace {
    /// Starts keeping the per-slot index (cluster mode), built from the
    /// keys database 0 holds now. Nothing when it is kept already.
    pub fn enable_slot_index(&mut self) {
        if self.slot_index.is_some() {
            return;
        }
        let mut index = SlotIndex::new();
        for segment in self.dbs.first().map(|d| d.segments()).unwrap_or(&[]) {
            for key in segment.map.keys() {
                index.add(key);
            }
        }
        self.slot_index = Some(Box::new(index));
    }

    /// Whether the per-slot index is kept.
    pub fn has_slot_index(&self) -> bool {
        self.slot_index.is_some()
    }

    /// Up to `max` keys of database 0 in `slot` (CLUSTER GETKEYSINSLOT).
    pub fn keys_in_slot(&mut self, slot: usize, max: usize) -> Vec<Bytes> {
        self.enable_slot_index();
        match self.slot_index.as_ref().and_then(|i| i.slots.get(slot)) {
            Some(set) => set.iter().take(max).cloned().collect(),
            None => Vec::new(),
        }
    }

    /// Number of keys of database 0 in `slot` (CLUSTER COUNTKEYSINSLOT).
    pub fn count_keys_in_slot(&mut self, slot: usize) -> usize {
        self.enable_slot_index();
        self.slot_index
            .as_ref()
            .and_then(|i| i.slots.get(slot))
            .map_or(0, HashSet::len)
    }

    /// Records that `key` was added to database `db`.
    pub(super) fn slot_key_added(&mut self, db: usize, key: &[u8]) {
        if db == 0 {
            if let Some(index) = self.slot_index.as_mut() {
                index.add(key);
            }
        }
    }

    /// Records that `key` was taken out of database `db`.
    pub(super) fn slot_key_removed(&mut self, db: usize, key: &[u8]) {
        if db == 0 {
            if let Some(index) = self.slot_index.as_mut() {
                index.remove(key);
            }
        }
    }

    /// Database `db` is replaced as a whole: the index of database 0 is
    /// dropped and rebuilt at its next use.
    pub(super) fn slot_db_replaced(&mut self, db: usize) {
        if db == 0 {
            self.slot_index = None;
        }
    }

    /// Segment `old` of database `db` is about to be replaced by `new`.
    pub(super) fn slot_segment_replaced(&mut self, db: usize, old: &Segment, new: &Segment) {
        if db != 0 {
            return;
        }
        if let Some(index) = self.slot_index.as_mut() {
            for key in old.map.keys() {
                index.remove(key);
            }
            for key in new.map.keys() {
                index.add(key);
            }
        }
    }
}
