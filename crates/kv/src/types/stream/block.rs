//! One block of a stream: up to `stream-node-max-entries` entries packed
//! in one byte buffer, as Redis packs a listpack per radix-tree node.
//!
//! Layout (every integer a LEB128 varint):
//!
//! ```text
//! block   := nfields field*            the block's "master" field names
//!            entry*
//! field   := len bytes
//! entry   := flags ms_delta seq_delta body
//! flags   := bit 0 deleted, bit 1 same fields as the master list
//! body    := value*                    (same fields: one value per master field)
//!          | nfields (field value)*    (otherwise)
//! ```
//!
//! `ms_delta` is the entry's milliseconds minus the block's first ID's;
//! `seq_delta` is its sequence minus the first ID's, wrapping, zigzag
//! encoded (a later millisecond may start again at sequence 0). Deleting
//! an entry only sets its flag, as Redis marks listpack entries, so the
//! block's byte layout, and where a new block starts, follow Redis's.

use super::StreamId;

/// The entry was deleted (XDEL or a trim inside the block).
const FLAG_DELETED: u8 = 1;
/// The entry's fields are the block's master fields, in order.
const FLAG_SAME_FIELDS: u8 = 2;

/// Why bytes do not decode as a block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockError(pub &'static str);

/// A packed run of entries, keyed in the stream by its first entry's ID.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Block {
    /// The encoded master fields and entries.
    pub(super) buf: Vec<u8>,
    /// Entries not deleted.
    pub(super) live: u32,
    /// Entries marked deleted.
    pub(super) deleted: u32,
}

/// One decoded entry, borrowing its bytes from the block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry<'a> {
    /// Its ID.
    pub id: StreamId,
    /// Field-value pairs, in the order they were added.
    pub fields: Vec<(&'a [u8], &'a [u8])>,
    /// Where its flags byte is in the block ([`Block::mark_deleted`]).
    pub at: usize,
    /// Whether it is deleted.
    pub deleted: bool,
}

pub(super) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn zigzag(v: u64) -> u64 {
    let v = v as i64;
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> u64 {
    ((v >> 1) as i64 ^ -((v & 1) as i64)) as u64
}

/// A bounds-checked reader over a block's bytes.
pub(super) struct Reader<'a> {
    pub(super) buf: &'a [u8],
    pub at: usize,
}

impl<'a> Reader<'a> {
    pub(super) fn varint(&mut self) -> Result<u64, BlockError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *self
                .buf
                .get(self.at)
                .ok_or(BlockError("truncated varint"))?;
            self.at += 1;
            v |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(BlockError("varint too long"))
    }

    pub(super) fn slice(&mut self) -> Result<&'a [u8], BlockError> {
        let n = usize::try_from(self.varint()?).map_err(|_| BlockError("length too large"))?;
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or(BlockError("string past the end"))?;
        let s = &self.buf[self.at..end];
        self.at = end;
        Ok(s)
    }

    pub(super) fn byte(&mut self) -> Result<u8, BlockError> {
        let b = *self.buf.get(self.at).ok_or(BlockError("truncated"))?;
        self.at += 1;
        Ok(b)
    }

    /// A count of items each at least `min_bytes` long, checked against
    /// the bytes left so a corrupt count cannot reserve memory.
    pub(super) fn count(&mut self, min_bytes: usize) -> Result<usize, BlockError> {
        let n = self.varint()?;
        let left = (self.buf.len() - self.at) as u64;
        if n.saturating_mul(min_bytes as u64) > left {
            return Err(BlockError("count larger than the bytes left"));
        }
        Ok(n as usize)
    }
}

impl Block {
    /// A new block whose master fields are `fields`' names.
    pub fn new(fields: &[(&[u8], &[u8])]) -> Block {
        Block::with_capacity(fields, 0)
    }

    /// [`Block::new`] with room for `capacity` bytes, so a block filling
    /// up does not reallocate at every doubling: under malloc those
    /// abandoned smaller buffers stay as holes, which cost more than the
    /// entries themselves (Redis preallocates its listpacks likewise).
    pub fn with_capacity(fields: &[(&[u8], &[u8])], capacity: usize) -> Block {
        let mut buf = Vec::with_capacity(capacity);
        put_varint(&mut buf, fields.len() as u64);
        for (f, _) in fields {
            put_bytes(&mut buf, f);
        }
        Block {
            buf,
            live: 0,
            deleted: 0,
        }
    }

    /// Encoded bytes (what `stream-node-max-bytes` compares).
    pub fn bytes(&self) -> usize {
        self.buf.len()
    }

    /// Entries, live and deleted (what `stream-node-max-entries` counts).
    pub fn slots(&self) -> u64 {
        u64::from(self.live) + u64::from(self.deleted)
    }

    /// Live entries.
    pub fn live(&self) -> u32 {
        self.live
    }

    fn masters(&self) -> Result<(Vec<&[u8]>, usize), BlockError> {
        let mut r = Reader {
            buf: &self.buf,
            at: 0,
        };
        let n = r.count(1)?;
        let mut names = Vec::with_capacity(n);
        for _ in 0..n {
            names.push(r.slice()?);
        }
        Ok((names, r.at))
    }

