//! MIGRATE: moves keys to another Redis-protocol server, as Redis 7.0
//! does it: each key's DUMP payload is sent as RESTORE (with its
//! remaining TTL) over a connection the command opens, and the key is
//! deleted here once the target accepted it (kept with COPY).
//!
//! Like Redis's, the transfer is synchronous: the event loop waits for
//! the target, each step bounded by the command's timeout. A key the
//! target refused stays here; keys it accepted go (logged as DEL). Ferrite
//! keeps no connection cache (Redis's saves a reconnect; `INFO`'s
//! `migrate_cached_sockets` stays 0).

use std::borrow::Cow;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use super::table::*;
use super::{acl, encode_command, errors, int_arg, CmdResult, Ctx};
use crate::keyspace::events::GENERIC;
use crate::resp::Args;

/// What MIGRATE was asked to do.
struct Plan {
    copy: bool,
    replace: bool,
    /// AUTH's password, or AUTH2's user and password.
    auth: Option<(Option<Vec<u8>>, Vec<u8>)>,
    /// Indexes of the key arguments.
    keys: Vec<usize>,
}

fn plan(ctx: &mut Ctx<'_>, args: &Args<'_>) -> Result<Plan, Cow<'static, str>> {
    let mut plan = Plan {
        copy: false,
        replace: false,
        auth: None,
        keys: vec![3],
    };
    let mut j = 6;
    while j < args.len() {
        let more = args.len() - j - 1;
        let word = args.get(j).to_ascii_uppercase();
        match word.as_slice() {
            b"COPY" => plan.copy = true,
            b"REPLACE" => plan.replace = true,
            b"AUTH" if more >= 1 => {
                j += 1;
                ctx.redact(j);
                plan.auth = Some((None, args.get(j).to_vec()));
            }
            b"AUTH2" if more >= 2 => {
                ctx.redact(j + 1);
                ctx.redact(j + 2);
                plan.auth = Some((Some(args.get(j + 1).to_vec()), args.get(j + 2).to_vec()));
                j += 2;
            }
            b"KEYS" => {
                if !args.get(3).is_empty() {
                    return Err(Cow::Borrowed("ERR When using MIGRATE KEYS option, the key argument must be set to the empty string"));
                }
                plan.keys = (j + 1..args.len()).collect();
                break;
            }
            _ => return Err(Cow::Borrowed(errors::SYNTAX)),
        }
        j += 1;
    }
    Ok(plan)
}

fn migrate(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let plan = plan(ctx, args)?;
    let timeout_ms = int_arg(args, 5)?;
    let target_db = int_arg(args, 4)?;
    let timeout = Duration::from_millis(if timeout_ms <= 0 {
        1000
    } else {
        timeout_ms as u64
    });
    let db = ctx.session.db;
    let now = ctx.state.keyspace.now_ms;
    // The keys that exist, with what RESTORE needs of each.
    let mut found: Vec<(usize, Vec<u8>, i64)> = Vec::new();
    for &at in &plan.keys {
        let key = args.get(at);
        if let Some(value) = ctx.state.keyspace.get(db, key) {
            let payload = crate::rdb::dump(value);
            let ttl = match ctx.state.keyspace.expire_at(db, key) {
                Some(at) => (at - now).max(1),
                None => 0,
            };
            found.push((at, payload, ttl));
        }
    }
    if found.is_empty() {
        ctx.reply.simple("NOKEY");
        return Ok(());
    }
    let mut request = Vec::new();
    if let Some((user, password)) = &plan.auth {
        match user {
            Some(user) => encode_command(&mut request, &[b"AUTH", user, password]),
            None => encode_command(&mut request, &[b"AUTH", password]),
        }
    }
    encode_command(&mut request, &[b"SELECT", target_db.to_string().as_bytes()]);
    // As Redis: a cluster node sends RESTORE-ASKING, which the target
    // serves while it is importing the key's slot.
    let restore_name: &[u8] = if ctx.state.cluster.is_some() {
        b"RESTORE-ASKING"
    } else {
        b"RESTORE"
    };
    for (at, payload, ttl) in &found {
        let ttl = ttl.to_string();
        let mut restore: Vec<&[u8]> = vec![restore_name, args.get(*at), ttl.as_bytes(), payload];
        if plan.replace {
            restore.push(b"REPLACE");
        }
        encode_command(&mut request, &restore);
    }
    let host = String::from_utf8_lossy(args.get(1)).into_owned();
    let port = String::from_utf8_lossy(args.get(2)).into_owned();
    let Some(stream) = connect(&host, &port, timeout) else {
        return Err(Cow::Borrowed(
            "IOERR error or timeout connecting to the client",
        ));
    };
    let replies = match exchange(stream, &request, plan.auth.is_some(), found.len()) {
        Ok(replies) => replies,
        Err(step) => {
            return Err(Cow::Owned(format!(
                "IOERR error or timeout {step} to target instance"
            )))
        }
    };
    // An error from AUTH or SELECT fails every key; otherwise each key the
    // target restored goes (the first refusal is the reply).
    let setup_failed = replies.setup_error.is_some();
    let mut failure = replies.setup_error;
    for ((at, _, _), reply) in found.iter().zip(&replies.restores) {
        if setup_failed || reply.starts_with('-') {
            failure.get_or_insert_with(|| reply.clone());
        } else if !plan.copy {
            let key = args.get(*at);
            if ctx.state.keyspace.remove(db, key).is_some() {
                ctx.state.keyspace.supersede(db, key);
                ctx.prop.push(db, &[b"DEL", key]);
                ctx.notify(GENERIC, "del", key);
            }
        }
    }
    match failure {
        Some(text) => Err(Cow::Owned(format!(
            "ERR Target instance replied with error: {}",
            text.trim_start_matches('-')
        ))),
        None => {
            ctx.reply.ok();
            Ok(())
        }
    }
}

