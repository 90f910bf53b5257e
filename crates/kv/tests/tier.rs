//! The PM value tier (`docs/tier.md`): values demoted past
//! `maxmemory-dram` read back, change and delete as in DRAM (a model
//! compared with a `HashMap`); a restart rebuilds the same data; a full
//! heap falls back to DRAM and then to `maxmemory`'s policy; bad settings
//! are refused at start-up.
//!
//! DRAM is measured by the counting allocator the binaries use, which is
//! the process's, so the tests take turns ([`serial`]).

mod common;

use std::alloc::System;
use std::collections::HashMap;

use common::{connect, counting_turn as serial, TestServer};
use ferrite_kv::config::Config;
use proptest::prelude::*;

#[global_allocator]
static ALLOCATOR: ferrite_alloc::Counting<System> = ferrite_alloc::Counting::new(System);

/// DRAM the server may use beyond what the process held before it
/// started: its empty keyspace (16 databases of 1024 segments, 2 MB) and
/// the key index of the tests' keys. At ten thousand keys the index is
/// sparse (a chunk table for nearly every key, about 500 bytes a key with
/// the handles), so the budget leaves room for it; the values (1,280 bytes
/// each in DRAM, jemalloc's class for 1 KiB and its header) overflow it.
const BUDGET_ABOVE_START: u64 = 10 << 20;

/// A tier whose DRAM budget is small next to the data the tests write.
fn tiered(config: &mut Config, heap_bytes: u64) {
    config.maxmemory_dram_bytes = ferrite_alloc::allocated() as u64 + BUDGET_ABOVE_START;
    config.pm_tier_size_bytes = heap_bytes;
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

/// The server's `maxmemory-dram`.
fn dram_budget(con: &mut redis::Connection) -> u64 {
    let v: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("maxmemory-dram")
        .query(con)
        .unwrap();
    v[1].parse().unwrap()
}

/// A value of `len` bytes that differs by key and generation.
fn value(key: usize, generation: usize, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| b'a' + ((key * 7 + generation * 13 + i) % 26) as u8)
        .collect()
}

/// Fills the server with `keys` values of `len` bytes (`bg:N`).
fn fill(con: &mut redis::Connection, keys: usize, len: usize) {
    for chunk in (0..keys).collect::<Vec<_>>().chunks(500) {
        let mut pipe = redis::pipe();
        for &k in chunk {
            pipe.cmd("SET")
                .arg(format!("bg:{k}"))
                .arg(value(k, 0, len))
                .ignore();
        }
        let _: () = pipe.query(con).unwrap();
    }
}

/// Keys the model test changes: the first of the background values,
/// written first and so demoted first.
const MODEL_KEYS: usize = 400;

#[derive(Clone, Debug)]
enum Op {
    Set(usize, usize),
    Get(usize),
    Append(usize, usize),
    SetRange(usize, usize, usize),
    GetRange(usize, isize, isize),
    Strlen(usize),
    Del(usize),
    GetDel(usize),
}

fn op() -> impl Strategy<Value = Op> {
    let key = 0..MODEL_KEYS;
    prop_oneof![
        3 => (key.clone(), 0..3000usize).prop_map(|(k, n)| Op::Set(k, n)),
        4 => key.clone().prop_map(Op::Get),
        2 => (key.clone(), 0..300usize).prop_map(|(k, n)| Op::Append(k, n)),
        2 => (key.clone(), 0..3000usize, 1..200usize).prop_map(|(k, o, n)| Op::SetRange(k, o, n)),
        1 => (key.clone(), -50..3000isize, -50..3000isize).prop_map(|(k, a, b)| Op::GetRange(k, a, b)),
        1 => key.clone().prop_map(Op::Strlen),
        1 => key.clone().prop_map(Op::Del),
        1 => key.prop_map(Op::GetDel),
    ]
}

