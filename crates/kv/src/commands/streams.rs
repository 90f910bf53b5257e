//! Stream commands (XADD, XRANGE, XREAD, consumer groups, XINFO...), as
//! Redis 7.0's `t_stream.c` behaves: the shared parsing and replies here,
//! the commands in `streams/`.
//!
//! Every write logs a deterministic form: XADD with the ID it generated
//! and an approximate trim turned into the exact one it did; a group read
//! as the XCLAIMs and XGROUP SETID Redis propagates (`docs/streams.md`).

mod add;
mod claim;
mod group;
mod info;
mod read;

use std::borrow::Cow;

use super::table::*;
use super::{errors, CmdError, Ctx};
use crate::keyspace::Keyspace;
use crate::resp::{Args, ReplyBuf};
use crate::types::stream::{Entry, NodeLimits, Stream, StreamId};
use crate::types::Value;

/// A malformed ID argument.
const INVALID_ID: &str = "ERR Invalid stream ID specified as stream command argument";

/// An ID argument longer than this is invalid (Redis parses IDs in a
/// 128-byte buffer).
const ID_TEXT_MAX: usize = 127;

/// Parses an unsigned 64-bit number as Redis's `string2ull` does.
fn parse_u64(text: &[u8]) -> Option<u64> {
    if let Some(n) = crate::types::number::parse_i64(text) {
        return u64::try_from(n).ok();
    }
    let text = std::str::from_utf8(text).ok()?;
    let trimmed = text.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let digits = trimmed.strip_prefix('+').unwrap_or(trimmed);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// What an ID argument says: the ID, and whether its sequence was given
/// (`ms-*` leaves it to XADD).
#[derive(Clone, Copy, Debug)]
pub(super) struct ParsedId {
    pub(super) id: StreamId,
    pub(super) seq_given: bool,
}

/// Parses `<ms>-<seq>`, `<ms>` (the sequence `missing_seq`), `-`, `+`
/// (refused when `strict`), and with `auto_seq` also `<ms>-*`.
fn parse_id_full(
    text: &[u8],
    missing_seq: u64,
    strict: bool,
    auto_seq: bool,
) -> Result<ParsedId, CmdError> {
    let invalid = || Cow::Borrowed(INVALID_ID);
    if text.len() > ID_TEXT_MAX {
        return Err(invalid());
    }
    let given = |id| ParsedId {
        id,
        seq_given: true,
    };
    match text {
        b"-" | b"+" if strict => return Err(invalid()),
        b"-" => return Ok(given(StreamId::MIN)),
        b"+" => return Ok(given(StreamId::MAX)),
        _ => {}
    }
    // C stops at a NUL byte, so text after one is ignored.
    let text = text.split(|&b| b == 0).next().unwrap_or_default();
    let (ms_text, seq_text) = match text.iter().position(|&b| b == b'-') {
        Some(at) => (&text[..at], Some(&text[at + 1..])),
        None => (text, None),
    };
    let ms = parse_u64(ms_text).ok_or_else(invalid)?;
    let (seq, seq_given) = match seq_text {
        Some(b"*") if auto_seq => (0, false),
        Some(t) => (parse_u64(t).ok_or_else(invalid)?, true),
        None => (missing_seq, true),
    };
    Ok(ParsedId {
        id: StreamId { ms, seq },
        seq_given,
    })
}

/// An ID where `-` and `+` are not allowed.
pub(super) fn strict_id(text: &[u8]) -> Result<StreamId, CmdError> {
    parse_id_full(text, 0, true, false).map(|p| p.id)
}

/// One end of a range: an ID, `-`, `+`, or `(id` (exclusive, then moved
/// by one by the caller); `missing_seq` for an ID without a sequence.
pub(super) fn interval_id(text: &[u8], missing_seq: u64) -> Result<(StreamId, bool), CmdError> {
    if text.len() > 1 && text[0] == b'(' {
        let id = parse_id_full(&text[1..], missing_seq, true, false)?.id;
        return Ok((id, true));
    }
    Ok((parse_id_full(text, missing_seq, false, false)?.id, false))
}

/// A range start: exclusive starts move to the next ID.
pub(super) fn range_start(text: &[u8]) -> Result<StreamId, CmdError> {
    match interval_id(text, 0)? {
        (id, false) => Ok(id),
        (id, true) => id
            .next()
            .ok_or(Cow::Borrowed("ERR invalid start ID for the interval")),
    }
}

/// A range end: exclusive ends move to the previous ID.
pub(super) fn range_end(text: &[u8]) -> Result<StreamId, CmdError> {
    match interval_id(text, u64::MAX)? {
        (id, false) => Ok(id),
        (id, true) => id
            .prev()
            .ok_or(Cow::Borrowed("ERR invalid end ID for the interval")),
    }
}

/// The stream at `key`, if any; WRONGTYPE for another value.
pub(super) fn stream_ref<'k>(
    ks: &'k mut Keyspace,
    db: usize,
    key: &[u8],
) -> Result<Option<&'k Stream>, CmdError> {
    match ks.get(db, key) {
        None => Ok(None),
        Some(Value::Stream(s)) => Ok(Some(s)),
        Some(_) => Err(Cow::Borrowed(errors::WRONGTYPE)),
    }
}

