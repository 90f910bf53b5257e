use super::*;

#[test]
fn lazy_expiry_records_the_deletion() {
    let mut ks = Keyspace::new(2);
    ks.now_ms = 1000;
    ks.set(0, b"k", Value::Str(b"v"[..].into()), false);
    ks.set_expire(0, b"k", 1500);
    assert!(ks.get(0, b"k").is_some());
    ks.now_ms = 1500;
    assert!(ks.get(0, b"k").is_none());
    assert_eq!(ks.expired.len(), 1);
    assert_eq!(ks.db(0).len(), 0);
}

#[test]
fn active_expiry_and_watch() {
    let mut ks = Keyspace::new(1);
    for i in 0..100u32 {
        let key = i.to_string();
        ks.set(
            0,
            key.as_bytes(),
            Value::Str(crate::types::Str::default()),
            false,
        );
        ks.set_expire(0, key.as_bytes(), 10);
    }
    let v = ks.watch(0, b"5");
    ks.now_ms = 11;
    assert_eq!(ks.active_expire(SEGMENTS_PER_DB), 100);
    assert!(ks.watch_version(0, b"5") > v);
    assert!(ks.db(0).is_empty());
}

#[test]
fn active_expiry_reaches_a_database_behind_empty_ones() {
    let mut ks = Keyspace::new(16);
    for db in [3, 15] {
        for i in 0..50u32 {
            let key = i.to_string();
            ks.set(db, key.as_bytes(), Value::Str(Default::default()), false);
            ks.set_expire(db, key.as_bytes(), 10);
        }
    }
    ks.set(7, b"no-ttl", Value::Str(Default::default()), false);
    ks.now_ms = 11;
    // One segment with keys per call at most: every call still makes
    // progress past the empty databases, and a full cycle finds all.
    let mut removed = 0;
    for _ in 0..16 * SEGMENTS_PER_DB {
        removed += ks.active_expire(1);
    }
    assert_eq!(removed, 100);
    assert!(ks.db(3).is_empty() && ks.db(15).is_empty());
    assert_eq!(ks.db(7).len(), 1);
}
