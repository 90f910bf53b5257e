//! Cluster mode, as Redis 7.0 behaves: a client blocked on a key whose
//! slot moves away is released with `-MOVED` (with `-CLUSTERDOWN Hash
//! slot not served` once the slot has no owner), while clients blocked on
//! slots still served keep waiting; and a script's calls are held to the
//! node's slots and, unless it allows cross-slot keys, to one slot.

mod common;

use std::time::{Duration, Instant};

use common::{resp, Raw, TestServer};

fn text(c: &mut Raw, args: &[&str]) -> String {
    String::from_utf8_lossy(&c.roundtrip_any(&resp(args))).into_owned()
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn myid(c: &mut Raw) -> String {
    let reply = text(c, &["CLUSTER", "MYID"]);
    reply
        .strip_prefix("$40\r\n")
        .and_then(|r| r.strip_suffix("\r\n"))
        .unwrap_or_else(|| panic!("MYID replied {reply:?}"))
        .to_string()
}

/// Two nodes that know each other, A serving every slot; full coverage
/// is not required, so a slot without owner leaves the cluster up.
fn two_nodes(da: &std::path::Path, db: &std::path::Path) -> (TestServer, TestServer) {
    let (a, _) = common::cluster_node(da, 3000);
    let (b, b_bus) = common::cluster_node(db, 3000);
    let (mut ca, mut cb) = (a.raw(), b.raw());
    for c in [&mut ca, &mut cb] {
        c.check(
            &resp(&["CONFIG", "SET", "cluster-require-full-coverage", "no"]),
            b"+OK\r\n",
        );
    }
    ca.check(
        &resp(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]),
        b"+OK\r\n",
    );
    let b_port = b.addr.port().to_string();
    ca.check(
        &resp(&["CLUSTER", "MEET", "127.0.0.1", &b_port, &b_bus.to_string()]),
        b"+OK\r\n",
    );
    wait_for("both nodes to know each other and turn ok", || {
        [&mut ca, &mut cb].into_iter().all(|c| {
            let info = text(c, &["CLUSTER", "INFO"]);
            info.contains("cluster_state:ok") && info.contains("cluster_known_nodes:2")
        })
    });
    (a, b)
}

#[test]
fn blocked_clients_follow_their_slot() {
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (a, b) = two_nodes(da.path(), db.path());
    let mut admin = a.raw();
    let b_id = myid(&mut b.raw());
    let b_at = format!("127.0.0.1:{}", b.addr.port());

    // Three clients block on A: on a slot that will move (`{foo}`, slot
    // 12182), on a slot that will lose its owner (`a`, slot 15495), and
    // on a slot that stays (`b`, slot 3300).
    let (mut moving, mut orphan, mut staying) = (a.raw(), a.raw(), a.raw());
    for (c, key) in [
        (&mut moving, "{foo}list"),
        (&mut orphan, "a"),
        (&mut staying, "b"),
    ] {
        assert_eq!(text(c, &["BLPOP", key, "0"]), "", "BLPOP {key} blocks");
    }

    admin.check(
        &resp(&["CLUSTER", "SETSLOT", "12182", "NODE", &b_id]),
        b"+OK\r\n",
    );
    moving.check(b"", format!("-MOVED 12182 {b_at}\r\n").as_bytes());

    admin.check(&resp(&["CLUSTER", "DELSLOTS", "15495"]), b"+OK\r\n");
    orphan.check(b"", b"-CLUSTERDOWN Hash slot not served\r\n");

    // The client on a slot A still serves was not released: a push
    // serves it.
    assert_eq!(text(&mut staying, &["PING"]), "", "still blocked");
    admin.check(&resp(&["RPUSH", "b", "x"]), b":1\r\n");
    staying.check(b"", b"*2\r\n$1\r\nb\r\n$1\r\nx\r\n+PONG\r\n");

    // The released clients can send commands again.
    moving.check(&resp(&["PING"]), b"+PONG\r\n");
    let stats = text(&mut admin, &["INFO", "errorstats"]);
    assert!(stats.contains("errorstat_MOVED:count=1"), "{stats}");
    assert!(stats.contains("errorstat_CLUSTERDOWN:count=1"), "{stats}");
}

#[test]
fn scripts_stay_on_this_nodes_slots() {
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (a, b) = two_nodes(da.path(), db.path());
    let mut c = a.raw();
    let b_id = myid(&mut b.raw());
    c.check(
        &resp(&["CLUSTER", "SETSLOT", "12182", "NODE", &b_id]),
        b"+OK\r\n",
    );

    // A key of a slot B serves, named by a call but not declared.
    let reply = text(&mut c, &["EVAL", "return redis.call('get', '{foo}x')", "0"]);
    assert!(
        reply.starts_with(
            "-ERR Script attempted to access a non local key in a cluster node script: "
        ),
        "{reply}"
    );

    // Keys of two slots (a: 15495, b: 3300), both served here: refused
    // for a script with flags, allowed without flags (Redis keeps old
    // scripts working) or with `allow-cross-slot-keys`.
    let two_slots = "redis.call('set', 'a', '1') return redis.call('set', 'b', '1')";
    let reply = text(&mut c, &["EVAL", &format!("#!lua\n{two_slots}"), "0"]);
    assert!(
        reply.starts_with(
            "-ERR Script attempted to access keys that do not hash to the same slot script: "
        ),
        "{reply}"
    );
    assert_eq!(
        text(&mut c, &["GET", "b"]),
        "$-1\r\n",
        "the second call did not run"
    );
    assert_eq!(text(&mut c, &["EVAL", two_slots, "0"]), "+OK\r\n");
    let flagged = format!("#!lua flags=allow-cross-slot-keys\n{two_slots}");
    assert_eq!(text(&mut c, &["EVAL", &flagged, "0"]), "+OK\r\n");

    // The declared key's slot counts as the first one.
    let reply = text(
        &mut c,
        &["EVAL", "#!lua\nreturn redis.call('get', 'b')", "1", "a"],
    );
    assert!(reply.contains("do not hash to the same slot"), "{reply}");
    assert_eq!(
        text(
            &mut c,
            &["EVAL", "#!lua\nreturn redis.call('get', KEYS[1])", "1", "a"]
        ),
        "$1\r\n1\r\n"
    );
}
