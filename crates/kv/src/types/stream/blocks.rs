//! A stream's blocks by first ID, shared with a rewrite's capture at a
//! cost that does not depend on the stream's length.
//!
//! A capture holds the stream through its segment (`keyspace/capture.rs`),
//! so the event loop's first write to a captured stream copies the
//! stream's top level (`Shared`'s copy-on-write). With the blocks in a
//! `BTreeMap` that copy rebuilt the whole map: one node per eleven
//! blocks, a reference-count increment per block, so a stream of millions
//! of entries cost the loop a pause proportional to its length on the
//! first write after each capture.
//!
//! Here the blocks other than the last sit in a persistent B-tree
//! (`imbl::OrdMap`, nodes of 16 keys behind reference counts): copying it
//! is one increment, and a later change copies only the path to the
//! block it changes, `O(log n)` nodes of 16 entries. The last block, the
//! one every XADD appends to, is held apart, so an append touches no tree
//! node at all: it copies the last block (at most
//! `stream-node-max-bytes`) if the capture still shares it, nothing
//! otherwise. Each block stays behind its own `Arc`, so a write copies
//! only the block it changes.
//!
//! Invariant: `tail` is the block with the greatest first ID, and it is
//! `None` only when there are no blocks at all (so `sealed` is then empty
//! too). Every method keeps it; `remove` promotes the greatest sealed
//! block when the tail goes.

use std::ops::Bound;
use std::sync::Arc;

use imbl::OrdMap;

use super::block::Block;
use super::StreamId;

/// The blocks of one stream, ordered by their first entry's ID.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BlockMap {
    /// Every block but the last.
    sealed: OrdMap<StreamId, Arc<Block>>,
    /// The last block, held outside the tree so that appends reach it in
    /// constant time and never copy a tree node.
    tail: Option<(StreamId, Arc<Block>)>,
}

impl BlockMap {
    /// Number of blocks.
    pub fn len(&self) -> usize {
        self.sealed.len() + usize::from(self.tail.is_some())
    }

    /// Whether there are no blocks.
    pub fn is_empty(&self) -> bool {
        self.tail.is_none()
    }

    /// The last block and its first ID.
    pub fn last(&self) -> Option<(StreamId, &Block)> {
        self.tail.as_ref().map(|(k, b)| (*k, &**b))
    }

    /// The last block for modification (copied first if a capture still
    /// shares it).
    pub fn last_mut(&mut self) -> Option<(StreamId, &mut Block)> {
        self.tail.as_mut().map(|(k, b)| (*k, Arc::make_mut(b)))
    }

    /// The first block and its first ID.
    pub fn first(&self) -> Option<(StreamId, &Block)> {
        match self.sealed.get_min() {
            Some((k, b)) => Some((*k, &**b)),
            None => self.last(),
        }
    }

    /// Adds `block`, keyed `first`. A key above every other (appends, and
    /// a stream read back in order) becomes the new tail; any other goes
    /// into the tree, replacing a block of the same key.
    pub fn insert(&mut self, first: StreamId, block: Block) {
        let block = Arc::new(block);
        match self.tail.take() {
            None => self.tail = Some((first, block)),
            Some((last, old)) if first > last => {
                self.sealed.insert(last, old);
                self.tail = Some((first, block));
            }
            Some((last, _)) if first == last => self.tail = Some((first, block)),
            Some(tail) => {
                self.sealed.insert(first, block);
                self.tail = Some(tail);
            }
        }
    }

    /// The first ID of the block that would hold `id`: the greatest key
    /// at or below it.
    pub fn floor(&self, id: StreamId) -> Option<StreamId> {
        match &self.tail {
            Some((last, _)) if *last <= id => Some(*last),
            _ => self.sealed.get_prev(&id).map(|(k, _)| *k),
        }
    }

    /// The block keyed `first`.
    pub fn get(&self, first: StreamId) -> Option<&Block> {
        match &self.tail {
            Some((last, b)) if *last == first => Some(b),
            _ => self.sealed.get(&first).map(|b| &**b),
        }
    }

    /// The block keyed `first` for modification: the tree copies the path
    /// to it and the block itself only where a capture still shares them.
    pub fn get_mut(&mut self, first: StreamId) -> Option<&mut Block> {
        match &mut self.tail {
            Some((last, b)) if *last == first => Some(Arc::make_mut(b)),
            _ => self.sealed.get_mut(&first).map(Arc::make_mut),
        }
    }

