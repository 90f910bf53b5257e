//! Byte-level protocol tests for transactions, connection and server
//! commands, and what redis-cli and redis-benchmark send at connect.

mod common;

use std::io::Write;

use common::TestServer;

#[test]
fn transactions() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(
        b"MULTI\r\nSET a 1\r\nINCR a\r\nEXEC\r\n",
        b"+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n+OK\r\n:2\r\n",
    );
    c.check(
        b"EXEC\r\nDISCARD\r\n",
        b"-ERR EXEC without MULTI\r\n-ERR DISCARD without MULTI\r\n",
    );
    c.check(
        b"MULTI\r\nMULTI\r\n",
        b"+OK\r\n-ERR MULTI calls can not be nested\r\n",
    );
    c.check(b"GET\r\nEXEC\r\n", b"-ERR wrong number of arguments for 'get' command\r\n-EXECABORT Transaction discarded because of previous errors.\r\n");
    c.check(b"MULTI\r\nSET a x\r\nINCR a\r\nEXEC\r\n", b"+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n+OK\r\n-ERR value is not an integer or out of range\r\n");
    c.check(
        b"MULTI\r\nSET b 1\r\nDISCARD\r\nEXISTS b\r\n",
        b"+OK\r\n+QUEUED\r\n+OK\r\n:0\r\n",
    );
    c.check(
        b"WATCH w\r\nMULTI\r\nSET w 1\r\nEXEC\r\n",
        b"+OK\r\n+OK\r\n+QUEUED\r\n*1\r\n+OK\r\n",
    );
    c.check(b"WATCH w\r\n", b"+OK\r\n");
    server.raw().check(b"SET w 2\r\n", b"+OK\r\n");
    c.check(
        b"MULTI\r\nSET w 3\r\nEXEC\r\nGET w\r\n",
        b"+OK\r\n+QUEUED\r\n*-1\r\n$1\r\n2\r\n",
    );
    c.check(
        b"MULTI\r\nWATCH x\r\nDISCARD\r\n",
        b"+OK\r\n-ERR WATCH inside MULTI is not allowed\r\n+OK\r\n",
    );
    c.check(b"WATCH x\r\nUNWATCH\r\n", b"+OK\r\n+OK\r\n");
}

#[test]
fn connection_commands() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(b"PING hi\r\nECHO x\r\n", b"$2\r\nhi\r\n$1\r\nx\r\n");
    c.check(
        b"SELECT 1\r\nSET k one\r\nSELECT 0\r\nGET k\r\n",
        b"+OK\r\n+OK\r\n+OK\r\n$-1\r\n",
    );
    c.check(
        b"SELECT 16\r\nSELECT x\r\n",
        b"-ERR DB index is out of range\r\n-ERR value is not an integer or out of range\r\n",
    );
    c.check(b"SWAPDB 0 1\r\nGET k\r\n", b"+OK\r\n$3\r\none\r\n");
    c.check(b"AUTH pw\r\n", b"-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?\r\n");
    c.check(
        b"CLIENT SETNAME me\r\nCLIENT GETNAME\r\n",
        b"+OK\r\n$2\r\nme\r\n",
    );
    c.check(
        b"CLIENT SETNAME \"a b\"\r\n",
        b"-ERR Client names cannot contain spaces, newlines or special characters.\r\n",
    );
    c.check(b"CLIENT ID\r\n", b":1\r\n");
    // CLIENT SETINFO came with Redis 7.2: 7.0 does not know it.
    c.check(
        b"CLIENT SETINFO LIB-NAME redis-rs\r\n",
        b"-ERR unknown subcommand 'SETINFO'. Try CLIENT HELP.\r\n",
    );
    c.check(
        b"CLIENT NOPE\r\n",
        b"-ERR unknown subcommand 'NOPE'. Try CLIENT HELP.\r\n",
    );
    let list = c.roundtrip_any(b"CLIENT LIST\r\n");
    assert!(String::from_utf8_lossy(&list).contains("id=1 "), "{list:?}");
    c.check(b"HELLO 4\r\n", b"-NOPROTO unsupported protocol version\r\n");
    let hello = c.roundtrip_any(b"HELLO 3\r\n");
    assert!(
        hello.starts_with(b"%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n"),
        "{hello:?}"
    );
    c.check(b"GET nope\r\n", b"_\r\n");
    let _ = c.roundtrip_any(b"HELLO 2\r\n");
    c.check(b"GET nope\r\n", b"$-1\r\n");
    c.check(b"QUIT\r\n", b"+OK\r\n");
    assert!(c.is_closed());
}

