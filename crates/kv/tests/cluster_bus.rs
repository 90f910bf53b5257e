//! Three in-process cluster nodes joined over the real cluster bus with
//! CLUSTER MEET, as `redis-cli --cluster create` joins them: every node
//! converges on the same table and the cluster turns `ok`; then clients
//! are redirected to the node that serves their key.

mod common;

use std::time::{Duration, Instant};

use common::TestServer;

fn node(dir: &std::path::Path) -> (TestServer, u16) {
    common::cluster_node(dir, 3000)
}

fn connect(server: &TestServer) -> redis::Connection {
    let client = redis::Client::open(format!("redis://{}/", server.addr)).expect("client");
    client.get_connection().expect("connection")
}

fn query<T: redis::FromRedisValue>(c: &mut redis::Connection, args: &[&str]) -> T {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(c).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// Polls `done` every 50 ms until it holds or `limit` passes.
fn wait_for(limit: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn three_nodes_meet_converge_and_redirect() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().expect("dir")).collect();
    let nodes: Vec<(TestServer, u16)> = dirs.iter().map(|d| node(d.path())).collect();
    let mut conns: Vec<_> = nodes.iter().map(|(s, _)| connect(s)).collect();
    let ranges = [("0", "5460"), ("5461", "10922"), ("10923", "16383")];
    let mut ids = Vec::new();
    for (i, c) in conns.iter_mut().enumerate() {
        let ok: String = query(c, &["CLUSTER", "ADDSLOTSRANGE", ranges[i].0, ranges[i].1]);
        assert_eq!(ok, "OK");
        let epoch = (i + 1).to_string();
        let ok: String = query(c, &["CLUSTER", "SET-CONFIG-EPOCH", &epoch]);
        assert_eq!(ok, "OK");
        ids.push(query::<String>(c, &["CLUSTER", "MYID"]));
    }
    for (server, bus) in &nodes[1..] {
        let port = server.addr.port().to_string();
        let ok: String = query(
            &mut conns[0],
            &["CLUSTER", "MEET", "127.0.0.1", &port, &bus.to_string()],
        );
        assert_eq!(ok, "OK");
    }
    // Every node learns every other (node 1 and 2 through node 0's
    // gossip) with its slots, and the cluster turns ok everywhere.
    wait_for(Duration::from_secs(30), "the three tables to agree", || {
        conns.iter_mut().all(|c| {
            let info: String = query(c, &["CLUSTER", "INFO"]);
            let nodes: String = query(c, &["CLUSTER", "NODES"]);
            info.contains("cluster_state:ok")
                && info.contains("cluster_known_nodes:3")
                && nodes.lines().count() == 3
                && nodes.lines().all(|l| l.contains(" connected "))
                && ids.iter().zip(ranges).all(|(id, (a, b))| {
                    nodes
                        .lines()
                        .any(|l| l.starts_with(id.as_str()) && l.ends_with(&format!(" {a}-{b}")))
                })
        })
    });
    // `foo` is in slot 12182, served by the third node.
    let slot: i64 = query(&mut conns[0], &["CLUSTER", "KEYSLOT", "foo"]);
    assert_eq!(slot, 12182);
    let err = redis::cmd("SET")
        .arg("foo")
        .arg("bar")
        .query::<String>(&mut conns[0])
        .expect_err("redirected");
    let text = format!("{err:?}");
    let third = format!("127.0.0.1:{}", nodes[2].0.addr.port());
    assert!(text.contains("12182") && text.contains(&third), "{text}");
    let ok: String = query(&mut conns[2], &["SET", "foo", "bar"]);
    assert_eq!(ok, "OK");
    let n: i64 = query(&mut conns[2], &["CLUSTER", "COUNTKEYSINSLOT", "12182"]);
    assert_eq!(n, 1);
    let keys: Vec<String> = query(&mut conns[2], &["CLUSTER", "GETKEYSINSLOT", "12182", "10"]);
    assert_eq!(keys, vec!["foo".to_string()]);
    // Keys of two slots in one command.
    let err = redis::cmd("MSET")
        .arg("a")
        .arg("1")
        .arg("b")
        .arg("2")
        .query::<String>(&mut conns[0])
        .expect_err("crossslot");
    assert!(err.to_string().contains("hash to the same slot"), "{err}");
    // PUBLISH on one node reaches the subscribers of the others over the
    // bus (the reply counts this node's receivers only, as Redis's).
    let mut sub = nodes[1].0.raw();
    sub.check(
        b"SUBSCRIBE news\r\n",
        b"*3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:1\r\n",
    );
    let receivers: i64 = query(&mut conns[0], &["PUBLISH", "news", "hello"]);
    assert_eq!(receivers, 0);
    sub.check(b"", b"*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$5\r\nhello\r\n");
    // nodes.conf holds the converged table.
    let text = std::fs::read_to_string(dirs[0].path().join("nodes.conf")).expect("nodes.conf");
    assert_eq!(text.lines().count(), 4, "{text}");
    assert!(
        text.ends_with("vars currentEpoch 3 lastVoteEpoch 0\n"),
        "{text}"
    );
}
