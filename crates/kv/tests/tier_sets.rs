//! Sets and sorted sets whose large members live on the PM tier
//! (`docs/tier.md`, "Members of collections"), on a server whose
//! `maxmemory-dram` is far below their size: a random sequence of set and
//! sorted-set commands answers as a model does, SINTER, SSCAN, SMEMBERS,
//! ZRANGE, DUMP/RESTORE, MEMORY USAGE and an RDB reload see the same
//! members, DRAM stays near its budget, and a restart (replaying a log
//! rewritten while members were on PM) rebuilds the same data.
//!
//! DRAM is measured by the process's counting allocator, so the tests
//! take turns ([`serial`]).

mod common;

use std::alloc::System;
use std::collections::{BTreeMap, BTreeSet};

use common::{connect, counting_turn as serial, TestServer};
use ferrite_kv::config::{Config, ProtectedAction};

#[global_allocator]
static ALLOCATOR: ferrite_alloc::Counting<System> = ferrite_alloc::Counting::new(System);

/// Sets `s:K` and sorted sets `z:K`.
const KEYS: usize = 40;
/// Members each starts with: 12 MB of 1 KiB members in all.
const MEMBERS: usize = 150;
/// DRAM the server may use beyond what the process held before it
/// started: an empty server and the keys, not the members.
const BUDGET_ABOVE_START: u64 = 6 << 20;

fn tiered(config: &mut Config) {
    config.maxmemory_dram_bytes = ferrite_alloc::allocated() as u64 + BUDGET_ABOVE_START;
    config.pm_tier_size_bytes = 64 << 20;
    config.enable_debug_command = ProtectedAction::Yes;
}

/// Member `i`: 1 KiB (movable) unless `i % 5 == 0` (12 bytes, never
/// moved); its first bytes name it.
fn member(i: usize) -> Vec<u8> {
    let len = if i.is_multiple_of(5) { 12 } else { 1024 };
    let mut m = format!("m{i:09}-").into_bytes();
    m.extend((m.len()..len).map(|k| b'a' + ((i * 11 + k) % 26) as u8));
    m
}

fn info(con: &mut redis::Connection, name: &str) -> f64 {
    let text: String = redis::cmd("INFO").arg("memory").query(con).unwrap();
    let prefix = format!("{name}:");
    text.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .unwrap_or_else(|| panic!("INFO memory has no {name}"))
        .parse()
        .unwrap()
}

/// The index of a member [`member`] made.
fn index(m: &[u8]) -> usize {
    std::str::from_utf8(m.get(1..10).expect("a member's name"))
        .expect("digits")
        .parse()
        .expect("an index")
}

fn persistence(con: &mut redis::Connection, name: &str) -> String {
    let text: String = redis::cmd("INFO").arg("persistence").query(con).unwrap();
    let prefix = format!("{name}:");
    text.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .unwrap_or_else(|| panic!("INFO persistence has no {name}"))
        .to_string()
}

/// The sets and sorted sets as the server should hold them, by member
/// index: the model's own memory is counted by the process's allocator
/// with the server's, so it keeps no member bytes.
#[derive(Clone, Debug, Default)]
struct Model {
    sets: BTreeMap<usize, BTreeSet<usize>>,
    zsets: BTreeMap<usize, BTreeMap<usize, i64>>,
}

impl Model {
    /// A sorted set's members in ZRANGE order: by score, then bytes.
    fn zrange(&self, k: usize) -> Vec<(Vec<u8>, i64)> {
        let mut all: Vec<(i64, Vec<u8>)> = self
            .zsets
            .get(&k)
            .map(|z| z.iter().map(|(m, s)| (*s, member(*m))).collect())
            .unwrap_or_default();
        all.sort();
        all.into_iter().map(|(s, m)| (m, s)).collect()
    }

    /// A set's members' bytes.
    fn set(&self, k: usize) -> BTreeSet<Vec<u8>> {
        self.sets
            .get(&k)
            .map(|s| s.iter().map(|&i| member(i)).collect())
            .unwrap_or_default()
    }
}

fn load(con: &mut redis::Connection, model: &mut Model) {
    for k in 0..KEYS {
        let ids: Vec<usize> = (0..MEMBERS).map(|i| k * 1000 + i).collect();
        let members: Vec<Vec<u8>> = ids.iter().map(|&i| member(i)).collect();
        let mut pipe = redis::pipe();
        pipe.cmd("SADD")
            .arg(format!("s:{k}"))
            .arg(&members)
            .ignore();
        pipe.cmd("ZADD").arg(format!("z:{k}"));
        for (i, m) in members.iter().enumerate() {
            pipe.arg(i % 7).arg(m);
        }
        let _: () = pipe.ignore().query(con).unwrap();
        model.sets.insert(k, ids.iter().copied().collect());
        let scores = ids.iter().enumerate();
        model
            .zsets
            .insert(k, scores.map(|(i, &m)| (m, (i % 7) as i64)).collect());
    }
}

/// A deterministic pseudo-random sequence.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) as usize) % n.max(1)
    }
}

