//! XREAD and XREADGROUP, blocking included.
//!
//! A read that finds nothing and was given BLOCK leaves a request for the
//! event loop (`server/blocking.rs`) with the command to run again, its
//! `$` IDs replaced by the IDs they stood for. Each write to a key it
//! waits on runs that command once more for that key only
//! ([`crate::commands::Session::serving`]); it answers when the key has
//! entries past the client's ID (for a group: past the group's last ID).

use std::borrow::Cow;

use super::group::create_consumer;
use super::{reply_entry, reply_id, stream_mut, stream_ref, strict_id};
use crate::commands::blocking::{may_block, timeout_millis};
use crate::commands::{errors, CmdError, CmdResult, Ctx};
use crate::keyspace::events::STREAM;
use crate::resp::{Args, Protocol, ReplyBuf};
use crate::types::stream::{Stream, StreamId};
use crate::types::Bytes;

/// Entries a served blocked read without COUNT returns at most, as Redis.
const BLOCKED_COUNT_DEFAULT: usize = 1000;

/// XREAD's and XREADGROUP's options.
struct ReadArgs<'a> {
    /// BLOCK's deadline (`Some(None)`: forever), `None` without BLOCK.
    block: Option<Option<i64>>,
    count: usize,
    /// Index of the first key.
    keys_at: usize,
    streams: usize,
    group: Option<(&'a [u8], &'a [u8])>,
    noack: bool,
}

fn parse_read<'a>(
    ctx: &Ctx<'_>,
    args: &'a Args<'_>,
    grouped: bool,
) -> Result<ReadArgs<'a>, CmdError> {
    let mut r = ReadArgs {
        block: None,
        count: 0,
        keys_at: 0,
        streams: 0,
        group: None,
        noack: false,
    };
    let mut i = 1;
    while i < args.len() {
        let more = args.len() - i - 1;
        let opt = args.get(i).to_ascii_lowercase();
        if opt == b"block" && more > 0 {
            if crate::commands::scripting::running() {
                return Err(Cow::Owned(format!(
                    "ERR {} command is not allowed with BLOCK option from scripts",
                    String::from_utf8_lossy(args.get(0))
                )));
            }
            i += 1;
            r.block = Some(timeout_millis(ctx, args.get(i))?);
        } else if opt == b"count" && more > 0 {
            i += 1;
            r.count = crate::commands::int_arg(args, i)?.max(0) as usize;
        } else if opt == b"streams" && more > 0 {
            r.keys_at = i + 1;
            if !more.is_multiple_of(2) {
                return Err(Cow::Borrowed("ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified."));
            }
            r.streams = more / 2;
            break;
        } else if opt == b"group" && more >= 2 {
            if !grouped {
                return Err(Cow::Borrowed("ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead."));
            }
            r.group = Some((args.get(i + 1), args.get(i + 2)));
            i += 2;
        } else if opt == b"noack" {
            if !grouped {
                return Err(Cow::Borrowed("ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead."));
            }
            r.noack = true;
        } else {
            return Err(Cow::Borrowed(errors::SYNTAX));
        }
        i += 1;
    }
    if r.keys_at == 0 {
        return Err(Cow::Borrowed(errors::SYNTAX));
    }
    if grouped && r.group.is_none() {
        return Err(Cow::Borrowed("ERR Missing GROUP option for XREADGROUP"));
    }
    Ok(r)
}

/// The ID each key reads after (`StreamId::MAX` stands for `>`), for the
/// key indices `which`.
fn resolve_ids(
    ctx: &mut Ctx<'_>,
    args: &Args<'_>,
    r: &ReadArgs<'_>,
    which: &[usize],
) -> Result<Vec<StreamId>, CmdError> {
    let db = ctx.session.db;
    let mut ids = Vec::with_capacity(which.len());
    for &k in which {
        let key = args.get(r.keys_at + k);
        let text = args.get(r.keys_at + r.streams + k);
        let s = stream_ref(&mut ctx.state.keyspace, db, key)?;
        if let Some((group, _)) = r.group {
            if !s.is_some_and(|s| s.groups.contains_key(group)) {
                return Err(Cow::Owned(format!(
                    "NOGROUP No such key '{}' or consumer group '{}' in XREADGROUP with GROUP option",
                    String::from_utf8_lossy(key),
                    String::from_utf8_lossy(group)
                )));
            }
        }
        ids.push(match text {
            b"$" if r.group.is_some() => return Err(Cow::Borrowed("ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set.")),
            b"$" => s.map_or(StreamId::MIN, |s| s.last_id),
            b">" if r.group.is_none() => return Err(Cow::Borrowed("ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.")),
            b">" => StreamId::MAX,
            t => strict_id(t)?,
        });
    }
    Ok(ids)
}

