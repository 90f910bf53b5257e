//! What operators and monitoring tools read and set on the process: INFO's
//! changes since the last save and instantaneous rates, the latency
//! monitor's `expire-cycle` event, `oom-score-adj`.

mod common;

use std::io::Write;
use std::time::{Duration, Instant};

use common::{Raw, TestServer};

/// The value of INFO field `name`.
fn field(c: &mut Raw, name: &str) -> String {
    let info = String::from_utf8_lossy(&c.bulk(b"INFO everything\r\n")).into_owned();
    let prefix = format!("{name}:");
    info.lines()
        .find_map(|l| l.strip_prefix(&prefix).map(str::to_owned))
        .unwrap_or_else(|| panic!("no {name} in INFO"))
}

fn changes(c: &mut Raw) -> u64 {
    field(c, "rdb_changes_since_last_save").parse().unwrap()
}

#[test]
fn changes_since_last_save_count_writes_that_changed_something() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    let start = changes(&mut c);
    c.check(b"SET a 1\r\nSETBIT b 0 0\r\n", b"+OK\r\n:0\r\n");
    assert_eq!(changes(&mut c), start + 2);
    // Writes that change nothing, and reads, count nothing.
    c.check(
        b"SETBIT b 0 0\r\nDEL nosuchkey\r\nGET a\r\n",
        b":0\r\n:0\r\n$1\r\n1\r\n",
    );
    assert_eq!(changes(&mut c), start + 2);
    c.check(
        b"MULTI\r\nINCR n\r\nINCR n\r\nEXEC\r\n",
        b"+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n:1\r\n:2\r\n",
    );
    assert_eq!(changes(&mut c), start + 4);
    c.check(b"SAVE\r\n", b"+OK\r\n");
    assert_eq!(changes(&mut c), 0);
}

#[test]
fn changes_saved_by_a_rewrite_are_no_longer_counted() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(b"SET a 1\r\nSET b 2\r\n", b"+OK\r\n+OK\r\n");
    assert!(changes(&mut c) >= 2);
    c.check(
        b"BGREWRITEAOF\r\n",
        b"+Background append only file rewriting started\r\n",
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while field(&mut c, "aof_rewrite_in_progress") != "0" || field(&mut c, "aof_rewrites") == "0" {
        assert!(Instant::now() < deadline, "rewrite did not finish");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(changes(&mut c), 0);
}

#[test]
fn instantaneous_ops_rise_under_load() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    let mut load = server.raw();
    assert_eq!(field(&mut c, "instantaneous_ops_per_sec"), "0");
    // Commands keep arriving until the sampled rate shows them.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        for _ in 0..50 {
            load.check(b"PING\r\n", b"+PONG\r\n");
        }
        let ops: u64 = field(&mut c, "instantaneous_ops_per_sec").parse().unwrap();
        let input: f64 = field(&mut c, "instantaneous_input_kbps").parse().unwrap();
        if ops > 0 && input > 0.0 {
            break;
        }
        assert!(Instant::now() < deadline, "the rates stayed at 0");
    }
}

#[test]
fn a_slow_expire_cycle_is_a_latency_event() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(b"CONFIG SET latency-monitor-threshold 1\r\n", b"+OK\r\n");
    // A big set whose deletion by active expiry takes over a millisecond.
    let mut pipeline = Vec::new();
    for chunk in 0..200 {
        pipeline.extend_from_slice(b"SADD big");
        for i in 0..1000 {
            pipeline.extend_from_slice(format!(" m{chunk}-{i}").as_bytes());
        }
        pipeline.extend_from_slice(b"\r\n");
    }
    let expected: Vec<u8> = (0..200).flat_map(|_| b":1000\r\n".to_vec()).collect();
    c.check(&pipeline, &expected);
    c.check(b"PEXPIRE big 1\r\n", b":1\r\n");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let latest = c.roundtrip_any(b"LATENCY LATEST\r\n");
        if latest.windows(12).any(|w| w == b"expire-cycle") {
            break;
        }
        assert!(Instant::now() < deadline, "no expire-cycle event");
        std::thread::sleep(Duration::from_millis(20));
    }
    c.check(b"EXISTS big\r\n", b":0\r\n");
}

