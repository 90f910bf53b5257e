//! `redis-cli --cluster reshard` (Redis 7's own tool) under a write load:
//! three primaries, 100 slots moved from the first to the second while a
//! writer keeps setting keys of every slot, following MOVED, ASK and
//! TRYAGAIN as a cluster client does. The reshard must finish, `--cluster
//! check` must be clean, the writer must see no other error, and every
//! value it was acknowledged must read back. The full-size run (1,000
//! slots under redis-benchmark, with replicas) is
//! `scripts/cluster-reshard.sh`. Fails, not skips, without redis-cli.

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{resp, TestServer};

const SLOTS_MOVED: usize = 100;
const KEYS: usize = 3000;

/// One connection per node port, with a line reader over it.
struct Conn {
    out: TcpStream,
    input: BufReader<TcpStream>,
}

impl Conn {
    fn open(port: u16) -> Conn {
        let out = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        out.set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        let input = BufReader::new(out.try_clone().expect("clone"));
        Conn { out, input }
    }

    /// Sends `args` and reads one reply: a simple string, an error (with
    /// its `-`), a bulk string's contents, or `nil`.
    fn call(&mut self, args: &[&str]) -> String {
        self.out.write_all(&resp(args)).expect("send");
        let mut line = String::new();
        self.input.read_line(&mut line).expect("reply");
        let line = line.trim_end().to_string();
        if let Some(len) = line.strip_prefix('$') {
            let Ok(len) = len.parse::<usize>() else {
                return "nil".into();
            };
            let mut body = String::new();
            while body.len() < len + 2 {
                self.input.read_line(&mut body).expect("bulk");
            }
            return body[..len].to_string();
        }
        line.strip_prefix('+').map_or(line.clone(), str::to_string)
    }
}

/// A cluster client: runs `args` on the node serving `key`, following
/// redirections; `Err` is any other error reply.
fn cluster_call(
    conns: &mut BTreeMap<u16, Conn>,
    mut port: u16,
    args: &[&str],
) -> Result<String, String> {
    let mut asking = false;
    for _ in 0..100 {
        let conn = conns.entry(port).or_insert_with(|| Conn::open(port));
        if asking {
            assert_eq!(conn.call(&["ASKING"]), "OK");
        }
        let reply = conn.call(args);
        let target = |r: &str| -> u16 {
            let at = r.rsplit(' ').next().unwrap_or_default();
            at.rsplit(':')
                .next()
                .unwrap_or_default()
                .parse()
                .unwrap_or(port)
        };
        if reply.starts_with("-MOVED ") {
            (port, asking) = (target(&reply), false);
        } else if reply.starts_with("-ASK ") {
            (port, asking) = (target(&reply), true);
        } else if reply.starts_with("-TRYAGAIN") {
            std::thread::sleep(Duration::from_millis(20));
        } else if reply.starts_with('-') {
            return Err(reply);
        } else {
            return Ok(reply);
        }
    }
    Err(format!("too many redirections for {args:?}"))
}

fn redis_cli(args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .args(args)
        .output()
        .expect("redis-cli (redis-tools 7.x) must be installed for this test");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "redis-cli {args:?} failed:\n{text}");
    text
}