/// Runs `op` on the server and on the model; both answers must agree.
fn apply(
    con: &mut redis::Connection,
    model: &mut HashMap<String, Vec<u8>>,
    case: usize,
    step: usize,
    op: &Op,
) {
    let name = |k: usize| format!("bg:{k}");
    let step = case * 1000 + step;
    match *op {
        Op::Set(k, len) => {
            let v = value(k, step, len);
            let _: () = redis::cmd("SET").arg(name(k)).arg(&v).query(con).unwrap();
            model.insert(name(k), v);
        }
        Op::Get(k) => {
            let got: Option<Vec<u8>> = redis::cmd("GET").arg(name(k)).query(con).unwrap();
            assert_eq!(got.as_ref(), model.get(&name(k)), "GET {}", name(k));
        }
        Op::Append(k, len) => {
            let tail = value(k, step, len);
            let n: usize = redis::cmd("APPEND")
                .arg(name(k))
                .arg(&tail)
                .query(con)
                .unwrap();
            let entry = model.entry(name(k)).or_default();
            entry.extend_from_slice(&tail);
            assert_eq!(n, entry.len());
        }
        Op::SetRange(k, offset, len) => {
            let patch = value(k, step + 1, len);
            let n: usize = redis::cmd("SETRANGE")
                .arg(name(k))
                .arg(offset)
                .arg(&patch)
                .query(con)
                .unwrap();
            let entry = model.entry(name(k)).or_default();
            if entry.len() < offset + len {
                entry.resize(offset + len, 0);
            }
            entry[offset..offset + len].copy_from_slice(&patch);
            assert_eq!(n, entry.len());
        }
        Op::GetRange(k, start, end) => {
            let got: Vec<u8> = redis::cmd("GETRANGE")
                .arg(name(k))
                .arg(start)
                .arg(end)
                .query(con)
                .unwrap();
            let whole = model.get(&name(k)).cloned().unwrap_or_default();
            assert_eq!(got, range(&whole, start, end), "GETRANGE {}", name(k));
        }
        Op::Strlen(k) => {
            let n: usize = redis::cmd("STRLEN").arg(name(k)).query(con).unwrap();
            assert_eq!(n, model.get(&name(k)).map_or(0, Vec::len));
        }
        Op::Del(k) => {
            let n: usize = redis::cmd("DEL").arg(name(k)).query(con).unwrap();
            assert_eq!(n, usize::from(model.remove(&name(k)).is_some()));
        }
        Op::GetDel(k) => {
            let got: Option<Vec<u8>> = redis::cmd("GETDEL").arg(name(k)).query(con).unwrap();
            assert_eq!(got, model.remove(&name(k)));
        }
    }
}

/// GETRANGE's answer by Redis's rules: negative indexes count from the
/// end, both ends are clamped, and an empty range is empty.
fn range(v: &[u8], start: isize, end: isize) -> Vec<u8> {
    let len = v.len() as isize;
    if len == 0 {
        return Vec::new();
    }
    let fix = |i: isize| if i < 0 { (len + i).max(0) } else { i };
    let (s, e) = (fix(start), fix(end).min(len - 1));
    if s > e || s >= len {
        return Vec::new();
    }
    v[s as usize..=e as usize].to_vec()
}

#[test]
fn demoted_values_behave_as_the_model_says() {
    let _turn = serial();
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start_with(dir.path(), |c| tiered(c, 64 << 20));
    let mut con = connect(&server);
    // Twice the budget in 1 KiB values: DRAM stays over it, so every
    // command below runs with demotion at work.
    fill(&mut con, 8000, 1024);
    assert!(info(&mut con, "tier_demotions") > 1000.0);
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 12,
        ..ProptestConfig::default()
    });
    // The model starts as the background values and carries over from
    // case to case, as the server does. The runner takes a `Fn`: the
    // connection, the model and the case number sit in a cell.
    let model: HashMap<String, Vec<u8>> = (0..MODEL_KEYS)
        .map(|k| (format!("bg:{k}"), value(k, 0, 1024)))
        .collect();
    let shared = std::cell::RefCell::new((connect(&server), model, 0usize));
    runner
        .run(&proptest::collection::vec(op(), 1..150), |ops| {
            let mut guard = shared.borrow_mut();
            let (con, model, case) = &mut *guard;
            *case += 1;
            for (step, op) in ops.iter().enumerate() {
                apply(con, model, *case, step, op);
            }
            for (key, expected) in model.iter() {
                let got: Vec<u8> = redis::cmd("GET").arg(key).query(con).unwrap();
                prop_assert_eq!(&got, expected);
            }
            Ok(())
        })
        .unwrap();
    let (mut con, model, _) = shared.into_inner();
    let untouched = (0..MODEL_KEYS)
        .filter(|k| !model.contains_key(&format!("bg:{k}")))
        .count();
    assert!(untouched < MODEL_KEYS, "the model kept its keys");
    assert!(info(&mut con, "used_memory_pmem") > 0.0);
    assert!(
        info(&mut con, "tier_pm_read_bytes") > 0.0,
        "values were read from PM"
    );
    // The background values the model did not change are intact.
    for k in (MODEL_KEYS..8000).step_by(97) {
        let got: Vec<u8> = redis::cmd("GET")
            .arg(format!("bg:{k}"))
            .query(&mut con)
            .unwrap();
        assert_eq!(got, value(k, 0, 1024));
    }
}

