//! A script's interpreter is reused run after run: `redis.call` and
//! `redis.pcall` are made once and reach each run through a slot, `KEYS` and `ARGV` are
//! the same two tables refilled. These tests run scripts far more often
//! than the Lua stack has slots (8,000), through every path a call
//! takes (a reply, an error reply, a refusal, an error raised), so a
//! slot left behind per run or per call fails them; and they check that
//! what one script stored in `KEYS` and `ARGV` is gone for the next.

mod common;

use common::{resp, TestServer};

/// Sends `count` copies of `request` at once and expects `reply` each time.
fn repeat(c: &mut common::Raw, request: &[u8], reply: &[u8], count: usize) {
    c.check(&request.repeat(count), &reply.repeat(count));
}

#[test]
fn thousands_of_runs_through_every_path_of_a_call() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(&resp(&["SET", "text", "abc"]), b"+OK\r\n");
    let counter = resp(&[
        "EVAL",
        "redis.call('INCR', KEYS[1]) return #KEYS + #ARGV",
        "2",
        "n",
        "m",
        "a",
    ]);
    let protected = resp(&[
        "EVAL",
        "local r = redis.pcall('INCR', KEYS[1]) return r['err']",
        "1",
        "text",
    ]);
    let refused = resp(&["EVAL", "return redis.pcall('NOSUCH')['err']", "0"]);
    let raised = resp(&["EVAL", "return redis.call('INCR', KEYS[1])", "1", "text"]);
    for _ in 0..3 {
        repeat(&mut c, &counter, b":3\r\n", 3_000);
        repeat(
            &mut c,
            &protected,
            b"$43\r\nERR value is not an integer or out of range\r\n",
            1_000,
        );
        repeat(
            &mut c,
            &refused,
            b"$44\r\nERR Unknown Redis command called from script\r\n",
            1_000,
        );
        let text = "-ERR value is not an integer or out of range script: \
                    f59ddbd1d63e5aea60b8a398e1abbdc76cb45b98, on @user_script:1.\r\n";
        let sha = sha1_smol::Sha1::from("return redis.call('INCR', KEYS[1])")
            .digest()
            .to_string();
        let text = text.replace("f59ddbd1d63e5aea60b8a398e1abbdc76cb45b98", &sha);
        repeat(&mut c, &raised, text.as_bytes(), 1_000);
    }
    c.check(&resp(&["GET", "n"]), b"$4\r\n9000\r\n");
}

#[test]
fn what_a_script_stored_in_keys_and_argv_is_gone_for_the_next() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    let count = "local n = 0 for _ in pairs(KEYS) do n = n + 1 end \
                 for _ in pairs(ARGV) do n = n + 10 end return n";
    c.check(
        &resp(&["EVAL", count, "3", "a", "b", "c", "x", "y"]),
        b":23\r\n",
    );
    c.check(
        &resp(&[
            "EVAL",
            "KEYS[9] = 'k' KEYS.extra = 1 ARGV[1] = nil ARGV.more = {} return #KEYS",
            "2",
            "a",
            "b",
            "x",
        ]),
        b":2\r\n",
    );
    c.check(&resp(&["EVAL", count, "1", "a", "x"]), b":11\r\n");
    c.check(&resp(&["EVAL", count, "0"]), b":0\r\n");
    c.check(
        &resp(&[
            "EVAL",
            "return {KEYS[1], ARGV[1], ARGV[2]}",
            "1",
            "k",
            "v1",
            "v2",
        ]),
        b"*3\r\n$1\r\nk\r\n$2\r\nv1\r\n$2\r\nv2\r\n",
    );
}
