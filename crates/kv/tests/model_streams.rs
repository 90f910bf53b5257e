//! Model-based test of streams: random XADD (explicit and `ms-*` IDs),
//! XDEL, exact XTRIM and range reads run against the server (with small
//! blocks, so entries cross many) and against a `BTreeMap` model; replies
//! must agree, and after a restart the stream rebuilt from the log must
//! equal the model, counters included.

mod common;

use std::collections::BTreeMap;

use common::TestServer;
use proptest::prelude::*;

type Id = (u64, u64);
/// An entry's field-value pairs.
type Fields = Vec<(Vec<u8>, Vec<u8>)>;

#[derive(Clone, Debug, Default)]
struct ModelStream {
    entries: BTreeMap<Id, Fields>,
    last: Id,
    added: u64,
    max_deleted: Id,
}

#[derive(Clone, Debug)]
enum Op {
    /// Add after the last ID: `ms` further (0: same millisecond, next
    /// sequence), with `auto_seq` as `ms-*`, with these field indices.
    Add(u8, u64, bool, Vec<u8>),
    /// Delete the `n`th entry (modulo the length), or a missing ID.
    Del(u8, usize),
    TrimLen(u8, u8),
    TrimMinId(u8, usize),
    Range(u8, usize, usize, u8),
    RevRange(u8, u8),
}

fn op() -> impl Strategy<Value = Op> {
    let k = 0u8..2;
    prop_oneof![
        4 => (k.clone(), 0u64..3, any::<bool>(), prop::collection::vec(0u8..4, 1..4))
            .prop_map(|(k, ms, auto, f)| Op::Add(k, ms, auto, f)),
        1 => (k.clone(), any::<usize>()).prop_map(|(k, n)| Op::Del(k, n)),
        1 => (k.clone(), 0u8..12).prop_map(|(k, n)| Op::TrimLen(k, n)),
        1 => (k.clone(), any::<usize>()).prop_map(|(k, n)| Op::TrimMinId(k, n)),
        1 => (k.clone(), any::<usize>(), any::<usize>(), 0u8..5).prop_map(|(k, a, b, c)| Op::Range(k, a, b, c)),
        1 => (k, 0u8..5).prop_map(|(k, c)| Op::RevRange(k, c)),
    ]
}

fn key(k: u8) -> String {
    format!("s{k}")
}

fn text((ms, seq): Id) -> String {
    format!("{ms}-{seq}")
}

/// What the server replied, reduced to what the model can give.
#[derive(Debug, PartialEq)]
enum R {
    Id(String),
    Int(i64),
    Entries(Vec<(String, Vec<Vec<u8>>)>),
}

fn query(con: &mut redis::Connection, args: &[String]) -> redis::Value {
    let mut cmd = redis::cmd(&args[0]);
    args[1..].iter().for_each(|a| {
        cmd.arg(a);
    });
    cmd.query(con).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

fn entries(v: redis::Value) -> R {
    let redis::Value::Array(items) = v else {
        return R::Entries(Vec::new());
    };
    let decoded = items
        .into_iter()
        .map(|e| {
            let (id, fields): (String, Vec<Vec<u8>>) = redis::from_redis_value(&e).unwrap();
            (id, fields)
        })
        .collect();
    R::Entries(decoded)
}

fn model_entries<'a>(it: impl Iterator<Item = (&'a Id, &'a Fields)>) -> R {
    R::Entries(
        it.map(|(id, f)| {
            (
                text(*id),
                f.iter().flat_map(|(a, b)| [a.clone(), b.clone()]).collect(),
            )
        })
        .collect(),
    )
}

