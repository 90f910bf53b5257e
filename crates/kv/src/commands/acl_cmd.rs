//! ACL and its subcommands (Redis 7.0): users (SETUSER, GETUSER, DELUSER,
//! LIST, USERS, WHOAMI), categories (CAT), passwords (GENPASS), the log
//! (LOG), checks without running (DRYRUN) and the ACL file (LOAD, SAVE).
//! The user model is `crate::users`; the checks are `acl_check.rs`.

use std::borrow::Cow;

use super::acl_check::{check_for, kill_clients_of, kill_revoked_subscribers};
use super::introspect::help_reply;
use super::table::*;
use super::{acl, int_arg, CmdError, CmdResult, Ctx};
use crate::resp::Args;
use crate::users::{self, Reason, Selector, DEFAULT_USER};

/// Longest password ACL GENPASS makes, in bits.
const GENPASS_BITS_MAX: i64 = 4096;

/// Redis's reply to a subcommand given the wrong arguments.
fn wrong_arguments(args: &Args<'_>) -> CmdError {
    Cow::Owned(format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try ACL HELP.",
        String::from_utf8_lossy(args.get(1))
            .chars()
            .take(128)
            .collect::<String>()
    ))
}

fn setuser(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    for at in 2..args.len() {
        ctx.redact(at);
    }
    let name = args.get(2);
    if !users::valid_name(name) {
        return Err(Cow::Borrowed(
            "ERR Usernames can't contain spaces or null characters",
        ));
    }
    let rules: Vec<Vec<u8>> = args.iter().skip(3).map(<[u8]>::to_vec).collect();
    let all_channels = users::pubsub_default_all(&ctx.state.config);
    let user = ctx
        .state
        .acl
        .staged(name, &rules, all_channels)
        .map_err(Cow::Owned)?;
    if let Some(old) = ctx.state.acl.users.get(name) {
        if let Some(allowed) = users::channels_after_change(&user, old) {
            kill_revoked_subscribers(ctx, name, &allowed);
        }
    }
    ctx.state.acl.users.insert(name.to_vec(), user);
    ctx.reply.ok();
    Ok(())
}

fn deluser(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    if args.iter().skip(2).any(|n| n == DEFAULT_USER) {
        return Err(Cow::Borrowed("ERR The 'default' user cannot be removed"));
    }
    let mut deleted = 0;
    for name in args.iter().skip(2) {
        if ctx.state.acl.users.remove(name).is_some() {
            kill_clients_of(ctx, name);
            deleted += 1;
        }
    }
    ctx.reply.int(deleted);
    Ok(())
}

/// One selector's `commands`, `keys` and `channels` fields.
fn selector_fields(ctx: &mut Ctx<'_>, s: &Selector) {
    ctx.reply.bulk(b"commands");
    ctx.reply.bulk(s.describe_commands().as_bytes());
    ctx.reply.bulk(b"keys");
    ctx.reply.bulk(s.describe_keys().as_bytes());
    ctx.reply.bulk(b"channels");
    ctx.reply.bulk(s.describe_channels().as_bytes());
}

fn getuser(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let Some(user) = ctx.state.acl.users.get(args.get(2)).cloned() else {
        ctx.reply.null();
        return Ok(());
    };
    ctx.reply.map(6);
    ctx.reply.bulk(b"flags");
    let flags = user.flag_names();
    ctx.reply.set(flags.len());
    for f in flags {
        ctx.reply.bulk(f.as_bytes());
    }
    ctx.reply.bulk(b"passwords");
    ctx.reply.array(user.passwords.len());
    for p in &user.passwords {
        ctx.reply.bulk(p.as_bytes());
    }
    selector_fields(ctx, user.root());
    ctx.reply.bulk(b"selectors");
    ctx.reply.array(user.selectors.len() - 1);
    for s in &user.selectors[1..] {
        ctx.reply.map(3);
        selector_fields(ctx, s);
    }
    Ok(())
}

fn list(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    let lines: Vec<Vec<u8>> = ctx
        .state
        .acl
        .users
        .iter()
        .map(|(name, user)| {
            let mut line = b"user ".to_vec();
            line.extend_from_slice(name);
            line.push(b' ');
            line.extend_from_slice(user.describe().as_bytes());
            line
        })
        .collect();
    ctx.reply.array(lines.len());
    for line in lines {
        ctx.reply.bulk(&line);
    }
    Ok(())
}

fn usernames(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    let names: Vec<Vec<u8>> = ctx.state.acl.users.keys().cloned().collect();
    ctx.reply.array(names.len());
    for name in names {
        ctx.reply.bulk(&name);
    }
    Ok(())
}

fn whoami(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    let name = super::acl_check::user_name(ctx);
    ctx.reply.bulk(&name);
    Ok(())
}

/// The ACL file's path, or Redis's refusal when there is none.
fn aclfile(ctx: &Ctx<'_>) -> Result<String, CmdError> {
    match &ctx.state.config.aclfile {
        path if !path.is_empty() => Ok(path.clone()),
        _ => Err(Cow::Borrowed("ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.")),
    }
}

