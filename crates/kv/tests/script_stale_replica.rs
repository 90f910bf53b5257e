//! Scripts on a stale replica (link to its master down,
//! `replica-serve-stale-data no`), byte for byte as Redis 7.0.15 answers:
//! a script's declared flags decide at dispatch (`allow-stale`,
//! `no-writes`), a script without a shebang is refused as any command
//! needing fresh data, and a script allowed to run may only call commands
//! that serve stale data.

mod common;

use common::{resp, Raw, TestServer};

const LIBRARY: &str = "#!lua name=stale\n\
redis.register_function{function_name='plain_ro', callback=function() return 'hello' end, flags={'no-writes'}}\n\
redis.register_function{function_name='stale_ok', callback=function() return 'hello' end, flags={'allow-stale', 'no-writes'}}\n\
redis.register_function{function_name='stale_get', callback=function() return redis.call('get', 'x') end, flags={'allow-stale', 'no-writes'}}\n\
redis.register_function{function_name='stale_echo', callback=function() return redis.call('echo', 'hi') end, flags={'allow-stale', 'no-writes'}}\n\
redis.register_function{function_name='writer', callback=function() return redis.call('set', 'x', '1') end}\n";

const MASTERDOWN: &[u8] =
    b"-MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.\r\n";

/// A server holding the library, made a replica of a port nobody listens
/// on, so its link stays down; `serve_stale` sets
/// `replica-serve-stale-data`.
fn stale_replica(dir: &std::path::Path, serve_stale: &str) -> (TestServer, Raw) {
    let server = TestServer::start(dir);
    let mut raw = server.raw();
    raw.check(&resp(&["FUNCTION", "LOAD", LIBRARY]), b"$5\r\nstale\r\n");
    raw.check(
        &resp(&["CONFIG", "SET", "replica-serve-stale-data", serve_stale]),
        b"+OK\r\n",
    );
    raw.check(&resp(&["REPLICAOF", "127.0.0.1", "1"]), b"+OK\r\n");
    (server, raw)
}

#[test]
fn declared_flags_decide_on_a_stale_replica() {
    let dir = tempfile::tempdir().expect("dir");
    let (server, mut raw) = stale_replica(dir.path(), "no");
    // Without `allow-stale` the function is refused before it runs.
    raw.check(&resp(&["FCALL", "plain_ro", "0"]), MASTERDOWN);
    raw.check(&resp(&["FCALL", "stale_ok", "0"]), b"$5\r\nhello\r\n");
    raw.check(&resp(&["FCALL", "stale_echo", "0"]), b"$2\r\nhi\r\n");
    // Allowed to start, but GET does not serve stale data.
    raw.check(
        &resp(&["FCALL", "stale_get", "0"]),
        b"-ERR Can not execute the command on a stale replica script: stale_get, on @user_function:4.\r\n",
    );
    // A function that may write is a write: the read-only replica refuses
    // it first.
    raw.check(
        &resp(&["FCALL", "writer", "0"]),
        b"-READONLY You can't write against a read only replica.\r\n",
    );
    server.stop();
}

#[test]
fn eval_scripts_on_a_stale_replica() {
    let dir = tempfile::tempdir().expect("dir");
    let (server, mut raw) = stale_replica(dir.path(), "no");
    // No shebang: refused as a command needing fresh data would be.
    raw.check(
        &resp(&["EVAL", "return redis.call('get','x')", "1", "x"]),
        MASTERDOWN,
    );
    raw.check(
        &resp(&["EVAL", "#!lua flags=no-writes\nreturn 1", "0"]),
        MASTERDOWN,
    );
    raw.check(
        &resp(&["EVAL", "#!lua flags=allow-stale,no-writes\nreturn 1", "0"]),
        b":1\r\n",
    );
    raw.check(
        &resp(&[
            "EVAL",
            "#!lua flags=allow-stale,no-writes\nreturn redis.call('get','x')",
            "1",
            "x",
        ]),
        b"-ERR Can not execute the command on a stale replica script: 8451e27ad085d38836051c42cc3d0a026c6c56a4, on @user_script:2.\r\n",
    );
    server.stop();
}

#[test]
fn serving_stale_data_runs_every_read_only_script() {
    let dir = tempfile::tempdir().expect("dir");
    let (server, mut raw) = stale_replica(dir.path(), "yes");
    raw.check(&resp(&["FCALL", "plain_ro", "0"]), b"$5\r\nhello\r\n");
    raw.check(&resp(&["FCALL", "stale_get", "0"]), b"$-1\r\n");
    raw.check(
        &resp(&["EVAL", "return redis.call('get','x')", "1", "x"]),
        b"$-1\r\n",
    );
    raw.check(
        &resp(&["FCALL", "writer", "0"]),
        b"-READONLY You can't write against a read only replica.\r\n",
    );
    // Promoted again, the writer writes.
    raw.check(&resp(&["REPLICAOF", "NO", "ONE"]), b"+OK\r\n");
    raw.check(&resp(&["FCALL", "writer", "0"]), b"+OK\r\n");
    server.stop();
}
