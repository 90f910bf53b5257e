//! A script running past `busy-reply-threshold`: other clients are served
//! (BUSY, or the commands allowed then) while it runs, SCRIPT KILL stops
//! one that has not written, SHUTDOWN NOSAVE stops the server under one
//! that has. Replies are Redis 7.0.15's. No sleeps: each wait polls with
//! a deadline.

mod common;

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use common::{resp, Raw, TestServer};

const BUSY: &str =
    "-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
const DEADLINE: Duration = Duration::from_secs(20);

/// Reads one reply line (without its CRLF).
fn line(c: &mut Raw) -> String {
    let mut out = Vec::new();
    let mut byte = [0u8; 1];
    while !out.ends_with(b"\r\n") {
        match c.stream.read(&mut byte) {
            Ok(1) => out.push(byte[0]),
            _ => break,
        }
    }
    out.truncate(out.len().saturating_sub(2));
    String::from_utf8_lossy(&out).into_owned()
}

fn send(c: &mut Raw, args: &[&str]) {
    c.stream.write_all(&resp(args)).unwrap();
}

fn call(c: &mut Raw, args: &[&str]) -> String {
    send(c, args);
    line(c)
}

/// Sends PING until the server answers BUSY (the script is past the
/// threshold), within the deadline.
fn wait_busy(c: &mut Raw) {
    let start = Instant::now();
    loop {
        let got = call(c, &["PING"]);
        if got == BUSY {
            return;
        }
        assert_eq!(got, "+PONG");
        assert!(start.elapsed() < DEADLINE, "the script never got busy");
    }
}

fn start(dir: &std::path::Path) -> TestServer {
    let server = TestServer::start(dir);
    let mut c = server.raw();
    c.check(
        &resp(&["CONFIG", "SET", "busy-reply-threshold", "50"]),
        b"+OK\r\n",
    );
    server
}

#[test]
fn a_busy_script_is_killed_and_the_server_serves_again() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let mut other = server.raw();
    other.check(
        &resp(&["SCRIPT", "KILL"]),
        b"-NOTBUSY No scripts in execution right now.\r\n",
    );
    let mut caller = server.raw();
    // The caller pipelines a PING after the script: answered after it.
    let mut input = resp(&["EVAL", "while true do end", "0"]);
    input.extend_from_slice(&resp(&["PING"]));
    caller.stream.write_all(&input).unwrap();
    wait_busy(&mut other);
    // A new connection is accepted and refused the same way.
    let mut late = server.raw();
    assert_eq!(call(&mut late, &["GET", "x"]), BUSY);
    assert_eq!(
        call(&mut late, &["NOSUCHCOMMAND"]),
        "-ERR unknown command 'NOSUCHCOMMAND', with args beginning with: "
    );
    assert_eq!(call(&mut late, &["SHUTDOWN"]), BUSY);
    assert_eq!(call(&mut other, &["SCRIPT", "KILL"]), "+OK");
    let killed = line(&mut caller);
    assert!(
        killed.starts_with("-ERR Script killed by user with SCRIPT KILL... script: ")
            && killed.ends_with(", on @user_script:1."),
        "{killed}"
    );
    assert_eq!(line(&mut caller), "+PONG");
    assert_eq!(call(&mut other, &["PING"]), "+PONG");
    assert_eq!(call(&mut late, &["PING"]), "+PONG");
    assert_eq!(
        call(&mut other, &["SCRIPT", "KILL"]),
        "-NOTBUSY No scripts in execution right now."
    );
    let stats = call(&mut other, &["INFO", "errorstats"]);
    assert!(stats.starts_with('$'), "{stats}");
}

#[test]
fn pcall_cannot_keep_a_killed_script_alive() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let mut other = server.raw();
    let mut caller = server.raw();
    send(
        &mut caller,
        &[
            "EVAL",
            "local f = function() while 1 do redis.call('ping') end end while 1 do pcall(f) end",
            "0",
        ],
    );
    wait_busy(&mut other);
    assert_eq!(call(&mut other, &["SCRIPT", "KILL"]), "+OK");
    let killed = line(&mut caller);
    assert!(killed.contains("killed by user"), "{killed}");
    assert_eq!(call(&mut other, &["PING"]), "+PONG");
}

