//! FUNCTION and FCALL: replies as Redis 7.0.15's, RESP2 and RESP3, the
//! load-time sandbox's errors, DUMP/RESTORE, and libraries surviving a
//! restart with and without a log rewrite in between.

mod common;

use std::time::{Duration, Instant};

use common::{resp, TestServer};

const LIB: &str = "#!lua name=mylib\nredis.register_function{function_name='get', callback=function(keys, args) return redis.call('get', keys[1]) end, flags={'no-writes'}, description='reads'}\nredis.register_function('set', function(keys, args) return redis.call('set', keys[1], args[1]) end)";

const LIST: &[u8] = b"*1\r\n*6\r\n$12\r\nlibrary_name\r\n$5\r\nmylib\r\n$6\r\nengine\r\n$3\r\nLUA\r\n$9\r\nfunctions\r\n*2\r\n*6\r\n$4\r\nname\r\n$3\r\nget\r\n$11\r\ndescription\r\n$5\r\nreads\r\n$5\r\nflags\r\n*1\r\n+no-writes\r\n*6\r\n$4\r\nname\r\n$3\r\nset\r\n$11\r\ndescription\r\n$-1\r\n$5\r\nflags\r\n*0\r\n";

#[test]
fn load_list_call_and_errors() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(&resp(&["FUNCTION", "LOAD", LIB]), b"$5\r\nmylib\r\n");
    c.check(
        &resp(&["FUNCTION", "LOAD", LIB]),
        b"-ERR Library 'mylib' already exists\r\n",
    );
    c.check(
        &resp(&["FUNCTION", "LOAD", "REPLACE", LIB]),
        b"$5\r\nmylib\r\n",
    );
    c.check(&resp(&["FUNCTION", "LIST"]), LIST);
    c.check(&resp(&["FCALL", "set", "1", "k", "v"]), b"+OK\r\n");
    c.check(
        &resp(&["FCALL_RO", "set", "1", "k", "v"]),
        b"-ERR Can not execute a script with write flag using *_ro command.\r\n",
    );
    c.check(&resp(&["FCALL_RO", "get", "1", "k"]), b"$1\r\nv\r\n");
    c.check(
        &resp(&["FCALL", "nosuch", "0"]),
        b"-ERR Function not found\r\n",
    );
    c.check(
        &resp(&["FCALL", "get", "x"]),
        b"-ERR Bad number of keys provided\r\n",
    );
    c.check(
        &resp(&["FCALL", "get", "1"]),
        b"-ERR Number of keys can't be greater than number of args\r\n",
    );
    c.check(
        &resp(&["FCALL", "get", "-1", "a"]),
        b"-ERR Number of keys can't be negative\r\n",
    );
    c.check(
        &resp(&["FUNCTION", "STATS"]),
        b"*4\r\n$14\r\nrunning_script\r\n$-1\r\n$7\r\nengines\r\n*2\r\n$3\r\nLUA\r\n*4\r\n$15\r\nlibraries_count\r\n:1\r\n$15\r\nfunctions_count\r\n:2\r\n",
    );
    c.check(
        &resp(&["FUNCTION", "LIST", "LIBRARYNAME"]),
        b"-ERR library name argument was not given\r\n",
    );
    c.check(
        &resp(&["FUNCTION", "LIST", "foo"]),
        b"-ERR Unknown argument foo\r\n",
    );
    c.check(&resp(&["FUNCTION", "LIST", "LIBRARYNAME", "x*"]), b"*0\r\n");
    c.check(
        &resp(&["FUNCTION", "KILL"]),
        b"-NOTBUSY No scripts in execution right now.\r\n",
    );
    c.check(
        &resp(&["FUNCTION", "DELETE", "nolib"]),
        b"-ERR Library not found\r\n",
    );
    c.check(
        &resp(&["FUNCTION", "FLUSH", "bad"]),
        b"-ERR FUNCTION FLUSH only supports SYNC|ASYNC option\r\n",
    );
    c.check(&resp(&["FUNCTION", "DELETE", "mylib"]), b"+OK\r\n");
    c.check(&resp(&["FUNCTION", "LIST"]), b"*0\r\n");
}

