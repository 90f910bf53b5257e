//! LCS: the longest common subsequence of two strings, its length, or the
//! matching ranges of both strings.

use std::borrow::Cow;

use crate::commands::{errors, int_arg, CmdError, CmdResult, Ctx};
use crate::resp::Args;
use crate::types::Value;

/// What the client asked for.
#[derive(Default)]
struct LcsOptions {
    len: bool,
    idx: bool,
    with_match_len: bool,
    min_match_len: u64,
}

fn parse_options(args: &Args<'_>) -> Result<LcsOptions, CmdError> {
    let mut o = LcsOptions::default();
    let mut i = 3;
    while i < args.len() {
        let opt = args.get(i);
        if opt.eq_ignore_ascii_case(b"IDX") {
            o.idx = true;
        } else if opt.eq_ignore_ascii_case(b"LEN") {
            o.len = true;
        } else if opt.eq_ignore_ascii_case(b"WITHMATCHLEN") {
            o.with_match_len = true;
        } else if opt.eq_ignore_ascii_case(b"MINMATCHLEN") && i + 1 < args.len() {
            o.min_match_len = int_arg(args, i + 1)?.max(0) as u64;
            i += 1;
        } else {
            return Err(Cow::Borrowed(errors::SYNTAX));
        }
        i += 1;
    }
    if o.len && o.idx {
        return Err(Cow::Borrowed(
            "ERR If you want both the length and indexes, please just use IDX.",
        ));
    }
    Ok(o)
}

/// The string at `key` (empty if missing), or `None` if another type.
fn string_or_empty(ctx: &mut Ctx<'_>, key: &[u8]) -> Option<Vec<u8>> {
    match ctx.state.keyspace.get(ctx.session.db, key) {
        None => Some(Vec::new()),
        Some(Value::Str(s)) => Some(s.to_vec()),
        Some(_) => None,
    }
}

/// The dynamic-programming table: cell `(i, j)` holds the LCS length of
/// the first `i` bytes of `a` and the first `j` of `b`.
struct Table {
    cells: Vec<u32>,
    width: usize,
}

impl Table {
    fn at(&self, i: usize, j: usize) -> u32 {
        self.cells[i * self.width + j]
    }

    /// Fills the table; refuses one larger than `limit_bytes` (Redis
    /// bounds it by `proto-max-bulk-len`) or one that cannot be allocated.
    fn build(a: &[u8], b: &[u8], limit_bytes: usize) -> Result<Table, CmdError> {
        let width = b.len() + 1;
        let cells_len = (a.len() + 1)
            .checked_mul(width)
            .ok_or(Cow::Borrowed(ALLOC_FAILED))?;
        if cells_len.saturating_mul(4) > limit_bytes {
            return Err(Cow::Borrowed(
                "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len",
            ));
        }
        let mut cells = Vec::new();
        cells
            .try_reserve_exact(cells_len)
            .map_err(|_| Cow::Borrowed(ALLOC_FAILED))?;
        cells.resize(cells_len, 0u32);
        for i in 1..=a.len() {
            for j in 1..=b.len() {
                let here = i * width + j;
                cells[here] = if a[i - 1] == b[j - 1] {
                    cells[here - width - 1] + 1
                } else {
                    cells[here - width].max(cells[here - 1])
                };
            }
        }
        Ok(Table { cells, width })
    }
}

const ALLOC_FAILED: &str = "ERR Insufficient memory, failed allocating transient memory for LCS";

/// A run of matching bytes: inclusive ranges in `a` and in `b`.
#[derive(Clone, Copy)]
struct Match {
    a: (usize, usize),
    b: (usize, usize),
}

impl Match {
    fn len(&self) -> u64 {
        (self.a.1 - self.a.0 + 1) as u64
    }
}

/// Walks the table back from its end: the common subsequence, and its
/// contiguous runs from the last to the first.
fn walk_back(table: &Table, a: &[u8], b: &[u8]) -> (Vec<u8>, Vec<Match>) {
    let mut common = Vec::with_capacity(table.at(a.len(), b.len()) as usize);
    let mut runs = Vec::new();
    let mut current: Option<Match> = None;
    let (mut i, mut j) = (a.len(), b.len());
    while i > 0 && j > 0 {
        if a[i - 1] == b[j - 1] {
            common.push(a[i - 1]);
            current = match current {
                // Going backwards, a match right before the run extends it.
                Some(m) if m.a.0 == i && m.b.0 == j => Some(Match {
                    a: (i - 1, m.a.1),
                    b: (j - 1, m.b.1),
                }),
                _ => Some(Match {
                    a: (i - 1, i - 1),
                    b: (j - 1, j - 1),
                }),
            };
            i -= 1;
            j -= 1;
            if i == 0 || j == 0 {
                runs.extend(current.take());
            }
        } else {
            if table.at(i - 1, j) > table.at(i, j - 1) {
                i -= 1;
            } else {
                j -= 1;
            }
            runs.extend(current.take());
        }
    }
    common.reverse();
    (common, runs)
}

pub(in crate::commands) fn lcs(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let (Some(a), Some(b)) = (
        string_or_empty(ctx, args.get(1)),
        string_or_empty(ctx, args.get(2)),
    ) else {
        return Err(Cow::Borrowed(
            "ERR The specified keys must contain string values",
        ));
    };
    let o = parse_options(args)?;
    if a.len() >= u32::MAX as usize - 1 || b.len() >= u32::MAX as usize - 1 {
        return Err(Cow::Borrowed("ERR String too long for LCS"));
    }
    let table = Table::build(&a, &b, ctx.state.config.proto_max_bulk_len_bytes)?;
    let total = i64::from(table.at(a.len(), b.len()));
    if o.len {
        ctx.reply.int(total);
        return Ok(());
    }
    let (common, runs) = walk_back(&table, &a, &b);
    if !o.idx {
        ctx.reply.bulk(&common);
        return Ok(());
    }
    let shown: Vec<&Match> = runs
        .iter()
        .filter(|m| o.min_match_len == 0 || m.len() >= o.min_match_len)
        .collect();
    ctx.reply.map(2);
    ctx.reply.bulk(b"matches");
    ctx.reply.array(shown.len());
    for m in shown {
        ctx.reply.array(if o.with_match_len { 3 } else { 2 });
        for (start, end) in [m.a, m.b] {
            ctx.reply.array(2);
            ctx.reply.int(start as i64);
            ctx.reply.int(end as i64);
        }
        if o.with_match_len {
            ctx.reply.int(m.len() as i64);
        }
    }
    ctx.reply.bulk(b"len");
    ctx.reply.int(total);
    Ok(())
}
