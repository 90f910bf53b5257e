//! The keyspace: 16 databases, each split into [`SEGMENTS_PER_DB`]
//! segments by a hash of the key, each segment its own hash map.
//!
//! Why segments: issue #5 rewrites the log in parallel without fork. A
//! point-in-time snapshot is taken segment by segment: workers serialise
//! segments in index order, and a write to a segment not yet serialised
//! first hands a copy of that one segment to the workers (copy-before-write
//! at segment granularity). Extra memory is then bounded by the segments
//! written during the rewrite, never a second copy of the dataset. Each
//! segment is self-contained (its values and its expiry times) so it can be
//! copied or serialised alone, and SCAN's cursor is a segment index, so it
//! needs no state that spans segments.
//!
//! Expiry is kept per segment in a separate map holding only keys with a
//! TTL, so keys without one pay nothing for it.

pub mod access;
mod capture;
mod chunk;
pub mod events;
pub mod evict;
pub mod glob;
pub mod map;
mod replica_expire;
pub mod slots;
mod snapshot;
mod supersede;
pub mod tier;
mod watch;
mod write_lookup;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

pub use capture::{Feed, WakeLoop, NOT_CAPTURED};
pub use map::KeyMap;
pub use snapshot::{CowStats, SegmentRange, Snapshot};
pub use supersede::{LoopNotes, SegmentQueue};

use crate::types::{Bytes, Value};

/// Databases, numbered `0..DATABASES_DEFAULT` (`databases` in the config).
pub const DATABASES_DEFAULT: usize = 16;
/// Segments per database. A power of two so the segment is a mask of the
/// hash; 1024 keeps one segment (one SCAN step, one copy-before-write unit)
/// near a thousand keys at a million keys.
pub const SEGMENTS_PER_DB: usize = 1024;
/// Random segments RANDOMKEY tries before it walks them in order.
const RANDOM_KEY_PROBES: usize = 16;

/// The keyed hash of the keyspace's tables (each segment's map and its
/// expiry times): foldhash, seeded at random once per process and per
/// table. A key's bytes come from clients, so a hash without a secret key
/// would let one client pick keys that all land in one bucket (hash
/// flooding); `docs/memory.md` says why this one and not SipHash.
pub type KeyHasher = foldhash::fast::RandomState;

/// One segment's expiry times: key → absolute expiry in Unix ms.
pub type Expires = HashMap<Bytes, i64, KeyHasher>;

/// Which segment `key` lives in. CRC32C is hardware-accelerated and fixed
/// across runs, so segment membership is stable for the rewrite workers.
pub fn segment_of(key: &[u8]) -> usize {
    (crc32c::crc32c(key) as usize) & (SEGMENTS_PER_DB - 1)
}

/// A uniform number in [0, 1) from the xorshift generator `state`.
fn next_random(state: &mut u64) -> f64 {
    let mut x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *state = x;
    (x >> 11) as f64 / (1u64 << 53) as f64
}

/// The access clock a write gives `key` from its old clock (`None`: the
/// key is new): fresh for a new key, an access for an existing one, and
/// left as it was while loading. An existing key's LFU counter draws
/// from `generator`, so it advances only when a draw is used.
fn clock_after(
    now: i64,
    policy: access::AccessPolicy,
    loading: bool,
    generator: &mut u64,
) -> impl FnOnce(Option<u32>) -> u32 + '_ {
    move |old| match old {
        _ if loading => old.unwrap_or(0),
        None => access::fresh(now, &policy),
        Some(old) => {
            let random = if policy.lfu {
                next_random(generator)
            } else {
                0.0
            };
            access::accessed(old, now, &policy, random)
        }
    }
}

/// One segment: its keys and their expiry times.
#[derive(Clone, Debug, Default)]
pub struct Segment {
    /// Key → value.
    pub map: KeyMap,
    /// Key → absolute expiry in Unix milliseconds, only for keys with a TTL.
    pub expires: Expires,
}

/// One database.
#[derive(Debug)]
pub struct Db {
    /// Shared with a rewrite snapshot until the rewrite serialised them;
    /// mutated through [`Arc::make_mut`], which is the copy-before-write.
    segments: Vec<Arc<Segment>>,
    len: usize,
}

