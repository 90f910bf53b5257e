//! ACL checks where commands run: at dispatch (and when queued in MULTI),
//! again at EXEC, and for a script's `redis.call`. What a command needs is
//! read from the command table: its catalog id, its keys with the access
//! their key specifications declare (`access` reads; `insert`, `delete`,
//! `update` write), and its channel arguments ([`Channels`]). Refusals go
//! to ACL LOG and to errorstats (`NOPERM`).

use super::table::key_flags as kf;
use super::{introspect, Channels, CommandSpec, Ctx};
use crate::resp::Args;
use crate::users::{self, Context, Denied, LogEntry, Reason, Request, User};

/// The name of the user the session runs as.
pub(crate) fn user_name(ctx: &Ctx<'_>) -> Vec<u8> {
    ctx.session
        .user
        .clone()
        .unwrap_or_else(|| users::DEFAULT_USER.to_vec())
}

/// Whether a client that has not authenticated must do so before this
/// command: `default` is off or has passwords.
pub(super) fn auth_required(ctx: &Ctx<'_>) -> bool {
    !ctx.session.authenticated && !ctx.state.acl.default_open()
}

/// The access a key with key-specification flags `flags` needs.
fn access_of(flags: u16) -> u8 {
    let mut need = 0;
    if flags & kf::ACCESS != 0 {
        need |= users::READ;
    }
    if flags & (kf::INSERT | kf::DELETE | kf::UPDATE) != 0 {
        need |= users::WRITE;
    }
    need
}

/// Checks command `spec` (of `container`) with `args` for `user`.
pub(super) fn check_for(
    user: &User,
    container: Option<&CommandSpec>,
    spec: &CommandSpec,
    args: &Args<'_>,
) -> Result<(), Denied> {
    // Everything allowed by one selector: nothing to derive.
    if user
        .selectors
        .iter()
        .any(|s| s.all_commands && s.all_keys && s.all_channels)
    {
        return Ok(());
    }
    with_request(user, container, spec, args, |req| {
        users::check_user(user, req)
    })
}

