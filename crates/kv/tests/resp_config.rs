//! Byte-level tests of CONFIG GET, SET, RESETSTAT, REWRITE and INFO: the
//! replies and error texts Redis 7.0 gives.

mod common;

use std::io::{BufRead, BufReader, Read, Write};

use common::{resp, Raw, TestServer};

/// Sends `args` and reads one bulk string reply (INFO's).
fn bulk(c: &mut Raw, args: &[&str]) -> String {
    c.stream.write_all(&resp(args)).expect("send");
    let mut reader = BufReader::new(&mut c.stream);
    let mut header = String::new();
    reader.read_line(&mut header).expect("header");
    let len: usize = header
        .trim_end()
        .strip_prefix('$')
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("not a bulk reply: {header:?}"));
    let mut body = vec![0u8; len + 2];
    reader.read_exact(&mut body).expect("body");
    body.truncate(len);
    String::from_utf8(body).expect("utf-8")
}

/// The value of `field` in INFO text.
fn field<'a>(info: &'a str, field: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|l| l.strip_prefix(field).and_then(|r| r.strip_prefix(':')))
}

fn pair(name: &str, value: &str) -> String {
    format!(
        "${}\r\n{name}\r\n${}\r\n{value}\r\n",
        name.len(),
        value.len()
    )
}

#[test]
fn config_get_exact_alias_pattern_and_several() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(
        &resp(&["CONFIG", "GET", "maxmemory"]),
        format!("*2\r\n{}", pair("maxmemory", "0")).as_bytes(),
    );
    // An exact name is echoed as the client wrote it.
    c.check(
        &resp(&["CONFIG", "GET", "MAXMEMORY"]),
        format!("*2\r\n{}", pair("MAXMEMORY", "0")).as_bytes(),
    );
    c.check(
        &resp(&["CONFIG", "GET", "hash-max-ziplist-entries"]),
        format!("*2\r\n{}", pair("hash-max-ziplist-entries", "512")).as_bytes(),
    );
    c.check(
        &resp(&["CONFIG", "GET", "*-max-ziplist-value"]),
        format!(
            "*4\r\n{}{}",
            pair("hash-max-ziplist-value", "64"),
            pair("zset-max-ziplist-value", "64")
        )
        .as_bytes(),
    );
    c.check(
        &resp(&["CONFIG", "GET", "hz", "timeout", "hz", "nothing-like-it"]),
        format!("*4\r\n{}{}", pair("hz", "10"), pair("timeout", "0")).as_bytes(),
    );
    c.check(&resp(&["CONFIG", "GET", "nope*"]), b"*0\r\n");
    // Hidden directives answer by name only.
    c.check(
        &resp(&["CONFIG", "GET", "key-load-delay"]),
        format!("*2\r\n{}", pair("key-load-delay", "0")).as_bytes(),
    );
    c.check(&resp(&["CONFIG", "GET", "key-load-*"]), b"*0\r\n");
    c.check(
        &resp(&["CONFIG", "GET"]),
        b"-ERR wrong number of arguments for 'config|get' command\r\n",
    );
    let _ = c.roundtrip_any(&resp(&["HELLO", "3"]));
    c.check(
        &resp(&["CONFIG", "GET", "hz"]),
        format!("%1\r\n{}", pair("hz", "10")).as_bytes(),
    );
}

#[test]
fn config_get_star_lists_every_redis_directive() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    let all =
        String::from_utf8_lossy(&c.roundtrip_any(&resp(&["CONFIG", "GET", "*"]))).into_owned();
    // Redis 7.0.15 (built with TLS) lists 192 names, aliases included;
    // Ferrite adds its own thirteen: 205 pairs.
    assert!(all.starts_with("*410\r\n"), "{}", &all[..20.min(all.len())]);
    for name in [
        "slave-read-only",
        "lua-time-limit",
        "list-max-ziplist-size",
        "log-device",
        "save",
    ] {
        assert!(all.contains(&format!("\r\n{name}\r\n")), "{name}");
    }
}

