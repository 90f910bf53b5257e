//! Byte-level tests of the introspection commands: COMMAND, CLIENT,
//! SLOWLOG, LATENCY, DEBUG and HELLO, in RESP2 and RESP3; and a property
//! test that COMMAND GETKEYS finds the keys the log rewrite uses.

mod common;

use common::{resp, TestServer};
use ferrite_kv::commands::all_commands;
use proptest::prelude::*;

#[test]
fn command_getkeys_and_flags() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(
        &resp(&["COMMAND", "GETKEYS", "get", "key"]),
        b"*1\r\n$3\r\nkey\r\n",
    );
    c.check(
        &resp(&["COMMAND", "GETKEYSANDFLAGS", "set", "k1", "v1"]),
        b"*1\r\n*2\r\n$2\r\nk1\r\n*2\r\n+OW\r\n+update\r\n",
    );
    c.check(
        &resp(&["COMMAND", "GETKEYSANDFLAGS", "set", "k1", "v1", "GET"]),
        b"*1\r\n*2\r\n$2\r\nk1\r\n*3\r\n+RW\r\n+access\r\n+update\r\n",
    );
    c.check(
        &resp(&["COMMAND", "GETKEYS", "ping", "x"]),
        b"-ERR The command has no key arguments\r\n",
    );
    c.check(
        &resp(&["COMMAND", "GETKEYS", "nosuch", "x"]),
        b"-ERR Invalid command specified\r\n",
    );
    c.check(
        &resp(&["COMMAND", "GETKEYS", "get", "a", "b"]),
        b"-ERR Invalid number of arguments specified for command\r\n",
    );
    c.check(
        &resp(&["COMMAND", "GETKEYS", "object", "encoding", "k"]),
        b"*1\r\n$1\r\nk\r\n",
    );
    // RESP3: the flags are a set.
    c.hello3();
    c.check(
        &resp(&["COMMAND", "GETKEYSANDFLAGS", "mset", "a", "1", "b", "2"]),
        b"*2\r\n*2\r\n$1\r\na\r\n~2\r\n+OW\r\n+update\r\n*2\r\n$1\r\nb\r\n~2\r\n+OW\r\n+update\r\n",
    );
    server.stop();
}

#[test]
fn command_info_list_and_docs() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(
        &resp(&["COMMAND", "INFO", "get|key", "config|get|x"]),
        b"*2\r\n*-1\r\n*-1\r\n",
    );
    c.check(
        &resp(&["COMMAND", "INFO", "get"]),
        b"*1\r\n*10\r\n$3\r\nget\r\n:2\r\n*2\r\n+readonly\r\n+fast\r\n:1\r\n:1\r\n:1\r\n\
*3\r\n+@read\r\n+@string\r\n+@fast\r\n*0\r\n\
*1\r\n*6\r\n$5\r\nflags\r\n*2\r\n+RO\r\n+access\r\n\
$12\r\nbegin_search\r\n*4\r\n$4\r\ntype\r\n$5\r\nindex\r\n$4\r\nspec\r\n*2\r\n$5\r\nindex\r\n:1\r\n\
$9\r\nfind_keys\r\n*4\r\n$4\r\ntype\r\n$5\r\nrange\r\n$4\r\nspec\r\n*6\r\n$7\r\nlastkey\r\n:0\r\n$7\r\nkeystep\r\n:1\r\n$5\r\nlimit\r\n:0\r\n\
*0\r\n",
    );
    c.check(
        &resp(&["COMMAND", "LIST", "FILTERBY", "PATTERN", "object|*c*"]),
        b"*2\r\n$15\r\nobject|encoding\r\n$15\r\nobject|refcount\r\n",
    );
    c.check(&resp(&["COMMAND", "LIST", "bad"]), b"-ERR syntax error\r\n");
    c.check(
        &resp(&["COMMAND", "LIST", "FILTERBY", "MODULE", "m"]),
        b"*0\r\n",
    );
    c.check(
        &resp(&["COMMAND", "DOCS", "echo"]),
        b"*2\r\n$4\r\necho\r\n*6\r\n$7\r\nsummary\r\n$21\r\nReturns its argument.\r\n$5\r\nsince\r\n$5\r\n1.0.0\r\n$5\r\ngroup\r\n$10\r\nconnection\r\n",
    );
    server.stop();
}