    /// Removes the block keyed `first`; whether there was one.
    pub fn remove(&mut self, first: StreamId) -> bool {
        match &self.tail {
            Some((last, _)) if *last == first => {
                let promoted = self.sealed.get_max().map(|(k, _)| *k);
                self.tail = promoted.and_then(|k| self.sealed.remove(&k).map(|b| (k, b)));
                true
            }
            _ => self.sealed.remove(&first).is_some(),
        }
    }

    /// The blocks keyed from `from` to `to` inclusive, in order (reversible).
    pub fn range(
        &self,
        from: StreamId,
        to: StreamId,
    ) -> impl DoubleEndedIterator<Item = (StreamId, &Block)> + '_ {
        let sealed = if from <= to {
            Some(
                self.sealed
                    .range((Bound::Included(from), Bound::Included(to))),
            )
        } else {
            None
        };
        let tail = self
            .tail
            .iter()
            .filter(move |(k, _)| from <= *k && *k <= to);
        sealed
            .into_iter()
            .flatten()
            .map(|(k, b)| (*k, &**b))
            .chain(tail.map(|(k, b)| (*k, &**b)))
    }

    /// Every block, in order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (StreamId, &Block)> + '_ {
        self.range(StreamId::MIN, StreamId::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(ms: u64) -> StreamId {
        StreamId { ms, seq: 0 }
    }

    fn block(ms: u64) -> Block {
        let v = ms.to_string();
        let fields: [(&[u8], &[u8]); 1] = [(b"f", v.as_bytes())];
        let mut b = Block::new(&fields);
        b.push(id(ms), id(ms), &fields);
        b
    }

    fn keys(m: &BlockMap) -> Vec<u64> {
        m.iter().map(|(k, _)| k.ms).collect()
    }

    #[test]
    fn the_tail_is_always_the_greatest_block() {
        let mut m = BlockMap::default();
        assert!(m.is_empty() && m.first().is_none() && m.last().is_none());
        for ms in [5, 10, 20] {
            m.insert(id(ms), block(ms));
        }
        // Out of order: into the tree, the tail stays.
        m.insert(id(1), block(1));
        assert_eq!(keys(&m), vec![1, 5, 10, 20]);
        assert_eq!(m.last().map(|(k, _)| k.ms), Some(20));
        assert_eq!(m.first().map(|(k, _)| k.ms), Some(1));
        assert!(m.remove(id(20)));
        assert_eq!(m.last().map(|(k, _)| k.ms), Some(10));
        assert!(!m.remove(id(20)));
        assert!(m.remove(id(1)) && m.remove(id(5)) && m.remove(id(10)));
        assert!(m.is_empty());
        assert_eq!(m.len(), 0);
    }

    #[test]
    fn floors_and_ranges_cross_the_tree_and_the_tail() {
        let mut m = BlockMap::default();
        for ms in [10, 20, 30] {
            m.insert(id(ms), block(ms));
        }
        assert_eq!(m.floor(id(9)), None);
        assert_eq!(m.floor(id(25)), Some(id(20)));
        assert_eq!(m.floor(id(99)), Some(id(30)));
        let got: Vec<u64> = m.range(id(15), id(30)).rev().map(|(k, _)| k.ms).collect();
        assert_eq!(got, vec![30, 20]);
        assert_eq!(m.range(id(31), id(30)).count(), 0);
        assert!(m.get(id(30)).is_some() && m.get(id(20)).is_some() && m.get(id(15)).is_none());
        assert!(m.get_mut(id(10)).is_some() && m.get_mut(id(11)).is_none());
    }

    #[test]
    fn a_copy_keeps_its_blocks_while_the_original_changes() {
        let mut m = BlockMap::default();
        for ms in 1..=100 {
            m.insert(id(ms), block(ms));
        }
        let copy = m.clone();
        m.remove(id(50));
        m.remove(id(100));
        let at = m.get(id(1)).map(|b| b.entries(id(1))[0].at);
        if let (Some(b), Some(at)) = (m.get_mut(id(1)), at) {
            b.mark_deleted(at);
        }
        assert_eq!(copy.len(), 100);
        assert_eq!(m.len(), 98);
        assert_eq!(copy.get(id(1)).map(Block::live), Some(1));
        assert_eq!(m.get(id(1)).map(Block::live), Some(0));
        assert_eq!(copy.last().map(|(k, _)| k.ms), Some(100));
        assert_eq!(m.last().map(|(k, _)| k.ms), Some(99));
    }
}