impl Default for Db {
    fn default() -> Db {
        Db {
            segments: (0..SEGMENTS_PER_DB)
                .map(|_| Arc::new(Segment::default()))
                .collect(),
            len: 0,
        }
    }
}

impl Db {
    /// Number of keys (expired ones not yet removed included, as DBSIZE).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the database holds no key.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of keys with a TTL.
    pub fn expires_len(&self) -> usize {
        self.segments.iter().map(|s| s.expires.len()).sum()
    }

    /// The segments, for SCAN, KEYS and the rewrite.
    pub fn segments(&self) -> &[Arc<Segment>] {
        &self.segments
    }
}

/// Where keys modified while watched are counted (WATCH/EXEC).
#[derive(Debug, Default)]
struct Watch {
    version: u64,
    watchers: usize,
}

/// All databases plus the bookkeeping that spans them.
#[derive(Debug)]
pub struct Keyspace {
    dbs: Vec<Db>,
    watched: HashMap<(usize, Bytes), Watch>,
    /// Current time in Unix milliseconds, set by the server before each
    /// command so one command sees one instant.
    pub now_ms: i64,
    /// While replaying the log nothing expires: the log holds an explicit
    /// DEL for every expiry that happened, so replay stays exact.
    pub loading: bool,
    /// CLIENT PAUSE holds writes: an expired key reads as missing but is
    /// not removed (nor logged) until the pause ends, as in Redis.
    pub expiry_paused: bool,
    /// On a replica, while a command of the master's stream runs: keys
    /// are as the master left them, expired or not (the master sends a DEL
    /// for each expiry), as in Redis.
    pub expiry_ignored: bool,
    /// On a replica: TTLs set by its own clients are remembered, since
    /// only the replica can expire those keys (`replica_expire.rs`).
    pub track_local_expires: bool,
    local_expires: std::collections::HashSet<(usize, Bytes)>,
    /// Keys removed because they expired, for the log (as `DEL`) and INFO.
    pub expired: Vec<(usize, Bytes)>,
    /// Total keys expired since start.
    pub expired_total: u64,
    /// `notify-keyspace-events`, copied here before each command so the
    /// keyspace queues its own events (`expired`, `new`) only when wanted.
    pub notify_flags: u32,
    /// Keyspace events waiting to be published, in order.
    pub events: Vec<events::KeyEvent>,
    /// Some client tracks keys: changed keys are collected in `changed`.
    pub track_changes: bool,
    /// Keys changed since the tracking layer last looked, each with
    /// whether the running command changed it (false: it expired).
    pub changed: Vec<(Bytes, bool)>,
    /// A database was flushed since the tracking layer last looked.
    pub flushed: bool,
    /// Keyspace hits and misses, for INFO.
    pub hits: u64,
    /// See `hits`.
    pub misses: u64,
    active_cursor: usize,
    /// Keys some client blocks on (BLPOP...); kept by the event loop.
    pub blocking_on: HashSet<(usize, Bytes)>,
    /// Keys of `blocking_on` changed since the event loop last served
    /// them, each once, in the order they first changed: the order Redis
    /// serves blocked clients in.
    pub ready: Vec<(usize, Bytes)>,
    /// Copy-before-write accounting for the rewrite in progress.
    pub cow: CowStats,
    /// Keys a running rewrite's parts may leave out (`supersede.rs`).
    supersede: supersede::Supersede,
    /// Segments captured for a running rewrite's workers (`capture.rs`).
    capture: capture::Capture,
    /// What the keys' access clocks count (`access.rs`); the dispatcher
    /// sets it from the configuration before each command.
    pub access: access::AccessPolicy,
    /// State of the generator behind LFU's probabilistic increments.
    access_random: u64,
    /// What reads may promote from the PM tier (`tier.rs`); the
    /// dispatcher sets the allowance before each command.
    pub promotion: tier::Promotion,
    /// Keys written recently, for demotion when sampling finds nothing
    /// (`tier.rs`); empty and off without the tier.
    pub written: tier::Written,
    /// The keys of each hash slot, in cluster mode only (`slots.rs`).
    slot_index: Option<Box<slots::SlotIndex>>,
}

