//! DEBUG DIGEST and DIGEST-VALUE: a 160-bit fingerprint of the dataset
//! and of single values, for tests that compare the data before and
//! after a reload or a restart.
//!
//! Like Redis's, the dataset digest does not depend on the order keys are
//! stored in (per-key digests are combined with XOR), and it is all zeros
//! for an empty dataset; each key's digest covers its name, its value and
//! its expiry time. The digests are Ferrite's own (five CRC32C lanes with
//! different seeds, not Redis's SHA1), so they compare only with digests
//! from Ferrite.

use crate::keyspace::Keyspace;
use crate::resp::reply::format_double;
use crate::types::Value;

/// A 160-bit digest.
pub(crate) type Digest = [u32; 5];

const SEEDS: Digest = [
    0x9E37_79B9,
    0x85EB_CA6B,
    0xC2B2_AE35,
    0x27D4_EB2F,
    0x1656_67B1,
];

/// Digest of `data` chained after `state`: each lane continues its own
/// CRC, and the length goes in too, so element boundaries count.
fn mix(state: &mut Digest, data: &[u8]) {
    for (lane, seed) in state.iter_mut().zip(SEEDS) {
        *lane = crc32c::crc32c_append(*lane ^ seed, &(data.len() as u64).to_le_bytes());
        *lane = crc32c::crc32c_append(*lane, data);
    }
}

fn xor(into: &mut Digest, other: &Digest) {
    for (a, b) in into.iter_mut().zip(other) {
        *a ^= b;
    }
}

/// Digest of a sequence of parts.
fn of_parts<'a>(parts: impl IntoIterator<Item = &'a [u8]>) -> Digest {
    let mut d = [0; 5];
    for part in parts {
        mix(&mut d, part);
    }
    d
}

/// The digest of a value: ordered for strings and lists, order-free
/// (XOR of each element's) for sets, hashes and sorted sets.
pub(crate) fn value_digest(value: &Value) -> Digest {
    let mut d = of_parts([value.type_name().as_bytes()]);
    let mut unordered = [0u32; 5];
    match value {
        Value::Str(s) => mix(&mut d, s),
        Value::List(l) => l.iter().for_each(|e| mix(&mut d, e)),
        Value::Set(s) => s
            .iter()
            .for_each(|m| xor(&mut unordered, &of_parts([&m[..]]))),
        Value::Hash(h) => h
            .iter()
            .for_each(|(f, v)| xor(&mut unordered, &of_parts([&f[..], &v[..]]))),
        Value::ZSet(z) => z.iter().for_each(|(m, score)| {
            let score = format_double(score);
            xor(&mut unordered, &of_parts([m, score.as_bytes()]));
        }),
        Value::Stream(s) => stream_digest(&mut d, s),
    }
    for lane in unordered {
        mix(&mut d, &lane.to_le_bytes());
    }
    d
}

/// The digest of every database's keys, values and expiry times; zeros
/// when there is no key.
pub(crate) fn dataset_digest(ks: &Keyspace) -> Digest {
    let mut total = [0; 5];
    for db in 0..ks.databases() {
        for segment in ks.db(db).segments() {
            for (key, value) in segment.map.iter() {
                let mut d = of_parts([&(db as u64).to_le_bytes()[..], key]);
                for (lane, v) in d.iter_mut().zip(value_digest(value)) {
                    *lane ^= v.rotate_left(7);
                }
                if let Some(at) = segment.expires.get(key) {
                    mix(&mut d, &at.to_le_bytes());
                }
                xor(&mut total, &d);
            }
        }
    }
    total
}

/// Forty hexadecimal digits.
pub(crate) fn hex(d: &Digest) -> String {
    d.iter().map(|lane| format!("{lane:08x}")).collect()
}

/// Mixes a stream's entries in order, then its counters and groups (with
/// their pending entries), into `d`.
fn stream_digest(d: &mut Digest, s: &crate::types::Stream) {
    use crate::types::stream::StreamId;
    for e in s.range(StreamId::MIN, StreamId::MAX, false) {
        mix(d, e.id.text().as_bytes());
        e.fields.iter().for_each(|(f, v)| {
            mix(d, f);
            mix(d, v);
        });
    }
    let counters = [s.last_id.text(), s.entries_added.to_string()];
    counters.iter().for_each(|c| mix(d, c.as_bytes()));
    for (name, g) in &s.groups {
        mix(d, name);
        mix(d, g.last_id.text().as_bytes());
        for (id, nack) in &g.pel {
            mix(d, id.text().as_bytes());
            mix(d, &nack.consumer);
        }
    }
}
