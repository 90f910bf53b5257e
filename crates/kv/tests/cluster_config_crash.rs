//! `nodes.conf` is replaced atomically: a crash at any operation of a
//! save, with any of the states the disk can be left in (unsynced bytes
//! and directory entries kept or lost at random), reads back as the old
//! table or the new one, never anything else; and once the save returned,
//! always the new one.

use std::path::Path;

use ferrite_kv::cluster::conf;
use ferrite_kv::cluster::state::{parse_config, ClusterState};
use ferrite_kv::cluster::NodeId;
use ferrite_kv::rewrite::fs::{RewriteFs, SimFs};

const SEEDS: u64 = 40;

fn table(seed: u64, slots: usize) -> String {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut state = ClusterState::new(NodeId::random(&mut rng), 7000, 17000, 0);
    let me = state.myself;
    for slot in 0..slots {
        state.slots[slot] = Some(me);
    }
    state.current_epoch = seed;
    state.config_text()
}

/// What a crash image holds at `nodes.conf` after start-up's load.
fn recovered(fs: &SimFs) -> Option<String> {
    conf::load(fs, Path::new("nodes.conf")).expect("load")
}

#[test]
fn every_crash_point_of_a_save_leaves_the_old_or_the_new_table() {
    let old = table(1, 100);
    let new = table(2, 16384);
    // How many operations a save takes.
    let probe = SimFs::new();
    probe.put("nodes.conf", old.as_bytes());
    let before = probe.ops();
    conf::save(&probe, Path::new("nodes.conf"), &new).expect("save");
    let ops = probe.ops() - before;
    assert!(
        ops >= 4,
        "a save is create, write, fsync, rename, dir fsync"
    );
    for fail_at in 0..=ops {
        for seed in 0..SEEDS {
            let fs = SimFs::new();
            fs.put("nodes.conf", old.as_bytes());
            fs.fail_at(Some(fs.ops() + fail_at));
            let result = conf::save(&fs, Path::new("nodes.conf"), &new);
            let image = fs.crash_image(seed * 1000 + fail_at);
            let text = recovered(&image).expect("a table is always there");
            assert!(
                text == old || text == new,
                "crash at operation {fail_at}, seed {seed}: a torn table ({} bytes)",
                text.len()
            );
            if result.is_ok() {
                assert_eq!(text, new, "the save returned, so it is durable");
            }
            // The stray temporary file is gone after the load, and the
            // table parses.
            assert!(image.list(Path::new(".")).expect("list").len() == 1);
            parse_config(&text, 7000, 17000).expect("parses");
        }
    }
}

#[test]
fn a_missing_or_empty_file_is_a_new_node() {
    let fs = SimFs::new();
    assert_eq!(recovered(&fs), None);
    fs.put("nodes.conf", b"");
    assert_eq!(recovered(&fs), None);
}

#[test]
fn a_saved_table_reads_back_the_same() {
    let mut rng = fastrand::Rng::with_seed(7);
    let mut state = ClusterState::new(NodeId::random(&mut rng), 7000, 17000, 0);
    let other = NodeId::random(&mut rng);
    let mut node = ferrite_kv::cluster::Node::new(
        other,
        ferrite_kv::cluster::flags::MASTER,
        "10.0.0.2",
        7001,
        17001,
        0,
    );
    node.config_epoch = 4;
    state.nodes.insert(other, node);
    state.slots[0] = Some(state.myself);
    state.slots[5] = Some(other);
    for slot in 10..20 {
        state.slots[slot] = Some(other);
    }
    state.migrating.insert(0, other);
    state.importing.insert(3, other);
    state.current_epoch = 9;
    state.last_vote_epoch = 4;
    let text = state.config_text();
    let back = parse_config(&text, 7000, 17000).expect("parses");
    assert_eq!(back.config_text(), text);
    assert_eq!(back.myself, state.myself);
    assert_eq!(back.slot_count(&other), 11);
}

#[test]
fn a_malformed_file_names_the_line() {
    let good = table(3, 10);
    let bad = format!("{good}0123 not a node line\n");
    let err = parse_config(&bad, 7000, 17000).expect_err("malformed");
    assert_eq!(err.line, 3, "{err}");
    let err = parse_config("vars currentEpoch x\n", 7000, 17000).expect_err("bad vars");
    assert_eq!(err.line, 1);
}
