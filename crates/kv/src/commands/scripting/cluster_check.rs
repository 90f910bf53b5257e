//! What a script's call must pass in cluster mode, as Redis 7.0 checks
//! it (`docs/cluster.md`). The EVAL or FCALL itself was routed by its
//! declared keys; a script may still name other keys in its calls. Each
//! call is routed as a command of the calling client would be (its
//! READONLY and ASKING count): a key this node does not serve now fails
//! the call, and so does any call while the cluster is down. Unless the
//! script allows keys of several slots (`allow-cross-slot-keys`, or an
//! EVAL without flags, as Redis keeps old scripts working), every key it
//! touches must be in one slot: that of its declared keys, or of the
//! first key a call named. Commands of the master's stream and of the
//! log replay are never checked, as they are never redirected.

use super::run::Limits;
use crate::cluster::route::{route, Query, Redirect};
use crate::commands::table::CommandSpec;
use crate::commands::Ctx;
use crate::resp::Args;

/// The error of a call the cluster refuses, `None` when it may run.
pub(super) fn refusal(
    ctx: &mut Ctx<'_>,
    limits: &mut Limits,
    spec: &'static CommandSpec,
    args: &Args<'_>,
) -> Option<&'static str> {
    let shared = ctx.state.cluster.clone()?;
    if ctx.session.is_master || ctx.session.is_replay {
        return None;
    }
    let settings = &ctx.state.config.cluster;
    let query = Query {
        spec,
        asking: ctx.session.asking,
        readonly: ctx.session.readonly,
        reads_when_down: settings.allow_reads_when_down,
        shard_when_down: settings.allow_pubsubshard_when_down,
    };
    let routed = {
        let table = shared.lock();
        let keyspace = &mut ctx.state.keyspace;
        let mut exists = |key: &[u8]| keyspace.contains(0, key);
        route(&table, query, &[*args], &mut exists)
    };
    match routed {
        Err(Redirect::DownReadOnly) => {
            return Some("ERR Script attempted to execute a write command while the cluster is down and readonly");
        }
        Err(Redirect::Down) => {
            return Some("ERR Script attempted to execute a command while the cluster is down");
        }
        Err(_) => return Some("ERR Script attempted to access a non local key in a cluster node"),
        Ok(()) => {}
    }
    let mut positions = Vec::new();
    spec.keys.positions(args, &mut positions);
    let &first = positions.first()?;
    let slot = crate::cluster::key_slot(args.get(first));
    if limits.cross_slot {
        return None;
    }
    match limits.slot {
        None => {
            limits.slot = Some(slot);
            None
        }
        Some(known) if known != slot => {
            Some("ERR Script attempted to access keys that do not hash to the same slot")
        }
        Some(_) => None,
    }
}
