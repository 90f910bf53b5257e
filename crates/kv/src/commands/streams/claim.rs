//! XCLAIM and XAUTOCLAIM: pending entries change owner. Each claim (and
//! each pending entry dropped because its entry was deleted) is logged as
//! the idempotent XCLAIM Redis propagates.

use std::borrow::Cow;

use super::group::{create_consumer, no_key_or_group};
use super::read::claim_args;
use super::{range_start, reply_entry, reply_id, stream_mut, stream_ref, strict_id};
use crate::commands::{errors, CmdError, CmdResult, Ctx};
use crate::keyspace::events::STREAM;
use crate::resp::{Args, ReplyBuf};
use crate::types::number::parse_i64;
use crate::types::stream::{Group, Stream, StreamId};
use crate::types::Bytes;

fn int_or(args: &Args<'_>, at: usize, error: &'static str) -> Result<i64, CmdError> {
    parse_i64(args.get(at)).ok_or(Cow::Borrowed(error))
}

/// Checks that `key` holds a stream with group `group`.
fn check_group(ctx: &mut Ctx<'_>, key: &[u8], group: &[u8]) -> Result<(), CmdError> {
    let db = ctx.session.db;
    match stream_ref(&mut ctx.state.keyspace, db, key)? {
        Some(s) if s.groups.contains_key(group) => Ok(()),
        _ => Err(no_key_or_group(key, group)),
    }
}

/// XCLAIM's options after the IDs.
#[derive(Default)]
struct ClaimOptions {
    force: bool,
    justid: bool,
    delivery_time: Option<i64>,
    retry_count: Option<u64>,
    last_id: StreamId,
}

fn claim_options(args: &Args<'_>, from: usize, now: i64) -> Result<ClaimOptions, CmdError> {
    let mut o = ClaimOptions::default();
    let mut j = from;
    while j < args.len() {
        let more = args.len() - 1 - j;
        let opt = args.get(j).to_ascii_lowercase();
        match opt.as_slice() {
            b"force" => o.force = true,
            b"justid" => o.justid = true,
            b"idle" if more > 0 => {
                j += 1;
                let idle = int_or(args, j, "ERR Invalid IDLE option argument for XCLAIM")?;
                o.delivery_time = Some(now.saturating_sub(idle));
            }
            b"time" if more > 0 => {
                j += 1;
                o.delivery_time = Some(int_or(
                    args,
                    j,
                    "ERR Invalid TIME option argument for XCLAIM",
                )?);
            }
            b"retrycount" if more > 0 => {
                j += 1;
                let n = int_or(args, j, "ERR Invalid RETRYCOUNT option argument for XCLAIM")?;
                o.retry_count = u64::try_from(n).ok();
            }
            b"lastid" if more > 0 => {
                j += 1;
                o.last_id = strict_id(args.get(j))?;
            }
            _ => {
                return Err(Cow::Owned(format!(
                    "ERR Unrecognized XCLAIM option '{}'",
                    String::from_utf8_lossy(args.get(j))
                )))
            }
        }
        j += 1;
    }
    Ok(o)
}

/// What one claim run did, to log and notify after the stream is let go.
#[derive(Default)]
struct Claimed {
    logged: Vec<Vec<Vec<u8>>>,
    consumer_created: bool,
}

/// Makes `consumer` exist in `g` (noting its creation) and seen now.
fn touch_consumer(g: &mut Group, consumer: &[u8], now: i64, done: &mut Claimed) {
    done.consumer_created |= create_consumer(g, consumer, now);
    if let Some(c) = g.consumers.get_mut(consumer) {
        c.seen_time = now;
    }
}

/// Drops pending entry `id` of `g`, whose entry is gone, logging it.
fn drop_deleted(key: &[u8], group: &[u8], g: &mut Group, id: StreamId, done: &mut Claimed) {
    done.logged.push(claim_args(key, group, g, id));
    g.remove_pending(id);
}

