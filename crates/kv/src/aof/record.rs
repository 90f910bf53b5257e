//! One AOF record as a wal payload, and reading it back.
//!
//! A payload is the RESP of one client command, or of one transaction
//! wrapped in MULTI/EXEC, preceded by `SELECT db` when the record starts in a
//! database other than 0. Every record therefore names its database itself:
//! replay starts each record in database 0, so a record means the same thing
//! whatever file (or rewrite part) precedes it. The concatenated payloads of
//! a log are a valid Redis AOF.

use crate::commands::{encode_command, full_name, resolve, Propagation};
use crate::resp::{Args, Limits, Parser};

/// Limits when parsing a payload back: anything the server could log.
const PAYLOAD_LIMITS: Limits = Limits {
    args_max: 1 << 30,
    bulk_len_max_bytes: 1 << 30,
};

/// What the reused record buffers keep between records (one typical
/// record, many times over); a larger record's growth is given back.
pub(crate) const SCRATCH_KEEP_BYTES: usize = 64 * 1024;

/// Encodes `record` into `out` (cleared first). Returns `false`, leaving
/// `out` empty, if the record holds no command.
#[cfg(test)]
pub(crate) fn encode(record: &Propagation, out: &mut Vec<u8>) -> bool {
    out.clear();
    encode_into(record, out)
}

/// Whether `record` gives a payload at all ([`encode_into`] returns `true`).
pub(crate) fn holds_anything(record: &Propagation) -> bool {
    record.first_db.is_some() || record.repl_mark.is_some()
}

/// Appends the payload of `record` to `out` (the log's pending batch, so
/// the payload is built where it is appended from); returns `false`,
/// adding nothing, if the record holds no command.
pub(crate) fn encode_into(record: &Propagation, out: &mut Vec<u8>) -> bool {
    let Some(first_db) = record.first_db else {
        // A record of a replication mark alone (after a full sync, at a
        // log switch, at shutdown).
        let Some((replid, offset, db)) = &record.repl_mark else {
            return false;
        };
        super::repl_mark::encode(out, replid, *offset, *db);
        return true;
    };
    if first_db != 0 {
        let text = first_db.to_string();
        encode_command(out, &[b"SELECT", text.as_bytes()]);
    }
    // The wal keeps a record whole or drops it whole, so MULTI/EXEC is not
    // needed for atomicity; it keeps the payloads a faithful Redis AOF.
    let wrap = record.commands > 1;
    if wrap {
        encode_command(out, &[b"MULTI"]);
    }
    out.extend_from_slice(&record.buf);
    if wrap {
        encode_command(out, &[b"EXEC"]);
    }
    // The mark goes last, after the commands it accounts for.
    if let Some((replid, offset, db)) = &record.repl_mark {
        super::repl_mark::encode(out, replid, *offset, *db);
    }
    true
}

/// Calls `on_command` for every command of `payload`, in order; returns how
/// many there were. An error says why the payload is not a sequence of
/// complete RESP commands, or what `on_command` rejected.
pub(crate) fn for_each_command(
    payload: &[u8],
    parser: &mut Parser,
    mut on_command: impl FnMut(&Args<'_>) -> Result<(), String>,
) -> Result<u64, String> {
    let mut at = 0;
    let mut commands = 0;
    while at < payload.len() {
        if payload[at] != b'*' {
            return Err(format!(
                "expected '*' at byte {at} of the payload, found {:#04x}",
                payload[at]
            ));
        }
        let consumed = match parser.parse(&payload[at..], &PAYLOAD_LIMITS) {
            Ok(Some(n)) => n,
            Ok(None) => return Err(format!("the payload ends inside a command at byte {at}")),
            Err(e) => return Err(format!("byte {at} of the payload: {e}")),
        };
        on_command(&parser.args(&payload[at..]))?;
        commands += 1;
        at += consumed;
    }
    if commands == 0 {
        return Err("the payload holds no command".into());
    }
    Ok(commands)
}

/// Whether `args` is a command the server knows, with a valid number of
/// arguments: what every logged command is.
pub(crate) fn check_command(args: &Args<'_>) -> Result<(), String> {
    match resolve(args) {
        Ok((_, spec)) if spec.arity_ok(args.len()) => Ok(()),
        Ok((container, spec)) => Err(format!(
            "wrong number of arguments for '{}'",
            full_name(container, spec)
        )),
        Err(e) => Err(e.into_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(payload: &[u8]) -> Vec<String> {
        let mut parser = Parser::new();
        let mut out = Vec::new();
        for_each_command(payload, &mut parser, |args| {
            out.push(String::from_utf8_lossy(args.get(0)).into_owned());
            Ok(())
        })
        .expect("payload parses");
        out
    }

    #[test]
    fn records_name_their_database_and_wrap_transactions() {
        let mut prop = Propagation::default();
        let mut out = Vec::new();
        assert!(!encode(&prop, &mut out));
        prop.push(0, &[b"SET", b"k", b"v"]);
        assert!(encode(&prop, &mut out));
        assert_eq!(out, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n");
        prop.clear();
        prop.push(3, &[b"DEL", b"a"]);
        prop.push(4, &[b"DEL", b"b"]);
        assert!(encode(&prop, &mut out));
        assert_eq!(
            names(&out),
            ["SELECT", "MULTI", "DEL", "SELECT", "DEL", "EXEC"]
        );
    }

    #[test]
    fn damaged_payloads_are_errors() {
        let mut parser = Parser::new();
        let ok = |_: &Args<'_>| Ok(());
        assert!(for_each_command(b"", &mut parser, ok).is_err());
        assert!(for_each_command(b"*1\r\n$4\r\nPI", &mut parser, ok).is_err());
        assert!(for_each_command(b"PING\r\n", &mut parser, ok).is_err());
        assert_eq!(
            for_each_command(b"*1\r\n$4\r\nPING\r\n", &mut parser, ok),
            Ok(1)
        );
    }
}
