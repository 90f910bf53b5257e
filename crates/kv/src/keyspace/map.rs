//! One segment's key → value map, laid out for bytes per key and for a
//! cheap copy-before-write (issue #5).
//!
//! Bytes: a `HashMap<Arc<[u8]>, Value>` costs, per key at a million keys
//! of 100 bytes, a 33-byte table slot (key pointer, value, control byte)
//! at hashbrown's power-of-two capacity, which is only half full at that
//! count (segments of ~980 keys grow to 2048 slots), about 69 bytes; plus
//! the key's own allocation (reference counts and bytes: 48 with the
//! allocator's header). Here a slot is a 40-byte [`Entry`], the key inline
//! (up to [`KEY_INLINE_MAX`] bytes, else one boxed copy) next to the
//! value: short keys need no allocation of their own, and small tables
//! (a chunk holds ~15 keys at 1M keys) are about 60% full on average.
//!
//! Copy-before-write: the keys are spread over [`CHUNKS`] chunks by their
//! hash, each behind its own `Arc`. Cloning the map (what a write to a
//! segment a rewrite snapshot still holds does) clones the chunk pointers
//! only; the first write to a chunk the snapshot shares copies that chunk,
//! 1/64 of the segment. Copying whole segments cost the event loop
//! ~200 µs per write until most of the 1024 segments had been copied: at
//! 1M keys client throughput fell from ~37k to 1-5k SET/s for the first
//! 300 ms of every rewrite (profiled: nearly every event-loop sample then
//! was in the map's clone). A string value stays one shared `Arc<[u8]>`,
//! and collections are copy-on-write (`types::Shared`), so copying a chunk
//! is one allocation, a copy of its slots and a reference-count increment
//! per value, never value bytes. (With one boxed entry per slot, copies
//! cost a `malloc` per key: 20% of the event loop's profile during a
//! rewrite was in glibc's `_int_malloc`/`malloc_consolidate` and the clone.)
//! The reference counts those copies increment lie in separate allocations,
//! rarely cached, and each increment is a locked instruction that does not
//! overlap its miss with the next: both copies prefetch every count first
//! (1M x 100 B, 12,000 SETs right after a snapshot: the copy-before-write
//! added 1.4-2.0 µs per SET before, 0.96-1.1 after).

use std::hash::BuildHasher;
use std::sync::Arc;

use super::chunk::{Chunk, ENTRY_BYTES};
use super::KeyHasher;
use crate::types::{arc_counts, Value};

/// Longest key kept inside its entry; longer ones get a boxed copy. 19
/// rather than 22 since the entry also holds the key's access clock
/// ([`Key`]), in bytes the enum's layout leaves free either way.
pub const KEY_INLINE_MAX: usize = 19;

/// Chunks per map: the copy-before-write unit is 1/64 of a segment (about
/// 15 keys at 1M keys), a copy of ~1.5 µs.
pub const CHUNKS: usize = 64;
/// Which hash bits pick the chunk: neither the low bits (hashbrown's
/// bucket index, which would then cluster within a chunk) nor the top
/// seven (its control byte, which would then match more often in vain).
const CHUNK_SHIFT: u32 = 40;

/// A key's access clock, 24 bits as Redis keeps it in an object header:
/// with an LRU policy (or none) the Unix second of the last access, with
/// an LFU policy the minute of the last decrement (16 bits) above a
/// logarithmic access counter (8 bits). See `keyspace/access.rs`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Clock([u8; 3]);

impl Clock {
    pub(crate) fn new(value: u32) -> Clock {
        let b = value.to_le_bytes();
        Clock([b[0], b[1], b[2]])
    }

    pub(crate) fn get(self) -> u32 {
        u32::from_le_bytes([self.0[0], self.0[1], self.0[2], 0])
    }
}

/// A key: inline when short (the common case: Redis keys are mostly a few
/// dozen bytes at most), boxed otherwise. Either variant carries the key's
/// [`Clock`] where the enum has spare bytes (next to the tag), so the
/// clock costs no bytes per slot.
#[derive(Clone, Debug)]
pub(crate) enum Key {
    Inline {
        len: u8,
        clock: Clock,
        bytes: [u8; KEY_INLINE_MAX],
    },
    Boxed {
        clock: Clock,
        bytes: Box<[u8]>,
    },
}

const _: () = assert!(std::mem::size_of::<Key>() == 24);