#[test]
fn config_set_is_all_or_nothing_with_redis_errors() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(
        &resp(&[
            "CONFIG",
            "SET",
            "maxmemory",
            "10mb",
            "hz",
            "20",
            "save",
            "100 10",
        ]),
        b"+OK\r\n",
    );
    c.check(
        &resp(&["CONFIG", "GET", "maxmemory", "hz", "save"]),
        format!(
            "*6\r\n{}{}{}",
            pair("maxmemory", "10485760"),
            pair("hz", "20"),
            pair("save", "100 10")
        )
        .as_bytes(),
    );
    c.check(
        &resp(&["CONFIG", "SET", "maxmemory", "1", "maxmemory-clients", "200%", "client-query-buffer-limit", "x"]),
        b"-ERR CONFIG SET failed (possibly related to argument 'maxmemory-clients') - percentage argument must be less or equal to 100\r\n",
    );
    c.check(
        &resp(&["CONFIG", "GET", "maxmemory"]),
        format!("*2\r\n{}", pair("maxmemory", "10485760")).as_bytes(),
    );
    c.check(
        &resp(&["CONFIG", "SET", "hz", "1", "nope", "1"]),
        b"-ERR Unknown option or number of arguments for CONFIG SET - 'nope'\r\n",
    );
    c.check(
        &resp(&["CONFIG", "SET", "daemonize", "no"]),
        b"-ERR CONFIG SET failed (possibly related to argument 'daemonize') - can't set immutable config\r\n",
    );
    c.check(
        &resp(&["CONFIG", "SET", "enable-debug-command", "yes"]),
        b"-ERR CONFIG SET failed (possibly related to argument 'enable-debug-command') - can't set immutable config\r\n",
    );
    c.check(
        &resp(&["CONFIG", "SET", "maxmemory", "1", "Maxmemory", "2"]),
        b"-ERR CONFIG SET failed (possibly related to argument 'Maxmemory') - duplicate parameter\r\n",
    );
    c.check(
        &resp(&["CONFIG", "SET", "slave-read-only", "maybe"]),
        b"-ERR CONFIG SET failed (possibly related to argument 'slave-read-only') - argument must be 'yes' or 'no'\r\n",
    );
    c.check(
        &resp(&["CONFIG", "SET", "dir", "/tmp"]),
        b"-ERR CONFIG SET failed (possibly related to argument 'dir') - can't set protected config\r\n",
    );
    c.check(
        &resp(&["CONFIG", "SET", "maxmemory", "1", "hz"]),
        b"-ERR syntax error\r\n",
    );
    c.check(
        &resp(&["CONFIG", "SET", "maxmemory"]),
        b"-ERR wrong number of arguments for 'config|set' command\r\n",
    );
    c.check(
        &resp(&["CONFIG", "SET", "appendfsync", "sometimes"]),
        b"-ERR CONFIG SET failed (possibly related to argument 'appendfsync') - argument(s) must be one of the following: everysec, always, no\r\n",
    );
    c.check(
        &resp(&["CONFIG", "SET", "lua-time-limit", "100"]),
        b"+OK\r\n",
    );
    c.check(
        &resp(&["CONFIG", "GET", "busy-reply-threshold"]),
        format!("*2\r\n{}", pair("busy-reply-threshold", "100")).as_bytes(),
    );
}

#[test]
fn config_rewrite_needs_a_file_and_keeps_its_comments() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(
        &resp(&["CONFIG", "REWRITE"]),
        b"-ERR The server is running without a config file\r\n",
    );
    drop(c);
    server.stop();

    let file = dir.path().join("ferrite.conf");
    std::fs::write(
        &file,
        "# my settings\nhz 15\n\n# memory\nmaxmemory 1mb\nslave-read-only yes\n",
    )
    .unwrap();
    let loaded = ferrite_kv::config::Config::load(Some(&file), &[]).unwrap();
    let server = TestServer::start_with(dir.path(), |c| {
        c.hz = loaded.hz;
        c.maxmemory_bytes = loaded.maxmemory_bytes;
        c.file = loaded.file.clone();
    });
    let mut c = server.raw();
    c.check(
        &resp(&["CONFIG", "SET", "maxmemory", "2mb", "timeout", "30"]),
        b"+OK\r\n",
    );
    c.check(&resp(&["CONFIG", "REWRITE"]), b"+OK\r\n");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        text.starts_with(
            "# my settings\nhz 15\n\n# memory\nmaxmemory 2mb\nreplica-read-only yes\n"
        ),
        "{text}"
    );
    assert!(text.contains("# Generated by CONFIG REWRITE\n"), "{text}");
    assert!(text.contains("\ntimeout 30\n"), "{text}");
    let again = ferrite_kv::config::Config::load(Some(&file), &[]).unwrap();
    assert_eq!(again.get("timeout").as_deref(), Some("30"));
    assert_eq!(again.maxmemory_bytes, 2 << 20);
}

