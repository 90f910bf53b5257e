//! Streams in Redis 7.0's RDB form (`RDB_TYPE_STREAM_LISTPACKS_2`): one
//! listpack per block, keyed by the block's first ID as 16 big-endian
//! bytes, then the stream's counters and its groups with their pending
//! entries and consumers. Each listpack holds a master entry (live count,
//! deleted count, the master field names, a zero) and then the entries as
//! flags, ID deltas, fields or values, and a count of their elements.

use super::{packed, write_len, write_string, Reader};
use crate::types::stream::{Block, Consumer, Group, Nack, Stream, StreamId};
use crate::types::Bytes;

fn lp_backlen(out: &mut Vec<u8>, len: usize) {
    // Big groups first; every byte after the first has its top bit set,
    // so a reader going right to left knows where the field starts.
    let n = packed::backlen_size(len);
    for i in 0..n {
        let group = ((len >> (7 * (n - 1 - i))) & 127) as u8;
        out.push(if i == 0 { group } else { group | 128 });
    }
}

fn lp_int(out: &mut Vec<u8>, v: i64) {
    let start = out.len();
    if (0..=127).contains(&v) {
        out.push(v as u8);
    } else if (-4096..4096).contains(&v) {
        let u = (v as u64) & 0x1fff;
        out.extend_from_slice(&[0xc0 | (u >> 8) as u8, u as u8]);
    } else if i16::try_from(v).is_ok() {
        out.push(0xf1);
        out.extend_from_slice(&(v as i16).to_le_bytes());
    } else if (-(1 << 23)..1 << 23).contains(&v) {
        out.push(0xf2);
        out.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
    } else if i32::try_from(v).is_ok() {
        out.push(0xf3);
        out.extend_from_slice(&(v as i32).to_le_bytes());
    } else {
        out.push(0xf4);
        out.extend_from_slice(&v.to_le_bytes());
    }
    let len = out.len() - start;
    lp_backlen(out, len);
}

fn lp_str(out: &mut Vec<u8>, s: &[u8]) {
    let canonical = (s.len() <= 20)
        .then(|| crate::types::number::parse_i64(s))
        .flatten()
        .filter(|n| n.to_string().as_bytes() == s);
    if let Some(n) = canonical {
        return lp_int(out, n);
    }
    let start = out.len();
    if s.len() < 64 {
        out.push(0x80 | s.len() as u8);
    } else if s.len() < 4096 {
        out.extend_from_slice(&[0xe0 | (s.len() >> 8) as u8, s.len() as u8]);
    } else {
        out.push(0xf0);
        out.extend_from_slice(&(s.len() as u32).to_le_bytes());
    }
    out.extend_from_slice(s);
    let len = out.len() - start;
    lp_backlen(out, len);
}

/// A block as a listpack.
fn listpack(first: StreamId, block: &Block) -> Vec<u8> {
    let all = block.decode(first).unwrap_or_default();
    let masters: Vec<&[u8]> = all
        .first()
        .map(|e| e.fields.iter().map(|f| f.0).collect())
        .unwrap_or_default();
    let mut body = Vec::new();
    let mut count = 0usize;
    let live = all.iter().filter(|e| !e.deleted).count();
    for v in [live as i64, (all.len() - live) as i64, masters.len() as i64] {
        lp_int(&mut body, v);
    }
    masters.iter().for_each(|m| lp_str(&mut body, m));
    lp_int(&mut body, 0);
    count += 4 + masters.len();
    for e in &all {
        let same = e.fields.len() == masters.len()
            && e.fields.iter().zip(&masters).all(|(f, m)| f.0 == *m);
        let flags = i64::from(e.deleted) | if same { 2 } else { 0 };
        lp_int(&mut body, flags);
        lp_int(&mut body, e.id.ms.wrapping_sub(first.ms) as i64);
        lp_int(&mut body, e.id.seq.wrapping_sub(first.seq) as i64);
        let n = e.fields.len();
        if same {
            e.fields.iter().for_each(|(_, v)| lp_str(&mut body, v));
            lp_int(&mut body, (n + 3) as i64);
            count += n + 4;
        } else {
            lp_int(&mut body, n as i64);
            for (f, v) in &e.fields {
                lp_str(&mut body, f);
                lp_str(&mut body, v);
            }
            lp_int(&mut body, (2 * n + 4) as i64);
            count += 2 * n + 5;
        }
    }
    let mut out = Vec::with_capacity(body.len() + 7);
    out.extend_from_slice(&((body.len() + 7) as u32).to_le_bytes());
    out.extend_from_slice(&(count.min(65535) as u16).to_le_bytes());
    out.extend_from_slice(&body);
    out.push(0xff);
    out
}