impl Keyspace {
    /// `databases` empty databases.
    pub fn new(databases: usize) -> Keyspace {
        Keyspace {
            dbs: (0..databases).map(|_| Db::default()).collect(),
            watched: HashMap::new(),
            now_ms: 0,
            loading: false,
            expiry_paused: false,
            expiry_ignored: false,
            track_local_expires: false,
            local_expires: Default::default(),
            expired: Vec::new(),
            expired_total: 0,
            notify_flags: 0,
            events: Vec::new(),
            track_changes: false,
            changed: Vec::new(),
            flushed: false,
            hits: 0,
            misses: 0,
            active_cursor: 0,
            blocking_on: HashSet::new(),
            ready: Vec::new(),
            cow: CowStats::default(),
            supersede: supersede::Supersede::default(),
            capture: capture::Capture::default(),
            access: access::AccessPolicy::default(),
            promotion: tier::Promotion::default(),
            written: tier::Written::default(),
            access_random: 0x9E37_79B9_7F4A_7C15,
            slot_index: None,
        }
    }

    /// A uniform number in [0, 1) for LFU's increments (xorshift: the
    /// counters need no better).
    fn next_random(&mut self) -> f64 {
        next_random(&mut self.access_random)
    }

    /// Records an access to `key` in its clock (or, with `fresh`, gives a
    /// new value its first clock). Skipped while loading, and for a
    /// segment or chunk a rewrite snapshot still shares, so a read never
    /// copies anything.
    fn note_access(&mut self, db: usize, seg: usize, key: &[u8], fresh: bool) {
        if self.loading {
            return;
        }
        let (now, policy) = (self.now_ms, self.access);
        let random = if policy.lfu && !fresh {
            self.next_random()
        } else {
            0.0
        };
        let Some(segment) = Arc::get_mut(&mut self.dbs[db].segments[seg]) else {
            return;
        };
        segment.map.update_clock(key, |old| {
            if fresh {
                access::fresh(now, &policy)
            } else {
                access::accessed(old, now, &policy, random)
            }
        });
    }

    /// Sets the access clock of `key` as RESTORE's IDLETIME (seconds idle,
    /// LRU clocks) or FREQ (the LFU counter, up to 255) give it.
    pub fn set_access(&mut self, db: usize, key: &[u8], idle_s: Option<u64>, freq: Option<u8>) {
        let now = self.now_ms;
        let seg = segment_of(key);
        let clock = match (idle_s, freq) {
            (_, Some(freq)) => access::with_counter(now, u32::from(freq)),
            (Some(idle), None) => access::lru_clock(now - (idle as i64).saturating_mul(1000)),
            (None, None) => return,
        };
        if let Some(segment) = Arc::get_mut(&mut self.dbs[db].segments[seg]) {
            segment.map.update_clock(key, |_| clock);
        }
    }

    /// The access clock of `key` (`access.rs`), without touching it.
    pub fn access_clock(&self, db: usize, key: &[u8]) -> Option<u32> {
        self.dbs[db].segments[segment_of(key)].map.clock(key)
    }

    /// The value at `key` without counting a hit or an access (TYPE,
    /// OBJECT), expiring it first if due.
    pub fn peek(&mut self, db: usize, key: &[u8]) -> Option<&Value> {
        let seg = segment_of(key);
        self.expire_if_needed(db, seg, key);
        self.dbs[db].segments[seg].map.get(key)
    }

    /// Records an access to `key` if it exists (TOUCH); returns whether
    /// it does.
    pub fn touch_access(&mut self, db: usize, key: &[u8]) -> bool {
        let seg = segment_of(key);
        self.expire_if_needed(db, seg, key);
        let found = self.dbs[db].segments[seg].map.contains_key(key);
        if found {
            self.note_access(db, seg, key, false);
        }
        found
    }

    /// Number of databases.
    pub fn databases(&self) -> usize {
        self.dbs.len()
    }

    /// Database `index` (checked by SELECT beforehand).
    pub fn db(&self, index: usize) -> &Db {
        &self.dbs[index]
    }

    /// Bumps the watch version of `key` if some client watches it, and
    /// notes it ready if some client blocks on it.
    pub fn touch(&mut self, db: usize, key: &[u8]) {
        self.touch_by(db, key, true);
    }