#[test]
fn client_kill_reply_and_list() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut a = server.raw();
    let mut b = server.raw();
    a.check(b"CLIENT ID\r\n", b":1\r\n");
    b.check(b"CLIENT ID\r\n", b":2\r\n");
    a.check(
        b"CLIENT KILL\r\n",
        b"-ERR wrong number of arguments for 'client|kill' command\r\n",
    );
    a.check(
        b"CLIENT KILL ID 0\r\n",
        b"-ERR client-id should be greater than 0\r\n",
    );
    a.check(
        b"CLIENT KILL TYPE nope\r\n",
        b"-ERR Unknown client type 'nope'\r\n",
    );
    a.check(b"CLIENT KILL ID 2 extra\r\n", b"-ERR syntax error\r\n");
    a.check(b"CLIENT KILL 1.2.3.4:5\r\n", b"-ERR No such client\r\n");
    a.check(b"CLIENT KILL ID 2\r\n", b":1\r\n");
    assert!(b.is_closed(), "client 2 was killed");
    // REPLY OFF/SKIP drop replies; ON replies OK again.
    a.check(
        b"CLIENT REPLY OFF\r\nPING x\r\nCLIENT REPLY ON\r\nPING y\r\n",
        b"+OK\r\n$1\r\ny\r\n",
    );
    a.check(b"CLIENT REPLY SKIP\r\nPING x\r\nPING z\r\n", b"$1\r\nz\r\n");
    let list = a.roundtrip_any(b"CLIENT LIST ID 1 99\r\n");
    let text = String::from_utf8_lossy(&list);
    assert!(
        text.contains("id=1 ") && text.contains("cmd=client|list "),
        "{text}"
    );
    assert!(text.contains("qbuf=21 "), "{text}");
    a.check(b"CLIENT KILL SKIPME no\r\n", b":1\r\n");
    assert!(a.is_closed(), "killed itself after the reply");
    server.stop();
}

#[test]
fn slowlog_records_trims_and_resets() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(
        b"CONFIG SET slowlog-log-slower-than 0\r\nSLOWLOG RESET\r\n",
        b"+OK\r\n+OK\r\n",
    );
    let long = "A".repeat(129);
    c.check(
        &resp(&["ECHO", &long]),
        format!("$129\r\n{long}\r\n").as_bytes(),
    );
    let many: Vec<String> = (0..40).map(|i| i.to_string()).collect();
    let mut args = vec!["PING"];
    args.extend(many.iter().map(String::as_str));
    let _ = c.roundtrip_any(&resp(&args));
    c.check(b"SLOWLOG LEN\r\n", b":3\r\n");
    // The newest first: SLOWLOG LEN, PING, ECHO.
    let got = c.roundtrip_any(b"SLOWLOG GET 3\r\n");
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("*3\r\n*6\r\n:4\r\n"), "{text}");
    assert!(
        text.contains("$23\r\n... (10 more arguments)\r\n"),
        "{text}"
    );
    assert!(
        text.contains(&format!("{}... (1 more bytes)", "A".repeat(128))),
        "{text}"
    );
    c.check(
        b"SLOWLOG GET -2\r\n",
        b"-ERR count should be greater than or equal to -1\r\n",
    );
    c.check(b"CONFIG SET slowlog-log-slower-than -1\r\n", b"+OK\r\n");
    c.check(b"SLOWLOG RESET\r\nSLOWLOG LEN\r\n", b"+OK\r\n:0\r\n");
    server.stop();
}

