//! The end of a client's stream arriving with its last bytes. Polling is
//! edge-triggered, so when the peer's FIN comes in the same readiness
//! event as its last commands no later event reports it: the server must
//! still run those commands, answer them, and close the connection, not
//! leave it half-closed (a master that kills a replica mid-sync relies on
//! the replica seeing the close at once).

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

#[test]
fn commands_arriving_with_the_close_run_and_the_connection_goes() {
    let dir = tempfile::tempdir().expect("dir");
    let server = server(dir.path());
    // The event loop sleeps while the client sends its commands and shuts
    // its side: the loop then finds bytes and FIN in one readiness event.
    let mut sleeper = server.raw();
    sleeper
        .stream
        .write_all(&resp(&["DEBUG", "SLEEP", "0.5"]))
        .expect("send");
    std::thread::sleep(Duration::from_millis(100));
    let mut client = TcpStream::connect(server.addr).expect("connect");
    let mut input = resp(&["SET", "k1", "v1"]);
    input.extend_from_slice(&resp(&["SET", "k2", "v2"]));
    client.write_all(&input).expect("send");
    client.shutdown(Shutdown::Write).expect("shutdown");
    client
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let mut got = Vec::new();
    // Read to the end: a server that missed the FIN never closes, and the
    // read times out instead.
    let end = client.read_to_end(&mut got);
    assert!(
        end.is_ok(),
        "the server did not close the connection: {end:?}"
    );
    assert_eq!(String::from_utf8_lossy(&got), "+OK\r\n+OK\r\n");
    let mut c = server.raw();
    assert_eq!(call(&mut c, &["GET", "k2"]), "$2\r\nv2\r\n");
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