/// The line of CLIENT LIST for client `id`, as `field=value` pairs.
fn client_fields(list: &[u8], id: u64) -> Vec<(String, String)> {
    let text = String::from_utf8_lossy(list);
    let line = text
        .lines()
        .find(|l| l.starts_with(&format!("id={id} ")))
        .unwrap_or_else(|| panic!("no client {id} in {text}"));
    line.split(' ')
        .filter_map(|f| f.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn field(fields: &[(String, String)], name: &str) -> usize {
    text_field(fields, name)
        .parse()
        .unwrap_or_else(|_| panic!("no numeric {name} in {fields:?}"))
}

fn text_field(fields: &[(String, String)], name: &str) -> String {
    fields
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| panic!("no {name} in {fields:?}"))
}

/// CLIENT LIST shows each connection's query and reply buffers, as Redis
/// does: a command half received sits in `qbuf` until its end arrives.
#[test]
fn client_list_shows_each_connections_buffers() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut a = server.raw();
    a.check(b"CLIENT ID\r\n", b":1\r\n");
    let mut b = server.raw();
    let partial = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$10\r\nabc";
    a.stream.write_all(partial).unwrap();
    // The server reads A's bytes when it gets to them: ask until it has.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let seen = loop {
        let fields = client_fields(&b.roundtrip_any(b"CLIENT LIST\r\n"), 1);
        if field(&fields, "qbuf") != 0 || std::time::Instant::now() > deadline {
            break fields;
        }
    };
    assert_eq!(field(&seen, "qbuf"), partial.len(), "{seen:?}");
    assert!(field(&seen, "omem") > 0, "A got a reply before: {seen:?}");
    // The buffers and the connection's fixed cost (`client_memory.rs`).
    assert_eq!(
        field(&seen, "tot-mem"),
        field(&seen, "qbuf")
            + field(&seen, "qbuf-free")
            + field(&seen, "omem")
            + ferrite_kv::client_memory::CONN_BASE_BYTES as usize
    );
    a.check(b"defghij\r\n", b"+OK\r\n");
    let after = client_fields(&b.roundtrip_any(b"CLIENT LIST\r\n"), 1);
    assert_eq!(field(&after, "qbuf"), 0, "{after:?}");
    assert_eq!(field(&after, "obl"), 0, "{after:?}");
    server.stop();
}

/// CLIENT LIST's `cmd` is each connection's last command (a container
/// command with its subcommand) and `idle` the seconds since it last
/// talked to the server.
#[test]
fn client_list_shows_the_last_command_and_idle_time() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut a = server.raw();
    let mut b = server.raw();
    let fresh = client_fields(&b.roundtrip_any(b"CLIENT LIST\r\n"), 1);
    assert_eq!(text_field(&fresh, "cmd"), "NULL", "{fresh:?}");
    let own = client_fields(&b.roundtrip_any(b"CLIENT LIST\r\n"), 2);
    assert_eq!(text_field(&own, "cmd"), "client|list", "{own:?}");
    assert_eq!(field(&own, "idle"), 0);
    a.check(b"SET k v\r\n", b"+OK\r\n");
    let after_set = client_fields(&b.roundtrip_any(b"CLIENT LIST\r\n"), 1);
    assert_eq!(text_field(&after_set, "cmd"), "set", "{after_set:?}");
    // Idle time counts whole seconds: ask until one has passed.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let idle = loop {
        let fields = client_fields(&b.roundtrip_any(b"CLIENT LIST\r\n"), 1);
        if field(&fields, "idle") >= 1 || std::time::Instant::now() > deadline {
            break fields;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(field(&idle, "idle") >= 1, "{idle:?}");
    a.check(b"GET k\r\n", b"$1\r\nv\r\n");
    let active = client_fields(&b.roundtrip_any(b"CLIENT LIST\r\n"), 1);
    assert_eq!(text_field(&active, "cmd"), "get", "{active:?}");
    assert_eq!(field(&active, "idle"), 0, "{active:?}");
    assert_eq!(text_field(&active, "multi"), "-1", "{active:?}");
    assert_eq!(text_field(&active, "flags"), "N", "{active:?}");
    a.check(
        b"MULTI\r\nSET k w\r\nINCR n\r\n",
        b"+OK\r\n+QUEUED\r\n+QUEUED\r\n",
    );
    let queued = client_fields(&b.roundtrip_any(b"CLIENT LIST\r\n"), 1);
    assert_eq!(field(&queued, "multi"), 2, "{queued:?}");
    assert_eq!(text_field(&queued, "cmd"), "incr", "{queued:?}");
    assert_eq!(text_field(&queued, "flags"), "x", "{queued:?}");
    a.check(b"EXEC\r\n", b"*2\r\n+OK\r\n:1\r\n");
    let done = client_fields(&b.roundtrip_any(b"CLIENT LIST\r\n"), 1);
    assert_eq!(text_field(&done, "multi"), "-1", "{done:?}");
    assert_eq!(text_field(&done, "cmd"), "exec", "{done:?}");
    server.stop();
}