pub(in crate::commands) fn xclaim(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let (key, group, consumer) = (args.get(1), args.get(2), args.get(3));
    check_group(ctx, key, group)?;
    let min_idle = int_or(args, 4, "ERR Invalid min-idle-time argument for XCLAIM")?.max(0);
    let mut ids = Vec::new();
    let mut j = 5;
    while j < args.len() {
        match strict_id(args.get(j)) {
            Ok(id) => ids.push(id),
            Err(_) => break,
        }
        j += 1;
    }
    let now = ctx.state.keyspace.now_ms;
    let o = claim_options(args, j, now)?;
    // A time in the future or before 1970 means now, as in Redis.
    let delivery_time = o
        .delivery_time
        .filter(|t| (0..=now).contains(t))
        .unwrap_or(now);
    let db = ctx.session.db;
    let Some(s) = stream_mut(&mut ctx.state.keyspace, db, key) else {
        return Err(no_key_or_group(key, group));
    };
    let mut groups = std::mem::take(&mut s.groups);
    let mut done = Claimed::default();
    let mut reply = ReplyBuf::new(ctx.reply.proto);
    let mut claimed = 0;
    if let Some(g) = groups.get_mut(group) {
        let run = ClaimRun {
            key,
            group,
            consumer,
            min_idle,
            now,
            delivery_time,
            options: &o,
        };
        claimed = run.claim(s, g, &ids, &mut reply, &mut done);
    }
    s.groups = groups;
    ctx.reply.array(claimed);
    ctx.reply.buf.extend_from_slice(&reply.buf);
    finish(ctx, key, group, consumer, done);
    Ok(())
}

/// One XCLAIM's fixed inputs.
struct ClaimRun<'a> {
    key: &'a [u8],
    group: &'a [u8],
    consumer: &'a [u8],
    min_idle: i64,
    now: i64,
    delivery_time: i64,
    options: &'a ClaimOptions,
}

impl ClaimRun<'_> {
    /// Claims `ids` in `g`, replying with each claimed entry (or ID);
    /// returns how many it claimed.
    fn claim(
        &self,
        s: &Stream,
        g: &mut Group,
        ids: &[StreamId],
        reply: &mut ReplyBuf,
        done: &mut Claimed,
    ) -> usize {
        let o = self.options;
        let mut moved_last = o.last_id > g.last_id;
        if moved_last {
            g.last_id = o.last_id;
        }
        let mut claimed = 0;
        for &id in ids {
            let existing = g.pel.get(&id).map(|n| (n.delivery_time, n.delivery_count));
            if s.get(id).is_none() {
                if existing.is_some() {
                    drop_deleted(self.key, self.group, g, id, done);
                    moved_last = false;
                }
                continue;
            }
            let old_count = match existing {
                Some((time, _)) if self.min_idle > 0 && self.now - time < self.min_idle => continue,
                Some((_, count)) => count,
                // FORCE makes a pending entry, delivered once.
                None if o.force => 1,
                None => continue,
            };
            touch_consumer(g, self.consumer, self.now, done);
            let count = match o.retry_count {
                Some(n) => n,
                None if !o.justid => old_count + 1,
                None => old_count,
            };
            g.assign(
                id,
                &Bytes::from(self.consumer),
                self.delivery_time,
                Some(count),
            );
            match s.get(id) {
                Some(e) if !o.justid => reply_entry(reply, &e),
                _ => reply_id(reply, id),
            }
            claimed += 1;
            // The XCLAIM logged carries the group's last ID too.
            done.logged.push(claim_args(self.key, self.group, g, id));
            moved_last = false;
        }
        if moved_last {
            let (last, read) = (g.last_id.text(), g.entries_read.to_string());
            let setid: [&[u8]; 7] = [
                b"XGROUP",
                b"SETID",
                self.key,
                self.group,
                last.as_bytes(),
                b"ENTRIESREAD",
                read.as_bytes(),
            ];
            done.logged.push(setid.iter().map(|a| a.to_vec()).collect());
        }
        claimed
    }
}

/// Notifies a consumer's creation and logs what a claim did.
fn finish(ctx: &mut Ctx<'_>, key: &[u8], group: &[u8], consumer: &[u8], done: Claimed) {
    if done.consumer_created {
        ctx.notify(STREAM, "xgroup-createconsumer", key);
        ctx.propagate(&[b"XGROUP", b"CREATECONSUMER", key, group, consumer]);
    }
    for parts in done.logged.iter().filter(|p| !p.is_empty()) {
        let refs: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
        ctx.propagate(&refs);
    }
}

/// XAUTOCLAIM's COUNT bound (Redis's `LONG_MAX / 16`).
const AUTOCLAIM_COUNT_MAX: i64 = i64::MAX / 16;

