//! `repl-diskless-load` on a replica: the LOADING state while a full
//! sync's payload arrives (`-LOADING` replies, INFO `loading:1`), the
//! `async_loading` state of `swapdb` with an unchanged replication ID
//! (old dataset served, REPLICAOF and `appendonly` refused), and the old
//! dataset kept when the transfer fails. The master is played by the test
//! so the payload can be held half-sent for as long as the checks take.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use common::{resp, Raw, TestServer};

const MASTER_ID: &str = "0123456789abcdef0123456789abcdef01234567";
const MARK: &str = "abcdefabcdefabcdefabcdefabcdefabcdefabcd";

/// An empty RDB payload (version 10, no checksum).
fn empty_rdb() -> Vec<u8> {
    let mut rdb = b"REDIS0010".to_vec();
    rdb.push(0xff);
    rdb.extend_from_slice(&[0; 8]);
    rdb
}

fn replica(dir: &std::path::Path, mode: &str) -> TestServer {
    let mode = mode.to_string();
    TestServer::start_with(dir, move |c| {
        c.set("repl-diskless-load", &[mode]).expect("mode");
    })
}

/// Accepts the replica's link and answers its handshake up to PSYNC;
/// returns the link and the PSYNC line's arguments.
fn handshake(listener: &TcpListener) -> (TcpStream, Vec<String>) {
    let (stream, _) = listener.accept().expect("replica connects");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut link = stream;
    loop {
        let command = read_command(&mut reader);
        let name = command.first().map(|c| c.to_ascii_uppercase());
        match name.as_deref() {
            Some("PING") => link.write_all(b"+PONG\r\n").expect("PONG"),
            Some("REPLCONF") => link.write_all(b"+OK\r\n").expect("OK"),
            Some("PSYNC") => return (link, command),
            other => panic!("unexpected command from the replica: {other:?}"),
        }
    }
}

fn read_command(reader: &mut BufReader<TcpStream>) -> Vec<String> {
    let mut line = String::new();
    reader.read_line(&mut line).expect("command");
    let count: usize = line.trim_start_matches('*').trim().parse().expect("array");
    let mut out = Vec::new();
    for _ in 0..count {
        line.clear();
        reader.read_line(&mut line).expect("length");
        let len: usize = line.trim_start_matches('$').trim().parse().expect("bulk");
        let mut arg = vec![0u8; len + 2];
        reader.read_exact(&mut arg).expect("argument");
        arg.truncate(len);
        out.push(String::from_utf8_lossy(&arg).into_owned());
    }
    out
}

/// Starts a full sync whose payload stops after its first bytes.
fn begin_full_sync(link: &mut TcpStream) {
    let head = format!("+FULLRESYNC {MASTER_ID} 1\r\n$EOF:{MARK}\r\nREDIS00");
    link.write_all(head.as_bytes()).expect("payload start");
}

/// Sends a whole full sync of an empty dataset.
fn whole_full_sync(link: &mut TcpStream) {
    let mut out = format!("+FULLRESYNC {MASTER_ID} 1\r\n$EOF:{MARK}\r\n").into_bytes();
    out.extend_from_slice(&empty_rdb());
    out.extend_from_slice(MARK.as_bytes());
    link.write_all(&out).expect("payload");
}

fn info_field(raw: &mut Raw, field: &str) -> String {
    let text = String::from_utf8_lossy(&raw.bulk(&resp(&["INFO", "all"]))).into_owned();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_default()
        .to_string()
}

