//! The RDB producer (`rdb/produce.rs`, `docs/rdb.md`): a snapshot keeps
//! the dataset of its moment while the keyspace changes, chunks stay
//! bounded, the stream decodes back (keys, expiries, databases, libraries,
//! the history's auxiliary fields, the checksum), and a stop ends it.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use ferrite_kv::keyspace::Keyspace;
use ferrite_kv::rdb::dump::leading_aux;
use ferrite_kv::rdb::file::{decode, Entry};
use ferrite_kv::rdb::produce::{encode, Controls, History, Sink, Snapshot, CHUNK_BYTES};
use ferrite_kv::types::{Bytes, Shared, Str, Value};
use proptest::prelude::*;

/// Collects the chunks a producer hands over.
#[derive(Default)]
struct Chunks(Vec<Vec<u8>>);

impl Sink for Chunks {
    fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.0.push(bytes.to_vec());
        Ok(())
    }
}

type Contents = BTreeMap<(usize, Vec<u8>), (Value, Option<i64>)>;

fn decoded(bytes: &[u8]) -> (Contents, Vec<Vec<u8>>) {
    let (mut keys, mut libs) = (BTreeMap::new(), Vec::new());
    decode(bytes, 16, |e| match e {
        Entry::Key {
            db,
            key,
            value,
            expire_ms,
        } => {
            keys.insert((db, key), (value, expire_ms));
        }
        Entry::Library(code) => libs.push(code),
    })
    .expect("the producer's stream decodes");
    (keys, libs)
}

fn contents(ks: &Keyspace) -> Contents {
    let mut out = BTreeMap::new();
    for db in 0..ks.databases() {
        for segment in ks.db(db).segments() {
            for (key, value) in segment.map.iter() {
                let expiry = segment.expires.get(key).copied();
                out.insert((db, key.to_vec()), (value.clone(), expiry));
            }
        }
    }
    out
}

fn string(text: &str) -> Value {
    Value::Str(Str::new(text.as_bytes()))
}

fn produce(snapshot: Snapshot, checksum: bool) -> Vec<Vec<u8>> {
    let mut chunks = Chunks::default();
    encode(snapshot, checksum, &Controls::default(), &mut chunks).expect("encodes");
    chunks.0
}

#[test]
fn the_snapshot_keeps_its_moment_while_the_keyspace_changes() {
    let mut ks = Keyspace::new(16);
    for i in 0..20_000 {
        ks.set(
            i % 4,
            format!("k{i}").as_bytes(),
            string(&format!("v{i}")),
            false,
        );
    }
    ks.set_expire(1, b"k1", 4_000_000_000_000);
    let before = contents(&ks);
    let snapshot = Snapshot::take(&ks, Vec::new(), None, 0);
    // Writes after the snapshot: overwrite, delete, add, expire.
    for i in (0..20_000).step_by(3) {
        ks.set(i % 4, format!("k{i}").as_bytes(), string("changed"), false);
    }
    for i in (1..20_000).step_by(7) {
        ks.remove(i % 4, format!("k{i}").as_bytes());
    }
    ks.set(5, b"new", string("later"), false);
    ks.set_expire(2, b"k2", 1);
    let chunks = produce(snapshot, true);
    let (got, _) = decoded(&chunks.concat());
    assert_eq!(got, before);
    assert_ne!(contents(&ks), before, "the live keyspace did change");
}

