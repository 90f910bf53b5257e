//! Behaviours that Redis 7.0.15's units `integration/corrupt-dump`,
//! `integration/rdb`, `unit/oom-score-adj` and `unit/client-eviction`
//! rely on (`docs/results/compat.md`, "Units measured for the first
//! time"): DEBUG SET-SKIP-CHECKSUM-VALIDATION, a replica giving back
//! the room a big command from its master took, FLUSHALL stopping a running
//! BGSAVE, the OOM score following the server's role, a big argument's
//! room in the query buffer, and the words of a refused RDB checksum or
//! compact blob.

mod common;

use std::io::Write;
use std::time::{Duration, Instant};

use common::{connect, info_field, run, TestServer};
use ferrite_kv::config::ProtectedAction;
use redis::Value;

fn start(dir: &std::path::Path) -> TestServer {
    TestServer::start_with(dir, |c| {
        c.appendonly = false;
        c.enable_debug_command = ProtectedAction::Yes;
    })
}

fn text(v: &Value) -> String {
    match v {
        Value::BulkString(d) => String::from_utf8_lossy(d).into_owned(),
        Value::Okay => "OK".to_string(),
        Value::SimpleString(s) => s.clone(),
        Value::Int(n) => n.to_string(),
        other => format!("{other:?}"),
    }
}

fn dump_bytes(con: &mut redis::Connection, key: &str) -> Vec<u8> {
    match run(con, &["DUMP", key]) {
        Value::BulkString(d) => d,
        other => panic!("DUMP replied {other:?}"),
    }
}

fn restore(con: &mut redis::Connection, key: &str, payload: &[u8]) -> redis::RedisResult<Value> {
    redis::cmd("RESTORE")
        .arg(key)
        .arg(0)
        .arg(payload)
        .arg("REPLACE")
        .query(con)
}

#[test]
fn skip_checksum_validation_lets_restore_take_a_wrong_crc_but_not_a_newer_version() {
    let dir = tempfile::tempdir().expect("dir");
    let server = start(dir.path());
    let mut con = connect(&server);
    run(&mut con, &["RPUSH", "l", "a", "b", "c"]);
    let good = dump_bytes(&mut con, "l");
    let mut bad_crc = good.clone();
    let last = bad_crc.len() - 1;
    bad_crc[last] ^= 0xff;
    let wrong = "DUMP payload version or checksum are wrong";
    let err = restore(&mut con, "x", &bad_crc).expect_err("checked by default");
    assert!(err.to_string().contains(wrong), "{err}");

    assert_eq!(
        text(&run(
            &mut con,
            &["DEBUG", "SET-SKIP-CHECKSUM-VALIDATION", "1"]
        )),
        "OK"
    );
    assert_eq!(
        text(&restore(&mut con, "x", &bad_crc).expect("CRC skipped")),
        "OK"
    );
    assert_eq!(text(&run(&mut con, &["LLEN", "x"])), "3");
    // The version is still checked: 11 is newer than Redis 7.0 reads.
    let mut newer = bad_crc.clone();
    let version_at = newer.len() - 10;
    newer[version_at] = 11;
    let err = restore(&mut con, "y", &newer).expect_err("version checked");
    assert!(err.to_string().contains(wrong), "{err}");
    // The readers still check the value itself.
    let mut broken = good.clone();
    broken[1] = 0x3f;
    let err = restore(&mut con, "y", &broken).expect_err("bad value");
    assert!(err.to_string().contains("Bad data format"), "{err}");

    // As C's atoi reads it: "0abc" is 0, and the check is back.
    assert_eq!(
        text(&run(
            &mut con,
            &["DEBUG", "SET-SKIP-CHECKSUM-VALIDATION", "0abc"]
        )),
        "OK"
    );
    let err = restore(&mut con, "x", &bad_crc).expect_err("checked again");
    assert!(err.to_string().contains(wrong), "{err}");
}

#[test]
fn skip_checksum_validation_covers_function_restore() {
    let dir = tempfile::tempdir().expect("dir");
    let server = start(dir.path());
    let mut con = connect(&server);
    run(
        &mut con,
        &[
            "FUNCTION",
            "LOAD",
            "#!lua name=lib\nredis.register_function('f', function() return 1 end)",
        ],
    );
    let mut payload = match run(&mut con, &["FUNCTION", "DUMP"]) {
        Value::BulkString(d) => d,
        other => panic!("FUNCTION DUMP replied {other:?}"),
    };
    let last = payload.len() - 1;
    payload[last] ^= 0xff;
    let restore_fn = |con: &mut redis::Connection| -> redis::RedisResult<Value> {
        redis::cmd("FUNCTION")
            .arg("RESTORE")
            .arg(&payload)
            .arg("REPLACE")
            .query(con)
    };
    let err = restore_fn(&mut con).expect_err("checked by default");
    assert!(err.to_string().contains("checksum are wrong"), "{err}");
    run(&mut con, &["DEBUG", "SET-SKIP-CHECKSUM-VALIDATION", "1"]);
    assert_eq!(text(&restore_fn(&mut con).expect("CRC skipped")), "OK");
}