pub(in crate::commands) fn xread(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    read_generic(ctx, args, false)
}

pub(in crate::commands) fn xreadgroup(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    read_generic(ctx, args, true)
}

fn read_generic(ctx: &mut Ctx<'_>, args: &Args<'_>, grouped: bool) -> CmdResult {
    let mut r = parse_read(ctx, args, grouped)?;
    // Served after blocking: only the key that became ready counts.
    let serving = ctx.session.serving.clone();
    let which: Vec<usize> = match &serving {
        Some(ready) => (0..r.streams)
            .filter(|&k| args.get(r.keys_at + k) == &ready[..])
            .take(1)
            .collect(),
        None => (0..r.streams).collect(),
    };
    if serving.is_some() {
        if r.count == 0 {
            r.count = BLOCKED_COUNT_DEFAULT;
        }
        if let (Some((group, _)), Some(&k)) = (r.group, which.first()) {
            let key = args.get(r.keys_at + k);
            let db = ctx.session.db;
            if !stream_ref(&mut ctx.state.keyspace, db, key)?
                .is_some_and(|s| s.groups.contains_key(group))
            {
                return Err(Cow::Borrowed(
                    "NOGROUP the consumer group this client was blocked on no longer exists",
                ));
            }
        }
    }
    let ids = resolve_ids(ctx, args, &r, &which)?;
    let mut body = ReplyBuf::new(ctx.reply.proto);
    let mut served = 0;
    for (n, &k) in which.iter().enumerate() {
        if serve_key(ctx, args, &r, k, ids[n], &mut body)? {
            served += 1;
        }
    }
    if served > 0 {
        match ctx.reply.proto {
            Protocol::Resp2 => ctx.reply.array(served),
            Protocol::Resp3 => ctx.reply.map(served),
        }
        ctx.reply.buf.extend_from_slice(&body.buf);
        return Ok(());
    }
    match r.block {
        Some(deadline) if may_block(ctx.session) => {
            let keys = (0..r.streams)
                .map(|k| Bytes::from(args.get(r.keys_at + k)))
                .collect();
            let mut command: Vec<Vec<u8>> = args.iter().map(<[u8]>::to_vec).collect();
            if serving.is_none() {
                for (k, id) in ids.iter().enumerate() {
                    let at = r.keys_at + r.streams + k;
                    if args.get(at) == b"$" {
                        command[at] = id.text().into_bytes();
                    }
                }
            }
            ctx.session.block = Some(crate::commands::BlockRequest {
                keys,
                deadline_ms: deadline,
                kind: crate::commands::BlockKind::Stream,
                command: Some(command),
            });
        }
        _ => ctx.reply.null_array(),
    }
    Ok(())
}

/// Serves key `k` into `body` if it has something for the reader: the
/// `[key, entries]` pair. Whether it did.
fn serve_key(
    ctx: &mut Ctx<'_>,
    args: &Args<'_>,
    r: &ReadArgs<'_>,
    k: usize,
    after: StreamId,
    body: &mut ReplyBuf,
) -> Result<bool, CmdError> {
    let db = ctx.session.db;
    let key = args.get(r.keys_at + k);
    let Some(s) = stream_ref(&mut ctx.state.keyspace, db, key)? else {
        return Ok(false);
    };
    let history = after != StreamId::MAX;
    let start = match r.group {
        // Both forms read what comes after the ID given.
        Some(_) if history => after.next().unwrap_or(StreamId::MAX),
        Some((group, _)) => {
            let last = s.groups.get(group).map_or(StreamId::MAX, |g| g.last_id);
            if s.length == 0 || s.last_valid_id() <= last {
                return Ok(false);
            }
            last.next().unwrap_or(StreamId::MAX)
        }
        None => {
            if s.length == 0 || s.last_valid_id() <= after {
                return Ok(false);
            }
            after.next().unwrap_or(StreamId::MAX)
        }
    };
    if body.proto == Protocol::Resp2 {
        body.array(2);
    }
    body.bulk(key);
    let count = if r.count == 0 { usize::MAX } else { r.count };
    match r.group {
        None => {
            let entries: Vec<_> = s.range(start, StreamId::MAX, false).take(count).collect();
            body.array(entries.len());
            entries.iter().for_each(|e| reply_entry(body, e));
        }
        Some((group, consumer)) => {
            let read = GroupRead {
                key,
                group,
                consumer,
                noack: r.noack,
                count,
            };
            read.serve(ctx, start, history, body);
        }
    }
    Ok(true)
}

/// One key's read in a group.
struct GroupRead<'a> {
    key: &'a [u8],
    group: &'a [u8],
    consumer: &'a [u8],
    noack: bool,
    count: usize,
}

