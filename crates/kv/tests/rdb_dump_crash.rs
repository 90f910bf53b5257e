//! Crash test of `dump.rdb` replacement (`docs/rdb.md`, "Crash argument
//! for the file"): a save of a new dataset over an old file is cut at
//! every file-system operation (create, each write, the sync, the rename,
//! the directory sync), and every crash image the simulated file system
//! can leave must load to exactly the old dataset or exactly the new one,
//! never a mix, never an error.

use std::collections::BTreeMap;
use std::path::Path;

use ferrite_kv::keyspace::Keyspace;
use ferrite_kv::rdb::dump::{load, save, temp_name};
use ferrite_kv::rdb::produce::{Controls, Snapshot};
use ferrite_kv::rewrite::fs::{RewriteFs, SimFs};
use ferrite_kv::types::{Str, Value};

const NAME: &str = "dump.rdb";
/// Crash images tried per fault point.
const IMAGES: u64 = 6;

/// A dataset large enough for several 256 KiB chunks (several writes).
fn dataset(tag: &str, keys: usize) -> Keyspace {
    let mut ks = Keyspace::new(16);
    for i in 0..keys {
        let key = format!("{tag}:{i}");
        let value = Value::Str(Str::new(
            format!("{tag}-{i}-{}", "x".repeat(300)).as_bytes(),
        ));
        ks.set(i % 3, key.as_bytes(), value, false);
    }
    ks
}

/// Every key (with its database) and its value's DUMP payload.
type Contents = BTreeMap<(usize, Vec<u8>), Vec<u8>>;

fn contents(ks: &Keyspace) -> Contents {
    let mut out = BTreeMap::new();
    for db in 0..ks.databases() {
        for segment in ks.db(db).segments() {
            for (key, value) in segment.map.iter() {
                out.insert((db, key.to_vec()), ferrite_kv::rdb::dump(value));
            }
        }
    }
    out
}

fn save_into(fs: &SimFs, ks: &Keyspace) -> Result<u64, String> {
    let snapshot = Snapshot::take(ks, Vec::new(), None, 0);
    save(fs, Path::new("/d"), NAME, snapshot, &Controls::default())
}

fn load_from(fs: &SimFs) -> Option<Contents> {
    let mut ks = Keyspace::new(16);
    let loaded = load(fs, Path::new("/d"), NAME, &mut ks, true, 0).expect("a whole file");
    loaded.map(|_| contents(&ks))
}

#[test]
fn a_save_cut_anywhere_leaves_the_old_file_or_the_new_one() {
    let old = dataset("old", 1500);
    let new = dataset("new", 2500);
    let (old_keys, new_keys) = (contents(&old), contents(&new));
    // The old file in place, durably; then count the new save's operations.
    let base = SimFs::new();
    save_into(&base, &old).expect("old save");
    let old_bytes = base.get(NAME).expect("old file");
    let probe = SimFs::new();
    probe.put(NAME, &old_bytes);
    let before = probe.ops();
    save_into(&probe, &new).expect("new save");
    let total = probe.ops() - before;
    assert!(
        total >= 6,
        "create, several writes, sync, rename, dir sync: {total}"
    );
    let (mut saw_old, mut saw_new) = (0, 0);
    for cut in 1..=total + 1 {
        let fs = SimFs::new();
        fs.put(NAME, &old_bytes);
        fs.fail_at(Some(fs.ops() + cut));
        let result = save_into(&fs, &new);
        assert_eq!(result.is_err(), cut <= total, "cut at operation {cut}");
        for seed in 0..IMAGES {
            let image = fs.crash_image(seed);
            let got = load_from(&image).expect("a dump.rdb is always there");
            if got == old_keys {
                saw_old += 1;
            } else if got == new_keys {
                saw_new += 1;
            } else {
                panic!("cut {cut}, image {seed}: neither the old nor the new dataset");
            }
        }
    }
    assert!(saw_old > 0 && saw_new > 0, "old {saw_old}, new {saw_new}");
}

#[test]
fn without_a_previous_file_a_cut_save_leaves_none_or_the_new_one() {
    let new = dataset("new", 1200);
    let new_keys = contents(&new);
    let probe = SimFs::new();
    save_into(&probe, &new).expect("save");
    let total = probe.ops();
    for cut in 1..=total {
        let fs = SimFs::new();
        fs.fail_at(Some(cut));
        assert!(save_into(&fs, &new).is_err());
        for seed in 0..IMAGES {
            if let Some(got) = load_from(&fs.crash_image(seed)) {
                assert_eq!(got, new_keys, "cut {cut}, image {seed}");
            }
        }
    }
    // A save that completes leaves no temporary file behind.
    assert!(fs_has_no_name(&probe, &temp_name()));
}

fn fs_has_no_name(fs: &SimFs, name: &str) -> bool {
    fs.len(&Path::new("/d").join(name)).ok().flatten().is_none()
}
