//! The end of a client's stream read in the same call as its last
//! bytes: reading full chunks, the server can take the last bytes and the
//! end together. Those bytes are commands to run and answer before the
//! connection closes, not to drop with it.

mod common;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::Duration;

use common::repl::{call, eventually};
use common::{resp, TestServer};

fn server(dir: &std::path::Path) -> TestServer {
    TestServer::start_with(dir, |c| {
        c.set("enable-debug-command", &["yes".to_string()])
            .expect("enable-debug-command");
    })
}

fn connected_clients(server: &TestServer) -> usize {
    let mut c = server.raw();
    let info = call(&mut c, &["INFO", "clients"]);
    info.lines()
        .find_map(|l| l.strip_prefix("connected_clients:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("connected_clients")
}

/// One SET whose encoding is exactly `total` bytes long.
fn set_of_length(total: usize) -> (Vec<u8>, usize) {
    let mut len = total;
    loop {
        let header = format!("*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n${len}\r\n");
        let whole = header.len() + len + 2;
        if whole == total {
            let mut out = header.into_bytes();
            out.extend(std::iter::repeat_n(b'x', len));
            out.extend_from_slice(b"\r\n");
            return (out, len);
        }
        len -= whole - total;
    }
}

#[test]
fn a_command_read_with_the_end_of_the_stream_runs_and_is_answered() {
    let dir = tempfile::tempdir().expect("dir");
    let server = server(dir.path());
    // The event loop sleeps while the client sends one read chunk's worth
    // (64 KiB) and shuts its side: the server then reads a full chunk and
    // the end of the stream in one call.
    let mut sleeper = server.raw();
    sleeper
        .stream
        .write_all(&resp(&["DEBUG", "SLEEP", "0.5"]))
        .expect("send");
    std::thread::sleep(Duration::from_millis(100));
    let mut client = TcpStream::connect(server.addr).expect("connect");
    let (input, len) = set_of_length(64 * 1024);
    client.write_all(&input).expect("send");
    client.shutdown(Shutdown::Write).expect("shutdown");
    client
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let mut got = Vec::new();
    let end = client.read_to_end(&mut got);
    assert!(
        end.is_ok(),
        "the server did not close the connection: {end:?}"
    );
    assert_eq!(String::from_utf8_lossy(&got), "+OK\r\n");
    let mut c = server.raw();
    assert_eq!(call(&mut c, &["STRLEN", "big"]), format!(":{len}\r\n"));
    drop(sleeper);
    eventually("only the checking clients left", || {
        connected_clients(&server) <= 2
    });
}

#[test]
fn a_client_closing_while_idle_is_released() {
    let dir = tempfile::tempdir().expect("dir");
    let server = server(dir.path());
    let before = connected_clients(&server);
    let mut client = TcpStream::connect(server.addr).expect("connect");
    client.write_all(&resp(&["PING"])).expect("send");
    let mut pong = [0u8; 7];
    client.read_exact(&mut pong).expect("pong");
    assert_eq!(&pong, b"+PONG\r\n");
    drop(client);
    eventually("the closed client released", || {
        connected_clients(&server) <= before
    });
}