#[test]
fn debug_protocol_in_both_protocols_and_refused_when_disabled() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(b"DEBUG SLEEP 0\r\n", b"-ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.\r\n");
    server.stop();
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start_with(dir.path(), |c| {
        c.set("enable-debug-command", &["yes".into()]).unwrap()
    });
    let mut c = server.raw();
    // Redis's bounds: 1 byte up to 1 MiB below 4 GiB.
    c.check(
        b"DEBUG QUICKLIST-PACKED-THRESHOLD 1b\r\nDEBUG QUICKLIST-PACKED-THRESHOLD 0\r\nDEBUG QUICKLIST-PACKED-THRESHOLD 4gb\r\n",
        b"+OK\r\n+OK\r\n-ERR argument must be a memory value bigger than 1 and smaller than 4gb\r\n",
    );
    c.check(
        b"DEBUG PROTOCOL attrib\r\nDEBUG PROTOCOL bignum\r\nDEBUG PROTOCOL true\r\nDEBUG PROTOCOL null\r\nDEBUG PROTOCOL double\r\n",
        b"$39\r\nSome real reply following the attribute\r\n$37\r\n1234567999999999999999999999999999999\r\n:1\r\n$-1\r\n$5\r\n3.141\r\n",
    );
    c.check(
        b"DEBUG PROTOCOL push\r\n",
        b"-ERR RESP2 is not supported by this command\r\n",
    );
    c.hello3();
    c.check(
        b"DEBUG PROTOCOL attrib\r\nDEBUG PROTOCOL bignum\r\nDEBUG PROTOCOL false\r\nDEBUG PROTOCOL null\r\nDEBUG PROTOCOL map\r\n",
        b"|1\r\n$14\r\nkey-popularity\r\n*2\r\n$7\r\nkey:123\r\n:90\r\n$39\r\nSome real reply following the attribute\r\n(1234567999999999999999999999999999999\r\n#f\r\n_\r\n%3\r\n:0\r\n#f\r\n:1\r\n#t\r\n:2\r\n#f\r\n",
    );
    c.check(
        b"DEBUG PROTOCOL push\r\n",
        b">2\r\n$16\r\nserver-cpu-usage\r\n:42\r\n$40\r\nSome real reply following the push reply\r\n",
    );
    c.check(b"DEBUG SET-ACTIVE-EXPIRE 0\r\n", b"+OK\r\n");
    server.stop();
}

#[test]
fn latency_histogram_counts_calls() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(
        b"CONFIG RESETSTAT\r\nSET a b\r\nSET c d\r\n",
        b"+OK\r\n+OK\r\n+OK\r\n",
    );
    let got = c.roundtrip_any(b"LATENCY HISTOGRAM set nosuch\r\n");
    let text = String::from_utf8_lossy(&got);
    assert!(
        text.starts_with("*2\r\n$3\r\nset\r\n*4\r\n$5\r\ncalls\r\n:2\r\n$14\r\nhistogram_usec\r\n"),
        "{text}"
    );
    // Without latency tracking, calls leave no histogram (as in Redis).
    c.check(
        b"CONFIG SET latency-tracking no\r\nCONFIG RESETSTAT\r\nGET a\r\nLATENCY HISTOGRAM get\r\n",
        b"+OK\r\n+OK\r\n$1\r\nb\r\n*0\r\n",
    );
    c.check(b"LATENCY LATEST\r\nLATENCY RESET\r\n", b"*0\r\n:0\r\n");
    c.check(
        b"LATENCY GRAPH command\r\n",
        b"-ERR No samples available for event 'command'\r\n",
    );
    server.stop();
}

#[test]
fn hello_reports_7_0_15() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(
        b"HELLO 3\r\n",
        b"%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$6\r\n7.0.15\r\n$5\r\nproto\r\n:3\r\n$2\r\nid\r\n:1\r\n$4\r\nmode\r\n$10\r\nstandalone\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$7\r\nmodules\r\n*0\r\n",
    );
    server.stop();
}

