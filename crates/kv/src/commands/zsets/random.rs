//! ZRANDMEMBER, and the random picking SRANDMEMBER and HRANDFIELD share
//! with it.

use std::borrow::Cow;

use super::{reply_members, zset_ref, CmdError, CmdResult, Ctx};
use crate::commands::{errors, int_arg};
use crate::resp::Args;

/// Most members one call with a negative count may return: Redis has no
/// limit short of `LONG_MAX`, but a reply that large would exhaust memory,
/// so larger counts get Redis's out-of-range error.
pub(in crate::commands) const RANDOM_PICKS_MAX: u64 = 1 << 24;

/// The error for a count of `i64::MIN`, which has no positive opposite.
pub(in crate::commands) const COUNT_RANGE: &str =
    "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807";

/// Picks indices below `len` for a count argument: a negative count picks
/// `|count|` times with repeats, in random order; a count of at least
/// `len` takes every index in order; a smaller one distinct indices in
/// random order.
pub(in crate::commands) fn pick_indices(
    rng: &mut fastrand::Rng,
    len: usize,
    count: i64,
) -> Vec<usize> {
    if len == 0 || count == 0 {
        return Vec::new();
    }
    if count < 0 {
        let picks = count.unsigned_abs();
        return (0..picks)
            .map(|_| rng.u64(..(len as u64).max(1)) as usize)
            .collect();
    }
    let count = usize::try_from(count).unwrap_or(usize::MAX);
    if count >= len {
        return (0..len).collect();
    }
    if count.saturating_mul(4) < len {
        // Few of many: draw until `count` distinct, without touching the
        // other indices (each draw repeats with probability below 1/4).
        let mut seen = std::collections::HashSet::with_capacity(count);
        let mut out = Vec::with_capacity(count);
        while out.len() < count {
            let i = rng.u64(..(len as u64).max(1)) as usize;
            if seen.insert(i) {
                out.push(i);
            }
        }
        return out;
    }
    // A partial Fisher-Yates shuffle over the indices.
    let mut all: Vec<usize> = (0..len).collect();
    for i in 0..count {
        let j = i + rng.u64(..((len - i) as u64).max(1)) as usize;
        all.swap(i, j);
    }
    all.truncate(count);
    all
}

/// Parses `count [WITH...]` of ZRANDMEMBER and HRANDFIELD: the count, and
/// whether the option `with` (`WITHSCORES`, `WITHVALUES`) follows.
pub(in crate::commands) fn count_and_with(
    args: &Args<'_>,
    with: &[u8],
) -> Result<(i64, bool), CmdError> {
    let count = int_arg(args, 2)?;
    if count == i64::MIN {
        return Err(Cow::Borrowed(COUNT_RANGE));
    }
    let with_option = match args.len() {
        3 => false,
        4 if args.get(3).eq_ignore_ascii_case(with) => true,
        _ => return Err(Cow::Borrowed(errors::SYNTAX)),
    };
    // Pairs double the reply; Redis refuses counts whose double overflows.
    if with_option && !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&count) {
        return Err(Cow::Borrowed("ERR value is out of range"));
    }
    if count < 0 && count.unsigned_abs() > RANDOM_PICKS_MAX {
        return Err(Cow::Borrowed("ERR value is out of range"));
    }
    Ok((count, with_option))
}

pub(super) fn zrandmember(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let db = ctx.session.db;
    if args.len() == 2 {
        let z = zset_ref(&mut ctx.state.keyspace, db, args.get(1))?;
        let Some(z) = z.filter(|z| !z.is_empty()) else {
            ctx.reply.null();
            return Ok(());
        };
        let at = ctx.state.rng.u64(..(z.len() as u64).max(1)) as usize;
        let member = z.range_by_rank(at, at).next().map(|(m, _)| m.to_vec());
        ctx.reply.bulk_opt(member.as_deref());
        return Ok(());
    }
    let (count, withscores) = count_and_with(args, b"WITHSCORES")?;
    let Some(z) = zset_ref(&mut ctx.state.keyspace, db, args.get(1))? else {
        ctx.reply.array(0);
        return Ok(());
    };
    let members: Vec<(&[u8], f64)> = z.iter().collect();
    let picks = pick_indices(&mut ctx.state.rng, members.len(), count);
    let items: Vec<(Vec<u8>, f64)> = picks
        .into_iter()
        .filter_map(|i| members.get(i).map(|(m, s)| (m.to_vec(), *s)))
        .collect();
    reply_members(ctx, &items, withscores);
    Ok(())
}