    /// [`Keyspace::touch`], saying whether the running command made the
    /// change (BCAST's NOLOOP leaves out only a client's own changes).
    fn touch_by(&mut self, db: usize, key: &[u8], by_command: bool) {
        if self.track_changes {
            self.changed.push((key.into(), by_command));
        }
        self.written.note(db, key);
        if self.watched.is_empty() && self.blocking_on.is_empty() {
            return;
        }
        // Building the owned key costs an allocation, paid only while some
        // client watches or blocks on something.
        let k = (db, Bytes::from(key));
        if let Some(w) = self.watched.get_mut(&k) {
            w.version += 1;
        }
        if self.blocking_on.contains(&k) && !self.ready.contains(&k) {
            self.ready.push(k);
        }
    }

    /// Notes every key blocked on in `db` ready (FLUSHDB, SWAPDB): the
    /// blocked clients look again and time out or stay blocked.
    pub fn note_ready_db(&mut self, db: usize) {
        for k in &self.blocking_on {
            if k.0 == db && !self.ready.contains(k) {
                self.ready.push(k.clone());
            }
        }
    }

    /// Starts watching `key`; returns its current version.
    pub fn watch(&mut self, db: usize, key: &[u8]) -> u64 {
        let w = self.watched.entry((db, key.into())).or_default();
        w.watchers += 1;
        w.version
    }

    /// Version of a watched key.
    pub fn watch_version(&self, db: usize, key: &[u8]) -> u64 {
        self.watched
            .get(&(db, Bytes::from(key)))
            .map_or(0, |w| w.version)
    }

    /// Stops one watcher of `key`.
    pub fn unwatch(&mut self, db: usize, key: &[u8]) {
        let k = (db, Bytes::from(key));
        if let Some(w) = self.watched.get_mut(&k) {
            w.watchers -= 1;
            if w.watchers == 0 {
                self.watched.remove(&k);
            }
        }
    }

    /// Segment `seg` of `db` for modification of `key` (or of its expiry
    /// only, with `key` `None`). If a rewrite snapshot still holds the
    /// segment (not serialised yet), `make_mut` first gives the live
    /// keyspace its own copy: the copy-before-write. That copy shares the
    /// map's chunks with the snapshot; then the chunk `key` is in is copied
    /// (`KeyMap::unshare`), and it shares every value with the snapshot, so
    /// a write copies 1/64 of a segment's table, never its data.
    fn segment_mut(&mut self, db: usize, seg: usize, hash: Option<u64>) -> &mut Segment {
        let slot = &mut self.dbs[db].segments[seg];
        let before = Arc::as_ptr(slot);
        let segment = Arc::make_mut(slot);
        if !std::ptr::eq(before, segment) {
            self.cow.copied_segment(segment);
        }
        if let Some((chunk, entries)) = hash.and_then(|h| segment.map.unshare_hashed(h)) {
            self.cow.copied_entries(entries);
            self.supersede.copied(db * SEGMENTS_PER_DB + seg, chunk);
        }
        segment
    }

    fn is_expired(&self, db: usize, seg: usize, key: &[u8]) -> bool {
        if self.loading || self.expiry_ignored {
            return false;
        }
        let expires = &self.dbs[db].segments[seg].expires;
        !expires.is_empty() && expires.get(key).is_some_and(|&at| at <= self.now_ms)
    }

    /// Removes `key` if its TTL has passed; returns whether it did.
    fn expire_if_needed(&mut self, db: usize, seg: usize, key: &[u8]) -> bool {
        if !self.is_expired(db, seg, key) {
            return false;
        }
        if self.expiry_paused {
            return true;
        }
        let hash = self.dbs[db].segments[seg].map.hash(key);
        let segment = self.segment_mut(db, seg, Some(hash));
        segment.expires.remove(key);
        if segment.map.remove_hashed(hash, key).is_some() {
            self.dbs[db].len -= 1;
            self.slot_key_removed(db, key);
            self.touch_by(db, key, false);
            self.expired.push((db, key.into()));
            self.expired_total += 1;
            self.queue_event(events::EXPIRED, "expired", db, key);
        }
        true
    }

    /// Queues a keyspace event if its class is on.
    pub fn queue_event(&mut self, class: u32, event: &'static str, db: usize, key: &[u8]) {
        if self.notify_flags & class != 0 {
            self.events.push(events::KeyEvent {
                class,
                event,
                db,
                key: key.into(),
            });
        }
    }