#[test]
fn transactions_during_a_busy_script_are_refused_whole() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let mut other = server.raw();
    let mut tx = server.raw();
    let mut tx2 = server.raw();
    assert_eq!(call(&mut other, &["SET", "xx", "1"]), "+OK");
    // tx2 opened its transaction before the script.
    assert_eq!(call(&mut tx2, &["MULTI"]), "+OK");
    assert_eq!(call(&mut tx2, &["INCR", "xx"]), "+QUEUED");
    let mut caller = server.raw();
    send(&mut caller, &["EVAL", "while true do end", "0"]);
    wait_busy(&mut other);
    // MULTI is allowed; what it would queue is refused and spoils it.
    assert_eq!(call(&mut tx, &["MULTI"]), "+OK");
    assert_eq!(call(&mut tx, &["INCR", "xx"]), BUSY);
    // EXEC during the script aborts the transaction at once.
    assert_eq!(
        call(&mut tx2, &["EXEC"]),
        format!(
            "-EXECABORT Transaction discarded because of: {}",
            &BUSY[1..]
        )
    );
    assert_eq!(call(&mut other, &["SCRIPT", "KILL"]), "+OK");
    assert!(line(&mut caller).contains("killed by user"));
    assert_eq!(call(&mut tx, &["INCR", "xx"]), "+QUEUED");
    assert_eq!(
        call(&mut tx, &["EXEC"]),
        "-EXECABORT Transaction discarded because of previous errors."
    );
    assert_eq!(call(&mut tx, &["PING", "asdf"]), "$4");
    assert_eq!(line(&mut tx), "asdf");
    assert_eq!(call(&mut tx2, &["PING", "asdf"]), "$4");
    assert_eq!(line(&mut tx2), "asdf");
    assert_eq!(call(&mut other, &["GET", "xx"]), "$1");
    assert_eq!(line(&mut other), "1");
}

#[test]
fn a_blocked_client_stays_blocked_while_the_script_runs() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let mut other = server.raw();
    let mut blocked = server.raw();
    send(&mut blocked, &["BLPOP", "q", "0"]);
    // The script's push serves it once the script has ended.
    let mut caller = server.raw();
    send(
        &mut caller,
        &[
            "EVAL",
            "redis.call('rpush', KEYS[1], 'a') local i = 0 while i < 2e8 do i = i + 1 end return 1",
            "1",
            "q",
        ],
    );
    wait_busy(&mut other);
    // The script wrote: it cannot be killed.
    let unkillable = call(&mut other, &["SCRIPT", "KILL"]);
    assert!(
        unkillable.starts_with(
            "-UNKILLABLE Sorry the script already executed write commands against the dataset."
        ),
        "{unkillable}"
    );
    assert_eq!(line(&mut caller), ":1");
    assert_eq!(line(&mut blocked), "*2");
    assert_eq!(line(&mut blocked), "$1");
    assert_eq!(line(&mut blocked), "q");
}

#[test]
fn shutdown_nosave_stops_the_server_under_a_script_that_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let addr = server.addr;
    let mut other = server.raw();
    let mut caller = server.raw();
    send(
        &mut caller,
        &[
            "EVAL",
            "redis.call('set', KEYS[1], 'y') while true do end",
            "1",
            "x",
        ],
    );
    wait_busy(&mut other);
    let unkillable = call(&mut other, &["SCRIPT", "KILL"]);
    assert!(unkillable.starts_with("-UNKILLABLE "), "{unkillable}");
    assert_eq!(call(&mut other, &["PING"]), BUSY);
    send(&mut other, &["SHUTDOWN", "NOSAVE"]);
    assert!(other.is_closed());
    let start = Instant::now();
    while std::net::TcpStream::connect(addr).is_ok() {
        assert!(start.elapsed() < DEADLINE, "the server did not stop");
        std::thread::yield_now();
    }
    drop(server);
    // The script's write was not logged, as Redis does not propagate a
    // script it exits under.
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(&resp(&["EXISTS", "x"]), b":0\r\n");
}

