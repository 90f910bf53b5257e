//! Model-based test: random command sequences run against the server and
//! against a tiny reference model (`BTreeMap`s); every reply must agree.
//! After each sequence the server is restarted and its whole state, rebuilt
//! from the log, must equal the model's.

mod common;

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use common::TestServer;
use proptest::prelude::*;

#[derive(Clone, Debug, PartialEq)]
enum Model {
    Str(Vec<u8>),
    List(VecDeque<Vec<u8>>),
    Set(BTreeSet<Vec<u8>>),
    Hash(BTreeMap<Vec<u8>, Vec<u8>>),
    /// A sorted set with integer scores, so replies print exactly.
    ZSet(BTreeMap<Vec<u8>, i64>),
}

/// A reply, reduced to what both sides can produce.
#[derive(Clone, Debug, PartialEq)]
enum R {
    Ok,
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Arr(Vec<R>),
    Err(String),
}

#[derive(Clone, Debug)]
enum Op {
    Set(u8, u8),
    Get(u8),
    Del(u8),
    Incr(u8),
    Append(u8, u8),
    /// SETBIT key offset bit.
    SetBit(u8, u8, bool),
    /// SETRANGE key offset value.
    SetRange(u8, u8, u8),
    LPush(u8, u8),
    RPop(u8),
    LMove(u8, u8, bool, bool),
    LRange(u8),
    SAdd(u8, u8),
    SRem(u8, u8),
    SMembers(u8),
    HSet(u8, u8, u8),
    HDel(u8, u8),
    HGetAll(u8),
    Exists(u8),
    Rename(u8, u8),
    Multi(Vec<(u8, u8)>),
    ZAdd(u8, i8, u8),
    ZIncrBy(u8, i8, u8),
    ZRem(u8, u8),
    ZRange(u8),
    /// ZUNIONSTORE, ZINTERSTORE or ZDIFFSTORE (0, 1, 2) dst a b.
    ZStore(u8, u8, u8, u8),
    ZRangeStore(u8, u8),
    ZRemRangeByScore(u8, i8, i8),
    SInterStore(u8, u8, u8),
    SMove(u8, u8, u8),
}

fn key(k: u8) -> Vec<u8> {
    format!("key{}", k % 6).into_bytes()
}

fn val(v: u8) -> Vec<u8> {
    if v.is_multiple_of(3) {
        (v / 3).to_string().into_bytes()
    } else {
        format!("v{v}").into_bytes()
    }
}

fn op() -> impl Strategy<Value = Op> {
    let k = 0u8..6;
    let v = 0u8..12;
    prop_oneof![
        (k.clone(), v.clone()).prop_map(|(k, v)| Op::Set(k, v)),
        k.clone().prop_map(Op::Get),
        k.clone().prop_map(Op::Del),
        k.clone().prop_map(Op::Incr),
        (k.clone(), v.clone()).prop_map(|(k, v)| Op::Append(k, v)),
        (k.clone(), 0u8..40, any::<bool>()).prop_map(|(k, o, b)| Op::SetBit(k, o, b)),
        (k.clone(), 0u8..8, v.clone()).prop_map(|(k, o, v)| Op::SetRange(k, o, v)),
        (k.clone(), v.clone()).prop_map(|(k, v)| Op::LPush(k, v)),
        k.clone().prop_map(Op::RPop),
        (k.clone(), k.clone(), any::<bool>(), any::<bool>())
            .prop_map(|(a, b, from, to)| Op::LMove(a, b, from, to)),
        k.clone().prop_map(Op::LRange),
        (k.clone(), v.clone()).prop_map(|(k, v)| Op::SAdd(k, v)),
        (k.clone(), v.clone()).prop_map(|(k, v)| Op::SRem(k, v)),
        k.clone().prop_map(Op::SMembers),
        (k.clone(), v.clone(), v.clone()).prop_map(|(k, f, v)| Op::HSet(k, f, v)),
        (k.clone(), v.clone()).prop_map(|(k, f)| Op::HDel(k, f)),
        k.clone().prop_map(Op::HGetAll),
        k.clone().prop_map(Op::Exists),
        (k.clone(), k.clone()).prop_map(|(a, b)| Op::Rename(a, b)),
        proptest::collection::vec((k.clone(), v.clone()), 1..4).prop_map(Op::Multi),
        (k.clone(), -5i8..6, v.clone()).prop_map(|(k, s, v)| Op::ZAdd(k, s, v)),
        (k.clone(), -3i8..4, v.clone()).prop_map(|(k, s, v)| Op::ZIncrBy(k, s, v)),
        (k.clone(), v.clone()).prop_map(|(k, v)| Op::ZRem(k, v)),
        k.clone().prop_map(Op::ZRange),
        (0u8..3, k.clone(), k.clone(), k.clone()).prop_map(|(o, d, a, b)| Op::ZStore(o, d, a, b)),
        (k.clone(), k.clone()).prop_map(|(d, s)| Op::ZRangeStore(d, s)),
        (k.clone(), -5i8..6, 0i8..6).prop_map(|(k, a, w)| Op::ZRemRangeByScore(k, a, a + w)),
        (k.clone(), k.clone(), k.clone()).prop_map(|(d, a, b)| Op::SInterStore(d, a, b)),
        (k.clone(), k, v).prop_map(|(a, b, v)| Op::SMove(a, b, v)),
    ]
}

