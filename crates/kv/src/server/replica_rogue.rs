//! A replica's link carries its acknowledgements only (`REPLCONF ACK`,
//! which has no reply). Any other command a replica sends would make the
//! master write a reply into the replication stream, so Redis disconnects
//! the replica instead and logs why; Ferrite does the same, with Redis's
//! log lines (its suite looks for them).

use crate::commands::flags::{MAY_REPLICATE, READONLY, WRITE};
use crate::resp::Args;

/// Whether `args` is a command a replica may send: `REPLCONF ACK`.
pub(super) fn is_ack(args: &Args<'_>) -> bool {
    args.len() >= 3
        && args.get(0).eq_ignore_ascii_case(b"REPLCONF")
        && args.get(1).eq_ignore_ascii_case(b"ACK")
}

/// Logs, as Redis does, that the replica `who` sent `args`, which would
/// have replied: first the error it would have got, if any.
pub(super) fn log_rogue(args: &Args<'_>, who: &str) {
    let (name, error) = match crate::commands::resolve(args) {
        Ok((container, spec)) => {
            let name = match container {
                Some(c) => format!("{}|{}", c.name, spec.name),
                None => spec.name.to_string(),
            };
            let keyspace = spec.flags & (READONLY | WRITE | MAY_REPLICATE) != 0;
            (
                name,
                keyspace.then(|| "Replica can't interact with the keyspace".to_string()),
            )
        }
        Err(e) => ("<unknown>".to_string(), Some(e.into_owned())),
    };
    if let Some(error) = error {
        tracing::warn!(
            "== CRITICAL == This master is sending an error to its replica: '{error}' after processing the command '{name}'"
        );
    }
    tracing::warn!("Replica generated a reply to command '{name}', disconnecting it: {who}");
}