impl Key {
    pub(crate) fn new(key: &[u8]) -> Key {
        if key.len() <= KEY_INLINE_MAX {
            let mut bytes = [0u8; KEY_INLINE_MAX];
            bytes[..key.len()].copy_from_slice(key);
            Key::Inline {
                len: key.len() as u8,
                clock: Clock::default(),
                bytes,
            }
        } else {
            Key::Boxed {
                clock: Clock::default(),
                bytes: key.into(),
            }
        }
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        match self {
            Key::Inline { len, bytes, .. } => &bytes[..usize::from(*len)],
            Key::Boxed { bytes, .. } => bytes,
        }
    }

    fn clock(&self) -> u32 {
        match self {
            Key::Inline { clock, .. } | Key::Boxed { clock, .. } => clock.get(),
        }
    }

    fn set_clock(&mut self, value: u32) {
        match self {
            Key::Inline { clock, .. } | Key::Boxed { clock, .. } => *clock = Clock::new(value),
        }
    }
}

/// Estimated heap bytes of one entry: the entry, the spare room of its
/// chunk's vector, and its position in the chunk's table
/// (`keyspace/chunk.rs`).
pub const ENTRY_BYTES_ESTIMATE: i64 = ENTRY_BYTES;

/// Key → value, with the `HashMap` operations the keyspace uses.
#[derive(Default)]
pub struct KeyMap {
    /// Empty until the first insert (most segments of unused databases
    /// never get one), then [`CHUNKS`] slots, each allocated on its first
    /// insert, so a sparse segment costs a pointer per chunk.
    chunks: Vec<Option<Arc<Chunk>>>,
    hasher: KeyHasher,
    len: usize,
}

/// A clone shares every chunk: one reference-count increment per chunk.
/// The counts lie in 64 separate allocations, rarely in the cache when a
/// rewrite's copy-before-write clones a segment, and each increment is a
/// locked instruction, which does not overlap its miss with the next one.
/// So every count's line is prefetched first and the misses overlap.
impl Clone for KeyMap {
    fn clone(&self) -> KeyMap {
        for chunk in self.chunks.iter().flatten() {
            ferrite_host::hint::prefetch(arc_counts(chunk));
        }
        KeyMap {
            chunks: self.chunks.clone(),
            hasher: self.hasher,
            len: self.len,
        }
    }
}

impl std::fmt::Debug for KeyMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

/// Equal when both hold the same keys with equal values (as `HashMap`).
impl PartialEq for KeyMap {
    fn eq(&self, other: &KeyMap) -> bool {
        self.len == other.len && self.iter().all(|(k, v)| other.get(k) == Some(v))
    }
}

impl<'a> IntoIterator for &'a KeyMap {
    type Item = (&'a [u8], &'a Value);
    type IntoIter = Box<dyn Iterator<Item = (&'a [u8], &'a Value)> + 'a>;
    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.iter())
    }
}

fn chunk_of(hash: u64) -> usize {
    (hash >> CHUNK_SHIFT) as usize & (CHUNKS - 1)
}

/// The chunk of `chunks` that keys of hash `hash` belong to, this map's
/// own (copied if a clone shares it, created if missing). A function of
/// the field rather than a method, so the map's other fields stay
/// available while the chunk is borrowed.
fn chunk_in(chunks: &mut Vec<Option<Arc<Chunk>>>, hash: u64) -> &mut Chunk {
    if chunks.is_empty() {
        *chunks = vec![None; CHUNKS];
    }
    let slot = &mut chunks[chunk_of(hash)];
    Arc::make_mut(slot.get_or_insert_with(Arc::default))
}

impl KeyMap {
    /// The hash of `key` in this map: computed once by a caller that then
    /// makes several calls for the same key (the `*_hashed` methods).
    pub(crate) fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the map holds no key.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The value at `key`.
    pub fn get(&self, key: &[u8]) -> Option<&Value> {
        self.get_hashed(self.hash(key), key)
    }

    /// [`KeyMap::get`] with the key's hash ([`KeyMap::hash`]) given.
    pub(crate) fn get_hashed(&self, hash: u64, key: &[u8]) -> Option<&Value> {
        self.chunks
            .get(chunk_of(hash))?
            .as_ref()?
            .find(hash, key)
            .map(|e| &e.value)
    }