/// One random command on a set, checked against the model.
fn set_op(con: &mut redis::Connection, model: &mut Model, rng: &mut Lcg) {
    let k = rng.below(KEYS);
    let key = format!("s:{k}");
    // Members of this key's range, present or not (a fifth beyond it).
    let id = k * 1000 + rng.below(MEMBERS + MEMBERS / 5);
    let m = member(id);
    let set = model.sets.entry(k).or_default();
    match rng.below(6) {
        0 => {
            let added: i64 = redis::cmd("SADD").arg(&key).arg(&m).query(con).unwrap();
            assert_eq!(added == 1, set.insert(id), "SADD {key}");
        }
        1 => {
            let removed: i64 = redis::cmd("SREM").arg(&key).arg(&m).query(con).unwrap();
            assert_eq!(removed == 1, set.remove(&id), "SREM {key}");
        }
        2 => {
            let is: i64 = redis::cmd("SISMEMBER")
                .arg(&key)
                .arg(&m)
                .query(con)
                .unwrap();
            assert_eq!(is == 1, set.contains(&id), "SISMEMBER {key}");
        }
        3 => {
            let popped: Option<Vec<u8>> = redis::cmd("SPOP").arg(&key).query(con).unwrap();
            match popped {
                Some(p) => assert!(
                    p == member(index(&p)) && set.remove(&index(&p)),
                    "SPOP {key}: not a member"
                ),
                None => assert!(set.is_empty(), "SPOP {key}: nothing popped"),
            }
        }
        4 => {
            let picked: Vec<Vec<u8>> = redis::cmd("SRANDMEMBER")
                .arg(&key)
                .arg(3)
                .query(con)
                .unwrap();
            assert_eq!(picked.len(), set.len().min(3), "SRANDMEMBER {key}");
            let known = |p: &Vec<u8>| *p == member(index(p)) && set.contains(&index(p));
            assert!(picked.iter().all(known), "SRANDMEMBER {key}");
        }
        _ => {
            let to = (k + 1) % KEYS;
            let moved: i64 = redis::cmd("SMOVE")
                .arg(&key)
                .arg(format!("s:{to}"))
                .arg(&m)
                .query(con)
                .unwrap();
            assert_eq!(moved == 1, set.remove(&id), "SMOVE {key}");
            if moved == 1 {
                model.sets.entry(to).or_default().insert(id);
            }
        }
    }
}

/// One random command on a sorted set, checked against the model.
fn zset_op(con: &mut redis::Connection, model: &mut Model, rng: &mut Lcg) {
    let k = rng.below(KEYS);
    let key = format!("z:{k}");
    let id = k * 1000 + rng.below(MEMBERS + MEMBERS / 5);
    let m = member(id);
    match rng.below(5) {
        0 => {
            let score = rng.below(9) as i64;
            let _: i64 = redis::cmd("ZADD")
                .arg(&key)
                .arg(score)
                .arg(&m)
                .query(con)
                .unwrap();
            model.zsets.entry(k).or_default().insert(id, score);
        }
        1 => {
            let got: String = redis::cmd("ZINCRBY")
                .arg(&key)
                .arg(2)
                .arg(&m)
                .query(con)
                .unwrap();
            let score = model.zsets.entry(k).or_default().entry(id).or_insert(0);
            *score += 2;
            assert_eq!(got, score.to_string(), "ZINCRBY {key}");
        }
        2 => {
            let removed: i64 = redis::cmd("ZREM").arg(&key).arg(&m).query(con).unwrap();
            let was = model.zsets.entry(k).or_default().remove(&id).is_some();
            assert_eq!(removed == 1, was, "ZREM {key}");
        }
        3 => {
            let got: Option<i64> = redis::cmd("ZSCORE").arg(&key).arg(&m).query(con).unwrap();
            let expected = model.zsets.get(&k).and_then(|z| z.get(&id)).copied();
            assert_eq!(got, expected, "ZSCORE {key}");
        }
        _ => {
            let got: Option<usize> = redis::cmd("ZRANK").arg(&key).arg(&m).query(con).unwrap();
            let expected = model.zrange(k).iter().position(|(x, _)| *x == m);
            assert_eq!(got, expected, "ZRANK {key}");
        }
    }
}

/// Every set and sorted set, read whole, against the model.
fn check_all(con: &mut redis::Connection, model: &Model) {
    for k in 0..KEYS {
        let expected = model.set(k);
        let got: BTreeSet<Vec<u8>> = redis::cmd("SMEMBERS")
            .arg(format!("s:{k}"))
            .query(con)
            .unwrap();
        assert_eq!(got, expected, "SMEMBERS s:{k}");
        let (_, scanned): (String, BTreeSet<Vec<u8>>) = redis::cmd("SSCAN")
            .arg(format!("s:{k}"))
            .arg(0)
            .arg("COUNT")
            .arg(1000)
            .query(con)
            .unwrap();
        assert_eq!(scanned, expected, "SSCAN s:{k}");
        let next = (k + 1) % KEYS;
        let inter: BTreeSet<Vec<u8>> = redis::cmd("SINTER")
            .arg(format!("s:{k}"))
            .arg(format!("s:{next}"))
            .query(con)
            .unwrap();
        let other = model.set(next);
        assert_eq!(
            inter,
            expected.intersection(&other).cloned().collect(),
            "SINTER s:{k} s:{next}"
        );
        let got: Vec<(Vec<u8>, i64)> = redis::cmd("ZRANGE")
            .arg(format!("z:{k}"))
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES")
            .query(con)
            .unwrap();
        assert!(got == model.zrange(k), "ZRANGE z:{k}");
    }
}

