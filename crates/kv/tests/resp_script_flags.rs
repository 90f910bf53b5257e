//! `#!lua` shebangs and their flags, `redis.set_repl`, and the version
//! constants: replies as Redis 7.0.15's, and what a script logs.

mod common;

use common::{resp, TestServer};

#[test]
fn shebang_errors_and_flags() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(
        &resp(&["EVAL", "#!not-lua\nreturn 1", "0"]),
        b"-ERR Unexpected engine in script shebang: #!not-lua\r\n",
    );
    c.check(
        &resp(&["EVAL", "#!lua badger=data\nreturn 1", "0"]),
        b"-ERR Unknown lua shebang option: badger=data\r\n",
    );
    c.check(
        &resp(&["EVAL", "#!lua flags=allow-oom,what?\nreturn 1", "0"]),
        b"-ERR Unexpected flag in script shebang: what?\r\n",
    );
    c.check(
        &resp(&["SCRIPT", "LOAD", "#!lua"]),
        b"-ERR Invalid script shebang\r\n",
    );
    c.check(&resp(&["EVAL", "#!lua\nreturn 1", "0"]), b":1\r\n");
    // The shebang's line counts: the error names line 2.
    c.check(
        &resp(&["EVAL", "#!lua flags=no-writes\nreturn redis.call('set','x',1)", "0"]),
        b"-ERR Write commands are not allowed from read-only scripts. script: 0da8acfc3df79811000ffcaca482af70e298d476, on @user_script:2.\r\n",
    );
    c.check(
        &resp(&["EVAL_RO", "#!lua\nreturn 1", "0"]),
        b"-ERR Can not execute a script with write flag using *_ro command.\r\n",
    );
    c.check(
        &resp(&["EVAL_RO", "#!lua flags=no-writes\nreturn redis.call('publish','x',1)", "0"]),
        b"-ERR Write commands are not allowed from read-only scripts. script: 641a5fb0dc6a86124177b6eea29c1c0be9aa8b21, on @user_script:2.\r\n",
    );
    c.check(
        &resp(&[
            "EVAL",
            "return {redis.REDIS_VERSION, redis.REDIS_VERSION_NUM}",
            "0",
        ]),
        b"*2\r\n$6\r\n7.0.15\r\n:458767\r\n",
    );
    c.check(
        &resp(&["EVAL", "\n\nreturn redis.set_repl(7)", "0"]),
        b"-ERR Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE. script: 5e21506ed10f448212658251e2b3148656b664ce, on @user_script:3.\r\n",
    );
}

#[test]
fn allow_oom_and_no_writes_over_maxmemory() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(&resp(&["SET", "x", "123"]), b"+OK\r\n");
    c.check(&resp(&["CONFIG", "SET", "maxmemory", "1"]), b"+OK\r\n");
    c.check(
        &resp(&["EVAL", "#!lua flags=\nreturn 1", "0"]),
        b"-OOM allow-oom flag is not set on the script, can not run it when used memory > 'maxmemory'\r\n",
    );
    c.check(
        &resp(&[
            "EVAL",
            "#!lua flags=allow-oom\nredis.call('set','x',1) return 1",
            "1",
            "x",
        ]),
        b":1\r\n",
    );
    c.check(
        &resp(&[
            "EVAL",
            "#!lua flags=no-writes\nreturn redis.call('get','x')",
            "0",
        ]),
        b"$1\r\n1\r\n",
    );
    c.check(
        &resp(&["EVAL", "return redis.call('get','x')", "1", "x"]),
        b"$1\r\n1\r\n",
    );
    c.check(&resp(&["CONFIG", "SET", "maxmemory", "0"]), b"+OK\r\n");
}

#[test]
fn set_repl_decides_what_is_logged() {
    let dir = tempfile::tempdir().unwrap();
    {
        let server = TestServer::start(dir.path());
        let mut c = server.raw();
        c.check(
            &resp(&[
                "EVAL",
                "redis.call('set','a','1') redis.set_repl(redis.REPL_NONE) redis.call('set','b','2') redis.set_repl(redis.REPL_ALL) redis.call('set','c','3') return redis.replicate_commands()",
                "0",
            ]),
            b":1\r\n",
        );
        c.check(
            &resp(&["MGET", "a", "b", "c"]),
            b"*3\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n",
        );
        server.stop();
    }
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(
        &resp(&["MGET", "a", "b", "c"]),
        b"*3\r\n$1\r\n1\r\n$-1\r\n$1\r\n3\r\n",
    );
}