#[test]
fn load_time_sandbox_and_metadata_errors() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    let cases: &[(&str, &str)] = &[
        ("return 1", "-ERR Missing library metadata"),
        ("#!lua name=t3\nreturn 1", "-ERR No functions registered"),
        ("#!lua name=t3 foo=bar\nreturn 1", "-ERR Invalid metadata value given: foo=bar"),
        ("#!lua2 name=t3\nreturn 1", "-ERR Engine 'lua2' not found"),
        ("#!lua name=t-3\nreturn 1", "-ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long"),
        (
            "#!lua name=t1\nredis.call('ping')",
            "-ERR Error registering functions: ERR user_function:2: Script attempted to access nonexistent global variable 'call'",
        ),
        (
            "#!lua name=t1\nlocal x = undefinedvar",
            "-ERR Error registering functions: ERR user_function:2: Script attempted to access nonexistent global variable 'undefinedvar'",
        ),
        (
            "#!lua name=t3\nredis.register_function('f-1', function() return 1 end)",
            "-ERR Error registering functions: ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long",
        ),
        (
            "#!lua name=t3\nredis.register_function{function_name='x', callback=function() end, flags={'bad'}}",
            "-ERR Error registering functions: ERR unknown flag given",
        ),
        (
            "#!lua name=t3\nredis.register_function('a', function() end)\nredis.register_function('a', function() end)",
            "-ERR Error registering functions: ERR Function already exists in the library",
        ),
    ];
    for (code, expected) in cases {
        c.check(
            &resp(&["FUNCTION", "LOAD", code]),
            format!("{expected}\r\n").as_bytes(),
        );
    }
    c.check(
        &resp(&["FUNCTION", "LOAD", "#!lua name=t4\nreturn math.random()"]),
        b"-ERR Error registering functions: ERR user_function:2: Script attempted to access nonexistent global variable 'math'\r\n",
    );
    c.check(
        &resp(&[
            "FUNCTION",
            "LOAD",
            "#!lua name=\"foo\"\nredis.register_function('foo', function() return 1 end)",
        ]),
        b"$3\r\nfoo\r\n",
    );
    c.check(
        &resp(&["FUNCTION", "LOAD", "#!lua name=t1\nredis.register_function('f1', function() return redis.call('nosuch') end)"]),
        b"$2\r\nt1\r\n",
    );
    c.check(
        &resp(&[
            "FUNCTION",
            "LOAD",
            "#!lua name=t2\nredis.register_function('f1', function() return 1 end)",
        ]),
        b"-ERR Function f1 already exists\r\n",
    );
    c.check(
        &resp(&["FCALL", "f1", "0"]),
        b"-ERR Unknown Redis command called from script script: f1, on @user_function:2.\r\n",
    );
}

#[test]
fn dump_and_restore() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(&resp(&["FUNCTION", "LOAD", LIB]), b"$5\r\nmylib\r\n");
    let reply = c.roundtrip_any(&resp(&["FUNCTION", "DUMP"]));
    let at = reply.iter().position(|&b| b == b'\n').unwrap() + 1;
    let payload = reply[at..reply.len() - 2].to_vec();
    let payload = String::from_utf8_lossy(&payload).into_owned();
    let _ = payload;
    c.check(
        &resp(&["FUNCTION", "RESTORE", "abc"]),
        b"-ERR DUMP payload version or checksum are wrong\r\n",
    );
    c.check(
        &resp(&["FUNCTION", "RESTORE", "abc", "bad"]),
        b"-ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.\r\n",
    );
    let mut restore = b"*3\r\n$8\r\nFUNCTION\r\n$7\r\nRESTORE\r\n".to_vec();
    restore.extend_from_slice(&reply);
    c.check(&restore, b"-ERR Library mylib already exists\r\n");
    c.check(&resp(&["FUNCTION", "FLUSH"]), b"+OK\r\n");
    c.check(&restore, b"+OK\r\n");
    c.check(&resp(&["FUNCTION", "LIST"]), LIST);
}