/// Runs `steps` random commands, half on sets and half on sorted sets.
fn run_ops(con: &mut redis::Connection, model: &mut Model, rng: &mut Lcg, steps: usize) {
    for _ in 0..steps {
        if rng.below(2) == 0 {
            set_op(con, model, rng);
        } else {
            zset_op(con, model, rng);
        }
    }
}

/// MEMORY USAGE counts every member, on PM or not.
fn check_usage(con: &mut redis::Connection, model: &Model) {
    for k in 0..KEYS {
        let set: usize = model.set(k).iter().map(Vec::len).sum();
        let zset: usize = model.zrange(k).iter().map(|(m, _)| m.len()).sum();
        for (key, bytes) in [(format!("s:{k}"), set), (format!("z:{k}"), zset)] {
            let usage: Option<usize> = redis::cmd("MEMORY")
                .arg("USAGE")
                .arg(&key)
                .arg("SAMPLES")
                .arg(0)
                .query(con)
                .unwrap();
            assert!(usage.unwrap_or(0) >= bytes, "{key}: {usage:?} < {bytes}");
        }
    }
}

#[test]
fn pm_members_of_sets_and_sorted_sets_behave_as_the_model_says() {
    let _turn = serial();
    let dir = tempfile::tempdir().unwrap();
    let mut model = Model::default();
    let mut rng = Lcg(0x5e75);
    let budget;
    {
        let server = TestServer::start_with(dir.path(), tiered);
        let mut con = connect(&server);
        let b: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg("maxmemory-dram")
            .query(&mut con)
            .unwrap();
        budget = b[1].parse::<u64>().unwrap();
        load(&mut con, &mut model);
        assert!(info(&mut con, "tier_pm_values") > 2000.0, "members demoted");
        check_usage(&mut con, &model);
        // Each SADD or ZADD of the load added 150 KiB, more than one
        // command's demotion moves (64 KiB): the commands after it bring
        // DRAM back to its budget.
        run_ops(&mut con, &mut model, &mut rng, 3000);
        let dram = info(&mut con, "used_memory_dram");
        let text: String = redis::cmd("INFO").arg("memory").query(&mut con).unwrap();
        assert!(
            dram <= budget as f64 * 1.05,
            "DRAM {dram} over {budget}: {text}"
        );
        check_all(&mut con, &model);
        // DUMP and RESTORE carry PM members' bytes.
        let dumped: Vec<u8> = redis::cmd("DUMP").arg("z:3").query(&mut con).unwrap();
        let _: () = redis::cmd("RESTORE")
            .arg("z:copy")
            .arg(0)
            .arg(dumped)
            .query(&mut con)
            .unwrap();
        let copy: Vec<(Vec<u8>, i64)> = redis::cmd("ZRANGE")
            .arg("z:copy")
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES")
            .query(&mut con)
            .unwrap();
        assert!(copy == model.zrange(3), "RESTORE of a DUMP");
        let _: () = redis::cmd("DEL").arg("z:copy").query(&mut con).unwrap();
        // The RDB the server produces holds the same members.
        let _: () = redis::cmd("DEBUG").arg("RELOAD").query(&mut con).unwrap();
        check_all(&mut con, &model);
        assert!(info(&mut con, "tier_pm_values") > 2000.0, "reload demoted");
        // A log rewritten while members are on PM and changing (the
        // snapshot shares the collections the commands change), and the
        // restart below replays it.
        let _: String = redis::cmd("BGREWRITEAOF").query(&mut con).unwrap();
        run_ops(&mut con, &mut model, &mut rng, 500);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while persistence(&mut con, "aof_rewrite_in_progress") != "0"
            || persistence(&mut con, "aof_rewrites") == "0"
        {
            assert!(
                std::time::Instant::now() < deadline,
                "rewrite did not finish"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        run_ops(&mut con, &mut model, &mut rng, 200);
        server.stop();
    }
    let server = TestServer::start_with(dir.path(), |c| {
        c.maxmemory_dram_bytes = budget;
        c.pm_tier_size_bytes = 64 << 20;
    });
    let mut con = connect(&server);
    assert!(info(&mut con, "tier_pm_values") > 2000.0, "replay demoted");
    check_all(&mut con, &model);
    run_ops(&mut con, &mut model, &mut rng, 500);
    check_all(&mut con, &model);
}
