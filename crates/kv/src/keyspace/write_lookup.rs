//! The write lookup that checks a value before it marks the key
//! ([`Keyspace::get_mut_checked`]).

use super::{access, segment_of, Keyspace};
use crate::types::Value;

impl Keyspace {
    /// [`Keyspace::get_mut`] for a write that first checks the value
    /// (its type, its contents): `check` sees it before anything is
    /// marked, and an `Err` leaves the key untouched for WATCH and
    /// tracking, as a refused write must. One expiry check and one search
    /// for a command that reads and rewrites its key (INCR, HSET), where
    /// a `get` followed by a `set` searched twice; like Redis's write
    /// lookups, it counts no keyspace hit or miss. A missing key is
    /// created with `make` if given ([`Keyspace::get_or_insert`]).
    pub fn get_mut_checked<E>(
        &mut self,
        db: usize,
        key: &[u8],
        make: Option<fn() -> Value>,
        check: impl FnOnce(&Value) -> Result<(), E>,
    ) -> Result<Option<&mut Value>, E> {
        let seg = segment_of(key);
        let gone = self.expire_if_needed(db, seg, key) && self.expiry_paused;
        let map = &self.dbs[db].segments[seg].map;
        let hash = map.hash(key);
        let found = match map.get_hashed(hash, key) {
            Some(value) if !gone => {
                check(value)?;
                true
            }
            _ => false,
        };
        if !found {
            return Ok(make.map(|make| self.get_or_insert(db, key, make)));
        }
        self.touch(db, key);
        let (now, policy, loading) = (self.now_ms, self.access, self.loading);
        let random = if policy.lfu { self.next_random() } else { 0.0 };
        let map = &mut self.segment_mut(db, seg, Some(hash)).map;
        if loading {
            return Ok(map.get_mut_hashed(hash, key));
        }
        Ok(map.get_mut_touch_hashed(hash, key, |old| access::accessed(old, now, &policy, random)))
    }
}
