//! One chunk of a segment's map (`keyspace/map.rs`): its entries packed
//! in a vector, found through a hash table of their positions.
//!
//! Why not a hash table of the entries themselves: a table's slots are a
//! power of two and at most 7/8 full, so its 40-byte slots are on average
//! about 60% used, and a chunk's table lands in a size class that rounds
//! it up again (32 slots: 1,328 bytes, served from the 1,536-byte class).
//! At 1M keys (about 15 a chunk) that came to 81 bytes of table a key for
//! 40 bytes of entry. Here the table holds 4-byte positions (5 bytes a
//! slot with its control byte), and the entries sit in a vector whose
//! capacity is chosen to fill the size class the allocator serves it from
//! ([`capacity_for`]), grown one class at a time: about 45 bytes of entry
//! and 8 of table a key.
//!
//! The price is a second dependent load on a lookup (the position, then
//! the entry; the position usually shares a cache line with the control
//! bytes just read) and, on removal, moving the last entry into the hole
//! and re-pointing its slot (one more hash of a key).

use std::hash::BuildHasher;

use hashbrown::HashTable;

use super::map::Key;
use super::KeyHasher;
use crate::types::{jemalloc_class, Value};

/// One key and its value.
#[derive(Clone, Debug)]
pub(crate) struct Entry {
    pub(crate) key: Key,
    pub(crate) value: Value,
}

const _: () = assert!(std::mem::size_of::<Entry>() == 40);

/// Bytes a chunk holds a key with, estimated: its entry with the vector's
/// unused capacity (a class is 1/8 to 1/4 larger than the one below it,
/// so on average about 12% is spare), its position and control byte in
/// the table at a load of about 2/3.
pub(crate) const ENTRY_BYTES: i64 = 40 * 9 / 8 + 8;

/// Entries a vector gets to hold at least `len`: as many as fit the size
/// class a block of `len` entries is served from, so the rounding the
/// allocator does anyway becomes room to grow.
fn capacity_for(len: usize) -> usize {
    let size = std::mem::size_of::<Entry>();
    (jemalloc_class(len.max(1) * size) / size).max(len)
}

/// A chunk: entries, and a table of their positions by the keys' hashes.
#[derive(Clone, Default)]
pub(crate) struct Chunk {
    positions: HashTable<u32>,
    entries: Vec<Entry>,
}

impl Chunk {
    /// Number of entries.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the chunk holds no entry.
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entries, in the order they were added (a removal moves the
    /// last one into the hole).
    pub(crate) fn iter(&self) -> std::slice::Iter<'_, Entry> {
        self.entries.iter()
    }

    fn position(&self, hash: u64, key: &[u8]) -> Option<usize> {
        let entries = &self.entries;
        let matches = |&p: &u32| {
            entries
                .get(p as usize)
                .is_some_and(|e| e.key.as_bytes() == key)
        };
        self.positions.find(hash, matches).map(|&p| p as usize)
    }

    /// The entry of `key`, whose hash is `hash`.
    pub(crate) fn find(&self, hash: u64, key: &[u8]) -> Option<&Entry> {
        self.entries.get(self.position(hash, key)?)
    }

    /// The entry of `key`, for modification.
    pub(crate) fn find_mut(&mut self, hash: u64, key: &[u8]) -> Option<&mut Entry> {
        let position = self.position(hash, key)?;
        self.entries.get_mut(position)
    }

    /// Stores `value` at `key` (hash `hash`; `hasher` hashes the keys when
    /// the table grows); returns the value it replaced.
    pub(crate) fn insert(
        &mut self,
        hash: u64,
        key: &[u8],
        value: Value,
        hasher: &KeyHasher,
    ) -> Option<Value> {
        if let Some(entry) = self.find_mut(hash, key) {
            return Some(std::mem::replace(&mut entry.value, value));
        }
        self.push_at(hash, key, value, hasher);
        None
    }

    /// The entry of `key` (hash `hash`), added with the value `make`
    /// gives (and a zero clock) if missing; whether it added it.
    pub(crate) fn find_or_insert(
        &mut self,
        hash: u64,
        key: &[u8],
        make: impl FnOnce() -> Value,
        hasher: &KeyHasher,
    ) -> (&mut Entry, bool) {
        let (position, inserted) = match self.position(hash, key) {
            Some(position) => (position, false),
            None => (self.push_at(hash, key, make(), hasher), true),
        };
        // The position is one the table holds or the push just made.
        (&mut self.entries[position], inserted)
    }