#[test]
fn info_sections_as_redis_selects_them() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    let default = bulk(&mut c, &["INFO"]);
    let titles = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| l.starts_with("# "))
            .map(String::from)
            .collect()
    };
    assert_eq!(
        titles(&default),
        [
            "# Server",
            "# Clients",
            "# Memory",
            "# Persistence",
            "# Stats",
            "# Replication",
            "# CPU",
            "# Modules",
            "# Errorstats",
            "# Cluster",
            "# Keyspace"
        ]
    );
    assert_eq!(field(&default, "redis_version"), Some("7.0.15"));
    assert_eq!(field(&default, "cluster_enabled"), Some("0"));
    assert!(field(&default, "used_cpu_user").is_some());
    assert!(!default.contains("rejected_calls"));
    let everything = bulk(&mut c, &["INFO", "everything"]);
    assert_eq!(titles(&everything).len(), 14);
    assert_eq!(titles(&bulk(&mut c, &["INFO", "all"])).len(), 14);
    assert_eq!(
        titles(&bulk(&mut c, &["INFO", "default"])),
        titles(&default)
    );
    let two = bulk(&mut c, &["INFO", "CPU", "cluster", "sentinel"]);
    assert!(two.starts_with("# CPU\r\nused_cpu_sys:"), "{two}");
    assert!(
        two.ends_with("\r\n\r\n# Cluster\r\ncluster_enabled:0\r\n"),
        "{two}"
    );
    let cpu_all = bulk(&mut c, &["INFO", "cpu", "all"]);
    assert_eq!(cpu_all.matches("used_cpu_user_children").count(), 1);
    assert_eq!(bulk(&mut c, &["INFO", "nothing"]), "");
}

#[test]
fn commandstats_errorstats_and_resetstat() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(&resp(&["CONFIG", "RESETSTAT"]), b"+OK\r\n");
    c.check(&resp(&["SET", "a", "b"]), b"+OK\r\n");
    c.check(
        &resp(&["SET", "k"]),
        b"-ERR wrong number of arguments for 'set' command\r\n",
    );
    c.check(
        &resp(&["LPUSH", "a", "x"]),
        b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
    );
    c.check(
        &resp(&["NOSUCH"]),
        b"-ERR unknown command 'NOSUCH', with args beginning with: \r\n",
    );
    c.check(
        &resp(&["CONFIG", "GET", "hz"]),
        format!("*2\r\n{}", pair("hz", "10")).as_bytes(),
    );
    let stats = bulk(&mut c, &["INFO", "commandstats"]);
    let set = field(&stats, "cmdstat_set").expect("set counted");
    assert!(set.starts_with("calls=1,usec="), "{set}");
    assert!(set.ends_with(",rejected_calls=1,failed_calls=0"), "{set}");
    assert!(field(&stats, "cmdstat_lpush")
        .unwrap()
        .ends_with("rejected_calls=0,failed_calls=1"));
    assert!(field(&stats, "cmdstat_config|get")
        .unwrap()
        .starts_with("calls=1,"));
    let errors = bulk(&mut c, &["INFO", "errorstats"]);
    assert_eq!(
        errors,
        "# Errorstats\r\nerrorstat_ERR:count=2\r\nerrorstat_WRONGTYPE:count=1\r\n"
    );
    assert_eq!(
        field(&bulk(&mut c, &["INFO", "stats"]), "total_error_replies"),
        Some("3")
    );
    let latency = bulk(&mut c, &["INFO", "latencystats"]);
    let set = field(&latency, "latency_percentiles_usec_set").expect("set latency");
    assert!(
        set.starts_with("p50=") && set.contains(",p99=") && set.contains(",p99.9="),
        "{set}"
    );
    c.check(
        &resp(&[
            "CONFIG",
            "SET",
            "latency-tracking-info-percentiles",
            "0.0 50.0 100.0",
        ]),
        b"+OK\r\n",
    );
    c.check(
        &resp(&["CONFIG", "GET", "latency-tracking-info-percentiles"]),
        format!(
            "*2\r\n{}",
            pair("latency-tracking-info-percentiles", "0 50 100")
        )
        .as_bytes(),
    );
    let latency = bulk(&mut c, &["INFO", "latencystats"]);
    assert!(field(&latency, "latency_percentiles_usec_set")
        .unwrap()
        .contains("p0="));
    c.check(&resp(&["CONFIG", "RESETSTAT"]), b"+OK\r\n");
    assert_eq!(bulk(&mut c, &["INFO", "errorstats"]), "# Errorstats\r\n");
    let stats = bulk(&mut c, &["INFO", "commandstats"]);
    assert!(field(&stats, "cmdstat_set").is_none(), "{stats}");
    assert_eq!(
        field(&bulk(&mut c, &["INFO", "stats"]), "total_error_replies"),
        Some("0")
    );
}