const WRONGTYPE: &str = "WRONGTYPE";

fn bulks(items: impl IntoIterator<Item = Vec<u8>>) -> R {
    R::Arr(items.into_iter().map(|i| R::Bulk(Some(i))).collect())
}

/// Applies `op` to the model and returns the expected reply.
fn apply(m: &mut BTreeMap<Vec<u8>, Model>, op: &Op) -> R {
    let wrong = || R::Err(WRONGTYPE.into());
    match op {
        Op::Set(k, v) => {
            m.insert(key(*k), Model::Str(val(*v)));
            R::Ok
        }
        Op::Get(k) => match m.get(&key(*k)) {
            None => R::Bulk(None),
            Some(Model::Str(s)) => R::Bulk(Some(s.clone())),
            Some(_) => wrong(),
        },
        Op::Del(k) => R::Int(i64::from(m.remove(&key(*k)).is_some())),
        Op::Incr(k) => {
            let current = match m.get(&key(*k)) {
                None => Some(0),
                Some(Model::Str(s)) => std::str::from_utf8(s)
                    .ok()
                    .and_then(|s| s.parse::<i64>().ok())
                    .filter(|n| n.to_string().as_bytes() == s.as_slice()),
                Some(_) => return wrong(),
            };
            match current {
                Some(n) => {
                    m.insert(key(*k), Model::Str((n + 1).to_string().into_bytes()));
                    R::Int(n + 1)
                }
                None => R::Err("ERR".into()),
            }
        }
        Op::Append(k, v) => match m.entry(key(*k)).or_insert_with(|| Model::Str(Vec::new())) {
            Model::Str(s) => {
                s.extend(val(*v));
                R::Int(s.len() as i64)
            }
            _ => wrong(),
        },
        Op::SetBit(k, offset, on) => {
            match m.entry(key(*k)).or_insert_with(|| Model::Str(Vec::new())) {
                Model::Str(s) => {
                    let byte = usize::from(*offset / 8);
                    if s.len() <= byte {
                        s.resize(byte + 1, 0);
                    }
                    let mask = 0x80u8 >> (offset % 8);
                    let old = s[byte] & mask != 0;
                    s[byte] = if *on { s[byte] | mask } else { s[byte] & !mask };
                    R::Int(i64::from(old))
                }
                _ => wrong(),
            }
        }
        Op::SetRange(k, offset, v) => {
            match m.entry(key(*k)).or_insert_with(|| Model::Str(Vec::new())) {
                Model::Str(s) => {
                    let (at, patch) = (usize::from(*offset), val(*v));
                    if s.len() < at + patch.len() {
                        s.resize(at + patch.len(), 0);
                    }
                    s[at..at + patch.len()].copy_from_slice(&patch);
                    R::Int(s.len() as i64)
                }
                _ => wrong(),
            }
        }
        Op::LPush(k, v) => match m
            .entry(key(*k))
            .or_insert_with(|| Model::List(VecDeque::new()))
        {
            Model::List(l) => {
                l.push_front(val(*v));
                R::Int(l.len() as i64)
            }
            _ => wrong(),
        },
        Op::RPop(k) => match m.get_mut(&key(*k)) {
            None => R::Bulk(None),
            Some(Model::List(l)) => {
                let v = l.pop_back();
                if l.is_empty() {
                    m.remove(&key(*k));
                }
                R::Bulk(v)
            }
            Some(_) => wrong(),
        },
        Op::LMove(a, b, from_left, to_left) => lmove(m, key(*a), key(*b), *from_left, *to_left),
        Op::LRange(k) => match m.get(&key(*k)) {
            None => R::Arr(vec![]),
            Some(Model::List(l)) => bulks(l.iter().cloned()),
            Some(_) => wrong(),
        },
        Op::SAdd(k, v) => match m
            .entry(key(*k))
            .or_insert_with(|| Model::Set(BTreeSet::new()))
        {
            Model::Set(s) => R::Int(i64::from(s.insert(val(*v)))),
            _ => wrong(),
        },
        Op::SRem(k, v) => match m.get_mut(&key(*k)) {
            None => R::Int(0),
            Some(Model::Set(s)) => {
                let removed = s.remove(&val(*v));
                if s.is_empty() {
                    m.remove(&key(*k));
                }
                R::Int(i64::from(removed))
            }
            Some(_) => wrong(),
        },
        Op::SMembers(k) => match m.get(&key(*k)) {
            None => R::Arr(vec![]),
            Some(Model::Set(s)) => bulks(s.iter().cloned()),
            Some(_) => wrong(),
        },
        Op::HSet(k, f, v) => match m
            .entry(key(*k))
            .or_insert_with(|| Model::Hash(BTreeMap::new()))
        {
            Model::Hash(h) => R::Int(i64::from(h.insert(val(*f), val(*v)).is_none())),
            _ => wrong(),
        },
        Op::HDel(k, f) => match m.get_mut(&key(*k)) {
            None => R::Int(0),
            Some(Model::Hash(h)) => {
                let removed = h.remove(&val(*f)).is_some();
                if h.is_empty() {
                    m.remove(&key(*k));
                }
                R::Int(i64::from(removed))
            }
            Some(_) => wrong(),
        },
        Op::HGetAll(k) => match m.get(&key(*k)) {
            None => R::Arr(vec![]),
            Some(Model::Hash(h)) => bulks(h.iter().flat_map(|(f, v)| [f.clone(), v.clone()])),
            Some(_) => wrong(),
        },
        Op::Exists(k) => R::Int(i64::from(m.contains_key(&key(*k)))),
        Op::Rename(a, b) => match m.remove(&key(*a)) {
            None => R::Err("ERR".into()),
            Some(v) => {
                m.insert(key(*b), v);
                R::Ok
            }
        },
        Op::ZAdd(..)
        | Op::ZIncrBy(..)
        | Op::ZRem(..)
        | Op::ZRange(_)
        | Op::ZRemRangeByScore(..) => apply_zset(m, op),
        Op::ZStore(..) | Op::ZRangeStore(..) | Op::SInterStore(..) | Op::SMove(..) => {
            apply_store(m, op)
        }
        Op::Multi(sets) => {
            let replies = sets
                .iter()
                .map(|(k, v)| apply(m, &Op::Set(*k, *v)))
                .collect();
            R::Arr(replies)
        }
    }
}

