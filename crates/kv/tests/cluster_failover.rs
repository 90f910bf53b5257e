//! Automatic failover over the bus: three primaries with a replica each
//! (joined as `redis-cli --cluster create --cluster-replicas 1` joins
//! them); a primary stops; the others mark it FAIL, its replica wins the
//! election, takes its slots, and still holds the write acknowledged by
//! `WAIT 1` before the stop.

mod common;

use std::time::{Duration, Instant};

use common::TestServer;

fn node(dir: &std::path::Path) -> (TestServer, u16) {
    common::cluster_node(dir, 1000)
}

fn connect(server: &TestServer) -> redis::Connection {
    connect_to(server.addr)
}

fn connect_to(addr: std::net::SocketAddr) -> redis::Connection {
    let client = redis::Client::open(format!("redis://{addr}/")).expect("client");
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

fn wait_for(limit: Duration, what: &str, done: impl FnMut() -> bool) {
    wait_or(limit, what, done, String::new);
}

/// [`wait_for`], with `describe` saying what the nodes see on a timeout.
fn wait_or(
    limit: Duration,
    what: &str,
    mut done: impl FnMut() -> bool,
    describe: impl FnOnce() -> String,
) {
    let start = Instant::now();
    while !done() {
        if start.elapsed() >= limit {
            panic!("timed out waiting for {what}\n{}", describe());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_stopped_primary_is_replaced_by_its_replica() {
    let dirs: Vec<_> = (0..6).map(|_| tempfile::tempdir().expect("dir")).collect();
    let mut nodes: Vec<Option<(TestServer, u16)>> =
        dirs.iter().map(|d| Some(node(d.path()))).collect();
    let mut conns: Vec<redis::Connection> = nodes
        .iter()
        .map(|n| connect(&n.as_ref().expect("node").0))
        .collect();
    let ranges = [("0", "5460"), ("5461", "10922"), ("10923", "16383")];
    let mut ids = Vec::new();
    for (i, c) in conns.iter_mut().enumerate() {
        if let Some((a, b)) = ranges.get(i) {
            let _: String = query(c, &["CLUSTER", "ADDSLOTSRANGE", a, b]);
        }
        let _: String = query(c, &["CLUSTER", "SET-CONFIG-EPOCH", &(i + 1).to_string()]);
        ids.push(query::<String>(c, &["CLUSTER", "MYID"]));
    }
    for n in nodes[1..].iter().flatten() {
        let (port, bus) = (n.0.addr.port().to_string(), n.1.to_string());
        let _: String = query(
            &mut conns[0],
            &["CLUSTER", "MEET", "127.0.0.1", &port, &bus],
        );
    }
    let limit = Duration::from_secs(40);
    wait_for(limit, "six nodes everywhere", || {
        conns.iter_mut().all(|c| {
            let nodes: String = query(c, &["CLUSTER", "NODES"]);
            nodes.lines().count() == 6 && !nodes.contains("handshake")
        })
    });
    // Node 3 replicates node 0, 4 node 1, 5 node 2.
    for r in 3..6 {
        let _: String = query(&mut conns[r], &["CLUSTER", "REPLICATE", &ids[r - 3]]);
    }
    wait_for(
        limit,
        "the replicas' roles to spread and the cluster to be ok",
        || {
            conns.iter_mut().all(|c| {
                let info: String = query(c, &["CLUSTER", "INFO"]);
                let nodes: String = query(c, &["CLUSTER", "NODES"]);
                info.contains("cluster_state:ok") && nodes.matches("slave").count() == 3
            })
        },
    );
    // A write on node 0 (`{06S}` keys are in slot 0), acknowledged by its replica.
    let slot: i64 = query(&mut conns[0], &["CLUSTER", "KEYSLOT", "{06S}k"]);
    assert!(slot <= 5460);
    wait_for(limit, "the replica's link", || {
        let info: String = query(&mut conns[3], &["INFO", "replication"]);
        info.contains("master_link_status:up")
    });
    let _: String = query(&mut conns[0], &["SET", "{06S}k", "kept"]);
    let acked: i64 = query(&mut conns[0], &["WAIT", "1", "5000"]);
    assert_eq!(acked, 1);

    // Node 0 stops.
    let stopped = Instant::now();
    if let Some((server, _)) = nodes[0].take() {
        server.stop();
    }
    let promoted = format!("{} ", ids[3]);
    let (mut watch, mut show) = (
        connect(&nodes[3].as_ref().expect("node 3").0),
        connect(&nodes[1].as_ref().expect("node 1").0),
    );
    let node3 = nodes[3].as_ref().expect("node 3").0.addr;
    wait_or(
        limit,
        "node 3 to take over slots 0-5460",
        || {
            let nodes: String = query(&mut watch, &["CLUSTER", "NODES"]);
            nodes.lines().any(|l| {
                l.starts_with(&promoted) && l.contains("myself,master") && l.ends_with(" 0-5460")
            })
        },
        || {
            let a: String = query(&mut show, &["CLUSTER", "NODES"]);
            let mut again = connect_to(node3);
            let b: String = query(&mut again, &["CLUSTER", "NODES"]);
            let c: String = query(&mut again, &["CLUSTER", "INFO"]);
            format!("node 1:\n{a}\nnode 3:\n{b}\n{c}")
        },
    );
    let took = stopped.elapsed();
    wait_for(limit, "the survivors to agree and be ok", || {
        conns[1..].iter_mut().all(|c| {
            let info: String = query(c, &["CLUSTER", "INFO"]);
            let nodes: String = query(c, &["CLUSTER", "NODES"]);
            info.contains("cluster_state:ok")
                && nodes.lines().any(|l| {
                    l.starts_with(&promoted) && l.contains("master") && l.ends_with(" 0-5460")
                })
                && nodes
                    .lines()
                    .any(|l| l.starts_with(ids[0].as_str()) && l.contains("fail"))
        })
    });
    let role: Vec<redis::Value> = query(&mut conns[3], &["ROLE"]);
    assert_eq!(
        role.first(),
        Some(&redis::Value::BulkString(b"master".to_vec()))
    );
    let value: String = query(&mut conns[3], &["GET", "{06S}k"]);
    assert_eq!(value, "kept");
    let _: String = query(&mut conns[3], &["SET", "{06S}k", "after"]);
    // Within the node timeout plus Redis's election delays (the issue's
    // bound is the timeout + 2 s; allow for a loaded test machine).
    assert!(took < Duration::from_secs(20), "failover took {took:?}");
    eprintln!("failover took {took:?}");

    // A manual takeover: node 4 takes node 1's slots without votes, and
    // node 1, having lost its last slot to it, becomes its replica.
    let plain: redis::RedisResult<String> =
        redis::cmd("CLUSTER").arg("FAILOVER").query(&mut conns[1]);
    assert!(plain.is_err(), "a primary refuses CLUSTER FAILOVER");
    let _: String = query(&mut conns[4], &["CLUSTER", "FAILOVER", "TAKEOVER"]);
    let (four, one) = (format!("{} ", ids[4]), format!("{} ", ids[1]));
    wait_for(
        limit,
        "node 4 to serve 5461-10922 and node 1 to follow it",
        || {
            let nodes: String = query(&mut conns[1], &["CLUSTER", "NODES"]);
            let role: Vec<redis::Value> = query(&mut conns[1], &["ROLE"]);
            nodes
                .lines()
                .any(|l| l.starts_with(&four) && l.contains("master") && l.ends_with(" 5461-10922"))
                && nodes
                    .lines()
                    .any(|l| l.starts_with(&one) && l.contains("myself,slave"))
                && role.first() == Some(&redis::Value::BulkString(b"slave".to_vec()))
        },
    );
}
