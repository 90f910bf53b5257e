//! Plain `CLUSTER FAILOVER` (the coordinated manual failover): two
//! primaries and a replica of the first; a client keeps incrementing a
//! counter on the first primary while its replica runs CLUSTER FAILOVER.
//! The primary pauses its writers, the replica catches up and wins the
//! election, the old primary follows it, and every increment the old
//! primary acknowledged is on the new one, with no WAIT: the pause is
//! what guarantees it. The paused writer's next command is redirected.

mod common;

use std::time::{Duration, Instant};

use common::TestServer;

fn connect(addr: std::net::SocketAddr) -> redis::Connection {
    let client = redis::Client::open(format!("redis://{addr}/")).expect("client");
    let c = client.get_connection().expect("connection");
    c.set_read_timeout(Some(Duration::from_secs(20)))
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

/// Polls `done` every 50 ms until it holds, or panics after `limit`.
fn wait_for(limit: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Primary 0 (slots 0-8191), primary 1 (8192-16383), node 2 replicating
/// node 0; returns the nodes, their connections and IDs.
fn three_nodes(
    dirs: &[tempfile::TempDir],
) -> (Vec<TestServer>, Vec<redis::Connection>, Vec<String>) {
    let nodes: Vec<(TestServer, u16)> = dirs
        .iter()
        .map(|d| common::cluster_node(d.path(), 2000))
        .collect();
    let mut conns: Vec<_> = nodes.iter().map(|n| connect(n.0.addr)).collect();
    let ranges = [("0", "8191"), ("8192", "16383")];
    let mut ids = Vec::new();
    for (i, c) in conns.iter_mut().enumerate() {
        if let Some((a, b)) = ranges.get(i) {
            let _: String = query(c, &["CLUSTER", "ADDSLOTSRANGE", a, b]);
        }
        let _: String = query(c, &["CLUSTER", "SET-CONFIG-EPOCH", &(i + 1).to_string()]);
        ids.push(query::<String>(c, &["CLUSTER", "MYID"]));
    }
    for n in &nodes[1..] {
        let (port, bus) = (n.0.addr.port().to_string(), n.1.to_string());
        let _: String = query(
            &mut conns[0],
            &["CLUSTER", "MEET", "127.0.0.1", &port, &bus],
        );
    }
    let limit = Duration::from_secs(40);
    wait_for(limit, "three nodes everywhere", || {
        conns.iter_mut().all(|c| {
            let nodes: String = query(c, &["CLUSTER", "NODES"]);
            nodes.lines().count() == 3 && !nodes.contains("handshake")
        })
    });
    let _: String = query(&mut conns[2], &["CLUSTER", "REPLICATE", &ids[0]]);
    wait_for(limit, "the replica known everywhere, linked, ok", || {
        let linked = {
            let info: String = query(&mut conns[2], &["INFO", "replication"]);
            info.contains("master_link_status:up")
        };
        linked
            && conns.iter_mut().all(|c| {
                let info: String = query(c, &["CLUSTER", "INFO"]);
                let nodes: String = query(c, &["CLUSTER", "NODES"]);
                info.contains("cluster_state:ok") && nodes.matches("slave").count() == 1
            })
    });
    (nodes.into_iter().map(|n| n.0).collect(), conns, ids)
}

#[test]
fn plain_cluster_failover_pauses_the_primary_and_loses_no_write() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().expect("dir")).collect();
    let (nodes, mut conns, ids) = three_nodes(&dirs);

    // A primary refuses it, as Redis does.
    let on_primary: redis::RedisResult<String> =
        redis::cmd("CLUSTER").arg("FAILOVER").query(&mut conns[0]);
    let e = on_primary.expect_err("a primary refuses CLUSTER FAILOVER");
    assert!(e
        .to_string()
        .contains("You should send CLUSTER FAILOVER to a replica"));

    // The writer: INCR of a key in slot 0 on node 0 until redirected.
    let primary = nodes[0].addr;
    let writer = std::thread::spawn(move || {
        let mut c = connect(primary);
        let mut acked = 0i64;
        loop {
            match redis::cmd("INCR").arg("{06S}counter").query::<i64>(&mut c) {
                Ok(n) => acked = n,
                Err(e) => return (acked, e.to_string()),
            }
        }
    });
    wait_for(Duration::from_secs(20), "increments on node 0", || {
        let n: Option<i64> = query(&mut conns[0], &["GET", "{06S}counter"]);
        n.unwrap_or(0) > 200
    });

    let _: String = query(&mut conns[2], &["CLUSTER", "FAILOVER"]);
    let started = Instant::now();
    let (two, zero) = (format!("{} ", ids[2]), format!("{} ", ids[0]));
    wait_for(
        Duration::from_secs(30),
        "node 2 to serve 0-8191 and node 0 to follow it",
        || {
            let nodes: String = query(&mut conns[0], &["CLUSTER", "NODES"]);
            nodes
                .lines()
                .any(|l| l.starts_with(&two) && l.contains("master") && l.ends_with(" 0-8191"))
                && nodes
                    .lines()
                    .any(|l| l.starts_with(&zero) && l.contains("myself,slave"))
        },
    );
    eprintln!("manual failover took {:?}", started.elapsed());
    let (acked, ended) = writer.join().expect("writer");
    // The paused write was released once node 0 became a replica, and
    // was redirected to the new primary rather than taken by a replica.
    assert!(
        ended.to_uppercase().contains("MOVED") && ended.contains(&nodes[2].addr.port().to_string()),
        "the writer ended with {ended}"
    );
    let on_new: i64 = query(&mut conns[2], &["GET", "{06S}counter"]);
    assert!(
        on_new >= acked && acked > 200,
        "node 0 acknowledged {acked} increments, node 2 has {on_new}"
    );
    let role: Vec<redis::Value> = query(&mut conns[2], &["ROLE"]);
    assert_eq!(
        role.first(),
        Some(&redis::Value::BulkString(b"master".to_vec()))
    );
    // Node 0 follows node 2 and receives its writes.
    let _: i64 = query(&mut conns[2], &["INCR", "{06S}counter"]);
    wait_for(
        Duration::from_secs(20),
        "node 0 to replicate node 2",
        || {
            let mut c = connect(nodes[0].addr);
            let _: String = query(&mut c, &["READONLY"]);
            let n: Option<i64> = query(&mut c, &["GET", "{06S}counter"]);
            n == Some(on_new + 1)
        },
    );
}
