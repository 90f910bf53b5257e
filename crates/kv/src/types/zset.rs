//! Sorted sets: members ordered by (score, member bytes), as Redis orders
//! them, with a member → score map for O(1) ZSCORE and an order with
//! O(log n) ranks ([`order`]) for ZRANK, ZRANGE and ZCOUNT.

mod order;

use std::collections::HashMap;

use self::order::{Order, Score};
use super::{Bytes, Str};

/// One end of a score range (`1`, `(1`, `-inf`, `+inf`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScoreBound {
    /// The score.
    pub value: f64,
    /// Whether the end itself is excluded (`(`).
    pub exclusive: bool,
}

/// One end of a lexicographic range (`[a`, `(a`, `-`, `+`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LexBound {
    /// `-`: before every member.
    Min,
    /// `+`: after every member.
    Max,
    /// `[x` (inclusive) or `(x` (exclusive).
    Value {
        /// The member bytes.
        member: Vec<u8>,
        /// Whether `x` itself is excluded.
        exclusive: bool,
    },
}

impl ScoreBound {
    fn below_min(&self, score: f64) -> bool {
        if self.exclusive {
            score <= self.value
        } else {
            score < self.value
        }
    }

    fn above_max(&self, score: f64) -> bool {
        if self.exclusive {
            score >= self.value
        } else {
            score > self.value
        }
    }
}

/// Most members of a sorted set Redis keeps as a listpack by default
/// (`zset-max-listpack-entries`).
const LISTPACK_ENTRIES_MAX: usize = 128;

impl LexBound {
    /// Whether no member can lie between `min` and `max`: `min` after
    /// `max`, or both the same name with one end exclusive.
    fn empty_between(min: &LexBound, max: &LexBound) -> bool {
        use std::cmp::Ordering;
        let order = |b: &LexBound| match b {
            LexBound::Min => (0, None),
            LexBound::Value { member, .. } => (1, Some(member.clone())),
            LexBound::Max => (2, None),
        };
        let exclusive = |b: &LexBound| {
            matches!(
                b,
                LexBound::Value {
                    exclusive: true,
                    ..
                }
            )
        };
        match order(min).cmp(&order(max)) {
            Ordering::Greater => true,
            Ordering::Equal => exclusive(min) || exclusive(max),
            Ordering::Less => false,
        }
    }

    fn below_min(&self, member: &[u8]) -> bool {
        match self {
            LexBound::Min => false,
            LexBound::Max => true,
            LexBound::Value {
                member: m,
                exclusive,
            } => {
                if *exclusive {
                    member <= m.as_slice()
                } else {
                    member < m.as_slice()
                }
            }
        }
    }

    fn above_max(&self, member: &[u8]) -> bool {
        match self {
            LexBound::Min => true,
            LexBound::Max => false,
            LexBound::Value {
                member: m,
                exclusive,
            } => {
                if *exclusive {
                    member >= m.as_slice()
                } else {
                    member > m.as_slice()
                }
            }
        }
    }
}

/// A sorted set.
#[derive(Clone, Debug, Default)]
pub struct ZSet {
    scores: HashMap<Str, f64>,
    order: Order,
}

/// Two sorted sets are equal when they hold the same members with the
/// same scores, however their order happens to be chunked.
impl PartialEq for ZSet {
    fn eq(&self, other: &ZSet) -> bool {
        self.scores == other.scores
    }
}

impl ZSet {
    /// Number of members.
    pub fn len(&self) -> usize {
        self.scores.len()
    }

    /// Whether there is no member.
    pub fn is_empty(&self) -> bool {
        self.scores.is_empty()
    }

    /// The score of `member`.
    pub fn score(&self, member: &[u8]) -> Option<f64> {
        self.scores.get(member).copied()
    }

    /// Sets `member`'s score (exactly: -0 replaces 0); returns whether the
    /// member is new.
    pub fn insert(&mut self, member: &[u8], score: f64) -> bool {
        debug_assert!(!score.is_nan());
        match self.scores.get_key_value(member) {
            Some((key, &old)) => {
                if old.to_bits() != score.to_bits() {
                    // The member keeps its form (DRAM or PM) and its one
                    // allocation, shared by the table and the order.
                    let key = key.clone();
                    self.order.remove(&(Score(old), key.clone()));
                    self.order.insert((Score(score), key.clone()));
                    self.scores.insert(key, score);
                }
                false
            }
            None => {
                let key = Str::new(member);
                self.scores.insert(key.clone(), score);
                self.order.insert((Score(score), key));
                true
            }
        }
    }

