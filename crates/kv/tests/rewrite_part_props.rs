//! Base parts: every value type round-trips, and arbitrary or damaged
//! bytes give an error, never a panic, a hang or a silently wrong load.

use std::collections::HashMap;

use ferrite_kv::keyspace::map::CHUNKS;
use ferrite_kv::keyspace::{segment_of, Segment, SegmentRange, SEGMENTS_PER_DB};
use ferrite_kv::rewrite::part::{PartHeader, PartReader, PartWriter};
use ferrite_kv::rewrite::FormatError;
use ferrite_kv::types::stream::{Consumer, Group, NodeLimits, Stream, StreamId};
use ferrite_kv::types::{Bytes, Shared, Str, Value, ZSet};
use proptest::prelude::*;

fn header(range: SegmentRange) -> PartHeader {
    PartHeader {
        generation: 7,
        index: 0,
        count: 1,
        range,
        created_ms: 1_700_000_000_000,
    }
}

fn bytes_strategy() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..24)
}

fn value_strategy() -> impl Strategy<Value = Value> {
    let items = || prop::collection::vec(bytes_strategy(), 1..6);
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..600).prop_map(|v| Value::Str(Str::from(v))),
        prop::collection::hash_map(bytes_strategy(), bytes_strategy(), 1..6).prop_map(|m| {
            Value::Hash(Shared::new(
                m.into_iter()
                    .map(|(k, v)| (Bytes::from(k), Str::from(v)))
                    .collect(),
            ))
        }),
        items().prop_map(|l| Value::List(Shared::new(l.into_iter().map(Str::from).collect()))),
        prop::collection::hash_set(bytes_strategy(), 1..6)
            .prop_map(|s| Value::Set(Shared::new(s.into_iter().map(Str::from).collect()))),
        prop::collection::hash_map(bytes_strategy(), -1e9f64..1e9, 1..6).prop_map(|m| {
            let mut z = ZSet::default();
            for (member, score) in m {
                z.insert(&member, score);
            }
            Value::ZSet(Shared::new(z))
        }),
        (prop::collection::vec(items(), 1..40), 1u64..8, any::<u8>()).prop_map(
            |(entries, max_entries, dels)| Value::Stream(Shared::new(stream(
                &entries,
                max_entries,
                dels
            )))
        ),
    ]
}

/// A stream of `entries` (each a flat field, value... list) in blocks of
/// `max_entries`, some deleted, with a group that has a pending entry.
fn stream(entries: &[Vec<Vec<u8>>], max_entries: u64, dels: u8) -> Stream {
    let limits = NodeLimits {
        max_entries,
        max_bytes: 0,
    };
    let mut s = Stream::default();
    for (i, flat) in entries.iter().enumerate() {
        let fields: Vec<(&[u8], &[u8])> = flat
            .chunks(2)
            .map(|p| (&p[0][..], p.get(1).map_or(&b""[..], |v| &v[..])))
            .collect();
        s.append(
            StreamId {
                ms: 10 + i as u64 / 3,
                seq: i as u64 % 3,
            },
            &fields,
            limits,
        );
    }
    for i in (0..entries.len())
        .filter(|i| (dels >> (i % 8)) & 1 == 1)
        .take(3)
    {
        s.delete(StreamId {
            ms: 10 + i as u64 / 3,
            seq: i as u64 % 3,
        });
    }
    let mut g = Group::new(StreamId { ms: 10, seq: 1 }, 2);
    let owner = Bytes::from(&b"c"[..]);
    g.consumers.insert(owner.clone(), Consumer::default());
    g.assign(
        StreamId { ms: 10, seq: 0 },
        &owner,
        1_700_000_000_000,
        Some(3),
    );
    s.groups.insert(Bytes::from(&b"g"[..]), g);
    s
}

type Entries = Vec<(Vec<u8>, Value, Option<i64>)>;

/// Groups entries by (db, segment) as the keyspace would.
fn segments(entries: &Entries, db: u16) -> Vec<(u16, u16, Segment)> {
    let mut by: HashMap<u16, Segment> = HashMap::new();
    for (key, value, expires) in entries {
        let seg = by.entry(segment_of(key) as u16).or_default();
        let key = Bytes::from(key.as_slice());
        if let Some(at) = expires {
            seg.expires.insert(key.clone(), *at);
        }
        seg.map.insert(key, value.clone());
    }
    let mut out: Vec<_> = by.into_iter().map(|(s, seg)| (db, s, seg)).collect();
    out.sort_by_key(|(d, s, _)| (*d, *s));
    out
}