/// LMOVE on the model: WRONGTYPE (and nothing moved) when either key
/// holds another type; the source is deleted once empty.
fn lmove(
    m: &mut BTreeMap<Vec<u8>, Model>,
    a: Vec<u8>,
    b: Vec<u8>,
    from_left: bool,
    to_left: bool,
) -> R {
    let wrong = || R::Err(WRONGTYPE.into());
    match m.get(&a) {
        None => return R::Bulk(None),
        Some(Model::List(_)) => {}
        Some(_) => return wrong(),
    }
    if m.get(&b).is_some_and(|d| !matches!(d, Model::List(_))) {
        return wrong();
    }
    let Some(Model::List(src)) = m.get_mut(&a) else {
        return wrong();
    };
    let Some(v) = (if from_left {
        src.pop_front()
    } else {
        src.pop_back()
    }) else {
        return R::Bulk(None);
    };
    if src.is_empty() {
        m.remove(&a);
    }
    let Model::List(dst) = m.entry(b).or_insert_with(|| Model::List(VecDeque::new())) else {
        return wrong();
    };
    if to_left {
        dst.push_front(v.clone());
    } else {
        dst.push_back(v.clone());
    }
    R::Bulk(Some(v))
}

/// A sorted set's reply to ZRANGE 0 -1 WITHSCORES: by score, then member.
fn zrange_reply(z: &BTreeMap<Vec<u8>, i64>) -> R {
    let mut items: Vec<(&Vec<u8>, &i64)> = z.iter().collect();
    items.sort_by(|a, b| (a.1, a.0).cmp(&(b.1, b.0)));
    bulks(
        items
            .into_iter()
            .flat_map(|(m, s)| [m.clone(), s.to_string().into_bytes()]),
    )
}

