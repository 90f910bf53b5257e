//! `bind` at run time and `bind-source-addr`, as Redis 7.0 has them: the
//! new addresses are all bound before the old listeners close, a failure
//! keeps the old ones, `-` marks an address that may be missing, `*` is
//! every IPv4 address, an empty list listens on none, and connected
//! clients stay through every change. The tests use 127.0.0.2, which
//! Linux answers on the loopback interface.

mod common;

use std::net::{SocketAddr, TcpListener, TcpStream};

use common::repl::{call, eventually, info_field};
use common::{Raw, TestServer};

const FAILED: &str = "-ERR CONFIG SET failed (possibly related to argument 'bind') - Failed to bind to specified addresses.\r\n";

fn at(ip: &str, port: u16) -> SocketAddr {
    SocketAddr::new(ip.parse().expect("ip"), port)
}

fn accepts(addr: SocketAddr) -> bool {
    match TcpStream::connect(addr) {
        Ok(_) => {
            let mut raw = Raw::connect(addr);
            call(&mut raw, &["PING"]) == "+PONG\r\n"
        }
        Err(_) => false,
    }
}

fn refuses(addr: SocketAddr) -> bool {
    TcpStream::connect(addr).is_err()
}

/// `CONFIG SET bind value` on `con`, its raw reply.
fn set_bind(con: &mut Raw, value: &str) -> String {
    call(con, &["CONFIG", "SET", "bind", value])
}

#[test]
fn rebinding_moves_the_listener_and_back_keeping_clients() {
    let dir = tempfile::tempdir().expect("dir");
    let server = TestServer::start(dir.path());
    let port = server.addr.port();
    let mut kept = server.raw();
    assert_eq!(call(&mut kept, &["SET", "k", "v"]), "+OK\r\n");

    assert_eq!(set_bind(&mut kept, "127.0.0.2"), "+OK\r\n");
    eventually("the old address closes", || refuses(at("127.0.0.1", port)));
    assert!(accepts(at("127.0.0.2", port)));
    assert_eq!(call(&mut kept, &["GET", "k"]), "$1\r\nv\r\n");
    assert_eq!(
        call(&mut kept, &["CONFIG", "GET", "bind"]),
        "*2\r\n$4\r\nbind\r\n$9\r\n127.0.0.2\r\n"
    );

    assert_eq!(set_bind(&mut kept, "127.0.0.1"), "+OK\r\n");
    eventually("the second address closes", || {
        refuses(at("127.0.0.2", port))
    });
    assert!(accepts(at("127.0.0.1", port)));
    assert_eq!(call(&mut kept, &["GET", "k"]), "$1\r\nv\r\n");
}

#[test]
fn an_address_kept_in_the_list_keeps_its_listener() {
    let dir = tempfile::tempdir().expect("dir");
    let server = TestServer::start(dir.path());
    let port = server.addr.port();
    let mut admin = server.raw();
    // 127.0.0.1 is bound already: binding it again would fail.
    assert_eq!(set_bind(&mut admin, "127.0.0.1 127.0.0.2"), "+OK\r\n");
    eventually("the new address opens", || accepts(at("127.0.0.2", port)));
    assert!(accepts(at("127.0.0.1", port)));
}

#[test]
fn a_failed_bind_keeps_the_old_listener() {
    let dir = tempfile::tempdir().expect("dir");
    let server = TestServer::start(dir.path());
    let port = server.addr.port();
    let mut admin = server.raw();
    assert_eq!(set_bind(&mut admin, "999.999.999.999"), FAILED);
    // Another socket holds 127.0.0.2 on the port: the first address of
    // the list binds, the second fails, and the first is closed again.
    let squatter = TcpListener::bind(at("127.0.0.2", port)).expect("squatter");
    assert_eq!(set_bind(&mut admin, "127.0.0.3 127.0.0.2"), FAILED);
    drop(squatter);
    assert_eq!(
        call(&mut admin, &["CONFIG", "GET", "bind"]),
        "*2\r\n$4\r\nbind\r\n$9\r\n127.0.0.1\r\n"
    );
    assert!(accepts(at("127.0.0.1", port)));
    assert!(refuses(at("127.0.0.3", port)));
    assert_eq!(call(&mut admin, &["PING"]), "+PONG\r\n");
}

