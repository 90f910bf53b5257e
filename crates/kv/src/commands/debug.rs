//! DEBUG, refused unless `enable-debug-command` allows it (as Redis 7.0
//! refuses it): SLEEP, SET-ACTIVE-EXPIRE, PAUSE-CRON, OBJECT, PROTOCOL, RELOAD,
//! LOADAOF, POPULATE, DIGEST, DIGEST-VALUE, CHANGE-REPL-ID,
//! QUICKLIST-PACKED-THRESHOLD, SET-SKIP-CHECKSUM-VALIDATION and
//! STRINGMATCH-LEN.

use std::borrow::Cow;
use std::time::Duration;

use super::introspect::help_reply;
use super::table::*;
use super::{errors, upper, CmdError, CmdResult, Ctx};
use crate::config::parse_memory;
use crate::keyspace::access;
use crate::resp::{Args, Protocol};
use crate::types::Value;

/// Redis's refusal when DEBUG is not enabled.
const DISABLED: &str = "ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.";

/// Longest DEBUG SLEEP, so a typo cannot stall the server for days.
const SLEEP_MAX: Duration = Duration::from_secs(3600);

/// Whether this client may run DEBUG (`yes`, or `local` from loopback).
fn allowed(ctx: &Ctx<'_>) -> bool {
    let local = ctx
        .state
        .clients
        .get(&ctx.session.id)
        .is_none_or(|c| c.addr.starts_with("127.") || c.addr.starts_with("[::1]"));
    ctx.state.config.enable_debug_command.allows(local)
}

fn protocol(ctx: &mut Ctx<'_>, name: &[u8]) -> CmdResult {
    let resp3 = ctx.reply.proto == Protocol::Resp3;
    let r = &mut *ctx.reply;
    match name.to_ascii_lowercase().as_slice() {
        b"string" => r.bulk(b"Hello World"),
        b"integer" => r.int(12345),
        // Redis's sample double, not an approximation of pi.
        #[allow(clippy::approx_constant)]
        b"double" => r.double(3.141),
        b"bignum" if resp3 => r.buf.extend_from_slice(b"(1234567999999999999999999999999999999\r\n"),
        b"bignum" => r.bulk(b"1234567999999999999999999999999999999"),
        b"null" => r.null(),
        b"array" | b"set" | b"map" => {
            let kind = name.to_ascii_lowercase();
            match kind.as_slice() {
                b"array" => r.array(3),
                b"set" => r.set(3),
                _ => r.map(3),
            }
            for j in 0..3 {
                r.int(j);
                if kind == b"map" {
                    boolean(r, j == 1, resp3);
                }
            }
        }
        b"attrib" => {
            if resp3 {
                r.buf.extend_from_slice(b"|1\r\n");
                r.bulk(b"key-popularity");
                r.array(2);
                r.bulk(b"key:123");
                r.int(90);
            }
            r.bulk(b"Some real reply following the attribute");
        }
        b"push" => {
            if !resp3 {
                return Err(Cow::Borrowed("ERR RESP2 is not supported by this command"));
            }
            r.buf.extend_from_slice(b">2\r\n");
            r.bulk(b"server-cpu-usage");
            r.int(42);
            r.bulk(b"Some real reply following the push reply");
        }
        b"true" => boolean(r, true, resp3),
        b"false" => boolean(r, false, resp3),
        b"verbatim" => r.verbatim("This is a verbatim\nstring"),
        _ => return Err(Cow::Borrowed("ERR Wrong protocol type name. Please use one of the following: string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false")),
    }
    Ok(())
}

fn boolean(r: &mut crate::resp::ReplyBuf, value: bool, resp3: bool) {
    if resp3 {
        r.buf
            .extend_from_slice(if value { b"#t\r\n" } else { b"#f\r\n" });
    } else {
        r.int(i64::from(value));
    }
}

fn sleep(ctx: &mut Ctx<'_>, seconds: &[u8]) -> CmdResult {
    // As strtod: a number that does not parse sleeps for zero.
    let seconds: f64 = std::str::from_utf8(seconds)
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .filter(|s: &f64| s.is_finite() && *s > 0.0)
        .unwrap_or(0.0);
    std::thread::sleep(Duration::from_secs_f64(seconds).min(SLEEP_MAX));
    ctx.reply.ok();
    Ok(())
}