/// The stream at `key` for a change (checked to be one beforehand).
pub(super) fn stream_mut<'k>(
    ks: &'k mut Keyspace,
    db: usize,
    key: &[u8],
) -> Option<&'k mut Stream> {
    match ks.get_mut(db, key) {
        Some(Value::Stream(s)) => Some(s),
        _ => None,
    }
}

/// Replies with an ID as a bulk string.
pub(super) fn reply_id(r: &mut ReplyBuf, id: StreamId) {
    r.bulk(id.text().as_bytes());
}

/// Replies with one entry: `[id, [field, value...]]`.
pub(super) fn reply_entry(r: &mut ReplyBuf, e: &Entry<'_>) {
    r.array(2);
    reply_id(r, e.id);
    r.array(e.fields.len() * 2);
    for (f, v) in &e.fields {
        r.bulk(f);
        r.bulk(v);
    }
}

/// The block limits the configuration sets (`stream-node-max-*`): typed
/// fields, read on every XADD.
pub(super) fn node_limits(ctx: &Ctx<'_>) -> NodeLimits {
    let config = &ctx.state.config;
    NodeLimits {
        max_entries: config.stream_node_max_entries,
        max_bytes: config.stream_node_max_bytes,
    }
}

/// `unknown subcommand or wrong number of arguments` for `args`, as
/// Redis's containers word it.
pub(super) fn subcommand_syntax(args: &Args<'_>) -> CmdError {
    Cow::Owned(format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try {} HELP.",
        String::from_utf8_lossy(&args.get(1)[..args.get(1).len().min(128)]),
        String::from_utf8_lossy(args.get(0)).to_ascii_uppercase()
    ))
}

/// XREAD and XREADGROUP's keys: after the first `STREAMS` option, the
/// first half of the arguments left (none when they are odd).
fn xread_keys(args: &Args<'_>, out: &mut Vec<usize>) {
    let mut i = 1;
    while i < args.len() {
        let arg = args.get(i).to_ascii_lowercase();
        match arg.as_slice() {
            b"block" | b"count" => i += 2,
            b"group" => i += 3,
            b"noack" => i += 1,
            b"streams" => {
                let left = args.len() - i - 1;
                if left > 0 && left.is_multiple_of(2) {
                    out.extend(i + 1..=i + left / 2);
                }
                return;
            }
            _ => return,
        }
    }
}

/// XREAD's key search, as COMMAND INFO describes it.
const XREAD_KEYS: KeySearch = (
    BeginSearch::Keyword("STREAMS", 1),
    FindKeys::Range(-1, 1, 2),
);
/// XREADGROUP's.
const XREADGROUP_KEYS: KeySearch = (
    BeginSearch::Keyword("STREAMS", 4),
    FindKeys::Range(-1, 1, 2),
);
/// A subcommand's key, the third argument.
const K2: (i32, i32, i32) = (2, 2, 1);
const ND: &[&str] = &["nondeterministic_output"];

