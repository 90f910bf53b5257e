//! TLS: a server with a plain and a TLS port, certificates made by the
//! test (rcgen), and rustls clients. Covers RESP2 and RESP3 over TLS,
//! mutual TLS (required, optional, refused), protocol limits, a garbage
//! handshake, a half-open handshake and a client that never reads (none
//! of which may stall a plain client), certificate reload by CONFIG SET,
//! and `timeout` closing idle and half-open clients.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ferrite_kv::config::{AppendFsync, Config, LogDevice};
use ferrite_kv::tls::AuthClients;
use ferrite_kv::{Server, ShutdownHandle};
use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};

const WAIT: Duration = Duration::from_secs(10);

/// A CA and what it signed, written to files in a directory.
struct Pki {
    dir: PathBuf,
    ca: rcgen::Certificate,
    ca_key: KeyPair,
}

/// A certificate and its key, as files and in memory.
struct Leaf {
    cert: PathBuf,
    key: PathBuf,
    der: CertificateDer<'static>,
    key_der: PrivateKeyDer<'static>,
}

impl Pki {
    fn new(dir: &Path, name: &str) -> Pki {
        let ca_key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, format!("{name} CA"));
        let ca = params.self_signed(&ca_key).unwrap();
        let dir = dir.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("ca.crt"), ca.pem()).unwrap();
        Pki { dir, ca, ca_key }
    }

    fn ca_file(&self) -> PathBuf {
        self.dir.join("ca.crt")
    }

    fn leaf(&self, name: &str, client: bool) -> Leaf {
        let key = KeyPair::generate().unwrap();
        let mut params =
            CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.extended_key_usages = vec![if client {
            ExtendedKeyUsagePurpose::ClientAuth
        } else {
            ExtendedKeyUsagePurpose::ServerAuth
        }];
        let cert = params.signed_by(&key, &self.ca, &self.ca_key).unwrap();
        let (cert_path, key_path) = (
            self.dir.join(format!("{name}.crt")),
            self.dir.join(format!("{name}.key")),
        );
        std::fs::write(&cert_path, cert.pem()).unwrap();
        std::fs::write(&key_path, key.serialize_pem()).unwrap();
        Leaf {
            cert: cert_path,
            key: key_path,
            der: cert.der().clone(),
            key_der: PrivateKeyDer::try_from(key.serialize_der()).unwrap(),
        }
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A server with a plain and a TLS port.
struct TlsServer {
    plain: SocketAddr,
    tls: SocketAddr,
    handle: ShutdownHandle,
    thread: Option<JoinHandle<ferrite_kv::Result<()>>>,
}

impl TlsServer {
    fn start(dir: &Path, server: &Leaf, ca: &Path, tweak: impl FnOnce(&mut Config)) -> TlsServer {
        let mut config = Config {
            port: free_port(),
            dir: dir.join("data"),
            appendfsync: AppendFsync::Always,
            log_device: LogDevice::File,
            ..Config::default()
        };
        config.tls.port = free_port();
        config.tls.cert_file = server.cert.display().to_string();
        config.tls.key_file = server.key.display().to_string();
        config.tls.ca_cert_file = ca.display().to_string();
        tweak(&mut config);
        let server = Server::bind(config).expect("server starts");
        let plain = server.local_addr().expect("plain port");
        let tls = server.tls_local_addr().expect("TLS port");
        let handle = server.shutdown_handle();
        let thread = Some(std::thread::spawn(move || server.run()));
        TlsServer {
            plain,
            tls,
            handle,
            thread,
        }
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        self.handle.shutdown();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn client_config(ca: &Path, identity: Option<&Leaf>) -> Arc<ClientConfig> {
    client_config_versions(ca, identity, rustls::DEFAULT_VERSIONS)
}

fn client_config_versions(
    ca: &Path,
    identity: Option<&Leaf>,
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> Arc<ClientConfig> {
    use rustls::pki_types::pem::PemObject;
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    let builder =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_protocol_versions(versions)
            .unwrap()
            .with_root_certificates(roots);
    Arc::new(match identity {
        Some(leaf) => builder
            .with_client_auth_cert(vec![leaf.der.clone()], leaf.key_der.clone_key())
            .unwrap(),
        None => builder.with_no_client_auth(),
    })
}

type Tls = StreamOwned<ClientConnection, TcpStream>;

fn connect(addr: SocketAddr, config: &Arc<ClientConfig>) -> Tls {
    let tcp = TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(WAIT)).unwrap();
    let name = ServerName::try_from("localhost").unwrap();
    let conn = ClientConnection::new(Arc::clone(config), name).unwrap();
    StreamOwned::new(conn, tcp)
}

/// Sends `cmd` as a RESP array.
fn send(stream: &mut impl Write, cmd: &[&str]) -> std::io::Result<()> {
    let mut out = format!("*{}\r\n", cmd.len()).into_bytes();
    for arg in cmd {
        out.extend_from_slice(format!("${}\r\n{arg}\r\n", arg.len()).as_bytes());
    }
    stream.write_all(&out)?;
    stream.flush()
}

/// Reads exactly `expected.len()` bytes and checks them.
fn expect(stream: &mut impl Read, expected: &[u8]) {
    let mut got = vec![0; expected.len()];
    stream.read_exact(&mut got).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(expected)
    );
}

fn call(stream: &mut (impl Read + Write), cmd: &[&str], reply: &[u8]) {
    send(stream, cmd).unwrap();
    expect(stream, reply);
}

/// Reads until the bytes read end with `tail`.
fn read_until(stream: &mut impl Read, tail: &[u8]) -> Vec<u8> {
    let mut got = Vec::new();
    let mut byte = [0u8; 1];
    while !got.ends_with(tail) {
        stream.read_exact(&mut byte).unwrap();
        got.push(byte[0]);
    }
    got
}

/// Whether a full handshake and a PING succeed.
fn handshake_ok(addr: SocketAddr, config: &Arc<ClientConfig>) -> bool {
    let mut tls = connect(addr, config);
    if send(&mut tls, &["PING"]).is_err() {
        return false;
    }
    let mut got = [0u8; 7];
    tls.read_exact(&mut got).is_ok() && &got == b"+PONG\r\n"
}

fn plain(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(WAIT)).unwrap();
    s
}

/// `connected_clients` from INFO over `conn`.
fn connected_clients(conn: &mut TcpStream) -> usize {
    send(conn, &["INFO", "clients"]).unwrap();
    let text = String::from_utf8(read_until(conn, b"\r\n\r\n")).unwrap();
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("connected_clients:"))
        .expect("connected_clients in INFO");
    line.trim().parse().unwrap()
}