fn start_cluster(dirs: &[tempfile::TempDir]) -> Vec<TestServer> {
    let nodes: Vec<(TestServer, u16)> = dirs
        .iter()
        .map(|d| common::cluster_node(d.path(), 5000))
        .collect();
    let ranges = [(0, 5460), (5461, 10922), (10923, 16383)];
    for (i, ((node, _), (a, b))) in nodes.iter().zip(ranges).enumerate() {
        let mut c = Conn::open(node.addr.port());
        let (a, b, epoch) = (a.to_string(), b.to_string(), (i + 1).to_string());
        assert_eq!(c.call(&["CLUSTER", "ADDSLOTSRANGE", &a, &b]), "OK");
        assert_eq!(c.call(&["CLUSTER", "SET-CONFIG-EPOCH", &epoch]), "OK");
    }
    let first = Conn::open(nodes[0].0.addr.port()).call(&["CLUSTER", "MYID"]);
    for (node, _) in &nodes[1..] {
        let mut c = Conn::open(node.addr.port());
        let (port, bus) = (nodes[0].0.addr.port().to_string(), nodes[0].1.to_string());
        assert_eq!(c.call(&["CLUSTER", "MEET", "127.0.0.1", &port, &bus]), "OK");
        assert_ne!(c.call(&["CLUSTER", "MYID"]), first);
    }
    let start = Instant::now();
    loop {
        let ok = nodes.iter().all(|(n, _)| {
            let info = Conn::open(n.addr.port()).call(&["CLUSTER", "INFO"]);
            info.contains("cluster_state:ok") && info.contains("cluster_known_nodes:3")
        });
        if ok {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the cluster never joined"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    nodes.into_iter().map(|(n, _)| n).collect()
}

#[test]
fn reshard_under_a_write_load_loses_nothing() {
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let nodes = start_cluster(&dirs);
    let ports: Vec<u16> = nodes.iter().map(|n| n.addr.port()).collect();
    let entry = format!("127.0.0.1:{}", ports[0]);
    let id = |port: u16| Conn::open(port).call(&["CLUSTER", "MYID"]);
    let (from, to) = (id(ports[0]), id(ports[1]));

    // Keys of every slot, so the moved slots hold some.
    let mut conns = BTreeMap::new();
    for i in 0..KEYS {
        let key = format!("k:{i}");
        let set = cluster_call(&mut conns, ports[0], &["SET", &key, "0"]);
        assert_eq!(set.as_deref(), Ok("OK"));
    }

    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let stop = Arc::clone(&stop);
        let port = ports[2];
        std::thread::spawn(move || {
            let mut conns = BTreeMap::new();
            let mut acked = vec![0u64; KEYS];
            let mut round = 0u64;
            while !stop.load(Ordering::Relaxed) {
                round += 1;
                for (i, last) in acked.iter_mut().enumerate().step_by(7) {
                    let (key, value) = (format!("k:{i}"), round.to_string());
                    cluster_call(&mut conns, port, &["SET", &key, &value])?;
                    *last = round;
                }
            }
            Ok::<_, String>(acked)
        })
    };

    let slots = SLOTS_MOVED.to_string();
    let reshard = redis_cli(&[
        "--cluster",
        "reshard",
        &entry,
        "--cluster-from",
        &from,
        "--cluster-to",
        &to,
        "--cluster-slots",
        &slots,
        "--cluster-pipeline",
        "10",
        "--cluster-yes",
    ]);
    stop.store(true, Ordering::Relaxed);
    let acked = writer
        .join()
        .expect("writer thread")
        .unwrap_or_else(|e| panic!("the writer got an error it cannot follow: {e}"));
    let last = format!("Moving slot {} ", SLOTS_MOVED - 1);
    assert!(reshard.contains(&last), "{reshard}");

    let check = redis_cli(&["--cluster", "check", &entry]);
    assert!(check.contains("[OK] All 16384 slots covered"), "{check}");
    assert!(
        !check.contains("[ERR]") && !check.contains("[WARNING]"),
        "{check}"
    );
    let nodes_text = Conn::open(ports[1]).call(&["CLUSTER", "NODES"]);
    assert!(nodes_text.contains(&format!("{to} ")), "{nodes_text}");
    let mut source = Conn::open(ports[0]);
    for slot in [0, SLOTS_MOVED / 2, SLOTS_MOVED - 1] {
        let count = source.call(&["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()]);
        assert_eq!(count, ":0", "slot {slot} still has keys on the source");
    }
    for (i, expected) in acked.iter().enumerate() {
        let key = format!("k:{i}");
        let got = cluster_call(&mut conns, ports[0], &["GET", &key]).expect("GET");
        assert_eq!(got, expected.to_string(), "{key}");
    }
}