    /// The value at `key`, expiring it first if due.
    pub fn get(&mut self, db: usize, key: &[u8]) -> Option<&Value> {
        let seg = segment_of(key);
        let gone = self.expire_if_needed(db, seg, key) && self.expiry_paused;
        let (now, policy) = (self.now_ms, self.access);
        let random = if policy.lfu { self.next_random() } else { 0.0 };
        // One lookup that also records the access and, for a value on PM
        // read again while recent, promotes it (`keyspace/tier.rs`),
        // unless loading or a rewrite snapshot shares the segment (then
        // the clock stays and nothing moves).
        let promotion = &mut self.promotion;
        let slot = &mut self.dbs[db].segments[seg];
        let hash = slot.map.hash(key);
        let found = if gone {
            None
        } else if self.loading || Arc::get_mut(slot).is_none() {
            slot.map.get_hashed(hash, key)
        } else {
            Arc::get_mut(slot).and_then(|segment| {
                segment.map.get_touch_with(
                    hash,
                    key,
                    |old| access::accessed(old, now, &policy, random),
                    |old, value| tier::promote_on_read(promotion, value, old, now, &policy),
                )
            })
        };
        if found.is_some() {
            self.hits += 1;
        } else {
            self.misses += 1;
        }
        found
    }

    /// Whether `key` exists (without counting a hit or miss).
    pub fn contains(&mut self, db: usize, key: &[u8]) -> bool {
        let seg = segment_of(key);
        let gone = self.expire_if_needed(db, seg, key) && self.expiry_paused;
        !gone && self.dbs[db].segments[seg].map.contains_key(key)
    }

    /// The value at `key` for modification; marks the key modified.
    pub fn get_mut(&mut self, db: usize, key: &[u8]) -> Option<&mut Value> {
        let seg = segment_of(key);
        let gone = self.expire_if_needed(db, seg, key) && self.expiry_paused;
        let map = &self.dbs[db].segments[seg].map;
        let hash = map.hash(key);
        if gone || map.get_hashed(hash, key).is_none() {
            return None;
        }
        self.touch(db, key);
        let (now, policy, loading) = (self.now_ms, self.access, self.loading);
        let random = if policy.lfu { self.next_random() } else { 0.0 };
        let map = &mut self.segment_mut(db, seg, Some(hash)).map;
        if loading {
            return map.get_mut_hashed(hash, key);
        }
        map.get_mut_touch_hashed(hash, key, |old| access::accessed(old, now, &policy, random))
    }

    /// The value at `key`, created with `make` if missing: one hash of the
    /// key and one search of its table for the lookup, the insert and the
    /// access clock together.
    pub fn get_or_insert(&mut self, db: usize, key: &[u8], make: fn() -> Value) -> &mut Value {
        let seg = segment_of(key);
        self.expire_if_needed(db, seg, key);
        self.touch(db, key);
        let (now, policy, loading) = (self.now_ms, self.access, self.loading);
        let mut generator = self.access_random;
        let hash = self.dbs[db].segments[seg].map.hash(key);
        let segment = self.segment_mut(db, seg, Some(hash));
        let clock = clock_after(now, policy, loading, &mut generator);
        let (_, inserted) = segment.map.get_or_insert_hashed(hash, key, make, clock);
        self.access_random = generator;
        if inserted {
            self.dbs[db].len += 1;
            self.slot_key_added(db, key);
            self.queue_event(events::NEW, "new", db, key);
        }
        // The segment and chunk are this keyspace's own already: nothing
        // is copied again.
        let map = &mut self.segment_mut(db, seg, Some(hash)).map;
        map.get_mut_hashed(hash, key).expect("inserted just above")
    }

