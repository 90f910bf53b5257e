//! Freeing large values on a thread of their own, as Redis's lazyfree:
//! UNLINK, FLUSHDB/FLUSHALL ASYNC (and DEL / FLUSH* under
//! `lazyfree-lazy-user-del` / `-user-flush`) hand what they removed to
//! this thread instead of freeing it in the event loop, so deleting a
//! collection of millions of members does not stall every client.
//!
//! What goes: a value whose freeing takes more than [`THRESHOLD`] heap
//! allocations — Redis's rule (64), counted on Ferrite's representation:
//! one per element of a list, set, hash or sorted set, one per block of a
//! stream plus, per consumer group, one and one per pending entry. A
//! string is one allocation and is always freed at once. A flushed
//! database goes whole.
//!
//! Nothing here touches the data's meaning: the value is already out of
//! the keyspace (and the delete already logged) when it is handed over;
//! the thread only drops it. `used_memory` (the allocator's counter) falls
//! as the thread frees. INFO memory's `lazyfree_pending_objects` counts
//! what was handed over and not yet freed, `lazyfreed_objects` what was
//! freed since the last CONFIG RESETSTAT.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::Arc;

use crate::types::Value;

/// Values that take more allocations than this to free go to the thread.
pub const THRESHOLD: usize = 64;

/// Something to drop on the thread, and how many objects it counts as.
struct Job {
    item: Box<dyn Send>,
    objects: u64,
}

/// The handle the server keeps; the thread starts with the first job.
#[derive(Debug, Default)]
pub struct LazyFree {
    sender: Option<Sender<Job>>,
    counters: Arc<Counters>,
}

#[derive(Debug, Default)]
struct Counters {
    pending: AtomicU64,
    freed: AtomicU64,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Job({} objects)", self.objects)
    }
}

/// How many heap allocations freeing `value` takes (see the module doc).
pub fn effort(value: &Value) -> usize {
    match value {
        Value::Str(_) => 1,
        Value::List(l) => l.len(),
        Value::Set(s) => s.len(),
        Value::Hash(h) => h.len(),
        Value::ZSet(z) => z.len(),
        Value::Stream(s) => {
            let groups: usize = s.groups.values().map(|g| 1 + g.pel.len()).sum();
            s.block_count() + groups
        }
    }
}

impl LazyFree {
    /// Frees `value` on the thread if it is large, else here.
    pub fn free_value(&mut self, value: Value) {
        if effort(&value) > THRESHOLD {
            self.hand_over(Box::new(value), 1);
        }
    }

    /// Frees `item`, which holds `objects` keys, on the thread.
    pub fn free_many<T: Send + 'static>(&mut self, item: T, objects: u64) {
        if objects > 0 {
            self.hand_over(Box::new(item), objects);
        }
    }

    fn hand_over(&mut self, item: Box<dyn Send>, objects: u64) {
        self.counters.pending.fetch_add(objects, Ordering::Relaxed);
        let job = Job { item, objects };
        let job = match self.sender() {
            Some(sender) => match sender.send(job) {
                Ok(()) => return,
                Err(failed) => failed.0,
            },
            None => job,
        };
        // No thread (it could not be started): free here, counted alike.
        finish(&self.counters, job);
    }

    /// The channel to the thread, starting it the first time.
    fn sender(&mut self) -> Option<&Sender<Job>> {
        if self.sender.is_none() {
            let (tx, rx) = channel::<Job>();
            let counters = Arc::clone(&self.counters);
            let started = std::thread::Builder::new()
                .name("ferrite-lazyfree".into())
                .spawn(move || {
                    for job in rx {
                        finish(&counters, job);
                    }
                });
            match started {
                Ok(_) => self.sender = Some(tx),
                Err(e) => tracing::warn!("cannot start the lazyfree thread: {e}"),
            }
        }
        self.sender.as_ref()
    }

    /// Objects handed over and not yet freed.
    pub fn pending(&self) -> u64 {
        self.counters.pending.load(Ordering::Relaxed)
    }

    /// Objects freed on the thread since the last reset.
    pub fn freed(&self) -> u64 {
        self.counters.freed.load(Ordering::Relaxed)
    }

    /// CONFIG RESETSTAT.
    pub fn reset_stats(&self) {
        self.counters.freed.store(0, Ordering::Relaxed);
    }
}

fn finish(counters: &Counters, job: Job) {
    let objects = job.objects;
    drop(job.item);
    counters.freed.fetch_add(objects, Ordering::Relaxed);
    counters.pending.fetch_sub(objects, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Shared, Str};

    #[test]
    fn small_values_are_freed_at_once_and_large_ones_on_the_thread() {
        let mut lazy = LazyFree::default();
        lazy.free_value(Value::Str(Str::from(&b"x"[..])));
        assert_eq!((lazy.pending(), lazy.freed()), (0, 0));
        assert!(lazy.sender.is_none(), "no thread for small values");
        let list: std::collections::VecDeque<Str> = (0..=THRESHOLD)
            .map(|i| i.to_string().into_bytes().into())
            .collect();
        lazy.free_value(Value::List(Shared::new(list)));
        // The thread frees it; wait for the counter, bounded.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while lazy.freed() < 1 {
            assert!(std::time::Instant::now() < deadline, "not freed");
            std::thread::yield_now();
        }
        assert_eq!(lazy.pending(), 0);
        lazy.reset_stats();
        assert_eq!(lazy.freed(), 0);
    }
}
