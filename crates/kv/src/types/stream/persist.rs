//! A stream's bytes in a rewrite base part (`docs/streams.md` draws the
//! layout): the counters, each block's first ID and its bytes exactly as
//! in memory, then the groups with their consumers and pending entries.
//! Reading checks every block and every cross-reference, so bytes that
//! are not a stream give an error, never a panic or a stream that breaks
//! an invariant later.

use std::collections::BTreeMap;

use super::block::{put_varint, Block, BlockError, Reader};
use super::{Consumer, Group, Nack, Stream, StreamId};
use crate::types::Bytes;

fn put_id(out: &mut Vec<u8>, id: StreamId) {
    put_varint(out, id.ms);
    put_varint(out, id.seq);
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn put_i64(out: &mut Vec<u8>, v: i64) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// Appends `s`'s encoding.
pub fn encode(out: &mut Vec<u8>, s: &Stream) {
    put_varint(out, s.length);
    put_id(out, s.last_id);
    put_id(out, s.first_id);
    put_id(out, s.max_deleted_id);
    put_varint(out, s.entries_added);
    put_varint(out, s.block_count() as u64);
    for (first, block) in s.blocks() {
        put_id(out, first);
        put_bytes(out, &block.buf);
    }
    put_varint(out, s.groups.len() as u64);
    for (name, g) in &s.groups {
        put_bytes(out, name);
        put_id(out, g.last_id);
        put_i64(out, g.entries_read);
        put_varint(out, g.consumers.len() as u64);
        for (cname, c) in &g.consumers {
            put_bytes(out, cname);
            put_i64(out, c.seen_time);
        }
        put_varint(out, g.pel.len() as u64);
        for (id, nack) in &g.pel {
            put_id(out, *id);
            put_bytes(out, &nack.consumer);
            put_i64(out, nack.delivery_time);
            put_varint(out, nack.delivery_count);
        }
    }
}

impl Reader<'_> {
    fn id(&mut self) -> Result<StreamId, BlockError> {
        Ok(StreamId {
            ms: self.varint()?,
            seq: self.varint()?,
        })
    }

    fn i64(&mut self) -> Result<i64, BlockError> {
        let end = self
            .at
            .checked_add(8)
            .filter(|&e| e <= self.buf.len())
            .ok_or(BlockError("truncated integer"))?;
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.buf[self.at..end]);
        self.at = end;
        Ok(i64::from_le_bytes(b))
    }
}

/// Reads a stream from the start of `buf`; returns it and the bytes used.
pub fn decode(buf: &[u8]) -> Result<(Stream, usize), BlockError> {
    let mut r = Reader { buf, at: 0 };
    let mut s = Stream {
        length: r.varint()?,
        last_id: r.id()?,
        first_id: r.id()?,
        max_deleted_id: r.id()?,
        entries_added: r.varint()?,
        ..Stream::default()
    };
    let blocks = r.count(3)?;
    let (mut live, mut prev_last) = (0u64, None::<StreamId>);
    for _ in 0..blocks {
        let first = r.id()?;
        let block = Block::from_parts(first, r.slice()?.to_vec())?;
        let entries = block.decode(first)?;
        let last = entries.last().map(|e| e.id).unwrap_or(first);
        if prev_last.is_some_and(|p| p >= first) || last > s.last_id {
            return Err(BlockError("blocks out of order"));
        }
        prev_last = Some(last);
        live += u64::from(block.live());
        s.insert_block(first, block);
    }
    if live != s.length || s.length > s.entries_added {
        return Err(BlockError("stream length does not match its entries"));
    }
    let groups = r.count(3)?;
    for _ in 0..groups {
        let name = Bytes::from(r.slice()?);
        let group = decode_group(&mut r)?;
        if s.groups.insert(name, group).is_some() {
            return Err(BlockError("duplicate group"));
        }
    }
    Ok((s, r.at))
}

fn decode_group(r: &mut Reader<'_>) -> Result<Group, BlockError> {
    let mut g = Group::new(r.id()?, r.i64()?);
    if g.entries_read < -1 {
        return Err(BlockError("negative entries-read"));
    }
    let consumers = r.count(9)?;
    let mut names = BTreeMap::new();
    for _ in 0..consumers {
        let name = Bytes::from(r.slice()?);
        let seen_time = r.i64()?;
        let consumer = Consumer {
            seen_time,
            ..Consumer::default()
        };
        if names.insert(name, consumer).is_some() {
            return Err(BlockError("duplicate consumer"));
        }
    }
    g.consumers = names;
    let pending = r.count(12)?;
    for _ in 0..pending {
        let id = r.id()?;
        let consumer = Bytes::from(r.slice()?);
        let delivery_time = r.i64()?;
        let delivery_count = r.varint()?;
        let Some(owner) = g.consumers.get_mut(&consumer) else {
            return Err(BlockError("pending entry of an unknown consumer"));
        };
        owner.pel.insert(id);
        let nack = Nack {
            consumer,
            delivery_time,
            delivery_count,
        };
        if g.pel.insert(id, nack).is_some() {
            return Err(BlockError("duplicate pending entry"));
        }
    }
    Ok(g)
}