    /// Whether `key` is present.
    pub fn contains_key(&self, key: &[u8]) -> bool {
        self.get(key).is_some()
    }

    /// Makes the chunk `key` belongs to this map's own (copying it if a
    /// clone shares it); if it copied, returns the chunk's index and how
    /// many entries it copied.
    pub fn unshare(&mut self, key: &[u8]) -> Option<(usize, usize)> {
        self.unshare_hashed(self.hash(key))
    }

    /// [`KeyMap::unshare`] of the chunk that keys of hash `hash` belong to.
    pub(crate) fn unshare_hashed(&mut self, hash: u64) -> Option<(usize, usize)> {
        let index = chunk_of(hash);
        let chunk = self.chunks.get_mut(index)?.as_mut()?;
        if Arc::get_mut(chunk).is_some() {
            return None;
        }
        // The copy takes a reference to every value, each in its own
        // allocation: start all those misses before the first locked
        // increment (as `KeyMap::clone` does for the chunks).
        for entry in chunk.iter() {
            entry.value.prefetch_count();
        }
        Some((index, Arc::make_mut(chunk).len()))
    }

    /// The index of the chunk `key` belongs to (present or not).
    pub fn chunk_index(&self, key: &[u8]) -> usize {
        chunk_of(self.hash(key))
    }

    /// Takes chunk `index` out of this map, as a map of its own, if no
    /// clone shares it: for a rewrite worker writing a chunk the live map
    /// copied ahead of its segment (`keyspace/supersede.rs`).
    pub fn take_chunk(&mut self, index: usize) -> Option<KeyMap> {
        let slot = self.chunks.get_mut(index)?;
        Arc::get_mut(slot.as_mut()?)?;
        let chunk = slot.take()?;
        let len = chunk.len();
        self.len -= len;
        let mut chunks = vec![None; CHUNKS];
        chunks[index] = Some(chunk);
        Some(KeyMap {
            chunks,
            hasher: self.hasher,
            len,
        })
    }

    fn chunk_mut(&mut self, hash: u64) -> &mut Chunk {
        chunk_in(&mut self.chunks, hash)
    }

    /// The value at `key` for a change no one can observe (the PM tier
    /// moving its bytes), only if no clone shares the key's chunk: a
    /// rewrite snapshot that holds it is left alone, and nothing is copied.
    pub(crate) fn value_mut_unshared(&mut self, key: &[u8]) -> Option<&mut Value> {
        let hash = self.hash(key);
        let slot = self.chunks.get_mut(chunk_of(hash))?.as_mut()?;
        Arc::get_mut(slot)?
            .find_mut(hash, key)
            .map(|e| &mut e.value)
    }

    /// The value at `key`, for modification.
    pub fn get_mut(&mut self, key: &[u8]) -> Option<&mut Value> {
        self.get_mut_hashed(self.hash(key), key)
    }

    /// [`KeyMap::get_mut`] with the key's hash given. A missing key copies
    /// nothing: the shared chunk is searched first.
    pub(crate) fn get_mut_hashed(&mut self, hash: u64, key: &[u8]) -> Option<&mut Value> {
        self.get_hashed(hash, key)?;
        self.chunk_mut(hash)
            .find_mut(hash, key)
            .map(|e| &mut e.value)
    }

    /// Stores `value` at `key`; returns the value it replaced.
    pub fn insert(&mut self, key: impl AsRef<[u8]>, value: Value) -> Option<Value> {
        let key = key.as_ref();
        self.insert_hashed(self.hash(key), key, value)
    }

    /// [`KeyMap::insert`] with the key's hash given.
    pub(crate) fn insert_hashed(&mut self, hash: u64, key: &[u8], value: Value) -> Option<Value> {
        let replaced = chunk_in(&mut self.chunks, hash).insert(hash, key, value, &self.hasher);
        if replaced.is_none() {
            self.len += 1;
        }
        replaced
    }