#[test]
fn oom_score_adj_sets_the_process_score_and_puts_it_back() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    let read = || -> i64 {
        std::fs::read_to_string("/proc/self/oom_score_adj")
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    let original = read();
    // Raising the score needs no privilege.
    let raised = (original + 1).min(1000);
    c.check(
        format!("CONFIG SET oom-score-adj-values \"{raised} {raised} {raised}\" oom-score-adj absolute\r\n").as_bytes(),
        b"+OK\r\n",
    );
    assert_eq!(read(), raised);
    c.check(
        b"CONFIG GET oom-score-adj\r\n",
        b"*2\r\n$13\r\noom-score-adj\r\n$8\r\nabsolute\r\n",
    );
    c.check(b"CONFIG SET oom-score-adj no\r\n", b"+OK\r\n");
    assert_eq!(read(), original, "restored");
}

#[test]
fn info_memory_counts_cached_scripts_and_libraries() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(b"SCRIPT FLUSH\r\n", b"+OK\r\n");
    assert_eq!(field(&mut c, "number_of_cached_scripts"), "0");
    let _ = c.roundtrip_any(b"SCRIPT LOAD \"return 1\"\r\nSCRIPT LOAD \"return 2\"\r\n");
    assert_eq!(field(&mut c, "number_of_cached_scripts"), "2");
    assert_ne!(field(&mut c, "used_memory_lua"), "0");
    c.check(b"SCRIPT FLUSH ASYNC\r\n", b"+OK\r\n");
    assert_eq!(field(&mut c, "number_of_cached_scripts"), "0");
    assert_eq!(field(&mut c, "number_of_libraries"), "0");
}

#[test]
fn a_blocked_command_released_with_an_error_counts_as_failed() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    let mut blocked = server.raw();
    let id = blocked.roundtrip_any(b"CLIENT ID\r\n");
    let id = String::from_utf8_lossy(&id[1..]).trim().to_string();
    c.check(b"CONFIG RESETSTAT\r\n", b"+OK\r\n");
    blocked.stream.write_all(b"BLPOP nosuch 0\r\n").unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while field(&mut c, "blocked_clients") != "1" {
        assert!(Instant::now() < deadline, "never blocked");
    }
    c.check(
        format!("CLIENT UNBLOCK {id} ERROR\r\n").as_bytes(),
        b":1\r\n",
    );
    blocked.check(b"", b"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n");
    assert_eq!(field(&mut c, "errorstat_UNBLOCKED"), "count=1");
    let blpop = field(&mut c, "cmdstat_blpop");
    assert!(
        blpop.starts_with("calls=1,") && blpop.ends_with("rejected_calls=0,failed_calls=1"),
        "{blpop}"
    );
}

#[test]
fn a_served_blocking_command_enters_the_slow_log_as_sent_once() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    let mut blocked = server.raw();
    c.check(b"CONFIG SET slowlog-log-slower-than 0\r\n", b"+OK\r\n");
    // The log emptied before the client blocks (not entered twice), then
    // after (entered when served, not when it blocked).
    for reset_after_blocking in [false, true] {
        if !reset_after_blocking {
            c.check(b"SLOWLOG RESET\r\n", b"+OK\r\n");
        }
        blocked.stream.write_all(b"BLPOP l 0\r\n").unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while field(&mut c, "blocked_clients") != "1" {
            assert!(Instant::now() < deadline, "never blocked");
        }
        if reset_after_blocking {
            c.check(b"SLOWLOG RESET\r\n", b"+OK\r\n");
        }
        c.check(b"LPUSH l foo\r\n", b":1\r\n");
        blocked.check(b"", b"*2\r\n$1\r\nl\r\n$3\r\nfoo\r\n");
        let log = String::from_utf8_lossy(&c.roundtrip_any(b"SLOWLOG GET 100\r\n")).to_lowercase();
        assert_eq!(log.matches("$5\r\nblpop\r\n").count(), 1, "{log}");
        assert!(
            log.contains("$5\r\nblpop\r\n$1\r\nl\r\n$1\r\n0\r\n"),
            "{log}"
        );
        assert!(!log.contains("$4\r\nlpop\r\n"), "{log}");
    }
}