#[cfg(test)]
mod tests {
    use super::super::NodeLimits;
    use super::*;

    #[test]
    fn a_stream_with_groups_round_trips_and_truncations_fail() {
        let mut s = Stream::default();
        for i in 1..=250u64 {
            let v = i.to_string();
            s.append(
                StreamId { ms: i, seq: 0 },
                &[(b"a", v.as_bytes()), (b"b", b"x")],
                NodeLimits::DEFAULT,
            );
        }
        s.delete(StreamId { ms: 7, seq: 0 });
        let mut g = Group::new(StreamId { ms: 9, seq: 0 }, 9);
        g.consumers
            .insert(Bytes::from(&b"c"[..]), Consumer::default());
        g.assign(
            StreamId { ms: 3, seq: 0 },
            &Bytes::from(&b"c"[..]),
            55,
            Some(2),
        );
        s.groups.insert(Bytes::from(&b"g"[..]), g);
        let mut out = Vec::new();
        encode(&mut out, &s);
        let (back, used) = decode(&out).unwrap();
        assert_eq!(used, out.len());
        assert_eq!(back, s);
        for cut in 0..out.len() {
            assert!(decode(&out[..cut]).is_err(), "cut at {cut}");
        }
    }

    /// An entry to add: how far the milliseconds move (0: same
    /// millisecond), the sequence step, and the fields.
    type ArbitraryEntry = (u64, u64, Vec<(Vec<u8>, Vec<u8>)>);

    fn arbitrary_entry() -> impl proptest::strategy::Strategy<Value = ArbitraryEntry> {
        use proptest::prelude::*;
        let bytes = || proptest::collection::vec(any::<u8>(), 0..12);
        (
            0u64..3,
            0u64..4,
            proptest::collection::vec((bytes(), bytes()), 1..4),
        )
    }

    proptest::proptest! {
        /// Any entries, added with small blocks, some deleted, encode and
        /// decode to the same stream; and every truncation fails.
        #[test]
        fn arbitrary_streams_round_trip(
            entries in proptest::collection::vec(arbitrary_entry(), 1..60),
            max_entries in 1u64..6,
            deletes in proptest::collection::vec(proptest::prelude::any::<proptest::sample::Index>(), 0..10),
        ) {
            let mut s = Stream::default();
            let mut id = StreamId { ms: 1, seq: 0 };
            let mut ids = Vec::new();
            for (ms_step, seq_step, fields) in &entries {
                id = match ms_step {
                    0 => StreamId { ms: id.ms, seq: id.seq + 1 + seq_step },
                    n => StreamId { ms: id.ms + n, seq: *seq_step },
                };
                let pairs: Vec<(&[u8], &[u8])> = fields.iter().map(|(f, v)| (&f[..], &v[..])).collect();
                s.append(id, &pairs, NodeLimits { max_entries, max_bytes: 0 });
                ids.push(id);
            }
            for d in &deletes {
                s.delete(ids[d.index(ids.len())]);
            }
            let mut out = Vec::new();
            encode(&mut out, &s);
            let (back, used) = decode(&out).unwrap();
            proptest::prop_assert_eq!(used, out.len());
            proptest::prop_assert_eq!(&back, &s);
            let got: Vec<_> = back.range(StreamId::MIN, StreamId::MAX, false).map(|e| e.id).collect();
            let want: Vec<_> = s.range(StreamId::MIN, StreamId::MAX, false).map(|e| e.id).collect();
            proptest::prop_assert_eq!(got, want);
            // Damage anywhere is an error or some stream, never a panic.
            for i in (0..out.len()).step_by(13) {
                let mut damaged = out.clone();
                damaged[i] ^= 0x5a;
                if let Ok((d, _)) = decode(&damaged) {
                    let _ = d.range(StreamId::MIN, StreamId::MAX, true).count();
                }
            }
        }

        /// Bytes that are not a stream give an error, never a panic.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..400)) {
            let _ = decode(&bytes);
        }
    }
}
