//! HyperLogLog commands over string values in Redis's representation
//! (`types/hll.rs`).
//!
//! Logging: PFADD and PFMERGE log themselves when they change the value.
//! PFCOUNT of one key stores the cardinality it computed in the value's
//! header, as Redis does (Redis flags it read-only yet propagates it), so
//! it logs itself then too: replaying it computes and stores the same
//! number. PFDEBUG GETREG and TODENSE change the encoding of a sparse
//! value and log `PFDEBUG TODENSE key`, which replays to the same bytes.

use std::borrow::Cow;

use super::table::*;
use super::{errors, CmdError, CmdResult, Ctx};
use crate::keyspace::events::STRING;
use crate::resp::Args;
use crate::types::hll::{count_registers, Encoding, Hll, HllError, REGISTERS};
use crate::types::{Str, Value};

/// The reply to a string that is not an HLL.
const NOT_HLL: &str = "WRONGTYPE Key is not a valid HyperLogLog string value.";
/// The reply to an HLL whose sparse body is corrupt.
const CORRUPT: &str = "INVALIDOBJ Corrupted HLL object detected";

fn hll_error(e: HllError) -> CmdError {
    Cow::Borrowed(match e {
        HllError::NotHll => NOT_HLL,
        HllError::Corrupt => CORRUPT,
    })
}

/// The HLL at `key`: `Ok(None)` if missing, WRONGTYPE for another type or
/// a string that is not an HLL.
fn load(ctx: &mut Ctx<'_>, key: &[u8]) -> Result<Option<Hll>, CmdError> {
    match ctx.state.keyspace.get(ctx.session.db, key) {
        None => Ok(None),
        Some(Value::Str(s)) => Hll::from_bytes(s).map(Some).map_err(hll_error),
        Some(_) => Err(Cow::Borrowed(errors::WRONGTYPE)),
    }
}

/// Stores `hll` at `key`, keeping the key's TTL.
fn store(ctx: &mut Ctx<'_>, key: &[u8], hll: &Hll) {
    let value = Value::Str(Str::from(hll.as_bytes()));
    ctx.state.keyspace.set(ctx.session.db, key, value, true);
}

fn sparse_max_bytes(ctx: &Ctx<'_>) -> usize {
    ctx.state.config.hll_sparse_max_bytes()
}

pub(super) fn pfadd(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let key = args.get(1);
    let (mut hll, mut updated) = match load(ctx, key)? {
        Some(hll) => (hll, false),
        None => (Hll::new(), true),
    };
    let limit = sparse_max_bytes(ctx);
    for element in args.iter().skip(2) {
        updated |= hll.add(element, limit).map_err(hll_error)?;
    }
    if updated {
        hll.invalidate();
        store(ctx, key, &hll);
        ctx.notify(STRING, "pfadd", key);
        ctx.propagate_args(args);
    }
    ctx.reply.int(i64::from(updated));
    Ok(())
}

pub(super) fn pfcount(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    if args.len() > 2 {
        let mut max = [0u8; REGISTERS];
        for key in args.iter().skip(1) {
            if let Some(hll) = load(ctx, key)? {
                hll.merge_into(&mut max).map_err(hll_error)?;
            }
        }
        ctx.reply.int(count_registers(&max) as i64);
        return Ok(());
    }
    let key = args.get(1);
    let Some(mut hll) = load(ctx, key)? else {
        ctx.reply.int(0);
        return Ok(());
    };
    let card = match hll.cached() {
        Some(card) => card,
        None => {
            let card = hll.count().map_err(hll_error)?;
            hll.set_cached(card);
            store(ctx, key, &hll);
            ctx.propagate(&[b"PFCOUNT", key]);
            card
        }
    };
    ctx.reply.int(card as i64);
    Ok(())
}

pub(super) fn pfmerge(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let mut max = [0u8; REGISTERS];
    let mut any_dense = false;
    let mut dest = None;
    for (at, key) in args.iter().enumerate().skip(1) {
        let Some(hll) = load(ctx, key)? else {
            continue;
        };
        any_dense |= hll.encoding() == Encoding::Dense;
        hll.merge_into(&mut max).map_err(hll_error)?;
        if at == 1 {
            dest = Some(hll);
        }
    }
    let mut dest = dest.unwrap_or_default();
    if any_dense {
        dest.to_dense().map_err(hll_error)?;
    }
    let limit = sparse_max_bytes(ctx);
    for (index, &value) in max.iter().enumerate() {
        if value != 0 {
            dest.raise(index, value, limit).map_err(hll_error)?;
        }
    }
    dest.invalidate();
    let key = args.get(1);
    store(ctx, key, &dest);
    ctx.notify(STRING, "pfadd", key);
    ctx.propagate_args(args);
    ctx.reply.ok();
    Ok(())
}

