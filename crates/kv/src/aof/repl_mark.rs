//! The replication mark: the replication ID and offset a log record leaves
//! the dataset at, written in the same record so that a restarted replica
//! knows exactly which byte of its master's stream it holds.
//!
//! A record applied from the master's stream ends with
//! `REPLCONF ferrite-replid <id> ferrite-offset <offset> ferrite-db <db>`,
//! `offset` being the stream's offset once that record's commands ran and
//! `db` the database the stream had selected then (a partial resync
//! continues the stream without a SELECT). The wal keeps a
//! record whole or drops it whole, so the mark and the data it describes
//! are never separated by a crash. A record holding only a mark is written
//! where the offset is known but no command is logged: after a full sync,
//! at the head of each new incremental log (a rewrite's switch), and at
//! shutdown (the pings and reads since the last write count in the offset).
//!
//! The replay keeps the last mark it met, and forgets it at any record
//! without one (a client's write on a writable replica or on a master,
//! which is not in the master's stream): a mark is trusted only when no
//! change followed it. Redis loading such a log runs the REPLCONF, whose
//! unknown option it answers with an error and otherwise ignores, so the
//! payloads stay a valid Redis AOF.

use crate::commands::encode_command;
use crate::resp::Args;

/// The mark's option names, which no Redis REPLCONF option uses.
const ID_OPTION: &[u8] = b"ferrite-replid";
const OFFSET_OPTION: &[u8] = b"ferrite-offset";
const DB_OPTION: &[u8] = b"ferrite-db";

/// Appends the mark command for `replid` at `offset`, the stream having
/// selected database `db`, to `out`.
pub(crate) fn encode(out: &mut Vec<u8>, replid: &str, offset: i64, db: usize) {
    let offset = offset.to_string();
    let db = db.to_string();
    encode_command(
        out,
        &[
            b"REPLCONF",
            ID_OPTION,
            replid.as_bytes(),
            OFFSET_OPTION,
            offset.as_bytes(),
            DB_OPTION,
            db.as_bytes(),
        ],
    );
}

/// What a replayed command is, as far as marks go.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Parsed {
    /// Not a mark: a command to run.
    Command,
    /// A well-formed mark: ID, offset, the stream's database.
    Mark(String, i64, usize),
}

/// Reads `args` as a mark; an error says why a command that claims to be
/// one (REPLCONF with the mark's first option) is malformed.
pub(crate) fn parse(args: &Args<'_>) -> Result<Parsed, String> {
    if args.len() < 2
        || !args.get(0).eq_ignore_ascii_case(b"REPLCONF")
        || !args.get(1).eq_ignore_ascii_case(ID_OPTION)
    {
        return Ok(Parsed::Command);
    }
    if args.len() != 7
        || !args.get(3).eq_ignore_ascii_case(OFFSET_OPTION)
        || !args.get(5).eq_ignore_ascii_case(DB_OPTION)
    {
        return Err("a replication mark needs an ID, an offset and a database".into());
    }
    let id = args.get(2);
    if id.len() != 40 || !id.iter().all(u8::is_ascii_hexdigit) {
        return Err("a replication mark's ID is not 40 hex digits".into());
    }
    let offset = std::str::from_utf8(args.get(4))
        .ok()
        .and_then(|text| text.parse::<i64>().ok())
        .filter(|offset| *offset >= 0)
        .ok_or("a replication mark's offset is not a non-negative integer")?;
    let db = std::str::from_utf8(args.get(6))
        .ok()
        .and_then(|text| text.parse::<usize>().ok())
        .ok_or("a replication mark's database is not a non-negative integer")?;
    let id = String::from_utf8_lossy(id).into_owned();
    Ok(Parsed::Mark(id, offset, db))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resp::{Limits, Parser};
    use proptest::prelude::*;

    const LIMITS: Limits = Limits {
        args_max: 64,
        bulk_len_max_bytes: 1 << 20,
    };

    fn parse_bytes(bytes: &[u8]) -> Result<Parsed, String> {
        let mut parser = Parser::new();
        match parser.parse(bytes, &LIMITS) {
            Ok(Some(_)) => parse(&parser.args(bytes)),
            other => panic!("test input does not parse: {other:?}"),
        }
    }

    #[test]
    fn a_mark_reads_back() {
        let id = "a".repeat(40);
        let mut out = Vec::new();
        encode(&mut out, &id, 12345, 9);
        assert_eq!(parse_bytes(&out), Ok(Parsed::Mark(id, 12345, 9)));
    }

    #[test]
    fn other_commands_are_not_marks() {
        let mut out = Vec::new();
        encode_command(&mut out, &[b"REPLCONF", b"ACK", b"5"]);
        assert_eq!(parse_bytes(&out), Ok(Parsed::Command));
        out.clear();
        encode_command(&mut out, &[b"SET", b"ferrite-replid", b"x"]);
        assert_eq!(parse_bytes(&out), Ok(Parsed::Command));
    }

    #[test]
    fn malformed_marks_are_errors() {
        let id = "b".repeat(40);
        let id = id.as_bytes();
        let (o, d) = (OFFSET_OPTION, DB_OPTION);
        for bad in [
            vec![ID_OPTION, id],
            vec![ID_OPTION, id, o, b"1"],
            vec![ID_OPTION, b"short", o, b"1", d, b"0"],
            vec![ID_OPTION, id, b"other", b"1", d, b"0"],
            vec![ID_OPTION, id, o, b"-1", d, b"0"],
            vec![ID_OPTION, id, o, b"x", d, b"0"],
            vec![ID_OPTION, id, o, b"1", d, b"-1"],
            vec![ID_OPTION, id, o, b"1", b"other", b"0"],
        ] {
            let mut parts: Vec<&[u8]> = vec![b"REPLCONF"];
            parts.extend(bad);
            let mut out = Vec::new();
            encode_command(&mut out, &parts);
            assert!(parse_bytes(&out).is_err(), "{parts:?}");
        }
    }

    proptest! {
        #[test]
        fn decoding_never_panics(args in proptest::collection::vec(
            proptest::collection::vec(any::<u8>(), 0..48), 1..9)) {
            let mut out = Vec::new();
            let mut parts: Vec<&[u8]> = vec![b"REPLCONF", ID_OPTION];
            parts.extend(args.iter().map(Vec::as_slice));
            encode_command(&mut out, &parts);
            let _ = parse_bytes(&out);
        }

        #[test]
        fn any_mark_round_trips(id in "[0-9a-f]{40}", offset in 0i64..i64::MAX, db in 0usize..1 << 20) {
            let mut out = Vec::new();
            encode(&mut out, &id, offset, db);
            prop_assert_eq!(parse_bytes(&out), Ok(Parsed::Mark(id, offset, db)));
        }
    }
}
