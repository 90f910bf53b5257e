//! Shared test helpers: an in-process server on a free port, and a raw
//! connection that sends bytes and checks the exact bytes that come back.

#![allow(dead_code)]

pub mod members;
pub mod repl;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::thread::JoinHandle;
use std::time::Duration;

use ferrite_kv::config::{AppendFsync, Config, LogDevice};
use ferrite_kv::{Server, ShutdownHandle};

/// Takes this test's turn among those reading the process's allocation
/// counter (a figure of the whole process, so they cannot overlap), and
/// installs the counting probe with jemalloc's size classes for MEMORY
/// USAGE. For test binaries whose global allocator is
/// `ferrite_alloc::Counting`.
pub fn counting_turn() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ferrite_kv::memory::install(ferrite_kv::memory::Probe {
        usable_size: ferrite_alloc::size_class,
        ..ferrite_kv::memory::Probe::counting(|| ferrite_alloc::allocated() as u64)
    });
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A `redis` crate connection to `server`.
pub fn connect(server: &TestServer) -> redis::Connection {
    let client = redis::Client::open(format!("redis://{}/", server.addr)).expect("url");
    client.get_connection().expect("connects")
}

/// A server running on a thread; stopped (and its log closed) on drop.
pub struct TestServer {
    pub addr: SocketAddr,
    handle: ShutdownHandle,
    thread: Option<JoinHandle<ferrite_kv::Result<()>>>,
}

impl TestServer {
    /// A server with its data in `dir`, configured by `tweak`.
    pub fn start_with(dir: &Path, tweak: impl FnOnce(&mut Config)) -> TestServer {
        let mut config = Config {
            port: 0,
            dir: dir.to_path_buf(),
            appendfsync: AppendFsync::Always,
            log_device: LogDevice::File,
            ..Config::default()
        };
        tweak(&mut config);
        let server = Server::bind(config).expect("server starts");
        let addr = server.local_addr().expect("bound");
        let handle = server.shutdown_handle();
        let thread = std::thread::spawn(move || server.run());
        TestServer {
            addr,
            handle,
            thread: Some(thread),
        }
    }

    /// A server with default test settings in `dir`.
    pub fn start(dir: &Path) -> TestServer {
        TestServer::start_with(dir, |_| {})
    }

    /// A raw connection.
    pub fn raw(&self) -> Raw {
        Raw::connect(self.addr)
    }

    /// Stops the server and waits for it.
    pub fn stop(mut self) {
        self.stop_inner();
    }