/// Waits until `connected_clients` is `n`, asking every 20 ms.
fn wait_clients(conn: &mut TcpStream, n: usize) {
    let start = Instant::now();
    loop {
        let now = connected_clients(conn);
        if now == n {
            return;
        }
        assert!(start.elapsed() < WAIT, "{now} clients, expected {n}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn setup(auth: AuthClients) -> (tempfile::TempDir, Pki, Leaf, TlsServer) {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path(), "main");
    let server_leaf = pki.leaf("server", false);
    let server = TlsServer::start(dir.path(), &server_leaf, &pki.ca_file(), |c| {
        c.tls.auth_clients = auth;
    });
    (dir, pki, server_leaf, server)
}

#[test]
fn commands_over_tls_in_resp2_and_resp3_beside_a_plain_port() {
    let (_dir, pki, _leaf, server) = setup(AuthClients::Yes);
    let client = pki.leaf("client", true);
    let config = client_config(&pki.ca_file(), Some(&client));
    let mut tls = connect(server.tls, &config);
    call(&mut tls, &["PING"], b"+PONG\r\n");
    call(&mut tls, &["SET", "k", "v"], b"+OK\r\n");
    call(&mut tls, &["GET", "k"], b"$1\r\nv\r\n");
    call(&mut tls, &["HSET", "h", "f", "x"], b":1\r\n");
    call(&mut tls, &["HGETALL", "h"], b"*2\r\n$1\r\nf\r\n$1\r\nx\r\n");
    // A reply larger than a TLS record (16 KiB) crosses several.
    let big = "y".repeat(200_000);
    call(&mut tls, &["SET", "big", &big], b"+OK\r\n");
    send(&mut tls, &["GET", "big"]).unwrap();
    expect(&mut tls, format!("$200000\r\n{big}\r\n").as_bytes());
    send(&mut tls, &["HELLO", "3"]).unwrap();
    send(&mut tls, &["PING"]).unwrap();
    read_until(&mut tls, b"+PONG\r\n");
    call(&mut tls, &["HGETALL", "h"], b"%1\r\n$1\r\nf\r\n$1\r\nx\r\n");
    call(&mut tls, &["GET", "missing"], b"_\r\n");
    // The plain port serves the same data at once.
    let mut tcp = plain(server.plain);
    call(&mut tcp, &["GET", "k"], b"$1\r\nv\r\n");
    // CONFIG GET shows the TLS settings.
    send(&mut tcp, &["CONFIG", "GET", "tls-port"]).unwrap();
    let port = server.tls.port().to_string();
    expect(
        &mut tcp,
        format!("*2\r\n$8\r\ntls-port\r\n${}\r\n{port}\r\n", port.len()).as_bytes(),
    );
}

#[test]
fn mutual_tls_required_optional_and_refused() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path(), "main");
    let other = Pki::new(dir.path(), "other");
    let server_leaf = pki.leaf("server", false);
    let good = pki.leaf("client", true);
    let stranger = other.leaf("stranger", true);
    let ca = pki.ca_file();
    let server = TlsServer::start(dir.path(), &server_leaf, &ca, |_| {});
    assert!(handshake_ok(server.tls, &client_config(&ca, Some(&good))));
    assert!(
        !handshake_ok(server.tls, &client_config(&ca, None)),
        "tls-auth-clients yes requires a certificate"
    );
    assert!(
        !handshake_ok(server.tls, &client_config(&ca, Some(&stranger))),
        "a certificate from another CA is refused"
    );
    let mut tcp = plain(server.plain);
    call(
        &mut tcp,
        &["CONFIG", "SET", "tls-auth-clients", "optional"],
        b"+OK\r\n",
    );
    assert!(handshake_ok(server.tls, &client_config(&ca, None)));
    assert!(handshake_ok(server.tls, &client_config(&ca, Some(&good))));
    assert!(!handshake_ok(
        server.tls,
        &client_config(&ca, Some(&stranger))
    ));
    call(
        &mut tcp,
        &["CONFIG", "SET", "tls-auth-clients", "no"],
        b"+OK\r\n",
    );
    assert!(handshake_ok(server.tls, &client_config(&ca, None)));
    // The client checks the server too: a client trusting another CA
    // refuses it.
    assert!(!handshake_ok(
        server.tls,
        &client_config(&other.ca_file(), None)
    ));
}

