//! CLIENT TRACKING, CLIENT CACHING, CLIENT GETREDIR, CLIENT TRACKINGINFO:
//! client-side caching. The table of tracked keys and the invalidations
//! are in `server/tracking.rs`.

use std::borrow::Cow;

use super::{errors, upper, CmdError, CmdResult, Ctx};
use crate::resp::Args;
use crate::server::tracking::{overlaps, ClientTracking};
use crate::types::Bytes;

/// The options of one CLIENT TRACKING call.
struct Request {
    on: bool,
    options: ClientTracking,
    prefixes: Vec<Bytes>,
}

fn parse(ctx: &Ctx<'_>, args: &Args<'_>) -> Result<Request, CmdError> {
    let mut options = ClientTracking::default();
    let mut prefixes = Vec::new();
    let mut i = 3;
    while i < args.len() {
        let more = i + 1 < args.len();
        match upper(args, i).as_slice() {
            b"REDIRECT" if more => {
                i += 1;
                if options.redirect != 0 {
                    return Err(Cow::Borrowed(
                        "ERR A client can only redirect to a single other client",
                    ));
                }
                // Checked now, as Redis does, though the client may leave
                // later (the redirect is then reported broken).
                let id = super::int_arg(args, i)?;
                let exists = u64::try_from(id)
                    .is_ok_and(|id| id != 0 && ctx.state.clients.contains_key(&id));
                if !exists {
                    return Err(Cow::Borrowed(
                        "ERR The client ID you want redirect to does not exist",
                    ));
                }
                options.redirect = id as u64;
            }
            b"BCAST" => options.bcast = true,
            b"OPTIN" => options.optin = true,
            b"OPTOUT" => options.optout = true,
            b"NOLOOP" => options.noloop = true,
            b"PREFIX" if more => {
                i += 1;
                prefixes.push(Bytes::from(args.get(i)));
            }
            _ => return Err(Cow::Borrowed(errors::SYNTAX)),
        }
        i += 1;
    }
    let on = match upper(args, 2).as_slice() {
        b"ON" => true,
        b"OFF" => false,
        _ => return Err(Cow::Borrowed(errors::SYNTAX)),
    };
    Ok(Request {
        on,
        options,
        prefixes,
    })
}

/// The checks Redis makes before turning tracking on, in its order.
fn check(ctx: &Ctx<'_>, request: &Request) -> CmdResult {
    let o = &request.options;
    let tracking = &ctx.state.pubsub.tracking;
    let id = ctx.session.id;
    if !o.bcast && !request.prefixes.is_empty() {
        return Err(Cow::Borrowed(
            "ERR PREFIX option requires BCAST mode to be enabled",
        ));
    }
    if let Some(current) = tracking.clients.get(&id) {
        if current.bcast != o.bcast {
            return Err(Cow::Borrowed("ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode."));
        }
    }
    if o.bcast && (o.optin || o.optout) {
        return Err(Cow::Borrowed(
            "ERR OPTIN and OPTOUT are not compatible with BCAST",
        ));
    }
    if o.optin && o.optout {
        return Err(Cow::Borrowed(
            "ERR You can't specify both OPTIN mode and OPTOUT mode",
        ));
    }
    if let Some(current) = tracking.clients.get(&id) {
        if (o.optin && current.optout) || (o.optout && current.optin) {
            return Err(Cow::Borrowed("ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode."));
        }
    }
    if o.bcast {
        check_prefixes(ctx, &request.prefixes)?;
    }
    Ok(())
}

/// No two prefixes of one client may overlap (both would invalidate the
/// same key).
fn check_prefixes(ctx: &Ctx<'_>, prefixes: &[Bytes]) -> CmdResult {
    let show = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    for (i, prefix) in prefixes.iter().enumerate() {
        if let Some(old) = ctx
            .state
            .pubsub
            .tracking
            .overlapping(ctx.session.id, prefix)
        {
            return Err(Cow::Owned(format!(
                "ERR Prefix '{}' overlaps with an existing prefix '{}'. Prefixes for a single client must not overlap.",
                show(prefix),
                show(&old)
            )));
        }
        if let Some(other) = prefixes[i + 1..].iter().find(|p| overlaps(prefix, p)) {
            return Err(Cow::Owned(format!(
                "ERR Prefix '{}' overlaps with another provided prefix '{}'. Prefixes for a single client must not overlap.",
                show(prefix),
                show(other)
            )));
        }
    }
    Ok(())
}

pub(super) fn client_tracking(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let request = parse(ctx, args)?;
    let id = ctx.session.id;
    if request.on {
        check(ctx, &request)?;
        ctx.state
            .pubsub
            .tracking
            .enable(id, request.options, &request.prefixes);
    } else {
        ctx.state.pubsub.tracking.disable(id);
    }
    ctx.reply.ok();
    Ok(())
}

pub(super) fn client_caching(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let id = ctx.session.id;
    let Some(client) = ctx.state.pubsub.tracking.clients.get_mut(&id) else {
        return Err(Cow::Borrowed("ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled"));
    };
    match upper(args, 2).as_slice() {
        b"YES" if client.optin => client.caching = true,
        b"YES" => {
            return Err(Cow::Borrowed(
                "ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.",
            ))
        }
        b"NO" if client.optout => client.caching = true,
        b"NO" => {
            return Err(Cow::Borrowed(
                "ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.",
            ))
        }
        _ => return Err(Cow::Borrowed(errors::SYNTAX)),
    }
    ctx.reply.ok();
    Ok(())
}

pub(super) fn client_getredir(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    let redirect = ctx
        .state
        .pubsub
        .tracking
        .clients
        .get(&ctx.session.id)
        .map_or(-1, |c| c.redirect as i64);
    ctx.reply.int(redirect);
    Ok(())
}

pub(super) fn client_trackinginfo(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    let client = ctx
        .state
        .pubsub
        .tracking
        .clients
        .get(&ctx.session.id)
        .cloned();
    let mut flags: Vec<&[u8]> = Vec::new();
    match &client {
        None => flags.push(b"off"),
        Some(c) => {
            flags.push(b"on");
            let named: [(bool, &[u8]); 7] = [
                (c.bcast, b"bcast"),
                (c.optin, b"optin"),
                (c.optin && c.caching, b"caching-yes"),
                (c.optout, b"optout"),
                (c.optout && c.caching, b"caching-no"),
                (c.noloop, b"noloop"),
                (c.broken_redirect, b"broken_redirect"),
            ];
            flags.extend(named.iter().filter(|(on, _)| *on).map(|(_, n)| *n));
        }
    }
    ctx.reply.map(3);
    ctx.reply.bulk(b"flags");
    ctx.reply.set(flags.len());
    for flag in flags {
        ctx.reply.bulk(flag);
    }
    ctx.reply.bulk(b"redirect");
    ctx.reply
        .int(client.as_ref().map_or(-1, |c| c.redirect as i64));
    ctx.reply.bulk(b"prefixes");
    let prefixes: Vec<Bytes> = client
        .map(|c| c.prefixes.into_iter().collect())
        .unwrap_or_default();
    ctx.reply.bulks(prefixes.iter().map(|p| &p[..]));
    Ok(())
}