/// The sorted-set commands on one key.
fn apply_zset(m: &mut BTreeMap<Vec<u8>, Model>, op: &Op) -> R {
    let wrong = || R::Err(WRONGTYPE.into());
    let k = match op {
        Op::ZAdd(k, ..) | Op::ZIncrBy(k, ..) | Op::ZRem(k, _) | Op::ZRange(k) => key(*k),
        Op::ZRemRangeByScore(k, ..) => key(*k),
        _ => unreachable!("not a one-key sorted-set command"),
    };
    let z = match m.get_mut(&k) {
        Some(Model::ZSet(z)) => Some(z),
        Some(_) => return wrong(),
        None => None,
    };
    let reply = match (op, z) {
        (Op::ZRange(_), None) => return R::Arr(vec![]),
        (Op::ZRange(_), Some(z)) => return zrange_reply(z),
        (Op::ZRem(..) | Op::ZRemRangeByScore(..), None) => return R::Int(0),
        (Op::ZRem(_, v), Some(z)) => R::Int(i64::from(z.remove(&val(*v)).is_some())),
        (Op::ZRemRangeByScore(_, lo, hi), Some(z)) => {
            let before = z.len();
            z.retain(|_, s| *s < i64::from(*lo) || *s > i64::from(*hi));
            R::Int((before - z.len()) as i64)
        }
        (Op::ZAdd(_, sc, v), _) => {
            let z = zset_entry(m, &k);
            R::Int(i64::from(z.insert(val(*v), i64::from(*sc)).is_none()))
        }
        (Op::ZIncrBy(_, sc, v), _) => {
            let slot = zset_entry(m, &k).entry(val(*v)).or_insert(0);
            *slot += i64::from(*sc);
            R::Bulk(Some(slot.to_string().into_bytes()))
        }
        _ => unreachable!("every one-key sorted-set command is above"),
    };
    if matches!(m.get(&k), Some(Model::ZSet(z)) if z.is_empty()) {
        m.remove(&k);
    }
    reply
}

fn zset_entry<'m>(m: &'m mut BTreeMap<Vec<u8>, Model>, k: &[u8]) -> &'m mut BTreeMap<Vec<u8>, i64> {
    match m
        .entry(k.to_vec())
        .or_insert_with(|| Model::ZSet(BTreeMap::new()))
    {
        Model::ZSet(z) => z,
        _ => unreachable!("type checked by the caller"),
    }
}

/// A key read as a ZUNIONSTORE input: sets score 1, missing is empty.
fn zsource(m: &BTreeMap<Vec<u8>, Model>, k: u8) -> Option<BTreeMap<Vec<u8>, i64>> {
    match m.get(&key(k)) {
        None => Some(BTreeMap::new()),
        Some(Model::ZSet(z)) => Some(z.clone()),
        Some(Model::Set(s)) => Some(s.iter().map(|v| (v.clone(), 1)).collect()),
        Some(_) => None,
    }
}

/// Stores `value` at `dst`, deleting it when empty; replies with its size.
fn store(m: &mut BTreeMap<Vec<u8>, Model>, dst: u8, value: Model, len: usize) -> R {
    if len == 0 {
        m.remove(&key(dst));
    } else {
        m.insert(key(dst), value);
    }
    R::Int(len as i64)
}