#[test]
fn a_busy_function_is_killed_by_function_kill_only() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let mut other = server.raw();
    other.check(
        &resp(&[
            "FUNCTION",
            "LOAD",
            "#!lua name=test\nredis.register_function('test', function() while 1 do redis.call('ping') end end)",
        ]),
        b"$4\r\ntest\r\n",
    );
    let mut caller = server.raw();
    send(&mut caller, &["FCALL", "test", "0"]);
    let function_busy =
        "-BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.";
    let start = Instant::now();
    loop {
        let got = call(&mut other, &["PING"]);
        if got == function_busy {
            break;
        }
        assert_eq!(got, "+PONG");
        assert!(start.elapsed() < DEADLINE, "the function never got busy");
    }
    assert_eq!(call(&mut other, &["SCRIPT", "KILL"]), function_busy);
    // FUNCTION STATS names the running function and its command.
    send(&mut other, &["FUNCTION", "STATS"]);
    let mut stats = Vec::new();
    for _ in 0..11 {
        stats.push(line(&mut other));
    }
    assert_eq!(
        stats,
        [
            "*4",
            "$14",
            "running_script",
            "*6",
            "$4",
            "name",
            "$4",
            "test",
            "$7",
            "command",
            "*3"
        ]
    );
    for _ in 0..6 {
        line(&mut other);
    }
    assert_eq!(line(&mut other), "$11");
    assert_eq!(line(&mut other), "duration_ms");
    assert!(line(&mut other).starts_with(':'));
    for _ in 0..12 {
        line(&mut other);
    }
    assert_eq!(call(&mut other, &["FUNCTION", "KILL"]), "+OK");
    let killed = line(&mut caller);
    assert!(killed.contains("killed by user"), "{killed}");
    assert_eq!(call(&mut other, &["PING"]), "+PONG");
}

/// Reads lines up to and including `last`.
fn lines_until(c: &mut Raw, last: &str) -> Vec<String> {
    let mut out = Vec::new();
    loop {
        let got = line(c);
        let done = got == last || got.is_empty();
        out.push(got);
        if done {
            return out;
        }
    }
}

#[test]
fn connection_commands_are_answered_during_a_busy_script() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let mut other = server.raw();
    let mut watcher = server.raw();
    let mut caller = server.raw();
    send(&mut caller, &["EVAL", "while true do end", "0"]);
    wait_busy(&mut other);
    // WATCH and UNWATCH take effect at once, not after the script.
    assert_eq!(call(&mut watcher, &["WATCH", "w1"]), "+OK");
    assert_eq!(call(&mut watcher, &["UNWATCH"]), "+OK");
    assert_eq!(call(&mut watcher, &["WATCH", "w2"]), "+OK");
    assert_eq!(call(&mut watcher, &["MULTI"]), "+OK");
    assert_eq!(
        call(&mut watcher, &["WATCH", "w3"]),
        "-ERR WATCH inside MULTI is not allowed"
    );
    assert_eq!(call(&mut watcher, &["DISCARD"]), "+OK");
    assert_eq!(call(&mut watcher, &["WATCH", "w2"]), "+OK");
    // HELLO switches the protocol and answers its map.
    assert_eq!(call(&mut other, &["HELLO", "3"]), "%7");
    let hello = lines_until(&mut other, "*0");
    assert!(hello.contains(&"standalone".to_string()), "{hello:?}");
    assert_eq!(
        call(&mut other, &["AUTH", "secret"]),
        "-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"
    );
    assert_eq!(
        call(&mut other, &["AUTH", "nobody", "secret"]),
        "-WRONGPASS invalid username-password pair or user is disabled."
    );
    assert_eq!(call(&mut other, &["RESET"]), "+RESET");
    // Still BUSY for data commands, in RESP2 again after RESET.
    assert_eq!(call(&mut other, &["GET", "w2"]), BUSY);
    assert_eq!(call(&mut other, &["SCRIPT", "KILL"]), "+OK");
    assert!(line(&mut caller).contains("killed by user"));
    // The failed AUTH is in the users' log, and the watch holds: a change
    // of w2 after it makes the watcher's EXEC fail.
    assert_eq!(call(&mut other, &["ACL", "LOG"]), "*1");
    let mut writer = server.raw();
    assert_eq!(call(&mut writer, &["SET", "w2", "changed"]), "+OK");
    assert_eq!(call(&mut watcher, &["MULTI"]), "+OK");
    assert_eq!(call(&mut watcher, &["GET", "w2"]), "+QUEUED");
    assert_eq!(call(&mut watcher, &["EXEC"]), "*-1");
}