/// The commands of this family, one per line so it reads as a table.
#[rustfmt::skip]
pub(super) static COMMANDS: &[CommandSpec] = &[
    cmd!("xadd", -5, WF, K1, "stream", "Appends an entry to a stream.", add::xadd).with_tips(ND),
    cmd!("xlen", 2, RF, K1, "stream", "Returns the number of entries in a stream.", add::xlen),
    cmd!("xrange", -4, R, K1, "stream", "Returns entries in a range of IDs.", add::xrange),
    cmd!("xrevrange", -4, R, K1, "stream", "Returns entries in a range of IDs, newest first.", add::xrevrange),
    cmd!("xdel", -3, D, K1, "stream", "Deletes entries by ID.", add::xdel),
    cmd!("xtrim", -4, WRITE, K1, "stream", "Removes the oldest entries.", add::xtrim).with_tips(ND),
    cmd!("xsetid", -3, WF, K1, "stream", "Sets a stream's last ID and counters.", add::xsetid),
    cmd!("xread", -4, READONLY | BLOCKING, K0, "stream", "Reads entries from streams, or blocks.", read::xread).with_key_finder(xread_keys).with_key_searches(&[XREAD_KEYS]),
    cmd!("xreadgroup", -7, WRITE | BLOCKING, K0, "stream", "Reads entries for a consumer of a group, or blocks.", read::xreadgroup).with_key_finder(xread_keys).with_key_searches(&[XREADGROUP_KEYS]),
    cmd!("xack", -4, D, K1, "stream", "Acknowledges pending entries.", group::xack),
    cmd!("xpending", -3, R, K1, "stream", "Returns a group's pending entries.", group::xpending).with_tips(ND),
    cmd!("xclaim", -6, D, K1, "stream", "Changes the owner of pending entries.", claim::xclaim).with_tips(ND),
    cmd!("xautoclaim", -6, D, K1, "stream", "Claims idle pending entries from a start ID.", claim::xautoclaim).with_tips(ND),
    cmd!("xgroup", -2, 0, K0, "stream", "Manages consumer groups.", group::xgroup).with_subcommands(XGROUP),
    cmd!("xinfo", -2, 0, K0, "stream", "Describes streams, groups and consumers.", info::xinfo).with_subcommands(XINFO),
];

#[rustfmt::skip]
static XGROUP: &[CommandSpec] = &[
    cmd!("create", -5, W, K2, "stream", "Creates a consumer group.", group::xgroup),
    cmd!("createconsumer", 5, W, K2, "stream", "Creates a consumer in a group.", group::xgroup),
    cmd!("delconsumer", 5, WRITE, K2, "stream", "Deletes a consumer from a group.", group::xgroup),
    cmd!("destroy", 4, WRITE, K2, "stream", "Deletes a consumer group.", group::xgroup),
    cmd!("setid", -5, WRITE, K2, "stream", "Sets a group's last delivered ID.", group::xgroup),
    cmd!("help", 2, LOADING | STALE, K0, "stream", "Explains XGROUP's subcommands.", group::xgroup_help).with_acl(super::acl::bit("stream")),
];

#[rustfmt::skip]
static XINFO: &[CommandSpec] = &[
    cmd!("consumers", 4, READONLY, K2, "stream", "Lists a group's consumers.", info::xinfo).with_tips(ND),
    cmd!("groups", 3, READONLY, K2, "stream", "Lists a stream's consumer groups.", info::xinfo),
    cmd!("stream", -3, READONLY, K2, "stream", "Describes a stream.", info::xinfo),
    cmd!("help", 2, LOADING | STALE, K0, "stream", "Explains XINFO's subcommands.", info::xinfo_help).with_acl(super::acl::bit("stream")),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_parse_as_redis_parses_them() {
        let p =
            |t: &[u8]| parse_id_full(t, 7, false, true).map(|p| (p.id.ms, p.id.seq, p.seq_given));
        assert_eq!(p(b"5").unwrap(), (5, 7, true));
        assert_eq!(p(b"5-3").unwrap(), (5, 3, true));
        assert_eq!(p(b"5-*").unwrap(), (5, 0, false));
        assert_eq!(p(b"18446744073709551615-1").unwrap().0, u64::MAX);
        assert!(p(b"-1").is_err() && p(b"5-").is_err() && p(b"a-1").is_err());
        assert!(p(b"18446744073709551616").is_err());
        assert!(strict_id(b"+").is_err());
        assert_eq!(
            range_end(b"(5-0").unwrap(),
            StreamId {
                ms: 4,
                seq: u64::MAX
            }
        );
        assert!(range_start(b"(18446744073709551615-18446744073709551615").is_err());
    }
}