/// The commands that write one key from others.
fn apply_store(m: &mut BTreeMap<Vec<u8>, Model>, op: &Op) -> R {
    let wrong = || R::Err(WRONGTYPE.into());
    match op {
        Op::ZStore(o, d, a, b) => {
            let (Some(za), Some(zb)) = (zsource(m, *a), zsource(m, *b)) else {
                return wrong();
            };
            let out: BTreeMap<Vec<u8>, i64> = match o % 3 {
                0 => {
                    let mut u = za;
                    for (mb, sb) in zb {
                        *u.entry(mb).or_insert(0) += sb;
                    }
                    u
                }
                1 => za
                    .iter()
                    .filter_map(|(ma, sa)| zb.get(ma).map(|sb| (ma.clone(), sa + sb)))
                    .collect(),
                _ => za
                    .into_iter()
                    .filter(|(ma, _)| !zb.contains_key(ma))
                    .collect(),
            };
            let len = out.len();
            store(m, *d, Model::ZSet(out), len)
        }
        Op::ZRangeStore(d, src) => {
            let z = match m.get(&key(*src)) {
                None => BTreeMap::new(),
                Some(Model::ZSet(z)) => z.clone(),
                Some(_) => return wrong(),
            };
            let mut items: Vec<(Vec<u8>, i64)> = z.into_iter().collect();
            items.sort_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)));
            items.truncate(2);
            let len = items.len();
            store(m, *d, Model::ZSet(items.into_iter().collect()), len)
        }
        Op::SInterStore(d, a, b) => {
            let set_of = |k: u8| match m.get(&key(k)) {
                None => Some(BTreeSet::new()),
                Some(Model::Set(s)) => Some(s.clone()),
                Some(_) => None,
            };
            let (Some(sa), Some(sb)) = (set_of(*a), set_of(*b)) else {
                return wrong();
            };
            let out: BTreeSet<Vec<u8>> = sa.intersection(&sb).cloned().collect();
            let len = out.len();
            store(m, *d, Model::Set(out), len)
        }
        Op::SMove(a, b, v) => smove(m, key(*a), key(*b), val(*v)),
        _ => unreachable!("not a store command"),
    }
}

fn smove(m: &mut BTreeMap<Vec<u8>, Model>, src: Vec<u8>, dst: Vec<u8>, member: Vec<u8>) -> R {
    let has = match m.get(&src) {
        None => return R::Int(0),
        Some(Model::Set(s)) => s.contains(&member),
        Some(_) => return R::Err(WRONGTYPE.into()),
    };
    if !matches!(m.get(&dst), None | Some(Model::Set(_))) {
        return R::Err(WRONGTYPE.into());
    }
    if !has || src == dst {
        return R::Int(i64::from(has));
    }
    if let Some(Model::Set(s)) = m.get_mut(&src) {
        s.remove(&member);
        if s.is_empty() {
            m.remove(&src);
        }
    }
    if let Model::Set(s) = m.entry(dst).or_insert_with(|| Model::Set(BTreeSet::new())) {
        s.insert(member);
    }
    R::Int(1)
}

fn to_r(result: redis::RedisResult<redis::Value>) -> R {
    match result {
        Ok(v) => value_to_r(v),
        Err(e) => R::Err(e.code().unwrap_or("ERR").to_string()),
    }
}

fn value_to_r(v: redis::Value) -> R {
    match v {
        redis::Value::Okay => R::Ok,
        redis::Value::Int(n) => R::Int(n),
        redis::Value::Nil => R::Bulk(None),
        redis::Value::BulkString(b) => R::Bulk(Some(b)),
        redis::Value::Array(items) => R::Arr(items.into_iter().map(value_to_r).collect()),
        redis::Value::SimpleString(s) if s == "OK" => R::Ok,
        redis::Value::ServerError(e) => R::Err(e.code().to_string()),
        other => R::Err(format!("unexpected {other:?}")),
    }
}

