//! Replication between two Ferrite servers over Redis's protocol:
//! REPLICAOF, the full sync, the stream of writes (expiries, MULTI),
//! partial resync after the link is cut, WAIT, READONLY, promotion, and a
//! replica's dataset surviving its restart.

mod common;

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use common::repl::{call, eventually, info_field};
use common::{Raw, TestServer};

/// Makes `replica` replicate `master` and waits for the link to be up.
fn attach(replica: &mut Raw, master: &TestServer) {
    // No wait for more replicas before the full sync.
    master
        .raw()
        .check(b"CONFIG SET repl-diskless-sync-delay 0\r\n", b"+OK\r\n");
    let port = master.addr.port().to_string();
    assert_eq!(call(replica, &["REPLICAOF", "127.0.0.1", &port]), "+OK\r\n");
    eventually("the link", || {
        info_field(replica, "master_link_status") == "up"
    });
}

/// Waits until the replica's offset reaches the master's.
fn converge(master: &mut Raw, replica: &mut Raw) {
    eventually("the offsets to meet", || {
        let want = info_field(master, "master_repl_offset");
        info_field(replica, "master_repl_offset") == want
    });
}

#[test]
fn full_sync_then_the_stream_with_expiries_and_transactions() {
    let (d1, d2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = TestServer::start(d1.path());
    let replica_server = TestServer::start(d2.path());
    let mut m = master.raw();
    let mut r = replica_server.raw();
    m.check(b"SET s hello\r\n", b"+OK\r\n");
    m.check(b"RPUSH l a b c\r\n", b":3\r\n");
    m.check(b"HSET h f v\r\n", b":1\r\n");
    m.check(b"SADD set x y\r\n", b":2\r\n");
    m.check(b"ZADD z 1.5 a 2 b\r\n", b":2\r\n");
    m.check(b"SET ttl v EX 1000\r\n", b"+OK\r\n");
    m.check(b"SELECT 3\r\nSET db3 yes\r\n", b"+OK\r\n+OK\r\n");
    attach(&mut r, &master);
    r.check(b"GET s\r\n", b"$5\r\nhello\r\n");
    r.check(
        b"LRANGE l 0 -1\r\n",
        b"*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n",
    );
    r.check(b"ZSCORE z a\r\n", b"$3\r\n1.5\r\n");
    r.check(b"SCARD set\r\n", b":2\r\n");
    let ttl: i64 = call(&mut r, &["TTL", "ttl"])[1..].trim().parse().unwrap();
    assert!((990..=1000).contains(&ttl), "{ttl}");
    r.check(b"SELECT 3\r\nGET db3\r\n", b"+OK\r\n$3\r\nyes\r\n");

    // The stream: a relative expiry, a transaction, a deletion.
    m.check(b"SET later v PX 100000\r\n", b"+OK\r\n");
    m.check(
        b"MULTI\r\nINCR n\r\nINCR n\r\nEXEC\r\n",
        b"+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n:1\r\n:2\r\n",
    );
    m.check(b"DEL db3\r\n", b":1\r\n");
    converge(&mut m, &mut r);
    r.check(b"GET n\r\n", b"$1\r\n2\r\n");
    r.check(b"EXISTS db3\r\n", b":0\r\n");
    assert!(call(&mut r, &["PTTL", "later"]).starts_with(":9"));

    // Roles and INFO.
    assert_eq!(info_field(&mut r, "role"), "slave");
    assert_eq!(info_field(&mut m, "connected_slaves"), "1");
    assert_eq!(
        info_field(&mut m, "master_replid"),
        info_field(&mut r, "master_replid")
    );
    let role = call(&mut r, &["ROLE"]);
    assert!(
        role.starts_with("*5\r\n$5\r\nslave\r\n$9\r\n127.0.0.1\r\n"),
        "{role}"
    );
    assert!(role.contains("$9\r\nconnected\r\n"), "{role}");
    assert!(call(&mut m, &["ROLE"]).starts_with("*3\r\n$6\r\nmaster\r\n"));
}

#[test]
fn a_replica_is_read_only_and_wait_counts_its_acks() {
    let (d1, d2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = TestServer::start(d1.path());
    let replica_server = TestServer::start(d2.path());
    let mut m = master.raw();
    let mut r = replica_server.raw();
    attach(&mut r, &master);
    r.check(
        b"SET k v\r\n",
        b"-READONLY You can't write against a read only replica.\r\n",
    );
    r.check(
        b"WAIT 0 0\r\n",
        b"-ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated.\r\n",
    );
    m.check(b"SET k v\r\n", b"+OK\r\n");
    m.check(b"WAIT 1 5000\r\n", b":1\r\n");
    // Two replicas asked for, one exists: the timeout answers 1.
    m.check(b"WAIT 2 200\r\n", b":1\r\n");
    m.check(b"CONFIG SET min-replicas-to-write 2\r\n", b"+OK\r\n");
    m.check(
        b"SET k w\r\n",
        b"-NOREPLICAS Not enough good replicas to write.\r\n",
    );
    m.check(b"CONFIG SET min-replicas-to-write 1\r\n", b"+OK\r\n");
    m.check(b"SET k w\r\n", b"+OK\r\n");
    converge(&mut m, &mut r);
    r.check(b"GET k\r\n", b"$1\r\nw\r\n");
    r.check(b"CONFIG SET replica-read-only no\r\n", b"+OK\r\n");
    r.check(b"SET local 1\r\n", b"+OK\r\n");
}

#[test]
fn a_cut_link_resumes_with_a_partial_resync() {
    let (d1, d2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = TestServer::start(d1.path());
    let replica_server = TestServer::start(d2.path());
    let mut m = master.raw();
    let mut r = replica_server.raw();
    m.check(b"SET a 1\r\n", b"+OK\r\n");
    attach(&mut r, &master);
    assert_eq!(info_field(&mut m, "sync_full"), "1");
    r.check(b"CLIENT KILL TYPE master\r\n", b":1\r\n");
    m.check(b"SET b 2\r\n", b"+OK\r\n");
    eventually("the partial resync", || {
        info_field(&mut m, "sync_partial_ok") == "1"
    });
    converge(&mut m, &mut r);
    r.check(b"MGET a b\r\n", b"*2\r\n$1\r\n1\r\n$1\r\n2\r\n");
    assert_eq!(info_field(&mut m, "sync_full"), "1");
}

#[test]
fn replicaof_no_one_promotes_and_the_replica_keeps_its_data() {
    let (d1, d2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = TestServer::start(d1.path());
    let replica_server = TestServer::start(d2.path());
    let mut m = master.raw();
    let mut r = replica_server.raw();
    r.check(b"SET stale old\r\n", b"+OK\r\n");
    m.check(b"SET k v\r\nRPUSH l 1 2\r\n", b"+OK\r\n:2\r\n");
    attach(&mut r, &master);
    // The full sync replaced the replica's own data.
    r.check(b"EXISTS stale\r\n", b":0\r\n");
    m.check(b"INCR counter\r\n", b":1\r\n");
    converge(&mut m, &mut r);
    let port = master.addr.port().to_string();
    assert_eq!(
        call(&mut r, &["REPLICAOF", "127.0.0.1", &port]),
        "+OK Already connected to specified master\r\n"
    );
    r.check(
        b"REPLICAOF localhost x\r\n",
        b"-ERR Invalid master port\r\n",
    );
    r.check(b"REPLICAOF NO ONE\r\n", b"+OK\r\n");
    r.check(b"SET after promotion\r\n", b"+OK\r\n");
    assert!(call(&mut r, &["ROLE"]).starts_with("*3\r\n$6\r\nmaster\r\n"));
    drop(r);
    replica_server.stop();
    // The synced dataset and what followed are in the replica's own log.
    let again = TestServer::start(d2.path());
    let mut r = again.raw();
    r.check(
        b"MGET k counter after stale\r\n",
        b"*4\r\n$1\r\nv\r\n$1\r\n1\r\n$9\r\npromotion\r\n$-1\r\n",
    );
    r.check(b"LLEN l\r\n", b":2\r\n");
}

#[test]
fn a_replica_with_its_link_down_serves_stale_data_only_if_told() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(b"SET k v\r\n", b"+OK\r\n");
    // Port 1 refuses: the link stays down.
    c.check(b"REPLICAOF 127.0.0.1 1\r\n", b"+OK\r\n");
    c.check(b"GET k\r\n", b"$1\r\nv\r\n");
    c.check(b"CONFIG SET replica-serve-stale-data no\r\n", b"+OK\r\n");
    c.check(
        b"GET k\r\n",
        b"-MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.\r\n",
    );
    c.check(b"REPLICAOF NO ONE\r\n", b"+OK\r\n");
    c.check(b"MULTI\r\nPING\r\n", b"+OK\r\n+QUEUED\r\n");
    // The server turns stale between the queueing and EXEC.
    server.raw().check(b"REPLICAOF 127.0.0.1 1\r\n", b"+OK\r\n");
    c.check(
        b"EXEC\r\n",
        b"-EXECABORT Transaction discarded because of: MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.\r\n",
    );
    assert!(info_field(&mut c, "master_link_status") == "down");
    c.check(b"REPLICAOF NO ONE\r\nGET k\r\n", b"+OK\r\n$1\r\nv\r\n");
}

#[test]
fn becoming_a_replica_releases_blocked_clients_with_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut blocked = server.raw();
    blocked.stream.write_all(b"BLPOP list 0\r\n").expect("send");
    let mut c = server.raw();
    eventually("the client to block", || {
        info_field_in(&mut c, "clients", "blocked_clients") == "1"
    });
    c.check(b"REPLICAOF 127.0.0.1 1\r\n", b"+OK\r\n");
    blocked.check(
        b"",
        b"-UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)\r\n",
    );
    assert!(blocked.is_closed());
    c.check(b"REPLICAOF NO ONE\r\n", b"+OK\r\n");
}

fn info_field_in(c: &mut Raw, section: &str, field: &str) -> String {
    call(c, &["INFO", section])
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or("")
        .trim()
        .to_string()
}

#[test]
fn a_promoted_replica_continues_its_sibling_partially() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let a = TestServer::start(dirs[0].path());
    let b = TestServer::start(dirs[1].path());
    let c = TestServer::start(dirs[2].path());
    let (mut ca, mut cb, mut cc) = (a.raw(), b.raw(), c.raw());
    ca.check(b"SET k 1\r\n", b"+OK\r\n");
    attach(&mut cb, &a);
    attach(&mut cc, &a);
    ca.check(b"INCR k\r\n", b":2\r\n");
    converge(&mut ca, &mut cb);
    converge(&mut ca, &mut cc);
    // B takes over; C follows it without a full sync.
    cb.check(b"REPLICAOF NO ONE\r\n", b"+OK\r\n");
    assert_eq!(
        info_field(&mut cb, "master_replid2"),
        info_field(&mut ca, "master_replid")
    );
    attach(&mut cc, &b);
    assert_eq!(info_field(&mut cb, "sync_partial_ok"), "1");
    assert_eq!(info_field(&mut cb, "sync_full"), "0");
    cb.check(b"INCR k\r\n", b":3\r\n");
    converge(&mut cb, &mut cc);
    cc.check(b"GET k\r\n", b"$1\r\n3\r\n");
}

#[test]
fn a_full_sync_waits_the_diskless_delay_for_more_replicas() {
    let (d1, d2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = TestServer::start(d1.path());
    let replica = TestServer::start(d2.path());
    let mut m = master.raw();
    let mut r = replica.raw();
    m.check(b"CONFIG SET repl-diskless-sync-delay 1\r\n", b"+OK\r\n");
    let port = master.addr.port().to_string();
    let started = Instant::now();
    assert_eq!(call(&mut r, &["REPLICAOF", "127.0.0.1", &port]), "+OK\r\n");
    // The replica waits for the answer to its PSYNC meanwhile.
    eventually("the handshake", || {
        call(&mut r, &["ROLE"]).contains("$9\r\nhandshake\r\n")
    });
    eventually("the link", || {
        info_field(&mut r, "master_link_status") == "up"
    });
    assert!(started.elapsed() >= Duration::from_secs(1));
}

#[test]
fn failover_refuses_what_redis_refuses() {
    let dirs: Vec<_> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let a = TestServer::start(dirs[0].path());
    let b = TestServer::start(dirs[1].path());
    let (mut ca, mut cb) = (a.raw(), b.raw());
    ca.check(
        b"FAILOVER\r\n",
        b"-ERR FAILOVER requires connected replicas.\r\n",
    );
    ca.check(b"FAILOVER ABORT\r\n", b"-ERR No failover in progress.\r\n");
    ca.check(
        b"FAILOVER TIMEOUT 0\r\n",
        b"-ERR FAILOVER timeout must be greater than 0\r\n",
    );
    ca.check(b"FAILOVER TO h\r\n", b"-ERR syntax error\r\n");
    ca.check(
        b"FAILOVER TO h x\r\n",
        b"-ERR value is not an integer or out of range\r\n",
    );
    ca.check(b"FAILOVER FORCE FORCE\r\n", b"-ERR syntax error\r\n");
    // A master cannot be asked to take over.
    ca.check(
        b"PSYNC x 1 FAILOVER\r\n",
        b"-ERR PSYNC FAILOVER can't be sent to a master.\r\n",
    );
    attach(&mut cb, &a);
    ca.check(
        b"FAILOVER FORCE TIMEOUT 100\r\n",
        b"-ERR FAILOVER with force option requires both a timeout and target HOST and IP.\r\n",
    );
    ca.check(
        b"FAILOVER TO 10.9.9.9 1\r\n",
        b"-ERR FAILOVER target HOST and PORT is not a replica.\r\n",
    );
    cb.check(
        b"FAILOVER\r\n",
        b"-ERR FAILOVER is not valid when server is a replica.\r\n",
    );
    // The ID must be the replica's own (its master's).
    cb.check(
        b"PSYNC 0000000000000000000000000000000000000000 1 FAILOVER\r\n",
        b"-ERR PSYNC FAILOVER replid must match my replid.\r\n",
    );
    assert!(call(&mut cb, &["ROLE"]).contains("slave"));
}

#[test]
fn failover_hands_the_master_role_to_the_replica_without_a_full_sync() {
    let dirs: Vec<_> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let a = TestServer::start(dirs[0].path());
    let b = TestServer::start(dirs[1].path());
    let (mut ca, mut cb) = (a.raw(), b.raw());
    attach(&mut cb, &a);
    ca.check(b"SET k 1\r\nINCR k\r\n", b"+OK\r\n:2\r\n");
    let port = b.addr.port().to_string();
    assert_eq!(
        call(
            &mut ca,
            &["FAILOVER", "TO", "127.0.0.1", &port, "TIMEOUT", "10000"]
        ),
        "+OK\r\n"
    );
    eventually("the failover to end", || {
        info_field(&mut ca, "master_failover_state") == "no-failover"
    });
    eventually("the old master's link", || {
        info_field(&mut ca, "master_link_status") == "up"
    });
    assert!(call(&mut ca, &["ROLE"]).starts_with("*5\r\n$5\r\nslave"));
    assert!(call(&mut cb, &["ROLE"]).starts_with("*3\r\n$6\r\nmaster"));
    // The old master followed by a partial resync, with every write.
    assert_eq!(info_field(&mut cb, "sync_partial_ok"), "1");
    assert_eq!(info_field(&mut cb, "sync_full"), "0");
    cb.check(b"INCR k\r\n", b":3\r\n");
    converge(&mut cb, &mut ca);
    ca.check(b"GET k\r\n", b"$1\r\n3\r\n");
    ca.check(
        b"SET k 0\r\n",
        b"-READONLY You can't write against a read only replica.\r\n",
    );
}

#[test]
fn a_replica_announces_the_address_its_master_shows() {
    let dirs: Vec<_> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let a = TestServer::start(dirs[0].path());
    let b = TestServer::start_with(dirs[1].path(), |c| {
        c.set("replica-announce-ip", &["10.1.2.3".into()]).unwrap();
        c.set("replica-announce-port", &["7777".into()]).unwrap();
    });
    let (mut ca, mut cb) = (a.raw(), b.raw());
    attach(&mut cb, &a);
    let info = call(&mut ca, &["INFO", "replication"]);
    assert!(info.contains("slave0:ip=10.1.2.3,port=7777,"), "{info}");
}

#[test]
fn a_master_drops_a_replica_silent_past_repl_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let a = TestServer::start(dir.path());
    let mut ca = a.raw();
    ca.check(
        b"CONFIG SET repl-timeout 1\r\nCONFIG SET repl-diskless-sync-delay 0\r\n",
        b"+OK\r\n+OK\r\n",
    );
    // A hand-made replica: attaches, acknowledges once, then falls silent.
    let mut r = a.raw();
    r.check(b"REPLCONF listening-port 4444\r\n", b"+OK\r\n");
    r.stream.write_all(b"PSYNC ? -1\r\n").unwrap();
    let mut head = [0u8; 11];
    r.stream.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"+FULLRESYNC");
    r.stream.write_all(b"REPLCONF ACK 0\r\n").unwrap();
    eventually("the replica to attach", || {
        info_field(&mut ca, "connected_slaves") == "1"
    });
    // Silent for longer than 1 s: the master closes the link (bounded by
    // the read timeout of the connection, 10 s).
    let mut sink = [0u8; 4096];
    loop {
        match r.stream.read(&mut sink) {
            Ok(0) => break,
            Ok(_) => continue,
            Err(e) => panic!("the master kept the silent replica: {e}"),
        }
    }
    assert_eq!(info_field(&mut ca, "connected_slaves"), "0");
}