/// DEBUG OBJECT's line for the value at `key`. Ferrite has no object
/// address or serialized length of its own; it reports the value's
/// address in memory and its size as the log would write it.
fn object(ctx: &mut Ctx<'_>, key: &[u8]) -> CmdResult {
    let db = ctx.session.db;
    let now = ctx.state.keyspace.now_ms;
    let clock = ctx.state.keyspace.access_clock(db, key).unwrap_or(0);
    // As Redis's, DEBUG OBJECT looks at the table itself: an expired key
    // not yet deleted is still shown.
    let segment = &ctx.state.keyspace.db(db).segments()[crate::keyspace::segment_of(key)];
    let Some(value) = segment.map.get(key) else {
        return Err(Cow::Borrowed(errors::NO_SUCH_KEY));
    };
    let encoding = super::object::encoding(value, &ctx.state.config);
    let address = std::ptr::from_ref(value) as usize;
    let length = serialized_length(value);
    let line = format!(
        "Value at:0x{address:x} refcount:1 encoding:{encoding} serializedlength:{length} lru:{clock} lru_seconds_idle:{}",
        access::idle_ms(clock, now) / 1000
    );
    ctx.reply.simple(&line);
    Ok(())
}

/// Bytes of the value's elements, an approximation of a dump's size.
fn serialized_length(value: &crate::types::Value) -> usize {
    use crate::types::Value;
    match value {
        Value::Str(s) => s.len(),
        Value::List(l) => l.iter().map(|e| e.len() + 1).sum(),
        Value::Set(s) => s.iter().map(|e| e.len() + 1).sum(),
        Value::Hash(h) => h.iter().map(|(f, v)| f.len() + v.len() + 2).sum(),
        Value::ZSet(z) => z.iter().map(|(m, _)| m.len() + 9).sum(),
        Value::Stream(s) => s.data_bytes(),
    }
}

fn debug(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    if !allowed(ctx) {
        return Err(Cow::Borrowed(DISABLED));
    }
    let sub = upper(args, 1);
    match (sub.as_slice(), args.len()) {
        (b"HELP", 2) => help(ctx),
        (b"SLEEP", 3) => sleep(ctx, args.get(2)),
        (b"PROTOCOL", 3) => protocol(ctx, args.get(2)),
        (b"OBJECT", 3) => object(ctx, args.get(2)),
        (b"SET-ACTIVE-EXPIRE", 3) => {
            let on = crate::types::number::parse_i64(args.get(2)).unwrap_or(0) != 0;
            ctx.state.active_expire_enabled = on;
            ctx.reply.ok();
            Ok(())
        }
        (b"SET-SKIP-CHECKSUM-VALIDATION", 3) => {
            ctx.state.skip_checksum_validation = c_atoi(args.get(2)) != 0;
            ctx.reply.ok();
            Ok(())
        }
        (b"SET-DISABLE-DENY-SCRIPTS", 3) => {
            let on = crate::types::number::parse_i64(args.get(2)).unwrap_or(0) != 0;
            super::scripting::set_deny_disabled(on);
            ctx.reply.ok();
            Ok(())
        }
        (b"PAUSE-CRON", 3) => {
            let on = crate::types::number::parse_i64(args.get(2)).unwrap_or(0) != 0;
            ctx.state.cron_paused = on;
            ctx.reply.ok();
            Ok(())
        }
        (b"QUICKLIST-PACKED-THRESHOLD", 3) => {
            let text = String::from_utf8_lossy(args.get(2));
            match parse_memory(&text) {
                // As Redis: anything up to 4 GB less 1 MB (0 restores the
                // default), even 1 byte.
                Some(n) if n <= (1 << 32) - (1 << 20) => ctx.reply.ok(),
                _ => {
                    return Err(Cow::Borrowed(
                        "ERR argument must be a memory value bigger than 1 and smaller than 4gb",
                    ))
                }
            }
            Ok(())
        }
        (b"RELOAD", _) | (b"LOADAOF", 2) => reload(ctx, args),
        (b"POPULATE", 3..=5) => populate(ctx, args),
        (b"CLUSTERLINK", 5) if args.get(2).eq_ignore_ascii_case(b"KILL") => {
            super::cluster::debug_kill_link(ctx, args)
        }
        (b"DIGEST", 2) => {
            let digest = super::digest::dataset_digest(&ctx.state.keyspace);
            ctx.reply.simple(&super::digest::hex(&digest));
            Ok(())
        }
        (b"DIGEST-VALUE", _) => {
            ctx.reply.array(args.len() - 2);
            for key in args.iter().skip(2) {
                let digest = ctx
                    .state
                    .keyspace
                    .peek(ctx.session.db, key)
                    .map_or([0; 5], super::digest::value_digest);
                ctx.reply.simple(&super::digest::hex(&digest));
            }
            Ok(())
        }
        (b"CHANGE-REPL-ID", 2) => {
            // A new history with no secondary ID: no replica continues.
            let repl = &mut ctx.state.repl;
            repl.replid = crate::server::repl::random_id();
            repl.replid2 = crate::server::repl::NO_ID.to_string();
            repl.second_offset = -1;
            ctx.reply.ok();
            Ok(())
        }
        (b"REPLICATE", 3..) => {
            // The command goes to the replicas only: not run, not logged.
            let command: Vec<Vec<u8>> = args.iter().skip(2).map(<[u8]>::to_vec).collect();
            let db = ctx.session.db;
            ctx.state.repl.replicate_only.push((db, command));
            ctx.reply.ok();
            Ok(())
        }
        (b"STRINGMATCH-LEN", 2) => stringmatch_len(ctx),
        _ => Err(Cow::Owned(format!(
            "ERR unknown subcommand '{}'. Try DEBUG HELP.",
            String::from_utf8_lossy(args.get(1))
        ))),
    }
}

