//! Sorted sets: members ordered by (score, member bytes), as Redis orders
//! them, with a member → score map for O(1) ZSCORE.
//!
//! The order is a `BTreeSet`, so rank queries walk the tree (O(rank)); a
//! skip list with spans, as Redis has, would make them O(log n). Recorded
//! as a known difference in `docs/kv.md`.

use std::cmp::Ordering;
use std::collections::{BTreeSet, HashMap};
use std::ops::Bound;

use super::Bytes;

/// A score with a total order. NaN never gets in: every path that could
/// produce one is refused before insertion.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Score(f64);

impl Eq for Score {}

impl PartialOrd for Score {
    fn partial_cmp(&self, other: &Score) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Score {
    fn cmp(&self, other: &Score) -> Ordering {
        self.0.total_cmp(&other.0)
    }
}

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

impl LexBound {
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
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ZSet {
    scores: HashMap<Bytes, f64>,
    order: BTreeSet<(Score, Bytes)>,
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

    /// Sets `member`'s score; returns whether the member is new.
    pub fn insert(&mut self, member: &[u8], score: f64) -> bool {
        debug_assert!(!score.is_nan());
        match self.scores.get_mut(member) {
            Some(old) => {
                if *old != score {
                    let key: Bytes = member.into();
                    self.order.remove(&(Score(*old), key.clone()));
                    self.order.insert((Score(score), key));
                    *old = score;
                }
                false
            }
            None => {
                let key: Bytes = member.into();
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
                true
            }
            None => false,
        }
    }

    /// 0-based rank of `member` in ascending order.
    pub fn rank(&self, member: &[u8]) -> Option<usize> {
        let score = self.score(member)?;
        let key: Bytes = member.into();
        Some(self.order.range(..(Score(score), key)).count())
    }

    /// Members with scores in ascending order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&[u8], f64)> + '_ {
        self.order.iter().map(|(s, m)| (&m[..], s.0))
    }

    /// Members of ranks `from..=to` (0-based, ascending; `to` below `len`).
    pub fn range_by_rank(
        &self,
        from: usize,
        to: usize,
    ) -> impl DoubleEndedIterator<Item = (&[u8], f64)> + '_ {
        let count = (to + 1).saturating_sub(from);
        // Walking from the nearer end halves the work for ranks near the top.
        let items: Vec<(&[u8], f64)> = if from > self.len() / 2 {
            let skip_back = self.len().saturating_sub(to + 1);
            let mut v: Vec<_> = self.iter().rev().skip(skip_back).take(count).collect();
            v.reverse();
            v
        } else {
            self.iter().skip(from).take(count).collect()
        };
        items.into_iter()
    }

    /// How many members have a score within `min..max`.
    pub fn count_by_score(&self, min: ScoreBound, max: ScoreBound) -> usize {
        self.range_by_score(min, max).count()
    }

    /// Members whose score is within `min..max`, ascending.
    pub fn range_by_score<'a>(
        &'a self,
        min: ScoreBound,
        max: ScoreBound,
    ) -> impl DoubleEndedIterator<Item = (&'a [u8], f64)> + 'a {
        let lower = (Score(min.value), Bytes::default());
        self.order
            .range((Bound::Included(lower), Bound::Unbounded))
            .map(|(s, m)| (&m[..], s.0))
            .skip_while(move |&(_, s)| min.below_min(s))
            .take_while(move |&(_, s)| !max.above_max(s))
            .collect::<Vec<_>>()
            .into_iter()
    }

    /// Members within a lexicographic range, ascending (meaningful when all
    /// scores are equal, as Redis documents).
    pub fn range_by_lex<'a>(
        &'a self,
        min: &'a LexBound,
        max: &'a LexBound,
    ) -> impl DoubleEndedIterator<Item = (&'a [u8], f64)> + 'a {
        self.iter()
            .skip_while(move |&(m, _)| min.below_min(m))
            .take_while(move |&(m, _)| !max.above_max(m))
            .collect::<Vec<_>>()
            .into_iter()
    }

    /// Removes and returns the lowest (`max == false`) or highest member.
    pub fn pop(&mut self, max: bool) -> Option<(Bytes, f64)> {
        let (score, member) = if max {
            self.order.pop_last()?
        } else {
            self.order.pop_first()?
        };
        self.scores.remove(&member);
        Some((member, score.0))
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
        assert!(z.remove(b"a"));
        assert_eq!(z.pop(true), Some((Bytes::from(&b"c"[..]), 3.0)));
        assert_eq!(z.len(), 1);
    }
}