/// Sorts the elements of replies whose order is unspecified (sets, hashes).
fn normalise(op: &Op, r: R) -> R {
    match (op, r) {
        (Op::SMembers(_), R::Arr(mut items)) => {
            items.sort_by_key(|i| format!("{i:?}"));
            R::Arr(items)
        }
        (Op::HGetAll(_), R::Arr(items)) => {
            let mut pairs: Vec<Vec<R>> = items.chunks(2).map(<[R]>::to_vec).collect();
            pairs.sort_by_key(|p| format!("{:?}", p[0]));
            R::Arr(pairs.concat())
        }
        (_, r) => r,
    }
}

fn command(op: &Op) -> redis::Cmd {
    let mut c;
    match op {
        Op::Set(k, v) => {
            c = redis::cmd("SET");
            c.arg(key(*k)).arg(val(*v));
        }
        Op::Get(k) => {
            c = redis::cmd("GET");
            c.arg(key(*k));
        }
        Op::Del(k) => {
            c = redis::cmd("DEL");
            c.arg(key(*k));
        }
        Op::Incr(k) => {
            c = redis::cmd("INCR");
            c.arg(key(*k));
        }
        Op::Append(k, v) => {
            c = redis::cmd("APPEND");
            c.arg(key(*k)).arg(val(*v));
        }
        Op::SetBit(k, offset, on) => {
            c = redis::cmd("SETBIT");
            c.arg(key(*k)).arg(*offset).arg(u8::from(*on));
        }
        Op::SetRange(k, offset, v) => {
            c = redis::cmd("SETRANGE");
            c.arg(key(*k)).arg(*offset).arg(val(*v));
        }
        Op::LPush(k, v) => {
            c = redis::cmd("LPUSH");
            c.arg(key(*k)).arg(val(*v));
        }
        Op::RPop(k) => {
            c = redis::cmd("RPOP");
            c.arg(key(*k));
        }
        Op::LMove(a, b, from_left, to_left) => {
            let side = |left: bool| if left { "LEFT" } else { "RIGHT" };
            c = redis::cmd("LMOVE");
            c.arg(key(*a))
                .arg(key(*b))
                .arg(side(*from_left))
                .arg(side(*to_left));
        }
        Op::LRange(k) => {
            c = redis::cmd("LRANGE");
            c.arg(key(*k)).arg(0).arg(-1);
        }
        Op::SAdd(k, v) => {
            c = redis::cmd("SADD");
            c.arg(key(*k)).arg(val(*v));
        }
        Op::SRem(k, v) => {
            c = redis::cmd("SREM");
            c.arg(key(*k)).arg(val(*v));
        }
        Op::SMembers(k) => {
            c = redis::cmd("SMEMBERS");
            c.arg(key(*k));
        }
        Op::HSet(k, f, v) => {
            c = redis::cmd("HSET");
            c.arg(key(*k)).arg(val(*f)).arg(val(*v));
        }
        Op::HDel(k, f) => {
            c = redis::cmd("HDEL");
            c.arg(key(*k)).arg(val(*f));
        }
        Op::HGetAll(k) => {
            c = redis::cmd("HGETALL");
            c.arg(key(*k));
        }
        Op::Exists(k) => {
            c = redis::cmd("EXISTS");
            c.arg(key(*k));
        }
        Op::Rename(a, b) => {
            c = redis::cmd("RENAME");
            c.arg(key(*a)).arg(key(*b));
        }
        Op::ZAdd(k, sc, v) | Op::ZIncrBy(k, sc, v) => {
            c = redis::cmd(if matches!(op, Op::ZAdd(..)) {
                "ZADD"
            } else {
                "ZINCRBY"
            });
            c.arg(key(*k)).arg(i64::from(*sc)).arg(val(*v));
        }
        Op::ZRem(k, v) => {
            c = redis::cmd("ZREM");
            c.arg(key(*k)).arg(val(*v));
        }
        Op::ZRange(k) => {
            c = redis::cmd("ZRANGE");
            c.arg(key(*k)).arg(0).arg(-1).arg("WITHSCORES");
        }
        Op::ZStore(o, d, a, b) => {
            c = redis::cmd(["ZUNIONSTORE", "ZINTERSTORE", "ZDIFFSTORE"][usize::from(*o % 3)]);
            c.arg(key(*d)).arg(2).arg(key(*a)).arg(key(*b));
        }
        Op::ZRangeStore(d, src) => {
            c = redis::cmd("ZRANGESTORE");
            c.arg(key(*d)).arg(key(*src)).arg(0).arg(1);
        }
        Op::ZRemRangeByScore(k, lo, hi) => {
            c = redis::cmd("ZREMRANGEBYSCORE");
            c.arg(key(*k)).arg(i64::from(*lo)).arg(i64::from(*hi));
        }
        Op::SInterStore(d, a, b) => {
            c = redis::cmd("SINTERSTORE");
            c.arg(key(*d)).arg(key(*a)).arg(key(*b));
        }
        Op::SMove(a, b, v) => {
            c = redis::cmd("SMOVE");
            c.arg(key(*a)).arg(key(*b)).arg(val(*v));
        }
        Op::Multi(_) => unreachable!("sent as a pipeline"),
    }
    c
}

