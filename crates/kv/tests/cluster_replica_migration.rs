//! Replica migration over the bus: primary A has two replicas, primary B
//! one; B's replica stops, so B is orphaned. Once B's replica is flagged
//! failing and B stayed orphaned for Redis's five seconds, the replica of
//! A with the smaller node ID (A keeps one, above the barrier of 1)
//! becomes B's replica and replicates from it; A's other replica stays.
//! Also: a primary whose last slot SETSLOT NODE hands to another node
//! follows that node as a replica.

mod common;

use std::time::{Duration, Instant};

use common::TestServer;

fn connect(server: &TestServer) -> redis::Connection {
    let client = redis::Client::open(format!("redis://{}/", server.addr)).expect("client");
    let c = client.get_connection().expect("connection");
    c.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    c
}

fn query<T: redis::FromRedisValue>(c: &mut redis::Connection, args: &[&str]) -> T {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(c).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool, describe: impl FnOnce() -> String) {
    let start = Instant::now();
    while !done() {
        if start.elapsed() >= Duration::from_secs(60) {
            panic!("timed out waiting for {what}\n{}", describe());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Joins `nodes` (all known to the first), each with a distinct epoch,
/// slots `ranges` to the first ones.
fn join(nodes: &[(TestServer, u16)], ranges: &[(&str, &str)]) -> Vec<String> {
    let mut ids = Vec::new();
    for (i, (server, _)) in nodes.iter().enumerate() {
        let mut c = connect(server);
        if let Some((a, b)) = ranges.get(i) {
            let _: String = query(&mut c, &["CLUSTER", "ADDSLOTSRANGE", a, b]);
        }
        let _: String = query(
            &mut c,
            &["CLUSTER", "SET-CONFIG-EPOCH", &(i + 1).to_string()],
        );
        ids.push(query::<String>(&mut c, &["CLUSTER", "MYID"]));
    }
    let mut first = connect(&nodes[0].0);
    for (server, bus) in &nodes[1..] {
        let (port, bus) = (server.addr.port().to_string(), bus.to_string());
        let _: String = query(&mut first, &["CLUSTER", "MEET", "127.0.0.1", &port, &bus]);
    }
    let count = nodes.len();
    wait_for(
        "every node to know every other",
        || {
            nodes.iter().all(|(s, _)| {
                let text: String = query(&mut connect(s), &["CLUSTER", "NODES"]);
                text.lines().count() == count && !text.contains("handshake")
            })
        },
        String::new,
    );
    ids
}

#[test]
fn a_replica_migrates_to_an_orphaned_primary() {
    let dirs: Vec<_> = (0..5).map(|_| tempfile::tempdir().expect("dir")).collect();
    let mut nodes: Vec<(TestServer, u16)> = dirs
        .iter()
        .map(|d| common::cluster_node(d.path(), 1000))
        .collect();
    // 0 = A, 1 = B, 2 and 3 replicate A, 4 replicates B.
    let ids = join(&nodes, &[("0", "8191"), ("8192", "16383")]);
    for (r, p) in [(2, 0), (3, 0), (4, 1)] {
        let _: String = query(
            &mut connect(&nodes[r].0),
            &["CLUSTER", "REPLICATE", &ids[p]],
        );
    }
    wait_for(
        "the roles to spread and the cluster to be ok",
        || {
            nodes.iter().all(|(s, _)| {
                let mut c = connect(s);
                let info: String = query(&mut c, &["CLUSTER", "INFO"]);
                let text: String = query(&mut c, &["CLUSTER", "NODES"]);
                info.contains("cluster_state:ok") && text.matches("slave").count() == 3
            })
        },
        String::new,
    );

    // B's replica stops; B is orphaned.
    let (stopped, _) = nodes.remove(4);
    stopped.stop();
    let mover = if ids[2] < ids[3] { 2 } else { 3 };
    let stayer = 5 - mover;
    let (mover_id, stayer_id) = (&ids[mover], &ids[stayer]);
    let b_port = nodes[1].0.addr.port();
    let mut watch = connect(&nodes[mover].0);
    wait_for(
        "the replica with the smaller ID to follow B",
        || {
            let text: String = query(&mut watch, &["CLUSTER", "NODES"]);
            text.lines()
                .any(|l| l.starts_with(mover_id.as_str()) && l.contains(&format!(" {} ", ids[1])))
        },
        || query::<String>(&mut connect(&nodes[mover].0), &["CLUSTER", "NODES"]),
    );
    wait_for(
        "its replication link to B",
        || {
            let info: String = query(&mut watch, &["INFO", "replication"]);
            info.contains(&format!("master_port:{b_port}"))
                && info.contains("master_link_status:up")
        },
        || query::<String>(&mut connect(&nodes[mover].0), &["INFO", "replication"]),
    );
    let text: String = query(&mut connect(&nodes[stayer].0), &["CLUSTER", "NODES"]);
    let line = text
        .lines()
        .find(|l| l.starts_with(stayer_id.as_str()))
        .expect("the other replica's line");
    assert!(line.contains(&format!(" {} ", ids[0])), "{line}");
}

#[test]
fn a_primary_without_slots_follows_their_new_owner() {
    let dirs: Vec<_> = (0..2).map(|_| tempfile::tempdir().expect("dir")).collect();
    let nodes: Vec<(TestServer, u16)> = dirs
        .iter()
        .map(|d| common::cluster_node(d.path(), 1000))
        .collect();
    let ids = join(&nodes, &[("0", "16382"), ("16383", "16383")]);
    // As redis-cli ends a slot's move: the new owner first, then the old.
    let mut a = connect(&nodes[0].0);
    let _: String = query(&mut a, &["CLUSTER", "SETSLOT", "16383", "NODE", &ids[0]]);
    let mut b = connect(&nodes[1].0);
    let _: String = query(&mut b, &["CLUSTER", "SETSLOT", "16383", "NODE", &ids[0]]);
    let text: String = query(&mut b, &["CLUSTER", "NODES"]);
    let me = text
        .lines()
        .find(|l| l.contains("myself"))
        .expect("myself line");
    assert!(me.contains(&format!("myself,slave {}", ids[0])), "{me}");
    let a_port = nodes[0].0.addr.port();
    wait_for(
        "its replication link to the new owner",
        || {
            let info: String = query(&mut b, &["INFO", "replication"]);
            info.contains(&format!("master_port:{a_port}"))
        },
        String::new,
    );
}