/// Arguments for a command line of `argc` arguments (name included).
fn line_for(spec: &ferrite_kv::commands::CommandSpec, extra: &[String]) -> Vec<Vec<u8>> {
    let mut line = vec![spec.name.as_bytes().to_vec()];
    line.extend(extra.iter().map(|e| e.as_bytes().to_vec()));
    line
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// For every command in the table with fixed key positions, COMMAND
    /// GETKEYS names exactly the arguments the rewrite reads as keys
    /// (`Keys::positions`).
    #[test]
    fn getkeys_agrees_with_the_rewrites_key_positions(
        extra in proptest::collection::vec("[a-z]{1,4}", 1..8),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(dir.path());
        let mut c = server.raw();
        for spec in all_commands().filter(|s| s.subcommands.is_empty()) {
            let line = line_for(spec, &extra);
            if !spec.arity_ok(line.len()) || matches!(spec.keys, ferrite_kv::commands::Keys::None) {
                continue;
            }
            // Shard channels sit where keys would (for the slot), but
            // COMMAND GETKEYS reports no keys for them, as Redis.
            if matches!(spec.name, "spublish" | "ssubscribe" | "sunsubscribe") {
                continue;
            }
            let ranges: Vec<(usize, usize)> = {
                let mut at = 0;
                line.iter().map(|a| { let r = (at, at + a.len()); at += a.len(); r }).collect()
            };
            let flat: Vec<u8> = line.concat();
            let args = ferrite_kv::resp::Args::new(&flat, &ranges);
            let mut positions = Vec::new();
            spec.keys.positions(&args, &mut positions);
            let mut request: Vec<&str> = vec!["COMMAND", "GETKEYS"];
            let texts: Vec<String> = line.iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect();
            request.extend(texts.iter().map(String::as_str));
            let mut expected = format!("*{}\r\n", positions.len()).into_bytes();
            for p in &positions {
                let key = &line[*p];
                expected.extend_from_slice(format!("${}\r\n", key.len()).as_bytes());
                expected.extend_from_slice(key);
                expected.extend_from_slice(b"\r\n");
            }
            if positions.is_empty() {
                continue;
            }
            c.check(&resp(&request), &expected);
        }
        server.stop();
    }
}

/// WATCH as Redis 7.0: FLUSHDB/FLUSHALL/SWAPDB touch only watched keys
/// whose content changes; a key that expires after WATCH fails EXEC even
/// before anything removes it; a key already stale at WATCH does not.
#[test]
fn watch_meets_flush_swap_and_expiry_as_7_0() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start_with(dir.path(), |c| {
        c.set("enable-debug-command", &["yes".into()]).unwrap()
    });
    let mut c = server.raw();
    let exec_ping = b"MULTI\r\nPING\r\nEXEC\r\n";
    let passed: &[u8] = b"+OK\r\n+QUEUED\r\n*1\r\n+PONG\r\n";
    let failed: &[u8] = b"+OK\r\n+QUEUED\r\n*-1\r\n";
    c.check(b"DEBUG SET-ACTIVE-EXPIRE 0\r\n", b"+OK\r\n");
    // Missing keys are not touched by FLUSHALL; existing ones are.
    c.check(b"WATCH x\r\nFLUSHALL\r\n", b"+OK\r\n+OK\r\n");
    c.check(exec_ping, passed);
    c.check(
        b"SET x 1\r\nWATCH x\r\nFLUSHDB\r\n",
        b"+OK\r\n+OK\r\n+OK\r\n",
    );
    c.check(exec_ping, failed);
    // Stale at WATCH: FLUSHDB is no change.
    c.check(b"SET x 1 PX 1\r\n", b"+OK\r\n");
    std::thread::sleep(std::time::Duration::from_millis(5));
    c.check(b"WATCH x\r\nFLUSHDB\r\n", b"+OK\r\n+OK\r\n");
    c.check(exec_ping, passed);
    // Expired after WATCH, not yet removed: EXEC fails.
    c.check(b"SET k 1 PX 50\r\nWATCH k\r\n", b"+OK\r\n+OK\r\n");
    std::thread::sleep(std::time::Duration::from_millis(80));
    c.check(exec_ping, failed);
    // SWAPDB: a live key arriving touches; a stale one does not.
    c.check(
        b"FLUSHALL\r\nSELECT 1\r\nSET x 1\r\nSELECT 0\r\nWATCH x\r\nSWAPDB 0 1\r\n",
        b"+OK\r\n+OK\r\n+OK\r\n+OK\r\n+OK\r\n+OK\r\n",
    );
    c.check(exec_ping, failed);
    c.check(
        b"FLUSHALL\r\nSET x 1 PX 1\r\nSELECT 1\r\n",
        b"+OK\r\n+OK\r\n+OK\r\n",
    );
    std::thread::sleep(std::time::Duration::from_millis(5));
    c.check(b"WATCH x\r\nSWAPDB 0 1\r\n", b"+OK\r\n+OK\r\n");
    c.check(exec_ping, passed);
    server.stop();
}

