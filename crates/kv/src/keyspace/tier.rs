//! The PM tier's moves inside the keyspace (`docs/tier.md`): picking the
//! coldest movable value by the access clocks (or, when random probes
//! find none, the oldest written one), moving its bytes to the PM heap,
//! and bringing a value read again back to DRAM. Neither move
//! changes a value, so neither is logged, counted as a change for WATCH,
//! or touches a key's clock; and neither acts on a segment or chunk a
//! rewrite snapshot shares, so the tier never causes a copy-before-write.

use std::collections::VecDeque;
use std::sync::Arc;

use ferrite_pmem::slab::MAX_VALUE;
use ferrite_pmem::SlabHeap;

use super::{access, segment_of, Keyspace, SEGMENTS_PER_DB};
use crate::types::{Bytes, Str, Value};

#[path = "tier_members.rs"]
mod members;

/// The smallest string value the tier moves to PM (pmem-redis's and
/// Dragonfly's threshold): below it the handle kept in DRAM and the slot's
/// rounding would save little.
pub const TIER_MIN_VALUE: usize = 64;

/// The keyspace's side of promotion: what the dispatcher allows before
/// each command, and the count.
#[derive(Debug, Default)]
pub struct Promotion {
    /// Bytes the running command may still promote (0: promotion off,
    /// because there is no tier or DRAM has no room).
    pub allowance: usize,
    /// Values promoted since start-up.
    pub promotions: u64,
}

/// Keys written most recently, oldest first, at most [`WRITTEN_MAX`],
/// noted only while the tier is on ([`Written::start`]).
///
/// Every value that enters DRAM does so by a write (or a promotion, which
/// happens only while DRAM has room). When the DRAM a budget leaves for
/// values is a small fraction of the keys' (a 10% share of 1 KiB values
/// leaves room for about one value in 200 once the index and the handles
/// are paid), random probes seldom land on a DRAM value; without another
/// source demotion would stop while writes kept adding values, and DRAM
/// would settle above its budget. The written keys are that source: the
/// values demotion could not find were written since it last looked.
#[derive(Debug, Default)]
pub struct Written {
    keys: VecDeque<(usize, Bytes)>,
    on: bool,
}

/// Keys [`Written`] remembers: past this the oldest are forgotten (random
/// probes may still find their values).
pub const WRITTEN_MAX: usize = 4096;
/// Written keys one demotion round looks at before it gives up.
const WRITTEN_PER_ROUND: usize = 64;

impl Written {
    /// Starts noting written keys.
    pub fn start(&mut self) {
        self.on = true;
    }

    /// Notes that `key` of `db` was written (a no-op while off).
    pub(super) fn note(&mut self, db: usize, key: &[u8]) {
        if !self.on {
            return;
        }
        if self.keys.len() >= WRITTEN_MAX {
            self.keys.pop_front();
        }
        self.keys.push_back((db, key.into()));
    }

    /// Keys noted and not yet looked at.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether no key is waiting.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

/// What one demotion attempt did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Demoted {
    /// Values (a string, or members of a hash or list) moved, and their
    /// bytes.
    Moved { values: u64, bytes: usize },
    /// Nothing to move at that key (gone, shared with a snapshot, or not a
    /// DRAM string of a movable size).
    Skipped,
    /// The heap had no slot for it: the value stays in DRAM.
    Full,
}

/// Whether `s` is a DRAM string of a size the tier moves.
pub(super) fn movable_str(s: &Str) -> bool {
    !s.is_pm() && (TIER_MIN_VALUE..=MAX_VALUE).contains(&s.len())
}

/// Whether `value` is a DRAM string the tier may move, or a collection
/// holding one among the [`members::PROBE`] members from `start` on (an
/// offset into the collection, wrapped).
fn movable(value: &Value, start: usize) -> bool {
    match value {
        Value::Str(s) => movable_str(s),
        Value::Hash(_) | Value::List(_) | Value::Set(_) | Value::ZSet(_) => {
            members::probe(value, start)
        }
        _ => false,
    }
}

/// Whether `value` is a PM string or movable, or how many of a
/// collection's members are: what takes a handle's DRAM once on PM.
fn tierable(value: &Value) -> u64 {
    let counts = |s: &Str| s.is_pm() || movable_str(s);
    match value {
        Value::Str(s) => u64::from(counts(s)),
        Value::Hash(h) => h.values().filter(|s| counts(s)).count() as u64,
        Value::List(l) => l.iter().filter(|s| counts(s)).count() as u64,
        Value::Set(set) => set.iter().filter(|s| counts(s)).count() as u64,
        Value::ZSet(z) => z.members().filter(|s| counts(s)).count() as u64,
        _ => 0,
    }
}

/// DRAM a value on PM still takes: its handle, an `Arc<SlabRef>` (two
/// counts and the reference) in its allocation.
pub const PM_HANDLE_BYTES: u64 =
    (2 * std::mem::size_of::<usize>() + std::mem::size_of::<ferrite_pmem::SlabRef>()) as u64;

impl Keyspace {
    /// Values and collection members on PM or movable there: each takes
    /// [`PM_HANDLE_BYTES`] of DRAM once it is on PM. One walk of the
    /// keyspace and its hashes and lists (start-up only).
    pub fn tierable_values(&self) -> u64 {
        let mut n = 0;
        for db in 0..self.databases() {
            for segment in self.db(db).segments() {
                n += segment.map.iter().map(|(_, v)| tierable(v)).sum::<u64>();
            }
        }
        n
    }