    /// Stores `value` at `key`; drops any TTL unless `keep_ttl`.
    pub fn set(&mut self, db: usize, key: &[u8], value: Value, keep_ttl: bool) {
        let seg = segment_of(key);
        // An expired key left in place (a replica's, or during a pause) is
        // replaced as a new key: its old TTL does not carry over.
        let expired = self.expire_if_needed(db, seg, key);
        self.touch(db, key);
        let (now, policy, loading) = (self.now_ms, self.access, self.loading);
        let mut generator = self.access_random;
        let hash = self.dbs[db].segments[seg].map.hash(key);
        let segment = self.segment_mut(db, seg, Some(hash));
        let clock = clock_after(now, policy, loading, &mut generator);
        let inserted = segment.map.insert_touch_hashed(hash, key, value, clock);
        if (!keep_ttl || expired) && !segment.expires.is_empty() {
            segment.expires.remove(key);
        }
        self.access_random = generator;
        if inserted {
            self.dbs[db].len += 1;
            self.slot_key_added(db, key);
            self.queue_event(events::NEW, "new", db, key);
        }
    }

    /// Removes `key`; returns its value.
    pub fn remove(&mut self, db: usize, key: &[u8]) -> Option<Value> {
        let value = self.remove_untouched(db, key)?;
        self.touch(db, key);
        Some(value)
    }

    /// Removes `key` without recording the change for WATCH and tracking
    /// (the caller does, with [`Keyspace::touch`]).
    fn remove_untouched(&mut self, db: usize, key: &[u8]) -> Option<Value> {
        let seg = segment_of(key);
        self.expire_if_needed(db, seg, key);
        let hash = self.dbs[db].segments[seg].map.hash(key);
        self.dbs[db].segments[seg].map.get_hashed(hash, key)?;
        let segment = self.segment_mut(db, seg, Some(hash));
        let value = segment.map.remove_hashed(hash, key)?;
        segment.expires.remove(key);
        self.dbs[db].len -= 1;
        self.slot_key_removed(db, key);
        Some(value)
    }

    /// Removes `key` if it holds an empty collection (Redis never keeps one).
    pub fn remove_if_empty(&mut self, db: usize, key: &[u8]) {
        let seg = segment_of(key);
        let found = &self.dbs[db].segments[seg].map;
        let hash = found.hash(key);
        if found
            .get_hashed(hash, key)
            .is_some_and(Value::is_empty_collection)
        {
            let segment = self.segment_mut(db, seg, Some(hash));
            segment.map.remove_hashed(hash, key);
            segment.expires.remove(key);
            self.dbs[db].len -= 1;
            self.slot_key_removed(db, key);
        }
    }

    /// The absolute expiry of `key` in Unix ms, if it has one.
    pub fn expire_at(&self, db: usize, key: &[u8]) -> Option<i64> {
        self.dbs[db].segments[segment_of(key)]
            .expires
            .get(key)
            .copied()
    }

    /// Sets the expiry of an existing `key`.
    pub fn set_expire(&mut self, db: usize, key: &[u8], at_ms: i64) {
        let seg = segment_of(key);
        self.touch(db, key);
        if self.dbs[db].segments[seg].map.contains_key(key) {
            let expires = &mut self.segment_mut(db, seg, None).expires;
            // A key whose TTL changes keeps its entry: no owned copy of
            // the key is made for it.
            match expires.get_mut(key) {
                Some(at) => *at = at_ms,
                None => {
                    expires.insert(key.into(), at_ms);
                }
            }
            self.note_local_expire(db, key);
        }
    }

    /// Drops the TTL of `key`; returns whether it had one.
    pub fn persist(&mut self, db: usize, key: &[u8]) -> bool {
        let seg = segment_of(key);
        if !self.dbs[db].segments[seg].expires.contains_key(key) {
            return false;
        }
        let removed = self
            .segment_mut(db, seg, None)
            .expires
            .remove(key)
            .is_some();
        if removed {
            self.touch(db, key);
        }
        removed
    }

    /// Empties database `db`; returns what it held, for the caller to
    /// drop (here, or on the lazyfree thread).
    pub fn flush_db(&mut self, db: usize) -> Db {
        self.touch_flushed(db);
        self.note_ready_db(db);
        // The tracking table is emptied on every flush, tracking clients
        // or not.
        self.flushed = true;
        self.slot_db_replaced(db);
        std::mem::take(&mut self.dbs[db])
    }

    /// Swaps the contents of two databases.
    pub fn swap_db(&mut self, a: usize, b: usize) {
        self.touch_swapped(a, b);
        self.note_ready_db(a);
        self.note_ready_db(b);
        self.slot_db_replaced(a);
        self.slot_db_replaced(b);
        self.dbs.swap(a, b);
    }