/// A positive count argument, as Redis parses it.
/// The number a C `atoi` reads from `text`, as Redis reads this flag:
/// leading blanks, an optional sign, then digits up to the first other
/// byte; no digits give 0, and a value past `i64` saturates.
fn c_atoi(text: &[u8]) -> i64 {
    let mut rest = text;
    while let Some((b' ' | b'\t' | b'\n' | b'\r' | b'\x0b' | b'\x0c', tail)) = rest.split_first() {
        rest = tail;
    }
    let negative = rest.first() == Some(&b'-');
    if let Some((b'-' | b'+', tail)) = rest.split_first() {
        rest = tail;
    }
    let mut n: i64 = 0;
    for &b in rest.iter().take_while(|b| b.is_ascii_digit()) {
        n = n.saturating_mul(10).saturating_add(i64::from(b - b'0'));
    }
    if negative {
        -n
    } else {
        n
    }
}

fn positive(args: &Args<'_>, at: usize) -> Result<usize, CmdError> {
    let n = super::int_arg(args, at)?;
    usize::try_from(n).map_err(|_| Cow::Borrowed(errors::NOT_POSITIVE))
}

/// DEBUG POPULATE count [prefix] [size]: creates `prefix:N` (default
/// `key:N`) holding `value:N` (zero-padded or cut to `size` bytes) for N
/// below count, skipping keys that exist. Each key created is logged as a
/// SET, so the log holds the data as for any write; like Redis's, the keys
/// are not sent to replicas.
fn populate(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let count = positive(args, 2)?;
    // A size of 0 means no size, as in Redis.
    let size = if args.len() == 5 {
        Some(positive(args, 4)?).filter(|&s| s > 0)
    } else {
        None
    };
    if let Some(why) = &ctx.state.log_failure {
        return Err(Cow::Owned(format!(
            "MISCONF Errors writing to the AOF file: {why}"
        )));
    }
    if size.is_some_and(|s| s > ctx.state.config.proto_max_bulk_len_bytes) {
        return Err(Cow::Borrowed(errors::STRING_TOO_LONG));
    }
    let prefix = if args.len() >= 4 { args.get(3) } else { b"key" };
    let db = ctx.session.db;
    if ctx.state.keyspace.capturing() {
        // Writes across the database (DEBUG is not flagged as a write, so
        // the dispatcher did not): rule C1 of `keyspace/capture.rs`.
        let first = (db * crate::keyspace::SEGMENTS_PER_DB) as u32;
        let all: Vec<u32> = (first..first + crate::keyspace::SEGMENTS_PER_DB as u32).collect();
        ctx.state.keyspace.capture_before(&all);
    }
    for n in 0..count {
        let mut key = prefix.to_vec();
        key.extend_from_slice(format!(":{n}").as_bytes());
        if ctx.state.keyspace.contains(db, &key) {
            continue;
        }
        let text = format!("value:{n}").into_bytes();
        let value = match size {
            None => text,
            Some(size) => {
                let mut v = vec![0u8; size];
                let keep = size.min(text.len());
                v[..keep].copy_from_slice(&text[..keep]);
                v
            }
        };
        ctx.state
            .keyspace
            .set(db, &key, Value::Str(value[..].into()), false);
        ctx.propagate(&[b"SET", &key, &value]);
    }
    ctx.state.repl.log_only = true;
    ctx.reply.ok();
    Ok(())
}

