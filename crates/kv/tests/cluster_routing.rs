//! Key-slot routing in the command path, byte for byte as Redis 7.0
//! answers: MOVED, ASK and ASKING over a slot being migrated, TRYAGAIN,
//! CROSSSLOT (also across a transaction), CLUSTERDOWN, SELECT.

mod common;

use std::time::{Duration, Instant};

use common::{resp, Raw, TestServer};

fn node(dir: &std::path::Path) -> (TestServer, u16) {
    common::cluster_node(dir, 3000)
}

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

/// CLUSTER MYID's bulk reply, `$40\r\n<id>\r\n`, as the ID.
fn myid(c: &mut Raw) -> String {
    let reply = text(c, &["CLUSTER", "MYID"]);
    let id = reply
        .strip_prefix("$40\r\n")
        .and_then(|r| r.strip_suffix("\r\n"));
    id.unwrap_or_else(|| panic!("MYID replied {reply:?}"))
        .to_string()
}

/// `{foo}`-tagged keys share slot 12182.
const SLOT: &str = "12182";

#[test]
fn redirections_follow_the_slot_states() {
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (a, _) = node(da.path());
    let (b, b_bus) = node(db.path());
    let (mut ca, mut cb) = (a.raw(), b.raw());
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
    let (a_id, b_id) = (myid(&mut ca), myid(&mut cb));
    let (a_id, b_id) = (a_id.as_str(), b_id.as_str());
    let a_at = format!("127.0.0.1:{}", a.addr.port());
    let b_at = format!("127.0.0.1:{b_port}");

    // B serves nothing: MOVED to A.
    cb.check(
        b"GET foo\r\n",
        format!("-MOVED {SLOT} {a_at}\r\n").as_bytes(),
    );
    // Keys of different slots, and a transaction whose commands are.
    ca.check(
        b"MSET a 1 b 2\r\n",
        b"-CROSSSLOT Keys in request don't hash to the same slot\r\n",
    );
    ca.check(
        b"MULTI\r\nSET a 1\r\nSET b 1\r\n",
        b"+OK\r\n+QUEUED\r\n+QUEUED\r\n",
    );
    ca.check(
        b"EXEC\r\n",
        b"-CROSSSLOT Keys in request don't hash to the same slot\r\n",
    );
    ca.check(b"EXEC\r\n", b"-ERR EXEC without MULTI\r\n");
    ca.check(
        b"SELECT 1\r\n",
        b"-ERR SELECT is not allowed in cluster mode\r\n",
    );
    ca.check(b"SELECT 0\r\n", b"+OK\r\n");

    // Slot 12182 moves from A to B.
    ca.check(&resp(&["SET", "{foo}here", "1"]), b"+OK\r\n");
    ca.check(
        &resp(&["CLUSTER", "SETSLOT", SLOT, "MIGRATING", b_id]),
        b"+OK\r\n",
    );
    cb.check(
        &resp(&["CLUSTER", "SETSLOT", SLOT, "IMPORTING", a_id]),
        b"+OK\r\n",
    );
    // A serves keys it still has, sends the client to B for the others,
    // and refuses a mix.
    ca.check(&resp(&["GET", "{foo}here"]), b"$1\r\n1\r\n");
    ca.check(
        &resp(&["GET", "{foo}gone"]),
        format!("-ASK {SLOT} {b_at}\r\n").as_bytes(),
    );
    ca.check(
        &resp(&["MGET", "{foo}here", "{foo}gone"]),
        b"-TRYAGAIN Multiple keys request during rehashing of slot\r\n",
    );
    // B serves the slot only after ASKING, for one command.
    cb.check(
        &resp(&["GET", "{foo}gone"]),
        format!("-MOVED {SLOT} {a_at}\r\n").as_bytes(),
    );
    cb.check(b"ASKING\r\n", b"+OK\r\n");
    cb.check(&resp(&["SET", "{foo}gone", "2"]), b"+OK\r\n");
    cb.check(
        &resp(&["GET", "{foo}gone"]),
        format!("-MOVED {SLOT} {a_at}\r\n").as_bytes(),
    );
    cb.check(b"ASKING\r\n", b"+OK\r\n");
    cb.check(
        &resp(&["MGET", "{foo}gone", "{foo}here"]),
        b"-TRYAGAIN Multiple keys request during rehashing of slot\r\n",
    );
    // A cannot give the slot away while it holds keys there.
    ca.check(
        &resp(&["CLUSTER", "SETSLOT", SLOT, "NODE", b_id]),
        format!("-ERR Can't assign hashslot {SLOT} to a different node while I still hold keys for this hash slot.\r\n").as_bytes(),
    );
    ca.check(&resp(&["DEL", "{foo}here"]), b":1\r\n");
    ca.check(
        &resp(&["CLUSTER", "SETSLOT", SLOT, "NODE", b_id]),
        b"+OK\r\n",
    );
    cb.check(
        &resp(&["CLUSTER", "SETSLOT", SLOT, "NODE", b_id]),
        b"+OK\r\n",
    );
    ca.check(
        &resp(&["GET", "{foo}gone"]),
        format!("-MOVED {SLOT} {b_at}\r\n").as_bytes(),
    );
    cb.check(&resp(&["GET", "{foo}gone"]), b"$1\r\n2\r\n");
    // B's new ownership reaches A's table through the bus too.
    let b_slot_line = format!(" {SLOT}\n");
    wait_for("A to see B's slot", || {
        text(&mut ca, &["CLUSTER", "NODES"])
            .lines()
            .any(|l| l.starts_with(b_id) && format!("{l}\n").ends_with(&b_slot_line))
    });

    // A slot nobody serves.
    ca.check(&resp(&["CLUSTER", "DELSLOTS", "0"]), b"+OK\r\n");
    // Key `06S` hashes to slot 0.
    ca.check(&resp(&["CLUSTER", "KEYSLOT", "06S"]), b":0\r\n");
    ca.check(
        &resp(&["GET", "06S"]),
        b"-CLUSTERDOWN Hash slot not served\r\n",
    );
    // Without full coverage the cluster goes down for every key.
    wait_for("the cluster to go down", || {
        text(&mut ca, &["CLUSTER", "INFO"]).contains("cluster_state:fail")
    });
    ca.check(
        &resp(&["GET", "x"]),
        b"-CLUSTERDOWN The cluster is down\r\n",
    );
    ca.check(&resp(&["PING"]), b"+PONG\r\n");
}