#[test]
fn protocol_and_cipher_settings_are_honoured_or_refused() {
    let (_dir, pki, _leaf, server) = setup(AuthClients::No);
    let ca = pki.ca_file();
    let mut tcp = plain(server.plain);
    call(
        &mut tcp,
        &["CONFIG", "SET", "tls-protocols", "TLSv1.3"],
        b"+OK\r\n",
    );
    let only12 = client_config_versions(&ca, None, &[&rustls::version::TLS12]);
    let only13 = client_config_versions(&ca, None, &[&rustls::version::TLS13]);
    assert!(!handshake_ok(server.tls, &only12));
    assert!(handshake_ok(server.tls, &only13));
    call(
        &mut tcp,
        &["CONFIG", "SET", "tls-protocols", "TLSv1.2"],
        b"+OK\r\n",
    );
    assert!(handshake_ok(server.tls, &only12));
    assert!(!handshake_ok(server.tls, &only13));
    // What rustls cannot do is refused, naming it, and changes nothing.
    for (name, value, word) in [
        ("tls-protocols", "TLSv1.1", "TLSv1.1"),
        ("tls-ciphers", "DES-CBC3-SHA", "DES-CBC3-SHA"),
        (
            "tls-ciphersuites",
            "TLS_AES_128_CCM_SHA256",
            "TLS_AES_128_CCM_SHA256",
        ),
    ] {
        send(&mut tcp, &["CONFIG", "SET", name, value]).unwrap();
        let reply = String::from_utf8(read_until(&mut tcp, b"\r\n")).unwrap();
        assert!(reply.starts_with("-ERR CONFIG SET failed"), "{reply}");
        assert!(reply.contains(word), "{reply}");
    }
    assert!(handshake_ok(server.tls, &only12));
    call(
        &mut tcp,
        &[
            "CONFIG",
            "SET",
            "tls-ciphers",
            "ECDHE-ECDSA-AES128-GCM-SHA256",
        ],
        b"+OK\r\n",
    );
    let mut tls = connect(server.tls, &only12);
    call(&mut tls, &["PING"], b"+PONG\r\n");
    let suite = tls.conn.negotiated_cipher_suite().unwrap().suite();
    assert_eq!(
        suite,
        rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
    );
}