/// DEBUG RELOAD and LOADAOF load the dataset back from the log: what was
/// written survives, nothing is applied twice, and writes go on after.
#[test]
fn debug_reload_loads_the_dataset_back_from_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start_with(dir.path(), |c| {
        c.set("enable-debug-command", &["yes".into()]).unwrap()
    });
    let mut c = server.raw();
    c.check(
        b"SET a 1\r\nINCR a\r\nRPUSH l x y\r\nSELECT 3\r\nSADD s m\r\nSELECT 0\r\n",
        b"+OK\r\n:2\r\n:2\r\n+OK\r\n:1\r\n+OK\r\n",
    );
    c.check(
        b"DEBUG RELOAD\r\nGET a\r\nLRANGE l 0 -1\r\n",
        b"+OK\r\n$1\r\n2\r\n*2\r\n$1\r\nx\r\n$1\r\ny\r\n",
    );
    c.check(
        b"INCR a\r\nDEBUG LOADAOF\r\nGET a\r\n",
        b":3\r\n+OK\r\n$1\r\n3\r\n",
    );
    c.check(
        b"SELECT 3\r\nSMEMBERS s\r\nDBSIZE\r\n",
        b"+OK\r\n*1\r\n$1\r\nm\r\n:1\r\n",
    );
    // NOFLUSH loads the same data over itself: refused while keys exist,
    // a no-op with MERGE (no command is applied twice).
    c.check(
        b"DEBUG RELOAD NOFLUSH\r\nDEBUG RELOAD NOSAVE NOFLUSH MERGE\r\nSELECT 0\r\nGET a\r\n",
        b"-ERR Error trying to load the RDB dump\r\n+OK\r\n+OK\r\n$1\r\n3\r\n",
    );
    server.stop();
    // And a restart sees the same data.
    let server = TestServer::start(dir.path());
    server
        .raw()
        .check(b"GET a\r\nDBSIZE\r\n", b"$1\r\n3\r\n:2\r\n");
    server.stop();
}

/// SAVE replies once the log is durable and moves LASTSAVE; it is refused
/// inside MULTI; BGSAVE starts a log rewrite.
#[test]
fn save_bgsave_and_lastsave() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(
        b"MULTI\r\nSET foo bar\r\nSAVE\r\nEXEC\r\nGET foo\r\n",
        b"+OK\r\n+QUEUED\r\n-ERR Command not allowed inside a transaction\r\n-EXECABORT Transaction discarded because of previous errors.\r\n$-1\r\n",
    );
    c.check(b"SET k v\r\nSAVE\r\n", b"+OK\r\n+OK\r\n");
    let got = c.roundtrip_any(b"LASTSAVE\r\n");
    let text = String::from_utf8_lossy(&got);
    let lastsave: i64 = text.trim_start_matches(':').trim().parse().unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    assert!((now - lastsave).abs() <= 2, "{lastsave} vs {now}");
    c.check(b"BGSAVE NOW\r\n", b"-ERR syntax error\r\n");
    c.check(b"BGSAVE\r\n", b"+Background saving started\r\n");
    server.stop();
    let server = TestServer::start(dir.path());
    server.raw().check(b"GET k\r\n", b"$1\r\nv\r\n");
    server.stop();
}