#[test]
fn authentication() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start_with(dir.path(), |c| c.requirepass = Some("s3cret".into()));
    let mut c = server.raw();
    c.check(b"GET a\r\n", b"-NOAUTH Authentication required.\r\n");
    c.check(
        b"AUTH wrong\r\n",
        b"-WRONGPASS invalid username-password pair or user is disabled.\r\n",
    );
    c.check(b"AUTH s3cret\r\nSET a 1\r\n", b"+OK\r\n+OK\r\n");
    let mut c = server.raw();
    let hello = c.roundtrip_any(b"HELLO 3 AUTH default s3cret\r\n");
    assert!(hello.starts_with(b"%7\r\n"), "{hello:?}");
    c.check(b"GET a\r\n", b"$1\r\n1\r\n");
    let mut c = server.raw();
    c.check(
        b"*20\r\n",
        b"-ERR Protocol error: unauthenticated multibulk length\r\n",
    );
}

#[test]
fn server_commands() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    // What redis-benchmark asks at start.
    c.check(
        b"CONFIG GET save\r\n",
        b"*2\r\n$4\r\nsave\r\n$23\r\n3600 1 300 100 60 10000\r\n",
    );
    c.check(
        b"CONFIG GET appendonly\r\n",
        b"*2\r\n$10\r\nappendonly\r\n$3\r\nyes\r\n",
    );
    c.check(
        b"CONFIG SET maxmemory 100mb\r\nCONFIG GET maxmemory\r\n",
        b"+OK\r\n*2\r\n$9\r\nmaxmemory\r\n$9\r\n104857600\r\n",
    );
    c.check(
        b"CONFIG SET nope 1\r\n",
        b"-ERR Unknown option or number of arguments for CONFIG SET - 'nope'\r\n",
    );
    c.check(b"CONFIG SET log-device wbuf\r\n", b"-ERR CONFIG SET failed (possibly related to argument 'log-device') - Ferrite sets this directive only at start-up\r\n");
    c.check(
        b"CONFIG RESETSTAT\r\nCONFIG NOPE\r\n",
        b"+OK\r\n-ERR unknown subcommand 'NOPE'. Try CONFIG HELP.\r\n",
    );
    // COMMAND COUNT counts the top-level commands; COMMAND LIST also
    // names the subcommands (`config|get`).
    let count = c.roundtrip_any(b"COMMAND COUNT\r\n");
    let count: usize = std::str::from_utf8(&count[1..count.len() - 2])
        .ok()
        .and_then(|t| t.parse().ok())
        .expect("an integer");
    let list = c.roundtrip_any(b"COMMAND LIST\r\n");
    let names: Vec<&[u8]> = list
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty() && !l.starts_with(b"$") && !l.starts_with(b"*"))
        .collect();
    let top = names.iter().filter(|n| !n.contains(&b'|')).count();
    assert_eq!(count, top, "COMMAND COUNT and COMMAND LIST agree");
    assert!(count > 150, "{count} commands");
    let info = c.roundtrip_any(b"COMMAND INFO get\r\n");
    assert!(
        info.starts_with(b"*1\r\n*10\r\n$3\r\nget\r\n:2\r\n"),
        "{info:?}"
    );
    let docs = c.roundtrip_any(b"COMMAND DOCS get\r\n");
    assert!(
        docs.starts_with(b"*2\r\n$3\r\nget\r\n*6\r\n$7\r\nsummary\r\n"),
        "{docs:?}"
    );
    c.check(
        b"SET a 1\r\nDBSIZE\r\nFLUSHDB\r\nDBSIZE\r\n",
        b"+OK\r\n:1\r\n+OK\r\n:0\r\n",
    );
    c.check(
        b"SET a 1\r\nSELECT 2\r\nSET b 2\r\nFLUSHALL\r\nDBSIZE\r\nSELECT 0\r\nDBSIZE\r\n",
        b"+OK\r\n+OK\r\n+OK\r\n+OK\r\n:0\r\n+OK\r\n:0\r\n",
    );
    let time = c.roundtrip_any(b"TIME\r\n");
    assert!(time.starts_with(b"*2\r\n$10\r\n"), "{time:?}");
    let info = String::from_utf8_lossy(&c.roundtrip_any(b"INFO persistence\r\n")).into_owned();
    for field in [
        "aof_enabled:1",
        "aof_last_write_status:ok",
        "aof_current_size:",
        "aof_delayed_fsync:",
        "ferrite_log_device:file",
        "ferrite_log_commits:",
        "ferrite_log_mean_batch:",
        "ferrite_log_postponed_writes:",
    ] {
        assert!(info.contains(field), "missing {field} in {info}");
    }
    let all = String::from_utf8_lossy(&c.roundtrip_any(b"INFO\r\n")).into_owned();
    for section in [
        "# Server",
        "# Clients",
        "# Memory",
        "# Persistence",
        "# Stats",
        "# Keyspace",
    ] {
        assert!(all.contains(section), "missing {section}");
    }
    c.check(
        b"BGREWRITEAOF\r\n",
        b"+Background append only file rewriting started\r\n",
    );
}