    /// Removes `member`; returns whether it was there.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        match self.scores.remove_entry(member) {
            Some((key, score)) => {
                self.order.remove(&(Score(score), key));
                debug_assert_eq!(self.order.len(), self.scores.len());
                true
            }
            None => false,
        }
    }

    /// 0-based rank of `member` in ascending order, in O(log n).
    pub fn rank(&self, member: &[u8]) -> Option<usize> {
        let score = self.score(member)?;
        self.order.rank(&(Score(score), Str::new(member)))
    }

    /// Members with scores in ascending order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&[u8], f64)> + '_ {
        self.order.iter().map(|(s, m)| (&m[..], s.0))
    }

    /// Members of ranks `from..=to` (0-based, ascending), in O(log n) plus
    /// the members returned.
    pub fn range_by_rank(
        &self,
        from: usize,
        to: usize,
    ) -> impl DoubleEndedIterator<Item = (&[u8], f64)> + '_ {
        let items: Vec<(&[u8], f64)> = self
            .order
            .slice(from, to.saturating_add(1))
            .map(|(s, m)| (&m[..], s.0))
            .collect();
        items.into_iter()
    }

    /// The ranks `lo..hi` of the members whose score is within
    /// `min..max`, in O(log n).
    pub fn score_ranks(&self, min: ScoreBound, max: ScoreBound) -> (usize, usize) {
        let lo = self.order.partition_point(|(s, _)| min.below_min(s.0));
        let hi = self.order.partition_point(|(s, _)| !max.above_max(s.0));
        (lo, hi.max(lo))
    }

    /// How many members have a score within `min..max`, in O(log n).
    pub fn count_by_score(&self, min: ScoreBound, max: ScoreBound) -> usize {
        let (lo, hi) = self.score_ranks(min, max);
        hi - lo
    }

    /// Members whose score is within `min..max`, ascending.
    pub fn range_by_score(
        &self,
        min: ScoreBound,
        max: ScoreBound,
    ) -> impl DoubleEndedIterator<Item = (&[u8], f64)> + '_ {
        let (lo, hi) = self.score_ranks(min, max);
        self.ranks(lo, hi)
    }

    /// Members within a lexicographic range, ascending (meaningful when all
    /// scores are equal, as Redis documents).
    pub fn range_by_lex<'a>(
        &'a self,
        min: &LexBound,
        max: &LexBound,
    ) -> impl DoubleEndedIterator<Item = (&'a [u8], f64)> + 'a {
        let (lo, hi) = self.lex_ranks(min, max, false);
        self.ranks(lo, hi)
    }

    /// The ranks `lo..hi` of the members within a lexicographic range,
    /// found from the low end (or the high end, `rev`). When scores differ
    /// the order is not by name and the answer depends on how the range is
    /// searched; Redis scans a set this small (a listpack) in order, and
    /// this does the same, so even such ranges agree. A larger set is
    /// searched in O(log n), as Redis's skip list is.
    pub fn lex_ranks(&self, min: &LexBound, max: &LexBound, rev: bool) -> (usize, usize) {
        // Redis first checks the range against the first and last members.
        let (Some((first, _)), Some((last, _))) = (self.iter().next(), self.iter().next_back())
        else {
            return (0, 0);
        };
        if LexBound::empty_between(min, max) || min.below_min(last) || max.above_max(first) {
            return (0, 0);
        }
        if self.len() > LISTPACK_ENTRIES_MAX {
            let lo = self.order.partition_point(|(_, m)| min.below_min(m));
            let hi = self.order.partition_point(|(_, m)| !max.above_max(m));
            return (lo, hi.max(lo));
        }
        let members: Vec<&[u8]> = self.iter().map(|(m, _)| m).collect();
        if rev {
            let Some(hi) = members.iter().rposition(|m| !max.above_max(m)) else {
                return (0, 0);
            };
            let run = members[..=hi]
                .iter()
                .rev()
                .take_while(|m| !min.below_min(m))
                .count();
            (hi + 1 - run, hi + 1)
        } else {
            let Some(lo) = members.iter().position(|m| !min.below_min(m)) else {
                return (0, 0);
            };
            let run = members[lo..]
                .iter()
                .take_while(|m| !max.above_max(m))
                .count();
            (lo, lo + run)
        }
    }

    /// Members of ranks `lo..hi`.
    fn ranks(&self, lo: usize, hi: usize) -> std::vec::IntoIter<(&[u8], f64)> {
        let items: Vec<(&[u8], f64)> = self
            .order
            .slice(lo, hi)
            .map(|(s, m)| (&m[..], s.0))
            .collect();
        items.into_iter()
    }

    /// The members as stored, in the score table's order (none in
    /// particular), for code that needs their form (DRAM or PM) rather
    /// than their bytes.
    pub fn members(&self) -> impl Iterator<Item = &Str> + Clone + '_ {
        self.scores.keys()
    }

    /// Puts `with`, the same bytes as `member` in another form (the PM
    /// tier's move), in place of `member` in the score table and the
    /// order, so no copy of the old form is left; returns whether
    /// `member` was there. The lookups use `member`'s bytes, so a move to
    /// PM reads the new form only to hash it into the table.
    pub fn replace_member(&mut self, member: &Str, with: Str) -> bool {
        let Some((old, score)) = self.scores.remove_entry(&member[..]) else {
            return false;
        };
        self.order
            .replace_member(&(Score(score), old), with.clone());
        self.scores.insert(with, score);
        true
    }

    /// Removes and returns the lowest (`max == false`) or highest member.
    pub fn pop(&mut self, max: bool) -> Option<(Bytes, f64)> {
        let (score, member) = self.order.pop(max)?;
        self.scores.remove(&member);
        Some((Bytes::from(&member[..]), score.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_rank_and_ranges() {
        let mut z = ZSet::default();
        assert!(z.insert(b"b", 2.0));
        assert!(z.insert(b"a", 2.0));
        assert!(z.insert(b"c", 1.0));
        assert!(!z.insert(b"c", 3.0));
        let members: Vec<_> = z.iter().map(|(m, _)| m.to_vec()).collect();
        assert_eq!(members, vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]);
        assert_eq!(z.rank(b"c"), Some(2));
        let min = ScoreBound {
            value: 2.0,
            exclusive: true,
        };
        let max = ScoreBound {
            value: f64::INFINITY,
            exclusive: false,
        };
        assert_eq!(z.range_by_score(min, max).count(), 1);
        assert_eq!(z.count_by_score(min, max), 1);
        assert_eq!(z.range_by_rank(1, 2).count(), 2);
        assert!(z.remove(b"a"));
        assert_eq!(z.pop(true), Some((Bytes::from(&b"c"[..]), 3.0)));
        assert_eq!(z.len(), 1);
    }
}