    /// The value at `key` (hash `hash`), stored from `make` first if
    /// missing, with its access clock set to `clock(old)` (`None` for a
    /// key just stored). One search where a lookup, an insert and a clock
    /// update would each hash and search again. Copies the key's chunk if
    /// a clone shares it, as any write does. Returns whether it stored.
    pub(crate) fn get_or_insert_hashed(
        &mut self,
        hash: u64,
        key: &[u8],
        make: impl FnOnce() -> Value,
        clock: impl FnOnce(Option<u32>) -> u32,
    ) -> (&mut Value, bool) {
        let chunk = chunk_in(&mut self.chunks, hash);
        let (entry, inserted) = chunk.find_or_insert(hash, key, make, &self.hasher);
        let old = (!inserted).then(|| entry.key.clock());
        entry.key.set_clock(clock(old));
        if inserted {
            self.len += 1;
        }
        (&mut entry.value, inserted)
    }

    /// The access clock of `key` (`keyspace/access.rs`).
    pub fn clock(&self, key: &[u8]) -> Option<u32> {
        let hash = self.hash(key);
        self.chunks
            .get(chunk_of(hash))?
            .as_ref()?
            .find(hash, key)
            .map(|e| e.key.clock())
    }

    /// A random entry (its key, value and access clock) in constant time:
    /// the first chunk holding keys from a random one on (at most
    /// [`CHUNKS`] pointers read), then a random entry of it, `random(n)`
    /// choosing in `0..n`. `None` only for an empty map. The pick favours
    /// keys of chunks that follow empty ones, and keys of small chunks,
    /// which sampling for a cold value (`keyspace/tier.rs`) can afford,
    /// unlike RANDOMKEY.
    pub fn sample(&self, random: &mut impl FnMut(usize) -> usize) -> Option<(&[u8], &Value, u32)> {
        let n = self.chunks.len();
        if self.len == 0 || n == 0 {
            return None;
        }
        let start = random(n);
        let chunk = (0..n).find_map(|i| {
            self.chunks
                .get((start + i) % n)
                .and_then(Option::as_ref)
                .filter(|c| !c.is_empty())
        })?;
        let entry = chunk.iter().nth(random(chunk.len()))?;
        Some((entry.key.as_bytes(), &entry.value, entry.key.clock()))
    }

    /// Sets the access clock of `key` to `update(old)` if its chunk is
    /// this map's alone: an access never copies a chunk a rewrite
    /// snapshot shares (Redis likewise leaves the clocks alone while a
    /// child process saves). Returns whether it did.
    pub fn update_clock(&mut self, key: &[u8], update: impl FnOnce(u32) -> u32) -> bool {
        let hash = self.hash(key);
        let Some(Some(chunk)) = self.chunks.get_mut(chunk_of(hash)) else {
            return false;
        };
        let Some(chunk) = Arc::get_mut(chunk) else {
            return false;
        };
        match chunk.find_mut(hash, key) {
            Some(entry) => {
                let next = update(entry.key.clock());
                entry.key.set_clock(next);
                true
            }
            None => false,
        }
    }

    /// The value at `key`, recording an access in its clock (`update`)
    /// when its chunk is this map's alone; a chunk a clone shares is read
    /// without it, never copied for a read. With the chunk its own, `with`
    /// also gets the value and its clock before this access (the PM
    /// tier's promotion, which may move the value's bytes but never
    /// changes them): one search serves the read, the clock and the
    /// promotion.
    pub(crate) fn get_touch_with(
        &mut self,
        hash: u64,
        key: &[u8],
        update: impl FnOnce(u32) -> u32,
        with: impl FnOnce(u32, &mut Value),
    ) -> Option<&Value> {
        let slot = self.chunks.get_mut(chunk_of(hash))?.as_mut()?;
        if Arc::get_mut(slot).is_none() {
            return slot.find(hash, key).map(|e| &e.value);
        }
        let entry = Arc::get_mut(slot)?.find_mut(hash, key)?;
        let old = entry.key.clock();
        entry.key.set_clock(update(old));
        with(old, &mut entry.value);
        Some(&entry.value)
    }

    /// The value at `key` for modification, recording an access in its
    /// clock; copies the key's chunk first if a clone shares it (as any
    /// write does).
    pub(crate) fn get_mut_touch_hashed(
        &mut self,
        hash: u64,
        key: &[u8],
        update: impl FnOnce(u32) -> u32,
    ) -> Option<&mut Value> {
        let slot = self.chunks.get_mut(chunk_of(hash))?.as_mut()?;
        let entry = Arc::make_mut(slot).find_mut(hash, key)?;
        entry.key.set_clock(update(entry.key.clock()));
        Some(&mut entry.value)
    }