/// Connects to `host:port` within `timeout`.
fn connect(host: &str, port: &str, timeout: Duration) -> Option<TcpStream> {
    let port: u16 = port.parse().ok()?;
    let addr = (host, port).to_socket_addrs().ok()?.next()?;
    let stream = TcpStream::connect_timeout(&addr, timeout).ok()?;
    stream.set_read_timeout(Some(timeout)).ok()?;
    stream.set_write_timeout(Some(timeout)).ok()?;
    let _ = stream.set_nodelay(true);
    Some(stream)
}

/// The target's answers: the first error of AUTH or SELECT, and one line
/// per RESTORE.
struct Replies {
    setup_error: Option<String>,
    restores: Vec<String>,
}

/// Sends the whole request, then reads AUTH's, SELECT's and each
/// RESTORE's reply line (the socket's timeouts bound each step); `Err`
/// names the step that failed or timed out.
fn exchange(
    mut stream: TcpStream,
    request: &[u8],
    auth: bool,
    restores: usize,
) -> Result<Replies, &'static str> {
    stream.write_all(request).map_err(|_| "writing")?;
    let mut reader = BufReader::new(stream);
    let line = |reader: &mut BufReader<TcpStream>| -> Result<String, &'static str> {
        let mut text = String::new();
        match reader.read_line(&mut text) {
            Ok(n) if n > 0 => Ok(text.trim_end().to_string()),
            _ => Err("reading"),
        }
    };
    let mut setup_error = None;
    let setup = usize::from(auth) + 1;
    for _ in 0..setup {
        let reply = line(&mut reader)?;
        if reply.starts_with('-') && setup_error.is_none() {
            setup_error = Some(reply);
        }
    }
    let mut out = Vec::with_capacity(restores);
    for _ in 0..restores {
        out.push(line(&mut reader)?);
    }
    Ok(Replies {
        setup_error,
        restores: out,
    })
}

/// MIGRATE's keys: the key argument, or with KEYS every argument after it
/// (the password after AUTH, and AUTH2's pair, skipped).
fn migrate_keys(args: &Args<'_>, out: &mut Vec<usize>) {
    if args.len() < 6 {
        return;
    }
    let mut j = 6;
    while j < args.len() {
        let word = args.get(j);
        if word.eq_ignore_ascii_case(b"AUTH") {
            j += 1;
        } else if word.eq_ignore_ascii_case(b"AUTH2") {
            j += 2;
        } else if word.eq_ignore_ascii_case(b"KEYS") && args.get(3).is_empty() {
            out.extend(j + 1..args.len());
            return;
        }
        j += 1;
    }
    out.push(3);
}

/// The commands this file implements.
#[rustfmt::skip]
pub(super) static COMMANDS: &[CommandSpec] = &[
    cmd!("migrate", -6, WRITE, (3, 3, 1), "generic", "Moves keys to another server.", migrate)
        .with_key_finder_and_range(migrate_keys, (3, 3, 1))
        .with_key_searches(&[one_at(3), (BeginSearch::Keyword("KEYS", -2), FindKeys::Range(-1, 1, 0))])
        .with_acl(acl::DANGEROUS | acl::bit("keyspace"))
        .with_tips(&["nondeterministic_output"]),
];