#[test]
fn garbage_half_open_and_unread_tls_clients_do_not_stall_a_plain_client() {
    let (_dir, pki, _leaf, server) = setup(AuthClients::No);
    let ca = pki.ca_file();
    let mut tcp = plain(server.plain);
    call(
        &mut tcp,
        &[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "normal 1mb 0 0",
        ],
        b"+OK\r\n",
    );
    // Garbage instead of a ClientHello: closed at once.
    let mut garbage = plain(server.tls);
    garbage
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut rest = Vec::new();
    let _ = garbage.read_to_end(&mut rest);
    // Half of a real ClientHello, then silence.
    let mut hello = Vec::new();
    let mut half_conn = ClientConnection::new(
        client_config(&ca, None),
        ServerName::try_from("localhost").unwrap(),
    )
    .unwrap();
    half_conn.write_tls(&mut hello).unwrap();
    let mut half_open = plain(server.tls);
    half_open.write_all(&hello[..hello.len() / 2]).unwrap();
    // A TLS client that asks for large replies and never reads them.
    let config = client_config(&ca, None);
    let mut hog = connect(server.tls, &config);
    call(&mut hog, &["SET", "big", &"z".repeat(100_000)], b"+OK\r\n");
    for _ in 0..200 {
        // The server may close it (output limit) before all are sent.
        if send(&mut hog, &["GET", "big"]).is_err() {
            break;
        }
    }
    // Meanwhile a plain client and a new TLS client are served.
    for i in 0..50 {
        let v = i.to_string();
        call(&mut tcp, &["SET", "n", &v], b"+OK\r\n");
        expect_get(&mut tcp, "n", &v);
    }
    let mut fresh = connect(server.tls, &config);
    call(&mut fresh, &["PING"], b"+PONG\r\n");
    // The reader that never reads passed its output limit and was
    // closed; the half-open one stays (only `timeout` ends it).
    wait_clients(&mut tcp, 3);
    drop(half_open);
    wait_clients(&mut tcp, 2);
}

fn expect_get(stream: &mut (impl Read + Write), key: &str, value: &str) {
    call(
        stream,
        &["GET", key],
        format!("${}\r\n{value}\r\n", value.len()).as_bytes(),
    );
}

#[test]
fn config_set_reloads_the_certificate_for_new_connections() {
    let (dir, pki, _leaf, server) = setup(AuthClients::No);
    let ca = pki.ca_file();
    let config = client_config(&ca, None);
    let mut before = connect(server.tls, &config);
    call(&mut before, &["PING"], b"+PONG\r\n");
    let first = before.conn.peer_certificates().unwrap()[0].clone();
    let renewed = pki.leaf("renewed", false);
    let mut tcp = plain(server.plain);
    let (cert, key) = (
        renewed.cert.display().to_string(),
        renewed.key.display().to_string(),
    );
    call(
        &mut tcp,
        &[
            "CONFIG",
            "SET",
            "tls-cert-file",
            &cert,
            "tls-key-file",
            &key,
        ],
        b"+OK\r\n",
    );
    let mut after = connect(server.tls, &config);
    call(&mut after, &["PING"], b"+PONG\r\n");
    let second = after.conn.peer_certificates().unwrap()[0].clone();
    assert_ne!(first, second);
    assert_eq!(second, renewed.der);
    // The connection opened before keeps working.
    call(&mut before, &["PING"], b"+PONG\r\n");
    // A certificate that cannot be read is refused; the old one stays.
    let bogus = dir.path().join("bogus.crt");
    std::fs::write(&bogus, "not a certificate").unwrap();
    send(
        &mut tcp,
        &[
            "CONFIG",
            "SET",
            "tls-cert-file",
            &bogus.display().to_string(),
        ],
    )
    .unwrap();
    let reply = String::from_utf8(read_until(&mut tcp, b"\r\n")).unwrap();
    assert!(
        reply.starts_with("-ERR CONFIG SET failed (possibly related to argument 'tls-cert-file') - Unable to update TLS configuration"),
        "{reply}"
    );
    send(&mut tcp, &["CONFIG", "GET", "tls-cert-file"]).unwrap();
    expect(
        &mut tcp,
        format!(
            "*2\r\n$13\r\ntls-cert-file\r\n${}\r\n{cert}\r\n",
            cert.len()
        )
        .as_bytes(),
    );
    let mut third = connect(server.tls, &config);
    call(&mut third, &["PING"], b"+PONG\r\n");
    assert_eq!(third.conn.peer_certificates().unwrap()[0], renewed.der);
}