/// DEBUG POPULATE creates keys as Redis names them, skips existing ones,
/// and logs them; DEBUG DIGEST is zeros when empty and the same after a
/// reload and a restart.
#[test]
fn debug_populate_and_digest() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start_with(dir.path(), |c| {
        c.set("enable-debug-command", &["yes".into()]).unwrap()
    });
    let mut c = server.raw();
    c.check(
        b"DEBUG DIGEST\r\n",
        b"+0000000000000000000000000000000000000000\r\n",
    );
    c.check(
        b"SET key:1 mine\r\nDEBUG POPULATE 3\r\nMGET key:0 key:1 key:2\r\nDBSIZE\r\n",
        b"+OK\r\n+OK\r\n*3\r\n$7\r\nvalue:0\r\n$4\r\nmine\r\n$7\r\nvalue:2\r\n:3\r\n",
    );
    c.check(
        b"DEBUG POPULATE 1 p 10\r\nSTRLEN p:0\r\nGETRANGE p:0 0 6\r\n",
        b"+OK\r\n:10\r\n$7\r\nvalue:0\r\n",
    );
    c.check(
        b"DEBUG POPULATE -1\r\n",
        b"-ERR value is out of range, must be positive\r\n",
    );
    let digest = c.roundtrip_any(b"DEBUG DIGEST\r\n");
    assert_eq!(digest.len(), 43, "{:?}", String::from_utf8_lossy(&digest));
    assert_ne!(
        &digest[..],
        b"+0000000000000000000000000000000000000000\r\n"
    );
    c.check(b"DEBUG RELOAD\r\n", b"+OK\r\n");
    assert_eq!(c.roundtrip_any(b"DEBUG DIGEST\r\n"), digest);
    let one = c.roundtrip_any(b"DEBUG DIGEST-VALUE key:0 nosuch\r\n");
    assert!(one.ends_with(b"+0000000000000000000000000000000000000000\r\n"));
    c.check(b"SET key:0 other\r\n", b"+OK\r\n");
    assert_ne!(c.roundtrip_any(b"DEBUG DIGEST\r\n"), digest);
    c.check(b"SET key:0 value:0\r\n", b"+OK\r\n");
    server.stop();
    let server = TestServer::start_with(dir.path(), |c| {
        c.set("enable-debug-command", &["yes".into()]).unwrap()
    });
    assert_eq!(server.raw().roundtrip_any(b"DEBUG DIGEST\r\n"), digest);
    server.stop();
}

/// MEMORY USAGE estimates grow with the value; its errors are Redis's.
#[test]
fn memory_usage_and_friends() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(b"MEMORY USAGE nosuch\r\n", b"$-1\r\n");
    c.check(b"SET small x\r\n", b"+OK\r\n");
    c.check(&resp(&["SET", "big", &"x".repeat(10_000)]), b"+OK\r\n");
    let usage = |c: &mut common::Raw, key: &str| -> i64 {
        let got = c.roundtrip_any(&resp(&["MEMORY", "USAGE", key, "SAMPLES", "0"]));
        String::from_utf8_lossy(&got)
            .trim_start_matches(':')
            .trim()
            .parse()
            .unwrap()
    };
    let (small, big) = (usage(&mut c, "small"), usage(&mut c, "big"));
    assert!(small > 0 && big > 10_000 && big > small, "{small} {big}");
    c.check(
        b"MEMORY USAGE small SAMPLES x\r\n",
        b"-ERR value is not an integer or out of range\r\n",
    );
    c.check(b"MEMORY USAGE small foo\r\n", b"-ERR syntax error\r\n");
    c.check(
        b"MEMORY MALLOC-STATS\r\nMEMORY PURGE\r\n",
        b"$45\r\nStats not supported for the current allocator\r\n+OK\r\n",
    );
    let stats = String::from_utf8_lossy(&c.roundtrip_any(b"MEMORY STATS\r\n")).into_owned();
    assert!(stats.contains("keys.count\r\n:2\r\n"), "{stats}");
    server.stop();
}

/// SLOWLOG hides the secrets of AUTH and HELLO ... AUTH.
#[test]
fn slowlog_redacts_passwords() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start_with(dir.path(), |c| c.requirepass = Some("pw".into()));
    let mut c = server.raw();
    c.check(
        b"AUTH pw\r\nCONFIG SET slowlog-log-slower-than 0\r\nSLOWLOG RESET\r\nAUTH default pw\r\n",
        b"+OK\r\n+OK\r\n+OK\r\n+OK\r\n",
    );
    let _ = c.roundtrip_any(b"HELLO 2 AUTH default pw\r\n");
    let got = String::from_utf8_lossy(&c.roundtrip_any(b"SLOWLOG GET 2\r\n")).into_owned();
    assert!(!got.contains("$2\r\npw\r\n"), "{got}");
    assert!(
        got.contains("*5\r\n$5\r\nHELLO\r\n$1\r\n2\r\n$4\r\nAUTH\r\n$10\r\n(redacted)\r\n$10\r\n(redacted)\r\n"),
        "{got}"
    );
    assert!(
        got.contains("*3\r\n$4\r\nAUTH\r\n$10\r\n(redacted)\r\n$10\r\n(redacted)\r\n"),
        "{got}"
    );
    server.stop();
}