#[test]
fn flushall_stops_a_running_bgsave_and_keeps_its_changes_counted() {
    let dir = tempfile::tempdir().expect("dir");
    let server = start(dir.path());
    let mut con = connect(&server);
    // 1000 keys at 1 ms each: the save runs for a second unless stopped.
    run(&mut con, &["CONFIG", "SET", "rdb-key-save-delay", "1000"]);
    let mut pipe = redis::pipe();
    for i in 0..1000 {
        pipe.cmd("SET").arg(format!("key:{i}")).arg(i).ignore();
    }
    pipe.query::<()>(&mut con).expect("SETs");
    let changes: u64 = info_field(&mut con, "rdb_changes_since_last_save")
        .parse()
        .expect("number");
    assert!(changes >= 1000, "{changes}");
    assert_eq!(
        text(&run(&mut con, &["BGSAVE"])),
        "Background saving started"
    );
    assert_eq!(info_field(&mut con, "rdb_bgsave_in_progress"), "1");
    let flushed = Instant::now();
    run(&mut con, &["FLUSHALL"]);
    assert_eq!(
        info_field(&mut con, "rdb_bgsave_in_progress"),
        "0",
        "stopped at once"
    );
    assert!(
        flushed.elapsed() < Duration::from_millis(900),
        "not waited for"
    );
    let after: u64 = info_field(&mut con, "rdb_changes_since_last_save")
        .parse()
        .expect("number");
    assert!(
        after >= changes,
        "{after} < {changes}: the stopped save counted as done"
    );
    assert_eq!(info_field(&mut con, "rdb_last_bgsave_status"), "ok");
    assert!(
        !dir.path().join("dump.rdb").exists(),
        "the stopped save wrote no file"
    );
    // The server writes and saves as before.
    run(&mut con, &["CONFIG", "SET", "rdb-key-save-delay", "0"]);
    run(&mut con, &["SET", "x", "1"]);
    run(&mut con, &["SAVE"]);
    assert_eq!(info_field(&mut con, "rdb_changes_since_last_save"), "0");
}

fn oom_score() -> i64 {
    let text = std::fs::read_to_string("/proc/self/oom_score_adj").expect("procfs");
    text.trim().parse().expect("number")
}

#[test]
fn the_oom_score_follows_the_role_at_replicaof() {
    let dir = tempfile::tempdir().expect("dir");
    let server = start(dir.path());
    let mut con = connect(&server);
    let base = oom_score();
    run(
        &mut con,
        &["CONFIG", "SET", "oom-score-adj-values", "10 20 30"],
    );
    run(&mut con, &["CONFIG", "SET", "oom-score-adj", "yes"]);
    assert_eq!(oom_score(), base + 10);
    // The master's value changed: applied at once.
    run(
        &mut con,
        &["CONFIG", "SET", "oom-score-adj-values", "15 20 30"],
    );
    assert_eq!(oom_score(), base + 15);
    // A replica takes the second value, a master again the first.
    run(&mut con, &["REPLICAOF", "127.0.0.1", "1"]);
    assert_eq!(oom_score(), base + 20);
    // The replica's value changed while it is one: applied at once.
    run(
        &mut con,
        &["CONFIG", "SET", "oom-score-adj-values", "15 25 30"],
    );
    assert_eq!(oom_score(), base + 25);
    run(&mut con, &["REPLICAOF", "NO", "ONE"]);
    assert_eq!(oom_score(), base + 15);
    run(&mut con, &["CONFIG", "SET", "oom-score-adj", "no"]);
    assert_eq!(oom_score(), base);
}

/// CLIENT LIST's line for the client named `name`, if listed.
fn client_line(con: &mut redis::Connection, name: &str) -> Option<String> {
    let list = text(&run(con, &["CLIENT", "LIST"]));
    let needle = format!(" name={name} ");
    list.lines()
        .find(|l| l.contains(&needle))
        .map(str::to_string)
}

fn field(line: &str, name: &str) -> u64 {
    line.split(' ')
        .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {line}"))
}