    /// The coldest of the first `wanted` movable values found among at
    /// most `probes` random entries (over the databases holding keys),
    /// ranked by the access clocks (idle time, or the LFU counter under an
    /// LFU policy); `None` when no probe found a movable value.
    ///
    /// Entries whose value is already on PM, or too small, do not count
    /// towards `wanted`: with most values on PM, counting every probe (as
    /// eviction's sampling does) would leave one movable value a round,
    /// picked whatever its clock, and demotion would move hot values that
    /// promotion brings straight back. Each probe takes constant time
    /// ([`super::map::KeyMap::sample`]), so a keyspace with nothing to
    /// move costs `probes` lookups, not a walk of segments.
    pub fn demotion_candidate(
        &self,
        wanted: usize,
        probes: usize,
        mut random: impl FnMut(usize) -> usize,
    ) -> Option<(usize, Bytes)> {
        let dbs: Vec<usize> = (0..self.dbs.len())
            .filter(|&db| !self.dbs[db].is_empty())
            .collect();
        if dbs.is_empty() {
            return None;
        }
        let mut best: Option<(u64, usize, &[u8])> = None;
        let mut found = 0;
        for probe in 0..probes {
            let db = dbs[probe % dbs.len()];
            let segment = &self.dbs[db].segments[random(SEGMENTS_PER_DB)];
            let Some((key, value, clock)) = segment.map.sample(&mut random) else {
                continue;
            };
            if !movable(value, random(members::len(value).max(1))) {
                continue;
            }
            let score = if self.access.lfu {
                255 - u64::from(access::lfu_counter(clock, self.now_ms, &self.access))
            } else {
                access::idle_ms(clock, self.now_ms)
            };
            if best.is_none_or(|(s, _, _)| score > s) {
                best = Some((score, db, key));
            }
            found += 1;
            if found >= wanted {
                break;
            }
        }
        best.map(|(_, db, key)| (db, key.into()))
    }

    /// Moves the value at `key` into `heap` if it is a movable DRAM string,
    /// or moves up to `budget` bytes of a collection's movable members
    /// (looking at most at [`members::SCAN`] of them from `start`, an
    /// offset wrapped into the collection); only in a segment, chunk and
    /// collection no snapshot shares.
    pub fn demote(
        &mut self,
        db: usize,
        key: &[u8],
        heap: &Arc<SlabHeap>,
        budget: usize,
        start: usize,
    ) -> Demoted {
        let Some(segment) = Arc::get_mut(&mut self.dbs[db].segments[segment_of(key)]) else {
            return Demoted::Skipped;
        };
        let Some(value) = segment.map.value_mut_unshared(key) else {
            return Demoted::Skipped;
        };
        match value {
            Value::Str(s) if movable_str(s) => match s.to_pm(heap) {
                Some(moved) => {
                    *s = moved;
                    Demoted::Moved {
                        values: 1,
                        bytes: s.len(),
                    }
                }
                None => Demoted::Full,
            },
            Value::Hash(_) | Value::List(_) | Value::Set(_) | Value::ZSet(_) => {
                members::demote(value, heap, budget, start)
            }
            _ => Demoted::Skipped,
        }
    }

    /// Moves the value of the oldest written key that still holds a movable
    /// one (as [`Keyspace::demote`] does), looking at no more than
    /// [`WRITTEN_PER_ROUND`] written keys; the fallback of a demotion round
    /// whose random probes found nothing. `Skipped` when none of them
    /// holds one.
    pub fn demote_written(&mut self, heap: &Arc<SlabHeap>, budget: usize, start: usize) -> Demoted {
        for _ in 0..WRITTEN_PER_ROUND {
            let Some((db, key)) = self.written.keys.pop_front() else {
                break;
            };
            match self.demote(db, &key, heap, budget, start) {
                Demoted::Skipped => continue,
                Demoted::Full => {
                    self.written.keys.push_front((db, key));
                    return Demoted::Full;
                }
                moved @ Demoted::Moved { .. } => {
                    // A collection may hold more than one demotion moves:
                    // look at it again next time.
                    let value = self.dbs[db].segments[segment_of(&key)].map.get(&key);
                    if !matches!(value, Some(Value::Str(_))) {
                        self.written.keys.push_back((db, key));
                    }
                    return moved;
                }
            }
        }
        Demoted::Skipped
    }
}

/// Whether a key whose clock was `clock` before this access was read
/// recently: within about a second under an LRU policy (or none), with a
/// counter above a new key's under an LFU policy. A value on PM is
/// promoted only when read again while recent, so a single read of a
/// cold value (a scan, the tail of a Zipf load) leaves it on PM.
fn recent(clock: u32, now: i64, policy: &access::AccessPolicy) -> bool {
    if policy.lfu {
        access::lfu_counter(clock, now, policy) > access::LFU_INIT
    } else {
        access::idle_ms(clock, now) <= 1000
    }
}

/// Brings `value` back to DRAM if it is in PM (a string, or a
/// collection's members), its key's clock before this read (`clock`) is
/// [`recent`], and the running command's allowance covers it. Called by
/// the read path with the entry it found, so a read costs one search of
/// the map whether or not it promotes.
pub(super) fn promote_on_read(
    promotion: &mut Promotion,
    value: &mut Value,
    clock: u32,
    now: i64,
    policy: &access::AccessPolicy,
) {
    let allowance = promotion.allowance;
    if allowance == 0 {
        return;
    }
    // The cheap test first: most reads find a DRAM string.
    let candidate = match value {
        Value::Str(s) => s.is_pm() && s.len() <= allowance,
        Value::Hash(_) | Value::List(_) | Value::Set(_) | Value::ZSet(_) => true,
        _ => false,
    };
    if !candidate || !recent(clock, now, policy) {
        return;
    }
    let (promoted, bytes) = match value {
        Value::Str(s) => {
            let len = s.len();
            *s = Str::new(s);
            (1, len)
        }
        _ => members::promote(value, allowance),
    };
    promotion.allowance -= bytes;
    promotion.promotions += promoted;
}