fn id_key(id: StreamId) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&id.ms.to_be_bytes());
    k[8..].copy_from_slice(&id.seq.to_be_bytes());
    k
}

/// Appends `s` in RDB form (after its type byte).
pub(super) fn write(out: &mut Vec<u8>, s: &Stream) {
    write_len(out, s.block_count() as u64);
    for (first, block) in s.blocks() {
        write_len(out, 16);
        out.extend_from_slice(&id_key(first));
        let lp = listpack(first, block);
        write_len(out, lp.len() as u64);
        out.extend_from_slice(&lp);
    }
    for v in [
        s.length,
        s.last_id.ms,
        s.last_id.seq,
        s.first_id.ms,
        s.first_id.seq,
    ] {
        write_len(out, v);
    }
    for v in [s.max_deleted_id.ms, s.max_deleted_id.seq, s.entries_added] {
        write_len(out, v);
    }
    write_len(out, s.groups.len() as u64);
    for (name, g) in &s.groups {
        write_string(out, name);
        write_len(out, g.last_id.ms);
        write_len(out, g.last_id.seq);
        write_len(out, g.entries_read as u64);
        write_len(out, g.pel.len() as u64);
        for (id, nack) in &g.pel {
            out.extend_from_slice(&id_key(*id));
            out.extend_from_slice(&nack.delivery_time.to_le_bytes());
            write_len(out, nack.delivery_count);
        }
        write_len(out, g.consumers.len() as u64);
        for (cname, c) in &g.consumers {
            write_string(out, cname);
            out.extend_from_slice(&c.seen_time.to_le_bytes());
            write_len(out, c.pel.len() as u64);
            c.pel
                .iter()
                .for_each(|id| out.extend_from_slice(&id_key(*id)));
        }
    }
}

fn num(text: &[u8]) -> Option<i64> {
    crate::types::number::parse_i64(text)
}

/// Appends one listpack's entries (as a block of their own) to `s`.
fn read_listpack(s: &mut Stream, first: StreamId, lp: &[u8]) -> Option<()> {
    let items = packed::listpack(lp)?;
    let mut it = items.iter();
    let (_live, _deleted, nmaster) = (num(it.next()?)?, num(it.next()?)?, num(it.next()?)?);
    let masters: Vec<&[u8]> = (0..usize::try_from(nmaster).ok()?)
        .map(|_| it.next().map(Vec::as_slice))
        .collect::<Option<_>>()?;
    (num(it.next()?)? == 0).then_some(())?;
    let mut block: Option<Block> = None;
    let mut deleted_at = Vec::new();
    while let Some(flags) = it.next() {
        let flags = num(flags)?;
        let ms = first.ms.wrapping_add(num(it.next()?)? as u64);
        let seq = first.seq.wrapping_add(num(it.next()?)? as u64);
        let mut fields: Vec<(&[u8], &[u8])> = Vec::new();
        if flags & 2 != 0 {
            for m in &masters {
                fields.push((m, it.next()?));
            }
        } else {
            for _ in 0..usize::try_from(num(it.next()?)?).ok()? {
                fields.push((it.next()?, it.next()?));
            }
        }
        it.next()?;
        let b = block.get_or_insert_with(|| Block::new(&fields));
        let id = StreamId { ms, seq };
        b.push(first, id, &fields);
        if flags & 1 != 0 {
            deleted_at.push(id);
        }
    }
    let mut block = block?;
    let marks: Vec<usize> = block
        .decode(first)
        .ok()?
        .iter()
        .filter(|e| deleted_at.contains(&e.id))
        .map(|e| e.at)
        .collect();
    marks.into_iter().for_each(|at| block.mark_deleted(at));
    (block.live() > 0).then(|| s.insert_block(first, block))
}

