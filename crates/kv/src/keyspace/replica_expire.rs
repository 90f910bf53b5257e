//! Expiry of the keys a writable replica's own clients gave a TTL.
//!
//! A replica never expires its master's keys: the master sends a DEL for
//! each. Keys written with a TTL by the replica's clients (with
//! `replica-read-only no`) exist on the replica only, so no DEL will ever
//! come for them; as Redis does, the replica remembers them and removes
//! each one whose time has passed, from its timer.

use super::{segment_of, Keyspace};

impl Keyspace {
    /// Remembers `key` if a replica's client (not its master, not the
    /// replay) just gave it a TTL.
    pub(super) fn note_local_expire(&mut self, db: usize, key: &[u8]) {
        if self.track_local_expires && !self.expiry_ignored && !self.loading {
            self.local_expires.insert((db, key.into()));
        }
    }

    /// Removes the remembered keys whose TTL has passed (each goes to
    /// `expired`, for the log and the notifications), and forgets those
    /// gone or without a TTL. Returns how many were removed.
    pub fn expire_local_keys(&mut self) -> usize {
        if self.local_expires.is_empty() {
            return 0;
        }
        let now = self.now_ms;
        let mut due = Vec::new();
        self.local_expires.retain(|(db, key)| {
            let seg = segment_of(key);
            let Some(db_ref) = self.dbs.get(*db) else {
                return false;
            };
            match db_ref.segments[seg].expires.get(key.as_ref()) {
                Some(&at) if at <= now => {
                    due.push((*db, key.clone()));
                    false
                }
                Some(_) => true,
                None => false,
            }
        });
        // The replica's clients see expired keys as missing without
        // removing them; here the removal is the point.
        let paused = std::mem::replace(&mut self.expiry_paused, false);
        let mut removed = 0;
        for (db, key) in due {
            if self.expire_if_needed(db, segment_of(&key), &key) {
                removed += 1;
            }
        }
        self.expiry_paused = paused;
        removed
    }

    /// Forgets every remembered key (the server stopped being a replica,
    /// or its dataset was replaced).
    pub fn forget_local_expires(&mut self) {
        self.local_expires.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Value;

    fn string(text: &str) -> Value {
        Value::Str(text.as_bytes().to_vec().into())
    }

    #[test]
    fn only_keys_the_replicas_clients_expired_are_removed() {
        let mut ks = Keyspace::new(1);
        ks.track_local_expires = true;
        ks.expiry_paused = true;
        ks.now_ms = 1_000;
        ks.set(0, b"local", string("1"), false);
        ks.set_expire(0, b"local", 1_500);
        ks.expiry_ignored = true;
        ks.set(0, b"from-master", string("2"), false);
        ks.set_expire(0, b"from-master", 1_500);
        ks.expiry_ignored = false;
        assert_eq!(ks.expire_local_keys(), 0, "nothing is due yet");
        ks.now_ms = 2_000;
        assert_eq!(ks.expire_local_keys(), 1);
        assert_eq!(ks.expired.len(), 1);
        assert_eq!(ks.expired[0].1.as_ref(), b"local");
        assert!(ks.expiry_paused, "the replica's reads still do not remove");
        assert_eq!(ks.expire_local_keys(), 0, "forgotten once removed");
    }
}
