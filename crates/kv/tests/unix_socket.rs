//! The `unixsocket` listener (the same protocol as TCP, local clients,
//! Redis's addresses and flag in CLIENT LIST, the file replaced at start
//! and removed at shutdown), and CLIENT KILL closing a client at once.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use common::{resp, TestServer};

fn with_socket(dir: &Path, path: &Path, perm: &str) -> TestServer {
    let path = path.to_string_lossy().into_owned();
    TestServer::start_with(dir, |c| {
        c.set("unixsocket", &[path]).expect("unixsocket");
        c.set("unixsocketperm", &[perm.to_string()])
            .expect("unixsocketperm");
        // The CLIENT KILL test holds a transaction open with DEBUG SLEEP.
        c.set("enable-debug-command", &["yes".to_string()])
            .expect("enable-debug-command");
    })
}

/// Sends `input` and reads until the reply is `expected.len()` bytes long.
fn exchange(stream: &mut UnixStream, input: &[u8], len: usize) -> String {
    stream.write_all(input).expect("send");
    let mut got = vec![0u8; len];
    stream.read_exact(&mut got).expect("reply");
    String::from_utf8_lossy(&got).into_owned()
}

/// Reads one bulk reply (`$len\r\n...`) whole.
fn bulk(stream: &mut UnixStream, input: &[u8]) -> String {
    stream.write_all(input).expect("send");
    let mut header = Vec::new();
    let mut byte = [0u8; 1];
    while !header.ends_with(b"\r\n") {
        stream.read_exact(&mut byte).expect("header");
        header.push(byte[0]);
    }
    let len: usize = String::from_utf8_lossy(&header[1..header.len() - 2])
        .parse()
        .expect("bulk length");
    let mut body = vec![0u8; len + 2];
    stream.read_exact(&mut body).expect("body");
    body.truncate(len);
    String::from_utf8_lossy(&body).into_owned()
}

fn connect(path: &Path) -> UnixStream {
    let stream = UnixStream::connect(path).expect("connect to the Unix socket");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    stream
}

#[test]
fn unix_socket_serves_the_same_dataset_as_tcp() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("ferrite.sock");
    let server = with_socket(dir.path(), &path, "700");
    let mode = std::fs::metadata(&path).expect("socket file").permissions();
    assert_eq!(mode.mode() & 0o777, 0o700, "unixsocketperm applies");

    let mut unix = connect(&path);
    assert_eq!(exchange(&mut unix, &resp(&["PING"]), 7), "+PONG\r\n");
    assert_eq!(exchange(&mut unix, &resp(&["SET", "k", "v"]), 5), "+OK\r\n");
    let mut tcp = server.raw();
    tcp.check(&resp(&["GET", "k"]), b"$1\r\nv\r\n");
    tcp.check(&resp(&["SET", "k", "w"]), b"+OK\r\n");
    assert_eq!(exchange(&mut unix, &resp(&["GET", "k"]), 7), "$1\r\nw\r\n");

    // Redis's names for both ends of a Unix socket client, and its flag.
    let list = bulk(&mut unix, &resp(&["CLIENT", "LIST"]));
    let mine = list
        .lines()
        .find(|l| l.contains("cmd=client|list"))
        .expect("own line");
    assert!(
        mine.contains(" addr=/unixsocket:0 laddr=/unixsocket:0 "),
        "{mine}"
    );
    assert!(mine.contains(" flags=U "), "{mine}");
    let tcp_line = list.lines().find(|l| !l.contains("cmd=client|list"));
    assert!(tcp_line.is_some_and(|l| l.contains(" flags=N ")), "{list}");
    drop(unix);
    server.stop();
    assert!(!path.exists(), "the socket file is removed at shutdown");
}

#[test]
fn a_file_left_at_the_path_is_replaced() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("left.sock");
    std::fs::write(&path, b"stale").expect("stale file");
    let server = with_socket(dir.path(), &path, "0");
    let mut unix = connect(&path);
    assert_eq!(exchange(&mut unix, &resp(&["PING"]), 7), "+PONG\r\n");
    server.stop();
}

#[test]
fn a_path_that_cannot_be_bound_stops_the_start() {
    let dir = tempfile::tempdir().expect("dir");
    let mut config = ferrite_kv::config::Config {
        port: 0,
        dir: dir.path().to_path_buf(),
        ..ferrite_kv::config::Config::default()
    };
    let path = dir.path().join("no-such-dir").join("s.sock");
    config
        .set("unixsocket", &[path.to_string_lossy().into_owned()])
        .expect("unixsocket");
    let err = ferrite_kv::Server::bind(config).expect_err("bind must fail");
    assert!(err.to_string().contains("s.sock"), "{err}");
}

#[test]
fn client_kill_inside_exec_closes_the_victim_before_exec_ends() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("k.sock");
    let server = with_socket(dir.path(), &path, "0");
    let mut victim = connect(&path);
    let id = exchange(&mut victim, &resp(&["CLIENT", "ID"]), 4);
    let id = id.trim_start_matches(':').trim_end().to_string();

    let mut killer = server.raw();
    killer.check(&resp(&["MULTI"]), b"+OK\r\n");
    killer.check(&resp(&["CLIENT", "KILL", "ID", &id]), b"+QUEUED\r\n");
    killer.check(&resp(&["DEBUG", "SLEEP", "2"]), b"+QUEUED\r\n");
    killer.stream.write_all(&resp(&["EXEC"])).expect("EXEC");

    // The victim sees its connection end while the sleep still runs:
    // the EXEC reply must not have arrived yet.
    let mut byte = [0u8; 1];
    let seen = victim.read(&mut byte);
    assert!(
        matches!(seen, Ok(0)) || seen.is_err(),
        "killed client still open"
    );
    killer.stream.set_nonblocking(true).expect("nonblocking");
    let early = killer.stream.read(&mut byte);
    assert!(
        matches!(&early, Err(e) if e.kind() == ErrorKind::WouldBlock),
        "EXEC answered before the victim saw its connection closed: {early:?}"
    );
    killer.stream.set_nonblocking(false).expect("blocking");
    killer.check(b"", b"*2\r\n:1\r\n+OK\r\n");
}

#[test]
fn client_kill_takes_effect_before_the_next_pipelined_command() {
    let dir = tempfile::tempdir().expect("dir");
    let server = TestServer::start(dir.path());
    let mut victim = server.raw();
    victim.check(&resp(&["CLIENT", "SETNAME", "victim"]), b"+OK\r\n");
    let mut killer = server.raw();
    let mut pipeline = resp(&["CLIENT", "KILL", "SKIPME", "yes", "TYPE", "normal"]);
    pipeline.extend_from_slice(&resp(&["CLIENT", "LIST"]));
    let reply = killer.roundtrip_any(&pipeline);
    let text = String::from_utf8_lossy(&reply);
    assert!(text.starts_with(":1\r\n"), "{text}");
    assert!(
        !text.contains("name=victim"),
        "killed client listed: {text}"
    );
    assert!(victim.is_closed());
}