#[test]
fn a_big_argument_gets_its_whole_room_once_its_header_is_read() {
    let dir = tempfile::tempdir().expect("dir");
    let server = start(dir.path());
    let mut con = connect(&server);
    let mut raw = server.raw();
    raw.check(
        b"*3\r\n$6\r\nCLIENT\r\n$7\r\nSETNAME\r\n$3\r\nbig\r\n",
        b"+OK\r\n",
    );
    // The header of a 200,000-byte argument and its first 1,000 bytes.
    let n = 200_000u64;
    let head = format!("*2\r\n$4\r\nECHO\r\n${n}\r\n");
    raw.stream.write_all(head.as_bytes()).expect("send");
    raw.stream.write_all(&[b'v'; 1000]).expect("send");
    let until = Instant::now() + Duration::from_secs(10);
    let line = loop {
        let line = client_line(&mut con, "big").expect("listed");
        if field(&line, "qbuf") > 0 {
            break line;
        }
        assert!(Instant::now() < until, "the bytes never arrived: {line}");
    };
    let room = field(&line, "qbuf") + field(&line, "qbuf-free");
    assert!(
        room >= n + 2,
        "{room} bytes of room for a {n}-byte argument: {line}"
    );
    assert!(field(&line, "tot-mem") >= n, "{line}");
    // A small argument is not given room ahead of its bytes.
    let mut small = server.raw();
    small.check(
        b"*3\r\n$6\r\nCLIENT\r\n$7\r\nSETNAME\r\n$5\r\nsmall\r\n",
        b"+OK\r\n",
    );
    small
        .stream
        .write_all(b"*2\r\n$4\r\nECHO\r\n$30000\r\nvvvv")
        .expect("send");
    let until = Instant::now() + Duration::from_secs(10);
    let line = loop {
        let line = client_line(&mut con, "small").expect("listed");
        if field(&line, "qbuf") > 0 {
            break line;
        }
        assert!(Instant::now() < until, "the bytes never arrived: {line}");
    };
    assert!(
        field(&line, "qbuf") + field(&line, "qbuf-free") < 30_000,
        "{line}"
    );
    // The rest of the big argument completes the command.
    raw.stream
        .write_all(&vec![b'v'; (n - 1000) as usize])
        .expect("send");
    raw.stream.write_all(b"\r\n").expect("send");
    let reply = raw.bulk(b"");
    assert_eq!(reply.len(), n as usize);
}

#[test]
fn a_wrong_rdb_checksum_at_start_up_is_reported_as_a_crc_error() {
    let dir = tempfile::tempdir().expect("dir");
    let server = start(dir.path());
    let mut con = connect(&server);
    run(&mut con, &["SET", "k", "v"]);
    run(&mut con, &["SAVE"]);
    drop(con);
    server.stop();
    let path = dir.path().join("dump.rdb");
    let mut bytes = std::fs::read(&path).expect("saved");
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&path, &bytes).expect("write");
    let config = ferrite_kv::config::Config {
        port: 0,
        dir: dir.path().to_path_buf(),
        appendonly: false,
        ..ferrite_kv::config::Config::default()
    };
    let err = match ferrite_kv::Server::bind(config) {
        Ok(_) => panic!("started with a corrupted dump.rdb"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("RDB CRC error"), "{err}");
}

#[test]
fn a_big_argument_arriving_whole_does_not_grow_the_buffer_past_its_room() {
    let dir = tempfile::tempdir().expect("dir");
    let server = start(dir.path());
    let mut con = connect(&server);
    let mut raw = server.raw();
    raw.check(
        b"*3\r\n$6\r\nCLIENT\r\n$7\r\nSETNAME\r\n$5\r\nwhole\r\n",
        b"+OK\r\n",
    );
    // All of a 3 MB argument but its CRLF: the buffer holds it in the
    // room made at its header, not in a buffer doubled as it filled.
    let n = 3_000_000u64;
    let head = format!("*2\r\n$4\r\nECHO\r\n${n}\r\n");
    raw.stream.write_all(head.as_bytes()).expect("send");
    raw.stream.write_all(&vec![b'v'; n as usize]).expect("send");
    let whole = head.len() as u64 + n;
    let until = Instant::now() + Duration::from_secs(20);
    let line = loop {
        let line = client_line(&mut con, "whole").expect("listed");
        if field(&line, "qbuf") == whole {
            break line;
        }
        assert!(Instant::now() < until, "the bytes never arrived: {line}");
    };
    let room = field(&line, "qbuf") + field(&line, "qbuf-free");
    assert!(room < whole + n / 2, "{room} bytes for {whole}: {line}");
    raw.stream.write_all(b"\r\n").expect("send");
    assert_eq!(raw.bulk(b"").len(), n as usize);
}

/// A log writer into a shared buffer, for the subscriber of one thread.
#[derive(Clone, Default)]
struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A DUMP payload of object type `kind` holding `body`, its CRC left zero
/// (restored with the check skipped).
fn payload(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut out = vec![kind];
    out.extend_from_slice(body);
    out.extend_from_slice(&10u16.to_le_bytes());
    out.extend_from_slice(&[0; 8]);
    out
}

