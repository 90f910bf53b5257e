//! A replica running a busy script while its master's full-sync payload
//! arrives. The script lets other clients in (`server/busy.rs`), but the
//! master link's bytes must wait for the main loop, which knows they are a
//! payload: read as commands they would be a protocol error that drops
//! the link and starts the sync again. The master is played by the test,
//! so the payload's second half is sent exactly while the script runs.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use common::repl::{call, eventually, info_field};
use common::{resp, TestServer};

const MASTER_ID: &str = "89abcdef0123456789abcdef0123456789abcdef";
const MARK: &str = "0123456789012345678901234567890123456789";
const BUSY: &str =
    "-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n";

/// Reads one command of the replica's handshake.
fn read_command(reader: &mut BufReader<TcpStream>) -> Vec<String> {
    let mut line = String::new();
    reader.read_line(&mut line).expect("command");
    let count: usize = line.trim_start_matches('*').trim().parse().expect("array");
    (0..count)
        .map(|_| {
            line.clear();
            reader.read_line(&mut line).expect("length");
            let len: usize = line.trim_start_matches('$').trim().parse().expect("bulk");
            let mut arg = vec![0u8; len + 2];
            reader.read_exact(&mut arg).expect("argument");
            arg.truncate(len);
            String::from_utf8_lossy(&arg).into_owned()
        })
        .collect()
}

/// Answers the replica's handshake up to its PSYNC.
fn handshake(listener: &TcpListener) -> TcpStream {
    let (stream, _) = listener.accept().expect("replica connects");
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut link = stream;
    loop {
        let command = read_command(&mut reader);
        match command.first().map(|c| c.to_ascii_uppercase()).as_deref() {
            Some("PING") => link.write_all(b"+PONG\r\n").expect("PONG"),
            Some("REPLCONF") => link.write_all(b"+OK\r\n").expect("OK"),
            Some("PSYNC") => return link,
            other => panic!("unexpected command from the replica: {other:?}"),
        }
    }
}

#[test]
fn a_payload_arriving_during_a_busy_script_is_loaded_after_it() {
    let dir = tempfile::tempdir().expect("dir");
    let server = TestServer::start(dir.path());
    let mut admin = server.raw();
    call(&mut admin, &["CONFIG", "SET", "busy-reply-threshold", "50"]);
    let master = TcpListener::bind("127.0.0.1:0").expect("fake master");
    let port = master.local_addr().expect("addr").port().to_string();
    call(&mut admin, &["REPLICAOF", "127.0.0.1", &port]);
    let mut link = handshake(&master);
    let head = format!("+FULLRESYNC {MASTER_ID} 1\r\n$EOF:{MARK}\r\nREDIS00");
    link.write_all(head.as_bytes()).expect("payload start");

    let mut caller = server.raw();
    caller
        .stream
        .write_all(&resp(&["EVAL", "while true do end", "0"]))
        .expect("script");
    eventually("the script is busy", || call(&mut admin, &["PING"]) == BUSY);
    // The rest of the payload (an empty dataset) comes while it runs; a
    // PING answered afterwards shows the busy loop polled past its arrival.
    let mut rest = b"10\xff".to_vec();
    rest.extend_from_slice(&[0; 8]);
    rest.extend_from_slice(MARK.as_bytes());
    link.write_all(&rest).expect("payload end");
    assert_eq!(call(&mut admin, &["PING"]), BUSY);
    assert_eq!(call(&mut admin, &["PING"]), BUSY);
    call(&mut admin, &["SCRIPT", "KILL"]);

    eventually("the sync completes", || {
        info_field(&mut admin, "master_link_status") == "up"
    });
    // The same link carries the stream: nothing reconnected.
    link.write_all(&resp(&["SET", "streamed", "yes"]))
        .expect("stream");
    eventually("the streamed write applies", || {
        call(&mut admin, &["GET", "streamed"]) == "$3\r\nyes\r\n"
    });
    master.set_nonblocking(true).expect("nonblocking");
    assert!(
        master.accept().is_err(),
        "the replica reconnected: its link was dropped"
    );
    link.set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    let mut buf = [0u8; 256];
    // The replica sends acknowledgements only; the link is still open.
    assert!(!matches!(link.read(&mut buf), Ok(0)), "link closed");
}
