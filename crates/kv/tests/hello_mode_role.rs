//! HELLO's `mode` and `role` fields: `cluster` when cluster mode is on,
//! `replica` while the server follows a primary, as Redis 7.0 answers.

mod common;

use common::TestServer;

/// HELLO 3's map as (field, value) text pairs, through the redis crate.
fn hello(addr: std::net::SocketAddr) -> Vec<(String, String)> {
    let client = redis::Client::open(format!("redis://{addr}/")).expect("client");
    let mut con = client.get_connection().expect("connect");
    let reply: redis::Value = redis::cmd("HELLO").arg(3).query(&mut con).expect("HELLO");
    let redis::Value::Map(pairs) = reply else {
        panic!("HELLO 3 answered {reply:?}, not a map");
    };
    pairs
        .into_iter()
        .filter_map(|(k, v)| {
            let k: String = redis::from_redis_value(&k).ok()?;
            let v: String = redis::from_redis_value(&v).ok()?;
            Some((k, v))
        })
        .collect()
}

fn field(pairs: &[(String, String)], name: &str) -> String {
    pairs
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| panic!("HELLO has no {name}: {pairs:?}"))
}

#[test]
fn a_standalone_primary_says_standalone_and_master() {
    let dir = tempfile::tempdir().expect("dir");
    let server = TestServer::start(dir.path());
    let pairs = hello(server.addr);
    assert_eq!(field(&pairs, "mode"), "standalone");
    assert_eq!(field(&pairs, "role"), "master");
}

#[test]
fn a_cluster_node_says_cluster() {
    let dir = tempfile::tempdir().expect("dir");
    let (server, _bus) = common::cluster_node(dir.path(), 5000);
    assert_eq!(field(&hello(server.addr), "mode"), "cluster");
}

#[test]
fn a_replica_says_replica_and_master_again_once_promoted() {
    let (a, b) = (
        tempfile::tempdir().expect("dir"),
        tempfile::tempdir().expect("dir"),
    );
    let primary = TestServer::start(a.path());
    let replica = TestServer::start(b.path());
    let client = redis::Client::open(format!("redis://{}/", replica.addr)).expect("client");
    let mut con = client.get_connection().expect("connect");
    let _: () = redis::cmd("REPLICAOF")
        .arg(primary.addr.ip().to_string())
        .arg(primary.addr.port())
        .query(&mut con)
        .expect("REPLICAOF");
    // The role changes when REPLICAOF is accepted, before the link is up.
    assert_eq!(field(&hello(replica.addr), "role"), "replica");
    let _: () = redis::cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query(&mut con)
        .expect("REPLICAOF NO ONE");
    assert_eq!(field(&hello(replica.addr), "role"), "master");
}