    /// Appends entry `id` (after every entry already in the block, whose
    /// first ID is `first`).
    pub fn push(&mut self, first: StreamId, id: StreamId, fields: &[(&[u8], &[u8])]) {
        let same = self.masters().is_ok_and(|(names, _)| {
            names.len() == fields.len() && names.iter().zip(fields).all(|(n, (f, _))| *n == *f)
        });
        let buf = &mut self.buf;
        buf.push(if same { FLAG_SAME_FIELDS } else { 0 });
        put_varint(buf, id.ms.wrapping_sub(first.ms));
        put_varint(buf, zigzag(id.seq.wrapping_sub(first.seq)));
        if same {
            fields.iter().for_each(|(_, v)| put_bytes(buf, v));
        } else {
            put_varint(buf, fields.len() as u64);
            for (f, v) in fields {
                put_bytes(buf, f);
                put_bytes(buf, v);
            }
        }
        self.live += 1;
    }

    /// Every entry, deleted ones included, in ID order; an error for bytes
    /// that are not a block (a corrupt part).
    pub fn decode(&self, first: StreamId) -> Result<Vec<Entry<'_>>, BlockError> {
        let (names, start) = self.masters()?;
        let mut r = Reader {
            buf: &self.buf,
            at: start,
        };
        let mut out = Vec::new();
        while r.at < r.buf.len() {
            let at = r.at;
            let flags = r.byte()?;
            if flags & !(FLAG_DELETED | FLAG_SAME_FIELDS) != 0 {
                return Err(BlockError("unknown entry flags"));
            }
            let ms = first.ms.wrapping_add(r.varint()?);
            let seq = first.seq.wrapping_add(unzigzag(r.varint()?));
            let mut fields = Vec::new();
            if flags & FLAG_SAME_FIELDS != 0 {
                for name in &names {
                    fields.push((*name, r.slice()?));
                }
            } else {
                let n = r.count(2)?;
                for _ in 0..n {
                    fields.push((r.slice()?, r.slice()?));
                }
            }
            out.push(Entry {
                id: StreamId { ms, seq },
                fields,
                at,
                deleted: flags & FLAG_DELETED != 0,
            });
        }
        Ok(out)
    }

    /// Live entries in ID order (a block built in memory always decodes).
    pub fn entries(&self, first: StreamId) -> Vec<Entry<'_>> {
        let mut all = self.decode(first).unwrap_or_default();
        all.retain(|e| !e.deleted);
        all
    }

    /// Marks the entry whose flags byte is at `at` deleted.
    pub fn mark_deleted(&mut self, at: usize) {
        if let Some(flags) = self.buf.get_mut(at) {
            if *flags & FLAG_DELETED == 0 {
                *flags |= FLAG_DELETED;
                self.live -= 1;
                self.deleted += 1;
            }
        }
    }

    /// Rebuilds a block from its stored parts, checking that the bytes
    /// decode with IDs ascending from `first` and that the counts agree.
    pub fn from_parts(first: StreamId, buf: Vec<u8>) -> Result<Block, BlockError> {
        let mut block = Block {
            buf,
            live: 0,
            deleted: 0,
        };
        let entries = block.decode(first)?;
        if entries.first().is_none_or(|e| e.id != first) {
            return Err(BlockError("first entry does not carry the block's ID"));
        }
        if entries.windows(2).any(|w| w[0].id >= w[1].id) {
            return Err(BlockError("entry IDs not ascending"));
        }
        let deleted = entries.iter().filter(|e| e.deleted).count();
        let (live, deleted) = (entries.len() - deleted, deleted);
        if live == 0 {
            return Err(BlockError("block without a live entry"));
        }
        block.live = u32::try_from(live).map_err(|_| BlockError("too many entries"))?;
        block.deleted = u32::try_from(deleted).map_err(|_| BlockError("too many entries"))?;
        Ok(block)
    }

    /// Gives back spare capacity once the block is full (a sealed block
    /// never grows again): the bytes move to an allocation of their exact
    /// size, and the roomy one is freed whole, for the next block to take.
    pub fn seal(&mut self) {
        if self.buf.capacity() > self.buf.len() {
            self.buf = self.buf.as_slice().to_vec();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(ms: u64, seq: u64) -> StreamId {
        StreamId { ms, seq }
    }

    #[test]
    fn entries_round_trip_with_shared_and_own_fields() {
        let first = id(1000, 5);
        let mut b = Block::new(&[(b"a", b"1"), (b"b", b"2")]);
        b.push(first, first, &[(b"a", b"1"), (b"b", b"2")]);
        b.push(first, id(1000, 6), &[(b"x", b"9")]);
        b.push(first, id(1002, 0), &[(b"a", b""), (b"b", b"zz")]);
        let all = b.decode(first).unwrap();
        assert_eq!(all.len(), 3);
        assert_eq!(all[1].fields, vec![(&b"x"[..], &b"9"[..])]);
        assert_eq!(all[2].id, id(1002, 0));
        assert_eq!(all[2].fields[1], (&b"b"[..], &b"zz"[..]));
        b.mark_deleted(all[1].at);
        assert_eq!((b.live, b.deleted), (2, 1));
        let again = Block::from_parts(first, b.buf.clone()).unwrap();
        assert_eq!(again, b);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for bytes in [
            &[0xff_u8][..],
            &[1, 200, 1],
            &[0, 4, 0, 0],
            &[0, 0, 1, 0, 0, 5],
        ] {
            assert!(Block::from_parts(id(1, 1), bytes.to_vec()).is_err());
        }
    }
}