/// What restoring `payload` logs, and whether it was refused.
fn restore_logging(payload: &[u8]) -> (bool, String) {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    let refused = tracing::subscriber::with_default(subscriber, || {
        ferrite_kv::rdb::restore_checked(payload, false).is_err()
    });
    let text = captured.0.lock().unwrap_or_else(|e| e.into_inner()).clone();
    (refused, String::from_utf8_lossy(&text).into_owned())
}

#[test]
fn a_compact_blob_that_fails_its_checks_is_logged_as_an_integrity_failure() {
    // A hash ziplist (13) whose blob is five bytes of nothing.
    let (refused, log) = restore_logging(&payload(13, b"\x05hello"));
    assert!(refused);
    assert!(log.contains("Hash ziplist integrity check failed"), "{log}");
    // A quicklist (14) of one node, the same bad ziplist.
    let (refused, log) = restore_logging(&payload(14, b"\x01\x05hello"));
    assert!(refused);
    assert!(log.contains("Ziplist integrity check failed"), "{log}");
    // An empty zipmap (9): a count of 0, the end byte.
    let (refused, log) = restore_logging(&payload(9, b"\x02\x00\xff"));
    assert!(refused);
    assert!(log.contains("Zipmap integrity check failed"), "{log}");
    // A stream (15) of one block whose listpack is five bytes of nothing.
    let mut stream = vec![0x01, 0x10];
    stream.extend_from_slice(&[0; 16]);
    stream.extend_from_slice(b"\x05hello");
    let (refused, log) = restore_logging(&payload(15, &stream));
    assert!(refused);
    assert!(
        log.contains("Stream listpack integrity check failed"),
        "{log}"
    );
    // A quicklist of the second kind (18) with one plain node (container
    // 1) of no bytes, and the same node holding one byte.
    let (refused, _) = restore_logging(&payload(18, b"\x01\x01\x00"));
    assert!(refused, "a node of no bytes");
    let (refused, log) = restore_logging(&payload(18, b"\x01\x01\x01x"));
    assert!(!refused, "a plain node of one byte: {log}");
    // A plain string cut short is refused but is no compact blob.
    let (refused, log) = restore_logging(&payload(0, b"\x09abc"));
    assert!(refused);
    assert!(!log.contains("integrity"), "{log}");
}

/// A list-ziplist payload (object type 10) of the entries "a" and "b",
/// with the second entry's previous length and the tail offset given.
fn ziplist_payload(second_prev_len: u8, tail: u32) -> Vec<u8> {
    let mut blob = Vec::new();
    blob.extend_from_slice(&17u32.to_le_bytes());
    blob.extend_from_slice(&tail.to_le_bytes());
    blob.extend_from_slice(&2u16.to_le_bytes());
    blob.extend_from_slice(&[0, 0x01, b'a', second_prev_len, 0x01, b'b', 0xff]);
    let mut body = vec![blob.len() as u8];
    body.extend_from_slice(&blob);
    payload(10, &body)
}

#[test]
fn a_ziplist_entry_with_a_wrong_previous_length_or_tail_is_refused() {
    let (refused, log) = restore_logging(&ziplist_payload(3, 13));
    assert!(!refused, "a well-formed ziplist: {log}");
    let (refused, log) = restore_logging(&ziplist_payload(2, 13));
    assert!(refused, "previous length 2 for a 3-byte entry");
    assert!(log.contains("List ziplist integrity check failed"), "{log}");
    let (refused, _) = restore_logging(&ziplist_payload(3, 10));
    assert!(refused, "the tail names the first entry, not the last");
}

/// `mem_clients_normal` of the server `c` is connected to.
fn clients_memory(c: &mut common::Raw) -> u64 {
    let info = common::repl::call(c, &["INFO", "memory"]);
    info.lines()
        .find_map(|l| l.strip_prefix("mem_clients_normal:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no mem_clients_normal in {info}"))
}

#[test]
fn a_replica_gives_back_the_room_a_big_command_from_its_master_took() {
    let pair = common::repl::Pair::start(|_| {});
    let mut r = pair.replica.raw();
    pair.link(&mut r);
    let mut m = pair.master.raw();
    // A 32 MB value: the master link's buffer grows to hold the SET.
    let value = "v".repeat(32 << 20);
    assert_eq!(
        common::repl::call(&mut m, &["SET", "key", &value]),
        "+OK\r\n"
    );
    common::repl::eventually("the value reaches the replica", || {
        common::repl::call(&mut r, &["STRLEN", "key"]) == format!(":{}\r\n", 32 << 20)
    });
    common::repl::eventually("the link's buffer is given back", || {
        clients_memory(&mut r) < 10 << 20
    });
}