    /// Adds an entry for `key` (hash `hash`), known to be missing (the
    /// caller searched for it just before); returns it.
    pub(crate) fn push(
        &mut self,
        hash: u64,
        key: &[u8],
        value: Value,
        hasher: &KeyHasher,
    ) -> &mut Entry {
        let position = self.push_at(hash, key, value, hasher);
        &mut self.entries[position]
    }

    /// Adds an entry for `key`, known to be missing; returns its position.
    fn push_at(&mut self, hash: u64, key: &[u8], value: Value, hasher: &KeyHasher) -> usize {
        let len = self.entries.len();
        let Ok(position) = u32::try_from(len) else {
            // 4 billion keys in one chunk of 65,536 would be 280 trillion
            // keys in a database: no memory holds them.
            panic!("a keyspace chunk holds at most 2^32 keys");
        };
        if len == self.entries.capacity() {
            self.entries.reserve_exact(capacity_for(len + 1) - len);
        }
        self.entries.push(Entry {
            key: Key::new(key),
            value,
        });
        let entries = &self.entries;
        self.positions.insert_unique(hash, position, |&p| {
            entries
                .get(p as usize)
                .map_or(0, |e| hasher.hash_one(e.key.as_bytes()))
        });
        len
    }

    /// Removes the entry of `key` (hash `hash`) and returns it.
    pub(crate) fn remove(&mut self, hash: u64, key: &[u8], hasher: &KeyHasher) -> Option<Entry> {
        let entries = &self.entries;
        let matches = |&p: &u32| {
            entries
                .get(p as usize)
                .is_some_and(|e| e.key.as_bytes() == key)
        };
        let (position, _) = self.positions.find_entry(hash, matches).ok()?.remove();
        let position = position as usize;
        let last = self.entries.len() - 1;
        let removed = self.entries.swap_remove(position);
        // The last entry moved into the hole (unless it was the one
        // removed): point its slot there.
        if let Some(moved) = self.entries.get(position) {
            let moved_hash = hasher.hash_one(moved.key.as_bytes());
            if let Some(slot) = self.positions.find_mut(moved_hash, |&p| p as usize == last) {
                *slot = position as u32;
            }
        }
        self.shrink_after_removal();
        Some(removed)
    }

    /// Gives memory back once no more than half of the vector is used, so
    /// a chunk emptied by deletions or evictions does not keep its largest
    /// size (the table keeps its slots, as hashbrown's tables do: they are
    /// an eighth of the entries' bytes).
    fn shrink_after_removal(&mut self) {
        let (len, capacity) = (self.entries.len(), self.entries.capacity());
        if len * 2 <= capacity && capacity > 4 {
            self.entries.shrink_to(capacity_for(len));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    fn value(n: u32) -> Value {
        Value::Str(crate::types::Str::new(&n.to_le_bytes()))
    }

    #[test]
    fn capacities_fill_their_size_class() {
        for len in 1..2000 {
            let cap = capacity_for(len);
            assert!(cap >= len);
            assert_eq!(jemalloc_class(cap * 40), jemalloc_class(len * 40), "{len}");
        }
    }

    proptest! {
        /// Inserts and removals, with keys on both sides of the inline
        /// limit, agree with a `HashMap` at every step.
        #[test]
        fn behaves_like_a_hash_map(ops in proptest::collection::vec((0u8..3, 0u16..60, 0u8..30), 0..400)) {
            let hasher = KeyHasher::default();
            let mut chunk = Chunk::default();
            let mut model: HashMap<Vec<u8>, Value> = HashMap::new();
            for (i, (op, k, len)) in ops.into_iter().enumerate() {
                let key: Vec<u8> = (0..len).map(|j| b'a' + ((k as usize + j as usize) % 26) as u8).chain(k.to_le_bytes()).collect();
                let hash = hasher.hash_one(&key[..]);
                if op == 0 {
                    let removed = chunk.remove(hash, &key, &hasher).map(|e| e.value);
                    prop_assert_eq!(removed, model.remove(&key));
                } else {
                    let v = value(i as u32);
                    prop_assert_eq!(chunk.insert(hash, &key, v.clone(), &hasher), model.insert(key.clone(), v));
                }
                prop_assert_eq!(chunk.len(), model.len());
            }
            for (k, v) in &model {
                prop_assert_eq!(chunk.find(hasher.hash_one(&k[..]), k).map(|e| &e.value), Some(v));
            }
            prop_assert_eq!(chunk.iter().count(), model.len());
        }
    }
}