#[test]
fn multi_exec_counts_each_command() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(&resp(&["CONFIG", "RESETSTAT"]), b"+OK\r\n");
    c.check(&resp(&["MULTI"]), b"+OK\r\n");
    c.check(
        &resp(&["SET"]),
        b"-ERR wrong number of arguments for 'set' command\r\n",
    );
    c.check(
        &resp(&["EXEC"]),
        b"-EXECABORT Transaction discarded because of previous errors.\r\n",
    );
    let stats = bulk(&mut c, &["INFO", "commandstats"]);
    assert!(
        field(&stats, "cmdstat_set")
            .unwrap()
            .starts_with("calls=0,"),
        "{stats}"
    );
    assert!(field(&stats, "cmdstat_set")
        .unwrap()
        .ends_with("rejected_calls=1,failed_calls=0"));
    assert!(field(&stats, "cmdstat_exec")
        .unwrap()
        .ends_with("rejected_calls=0,failed_calls=1"));
    let errors = bulk(&mut c, &["INFO", "errorstats"]);
    assert!(
        errors.contains("errorstat_EXECABORT:count=1\r\n"),
        "{errors}"
    );
}

#[test]
fn a_new_maxmemory_refuses_the_next_write() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(&resp(&["CONFIG", "RESETSTAT"]), b"+OK\r\n");
    c.check(
        &resp(&[
            "CONFIG",
            "SET",
            "maxmemory",
            "1",
            "maxmemory-policy",
            "noeviction",
        ]),
        b"+OK\r\n",
    );
    c.check(
        &resp(&["SET", "a", "b"]),
        b"-OOM command not allowed when used memory > 'maxmemory'.\r\n",
    );
    c.check(&resp(&["CONFIG", "SET", "maxmemory", "0"]), b"+OK\r\n");
    let stats = bulk(&mut c, &["INFO", "commandstats"]);
    assert!(
        field(&stats, "cmdstat_set")
            .unwrap()
            .starts_with("calls=0,"),
        "{stats}"
    );
    assert!(field(&stats, "cmdstat_set")
        .unwrap()
        .ends_with("rejected_calls=1,failed_calls=0"));
    let errors = bulk(&mut c, &["INFO", "errorstats"]);
    assert_eq!(errors, "# Errorstats\r\nerrorstat_OOM:count=1\r\n");
}

#[test]
fn config_set_port_moves_the_listener_or_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let busy_port = busy.local_addr().unwrap().port().to_string();
    c.check(
        &resp(&["CONFIG", "SET", "maxmemory", "12345", "port", &busy_port]),
        b"-ERR CONFIG SET failed (possibly related to argument 'port') - Unable to listen on this port. Check server logs.\r\n",
    );
    c.check(
        &resp(&["CONFIG", "GET", "maxmemory"]),
        format!("*2\r\n{}", pair("maxmemory", "0")).as_bytes(),
    );
    // A free port: the one `busy` had, once released.
    drop(busy);
    c.check(&resp(&["CONFIG", "SET", "port", &busy_port]), b"+OK\r\n");
    c.check(
        &resp(&["CONFIG", "GET", "port"]),
        format!("*2\r\n{}", pair("port", &busy_port)).as_bytes(),
    );
    let addr: std::net::SocketAddr = format!("127.0.0.1:{busy_port}").parse().unwrap();
    let mut moved = Raw::connect(addr);
    moved.check(&resp(&["PING"]), b"+PONG\r\n");
    // Connected clients stay.
    c.check(&resp(&["PING"]), b"+PONG\r\n");
}
