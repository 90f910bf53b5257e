//! The order of a sorted set with ranks: entries kept sorted in chunks of
//! at most [`CHUNK_MAX`], and a Fenwick tree over the chunks' lengths. A
//! rank, the entry at a rank, and the position of a bound are O(log n),
//! as in Redis's skip list with spans; an insertion or removal moves at
//! most a chunk's entries, and rebuilds the Fenwick tree (one word per
//! chunk) only when a chunk splits, empties or merges.

use std::cmp::Ordering;

use crate::types::Str;

/// Most entries in one chunk; a full chunk splits in two halves.
const CHUNK_MAX: usize = 128;
/// A chunk shorter than this merges with a neighbour when they fit in one.
const CHUNK_MIN: usize = CHUNK_MAX / 4;

/// A score with a total order. NaN never gets in (every path that could
/// make one is refused first); -0 and 0 compare equal, as in Redis, so
/// their members order by name.
#[derive(Clone, Copy, Debug)]
pub(super) struct Score(pub(super) f64);

impl PartialEq for Score {
    fn eq(&self, other: &Score) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Score {}

impl PartialOrd for Score {
    fn partial_cmp(&self, other: &Score) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Score {
    fn cmp(&self, other: &Score) -> Ordering {
        self.0.partial_cmp(&other.0).unwrap_or(Ordering::Equal)
    }
}

/// One member with its score, ordered by score then member bytes.
pub(super) type Entry = (Score, Str);

/// Sorted entries with O(log n) ranks.
#[derive(Clone, Debug, Default)]
pub(super) struct Order {
    /// Non-empty sorted chunks; their concatenation is sorted.
    chunks: Vec<Vec<Entry>>,
    /// Fenwick tree (1-based) over `chunks[i].len()`.
    counts: Vec<usize>,
    len: usize,
}

impl Order {
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Entries before the first for which `before` is false (`before`
    /// must be true for a prefix of the order, false after).
    pub(super) fn partition_point(&self, before: impl Fn(&Entry) -> bool) -> usize {
        let chunk = self
            .chunks
            .partition_point(|c| c.last().is_some_and(&before));
        match self.chunks.get(chunk) {
            Some(c) => self.prefix(chunk) + c.partition_point(&before),
            None => self.len,
        }
    }

    /// The rank of `entry`, if present.
    pub(super) fn rank(&self, entry: &Entry) -> Option<usize> {
        let chunk = self.chunk_for(entry)?;
        let at = self.chunks[chunk].binary_search(entry).ok()?;
        Some(self.prefix(chunk) + at)
    }

    /// Adds `entry` (not present).
    pub(super) fn insert(&mut self, entry: Entry) {
        if self.chunks.is_empty() {
            self.chunks.push(vec![entry]);
            self.len = 1;
            self.rebuild();
            return;
        }
        let chunk = self.chunk_for(&entry).unwrap_or(self.chunks.len() - 1);
        let c = &mut self.chunks[chunk];
        let at = c.binary_search(&entry).unwrap_or_else(|at| at);
        c.insert(at, entry);
        self.len += 1;
        if c.len() > CHUNK_MAX {
            let upper = c.split_off(c.len() / 2);
            self.chunks.insert(chunk + 1, upper);
            self.rebuild();
        } else {
            self.add(chunk, 1);
        }
    }

    /// Removes `entry`; returns whether it was present.
    pub(super) fn remove(&mut self, entry: &Entry) -> bool {
        let Some(chunk) = self.chunk_for(entry) else {
            return false;
        };
        let Ok(at) = self.chunks[chunk].binary_search(entry) else {
            return false;
        };
        self.take(chunk, at);
        true
    }

    /// Puts `with` in place of the member of `entry`, which it must equal
    /// byte for byte (another form of the same member: the PM tier's
    /// move), so the order is unchanged; returns whether `entry` was
    /// present.
    pub(super) fn replace_member(&mut self, entry: &Entry, with: Str) -> bool {
        debug_assert!(entry.1 == with);
        let Some(chunk) = self.chunk_for(entry) else {
            return false;
        };
        let c = &mut self.chunks[chunk];
        let Ok(at) = c.binary_search(entry) else {
            return false;
        };
        c[at].1 = with;
        true
    }

    /// Removes and returns the first (`last == false`) or last entry.
    pub(super) fn pop(&mut self, last: bool) -> Option<Entry> {
        if last {
            let chunk = self.chunks.len().checked_sub(1)?;
            let at = self.chunks[chunk].len().checked_sub(1)?;
            Some(self.take(chunk, at))
        } else {
            self.chunks.first()?;
            Some(self.take(0, 0))
        }
    }

    /// Entries of ranks `from..to` (`to` at most `len`), ascending.
    pub(super) fn slice(&self, from: usize, to: usize) -> impl Iterator<Item = &Entry> + '_ {
        let (chunk, at) = self.locate(from.min(self.len));
        let head = self.chunks.get(chunk).map_or(&[][..], |c| &c[at..]);
        let rest = self.chunks.get(chunk + 1..).unwrap_or(&[]);
        head.iter()
            .chain(rest.iter().flatten())
            .take(to.saturating_sub(from))
    }