impl GroupRead<'_> {
    fn serve(&self, ctx: &mut Ctx<'_>, start: StreamId, history: bool, body: &mut ReplyBuf) {
        let (db, now) = (ctx.session.db, ctx.state.keyspace.now_ms);
        let Some(s) = stream_mut(&mut ctx.state.keyspace, db, self.key) else {
            return;
        };
        let mut created = false;
        let mut claims = Vec::new();
        let before = s
            .groups
            .get(self.group)
            .map(|g| (g.last_id, g.entries_read));
        let stream: &mut Stream = s;
        let mut groups = std::mem::take(&mut stream.groups);
        if let Some(g) = groups.get_mut(self.group) {
            created = create_consumer(g, self.consumer, now);
            if let Some(c) = g.consumers.get_mut(self.consumer) {
                c.seen_time = now;
            }
            if history {
                claims = self.history(stream, g, start, now, body);
            } else {
                claims = self.new_entries(stream, g, start, now, body);
            }
        }
        stream.groups = groups;
        let after = stream
            .groups
            .get(self.group)
            .map(|g| (g.last_id, g.entries_read));
        if created {
            ctx.notify(STREAM, "xgroup-createconsumer", self.key);
            ctx.propagate(&[
                b"XGROUP",
                b"CREATECONSUMER",
                self.key,
                self.group,
                self.consumer,
            ]);
        }
        for claim in claims.iter().filter(|c| !c.is_empty()) {
            let refs: Vec<&[u8]> = claim.iter().map(Vec::as_slice).collect();
            ctx.propagate(&refs);
        }
        if let Some((last, read)) = after.filter(|a| Some(*a) != before) {
            let (id, read) = (last.text(), read.to_string());
            ctx.propagate(&[
                b"XGROUP",
                b"SETID",
                self.key,
                self.group,
                id.as_bytes(),
                b"ENTRIESREAD",
                read.as_bytes(),
            ]);
        }
    }

    /// The consumer's own pending entries from `start`: each delivered
    /// again (a deleted one as `[id, nil]`).
    fn history(
        &self,
        s: &Stream,
        g: &mut crate::types::stream::Group,
        start: StreamId,
        now: i64,
        body: &mut ReplyBuf,
    ) -> Vec<Vec<Vec<u8>>> {
        let ids: Vec<StreamId> = g
            .consumers
            .get(self.consumer)
            .map(|c| c.pel.range(start..).take(self.count).copied().collect())
            .unwrap_or_default();
        body.array(ids.len());
        let mut claims = Vec::new();
        for id in ids {
            match s.get(id) {
                Some(e) => {
                    reply_entry(body, &e);
                    if let Some(nack) = g.pel.get_mut(&id) {
                        nack.delivery_time = now;
                        nack.delivery_count += 1;
                    }
                    claims.push(claim_args(self.key, self.group, g, id));
                }
                None => {
                    body.array(2);
                    reply_id(body, id);
                    body.null_array();
                }
            }
        }
        claims
    }

    /// Entries after `start` the group has not delivered: the group moves
    /// past them, and each becomes pending for the consumer (not with
    /// NOACK).
    fn new_entries(
        &self,
        s: &Stream,
        g: &mut crate::types::stream::Group,
        start: StreamId,
        now: i64,
        body: &mut ReplyBuf,
    ) -> Vec<Vec<Vec<u8>>> {
        let entries: Vec<_> = s
            .range(start, StreamId::MAX, false)
            .take(self.count)
            .collect();
        body.array(entries.len());
        let consumer = Bytes::from(self.consumer);
        let mut claims = Vec::new();
        for e in &entries {
            s.advance_group(g, e.id);
            reply_entry(body, e);
            if !self.noack {
                g.assign(e.id, &consumer, now, Some(1));
                claims.push(claim_args(self.key, self.group, g, e.id));
            }
        }
        claims
    }
}

/// The XCLAIM that sets pending entry `id` of group `g` as it is now, and
/// the group's last ID: what Redis propagates for a delivery.
pub(super) fn claim_args(
    key: &[u8],
    group: &[u8],
    g: &crate::types::stream::Group,
    id: StreamId,
) -> Vec<Vec<u8>> {
    let Some(nack) = g.pel.get(&id) else {
        return Vec::new();
    };
    [
        b"XCLAIM".to_vec(),
        key.to_vec(),
        group.to_vec(),
        nack.consumer.to_vec(),
        b"0".to_vec(),
        id.text().into_bytes(),
        b"TIME".to_vec(),
        nack.delivery_time.to_string().into_bytes(),
        b"RETRYCOUNT".to_vec(),
        nack.delivery_count.to_string().into_bytes(),
        b"FORCE".to_vec(),
        b"JUSTID".to_vec(),
        b"LASTID".to_vec(),
        g.last_id.text().into_bytes(),
    ]
    .to_vec()
}