fn load(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    let path = aclfile(ctx)?;
    let all_channels = users::pubsub_default_all(&ctx.state.config);
    let file = users::file_path(&path, &ctx.state.config.dir);
    let loaded =
        users::load_file(&path, &file, all_channels).map_err(|e| Cow::Owned(format!("ERR {e}")))?;
    // Every user but `default` is replaced: their clients are closed, as
    // Redis frees the old users and their connections.
    let old: Vec<Vec<u8>> = ctx.state.acl.users.keys().cloned().collect();
    ctx.state.acl.users = loaded;
    for name in old.iter().filter(|n| n.as_slice() != DEFAULT_USER) {
        kill_clients_of(ctx, name);
    }
    ctx.reply.ok();
    Ok(())
}

fn save(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    let path = aclfile(ctx)?;
    let file = users::file_path(&path, &ctx.state.config.dir);
    if let Err(e) = users::save_file(&file, &ctx.state.acl.users) {
        tracing::warn!("ACL SAVE to {path}: {e}");
        return Err(Cow::Borrowed("ERR There was an error trying to save the ACLs. Please check the server logs for more information"));
    }
    ctx.reply.ok();
    Ok(())
}

fn cat(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    match args.len() {
        2 => {
            ctx.reply.array(acl::NAMES.len());
            for name in acl::NAMES {
                ctx.reply.bulk(name.as_bytes());
            }
        }
        3 => {
            let wanted = args.get(2);
            let Some(pos) = acl::NAMES
                .iter()
                .position(|n| n.as_bytes().eq_ignore_ascii_case(wanted))
            else {
                return Err(Cow::Owned(format!(
                    "ERR Unknown category '{}'",
                    String::from_utf8_lossy(wanted)
                        .chars()
                        .take(128)
                        .collect::<String>()
                )));
            };
            let bit = 1u64 << pos;
            let names: Vec<&str> = users::catalog()
                .entries
                .iter()
                .filter(|e| e.categories & bit != 0)
                .map(|e| e.full.as_str())
                .collect();
            ctx.reply.array(names.len());
            for n in names {
                ctx.reply.bulk(n.as_bytes());
            }
        }
        _ => return Err(wrong_arguments(args)),
    }
    Ok(())
}

fn genpass(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let bits = match args.len() {
        2 => 256,
        3 => int_arg(args, 2)?,
        _ => return Err(wrong_arguments(args)),
    };
    if bits <= 0 || bits > GENPASS_BITS_MAX {
        return Err(Cow::Owned(format!("ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to {GENPASS_BITS_MAX}")));
    }
    let chars = ((bits + 3) / 4) as usize;
    let mut random = vec![0u8; chars.div_ceil(2)];
    fill_random(ctx, &mut random);
    let mut hex = String::with_capacity(chars + 1);
    for b in random {
        hex.push_str(&format!("{b:02x}"));
    }
    hex.truncate(chars);
    ctx.reply.bulk(hex.as_bytes());
    Ok(())
}

/// Fills `out` from the kernel's random source (passwords must not be
/// guessable), or, should it fail, from the server's generator.
fn fill_random(ctx: &mut Ctx<'_>, out: &mut [u8]) {
    use std::io::Read as _;
    let from_kernel = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(out));
    if from_kernel.is_err() {
        for chunk in out.chunks_mut(8) {
            let word = ctx.rng().u64(..).to_le_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
    }
}

fn log(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let mut count: i64 = 10;
    match args.len() {
        2 => {}
        3 if args.get(2).eq_ignore_ascii_case(b"reset") => {
            ctx.state.acl.log.clear();
            ctx.reply.ok();
            return Ok(());
        }
        3 => count = int_arg(args, 2)?.max(0),
        _ => return Err(wrong_arguments(args)),
    }
    let now = crate::state::unix_ms();
    let entries: Vec<users::LogEntry> = ctx
        .state
        .acl
        .log
        .entries
        .iter()
        .take(count as usize)
        .cloned()
        .collect();
    ctx.reply.array(entries.len());
    for e in entries {
        ctx.reply.map(7);
        ctx.reply.bulk(b"count");
        ctx.reply.int(e.count as i64);
        ctx.reply.bulk(b"reason");
        ctx.reply.bulk(e.reason.name().as_bytes());
        ctx.reply.bulk(b"context");
        ctx.reply.bulk(e.context.name().as_bytes());
        ctx.reply.bulk(b"object");
        ctx.reply.bulk(&e.object);
        ctx.reply.bulk(b"username");
        ctx.reply.bulk(&e.username);
        ctx.reply.bulk(b"age-seconds");
        ctx.reply.double((now - e.updated_ms) as f64 / 1000.0);
        ctx.reply.bulk(b"client-info");
        ctx.reply.bulk(e.client_info.as_bytes());
    }
    Ok(())
}