#[test]
fn config_set_tls_port_moves_the_tls_listener() {
    let (_dir, pki, _leaf, server) = setup(AuthClients::No);
    let config = client_config(&pki.ca_file(), None);
    let mut tcp = plain(server.plain);
    let port = free_port();
    call(
        &mut tcp,
        &["CONFIG", "SET", "tls-port", &port.to_string()],
        b"+OK\r\n",
    );
    // The loop switches listeners before its next sleep, so the next
    // command's reply comes after the switch.
    call(&mut tcp, &["PING"], b"+PONG\r\n");
    let moved: SocketAddr = ([127, 0, 0, 1], port).into();
    assert!(handshake_ok(moved, &config));
    assert!(
        TcpStream::connect(server.tls).is_err(),
        "old TLS port closed"
    );
}

#[test]
fn timeout_closes_idle_and_half_open_clients() {
    let (_dir, _pki, _leaf, server) = setup(AuthClients::No);
    let mut tcp = plain(server.plain);
    let mut idle = plain(server.plain);
    call(&mut idle, &["PING"], b"+PONG\r\n");
    let mut half_open = plain(server.tls);
    half_open.write_all(&[0x16, 0x03, 0x01]).unwrap();
    wait_clients(&mut tcp, 3);
    call(&mut tcp, &["CONFIG", "SET", "timeout", "1"], b"+OK\r\n");
    // The asking client stays active; the other two go within about two
    // seconds (idle more than one whole second).
    let start = Instant::now();
    while connected_clients(&mut tcp) != 1 {
        assert!(start.elapsed() < WAIT, "idle clients were not closed");
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut buf = [0u8; 1];
    assert_eq!(idle.read(&mut buf).unwrap_or(0), 0, "closed by the server");
    assert_eq!(half_open.read(&mut buf).unwrap_or(0), 0);
}

#[test]
fn a_server_with_only_a_tls_port_starts_and_a_bad_setup_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path(), "main");
    let leaf = pki.leaf("server", false);
    let mut config = Config {
        port: 0,
        dir: dir.path().join("data"),
        log_device: LogDevice::File,
        ..Config::default()
    };
    config.tls.port = free_port();
    config.tls.cert_file = leaf.cert.display().to_string();
    config.tls.key_file = leaf.key.display().to_string();
    config.tls.auth_clients = AuthClients::No;
    let server = Server::bind(config.clone()).expect("TLS-only server starts");
    assert!(
        server.local_addr().is_none(),
        "port 0 beside tls-port: no plain listener"
    );
    assert!(server.tls_local_addr().is_some());
    drop(server);
    // tls-auth-clients yes needs a CA to check clients against.
    config.tls.auth_clients = AuthClients::Yes;
    let err = Server::bind(config.clone()).unwrap_err().to_string();
    assert!(err.contains("tls-ca-cert-file"), "{err}");
    config.tls.auth_clients = AuthClients::No;
    config.tls.key_file = dir.path().join("missing.key").display().to_string();
    let err = Server::bind(config).unwrap_err().to_string();
    assert!(err.contains("missing.key"), "{err}");
}