#[test]
fn hot_values_come_back_to_dram_and_dram_stays_near_its_budget() {
    let _turn = serial();
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start_with(dir.path(), |c| tiered(c, 64 << 20));
    let mut con = connect(&server);
    fill(&mut con, 12000, 1024);
    let budget: u64 = dram_budget(&mut con);
    let dram = info(&mut con, "used_memory_dram");
    assert!(
        dram <= budget as f64 * 1.05,
        "DRAM {dram} over its budget {budget} by more than 5%: {}",
        redis::cmd("INFO")
            .arg("memory")
            .query::<String>(&mut con)
            .unwrap()
    );
    assert!(info(&mut con, "tier_values_dram_pct") < 80.0);
    // Every value is read twice in a row: the second read finds a recent
    // clock and promotes it, if it was on PM.
    for k in 0..200 {
        for _ in 0..2 {
            let got: Vec<u8> = redis::cmd("GET")
                .arg(format!("bg:{k}"))
                .query(&mut con)
                .unwrap();
            assert_eq!(got, value(k, 0, 1024));
        }
    }
    assert!(info(&mut con, "tier_promotions") > 0.0);
    assert!(
        info(&mut con, "tier_pm_flushes_per_write") >= 16.0,
        "1 KiB is 16 lines"
    );
}

/// Runs `before` on a tiered server (64 MiB heap; it gets the server's
/// `maxmemory-dram`), stops it, and runs `after` on a server restarted
/// from the same directory with the same budget and heap.
fn across_a_restart(
    before: impl FnOnce(&mut redis::Connection, u64),
    after: impl FnOnce(&mut redis::Connection),
) {
    let _turn = serial();
    let dir = tempfile::tempdir().unwrap();
    let heap = 64 << 20;
    let budget;
    {
        let server = TestServer::start_with(dir.path(), |c| tiered(c, heap));
        let mut con = connect(&server);
        budget = dram_budget(&mut con);
        before(&mut con, budget);
        server.stop();
    }
    let server = TestServer::start_with(dir.path(), |c| {
        c.maxmemory_dram_bytes = budget;
        c.pm_tier_size_bytes = heap;
    });
    after(&mut connect(&server));
}

#[test]
fn a_restart_rebuilds_the_same_data() {
    across_a_restart(
        |con, _| {
            fill(con, 8000, 1024);
            for k in 0..500 {
                let _: usize = redis::cmd("APPEND")
                    .arg(format!("bg:{k}"))
                    .arg("tail")
                    .query(con)
                    .unwrap();
            }
            assert!(info(con, "tier_demotions") > 0.0);
        },
        |con| {
            assert!(info(con, "tier_demotions") > 0.0, "replay demoted");
            assert!(info(con, "used_memory_pmem") > 0.0);
            for k in 0..8000 {
                let got: Vec<u8> = redis::cmd("GET").arg(format!("bg:{k}")).query(con).unwrap();
                let mut expected = value(k, 0, 1024);
                if k < 500 {
                    expected.extend_from_slice(b"tail");
                }
                assert_eq!(got, expected, "bg:{k}");
            }
        },
    );
}

#[test]
fn a_full_heap_falls_back_to_dram_then_to_the_maxmemory_policy() {
    let _turn = serial();
    let dir = tempfile::tempdir().unwrap();
    // One page of heap: about a thousand 1 KiB values fit.
    let server = TestServer::start_with(dir.path(), |c| tiered(c, 1 << 20));
    let mut con = connect(&server);
    fill(&mut con, 6000, 1024);
    assert!(info(&mut con, "tier_pm_full") > 0.0, "the heap filled");
    assert!(info(&mut con, "tier_pm_free_bytes") < 2048.0);
    for k in (0..6000).step_by(7) {
        let got: Vec<u8> = redis::cmd("GET")
            .arg(format!("bg:{k}"))
            .query(&mut con)
            .unwrap();
        assert_eq!(got, value(k, 0, 1024));
    }
    // Then maxmemory, counting DRAM and PM, evicts under its policy.
    let total = info(&mut con, "used_memory_dram") + info(&mut con, "used_memory_pmem");
    let limit = (total as u64).saturating_sub(1 << 20);
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory-policy")
        .arg("allkeys-lru")
        .query(&mut con)
        .unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg(limit)
        .query(&mut con)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("after")
        .arg("x".repeat(1024))
        .query(&mut con)
        .unwrap();
    let text: String = redis::cmd("INFO").arg("stats").query(&mut con).unwrap();
    let evicted: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("evicted_keys:"))
        .unwrap()
        .parse()
        .unwrap();
    assert!(evicted > 0);
    let after = info(&mut con, "used_memory_dram") + info(&mut con, "used_memory_pmem");
    assert!(
        after <= limit as f64 + 64.0 * 1024.0,
        "{after} over {limit}"
    );
}