/// Waits (bounded) until INFO shows `field` equal to `want`.
#[track_caller]
fn wait_info(raw: &mut Raw, field: &str, want: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got = info_field(raw, field);
        if got == want {
            return;
        }
        assert!(Instant::now() < deadline, "{field} is {got:?}, not {want}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn replicate(raw: &mut Raw, listener: &TcpListener) {
    let port = listener.local_addr().expect("addr").port().to_string();
    raw.check(&resp(&["REPLICAOF", "127.0.0.1", &port]), b"+OK\r\n");
}

#[test]
fn swapdb_with_a_new_master_refuses_commands_and_keeps_the_old_dataset_on_failure() {
    let dir = tempfile::tempdir().expect("dir");
    let server = replica(dir.path(), "swapdb");
    let mut raw = server.raw();
    raw.check(&resp(&["SET", "mykey", "myvalue"]), b"+OK\r\n");
    let master = TcpListener::bind("127.0.0.1:0").expect("fake master");
    replicate(&mut raw, &master);
    let (mut link, psync) = handshake(&master);
    assert_eq!(psync[0].to_ascii_uppercase(), "PSYNC");
    begin_full_sync(&mut link);
    wait_info(&mut raw, "loading", "1");
    assert_eq!(info_field(&mut raw, "async_loading"), "0");
    raw.check(
        &resp(&["GET", "mykey"]),
        b"-LOADING Redis is loading the dataset in memory\r\n",
    );
    // ROLE carries the `loading` flag and answers; PING does not.
    raw.check(
        &resp(&["PING"]),
        b"-LOADING Redis is loading the dataset in memory\r\n",
    );
    let role = raw.roundtrip_any(&resp(&["ROLE"]));
    assert!(role.starts_with(b"*5\r\n$5\r\nslave\r\n"), "{role:?}");
    // The master goes away mid-payload: the old dataset is back.
    drop(link);
    wait_info(&mut raw, "loading", "0");
    raw.check(&resp(&["GET", "mykey"]), b"$7\r\nmyvalue\r\n");
    raw.check(&resp(&["DBSIZE"]), b":1\r\n");
}

#[test]
fn swapdb_with_the_same_replication_id_serves_the_old_dataset() {
    let dir = tempfile::tempdir().expect("dir");
    let server = replica(dir.path(), "swapdb");
    let mut raw = server.raw();
    raw.check(
        &resp(&["CONFIG", "SET", "replica-read-only", "no"]),
        b"+OK\r\n",
    );
    let master = TcpListener::bind("127.0.0.1:0").expect("fake master");
    replicate(&mut raw, &master);
    // A first full sync gives the replica the master's history.
    let (mut link, _) = handshake(&master);
    whole_full_sync(&mut link);
    wait_info(&mut raw, "master_link_status", "up");
    assert_eq!(info_field(&mut raw, "master_replid"), MASTER_ID);
    raw.check(&resp(&["SET", "mykey", "myvalue"]), b"+OK\r\n");
    drop(link);
    // The replica asks to continue that history; this master cannot and
    // sends a full sync of the same ID: loaded asynchronously.
    let (mut link, psync) = handshake(&master);
    assert_eq!(psync.get(1).map(String::as_str), Some(MASTER_ID));
    begin_full_sync(&mut link);
    wait_info(&mut raw, "async_loading", "1");
    assert_eq!(info_field(&mut raw, "loading"), "0");
    raw.check(&resp(&["GET", "mykey"]), b"$7\r\nmyvalue\r\n");
    let loading = b"-LOADING Redis is loading the dataset in memory\r\n";
    raw.check(&resp(&["REPLICAOF", "NO", "ONE"]), loading);
    raw.check(&resp(&["CONFIG", "SET", "appendonly", "no"]), loading);
    // The rest of the payload: the new (empty) dataset replaces the old.
    let mut rest = empty_rdb().split_off(7);
    rest.extend_from_slice(MARK.as_bytes());
    link.write_all(&rest).expect("payload end");
    wait_info(&mut raw, "async_loading", "0");
    wait_info(&mut raw, "master_link_status", "up");
    raw.check(&resp(&["DBSIZE"]), b":0\r\n");
}

#[test]
fn on_empty_db_loads_from_the_socket_only_when_the_dataset_is_empty() {
    let dir = tempfile::tempdir().expect("dir");
    let server = replica(dir.path(), "on-empty-db");
    let mut raw = server.raw();
    let master = TcpListener::bind("127.0.0.1:0").expect("fake master");
    replicate(&mut raw, &master);
    let (mut link, _) = handshake(&master);
    begin_full_sync(&mut link);
    wait_info(&mut raw, "loading", "1");
    drop(link);
    wait_info(&mut raw, "loading", "0");

    // With a key, the payload is gathered while the dataset is served.
    raw.check(&resp(&["REPLICAOF", "NO", "ONE"]), b"+OK\r\n");
    raw.check(&resp(&["SET", "k", "v"]), b"+OK\r\n");
    replicate(&mut raw, &master);
    let (mut link, _) = handshake(&master);
    begin_full_sync(&mut link);
    wait_info(&mut raw, "master_link_status", "down");
    wait_info(&mut raw, "master_sync_in_progress", "1");
    assert_eq!(info_field(&mut raw, "loading"), "0");
    raw.check(&resp(&["GET", "k"]), b"$1\r\nv\r\n");
}