pub(in crate::commands) fn xautoclaim(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let (key, group, consumer) = (args.get(1), args.get(2), args.get(3));
    let min_idle = int_or(args, 4, "ERR Invalid min-idle-time argument for XAUTOCLAIM")?.max(0);
    let start = range_start(args.get(5))?;
    let (mut count, mut justid) = (100i64, false);
    let mut j = 6;
    while j < args.len() {
        let more = args.len() - 1 - j;
        let opt = args.get(j).to_ascii_lowercase();
        if opt == b"count" && more > 0 {
            count = parse_i64(args.get(j + 1))
                .filter(|n| (1..=AUTOCLAIM_COUNT_MAX).contains(n))
                .ok_or(Cow::Borrowed("ERR COUNT must be > 0"))?;
            j += 1;
        } else if opt == b"justid" {
            justid = true;
        } else {
            return Err(Cow::Borrowed(errors::SYNTAX));
        }
        j += 1;
    }
    check_group(ctx, key, group)?;
    let (db, now) = (ctx.session.db, ctx.state.keyspace.now_ms);
    let Some(s) = stream_mut(&mut ctx.state.keyspace, db, key) else {
        return Err(no_key_or_group(key, group));
    };
    let mut groups = std::mem::take(&mut s.groups);
    let mut done = Claimed::default();
    let run = AutoRun {
        key,
        group,
        consumer,
        min_idle,
        justid,
        now,
    };
    let mut out = AutoClaim::new();
    if let Some(g) = groups.get_mut(group) {
        out = run.claim(s, g, start, count as u64, &mut done);
    }
    s.groups = groups;
    let r = &mut *ctx.reply;
    r.array(3);
    reply_id(r, out.cursor);
    r.array(out.claimed);
    r.buf.extend_from_slice(&out.body.buf);
    r.array(out.deleted.len());
    out.deleted.iter().for_each(|id| reply_id(r, *id));
    finish(ctx, key, group, consumer, done);
    Ok(())
}

/// XAUTOCLAIM's reply parts.
struct AutoClaim {
    cursor: StreamId,
    claimed: usize,
    body: ReplyBuf,
    deleted: Vec<StreamId>,
}

impl AutoClaim {
    fn new() -> AutoClaim {
        AutoClaim {
            cursor: StreamId::MIN,
            claimed: 0,
            // Entries and IDs are arrays and bulk strings, alike in RESP2
            // and RESP3.
            body: ReplyBuf::new(crate::resp::Protocol::Resp2),
            deleted: Vec::new(),
        }
    }
}

/// One XAUTOCLAIM run's fixed inputs.
struct AutoRun<'a> {
    key: &'a [u8],
    group: &'a [u8],
    consumer: &'a [u8],
    min_idle: i64,
    justid: bool,
    now: i64,
}

impl AutoRun<'_> {
    /// Walks the group's pending entries from `start`, claiming idle ones
    /// up to `count` (deleted ones count too), examining at most ten times
    /// `count`.
    fn claim(
        &self,
        s: &Stream,
        g: &mut Group,
        start: StreamId,
        count: u64,
        done: &mut Claimed,
    ) -> AutoClaim {
        let mut out = AutoClaim::new();
        let ids: Vec<StreamId> = g.pel.range(start..).map(|(k, _)| *k).collect();
        let (mut left, mut attempts) = (count, count.saturating_mul(10));
        let mut next = 0;
        while attempts > 0 && left > 0 && next < ids.len() {
            attempts -= 1;
            let id = ids[next];
            next += 1;
            if s.get(id).is_none() {
                drop_deleted(self.key, self.group, g, id, done);
                out.deleted.push(id);
                left -= 1;
                continue;
            }
            let Some(nack) = g.pel.get(&id) else {
                continue;
            };
            if self.min_idle > 0 && self.now - nack.delivery_time < self.min_idle {
                continue;
            }
            let count = nack.delivery_count + u64::from(!self.justid);
            touch_consumer(g, self.consumer, self.now, done);
            g.assign(id, &Bytes::from(self.consumer), self.now, Some(count));
            match s.get(id) {
                Some(e) if !self.justid => reply_entry(&mut out.body, &e),
                _ => reply_id(&mut out.body, id),
            }
            out.claimed += 1;
            left -= 1;
            done.logged.push(claim_args(self.key, self.group, g, id));
        }
        out.cursor = ids.get(next).copied().unwrap_or(StreamId::MIN);
        out
    }
}