fn dryrun(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let name = args.get(2);
    let Some(user) = ctx.state.acl.users.get(name).cloned() else {
        return Err(Cow::Owned(format!(
            "ERR User '{}' not found",
            String::from_utf8_lossy(name)
        )));
    };
    let line = args.tail(3);
    let not_found = || {
        Cow::Owned(format!(
            "ERR Command '{}' not found",
            String::from_utf8_lossy(line.get(0))
        ))
    };
    let top = super::lookup(line.get(0)).ok_or_else(not_found)?;
    let (container, spec) = if top.subcommands.is_empty() || line.len() < 2 {
        (None, top)
    } else {
        (
            Some(top),
            top.subcommand(line.get(1)).ok_or_else(not_found)?,
        )
    };
    if !spec.arity_ok(line.len()) {
        return Err(Cow::Owned(format!(
            "ERR wrong number of arguments for '{}' command",
            super::full_name(container, spec)
        )));
    }
    match check_for(&user, container, spec, &line) {
        Ok(()) => ctx.reply.ok(),
        Err(denied) => {
            let text = match denied.reason {
                Reason::Command => format!(
                    "This user has no permissions to run the '{}' command",
                    super::full_name(container, spec)
                ),
                Reason::Key => format!(
                    "This user has no permissions to access the '{}' key",
                    String::from_utf8_lossy(line.get(denied.at))
                ),
                _ => format!(
                    "This user has no permissions to access the '{}' channel",
                    String::from_utf8_lossy(line.get(denied.at))
                ),
            };
            ctx.reply.bulk(text.as_bytes());
        }
    }
    Ok(())
}

fn help(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    help_reply(
        ctx.reply,
        "ACL",
        &[
            "CAT [<category>]",
            "    List all commands that belong to <category>, or all command categories",
            "    when no category is specified.",
            "DELUSER <username> [<username> ...]",
            "    Delete a list of users.",
            "DRYRUN <username> <command> [<arg> ...]",
            "    Returns whether the user can execute the given command without executing the command.",
            "GETUSER <username>",
            "    Get the user's details.",
            "GENPASS [<bits>]",
            "    Generate a secure 256-bit user password. The optional `bits` argument can",
            "    be used to specify a different size.",
            "LIST",
            "    Show users details in config file format.",
            "LOAD",
            "    Reload users from the ACL file.",
            "LOG [<count> | RESET]",
            "    Show the ACL log entries.",
            "SAVE",
            "    Save the current config to the ACL file.",
            "SETUSER <username> <attribute> [<attribute> ...]",
            "    Create or modify a user with the specified attributes.",
            "USERS",
            "    List all the registered usernames.",
            "WHOAMI",
            "    Return the current connection username.",
        ],
    );
    Ok(())
}

/// The container never runs itself: every call names a subcommand.
fn acl_container(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    help(ctx, args)
}

const SUB: u32 = NOSCRIPT | LOADING | STALE;
const SUB_ADMIN: u32 = ADMIN | SUB;

/// ACL's subcommands.
#[rustfmt::skip]
static ACL_SUBCOMMANDS: &[CommandSpec] = &[
    cmd!("cat", -2, SUB, K0, "server", "Lists the ACL categories, or the commands inside a category.", cat),
    cmd!("deluser", -3, SUB_ADMIN, K0, "server", "Deletes ACL users, and terminates their connections.", deluser),
    cmd!("dryrun", -4, SUB_ADMIN, K0, "server", "Simulates the execution of a command by a user, without executing the command.", dryrun),
    cmd!("genpass", -2, SUB, K0, "server", "Generates a pseudorandom, secure password that can be used to identify ACL users.", genpass),
    cmd!("getuser", 3, SUB_ADMIN, K0, "server", "Lists the ACL rules of a user.", getuser),
    cmd!("help", 2, LOADING | STALE, K0, "server", "Returns helpful text about the different subcommands.", help),
    cmd!("list", 2, SUB_ADMIN, K0, "server", "Dumps the effective rules in ACL file format.", list),
    cmd!("load", 2, SUB_ADMIN, K0, "server", "Reloads the rules from the configured ACL file.", load),
    cmd!("log", -2, SUB_ADMIN, K0, "server", "Lists recent security events generated due to commands rejected by ACL rules.", log),
    cmd!("save", 2, SUB_ADMIN, K0, "server", "Saves the effective ACL rules in the configured ACL file.", save),
    cmd!("setuser", -3, SUB_ADMIN, K0, "server", "Creates and modifies an ACL user and its rules.", setuser),
    cmd!("users", 2, SUB_ADMIN, K0, "server", "Lists all ACL users.", usernames),
    cmd!("whoami", 2, SUB, K0, "server", "Returns the authenticated username of the current connection.", whoami),
];

/// The commands this file implements.
#[rustfmt::skip]
pub(super) static COMMANDS: &[CommandSpec] = &[
    cmd!("acl", -2, 0, K0, "server", "A container for Access List Control commands.", acl_container).with_subcommands(ACL_SUBCOMMANDS),
];