/// DEBUG RELOAD [MERGE] [NOFLUSH] [NOSAVE] and DEBUG LOADAOF: Ferrite's
/// persistence is its log, which holds every command already (NOSAVE
/// changes nothing), so both close the log and load the dataset back from
/// the data directory (the event loop does it right after this command,
/// `server/mod.rs`). Without a log (`appendonly no`) there is nothing to
/// load from.
///
/// With NOFLUSH the saved dataset is loaded over the one in memory, which
/// is the same dataset: with MERGE every key and library loads over
/// itself and nothing changes; without MERGE any key or library already
/// there makes the load fail, as Redis's does, and an empty dataset loads
/// nothing. Neither needs the log replayed (which would apply its
/// commands twice).
fn reload(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let (mut merge, mut noflush, mut nosave) = (false, false, false);
    for at in 2..args.len() {
        match upper(args, at).as_slice() {
            b"NOSAVE" => nosave = true,
            b"MERGE" => merge = true,
            b"NOFLUSH" => noflush = true,
            _ => {
                return Err(Cow::Borrowed(
                    "ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options.",
                ))
            }
        }
    }
    let loadaof = upper(args, 1).as_slice() == b"LOADAOF";
    if !ctx.state.config.appendonly && !noflush && !loadaof {
        // As Redis: save dump.rdb (unless NOSAVE), then load it back.
        crate::rdb::persist::reload(ctx.state, !nosave)
            .map_err(|e| Cow::Owned(format!("ERR Error trying to load the RDB dump: {e}")))?;
        ctx.reply.ok();
        return Ok(());
    }
    if noflush {
        let keyspace = &ctx.state.keyspace;
        let has_keys = (0..keyspace.databases()).any(|db| !keyspace.db(db).is_empty());
        if !merge && (has_keys || !ctx.state.functions.is_empty()) {
            return Err(Cow::Borrowed("ERR Error trying to load the RDB dump"));
        }
        ctx.reply.ok();
        return Ok(());
    }
    ctx.state.reload_requested = true;
    ctx.reply.ok();
    Ok(())
}

/// Redis's self-test of its glob matcher on long random patterns: runs
/// Ferrite's matcher over random patterns and strings, which must end
/// without a crash or a hang (the matcher bounds its recursion).
fn stringmatch_len(ctx: &mut Ctx<'_>) -> CmdResult {
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..1000 {
        let alphabet = b"*?[]^-\\abc";
        let pattern: Vec<u8> = (0..(next() % 64))
            .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
            .collect();
        let text: Vec<u8> = (0..(next() % 64))
            .map(|_| b'a' + (next() % 3) as u8)
            .collect();
        let _ = crate::keyspace::glob::glob_match(&pattern, &text);
    }
    ctx.reply
        .simple("Apparently Redis did not crash: test passed");
    Ok(())
}

fn help(ctx: &mut Ctx<'_>) -> CmdResult {
    help_reply(
        ctx.reply,
        "DEBUG",
        &[
            "CHANGE-REPL-ID",
            "    Accepted; Ferrite has no replication id.",
            "DIGEST",
            "    Returns a digest of the whole dataset (zeros when empty).",
            "DIGEST-VALUE <key> [<key> ...]",
            "    Returns a digest of each key's value.",
            "LOADAOF",
            "    Closes the log and loads the dataset back from the data directory.",
            "OBJECT <key>",
            "    Shows low-level information about the key's value.",
            "PROTOCOL <type>",
            "    Replies with a sample of a RESP type: string, integer, double, bignum, null,",
            "    array, set, map, attrib, push, verbatim, true, false.",
            "PAUSE-CRON <0|1>",
            "    Stops or resumes the timer's housekeeping (active expiry, the tracking",
            "    table's limit, memory figures); the log's syncs go on.",
            "POPULATE <count> [<prefix>] [<size>]",
            "    Creates <count> keys <prefix>:N (default key:N) holding value:N, padded or",
            "    cut to <size> bytes; existing keys are left alone.",
            "QUICKLIST-PACKED-THRESHOLD <size>",
            "    Accepted for compatibility; lists have one representation.",
            "REPLICATE <command> [<arg> ...]",
            "    Sends the command to the replicas only, without running or logging it.",
            "RELOAD [MERGE] [NOFLUSH] [NOSAVE]",
            "    As LOADAOF: the log already holds every write, so there is nothing to save.",
            "    NOFLUSH loads over the data in memory (the same data): it fails if any key",
            "    or library exists, unless MERGE.",
            "SET-ACTIVE-EXPIRE <0|1>",
            "    Turns the timer's active expiry off or on.",
            "SET-SKIP-CHECKSUM-VALIDATION <0|1>",
            "    Makes RESTORE and FUNCTION RESTORE skip (1) or check (0) the payload's CRC-64.",
            "SET-DISABLE-DENY-SCRIPTS <0|1>",
            "    Lets scripts call commands flagged noscript (for tests), or stops it.",
            "SLEEP <seconds>",
            "    Stops the server for the given (fractional) seconds.",
            "STRINGMATCH-LEN",
            "    Runs a self-test of the glob matcher on random patterns.",
        ],
    );
    Ok(())
}

/// The commands this file implements, one per line so it reads as a table.
#[rustfmt::skip]
pub(super) static COMMANDS: &[CommandSpec] = &[
    cmd!("debug", -2, ADMIN | NOSCRIPT | LOADING | STALE, K0, "server", "Runs a debugging subcommand.", debug),
];