    fn stop_inner(&mut self) {
        self.handle.shutdown();
        if let Some(t) = self.thread.take() {
            t.join()
                .expect("server thread")
                .expect("server stops cleanly");
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if self.thread.is_some() {
            self.handle.shutdown();
            if let Some(t) = self.thread.take() {
                let _ = t.join();
            }
        }
    }
}

/// A connection that speaks raw bytes.
pub struct Raw {
    pub stream: TcpStream,
}

impl Raw {
    pub fn connect(addr: SocketAddr) -> Raw {
        let stream = TcpStream::connect(addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        Raw { stream }
    }

    /// Sends `input` and asserts the reply is exactly `expected`.
    #[track_caller]
    pub fn check(&mut self, input: &[u8], expected: &[u8]) {
        self.stream.write_all(input).expect("send");
        let mut got = vec![0u8; expected.len()];
        let mut filled = 0;
        while filled < expected.len() {
            match self.stream.read(&mut got[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) => panic!(
                    "reading the reply to {:?}: {e}; got so far {:?}",
                    String::from_utf8_lossy(input),
                    String::from_utf8_lossy(&got[..filled])
                ),
            }
        }
        assert_eq!(
            String::from_utf8_lossy(&got[..filled]),
            String::from_utf8_lossy(expected),
            "input {:?}",
            String::from_utf8_lossy(input)
        );
    }

    /// Sends `input` and returns whatever arrives within a short while.
    pub fn roundtrip_any(&mut self, input: &[u8]) -> Vec<u8> {
        self.stream.write_all(input).expect("send");
        self.stream
            .set_read_timeout(Some(Duration::from_millis(300)))
            .expect("timeout");
        let mut out = Vec::new();
        let mut buf = [0u8; 65536];
        while let Ok(n) = self.stream.read(&mut buf) {
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
        }
        self.stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        out
    }

    /// Sends `input` and reads its bulk-string reply whole (`$len` then
    /// the bytes), without waiting for more.
    pub fn bulk(&mut self, input: &[u8]) -> Vec<u8> {
        self.stream.write_all(input).expect("send");
        let mut header = Vec::new();
        let mut byte = [0u8; 1];
        while !header.ends_with(b"\r\n") {
            self.stream.read_exact(&mut byte).expect("reply header");
            header.push(byte[0]);
        }
        let len: usize = std::str::from_utf8(&header)
            .ok()
            .and_then(|h| h.strip_prefix('$'))
            .and_then(|h| h.trim_end().parse().ok())
            .unwrap_or_else(|| panic!("not a bulk string: {header:?}"));
        let mut body = vec![0; len + 2];
        self.stream.read_exact(&mut body).expect("reply body");
        body.truncate(len);
        body
    }

    /// Switches the connection to RESP3 and consumes HELLO's reply whole:
    /// a PING sent behind it marks its end, so no read waits for silence.
    pub fn hello3(&mut self) {
        self.stream.write_all(b"HELLO 3\r\nPING\r\n").expect("send");
        let mut seen = Vec::new();
        let mut byte = [0u8; 1];
        while !seen.ends_with(b"+PONG\r\n") {
            self.stream.read_exact(&mut byte).expect("HELLO reply");
            seen.push(byte[0]);
        }
    }

    /// Whether the server closed the connection.
    pub fn is_closed(&mut self) -> bool {
        let mut buf = [0u8; 1];
        matches!(self.stream.read(&mut buf), Ok(0) | Err(_))
    }
}

/// Encodes a command as RESP.
pub fn resp(args: &[&str]) -> Vec<u8> {
    let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    resp_bytes(&bytes)
}

/// The bytes a hexadecimal text spells, two digits a byte (payloads a
/// real Redis produced, kept in the tests as text).
pub fn hex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| {
            let pair = text.get(i..i + 2).expect("two hex digits");
            u8::from_str_radix(pair, 16).expect("hex digit pair")
        })
        .collect()
}

/// Encodes a command whose arguments may be any bytes (binary keys,
/// DUMP payloads, bytes that are not UTF-8).
pub fn resp_bytes(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// A cluster node (`cluster-enabled yes`) on a free port, its bus on a
/// port free now (the bus port must be known before the server starts, as
/// `cluster-port` sets it); returns the server and its bus port.
pub fn cluster_node(dir: &Path, node_timeout_ms: i64) -> (TestServer, u16) {
    let bus = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let server = TestServer::start_with(dir, |c| {
        c.cluster.enabled = true;
        c.cluster.port = bus;
        c.cluster.node_timeout_ms = node_timeout_ms;
    });
    (server, bus)
}

/// A reply with the value after each of `names` blanked, at any depth:
/// for XINFO STREAM FULL, whose consumers' `seen-time` and `active-time`
/// are set to when a replay reads the log, as Redis's replicas do.
pub fn without_fields(v: redis::Value, names: &[&str]) -> redis::Value {
    match v {
        redis::Value::Array(items) => {
            let mut out = Vec::with_capacity(items.len());
            let mut blank_next = false;
            for item in items {
                if blank_next {
                    out.push(redis::Value::Nil);
                    blank_next = false;
                    continue;
                }
                blank_next = matches!(&item, redis::Value::BulkString(b)
                    if names.iter().any(|n| n.as_bytes() == b.as_slice()));
                out.push(without_fields(item, names));
            }
            redis::Value::Array(out)
        }
        other => other,
    }
}

/// Runs one command through a `redis` connection; a server error fails
/// the test with the command named.
pub fn run(con: &mut redis::Connection, args: &[&str]) -> redis::Value {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    let reply: redis::RedisResult<redis::Value> = cmd.query(con);
    reply.unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// The value of field `name` in INFO (every section), through a `redis`
/// connection; a field INFO does not have fails the test.
pub fn info_field(con: &mut redis::Connection, name: &str) -> String {
    let info: String = redis::cmd("INFO")
        .arg("everything")
        .query(con)
        .expect("INFO");
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("INFO has no {name}"))
        .trim()
        .to_string()
}
