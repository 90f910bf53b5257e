//! A master that closes the link right after sending part of a full
//! sync's payload (Redis's master does when a replica is killed mid-sync).
//! When the last bytes and the close arrive in one readiness event, the
//! replica must still see the close: it reads the payload to the end of
//! the stream, ends the load (keeping its old dataset) and reconnects,
//! instead of waiting on a half-closed link. The master is played by the
//! test; the replica's event loop sleeps while bytes and close arrive.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::time::Duration;

use common::repl::{call, eventually};
use common::{resp, TestServer};

const MASTER_ID: &str = "fedcba9876543210fedcba9876543210fedcba98";
const MARK: &str = "9876543210987654321098765432109876543210";

/// Answers the replica's handshake up to its PSYNC.
fn handshake(listener: &TcpListener) -> TcpStream {
    let (stream, _) = listener.accept().expect("replica connects");
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut link = stream;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).expect("command");
        let count: usize = line.trim_start_matches('*').trim().parse().expect("array");
        let mut name = String::new();
        for i in 0..count {
            line.clear();
            reader.read_line(&mut line).expect("length");
            let len: usize = line.trim_start_matches('$').trim().parse().expect("bulk");
            let mut arg = vec![0u8; len + 2];
            reader.read_exact(&mut arg).expect("argument");
            if i == 0 {
                name = String::from_utf8_lossy(&arg[..len]).to_ascii_uppercase();
            }
        }
        match name.as_str() {
            "PING" => link.write_all(b"+PONG\r\n").expect("PONG"),
            "REPLCONF" => link.write_all(b"+OK\r\n").expect("OK"),
            "PSYNC" => return link,
            other => panic!("unexpected command from the replica: {other}"),
        }
    }
}

fn loading(c: &mut common::Raw) -> String {
    let info = call(c, &["INFO", "persistence"]);
    info.lines()
        .find_map(|l| l.strip_prefix("loading:"))
        .unwrap_or_default()
        .trim()
        .to_string()
}

#[test]
fn a_close_arriving_with_the_payloads_last_bytes_ends_the_load() {
    let dir = tempfile::tempdir().expect("dir");
    let server = TestServer::start_with(dir.path(), |c| {
        c.set("repl-diskless-load", &["swapdb".to_string()])
            .expect("mode");
        c.set("enable-debug-command", &["yes".to_string()])
            .expect("debug");
    });
    let mut admin = server.raw();
    call(&mut admin, &["SET", "mykey", "myvalue"]);
    let master = TcpListener::bind("127.0.0.1:0").expect("fake master");
    let port = master.local_addr().expect("addr").port().to_string();
    call(&mut admin, &["REPLICAOF", "127.0.0.1", &port]);
    let mut link = handshake(&master);
    let head = format!("+FULLRESYNC {MASTER_ID} 1\r\n$EOF:{MARK}\r\nREDIS00");
    link.write_all(head.as_bytes()).expect("payload start");
    eventually("the load starts", || loading(&mut admin) == "1");

    // The replica's loop sleeps; meanwhile more payload and the close.
    let mut sleeper = server.raw();
    sleeper
        .stream
        .write_all(&resp(&["DEBUG", "SLEEP", "0.5"]))
        .expect("sleep");
    std::thread::sleep(Duration::from_millis(100));
    link.write_all(b"10").expect("more payload");
    link.shutdown(Shutdown::Both).expect("close");
    drop(link);

    eventually("the load ends", || loading(&mut admin) == "0");
    assert_eq!(call(&mut admin, &["GET", "mykey"]), "$7\r\nmyvalue\r\n");
    // It reconnects for a new sync.
    master.set_nonblocking(false).expect("blocking");
    let (_again, _) = master.accept().expect("the replica reconnects");
}