/// Runs `op` on the server and the model: (server reply, model reply).
fn step(con: &mut redis::Connection, m: &mut [ModelStream; 2], op: &Op) -> (R, R) {
    match op {
        Op::Add(k, ms, auto, fields) => {
            let s = &mut m[usize::from(*k)];
            let (last_ms, last_seq) = s.last;
            let id = if *ms == 0 {
                (last_ms, last_seq + 1)
            } else {
                (last_ms + ms, 0)
            };
            let id = if id == (0, 0) { (0, 1) } else { id };
            let arg = if *auto {
                format!("{}-*", id.0)
            } else {
                text(id)
            };
            let pairs: Fields = fields
                .iter()
                .map(|f| (format!("f{f}").into_bytes(), vec![b'v', *f]))
                .collect();
            let mut args = vec!["XADD".to_string(), key(*k), arg];
            for (f, v) in &pairs {
                args.push(String::from_utf8(f.clone()).unwrap());
                args.push(String::from_utf8(v.clone()).unwrap());
            }
            let got: String = redis::from_redis_value(&query(con, &args)).unwrap();
            s.entries.insert(id, pairs);
            s.last = id;
            s.added += 1;
            (R::Id(got), R::Id(text(id)))
        }
        Op::Del(k, n) => {
            let s = &mut m[usize::from(*k)];
            let id = s
                .entries
                .keys()
                .nth(n % (s.entries.len() + 1))
                .copied()
                .unwrap_or((999_999, 0));
            let got: i64 =
                redis::from_redis_value(&query(con, &["XDEL".into(), key(*k), text(id)])).unwrap();
            let gone = s.entries.remove(&id).is_some();
            if gone && id > s.max_deleted {
                s.max_deleted = id;
            }
            (R::Int(got), R::Int(i64::from(gone)))
        }
        Op::TrimLen(k, n) => {
            let s = &mut m[usize::from(*k)];
            let args = ["XTRIM".into(), key(*k), "MAXLEN".into(), n.to_string()];
            let got: i64 = redis::from_redis_value(&query(con, &args)).unwrap();
            let mut removed = 0;
            while s.entries.len() > usize::from(*n) {
                s.entries.pop_first();
                removed += 1;
            }
            (R::Int(got), R::Int(removed))
        }
        Op::TrimMinId(k, n) => {
            let s = &mut m[usize::from(*k)];
            let min = s
                .entries
                .keys()
                .nth(n % (s.entries.len() + 1))
                .copied()
                .unwrap_or(s.last);
            let args = ["XTRIM".into(), key(*k), "MINID".into(), text(min)];
            let got: i64 = redis::from_redis_value(&query(con, &args)).unwrap();
            let before = s.entries.len();
            s.entries.retain(|id, _| *id >= min);
            (R::Int(got), R::Int((before - s.entries.len()) as i64))
        }
        Op::Range(k, a, b, count) => {
            let s = &m[usize::from(*k)];
            let ids: Vec<Id> = s.entries.keys().copied().collect();
            let pick = |n: usize| {
                ids.get(n % (ids.len() + 1))
                    .copied()
                    .unwrap_or((1 << 40, 0))
            };
            let (lo, hi) = (pick(*a).min(pick(*b)), pick(*a).max(pick(*b)));
            let mut args = vec!["XRANGE".into(), key(*k), text(lo), format!("({}", text(hi))];
            if *count > 0 {
                args.extend(["COUNT".into(), count.to_string()]);
            }
            let got = entries(query(con, &args));
            let limit = if *count > 0 {
                usize::from(*count)
            } else {
                usize::MAX
            };
            let want = model_entries(
                s.entries
                    .range(lo..)
                    .filter(|(id, _)| **id < hi)
                    .take(limit),
            );
            (got, want)
        }
        Op::RevRange(k, count) => {
            let s = &m[usize::from(*k)];
            let args = [
                "XREVRANGE".into(),
                key(*k),
                "+".into(),
                "-".into(),
                "COUNT".into(),
                (count + 1).to_string(),
            ];
            let got = entries(query(con, &args));
            (
                got,
                model_entries(s.entries.iter().rev().take(usize::from(*count) + 1)),
            )
        }
    }
}

/// The whole stream and its counters, from the server and from the model.
fn compare(con: &mut redis::Connection, m: &[ModelStream; 2]) {
    for (k, s) in m.iter().enumerate() {
        if s.added == 0 {
            continue;
        }
        let key = key(k as u8);
        let all = entries(query(
            con,
            &["XRANGE".into(), key.clone(), "-".into(), "+".into()],
        ));
        assert_eq!(all, model_entries(s.entries.iter()), "{key}");
        let info: BTreeMap<String, redis::Value> =
            redis::from_redis_value(&query(con, &["XINFO".into(), "STREAM".into(), key.clone()]))
                .unwrap();
        let field = |name: &str| -> String { redis::from_redis_value(&info[name]).unwrap() };
        let first = s.entries.keys().next().copied().unwrap_or((0, 0));
        assert_eq!(field("length"), s.entries.len().to_string());
        assert_eq!(field("last-generated-id"), text(s.last));
        assert_eq!(field("entries-added"), s.added.to_string());
        assert_eq!(field("max-deleted-entry-id"), text(s.max_deleted));
        assert_eq!(field("recorded-first-entry-id"), text(first));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn streams_agree_with_the_model_and_replay(ops in prop::collection::vec(op(), 1..80)) {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(dir.path());
        let client = redis::Client::open(format!("redis://{}/", server.addr)).unwrap();
        let mut con = client.get_connection().unwrap();
        let _: () = redis::cmd("CONFIG").arg("SET").arg("stream-node-max-entries").arg(3).query(&mut con).unwrap();
        let mut model: [ModelStream; 2] = Default::default();
        for op in &ops {
            let (got, want) = step(&mut con, &mut model, op);
            prop_assert_eq!(got, want, "{:?}", op);
        }
        compare(&mut con, &model);
        drop(con);
        server.stop();
        let server = TestServer::start(dir.path());
        let client = redis::Client::open(format!("redis://{}/", server.addr)).unwrap();
        let mut con = client.get_connection().unwrap();
        compare(&mut con, &model);
    }
}