/// Capture positions for `range`: runs of a hundred segments each.
fn captures_for(range: SegmentRange) -> Vec<u64> {
    (range.start..range.end)
        .map(|g| u64::from(g / 100))
        .collect()
}

fn write_part(segs: &[(u16, u16, Segment)], range: SegmentRange) -> Vec<u8> {
    let mut w = PartWriter::new(Vec::new(), &header(range)).expect("vec write");
    for (db, s, seg) in segs {
        w.write_segment(*db, *s, seg).expect("vec write");
    }
    let (out, totals) = w.finish(&captures_for(range)).expect("vec write");
    assert_eq!(totals.bytes, out.len() as u64);
    out
}

fn read_all(bytes: &[u8]) -> Result<Vec<(u16, u16, Segment)>, FormatError> {
    let mut r = PartReader::new(bytes)?;
    let mut out = Vec::new();
    while let Some(l) = r.next_segment()? {
        out.push((l.db, l.seg, l.segment));
    }
    Ok(out)
}

/// `(which segment, the chunk of which of its keys, before which segment)`
type PiecePlan = [(
    prop::sample::Index,
    prop::sample::Index,
    prop::sample::Index,
)];

/// Writes `segs` in order, and before each, pieces taken from it or later
/// segments as `plan` says (the segment a piece goes before is bounded by
/// its own). Returns the part and how many pieces it holds.
fn write_with_pieces(mut segs: Vec<(u16, u16, Segment)>, plan: &PiecePlan) -> (Vec<u8>, usize) {
    let mut pieces = 0;
    let mut w = PartWriter::new(Vec::new(), &header(full_range())).expect("vec write");
    for position in 0..segs.len() {
        for (which, chunk, before) in plan {
            let which = which.index(segs.len());
            if before.index(segs.len()).min(which) != position {
                continue;
            }
            let (db, s, seg) = &mut segs[which];
            let keys: Vec<Vec<u8>> = seg.map.keys().map(<[u8]>::to_vec).collect();
            if keys.is_empty() {
                continue;
            }
            let chunk = seg.map.chunk_index(&keys[chunk.index(keys.len())]);
            let piece = seg.map.take_chunk(chunk).expect("the test's own chunk");
            w.write_piece(*db, *s, &piece, &seg.expires)
                .expect("vec write");
            pieces += 1;
        }
        let (db, s, seg) = &segs[position];
        w.write_segment(*db, *s, seg).expect("vec write");
    }
    let captures = captures_for(full_range());
    (w.finish(&captures).expect("vec write").0, pieces)
}

