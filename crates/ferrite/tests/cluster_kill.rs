//! kill -9 of a cluster primary under a write load, with the real
//! `ferrite serve` binary: three primaries and three replicas joined as
//! `redis-cli --cluster create --cluster-replicas 1` joins them; writers
//! follow MOVED like a cluster client and record in a ledger every write
//! that `WAIT 1` reported as reaching a replica; one primary is killed
//! with SIGKILL. Its replica must be promoted, and every acknowledged
//! write must be readable from the cluster afterwards.
//!
//! The time to promotion is printed and held to a liveness bound of the
//! node timeout plus 8 s, not to the node timeout plus 2 s: the
//! election alone waits 0.5-1 s by design, so on a loaded 2-core CI
//! machine running six debug servers the 2 s margin is missed by
//! scheduling (4.6 s against 4 s seen), which a test cannot tell from a
//! fault. The tighter figure is measured and recorded in
//! `docs/results/cluster.md`.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::process::Child;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{free_port, start_server, Client, Reply};
use ferrite_kv::cluster::key_slot;

/// The node timeout of this test: long enough that a loaded CI machine
/// does not mark live nodes failing, short enough to keep the test brief.
const NODE_TIMEOUT_MS: u64 = 2000;
const WRITERS: usize = 3;
const RANGES: [(u16, u16); 3] = [(0, 5460), (5461, 10922), (10923, 16383)];

struct Node {
    _dir: tempfile::TempDir,
    child: Child,
    port: u16,
    bus: u16,
    id: String,
}

/// A node's process dies with its handle, so a failing assertion leaves
/// no server running behind the test.
impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_node() -> Node {
    let dir = tempfile::tempdir().expect("dir");
    let bus = free_port();
    let (child, port) = start_server(
        dir.path(),
        &[
            "--cluster-enabled",
            "yes",
            "--cluster-port",
            &bus.to_string(),
            "--cluster-node-timeout",
            &NODE_TIMEOUT_MS.to_string(),
        ],
    );
    let id = text(&mut connect(port), &[b"CLUSTER", b"MYID"]);
    PORTS.lock().unwrap().push(port);
    Node {
        _dir: dir,
        child,
        port,
        bus,
        id,
    }
}

fn connect(port: u16) -> Client {
    Client::connect(port).expect("connect")
}

/// A command whose reply is a string (simple or bulk); panics otherwise.
fn text(c: &mut Client, args: &[&[u8]]) -> String {
    match c.call(args).expect("reply") {
        Reply::Simple(s) => s,
        Reply::Bulk(Some(b)) => String::from_utf8_lossy(&b).into_owned(),
        other => panic!("{:?}: {other:?}", String::from_utf8_lossy(args[0])),
    }
}