/// Turns the sparse value `hll` at `key` dense, storing and logging it;
/// `Ok(true)` if it was sparse.
fn make_dense(ctx: &mut Ctx<'_>, key: &[u8], hll: &mut Hll) -> Result<bool, CmdError> {
    if !hll.to_dense().map_err(hll_error)? {
        return Ok(false);
    }
    store(ctx, key, hll);
    ctx.propagate(&[b"PFDEBUG", b"TODENSE", key]);
    Ok(true)
}

pub(super) fn pfdebug(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let (sub, key) = (args.get(1), args.get(2));
    let Some(mut hll) = load(ctx, key)? else {
        return Err(Cow::Borrowed("ERR The specified key does not exist"));
    };
    match sub.to_ascii_lowercase().as_slice() {
        b"getreg" => {
            make_dense(ctx, key, &mut hll)?;
            let registers = hll.dense_registers().unwrap_or_default();
            ctx.reply.array(registers.len());
            for r in registers {
                ctx.reply.int(i64::from(r));
            }
        }
        b"decode" => match hll.decode_sparse() {
            Some(text) => ctx.reply.bulk(text.as_bytes()),
            None => return Err(Cow::Borrowed("ERR HLL encoding is not sparse")),
        },
        b"encoding" => ctx.reply.simple(match hll.encoding() {
            Encoding::Dense => "dense",
            Encoding::Sparse => "sparse",
        }),
        b"todense" => {
            let converted = make_dense(ctx, key, &mut hll)?;
            ctx.reply.int(i64::from(converted));
        }
        _ => {
            return Err(Cow::Owned(format!(
                "ERR Unknown PFDEBUG subcommand '{}'",
                String::from_utf8_lossy(sub)
            )))
        }
    }
    Ok(())
}

/// PFSELFTEST: checks the dense register packing with random values, then
/// adds ten million elements to a dense and a sparse HLL and checks at
/// each power of ten that both agree (and that the sparse one is still
/// sparse while small) and that the estimate is within six standard
/// errors, as Redis's self test does.
pub(super) fn pfselftest(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    use crate::types::hll::{dense_get, dense_put, DENSE_BYTES, HEADER_BYTES};
    let mut packed = vec![0u8; DENSE_BYTES - HEADER_BYTES];
    let mut expected = vec![0u8; REGISTERS];
    for _ in 0..1000 {
        for (i, e) in expected.iter_mut().enumerate() {
            *e = (ctx.rng().u64(..) & 63) as u8;
            dense_put(&mut packed, i, *e);
        }
        for (i, &e) in expected.iter().enumerate() {
            let got = dense_get(&packed, i);
            if got != e {
                return Err(Cow::Owned(format!(
                    "ERR TESTFAILED Register {i} should be {e} but is {got}"
                )));
            }
        }
    }
    let limit = sparse_max_bytes(ctx);
    let seed = ctx.rng().u64(..);
    let (mut dense, mut sparse) = (Hll::new(), Hll::new());
    dense.to_dense().map_err(hll_error)?;
    let relative_error = 1.04 / (REGISTERS as f64).sqrt();
    let mut checkpoint = 1u64;
    for j in 1..=10_000_000u64 {
        let element = (j ^ seed).to_le_bytes();
        dense.add(&element, limit).map_err(hll_error)?;
        sparse.add(&element, limit).map_err(hll_error)?;
        if j != checkpoint {
            continue;
        }
        if j < (limit / 2) as u64 && sparse.encoding() != Encoding::Sparse {
            return Err(Cow::Borrowed("ERR TESTFAILED sparse encoding not used"));
        }
        let card = dense.count().map_err(hll_error)?;
        if sparse.count().map_err(hll_error)? != card {
            return Err(Cow::Borrowed("ERR TESTFAILED dense/sparse disagree"));
        }
        let max_error = if j == 10 {
            1
        } else {
            (relative_error * 6.0 * checkpoint as f64).ceil() as u64
        };
        if checkpoint.abs_diff(card) > max_error {
            return Err(Cow::Owned(format!(
                "ERR TESTFAILED Too big error. card:{checkpoint} abserr:{}",
                checkpoint.abs_diff(card)
            )));
        }
        checkpoint *= 10;
    }
    ctx.reply.ok();
    Ok(())
}

/// The commands this file implements, one per line so it reads as a table.
#[rustfmt::skip]
pub(super) static COMMANDS: &[CommandSpec] = &[
    cmd!("pfadd", -2, WF, K1, "hyperloglog", "Adds elements to a HyperLogLog.", pfadd),
    cmd!("pfcount", -2, READONLY | MAY_REPLICATE, KALL, "hyperloglog", "Returns the approximated cardinality of the union of HyperLogLogs.", pfcount),
    cmd!("pfmerge", -2, W, KALL, "hyperloglog", "Merges HyperLogLogs into one.", pfmerge),
    cmd!("pfdebug", 3, W | ADMIN, (2, 2, 1), "hyperloglog", "Internal commands for debugging HyperLogLog values.", pfdebug),
    cmd!("pfselftest", 1, ADMIN, K0, "hyperloglog", "An internal command for testing HyperLogLog values.", pfselftest),
];
