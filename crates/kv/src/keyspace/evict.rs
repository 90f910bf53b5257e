//! Choosing keys to evict as Redis does: sample `maxmemory-samples` keys
//! (all keys, or only those with a TTL) in each database and take the
//! best by the policy's rank: the longest idle (LRU), the lowest access
//! counter (LFU), the nearest expiry (TTL), or any (random).

use super::{access, Keyspace, SEGMENTS_PER_DB};
use crate::types::Bytes;
use crate::types::Value;

/// Which keys a policy may evict.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pool {
    /// Every key.
    AllKeys,
    /// Keys with a TTL.
    Volatile,
}

/// How a policy ranks the sampled keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rank {
    /// Longest idle first.
    Lru,
    /// Least frequently used first.
    Lfu,
    /// Nearest expiry first.
    Ttl,
    /// Any.
    Random,
}

/// Random probes for a segment holding keys with a TTL before walking.
const VOLATILE_PROBES: usize = 16;

impl Keyspace {
    /// A random key of `db` with a TTL.
    fn random_volatile_key(
        &self,
        db: usize,
        random: &mut impl FnMut(usize) -> usize,
    ) -> Option<Bytes> {
        let segments = &self.dbs[db].segments;
        let pick = |seg: usize, random: &mut dyn FnMut(usize) -> usize| {
            let expires = &segments[seg].expires;
            (!expires.is_empty())
                .then(|| expires.keys().nth(random(expires.len())).cloned())
                .flatten()
        };
        for _ in 0..VOLATILE_PROBES {
            if let Some(key) = pick(random(SEGMENTS_PER_DB), random) {
                return Some(key);
            }
        }
        let start = random(SEGMENTS_PER_DB);
        (0..SEGMENTS_PER_DB).find_map(|i| pick((start + i) % SEGMENTS_PER_DB, random))
    }

    /// The key to evict next under a policy, or `None` when the pool is
    /// empty: `samples` keys sampled per database, the best kept.
    pub fn eviction_victim(
        &self,
        pool: Pool,
        rank: Rank,
        samples: usize,
        mut random: impl FnMut(usize) -> usize,
    ) -> Option<(usize, Bytes)> {
        let mut best: Option<(u64, usize, Bytes)> = None;
        for db in 0..self.dbs.len() {
            let database = &self.dbs[db];
            let empty = match pool {
                Pool::AllKeys => database.is_empty(),
                Pool::Volatile => database.is_empty() || database.expires_len() == 0,
            };
            if empty {
                continue;
            }
            for _ in 0..samples.max(1) {
                let key = match pool {
                    Pool::AllKeys => self.random_key(db, &mut random),
                    Pool::Volatile => self.random_volatile_key(db, &mut random),
                };
                let Some(key) = key else { break };
                let score = self.eviction_score(db, &key, rank);
                if best.as_ref().is_none_or(|(s, _, _)| score > *s) {
                    best = Some((score, db, key));
                }
                if rank == Rank::Random {
                    break;
                }
            }
            if rank == Rank::Random && best.is_some() {
                break;
            }
        }
        best.map(|(_, db, key)| (db, key))
    }

    /// Higher is evicted first.
    fn eviction_score(&self, db: usize, key: &[u8], rank: Rank) -> u64 {
        let clock = self.access_clock(db, key).unwrap_or(0);
        match rank {
            Rank::Lru => access::idle_ms(clock, self.now_ms),
            Rank::Lfu => 255 - u64::from(access::lfu_counter(clock, self.now_ms, &self.access)),
            Rank::Ttl => {
                let at = self.expire_at(db, key).unwrap_or(i64::MAX);
                u64::MAX - at.max(0) as u64
            }
            Rank::Random => 0,
        }
    }

    /// Removes `key` as eviction does: logged as `DEL` (through the same
    /// list as expired keys, without counting it as expired). The value
    /// goes to `dispose` before the key is recorded for the log, the
    /// notifications and tracking, so that the caller can measure what
    /// the removal alone freed, as Redis measures it. Returns whether the
    /// key was there.
    pub fn evict(&mut self, db: usize, key: &[u8], dispose: impl FnOnce(Value)) -> bool {
        let Some(value) = self.remove_untouched(db, key) else {
            return false;
        };
        // Eviction is there to free memory: empty tables go too, where no
        // rewrite snapshot shares the segment.
        let seg = super::segment_of(key);
        if let Some(segment) = std::sync::Arc::get_mut(&mut self.dbs[db].segments[seg]) {
            segment.map.release_empty(key);
            if segment.expires.is_empty() {
                segment.expires.shrink_to_fit();
            }
        }
        dispose(value);
        self.touch(db, key);
        self.expired.push((db, key.into()));
        self.queue_event(super::events::EVICTED, "evicted", db, key);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Value;

    fn keyspace_with(keys: &[&str]) -> Keyspace {
        let mut ks = Keyspace::new(2);
        ks.now_ms = 10_000_000;
        for k in keys {
            ks.set(0, k.as_bytes(), Value::Str(b"v"[..].into()), false);
        }
        ks
    }

    #[test]
    fn lru_picks_the_longest_idle_of_the_sample() {
        let mut ks = keyspace_with(&["a", "b", "c"]);
        ks.set_access(0, b"b", Some(500), None);
        ks.set_access(0, b"c", Some(100), None);
        // Sampling every key (the generator walks them all).
        let mut n = 0;
        let victim = ks.eviction_victim(Pool::AllKeys, Rank::Lru, 64, |bound| {
            n += 1;
            n % bound
        });
        assert_eq!(victim.map(|(_, k)| k.to_vec()), Some(b"b".to_vec()));
    }

    #[test]
    fn volatile_pools_hold_only_keys_with_a_ttl_and_ttl_ranks_by_expiry() {
        let mut ks = keyspace_with(&["keep", "late", "soon"]);
        assert!(ks
            .eviction_victim(Pool::Volatile, Rank::Random, 5, |_| 0)
            .is_none());
        ks.set_expire(0, b"late", 20_000_000);
        ks.set_expire(0, b"soon", 15_000_000);
        let mut n = 0;
        let victim = ks.eviction_victim(Pool::Volatile, Rank::Ttl, 64, |bound| {
            n += 1;
            n % bound
        });
        assert_eq!(victim.map(|(_, k)| k.to_vec()), Some(b"soon".to_vec()));
        assert!(ks.evict(0, b"soon", drop));
        assert_eq!(ks.expired.len(), 1, "logged as DEL");
        assert_eq!(ks.expired_total, 0, "not counted as expired");
    }

    #[test]
    fn lfu_picks_the_lowest_counter() {
        let mut ks = keyspace_with(&["hot", "cold"]);
        ks.access.lfu = true;
        ks.set_access(0, b"hot", None, Some(200));
        ks.set_access(0, b"cold", None, Some(1));
        let mut n = 0;
        let victim = ks.eviction_victim(Pool::AllKeys, Rank::Lfu, 64, |bound| {
            n += 1;
            n % bound
        });
        assert_eq!(victim.map(|(_, k)| k.to_vec()), Some(b"cold".to_vec()));
    }
}