/// Polls `done` every 50 ms until it holds, or panics after `limit`
/// with every live node's view of the cluster.
fn wait_for(limit: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        if start.elapsed() >= limit {
            let views: Vec<String> = PORTS
                .lock()
                .unwrap()
                .iter()
                .filter_map(|p| {
                    let mut c = Client::connect(*p).ok()?;
                    let nodes = c.call(&[b"CLUSTER", b"NODES"]).ok()?;
                    Some(format!("{p}: {nodes:?}"))
                })
                .collect();
            panic!("timed out waiting for {what}\n{}", views.join("\n"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The client ports of the test's nodes, for the diagnostics of a timeout.
static PORTS: Mutex<Vec<u16>> = Mutex::new(Vec::new());

/// Builds the cluster: slots to the first three nodes, distinct config
/// epochs, MEET, then the last three replicate the first three.
fn build_cluster(nodes: &[Node]) {
    for (i, n) in nodes.iter().enumerate() {
        let mut c = connect(n.port);
        if let Some((a, b)) = RANGES.get(i) {
            let (a, b) = (a.to_string(), b.to_string());
            text(
                &mut c,
                &[b"CLUSTER", b"ADDSLOTSRANGE", a.as_bytes(), b.as_bytes()],
            );
        }
        let epoch = (i + 1).to_string();
        text(&mut c, &[b"CLUSTER", b"SET-CONFIG-EPOCH", epoch.as_bytes()]);
    }
    // As `redis-cli --cluster create` does, every node meets the first;
    // a node that still knows only itself meets it again (its handshake
    // may have expired on a loaded machine before it completed).
    let (port, bus) = (nodes[0].port.to_string(), nodes[0].bus.to_string());
    let meet: &[&[u8]] = &[
        b"CLUSTER",
        b"MEET",
        b"127.0.0.1",
        port.as_bytes(),
        bus.as_bytes(),
    ];
    let limit = Duration::from_secs(90);
    let mut conns: Vec<Client> = nodes.iter().map(|n| connect(n.port)).collect();
    let mut last_meet = Instant::now() - Duration::from_secs(10);
    wait_for(limit, "six nodes known everywhere", || {
        let again = last_meet.elapsed() > Duration::from_secs(5);
        if again {
            last_meet = Instant::now();
        }
        let first = text(&mut conns[0], &[b"CLUSTER", b"NODES"]);
        let mut all = first.lines().count() == 6 && !first.contains("handshake");
        for c in conns[1..].iter_mut() {
            let table = text(c, &[b"CLUSTER", b"NODES"]);
            if table.lines().count() < 6 || table.contains("handshake") {
                all = false;
                if again && table.lines().count() == 1 {
                    text(c, meet);
                }
            }
        }
        all
    });
    for r in 3..6 {
        let primary = nodes[r - 3].id.as_bytes();
        text(&mut conns[r], &[b"CLUSTER", b"REPLICATE", primary]);
    }
    wait_for(limit, "the roles everywhere and the cluster ok", || {
        conns.iter_mut().all(|c| {
            let info = text(c, &[b"CLUSTER", b"INFO"]);
            let table = text(c, &[b"CLUSTER", b"NODES"]);
            info.contains("cluster_state:ok") && table.matches("slave").count() == 3
        })
    });
    wait_for(limit, "the replicas' links to their primaries", || {
        conns[3..]
            .iter_mut()
            .all(|c| text(c, &[b"INFO", b"replication"]).contains("master_link_status:up"))
    });
}

/// What the test knows about a key.
#[derive(Clone, Debug)]
enum Known {
    /// `WAIT 1` counted a replica after the SET: must be readable for ever.
    Acked(Vec<u8>),
    /// Sent, without that acknowledgement: may be there with this value, or not.
    Maybe(Vec<u8>),
}

type Ledger = Arc<Mutex<BTreeMap<Vec<u8>, Known>>>;

/// A cluster client: connections by port, and the owner of each slot as
/// the last MOVED said (starting from the layout the test built).
struct ClusterClient {
    ports: Vec<u16>,
    conns: HashMap<u16, Client>,
    owner: Vec<u16>,
}

/// The result of one command through the cluster.
enum Outcome {
    Reply(Reply),
    /// The cluster could not answer yet (a dead node, CLUSTERDOWN,
    /// TRYAGAIN), and why.
    Unavailable(String),
}

impl ClusterClient {
    fn new(ports: &[u16]) -> ClusterClient {
        let mut owner = vec![0u16; ferrite_kv::cluster::SLOTS];
        for (i, (a, b)) in RANGES.iter().enumerate() {
            for slot in *a..=*b {
                owner[usize::from(slot)] = ports[i];
            }
        }
        ClusterClient {
            ports: ports.to_vec(),
            conns: HashMap::new(),
            owner,
        }
    }

    /// Sends each command of `batch` on the connection of the slot's owner
    /// and returns the last reply, following MOVED (at most a few times).
    /// A node that cannot be reached makes the slot point at another
    /// node, whose MOVED will say where the slot went.
    fn run(&mut self, slot: u16, batch: &[&[&[u8]]]) -> Outcome {
        for _ in 0..8 {
            let port = self.owner[usize::from(slot)];
            let conn = match self.conns.get_mut(&port) {
                Some(c) => c,
                None => match Client::connect(port) {
                    Ok(c) => self.conns.entry(port).or_insert(c),
                    Err(e) => {
                        self.rotate(slot, port);
                        return Outcome::Unavailable(format!("connect to {port}: {e}"));
                    }
                },
            };
            let mut last = None;
            for args in batch {
                match conn.call(args) {
                    Ok(Reply::Error(e)) => {
                        last = Some(Reply::Error(e));
                        break;
                    }
                    Ok(r) => last = Some(r),
                    Err(e) => {
                        self.conns.remove(&port);
                        self.rotate(slot, port);
                        return Outcome::Unavailable(format!("reply from {port}: {e}"));
                    }
                }
            }
            match last {
                Some(Reply::Error(e)) if e.starts_with("MOVED ") => {
                    let to = e.rsplit(':').next().and_then(|p| p.parse().ok());
                    match to {
                        Some(p) => self.owner[usize::from(slot)] = p,
                        None => panic!("bad MOVED {e}"),
                    }
                }
                Some(Reply::Error(e))
                    if e.starts_with("CLUSTERDOWN") || e.starts_with("TRYAGAIN") =>
                {
                    return Outcome::Unavailable(e)
                }
                Some(r) => return Outcome::Reply(r),
                None => panic!("empty batch"),
            }
        }
        Outcome::Unavailable(String::from("redirected too many times"))
    }

    /// [`ClusterClient::run`], again every 50 ms while the cluster cannot
    /// answer, for at most `limit`.
    fn run_until(&mut self, slot: u16, batch: &[&[&[u8]]], limit: Duration) -> Outcome {
        let start = Instant::now();
        loop {
            match self.run(slot, batch) {
                Outcome::Unavailable(why) if start.elapsed() < limit => {
                    let _ = why;
                    std::thread::sleep(Duration::from_millis(50));
                }
                outcome => return outcome,
            }
        }
    }

    fn rotate(&mut self, slot: u16, dead: u16) {
        let at = self.ports.iter().position(|p| *p == dead).unwrap_or(0);
        self.owner[usize::from(slot)] = self.ports[(at + 1) % self.ports.len()];
    }
}

/// One writer: SETs of fresh keys across all slots, each followed by
/// `WAIT 1 1000` on the same connection; a key counts as acknowledged when
/// WAIT reports at least one replica. A key whose write could not be
/// confirmed stays `Maybe` and the writer moves on to the next key.
fn writer(ports: Vec<u16>, tag: usize, ledger: Ledger, stop: Arc<AtomicBool>) {
    let mut cluster = ClusterClient::new(&ports);
    for i in 0.. {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let key = format!("w{tag}:{i}").into_bytes();
        let value = format!("value-{tag}-{i}").into_bytes();
        ledger
            .lock()
            .unwrap()
            .insert(key.clone(), Known::Maybe(value.clone()));
        let slot = key_slot(&key);
        let outcome = cluster.run(slot, &[&[b"SET", &key, &value], &[b"WAIT", b"1", b"1000"]]);
        match outcome {
            Outcome::Reply(Reply::Int(n)) if n >= 1 => {
                ledger.lock().unwrap().insert(key, Known::Acked(value));
            }
            Outcome::Reply(_) => {}
            // The cluster is between owners: give it a moment (the writer
            // polls, it does not wait for any event of the test).
            Outcome::Unavailable(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// Reads every ledger key back through the cluster.
fn verify(ports: &[u16], ledger: &Ledger) -> (usize, usize) {
    let mut cluster = ClusterClient::new(ports);
    let ledger = ledger.lock().unwrap();
    let (mut acked, mut maybe_present) = (0, 0);
    for (key, known) in ledger.iter() {
        let name = String::from_utf8_lossy(key).into_owned();
        let get: &[&[u8]] = &[b"GET", key];
        let got = match cluster.run_until(key_slot(key), &[get], Duration::from_secs(10)) {
            Outcome::Reply(Reply::Bulk(v)) => v,
            Outcome::Reply(other) => panic!("GET {name}: {other:?}"),
            Outcome::Unavailable(why) => panic!("GET {name}: the cluster is not serving it: {why}"),
        };
        match known {
            Known::Acked(v) => {
                assert_eq!(
                    got.as_ref(),
                    Some(v),
                    "{name}, acknowledged by WAIT 1, is lost"
                );
                acked += 1;
            }
            Known::Maybe(v) => {
                assert!(
                    got.is_none() || got.as_ref() == Some(v),
                    "{name} has a value never written"
                );
                maybe_present += usize::from(got.is_some());
            }
        }
    }
    (acked, maybe_present)
}

#[test]
fn kill_9_of_a_primary_promotes_its_replica_and_keeps_every_waited_write() {
    let mut nodes: Vec<Node> = (0..6).map(|_| start_node()).collect();
    build_cluster(&nodes);
    let ports: Vec<u16> = nodes.iter().map(|n| n.port).collect();

    let ledger: Ledger = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..WRITERS)
        .map(|t| {
            let (ports, ledger, stop) = (ports.clone(), Arc::clone(&ledger), Arc::clone(&stop));
            std::thread::spawn(move || writer(ports, t, ledger, stop))
        })
        .collect();
    // Let the load reach every primary, node 0's slots included.
    let count_acked_on_0 = |ledger: &Ledger| {
        ledger
            .lock()
            .unwrap()
            .iter()
            .filter(|(k, v)| matches!(v, Known::Acked(_)) && key_slot(k) <= RANGES[0].1)
            .count()
    };
    wait_for(
        Duration::from_secs(60),
        "acknowledged writes on node 0",
        || count_acked_on_0(&ledger) >= 50,
    );

    let killed = Instant::now();
    nodes[0].child.kill().expect("SIGKILL");
    let _ = nodes[0].child.wait();
    let acked_before = count_acked_on_0(&ledger);

    // The replica of node 0 (node 3) must serve slots 0-5460 as a primary.
    let mut watch = connect(nodes[3].port);
    let promoted = format!("{} ", nodes[3].id);
    wait_for(Duration::from_secs(60), "node 3 to take over", || {
        text(&mut watch, &[b"CLUSTER", b"NODES"]).lines().any(|l| {
            l.starts_with(&promoted) && l.contains("myself,master") && l.ends_with(" 0-5460")
        })
    });
    let took = killed.elapsed();
    eprintln!(
        "replica promoted {took:?} after the kill ({acked_before} writes acknowledged on node 0)"
    );
    let bound = Duration::from_millis(NODE_TIMEOUT_MS + 8000);
    assert!(took <= bound, "promotion took {took:?}, over {bound:?}");

    // The writers go on against the new layout until the cluster takes
    // writes for the old slots again (`{06S}` is in slot 0), then stop.
    let survivors = ports[1..].to_vec();
    let mut probe = ClusterClient::new(&survivors);
    let marker: &[u8] = b"{06S}after-failover";
    wait_for(Duration::from_secs(60), "writes to slot 0 again", || {
        matches!(
            probe.run(key_slot(marker), &[&[b"SET", marker, b"1"]]),
            Outcome::Reply(Reply::Simple(ref s)) if s == "OK"
        )
    });
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().expect("writer");
    }
    let (acked, maybe_present) = verify(&survivors, &ledger);
    eprintln!("{acked} acknowledged writes all readable; {maybe_present} unacknowledged present");
    assert!(
        acked > 100,
        "too few acknowledged writes ({acked}) to mean anything"
    );
    drop(nodes);
}
