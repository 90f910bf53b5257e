//! DEBUG POPULATE's keys stay off the replication stream, as in Redis
//! (its populate neither logs nor replicates them), while Ferrite's own
//! log keeps them: the master's restart still has them, the replica's
//! offset does not move for them, and the writes after them replicate.

mod common;

use common::repl::{call, eventually, info_field, Pair};
use common::TestServer;

#[test]
fn populated_keys_are_logged_but_not_replicated() {
    let pair = Pair::start(|c| {
        c.set("enable-debug-command", &["yes".to_string()])
            .expect("enable-debug-command");
    });
    let (mut m, mut r) = (pair.master.raw(), pair.replica.raw());
    pair.link(&mut r);

    let before = info_field(&mut m, "master_repl_offset");
    assert_eq!(
        call(&mut m, &["DEBUG", "POPULATE", "100", "pop"]),
        "+OK\r\n"
    );
    assert_eq!(call(&mut m, &["DBSIZE"]), ":100\r\n");
    assert_eq!(
        info_field(&mut m, "master_repl_offset"),
        before,
        "populated keys went into the replication stream"
    );
    assert_eq!(call(&mut m, &["SET", "after", "1"]), "+OK\r\n");
    eventually("the later write replicates", || {
        call(&mut r, &["GET", "after"]) == "$1\r\n1\r\n"
    });
    assert_eq!(call(&mut r, &["DBSIZE"]), ":1\r\n");

    // The master's log holds them: a restart brings them back.
    drop((m, r));
    let Pair {
        replica,
        master,
        dirs,
    } = pair;
    replica.stop();
    master.stop();
    let restarted = TestServer::start(dirs.0.path());
    let mut m = restarted.raw();
    assert_eq!(call(&mut m, &["DBSIZE"]), ":101\r\n");
    assert_eq!(call(&mut m, &["GET", "pop:7"]), "$7\r\nvalue:7\r\n");
}
