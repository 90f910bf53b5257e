//! Function libraries travel in a full sync's payload (the RDB's
//! function records) and replace the replica's own, as its keys are
//! replaced: a library only the replica had does not outlive the sync.

mod common;

use common::repl::{call, eventually, Pair};
use common::Raw;

fn library(name: &str, function: &str, answer: &str) -> String {
    format!(
        "#!lua name={name}\nredis.register_function{{function_name='{function}', \
         callback=function() return '{answer}' end, flags={{'no-writes'}}}}"
    )
}

fn load(c: &mut Raw, code: &str) {
    let got = call(c, &["FUNCTION", "LOAD", code]);
    assert!(got.starts_with('$'), "FUNCTION LOAD: {got}");
}

#[test]
fn a_full_sync_replaces_the_replicas_libraries_with_the_masters() {
    let pair = Pair::start(|_| {});
    let (mut m, mut r) = (pair.master.raw(), pair.replica.raw());
    load(&mut m, &library("mlib", "from_master", "master"));
    load(&mut r, &library("rlib", "from_replica", "replica"));
    assert_eq!(
        call(&mut r, &["FCALL", "from_replica", "0"]),
        "$7\r\nreplica\r\n"
    );

    pair.link(&mut r);
    eventually("the master's library is loaded", || {
        call(&mut r, &["FCALL", "from_master", "0"]) == "$6\r\nmaster\r\n"
    });
    assert_eq!(
        call(&mut r, &["FCALL", "from_replica", "0"]),
        "-ERR Function not found\r\n"
    );
    let list = call(&mut r, &["FUNCTION", "LIST"]);
    assert!(list.contains("mlib"), "{list}");
    assert!(!list.contains("rlib"), "{list}");

    // A library loaded later on the master follows through the stream.
    load(&mut m, &library("later", "added", "later"));
    eventually("the streamed library is loaded", || {
        call(&mut r, &["FCALL", "added", "0"]) == "$5\r\nlater\r\n"
    });
}