fn wait_rewrites(c: &mut common::Raw, n: u64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let info = c.roundtrip_any(&resp(&["INFO", "persistence"]));
        let text = String::from_utf8_lossy(&info);
        let done = text
            .lines()
            .find_map(|l| l.strip_prefix("aof_rewrites:"))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0);
        if done >= n {
            return;
        }
        assert!(Instant::now() < deadline, "rewrite did not finish");
        std::thread::yield_now();
    }
}

#[test]
fn libraries_survive_restarts_and_rewrites() {
    let dir = tempfile::tempdir().unwrap();
    let other = "#!lua name=other\nredis.register_function('o', function() return 7 end)";
    {
        let server = TestServer::start(dir.path());
        let mut c = server.raw();
        c.check(&resp(&["FUNCTION", "LOAD", LIB]), b"$5\r\nmylib\r\n");
        c.check(&resp(&["FUNCTION", "LOAD", other]), b"$5\r\nother\r\n");
        c.check(&resp(&["FUNCTION", "DELETE", "other"]), b"+OK\r\n");
        c.check(&resp(&["FCALL", "set", "1", "k", "v"]), b"+OK\r\n");
        server.stop();
    }
    {
        let server = TestServer::start(dir.path());
        let mut c = server.raw();
        c.check(&resp(&["FUNCTION", "LIST"]), LIST);
        c.check(&resp(&["FCALL", "get", "1", "k"]), b"$1\r\nv\r\n");
        c.check(&resp(&["CONFIG", "SET", "appendonly", "yes"]), b"+OK\r\n");
        let reply = c.roundtrip_any(&resp(&["BGREWRITEAOF"]));
        assert!(
            reply.starts_with(b"+"),
            "{}",
            String::from_utf8_lossy(&reply)
        );
        wait_rewrites(&mut c, 1);
        c.check(&resp(&["FUNCTION", "LOAD", other]), b"$5\r\nother\r\n");
        server.stop();
    }
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(&resp(&["FCALL", "get", "1", "k"]), b"$1\r\nv\r\n");
    c.check(&resp(&["FCALL", "o", "0"]), b":7\r\n");
    c.check(&resp(&["FUNCTION", "DELETE", "other"]), b"+OK\r\n");
    c.check(&resp(&["FUNCTION", "LIST"]), LIST);
}

/// A FUNCTION DUMP payload from Redis 7.0.15 (its code LZF-compressed).
const REDIS_DUMP_HEX: &str = "f5c3408040851f23216c7561206e616d653d6d796c69620a72656469732e72656769737465725f1166756e6374696f6e282768656c6c6f272c20e0001108292072657475726e20801a072066726f6d20612020441f726172792077686f736520636f6465206973206c6f6e6720656e6f7567682074006f2016066d70726573732720130164290a000b1dd2d9729cc4c2";

#[test]
fn restores_a_dump_made_by_redis() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    let payload: Vec<u8> = (0..REDIS_DUMP_HEX.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&REDIS_DUMP_HEX[i..i + 2], 16).unwrap())
        .collect();
    let mut restore = b"*3\r\n$8\r\nFUNCTION\r\n$7\r\nRESTORE\r\n".to_vec();
    restore.extend_from_slice(format!("${}\r\n", payload.len()).as_bytes());
    restore.extend_from_slice(&payload);
    restore.extend_from_slice(b"\r\n");
    c.check(&restore, b"+OK\r\n");
    c.check(
        &resp(&["FCALL", "hello", "0"]),
        b"$58\r\nhello from a library whose code is long enough to compress\r\n",
    );
}