    /// Keys of segment `seg` of `db` that are not expired, for SCAN/KEYS.
    pub fn segment_keys(&self, db: usize, seg: usize) -> impl Iterator<Item = &[u8]> + '_ {
        let segment = &self.dbs[db].segments[seg];
        let now = self.now_ms;
        let loading = self.loading;
        segment
            .map
            .keys()
            .filter(move |k| loading || segment.expires.get(*k).is_none_or(|&at| at > now))
    }

    /// A random non-expired key of `db`, using `random` as the source.
    pub fn random_key(&self, db: usize, mut random: impl FnMut(usize) -> usize) -> Option<Bytes> {
        let database = &self.dbs[db];
        if database.len == 0 {
            return None;
        }
        // A few random segments first: in a populated database one of them
        // holds keys, and the pick is close to uniform. A sparse database
        // (one key in 1024 segments) would defeat any fixed number of random
        // probes, so then walk every segment once from a random start: a
        // non-empty database always yields a key.
        for _ in 0..RANDOM_KEY_PROBES {
            let seg = random(SEGMENTS_PER_DB);
            if let Some(key) = self.random_key_in(db, seg, &mut random) {
                return Some(key);
            }
        }
        let start = random(SEGMENTS_PER_DB);
        (0..SEGMENTS_PER_DB)
            .find_map(|i| self.random_key_in(db, (start + i) % SEGMENTS_PER_DB, &mut random))
    }

    /// A random live key of one segment, if it has any.
    fn random_key_in(
        &self,
        db: usize,
        seg: usize,
        random: &mut impl FnMut(usize) -> usize,
    ) -> Option<Bytes> {
        let keys: Vec<&[u8]> = self.segment_keys(db, seg).collect();
        (!keys.is_empty()).then(|| keys[random(keys.len())].into())
    }

    /// Active expiry: walks segments round-robin, removing expired keys,
    /// until `segments_max` segments holding keys with a TTL were scanned
    /// or every segment was visited once. Segments without a TTL cost one
    /// emptiness check, so a sweep of all databases stays cheap. Called
    /// from the server's timer, like Redis's `activeExpireCycle`.
    pub fn active_expire(&mut self, segments_max: usize) -> usize {
        let total = self.dbs.len() * SEGMENTS_PER_DB;
        let (mut removed, mut scanned, mut visited) = (0, 0, 0);
        while visited < total && scanned < segments_max {
            let at = self.active_cursor % total;
            let (db, seg) = (at / SEGMENTS_PER_DB, at % SEGMENTS_PER_DB);
            if self.dbs[db].len == 0 {
                // No keys, so no expiry times: the rest of this database
                // is skipped without reading its segments (16 databases
                // of 1024 segments each were read 10 times a second).
                let rest = SEGMENTS_PER_DB - seg;
                self.active_cursor = (at + rest) % total;
                visited += rest;
                continue;
            }
            self.active_cursor = (at + 1) % total;
            visited += 1;
            let segment = &self.dbs[db].segments[seg];
            if segment.expires.is_empty() {
                continue;
            }
            scanned += 1;
            let due: Vec<Bytes> = segment
                .expires
                .iter()
                .filter(|(_, &t)| t <= self.now_ms)
                .map(|(k, _)| k.clone())
                .collect();
            for key in due {
                if self.expire_if_needed(db, seg, &key) {
                    removed += 1;
                }
            }
        }
        removed
    }
}

#[cfg(test)]
mod random_key_tests {
    use super::*;

    #[test]
    fn a_lone_key_is_always_found() {
        let mut ks = Keyspace::new(1);
        ks.set(0, b"x", Value::Str(b"1"[..].into()), false);
        // A "random" source that always points at the same empty segment
        // would starve a probe-only search; the walk must still find x.
        let empty = (0..SEGMENTS_PER_DB)
            .find(|&seg| ks.segment_keys(0, seg).next().is_none())
            .expect("1023 empty segments");
        let found = ks.random_key(0, |bound| empty % bound);
        assert_eq!(found.as_deref(), Some(b"x".as_slice()));
    }
}

#[cfg(test)]
#[path = "keyspace_tests.rs"]
mod tests;