fn read_id(r: &mut Reader<'_>) -> Option<StreamId> {
    let k = r.take(16)?;
    let mut ms = [0u8; 8];
    let mut seq = [0u8; 8];
    ms.copy_from_slice(&k[..8]);
    seq.copy_from_slice(&k[8..]);
    Some(StreamId {
        ms: u64::from_be_bytes(ms),
        seq: u64::from_be_bytes(seq),
    })
}

fn read_i64(r: &mut Reader<'_>) -> Option<i64> {
    let mut raw = [0u8; 8];
    raw.copy_from_slice(r.take(8)?);
    Some(i64::from_le_bytes(raw))
}

fn read_group(r: &mut Reader<'_>, s: &Stream, v2: bool) -> Option<Group> {
    let last = StreamId {
        ms: r.plain_len()? as u64,
        seq: r.plain_len()? as u64,
    };
    // Before version 2 groups had no read counter: it is estimated.
    let read = match v2 {
        true => r.plain_len()? as i64,
        false => s.distance_from_first_ever(last).unwrap_or(-1),
    };
    let mut g = Group::new(last, read);
    let mut unowned = std::collections::BTreeMap::new();
    for _ in 0..r.count()? {
        let id = read_id(r)?;
        let delivery_time = read_i64(r)?;
        unowned.insert(id, (delivery_time, r.plain_len()? as u64));
    }
    for _ in 0..r.count()? {
        let name = Bytes::from(r.string()?);
        let mut c = Consumer {
            seen_time: read_i64(r)?,
            ..Consumer::default()
        };
        for _ in 0..r.count()? {
            let id = read_id(r)?;
            let (delivery_time, delivery_count) = unowned.remove(&id)?;
            let consumer = name.clone();
            let nack = Nack {
                consumer,
                delivery_time,
                delivery_count,
            };
            g.pel.insert(id, nack);
            c.pel.insert(id);
        }
        g.consumers.insert(name, c);
    }
    // Every pending entry must belong to a consumer, as Redis checks.
    unowned.is_empty().then_some(g)
}

/// Reads a stream in RDB form (after its type byte): version 2 (Redis
/// 7), or with `v2` false the first version, whose missing counters are
/// derived as Redis derives them.
pub(super) fn read(r: &mut Reader<'_>, v2: bool) -> Option<Stream> {
    let mut s = Stream::default();
    for _ in 0..r.count()? {
        let key = r.string()?;
        let key: [u8; 16] = key.as_slice().try_into().ok()?;
        let mut sub = Reader { data: &key, at: 0 };
        let first = read_id(&mut sub)?;
        let lp = r.string()?;
        if read_listpack(&mut s, first, &lp).is_none() {
            super::integrity_failed("Stream listpack");
            return None;
        }
    }
    let length = r.plain_len()? as u64;
    s.last_id = read_pair(r)?;
    if v2 {
        s.first_id = read_pair(r)?;
        s.max_deleted_id = read_pair(r)?;
        s.entries_added = r.plain_len()? as u64;
    }
    let live: u64 = s.blocks().map(|(_, b)| u64::from(b.live())).sum();
    (live == length).then_some(())?;
    s.length = length;
    if !v2 {
        s.entries_added = length;
        let first = s.range(StreamId::MIN, StreamId::MAX, false).next();
        s.first_id = first.map_or(StreamId::MIN, |e| e.id);
    }
    for _ in 0..r.count()? {
        let name = Bytes::from(r.string()?);
        let g = read_group(r, &s, v2)?;
        s.groups.insert(name, g);
    }
    Some(s)
}

fn read_pair(r: &mut Reader<'_>) -> Option<StreamId> {
    Some(StreamId {
        ms: r.plain_len()? as u64,
        seq: r.plain_len()? as u64,
    })
}