    /// Every entry, ascending.
    pub(super) fn iter(&self) -> impl DoubleEndedIterator<Item = &Entry> + '_ {
        self.chunks.iter().flatten()
    }

    /// Removes the entry at `at` of chunk `chunk`, merging or dropping the
    /// chunk when it gets small.
    fn take(&mut self, chunk: usize, at: usize) -> Entry {
        let entry = self.chunks[chunk].remove(at);
        self.len -= 1;
        let len = self.chunks[chunk].len();
        if len == 0 {
            self.chunks.remove(chunk);
            self.rebuild();
        } else if len < CHUNK_MIN && self.merge(chunk) {
            self.rebuild();
        } else {
            self.sub(chunk, 1);
        }
        entry
    }

    /// Merges chunk `chunk` into a neighbour if both fit in one chunk.
    fn merge(&mut self, chunk: usize) -> bool {
        let len = self.chunks[chunk].len();
        if chunk > 0 && self.chunks[chunk - 1].len() + len <= CHUNK_MAX {
            let moved = self.chunks.remove(chunk);
            self.chunks[chunk - 1].extend(moved);
            return true;
        }
        if chunk + 1 < self.chunks.len() && self.chunks[chunk + 1].len() + len <= CHUNK_MAX {
            let moved = self.chunks.remove(chunk + 1);
            self.chunks[chunk].extend(moved);
            return true;
        }
        false
    }

    /// The chunk that holds `entry` or would: the first whose last entry
    /// is not below it; `None` if every entry is below it.
    fn chunk_for(&self, entry: &Entry) -> Option<usize> {
        let chunk = self
            .chunks
            .partition_point(|c| c.last().is_some_and(|last| last < entry));
        (chunk < self.chunks.len()).then_some(chunk)
    }

    /// The chunk and offset of rank `rank` (`rank == len`: one past the
    /// end), by descending the Fenwick tree.
    fn locate(&self, rank: usize) -> (usize, usize) {
        let mut at = 0;
        let mut left = rank;
        let mut step = self.counts.len().next_power_of_two();
        while step > 0 {
            let next = at + step;
            if next < self.counts.len() && self.counts[next] <= left {
                at = next;
                left -= self.counts[next];
            }
            step /= 2;
        }
        (at, left)
    }

    /// Entries in the chunks before `chunk`.
    fn prefix(&self, chunk: usize) -> usize {
        let mut i = chunk;
        let mut sum = 0;
        while i > 0 {
            sum += self.counts[i];
            i &= i - 1;
        }
        sum
    }

    fn add(&mut self, chunk: usize, n: usize) {
        let mut i = chunk + 1;
        while i < self.counts.len() {
            self.counts[i] += n;
            i += i & i.wrapping_neg();
        }
    }

    fn sub(&mut self, chunk: usize, n: usize) {
        let mut i = chunk + 1;
        while i < self.counts.len() {
            self.counts[i] -= n;
            i += i & i.wrapping_neg();
        }
    }

    /// Rebuilds the Fenwick tree from the chunks' lengths in O(chunks).
    fn rebuild(&mut self) {
        let n = self.chunks.len();
        self.counts.clear();
        self.counts.resize(n + 1, 0);
        for (i, c) in self.chunks.iter().enumerate() {
            self.counts[i + 1] += c.len();
            let parent = (i + 1) + ((i + 1) & (i + 1).wrapping_neg());
            if parent <= n {
                let carried = self.counts[i + 1];
                self.counts[parent] += carried;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(score: f64, member: &str) -> Entry {
        (Score(score), member.as_bytes().into())
    }

    /// Ranks, slices and partition points agree with a sorted vector
    /// through inserts and removals that split and merge chunks.
    #[test]
    fn agrees_with_a_sorted_vector() {
        let mut order = Order::default();
        let mut model: Vec<Entry> = Vec::new();
        let mut seed = 7u64;
        for step in 0..6000u64 {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let value = (seed >> 33) % 700;
            let e = entry((value % 50) as f64, &format!("m{value}"));
            let present = model.binary_search(&e);
            if step % 3 == 2 || present.is_ok() {
                if let Ok(at) = present {
                    model.remove(at);
                    assert!(order.remove(&e));
                }
            } else if let Err(at) = present {
                model.insert(at, e.clone());
                order.insert(e);
            }
            assert_eq!(order.len(), model.len());
            if step % 97 == 0 {
                for (rank, e) in model.iter().enumerate() {
                    assert_eq!(order.rank(e), Some(rank));
                }
                let from = model.len() / 3;
                let got: Vec<&Entry> = order.slice(from, from + 40).collect();
                let want: Vec<&Entry> = model.iter().skip(from).take(40).collect();
                assert_eq!(got, want);
                let cut = Score(20.0);
                assert_eq!(
                    order.partition_point(|e| e.0 < cut),
                    model.partition_point(|e| e.0 < cut)
                );
            }
        }
        while let Some(e) = order.pop(true) {
            assert_eq!(Some(e), model.pop());
        }
        assert!(model.is_empty());
    }
}