#[test]
fn chunks_are_bounded_and_the_stream_names_its_history() {
    let mut ks = Keyspace::new(16);
    for i in 0..5_000 {
        ks.set(
            0,
            format!("key:{i}").as_bytes(),
            string(&"v".repeat(500)),
            false,
        );
    }
    // Expired at the snapshot's time: written all the same, as Redis.
    ks.set(3, b"gone", string("x"), false);
    ks.set_expire(3, b"gone", 1);
    ks.now_ms = 1_000;
    let history = History {
        replid: "a".repeat(40),
        offset: 12345,
        stream_db: 2,
    };
    let lib = b"#!lua name=l\nredis.register_function('f', function() return 1 end)".to_vec();
    let snapshot = Snapshot::take(&ks, vec![lib.clone()], Some(history), 77);
    let chunks = produce(snapshot, true);
    assert!(chunks.len() >= 8, "{} chunks", chunks.len());
    for chunk in &chunks {
        assert!(
            chunk.len() < CHUNK_BYTES + 1024,
            "a chunk of {}",
            chunk.len()
        );
    }
    let bytes = chunks.concat();
    assert!(bytes.starts_with(b"REDIS0010"));
    let (got, libs) = decoded(&bytes);
    assert_eq!(got.len(), 5_001);
    assert_eq!(got[&(3, b"gone".to_vec())].1, Some(1));
    assert_eq!(libs, vec![lib]);
    let aux: HashMap<Vec<u8>, Vec<u8>> = leading_aux(&bytes).into_iter().collect();
    assert_eq!(aux[&b"repl-id"[..]], "a".repeat(40).into_bytes());
    assert_eq!(aux[&b"repl-offset"[..]], b"12345");
    assert_eq!(aux[&b"repl-stream-db"[..]], b"2");
    // The checksum covers the stream: one flipped byte is caught.
    let mut bad = bytes.clone();
    let middle = bad.len() / 2;
    bad[middle] ^= 0x20;
    let result = decode(&bad, 16, |_| {});
    assert!(result.is_err(), "a flipped byte must not load");
}

#[test]
fn a_stop_ends_the_production_with_an_error() {
    let mut ks = Keyspace::new(16);
    for i in 0..100 {
        ks.set(0, format!("k{i}").as_bytes(), string("v"), false);
    }
    let controls = Controls::default();
    // A long per-key delay: only the stop can end it quickly.
    controls.key_delay.store(10_000_000, Ordering::Relaxed);
    let stop = Arc::clone(&controls.stop);
    let snapshot = Snapshot::take(&ks, Vec::new(), None, 0);
    let worker = std::thread::spawn(move || {
        let mut chunks = Chunks::default();
        let result = encode(snapshot, false, &controls, &mut chunks);
        (result, controls.processed.load(Ordering::Relaxed))
    });
    while !worker.is_finished() {
        stop.store(true, Ordering::Relaxed);
        std::thread::yield_now();
    }
    let (result, processed) = worker.join().expect("worker");
    assert!(result.is_err());
    assert!(processed < 100, "{processed} keys");
}

fn value_strategy() -> impl Strategy<Value = Value> {
    let bytes = || prop::collection::vec(any::<u8>(), 0..40);
    prop_oneof![
        bytes().prop_map(|b| Value::Str(Str::new(&b))),
        prop::collection::vec(bytes(), 1..8).prop_map(|items| {
            let list: VecDeque<Str> = items.into_iter().map(Str::from).collect();
            Value::List(Shared::new(list))
        }),
        prop::collection::hash_map(bytes(), bytes(), 1..8).prop_map(|map| {
            let hash = map
                .into_iter()
                .map(|(k, v)| (Bytes::from(k), Str::from(v)))
                .collect();
            Value::Hash(Shared::new(hash))
        }),
        prop::collection::hash_set(bytes(), 1..8)
            .prop_map(|set| { Value::Set(Shared::new(set.into_iter().map(Str::from).collect())) }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Whatever the dataset, the stream decodes to it.
    #[test]
    fn any_dataset_round_trips(
        entries in prop::collection::vec(
            (0usize..16, prop::collection::vec(any::<u8>(), 1..24), value_strategy(),
             prop::option::of(2_000_000_000_000i64..3_000_000_000_000)),
            0..60),
        checksum in any::<bool>(),
    ) {
        let mut ks = Keyspace::new(16);
        for (db, key, value, expiry) in entries {
            ks.set(db, &key, value, false);
            ks.persist(db, &key);
            if let Some(at) = expiry {
                ks.set_expire(db, &key, at);
            }
        }
        let chunks = produce(Snapshot::take(&ks, Vec::new(), None, 0), checksum);
        let (got, _) = decoded(&chunks.concat());
        prop_assert_eq!(got, contents(&ks));
    }
}