#[test]
fn maxmemory_refuses_writes_with_oom() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start_with(dir.path(), |c| c.maxmemory_bytes = 1);
    let mut c = server.raw();
    // The memory figure refreshes on the timer; wait for one tick.
    std::thread::sleep(std::time::Duration::from_millis(250));
    c.check(
        b"SET a 1\r\n",
        b"-OOM command not allowed when used memory > 'maxmemory'.\r\n",
    );
    c.check(b"GET a\r\nDEL a\r\n", b"$-1\r\n:0\r\n");
}

#[test]
fn shutdown_command_stops_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(b"SET a 1\r\n", b"+OK\r\n");
    let _ = std::io::Write::write_all(&mut c.stream, b"SHUTDOWN\r\n");
    assert!(c.is_closed());
    server.stop();
    let server = TestServer::start(dir.path());
    server.raw().check(b"GET a\r\n", b"$1\r\n1\r\n");
}

/// A pipeline larger than one read event's fair share (16 reads of 64 KiB)
/// sent at once, then nothing until the replies: with edge-triggered
/// polling no new event comes, so the server must go back to the socket
/// itself (the rewrite benchmark's 1 KiB fill stalled here).
#[test]
fn a_pipeline_beyond_the_fair_share_is_read_to_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    let value = "v".repeat(1024);
    let commands = 2000;
    let mut input = Vec::new();
    for i in 0..commands {
        input.extend_from_slice(
            format!("*3\r\n$3\r\nSET\r\n$8\r\nkey:{i:04}\r\n$1024\r\n{value}\r\n").as_bytes(),
        );
    }
    assert!(input.len() > (1 << 20) * 2);
    // Whether the whole pipeline is in the socket when the server stops at
    // its fair share depends on timing, so several rounds make it likely.
    let replies = "+OK\r\n".repeat(commands);
    for _ in 0..20 {
        c.check(&input, replies.as_bytes());
    }
    c.check(b"DBSIZE\r\n", format!(":{commands}\r\n").as_bytes());
}