    /// Stores `value` at `key` (hash `hash`) and sets its access clock to
    /// `clock(old)` (`None` for a new key): one search for the store and
    /// the clock. Copies the key's chunk if a clone shares it. Returns
    /// whether the key is new.
    pub(crate) fn insert_touch_hashed(
        &mut self,
        hash: u64,
        key: &[u8],
        value: Value,
        clock: impl FnOnce(Option<u32>) -> u32,
    ) -> bool {
        let chunk = chunk_in(&mut self.chunks, hash);
        match chunk.find_mut(hash, key) {
            Some(entry) => {
                entry.value = value;
                entry.key.set_clock(clock(Some(entry.key.clock())));
                false
            }
            None => {
                let entry = chunk.push(hash, key, value, &self.hasher);
                entry.key.set_clock(clock(None));
                self.len += 1;
                true
            }
        }
    }

    /// Removes `key`; returns its value.
    pub fn remove(&mut self, key: &[u8]) -> Option<Value> {
        self.remove_hashed(self.hash(key), key)
    }

    /// [`KeyMap::remove`] with the key's hash given. A missing key copies
    /// nothing: the shared chunk is searched first.
    pub(crate) fn remove_hashed(&mut self, hash: u64, key: &[u8]) -> Option<Value> {
        self.get_hashed(hash, key)?;
        let value = chunk_in(&mut self.chunks, hash)
            .remove(hash, key, &self.hasher)?
            .value;
        self.len -= 1;
        Some(value)
    }

    /// Frees the tables of the chunks `key`'s removal left empty, and the
    /// chunk index when no key is left, where no clone shares them. For
    /// eviction, which must free memory: an emptied table would otherwise
    /// keep its buckets (a few hundred bytes per segment touched).
    pub fn release_empty(&mut self, key: &[u8]) {
        if self.len == 0 {
            self.chunks = Vec::new();
            return;
        }
        let hash = self.hash(key);
        if let Some(slot) = self.chunks.get_mut(chunk_of(hash)) {
            if slot.as_ref().is_some_and(|c| c.is_empty()) {
                *slot = None;
            }
        }
    }

    /// Removes `key` if its chunk is this map's alone (no clone shares
    /// it, so nothing is copied); returns whether it did. For a rewrite
    /// worker leaving a superseded key out of its snapshot
    /// (`keyspace/supersede.rs`).
    pub fn remove_unshared(&mut self, key: &[u8]) -> bool {
        let hash = self.hash(key);
        let Some(Some(chunk)) = self.chunks.get_mut(chunk_of(hash)) else {
            return false;
        };
        let Some(chunk) = Arc::get_mut(chunk) else {
            return false;
        };
        if chunk.remove(hash, key, &self.hasher).is_none() {
            return false;
        }
        self.len -= 1;
        true
    }

    /// Every key, in the table's order.
    pub fn keys(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.iter().map(|(k, _)| k)
    }

    /// Starts loading each chunk's table header, the first of the two
    /// dependent loads that lie between a chunk pointer and its entries.
    /// Reads the chunk list itself. For a reader about to walk this map
    /// after the one it is walking now and the next
    /// ([`KeyMap::prefetch_entries`]).
    pub fn prefetch_headers(&self) {
        for chunk in self.chunks.iter().flatten() {
            ferrite_host::hint::prefetch(Arc::as_ptr(chunk));
        }
    }

    /// Starts loading the first entries of each chunk, once their headers
    /// are in the cache ([`KeyMap::prefetch_headers`]): finding them reads
    /// each table's first control bytes, misses that overlap one another
    /// here rather than stalling the walk one chunk at a time.
    pub fn prefetch_entries(&self) {
        for chunk in self.chunks.iter().flatten() {
            if let Some(entry) = chunk.iter().next() {
                ferrite_host::hint::prefetch(std::ptr::from_ref(entry));
            }
        }
    }

