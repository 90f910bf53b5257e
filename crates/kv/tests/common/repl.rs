//! Replication tests' scaffolding: a master and a replica on their own
//! directories, whole RESP2 replies as text, INFO fields of the
//! replication and stats sections, and polling with a deadline.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use ferrite_kv::config::Config;

use super::{Raw, TestServer};

/// Sends one command and returns its whole reply as text.
pub fn call(c: &mut Raw, args: &[&str]) -> String {
    c.stream.write_all(&super::resp(args)).expect("send");
    let mut out = Vec::new();
    read_reply(&mut c.stream, &mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// Reads one RESP2 reply into `out`, as received.
pub fn read_reply(stream: &mut std::net::TcpStream, out: &mut Vec<u8>) {
    try_read_reply(stream, out).expect("reply");
}

/// Reads one RESP2 reply into `out`, as received; an error when the
/// connection fails or closes before the reply is whole.
pub fn try_read_reply(stream: &mut std::net::TcpStream, out: &mut Vec<u8>) -> std::io::Result<()> {
    let start = out.len();
    let mut byte = [0u8; 1];
    while !out.ends_with(b"\r\n") || out.len() - start < 3 {
        stream.read_exact(&mut byte)?;
        out.push(byte[0]);
    }
    let line = String::from_utf8_lossy(&out[start + 1..out.len() - 2]).into_owned();
    let n: i64 = line.parse().unwrap_or(-1);
    match out[start] {
        b'$' if n >= 0 => {
            let mut body = vec![0u8; n as usize + 2];
            stream.read_exact(&mut body)?;
            out.extend_from_slice(&body);
        }
        b'*' => {
            for _ in 0..n.max(0) {
                try_read_reply(stream, out)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// Attaches `raw` as a replica with SYNC (no capabilities, so the
/// payload comes with its length first) and returns the whole payload.
pub fn sync(raw: &mut Raw) -> Vec<u8> {
    raw.stream.write_all(&super::resp(&["SYNC"])).expect("SYNC");
    let mut header = Vec::new();
    let mut byte = [0u8; 1];
    while !header.ends_with(b"\r\n") {
        raw.stream.read_exact(&mut byte).expect("payload header");
        header.push(byte[0]);
    }
    let len: usize = String::from_utf8_lossy(&header[1..header.len() - 2])
        .parse()
        .expect("payload length");
    let mut payload = vec![0u8; len];
    raw.stream.read_exact(&mut payload).expect("payload");
    payload
}

/// Polls `f` until it holds; fails after 20 seconds.
pub fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn info_field(c: &mut Raw, field: &str) -> String {
    let info = call(c, &["INFO", "replication"]);
    let stats = call(c, &["INFO", "stats"]);
    info.lines()
        .chain(stats.lines())
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or("")
        .trim()
        .to_string()
}

/// A master and a replica, each on its own data directory and not yet
/// linked. The master starts a full sync at once (no diskless-sync delay)
/// so that a test waits for the link, not for a timer.
///
/// The replica is the first field so that, dropped whole, the pair stops
/// the replica before its master, in the order the tests' locals did.
pub struct Pair {
    pub replica: TestServer,
    pub master: TestServer,
    /// The master's and the replica's directories, in that order; kept
    /// with the servers, as a restart of either reads its directory again.
    pub dirs: (tempfile::TempDir, tempfile::TempDir),
}

impl Pair {
    /// Starts both servers; `tweak` adds to the master's configuration.
    pub fn start(tweak: impl FnOnce(&mut Config)) -> Pair {
        let dirs = (
            tempfile::tempdir().expect("dir"),
            tempfile::tempdir().expect("dir"),
        );
        let master = TestServer::start_with(dirs.0.path(), |c| {
            c.set("repl-diskless-sync-delay", &["0".to_string()])
                .expect("delay");
            tweak(c);
        });
        let replica = TestServer::start(dirs.1.path());
        Pair {
            replica,
            master,
            dirs,
        }
    }

    /// Makes the replica follow the master through `r`, a connection to
    /// the replica, and waits until its link is up.
    pub fn link(&self, r: &mut Raw) {
        let port = self.master.addr.port().to_string();
        assert_eq!(call(r, &["REPLICAOF", "127.0.0.1", &port]), "+OK\r\n");
        eventually("the replica syncs", || {
            info_field(r, "master_link_status") == "up"
        });
    }
}