fn run_on_server(con: &mut redis::Connection, op: &Op) -> R {
    if let Op::Multi(sets) = op {
        let mut pipe = redis::pipe();
        pipe.atomic();
        for (k, v) in sets {
            pipe.cmd("SET").arg(key(*k)).arg(val(*v));
        }
        return to_r(pipe.query::<redis::Value>(con));
    }
    to_r(command(op).query::<redis::Value>(con))
}

/// The whole state as the server sees it, in the model's shape.
fn dump(con: &mut redis::Connection) -> BTreeMap<Vec<u8>, Model> {
    let mut out = BTreeMap::new();
    for k in 0..6 {
        let probes = [
            Op::Get(k),
            Op::LRange(k),
            Op::SMembers(k),
            Op::HGetAll(k),
            Op::ZRange(k),
        ];
        for probe in probes {
            let got = normalise(&probe, run_on_server(con, &probe));
            let mut one = BTreeMap::new();
            let value = match (&probe, got) {
                (Op::Get(_), R::Bulk(Some(s))) => Model::Str(s),
                (Op::LRange(_), R::Arr(a)) if !a.is_empty() => {
                    Model::List(a.into_iter().map(bytes_of).collect())
                }
                (Op::SMembers(_), R::Arr(a)) if !a.is_empty() => {
                    Model::Set(a.into_iter().map(bytes_of).collect())
                }
                (Op::HGetAll(_), R::Arr(a)) if !a.is_empty() => {
                    let flat: Vec<Vec<u8>> = a.into_iter().map(bytes_of).collect();
                    Model::Hash(
                        flat.chunks(2)
                            .map(|p| (p[0].clone(), p[1].clone()))
                            .collect(),
                    )
                }
                (Op::ZRange(_), R::Arr(a)) if !a.is_empty() => {
                    let flat: Vec<Vec<u8>> = a.into_iter().map(bytes_of).collect();
                    Model::ZSet(
                        flat.chunks(2)
                            .map(|p| (p[0].clone(), score_of(&p[1])))
                            .collect(),
                    )
                }
                _ => continue,
            };
            one.insert(key(k), value);
            out.extend(one);
        }
    }
    out
}

fn score_of(text: &[u8]) -> i64 {
    let text = std::str::from_utf8(text).expect("a score is text");
    text.parse()
        .unwrap_or_else(|_| panic!("integer score expected, got {text}"))
}

fn bytes_of(r: R) -> Vec<u8> {
    match r {
        R::Bulk(Some(b)) => b,
        other => panic!("expected a bulk string, got {other:?}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn server_agrees_with_the_model(ops in proptest::collection::vec(op(), 1..60)) {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(dir.path());
        let client = redis::Client::open(format!("redis://{}/", server.addr)).unwrap();
        let mut con = client.get_connection().unwrap();
        let mut model = BTreeMap::new();
        for op in &ops {
            let expected = normalise(op, apply(&mut model, op));
            let got = normalise(op, run_on_server(&mut con, op));
            prop_assert_eq!(got, expected, "after {:?}", op);
        }
        drop(con);
        server.stop();
        // Restart: the state rebuilt from the log must be the model's.
        let server = TestServer::start(dir.path());
        let mut con = client_for(&server);
        prop_assert_eq!(dump(&mut con), model);
    }
}

fn client_for(server: &TestServer) -> redis::Connection {
    redis::Client::open(format!("redis://{}/", server.addr))
        .unwrap()
        .get_connection()
        .unwrap()
}