    /// Every key and value, in the table's order.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &Value)> + '_ {
        self.chunks
            .iter()
            .flatten()
            .flat_map(|c| c.iter().map(|e| (e.key.as_bytes(), &e.value)))
    }

    /// Drops this map, typically a rewrite snapshot's version; returns how
    /// many entries that freed (the chunks no other map shared, i.e. those
    /// the live map had copied).
    pub fn release(self) -> usize {
        self.chunks
            .into_iter()
            .flatten()
            .filter_map(Arc::into_inner)
            .map(|c| c.len())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn string(v: &[u8]) -> Value {
        Value::Str(v.into())
    }

    /// `key:0` to `key:999`, each holding `v`.
    fn thousand_keys() -> KeyMap {
        let mut map = KeyMap::default();
        for i in 0..1000u32 {
            map.insert(format!("key:{i}").as_bytes(), string(b"v"));
        }
        map
    }

    #[test]
    fn behaves_like_a_hash_map() {
        // Keys on both sides of the inline limit, replaced and removed.
        let mut map = KeyMap::default();
        let mut model: HashMap<Vec<u8>, Value> = HashMap::new();
        let mut state = 0x1234_5678_9abc_def1u64;
        for i in 0..20_000u64 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let len = (state % 64) as usize;
            let key: Vec<u8> = (0..len).map(|j| b'a' + ((state >> j) % 7) as u8).collect();
            match state % 4 {
                0 => assert_eq!(map.remove(&key), model.remove(&key)),
                _ => {
                    let value = string(&i.to_le_bytes());
                    assert_eq!(map.insert(&key, value.clone()), model.insert(key, value));
                }
            }
        }
        assert_eq!(map.len(), model.len());
        for (k, v) in &model {
            assert_eq!(map.get(k), Some(v));
        }
        let mut keys: Vec<Vec<u8>> = map.keys().map(<[u8]>::to_vec).collect();
        keys.sort();
        let mut expected: Vec<Vec<u8>> = model.keys().cloned().collect();
        expected.sort();
        assert_eq!(keys, expected);
    }

    #[test]
    fn a_clone_copies_only_the_chunk_written() {
        let mut map = thousand_keys();
        let snapshot = map.clone();
        let (_, copied) = map.unshare(b"key:7").expect("shared with the clone");
        assert!(copied > 0 && copied < 1000);
        assert_eq!(map.unshare(b"key:7"), None);
        map.insert(b"key:7", string(b"w"));
        assert_eq!(snapshot.get(b"key:7"), Some(&string(b"v")));
        assert_eq!(snapshot.release(), copied);
        assert_eq!(map.len(), 1000);
    }

    #[test]
    fn remove_unshared_leaves_shared_chunks_alone() {
        let mut map = thousand_keys();
        let mut snapshot = map.clone();
        assert!(!snapshot.remove_unshared(b"key:7"), "chunk still shared");
        assert_eq!(snapshot.len(), 1000);
        map.unshare(b"key:7").expect("shared with the clone");
        assert!(snapshot.remove_unshared(b"key:7"));
        assert!(!snapshot.remove_unshared(b"key:7"), "already gone");
        assert_eq!(snapshot.len(), 999);
        assert_eq!(snapshot.get(b"key:7"), None);
        assert_eq!(
            map.get(b"key:7"),
            Some(&string(b"v")),
            "the live map keeps it"
        );
    }

    #[test]
    fn take_chunk_moves_a_copied_chunk_out_whole() {
        let mut map = thousand_keys();
        let mut snapshot = map.clone();
        let index = chunk_of(map.hash(b"key:7"));
        assert!(snapshot.take_chunk(index).is_none(), "chunk still shared");
        let (copied_index, copied) = map.unshare(b"key:7").expect("shared");
        assert_eq!(copied_index, index);
        let piece = snapshot.take_chunk(index).expect("the snapshot's own now");
        assert_eq!(piece.len(), copied);
        assert_eq!(piece.get(b"key:7"), Some(&string(b"v")));
        assert_eq!(snapshot.len() + piece.len(), 1000);
        assert_eq!(snapshot.get(b"key:7"), None);
        assert!(piece
            .keys()
            .all(|k| snapshot.get(k).is_none() && map.get(k).is_some()));
        assert!(snapshot.take_chunk(index).is_none(), "taken already");
    }

    #[test]
    fn clones_share_values() {
        let mut map = KeyMap::default();
        map.insert(b"k", string(b"v"));
        let copy = map.clone();
        *map.get_mut(b"k").expect("present") = string(b"w");
        assert_eq!(copy.get(b"k"), Some(&string(b"v")));
        assert_eq!(map.get(b"k"), Some(&string(b"w")));
        assert!(map.contains_key(b"k") && !map.contains_key(b"x"));
    }
}

#[cfg(test)]
#[path = "map_hashed_tests.rs"]
mod hashed_tests;