fn full_range() -> SegmentRange {
    SegmentRange {
        start: 0,
        end: 16 * SEGMENTS_PER_DB as u32,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn round_trip(
        entries in prop::collection::hash_map(bytes_strategy(), (value_strategy(), prop::option::of(any::<i64>())), 0..80),
        db in 0u16..16,
    ) {
        let entries: Entries = entries.into_iter().map(|(k, (v, e))| (k, v, e)).collect();
        let segs = segments(&entries, db);
        let bytes = write_part(&segs, full_range());
        let back = read_all(&bytes).expect("a part just written reads back");
        prop_assert_eq!(back.len(), segs.len());
        for ((d1, s1, a), (d2, s2, b)) in segs.iter().zip(&back) {
            prop_assert_eq!((d1, s1), (d2, s2));
            prop_assert_eq!(&a.map, &b.map);
            prop_assert_eq!(&a.expires, &b.expires);
        }
    }

    #[test]
    fn pieces_written_ahead_read_back_into_their_segments(
        entries in prop::collection::hash_map(bytes_strategy(), (value_strategy(), prop::option::of(any::<i64>())), 0..120),
        plan in prop::collection::vec((any::<prop::sample::Index>(), any::<prop::sample::Index>(), any::<prop::sample::Index>()), 0..40),
    ) {
        let entries: Entries = entries.into_iter().map(|(k, (v, e))| (k, v, e)).collect();
        let segs = segments(&entries, 2);
        // Built again: a clone would share the maps' chunks, which could
        // then not be taken.
        let (bytes, pieces) = write_with_pieces(segments(&entries, 2), &plan);
        prop_assert!(plan.is_empty() || segs.is_empty() || pieces > 0);
        let back = read_all(&bytes).expect("a part with pieces reads back");
        let by_segment = |list: &[(u16, u16, Segment)]| {
            let mut sorted: Vec<_> = list.iter().map(|(d, s, seg)| ((*d, *s), seg.clone())).collect();
            sorted.sort_by_key(|(at, _)| *at);
            sorted
        };
        let (want, got) = (by_segment(&segs), by_segment(&back));
        prop_assert_eq!(want.len(), got.len());
        for ((at1, a), (at2, b)) in want.iter().zip(&got) {
            prop_assert_eq!(at1, at2);
            prop_assert_eq!(&a.map, &b.map);
            prop_assert_eq!(&a.expires, &b.expires);
        }
    }

    #[test]
    fn damage_is_an_error(
        entries in prop::collection::hash_map(bytes_strategy(), (value_strategy(), prop::option::of(any::<i64>())), 1..30),
        at in any::<prop::sample::Index>(),
        flip in 1u8..=255,
        cut in any::<prop::sample::Index>(),
    ) {
        let entries: Entries = entries.into_iter().map(|(k, (v, e))| (k, v, e)).collect();
        let bytes = write_part(&segments(&entries, 0), full_range());
        let mut flipped = bytes.clone();
        flipped[at.index(bytes.len())] ^= flip;
        prop_assert!(read_all(&flipped).is_err(), "a flipped byte went unnoticed");
        let short = &bytes[..cut.index(bytes.len())];
        prop_assert!(read_all(short).is_err(), "a truncated part loaded");
    }

    #[test]
    fn arbitrary_bytes_never_panic(
        mut bytes in prop::collection::vec(any::<u8>(), 0..400),
        keep_header in any::<bool>(),
    ) {
        if keep_header && bytes.len() >= 48 {
            // Start from a valid header so the block decoder is reached.
            let valid = write_part(&[], full_range());
            bytes[..48].copy_from_slice(&valid[..48]);
        }
        let _ = read_all(&bytes);
    }
}

#[test]
fn a_segment_larger_than_a_block_spans_blocks() {
    let mut seg = Segment::default();
    let mut keys = 0;
    for i in 0..200_000u32 {
        let key = format!("key:{i}");
        if segment_of(key.as_bytes()) == 5 {
            seg.map.insert(
                Bytes::from(key.as_bytes()),
                Value::Str(Str::new(&[7u8; 3000])),
            );
            keys += 1;
        }
    }
    assert!(keys * 3000 > 2 * 256 * 1024);
    let bytes = write_part(&[(3, 5, seg.clone())], full_range());
    let back = read_all(&bytes).expect("reads back");
    assert_eq!(back.len(), 1);
    assert_eq!(back[0].2.map, seg.map);
}

/// More entries in one segment than the writer gathers per batch, short
/// and long strings mixed and some with a TTL: every entry is encoded once,
/// whatever batch it fell in.
#[test]
fn a_segment_of_many_mixed_entries_round_trips() {
    let mut seg = Segment::default();
    for i in 0..800_000u32 {
        let key = format!("key:{i}");
        if segment_of(key.as_bytes()) != 11 {
            continue;
        }
        let len = [1, 100, 113, 190, 250, 1500][i as usize % 6];
        let value = vec![(i % 251) as u8; len];
        seg.map
            .insert(Bytes::from(key.as_bytes()), Value::Str(Str::new(&value)));
        if i % 7 == 0 {
            seg.expires.insert(
                Bytes::from(key.as_bytes()),
                1_700_000_000_000 + i64::from(i),
            );
        }
    }
    assert!(seg.map.len() > 600, "{} keys", seg.map.len());
    let bytes = write_part(&[(0, 11, seg.clone())], full_range());
    let back = read_all(&bytes).expect("reads back");
    assert_eq!(back.len(), 1);
    assert_eq!(back[0].2.map, seg.map);
    assert_eq!(back[0].2.expires, seg.expires);
}

#[test]
fn a_piece_after_its_segment_is_refused_and_version_1_parts_still_load() {
    let mut seg = Segment::default();
    for i in 0..50_000u32 {
        let key = format!("key:{i}");
        if segment_of(key.as_bytes()) == 9 {
            seg.map
                .insert(Bytes::from(key.as_bytes()), Value::Str(Str::new(b"v")));
        }
    }
    let mut w = PartWriter::new(Vec::new(), &header(full_range())).expect("vec write");
    w.write_segment(0, 9, &seg).expect("vec write");
    let chunk = (0..CHUNKS)
        .find_map(|c| seg.map.take_chunk(c).filter(|p| !p.is_empty()))
        .expect("a chunk with keys");
    w.write_piece(0, 9, &chunk, &seg.expires)
        .expect("vec write");
    let late = w.finish(&captures_for(full_range())).expect("vec write").0;
    let err = read_all(&late).expect_err("a piece after its segment");
    assert!(err.reason.contains("out of order"), "{err}");
    // A part without pieces nor capture table, as versions 1 and 2 wrote
    // it; a version 3 part without its table is refused.
    let part = write_part(&[(0, 9, seg.clone())], full_range());
    for version in [1u16, 2] {
        let old = as_older(&part, version);
        let mut r = PartReader::new(old.as_slice()).expect("header");
        let back = r.next_segment().expect("reads").expect("a segment");
        assert_eq!(back.segment.map, seg.map);
        assert!(r.next_segment().expect("trailer").is_none());
        assert_eq!(r.captures(), None, "version {version} has no table");
    }
    let mut no_table = as_older(&part, 2);
    set_version(&mut no_table, 3);
    let err = read_all(&no_table).expect_err("version 3 without a table");
    assert!(err.reason.contains("capture table"), "{err}");
}

fn set_version(part: &mut [u8], version: u16) {
    part[8..10].copy_from_slice(&version.to_le_bytes());
    let crc = crc32c::crc32c(&part[..44]);
    part[44..48].copy_from_slice(&crc.to_le_bytes());
}

/// `part` (version 3) as version `version` wrote it: without the capture
/// table before the trailer.
fn as_older(part: &[u8], version: u16) -> Vec<u8> {
    let trailer = part.len() - 28;
    let find = u32::from_le_bytes(*b"CAPT").to_le_bytes();
    let table = (0..trailer)
        .rev()
        .find(|&at| part[at..at + 4] == find)
        .expect("a capture table");
    let mut old = part[..table].to_vec();
    let mut t = part[trailer..].to_vec();
    t[16..24].copy_from_slice(&(table as u64).to_le_bytes());
    let crc = crc32c::crc32c(&t[..24]);
    t[24..28].copy_from_slice(&crc.to_le_bytes());
    old.extend_from_slice(&t);
    set_version(&mut old, version);
    old
}

#[test]
fn the_capture_table_reads_back_in_runs_and_must_cover_the_range() {
    let range = SegmentRange {
        start: 1000,
        end: 1350,
    };
    let part = write_part(&[], range);
    let mut r = PartReader::new(part.as_slice()).expect("header");
    assert!(r.next_segment().expect("reads").is_none());
    let runs = r.captures().expect("a table").to_vec();
    assert_eq!(runs, vec![(100, 10), (100, 11), (100, 12), (50, 13)]);
    // A writer given positions for another range refuses to write.
    let w = PartWriter::new(Vec::new(), &header(range)).expect("vec write");
    assert!(w.finish(&[1, 2, 3]).is_err());
}

#[test]
fn blocks_outside_the_header_range_are_refused() {
    let mut seg = Segment::default();
    seg.map
        .insert(Bytes::from(&b"k"[..]), Value::Str(Str::new(b"v")));
    let s = segment_of(b"k") as u16;
    let narrow = SegmentRange {
        start: 0,
        end: u32::from(s),
    };
    let bytes = write_part(&[(0, s, seg)], narrow);
    let err = read_all(&bytes).expect_err("out of range");
    assert!(err.reason.contains("outside"), "{err}");
}

mod manifests {
    use ferrite_kv::rewrite::manifest::Manifest;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn arbitrary_manifest_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
            let _ = Manifest::decode(&bytes);
        }

        /// Checksummed manifests built from lines that are valid, subtly
        /// wrong or garbage: decoding succeeds exactly when an independent
        /// rule says the lines form a manifest (bases before logs, at least
        /// one log, no file named twice, known log kinds), and then yields
        /// exactly the entries written, which encode back to the same bytes.
        #[test]
        fn checksummed_manifests_decode_exactly_when_well_formed(
            lines in prop::collection::vec(line(), 0..6),
            generation in 0u64..1000,
        ) {
            let mut body = format!("ferrite-aof-manifest 1\ngeneration {generation}\n");
            for l in &lines {
                body.push_str(&l.text);
                body.push('\n');
            }
            let crc = crc32c::crc32c(body.as_bytes());
            body.push_str(&format!("crc32c {crc:08x}\n"));
            let decoded = Manifest::decode(body.as_bytes());
            let expected = well_formed(&lines);
            prop_assert_eq!(decoded.is_ok(), expected.is_some(), "{:?}", decoded);
            if let (Ok(m), Some((bases, incrs))) = (decoded, expected) {
                prop_assert_eq!(m.generation, generation);
                let got_bases: Vec<(String, u64, u64)> =
                    m.bases.iter().map(|b| (b.file.clone(), b.bytes, b.keys)).collect();
                let got_incrs: Vec<(String, &str)> =
                    m.incrs.iter().map(|i| (i.file.clone(), i.kind.name())).collect();
                prop_assert_eq!(got_bases, bases);
                prop_assert_eq!(got_incrs, incrs);
                prop_assert_eq!(m.encode(), body.into_bytes());
            }
        }
    }

    /// One generated manifest line and what it means.
    #[derive(Clone, Debug)]
    enum Meaning {
        Base(String, u64, u64),
        Incr(String, &'static str),
        Invalid,
    }

    #[derive(Clone, Debug)]
    struct Line {
        text: String,
        meaning: Meaning,
    }

    /// File names from a small pool, so duplicates happen.
    fn file_name() -> impl Strategy<Value = String> {
        (0u8..4).prop_map(|i| format!("appendonly.aof.{i}"))
    }

    fn line() -> impl Strategy<Value = Line> {
        prop_oneof![
            3 => (file_name(), any::<u64>(), any::<u64>()).prop_map(|(f, b, k)| Line {
                text: format!("base {f}.base bytes {b} keys {k}"),
                meaning: Meaning::Base(format!("{f}.base"), b, k),
            }),
            3 => (file_name(), prop::sample::select(vec!["file", "pm"])).prop_map(|(f, kind)| Line {
                text: format!("incr {f}.incr {kind}"),
                meaning: Meaning::Incr(format!("{f}.incr"), kind),
            }),
            1 => (file_name(), "[a-z]{1,5}")
                .prop_filter("not a known kind", |(_, k)| k != "file" && k != "pm")
                .prop_map(|(f, kind)| Line {
                    text: format!("incr {f}.incr {kind}"),
                    meaning: Meaning::Invalid,
                }),
            1 => (file_name(), "[a-z ]{0,3}").prop_map(|(f, junk)| Line {
                text: format!("base {f}.base bytes x{junk} keys 1"),
                meaning: Meaning::Invalid,
            }),
            1 => "[a-z0-9 ./]{0,40}".prop_map(|junk| Line {
                text: format!("#{junk}"),
                meaning: Meaning::Invalid,
            }),
        ]
    }

    type Entries = (Vec<(String, u64, u64)>, Vec<(String, &'static str)>);

    /// The rule, stated apart from the decoder: the entries when `lines`
    /// form a manifest.
    fn well_formed(lines: &[Line]) -> Option<Entries> {
        let (mut bases, mut incrs) = (Vec::new(), Vec::new());
        let mut names = std::collections::HashSet::new();
        for l in lines {
            match &l.meaning {
                Meaning::Base(f, b, k) if incrs.is_empty() => bases.push((f.clone(), *b, *k)),
                Meaning::Incr(f, kind) => incrs.push((f.clone(), *kind)),
                Meaning::Base(..) | Meaning::Invalid => return None,
            }
            let name = match &l.meaning {
                Meaning::Base(f, ..) | Meaning::Incr(f, _) => f.clone(),
                Meaning::Invalid => unreachable!(),
            };
            if !names.insert(name) {
                return None;
            }
        }
        (!incrs.is_empty()).then_some((bases, incrs))
    }
}