#[test]
fn setresp_converts_replies_both_ways() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start_with(dir.path(), |c| {
        c.set("enable-debug-command", &["yes".into()]).unwrap()
    });
    let mut c = server.raw();
    c.check(&resp(&["HSET", "hash", "field", "value"]), b":1\r\n");
    let map3 = "redis.setresp(3); return redis.call('hgetall', KEYS[1])";
    let map2 = "redis.setresp(2); return redis.call('hgetall', KEYS[1])";
    let list = b"*2\r\n$5\r\nfield\r\n$5\r\nvalue\r\n";
    c.check(&resp(&["EVAL", map3, "1", "hash"]), list);
    c.check(&resp(&["EVAL", map2, "1", "hash"]), list);
    c.check(
        &resp(&["DEBUG", "SET-DISABLE-DENY-SCRIPTS", "1"]),
        b"+OK\r\n",
    );
    let hello = c.roundtrip_any(&resp(&["HELLO", "3"]));
    assert!(hello.starts_with(b"%"));
    c.check(
        &resp(&["EVAL", map3, "1", "hash"]),
        b"%1\r\n$5\r\nfield\r\n$5\r\nvalue\r\n",
    );
    c.check(&resp(&["EVAL", map2, "1", "hash"]), list);
    let cases: &[(&str, &[u8])] = &[
        (
            "redis.setresp(3);return redis.call('debug', 'protocol', 'double')",
            b",3.141\r\n",
        ),
        (
            "redis.setresp(2);return redis.call('debug', 'protocol', 'double')",
            b"$5\r\n3.141\r\n",
        ),
        (
            "redis.setresp(3);return redis.call('debug', 'protocol', 'true')",
            b"#t\r\n",
        ),
        (
            "redis.setresp(2);return redis.call('debug', 'protocol', 'true')",
            b":1\r\n",
        ),
        (
            "redis.setresp(3);return redis.call('debug', 'protocol', 'null')",
            b"_\r\n",
        ),
        (
            "redis.setresp(3);return redis.call('debug', 'protocol', 'set')",
            b"~3\r\n",
        ),
        (
            "redis.setresp(3);return redis.call('debug', 'protocol', 'verbatim')",
            b"=29\r\ntxt:This is a verbatim\nstring\r\n",
        ),
        (
            "redis.setresp(3);return redis.call('debug', 'protocol', 'bignum')",
            b"(1234567999999999999999999999999999999\r\n",
        ),
        (
            "redis.setresp(3);return redis.call('debug', 'protocol', 'attrib')",
            b"$39\r\nSome real reply following the attribute\r\n",
        ),
        ("return {big_number='123\\r\\n123'}", b"(123  123\r\n"),
        (
            "return redis.setresp(4)",
            b"-ERR RESP version must be 2 or 3. script: ",
        ),
    ];
    for (script, expected) in cases {
        let got = c.roundtrip_any(&resp(&["EVAL", script, "0"]));
        assert!(
            got.starts_with(expected),
            "{script}: {}",
            String::from_utf8_lossy(&got)
        );
    }
}

#[test]
fn read_only_scripts_are_not_held_by_client_pause_write() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(
        &resp(&[
            "FUNCTION",
            "LOAD",
            "#!lua name=f1\nredis.register_function{function_name='f1', callback=function() return 'hello' end, flags={'no-writes'}}",
        ]),
        b"$2\r\nf1\r\n",
    );
    c.check(&resp(&["CLIENT", "PAUSE", "6000000", "WRITE"]), b"+OK\r\n");
    let mut rr = server.raw();
    rr.check(
        &resp(&["EVAL", "#!lua flags=no-writes\nreturn 'unique script'", "0"]),
        b"$13\r\nunique script\r\n",
    );
    rr.check(&resp(&["FCALL", "F1", "0"]), b"$5\r\nhello\r\n");
    rr.check(&resp(&["EVAL_RO", "return 2", "0"]), b":2\r\n");
    c.check(&resp(&["CLIENT", "UNPAUSE"]), b"+OK\r\n");
}

#[test]
fn the_globals_and_the_redis_table_are_read_only() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    for script in [
        "setmetatable(_G, {})",
        "local g = getmetatable(_G) g.__index = {}",
        "redis = function() return 1 end",
        "_G = {}",
        "redis.call = function() return 1 end",
    ] {
        let got = c.roundtrip_any(&resp(&["EVAL", script, "0"]));
        let text = String::from_utf8_lossy(&got);
        assert!(
            text.contains("Attempt to modify a readonly table"),
            "{script}: {text}"
        );
    }
    let got = c.roundtrip_any(&resp(&[
        "EVAL",
        "return loadstring(string.dump(function() return 1 end))()",
        "0",
    ]));
    assert!(
        String::from_utf8_lossy(&got).contains("attempt to call"),
        "{}",
        String::from_utf8_lossy(&got)
    );
    c.check(
        &resp(&["EVAL", "return redis.call('ping')", "0"]),
        b"+PONG\r\n",
    );
}

#[test]
fn writable_scripts_need_good_replicas_as_writes_do() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(
        b"SET x v\r\nCONFIG SET min-replicas-to-write 1\r\n",
        b"+OK\r\n+OK\r\n",
    );
    c.check(
        &resp(&["EVAL", "#!lua\nreturn redis.call('get','x')", "1", "x"]),
        b"-NOREPLICAS Not enough good replicas to write.\r\n",
    );
    c.check(
        &resp(&[
            "EVAL",
            "#!lua flags=no-writes\nreturn redis.call('get','x')",
            "1",
            "x",
        ]),
        b"$1\r\nv\r\n",
    );
    // Without a shebang the script runs, and its write is refused.
    let got = c.roundtrip_any(&resp(&[
        "EVAL",
        "return redis.call('set','x','1')",
        "1",
        "x",
    ]));
    assert!(
        got.starts_with(b"-NOREPLICAS Not enough good replicas to write."),
        "{}",
        String::from_utf8_lossy(&got)
    );
    c.check(b"CONFIG SET min-replicas-to-write 0\r\n", b"+OK\r\n");
    c.check(
        &resp(&["EVAL", "#!lua\nreturn redis.call('get','x')", "1", "x"]),
        b"$1\r\nv\r\n",
    );
}
