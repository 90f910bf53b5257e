//! Which WATCHed keys FLUSHDB, FLUSHALL and SWAPDB touch, and which keys
//! EXEC finds expired, as Redis 7.0 decides.
//!
//! WATCH itself removes a key that is already expired (logged as `DEL`,
//! like any expiry), so a watched key that exists but is expired at EXEC
//! expired after the WATCH: a change, and EXEC fails. A key that was
//! stale when watched is gone, so emptying or swapping its database is
//! no change for that watcher.

use super::{segment_of, Keyspace};

impl Keyspace {
    /// Whether `key` is in `db`'s table, and if so whether it is expired.
    fn presence(&self, db: usize, key: &[u8]) -> Option<bool> {
        let seg = segment_of(key);
        self.dbs[db].segments[seg]
            .map
            .contains_key(key)
            .then(|| self.is_expired(db, seg, key))
    }

    /// Whether a watched `key` exists in `db` but has expired (EXEC then
    /// fails, as the key changed since the WATCH).
    pub fn is_stale(&self, db: usize, key: &[u8]) -> bool {
        self.presence(db, key) == Some(true)
    }

    /// Bumps the watched keys of `db` that exist in it, expired or not,
    /// before FLUSHDB or FLUSHALL empties it.
    pub(super) fn touch_flushed(&mut self, db: usize) {
        let keys: Vec<_> = self
            .watched
            .keys()
            .filter(|(d, k)| *d == db && self.presence(db, k).is_some())
            .cloned()
            .collect();
        for key in keys {
            if let Some(w) = self.watched.get_mut(&key) {
                w.version += 1;
            }
        }
    }

    /// Before SWAPDB `a` `b`: bumps each watched key whose database's
    /// content for it changes (it exists there, or a live key replaces
    /// it); a missing key replaced by an expired one is no change, and
    /// that expired key is removed (logged as `DEL`) so EXEC does not
    /// find it stale.
    pub(super) fn touch_swapped(&mut self, a: usize, b: usize) {
        let mut bumps = Vec::new();
        let mut stale = Vec::new();
        for (emptied, other) in [(a, b), (b, a)] {
            for (d, key) in self.watched.keys() {
                if *d != emptied {
                    continue;
                }
                let here = self.presence(emptied, key);
                let there = self.presence(other, key);
                if here.is_some() || there == Some(false) {
                    bumps.push((*d, key.clone()));
                } else if there == Some(true) {
                    stale.push((other, key.clone()));
                }
            }
        }
        for key in bumps {
            if let Some(w) = self.watched.get_mut(&key) {
                w.version += 1;
            }
        }
        for (db, key) in stale {
            self.remove_expired_quietly(db, &key);
        }
    }

    /// Removes an expired `key` without bumping its watchers.
    fn remove_expired_quietly(&mut self, db: usize, key: &[u8]) {
        let seg = segment_of(key);
        if !self.is_expired(db, seg, key) {
            return;
        }
        let hash = self.dbs[db].segments[seg].map.hash(key);
        let segment = self.segment_mut(db, seg, Some(hash));
        segment.expires.remove(key);
        if segment.map.remove_hashed(hash, key).is_some() {
            self.dbs[db].len -= 1;
            self.slot_key_removed(db, key);
            self.expired.push((db, key.into()));
            self.expired_total += 1;
        }
    }
}
