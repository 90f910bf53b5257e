//! The server's TLS session cache (`tls-session-caching`,
//! `tls-session-cache-size`, `tls-session-cache-timeout`): a client that
//! reconnects with a session it was given resumes it and skips the full
//! handshake's key exchange and certificate checks.
//!
//! rustls offers a cache bounded in entries but without an age limit, so
//! this one keeps both: an entry older than the timeout is never handed
//! out, and the oldest entries leave first when the cache is full (as
//! OpenSSL's server cache, which Redis configures with the same three
//! settings). A size of 0 means no bound on entries, as in OpenSSL.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rustls::server::StoresServerSessions;

/// A session cache with an entry bound and an age limit.
#[derive(Debug)]
pub struct SessionCache {
    /// Most entries kept, 0 for no bound.
    size: usize,
    /// How long an entry may be resumed.
    timeout: Duration,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    entries: HashMap<Vec<u8>, (Vec<u8>, Instant)>,
    /// Keys in insertion order, oldest first (a key may be listed after
    /// its entry left: such keys are skipped when evicting).
    order: VecDeque<Vec<u8>>,
}

impl SessionCache {
    /// A cache of at most `size` entries (0: unbounded), each valid for
    /// `timeout`.
    pub fn new(size: usize, timeout: Duration) -> SessionCache {
        SessionCache {
            size,
            timeout,
            inner: Mutex::new(Inner::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves consistent maps (every
        // step below is a single insert or remove), so a poisoned lock
        // is still usable.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn fresh(&self, stored: Instant, now: Instant) -> bool {
        now.saturating_duration_since(stored) <= self.timeout
    }
}

impl StoresServerSessions for SessionCache {
    fn put(&self, key: Vec<u8>, value: Vec<u8>) -> bool {
        let now = Instant::now();
        let mut inner = self.lock();
        if let Some(entry) = inner.entries.get_mut(&key) {
            // A replaced session keeps its place in the eviction order.
            *entry = (value, now);
            return true;
        }
        if self.size > 0 {
            while inner.entries.len() >= self.size {
                let Some(oldest) = inner.order.pop_front() else {
                    break;
                };
                inner.entries.remove(&oldest);
            }
        }
        // Keys listed for entries that left are dropped from the front as
        // they come; bound the list so a cache that only replaces entries
        // does not grow it without end.
        if inner.order.len() > 2 * inner.entries.len() + 64 {
            let Inner { entries, order } = &mut *inner;
            order.retain(|k| entries.contains_key(k));
        }
        inner.order.push_back(key.clone());
        inner.entries.insert(key, (value, now));
        true
    }

    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        let now = Instant::now();
        let inner = self.lock();
        let (value, stored) = inner.entries.get(key)?;
        self.fresh(*stored, now).then(|| value.clone())
    }

    fn take(&self, key: &[u8]) -> Option<Vec<u8>> {
        let now = Instant::now();
        let mut inner = self.lock();
        let (value, stored) = inner.entries.remove(key)?;
        self.fresh(stored, now).then_some(value)
    }

    fn can_cache(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_entries_leave_when_the_cache_is_full() {
        let cache = SessionCache::new(2, Duration::from_secs(60));
        cache.put(b"a".to_vec(), b"1".to_vec());
        cache.put(b"b".to_vec(), b"2".to_vec());
        cache.put(b"c".to_vec(), b"3".to_vec());
        assert_eq!(cache.get(b"a"), None);
        assert_eq!(cache.get(b"b"), Some(b"2".to_vec()));
        assert_eq!(cache.take(b"c"), Some(b"3".to_vec()));
        assert_eq!(cache.get(b"c"), None);
    }

    #[test]
    fn an_expired_entry_is_not_resumed() {
        let cache = SessionCache::new(0, Duration::from_secs(300));
        let t0 = Instant::now();
        assert!(cache.fresh(t0, t0 + Duration::from_secs(300)));
        assert!(!cache.fresh(t0, t0 + Duration::from_secs(301)));
    }

    #[test]
    fn replacing_entries_keeps_the_key_list_bounded() {
        let cache = SessionCache::new(4, Duration::from_secs(60));
        for i in 0..10_000u32 {
            cache.put(vec![(i % 3) as u8], i.to_le_bytes().to_vec());
        }
        assert!(cache.lock().order.len() <= 2 * 3 + 64 + 1);
    }
}
