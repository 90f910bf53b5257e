//! `redis.call` and `redis.pcall` are made once per interpreter and reach
//! the running script's context through a scoped slot; `KEYS` and `ARGV`
//! are refilled per run, text pushed directly and other bytes through a
//! Lua string. These tests check what a client can see of that: binary
//! keys and arguments arrive byte for byte, calls made from Lua code that
//! a C function runs (a sort comparator, Lua's own `pcall`) still reach
//! the context, and the slot is empty again between scripts.

mod common;

use common::{resp, resp_bytes, TestServer};

#[test]
fn binary_keys_and_arguments_arrive_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    let key: &[u8] = b"k\xff\x00\xc3";
    let arg: &[u8] = b"\x80v\r\n";
    let script: &[u8] = b"redis.call('SET', KEYS[1], ARGV[1]) \
        return {KEYS[1], ARGV[1], ARGV[2], #KEYS, #ARGV}";
    let mut expected = b"*5\r\n$4\r\nk\xff\x00\xc3\r\n$4\r\n\x80v\r\n\r\n".to_vec();
    expected.extend_from_slice(b"$4\r\ntext\r\n:1\r\n:2\r\n");
    for _ in 0..3 {
        let request = resp_bytes(&[b"EVAL", script, b"1", key, arg, b"text"]);
        c.check(&request, &expected);
    }
    let mut get = b"$4\r\n".to_vec();
    get.extend_from_slice(arg);
    get.extend_from_slice(b"\r\n");
    c.check(&resp_bytes(&[b"GET", key]), &get);
    // A run with fewer keys and arguments sees none of the last run's.
    c.check(
        &resp(&["EVAL", "return {#KEYS, #ARGV, KEYS[1] == nil}", "0"]),
        b"*3\r\n:0\r\n:0\r\n:1\r\n",
    );
}

#[test]
fn calls_from_lua_that_a_c_function_runs_reach_the_context() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    // The comparator runs inside `table.sort`, a C function.
    let sort = "local t = {3, 1, 2} \
        table.sort(t, function(a, b) redis.call('INCR', KEYS[1]) return a < b end) \
        return {t[1], t[2], t[3], tonumber(redis.call('GET', KEYS[1])) > 0}";
    c.check(
        &resp(&["EVAL", sort, "1", "sorts"]),
        b"*4\r\n:1\r\n:2\r\n:3\r\n:1\r\n",
    );
    // Lua's `pcall` catches `redis.call`'s error; the next call still runs.
    let caught = "local ok = pcall(redis.call, 'INCR', KEYS[1]) \
        return {ok, redis.call('SET', KEYS[2], 'x')['ok']}";
    c.check(&resp(&["SET", "text", "abc"]), b"+OK\r\n");
    c.check(
        &resp(&["EVAL", caught, "2", "text", "other"]),
        b"*2\r\n$-1\r\n$2\r\nOK\r\n",
    );
    // `redis.pcall` returns the error as a table.
    c.check(
        &resp(&[
            "EVAL",
            "return redis.pcall('INCR', KEYS[1])['err']",
            "1",
            "text",
        ]),
        b"$43\r\nERR value is not an integer or out of range\r\n",
    );
}

#[test]
fn functions_and_scripts_share_the_slot_in_turn() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    let library = "#!lua name=slotlib\n\
        redis.register_function('bump', function(keys, args) \
        return redis.call('INCRBY', keys[1], args[1]) end)";
    c.check(&resp(&["FUNCTION", "LOAD", library]), b"$7\r\nslotlib\r\n");
    let script = "return redis.call('INCRBY', KEYS[1], ARGV[1])";
    let mut request = Vec::new();
    let mut expected = Vec::new();
    for i in 1..=200i64 {
        request.extend(resp(&["FCALL", "bump", "1", "n", "2"]));
        request.extend(resp(&["EVAL", script, "1", "n", "1"]));
        expected.extend(format!(":{}\r\n:{}\r\n", 3 * i - 1, 3 * i).into_bytes());
    }
    c.check(&request, &expected);
}