/// Builds what `spec` with `args` needs checked for `user` and runs `f`
/// on it; a command missing from the catalog is refused.
fn with_request(
    user: &User,
    container: Option<&CommandSpec>,
    spec: &CommandSpec,
    args: &Args<'_>,
    f: impl FnOnce(&Request<'_>) -> Result<(), Denied>,
) -> Result<(), Denied> {
    let catalog = users::catalog();
    let Some(id) = catalog.id_of(container, spec) else {
        return Err(Denied {
            reason: Reason::Command,
            at: 0,
        });
    };
    let keys: Vec<(usize, u8)> = if user.selectors.iter().all(|s| s.all_keys) {
        Vec::new()
    } else {
        introspect::keys_and_flags(container, spec, args)
            .into_iter()
            .map(|(at, flags)| (at, access_of(flags)))
            .collect()
    };
    let channels = channel_args(spec, args);
    let req = Request {
        id,
        first_arg_at: if container.is_some() { 2 } else { 1 },
        args,
        no_auth: spec.has(super::flags::NOAUTH),
        keys: &keys,
        channels: &channels,
    };
    f(&req)
}

/// Whether the running client may run SORT's `BY` and `GET` patterns:
/// some selector allows the command and reading every key (`~*`,
/// `%R~*`, `allkeys`), as Redis requires for keys named by patterns.
pub(super) fn full_read_access(ctx: &Ctx<'_>, args: &Args<'_>) -> bool {
    if ctx.session.is_replay {
        return true;
    }
    let Some(spec) = super::rename::resolve_name(args.get(0)) else {
        return true;
    };
    let Some(user) = ctx.state.acl.users.get(&user_name(ctx)) else {
        return false;
    };
    user.selectors.iter().any(|s| {
        s.all_keys_ok(users::READ)
            && with_request(user, None, spec, args, |req| users::check_selector(s, req)).is_ok()
    })
}

/// The channel arguments of a command line, and whether each is a
/// pattern.
fn channel_args(spec: &CommandSpec, args: &Args<'_>) -> Vec<(usize, bool)> {
    match spec.channels {
        Channels::None => Vec::new(),
        Channels::Publish => (args.len() > 1).then_some((1, false)).into_iter().collect(),
        Channels::Subscribe => (1..args.len()).map(|at| (at, false)).collect(),
        Channels::Pattern => (1..args.len()).map(|at| (at, true)).collect(),
    }
}

/// Checks the running client's command; a refusal is logged in ACL LOG.
fn check_session(
    ctx: &mut Ctx<'_>,
    container: Option<&CommandSpec>,
    spec: &CommandSpec,
    args: &Args<'_>,
    context: Context,
) -> Result<(), Denied> {
    if ctx.session.is_replay {
        return Ok(());
    }
    // Looked up without copying the name: this runs for every command.
    let name = ctx.session.user.as_deref().unwrap_or(users::DEFAULT_USER);
    let result = match ctx.state.acl.users.get(name) {
        Some(user) => check_for(user, container, spec, args),
        None => Err(Denied {
            reason: Reason::Command,
            at: 0,
        }),
    };
    if let Err(denied) = result {
        let name = name.to_vec();
        let object = match denied.reason {
            Reason::Command => super::full_name(container, spec).into_bytes(),
            _ => args.get(denied.at).to_vec(),
        };
        log_failure(ctx, denied.reason, context, object, name);
    }
    result
}

/// Records a refusal in ACL LOG.
pub(super) fn log_failure(
    ctx: &mut Ctx<'_>,
    reason: Reason,
    context: Context,
    object: Vec<u8>,
    username: Vec<u8>,
) {
    let entry = LogEntry {
        count: 1,
        reason,
        context,
        object,
        username,
        updated_ms: crate::state::unix_ms(),
        client_info: super::client::client_line(ctx, ctx.session.id)
            .trim_end()
            .to_string(),
    };
    let max = ctx.state.config.acllog_max_len;
    ctx.state.acl.log.add(entry, max);
}

/// The check at dispatch (top level, or queueing in MULTI): the NOPERM
/// error to reply, if refused.
pub(super) fn at_dispatch(
    ctx: &mut Ctx<'_>,
    container: Option<&CommandSpec>,
    spec: &CommandSpec,
    args: &Args<'_>,
) -> Option<String> {
    let context = if ctx.session.multi.is_some() {
        Context::Multi
    } else {
        Context::Toplevel
    };
    let denied = check_session(ctx, container, spec, args, context).err()?;
    Some(match denied.reason {
        Reason::Command => format!(
            "NOPERM this user has no permissions to run the '{}' command",
            super::full_name(container, spec)
        ),
        Reason::Key => {
            "NOPERM this user has no permissions to access one of the keys used as arguments".into()
        }
        _ => "NOPERM this user has no permissions to access one of the channels used as arguments"
            .into(),
    })
}

/// The check EXEC makes again for each queued command: the error to
/// reply in its place, if refused now.
pub(super) fn at_exec(
    ctx: &mut Ctx<'_>,
    container: Option<&CommandSpec>,
    spec: &CommandSpec,
    args: &Args<'_>,
) -> Option<String> {
    let denied = check_session(ctx, container, spec, args, Context::Multi).err()?;
    let reason = match denied.reason {
        Reason::Command => "no permission to execute the command or subcommand",
        Reason::Key => "no permission to touch the specified keys",
        _ => "no permission to access one of the channels used as arguments",
    };
    let text = format!("NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: {reason}");
    ctx.state.stats.commands.error(&text);
    Some(text)
}

/// Whether the session's user may run the command, without recording a
/// refusal: `redis.acl_check_cmd`.
pub(crate) fn permitted(
    ctx: &Ctx<'_>,
    container: Option<&'static CommandSpec>,
    spec: &'static CommandSpec,
    args: &Args<'_>,
) -> bool {
    let name = ctx.session.user.as_deref().unwrap_or(users::DEFAULT_USER);
    ctx.state
        .acl
        .users
        .get(name)
        .is_some_and(|user| check_for(user, container, spec, args).is_ok())
}

/// The check for a script's `redis.call`: `Err` is the error the call
/// raises.
pub(crate) fn in_script(
    ctx: &mut Ctx<'_>,
    container: Option<&'static CommandSpec>,
    spec: &'static CommandSpec,
    args: &Args<'_>,
) -> Result<(), String> {
    let denied = check_session(ctx, container, spec, args, Context::Lua).err();
    match denied.map(|d| d.reason) {
        None => Ok(()),
        Some(Reason::Command) => Err(
            "ERR The user executing the script can't run this command or subcommand".into(),
        ),
        Some(Reason::Key) => Err("ERR The user executing the script can't access at least one of the keys mentioned in the command arguments".into()),
        Some(_) => Err(
            "ERR The user executing the script can't publish to the channel mentioned in the command"
                .into(),
        ),
    }
}

/// Closes the connections authenticated as `name` (the running one once
/// its reply is written), as Redis does when the user goes away.
pub(super) fn kill_clients_of(ctx: &mut Ctx<'_>, name: &[u8]) {
    let victims: Vec<u64> = ctx
        .state
        .clients
        .iter()
        .filter(|(_, info)| client_user(info) == name)
        .map(|(id, _)| *id)
        .collect();
    for id in victims {
        close_client(ctx, id);
    }
}

fn close_client(ctx: &mut Ctx<'_>, id: u64) {
    if id == ctx.session.id {
        ctx.session.close_after_reply = true;
        ctx.session.authenticated = false;
        ctx.session.user = None;
    } else {
        super::client::kill_now(ctx, id);
    }
}

/// Closes the Pub/Sub clients of `name` subscribed to something the
/// channel patterns `allowed` no longer cover.
pub(super) fn kill_revoked_subscribers(ctx: &mut Ctx<'_>, name: &[u8], allowed: &[Vec<u8>]) {
    let victims: Vec<u64> = ctx
        .state
        .clients
        .iter()
        .filter(|(_, info)| client_user(info) == name)
        .filter_map(|(id, _)| {
            let subs = ctx.state.pubsub.clients.get(id)?;
            let lost = subs
                .patterns
                .iter()
                .any(|p| !users::channel_in(allowed, p, true))
                || subs
                    .channels
                    .iter()
                    .chain(subs.shard.iter())
                    .any(|c| !users::channel_in(allowed, c, false));
            lost.then_some(*id)
        })
        .collect();
    for id in victims {
        close_client(ctx, id);
    }
}

/// The user a connection runs as (`default` until it authenticates).
pub(super) fn client_user(info: &crate::state::ClientInfo) -> &[u8] {
    if info.user.is_empty() {
        users::DEFAULT_USER
    } else {
        info.user.as_bytes()
    }
}

/// Makes the running client `name` (after a successful AUTH or HELLO).
pub(super) fn log_in(ctx: &mut Ctx<'_>, name: &[u8]) {
    ctx.session.authenticated = true;
    ctx.session.user = (name != users::DEFAULT_USER).then(|| name.to_vec());
    if let Some(info) = ctx.state.clients.get_mut(&ctx.session.id) {
        info.user = String::from_utf8_lossy(name).into_owned();
    }
}

/// AUTH and HELLO AUTH: logs `name` in with `password`, or logs the
/// failure and answers WRONGPASS.
pub(super) fn authenticate(
    ctx: &mut Ctx<'_>,
    command: &[u8],
    name: &[u8],
    password: &[u8],
) -> Result<(), &'static str> {
    if ctx.state.acl.credentials_ok(name, password) {
        log_in(ctx, name);
        return Ok(());
    }
    // AUTH queued in a transaction runs inside EXEC.
    let context = if ctx.session.multi.is_some() || ctx.session.in_exec {
        Context::Multi
    } else {
        Context::Toplevel
    };
    log_failure(ctx, Reason::Auth, context, command.to_vec(), name.to_vec());
    Err("WRONGPASS invalid username-password pair or user is disabled.")
}