fn refusal(tweak: impl FnOnce(&mut Config), dir: &std::path::Path) -> String {
    let mut config = Config {
        port: 0,
        dir: dir.to_path_buf(),
        log_device: ferrite_kv::config::LogDevice::File,
        ..Config::default()
    };
    tweak(&mut config);
    match ferrite_kv::Server::bind(config) {
        Ok(_) => panic!("the server started"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn bad_settings_are_refused_at_start_up() {
    let _turn = serial();
    let dir = tempfile::tempdir().unwrap();
    let too_big = refusal(|c| tiered(c, 1 << 60), dir.path());
    assert!(
        too_big.contains("larger than") && too_big.contains("free"),
        "{too_big}"
    );
    let too_small = refusal(|c| tiered(c, 4096), dir.path());
    assert!(too_small.contains("pm-tier-size"), "{too_small}");
    let over_total = refusal(
        |c| {
            tiered(c, 8 << 20);
            c.maxmemory_bytes = c.maxmemory_dram_bytes - 1;
        },
        dir.path(),
    );
    assert!(over_total.contains("larger than maxmemory"), "{over_total}");
    let below_start = refusal(
        |c| {
            c.maxmemory_dram_bytes = 1024;
            c.pm_tier_size_bytes = 8 << 20;
        },
        dir.path(),
    );
    assert!(below_start.contains("before loading"), "{below_start}");
    // The key index: 60,000 keys take 2.7 MB of slots that never move.
    {
        let server = TestServer::start(dir.path());
        let mut con = connect(&server);
        for chunk in (0..60_000).collect::<Vec<_>>().chunks(1000) {
            let mut pipe = redis::pipe();
            for k in chunk {
                pipe.cmd("SET").arg(format!("k{k}")).arg(1).ignore();
            }
            let _: () = pipe.query(&mut con).unwrap();
        }
        server.stop();
    }
    let index = refusal(
        |c| {
            c.maxmemory_dram_bytes = ferrite_alloc::allocated() as u64 + (3 << 20);
            c.pm_tier_size_bytes = 8 << 20;
        },
        dir.path(),
    );
    assert!(index.contains("key index"), "{index}");
    // The handles: 40,000 keys of 1 KiB values take 2.1 MB of slots, under
    // a 2.8 MB margin, but with their values on PM also 32 bytes of
    // handle each (1.3 MB), over it.
    let dir = tempfile::tempdir().unwrap();
    {
        let server = TestServer::start(dir.path());
        let mut con = connect(&server);
        for chunk in (0..40_000).collect::<Vec<_>>().chunks(1000) {
            let mut pipe = redis::pipe();
            for k in chunk {
                pipe.cmd("SET")
                    .arg(format!("k{k}"))
                    .arg(value(*k, 0, 1024))
                    .ignore();
            }
            let _: () = pipe.query(&mut con).unwrap();
        }
        server.stop();
    }
    // A first refusal tells what the server takes before loading and what
    // the keys take; a budget between the slots alone and the slots with
    // the handles must be refused too, for the handles.
    let figures = |text: &str| -> [u64; 5] {
        let numbers: Vec<u64> = text
            .split(|c: char| !c.is_ascii_digit())
            .filter_map(|w| w.parse().ok())
            .collect();
        numbers[..]
            .try_into()
            .unwrap_or_else(|_| panic!("unexpected refusal: {text}"))
    };
    let first = refusal(
        |c| {
            c.maxmemory_dram_bytes = ferrite_alloc::allocated() as u64 + (3 << 20);
            c.pm_tier_size_bytes = 64 << 20;
        },
        dir.path(),
    );
    let [_, keys, index, handle_bytes, startup] = figures(&first);
    assert_eq!(keys, 40_000, "{first}");
    assert!(handle_bytes >= 40_000 * 24, "{first}");
    let slots = index - handle_bytes;
    let between = startup + slots + handle_bytes / 2;
    let second = refusal(
        |c| {
            c.maxmemory_dram_bytes = between;
            c.pm_tier_size_bytes = 64 << 20;
        },
        dir.path(),
    );
    let [budget, _, _, _, startup] = figures(&second);
    assert!(
        startup + slots <= budget && budget < startup + index,
        "{second}"
    );
}

/// Hashes `h:K` and lists `l:K` of [`MEMBERS`] 1 KiB members each.
const COLLECTIONS: usize = 200;
const MEMBERS: usize = 40;

/// What `h:k` and `l:k` hold after [`change_collections`] (when
/// `changed`): field `f1` gone and `f0` rewritten; element 0 rewritten and
/// the last one popped.
fn expected_collections(k: usize, changed: bool) -> (HashMap<String, Vec<u8>>, Vec<Vec<u8>>) {
    let mut hash: HashMap<String, Vec<u8>> = (0..MEMBERS)
        .map(|i| (format!("f{i}"), value(k * MEMBERS + i, 0, 1024)))
        .collect();
    let mut list: Vec<Vec<u8>> = (0..MEMBERS)
        .map(|i| value(k * MEMBERS + i, 1, 1024))
        .collect();
    if changed {
        hash.remove("f1");
        hash.insert("f0".into(), value(k, 2, 1024));
        list[0] = value(k, 3, 1024);
        list.pop();
    }
    (hash, list)
}

fn check_collections(con: &mut redis::Connection, changed: bool) {
    for k in 0..COLLECTIONS {
        let (hash, list) = expected_collections(k, changed && k < 50);
        let got: HashMap<String, Vec<u8>> = redis::cmd("HGETALL")
            .arg(format!("h:{k}"))
            .query(con)
            .unwrap();
        assert_eq!(got, hash, "h:{k}");
        let got: Vec<Vec<u8>> = redis::cmd("LRANGE")
            .arg(format!("l:{k}"))
            .arg(0)
            .arg(-1)
            .query(con)
            .unwrap();
        assert_eq!(got, list, "l:{k}");
    }
}

/// Large members of hashes and lists are demoted like string values
/// (`docs/tier.md`, "Members of collections"), read and changed in place of
/// DRAM ones, and a restart rebuilds them.
#[test]
fn large_hash_and_list_members_move_to_pm_and_behave_as_in_dram() {
    across_a_restart(
        |con, budget| {
            // 16 MB of members over a 10 MB budget, and no string values.
            for k in 0..COLLECTIONS {
                let (hash, list) = expected_collections(k, false);
                let mut pipe = redis::pipe();
                pipe.cmd("HSET").arg(format!("h:{k}"));
                for (f, v) in &hash {
                    pipe.arg(f).arg(v);
                }
                pipe.ignore().cmd("RPUSH").arg(format!("l:{k}"));
                for v in &list {
                    pipe.arg(v);
                }
                let _: () = pipe.ignore().query(con).unwrap();
            }
            assert!(info(con, "tier_pm_values") > 1000.0, "members demoted");
            // MEMORY USAGE counts members wherever they are.
            for k in 0..COLLECTIONS {
                for key in [format!("h:{k}"), format!("l:{k}")] {
                    let usage: u64 = redis::cmd("MEMORY")
                        .arg("USAGE")
                        .arg(&key)
                        .arg("SAMPLES")
                        .arg(0)
                        .query(con)
                        .unwrap();
                    assert!(usage >= (MEMBERS * 1024) as u64, "{key}: {usage}");
                }
            }
            let dram = info(con, "used_memory_dram");
            assert!(dram <= budget as f64 * 1.05, "DRAM {dram} over {budget}");
            for k in 0..50 {
                let mut pipe = redis::pipe();
                pipe.cmd("HDEL").arg(format!("h:{k}")).arg("f1").ignore();
                pipe.cmd("HSET")
                    .arg(format!("h:{k}"))
                    .arg("f0")
                    .arg(value(k, 2, 1024))
                    .ignore();
                pipe.cmd("LSET")
                    .arg(format!("l:{k}"))
                    .arg(0)
                    .arg(value(k, 3, 1024))
                    .ignore();
                pipe.cmd("RPOP").arg(format!("l:{k}")).ignore();
                let _: () = pipe.query(con).unwrap();
            }
            check_collections(con, true);
        },
        |con| {
            assert!(info(con, "tier_pm_values") > 1000.0, "replay demoted");
            check_collections(con, true);
        },
    );
}