#[test]
fn an_optional_address_not_on_this_machine_is_skipped() {
    let dir = tempfile::tempdir().expect("dir");
    let server = TestServer::start(dir.path());
    let port = server.addr.port();
    let mut admin = server.raw();
    // 192.0.2.1 is a documentation address no interface holds.
    assert_eq!(set_bind(&mut admin, "127.0.0.2 192.0.2.1"), FAILED);
    assert_eq!(set_bind(&mut admin, "127.0.0.2 -192.0.2.1"), "+OK\r\n");
    eventually("the old address closes", || refuses(at("127.0.0.1", port)));
    assert!(accepts(at("127.0.0.2", port)));
    assert_eq!(
        call(&mut admin, &["CONFIG", "GET", "bind"]),
        "*2\r\n$4\r\nbind\r\n$20\r\n127.0.0.2 -192.0.2.1\r\n"
    );
}

#[test]
fn an_empty_bind_listens_nowhere_and_a_star_everywhere() {
    let dir = tempfile::tempdir().expect("dir");
    let server = TestServer::start(dir.path());
    let port = server.addr.port();
    let mut admin = server.raw();
    assert_eq!(set_bind(&mut admin, ""), "+OK\r\n");
    eventually("the listener closes", || refuses(at("127.0.0.1", port)));
    assert_eq!(
        call(&mut admin, &["CONFIG", "GET", "bind"]),
        "*2\r\n$4\r\nbind\r\n$0\r\n\r\n"
    );
    assert_eq!(set_bind(&mut admin, "*"), "+OK\r\n");
    eventually("every IPv4 address opens", || {
        accepts(at("127.0.0.1", port)) && accepts(at("127.0.0.5", port))
    });
    assert_eq!(call(&mut admin, &["PING"]), "+PONG\r\n");
}

#[test]
fn the_replica_link_leaves_from_bind_source_addr() {
    let master_dir = tempfile::tempdir().expect("dir");
    let replica_dir = tempfile::tempdir().expect("dir");
    let master = TestServer::start_with(master_dir.path(), |c| c.protected_mode = false);
    let replica = TestServer::start(replica_dir.path());
    let mut r = replica.raw();
    assert_eq!(
        call(&mut r, &["CONFIG", "SET", "bind-source-addr", "127.0.0.2"]),
        "+OK\r\n"
    );
    let port = master.addr.port().to_string();
    assert_eq!(call(&mut r, &["REPLICAOF", "127.0.0.1", &port]), "+OK\r\n");
    eventually("the link is up", || {
        info_field(&mut r, "master_link_status") == "up"
    });
    let mut m = master.raw();
    let slave0 = info_field(&mut m, "slave0");
    assert!(slave0.contains("ip=127.0.0.2,"), "{slave0}");
}

/// A free port on 127.0.0.1, 127.0.0.2 and the wildcard, found by binding
/// the wildcard and letting it go.
fn free_port() -> u16 {
    let probe = TcpListener::bind("0.0.0.0:0").expect("probe");
    probe.local_addr().expect("addr").port()
}

#[test]
fn the_tls_listeners_follow_bind() {
    let dir = tempfile::tempdir().expect("dir");
    let key = rcgen::KeyPair::generate().expect("key");
    let params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).expect("params");
    let cert = params.self_signed(&key).expect("certificate");
    let (cert_file, key_file) = (dir.path().join("s.crt"), dir.path().join("s.key"));
    std::fs::write(&cert_file, cert.pem()).expect("write certificate");
    std::fs::write(&key_file, key.serialize_pem()).expect("write key");
    let tls_port = free_port();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).expect("data dir");
    let server = TestServer::start_with(&data, |c| {
        // Beside a `tls-port`, port 0 would mean no plain listener.
        c.port = free_port();
        c.tls.port = tls_port;
        c.tls.cert_file = cert_file.display().to_string();
        c.tls.key_file = key_file.display().to_string();
        c.tls.auth_clients = ferrite_kv::tls::AuthClients::No;
    });
    let mut admin = server.raw();
    assert!(TcpStream::connect(at("127.0.0.1", tls_port)).is_ok());
    assert_eq!(set_bind(&mut admin, "127.0.0.2"), "+OK\r\n");
    eventually("the TLS listener moves", || {
        refuses(at("127.0.0.1", tls_port)) && TcpStream::connect(at("127.0.0.2", tls_port)).is_ok()
    });
    assert_eq!(call(&mut admin, &["PING"]), "+PONG\r\n");
}
