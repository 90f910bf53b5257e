//! Byte-level protocol tests of EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and
//! SCRIPT, RESP2 and RESP3, the expected bytes as Redis 7.0.15 replies;
//! and a script's writes surviving a restart (the log holds its effects).

mod common;

use common::{resp, TestServer};

#[test]
fn argument_errors_and_the_script_cache() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(
        &resp(&["EVAL", "return 1", "-1"]),
        b"-ERR Number of keys can't be negative\r\n",
    );
    c.check(
        &resp(&["EVAL", "return 1", "2", "a"]),
        b"-ERR Number of keys can't be greater than number of args\r\n",
    );
    c.check(
        &resp(&["EVAL", "return 1", "x"]),
        b"-ERR value is not an integer or out of range\r\n",
    );
    c.check(
        &resp(&["EVALSHA", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db", "0"]),
        b"-NOSCRIPT No matching script. Please use EVAL.\r\n",
    );
    c.check(
        &resp(&["SCRIPT", "LOAD", "return 1"]),
        b"$40\r\ne0e1f9fabfc9d4800c877a703b823ac0578ff8db\r\n",
    );
    c.check(
        &resp(&["EVALSHA", "E0E1F9FABFC9D4800C877A703B823AC0578FF8DB", "0"]),
        b":1\r\n",
    );
    c.check(
        &resp(&[
            "SCRIPT",
            "EXISTS",
            "e0e1f9fabfc9d4800c877a703b823ac0578ff8db",
            "ab",
        ]),
        b"*2\r\n:1\r\n:0\r\n",
    );
    c.check(&resp(&["SCRIPT", "FLUSH", "ASYNC"]), b"+OK\r\n");
    c.check(
        &resp(&[
            "SCRIPT",
            "EXISTS",
            "e0e1f9fabfc9d4800c877a703b823ac0578ff8db",
        ]),
        b"*1\r\n:0\r\n",
    );
    c.check(
        &resp(&["SCRIPT", "FLUSH", "now"]),
        b"-ERR SCRIPT FLUSH only support SYNC|ASYNC option\r\n",
    );
    c.check(
        &resp(&["EVAL", "syntax error here", "0"]),
        b"-ERR Error compiling script (new function): user_script:1: '=' expected near 'error'\r\n",
    );
}

#[test]
fn lua_values_become_replies_as_in_redis() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(
        &resp(&["EVAL", "return {1,2,'a',{ok='x'},false,nil,4}", "0"]),
        b"*5\r\n:1\r\n:2\r\n$1\r\na\r\n+x\r\n$-1\r\n",
    );
    c.check(&resp(&["EVAL", "return 3.99", "0"]), b":3\r\n");
    c.check(&resp(&["EVAL", "return -3.99", "0"]), b":-3\r\n");
    c.check(&resp(&["EVAL", "return true", "0"]), b":1\r\n");
    c.check(&resp(&["EVAL", "return false", "0"]), b"$-1\r\n");
    c.check(&resp(&["EVAL", "return {err='bad'}", "0"]), b"-bad\r\n");
    c.check(&resp(&["EVAL", "return {ok='fine'}", "0"]), b"+fine\r\n");
    c.check(
        &resp(&[
            "EVAL",
            "return {KEYS[1], ARGV[1], #KEYS, #ARGV}",
            "1",
            "k",
            "a",
        ]),
        b"*4\r\n$1\r\nk\r\n$1\r\na\r\n:1\r\n:1\r\n",
    );
    c.check(
        &resp(&["EVAL", "return redis.sha1hex('')", "0"]),
        b"$40\r\nda39a3ee5e6b4b0d3255bfef95601890afd80709\r\n",
    );
    c.check(
        &resp(&["EVAL", "return redis.error_reply('MY x')", "0"]),
        b"-MY x\r\n",
    );
    c.check(
        &resp(&["EVAL", "return redis.status_reply('x y')", "0"]),
        b"+x y\r\n",
    );
    let hello = c.roundtrip_any(&resp(&["HELLO", "3"]));
    assert!(hello.starts_with(b"%"), "HELLO 3 answers a map");
    c.check(
        &resp(&["EVAL", "return {1,false,'x'}", "0"]),
        b"*3\r\n:1\r\n_\r\n$1\r\nx\r\n",
    );
}

#[test]
fn replies_become_lua_values_and_errors_are_worded_as_redis() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(&resp(&["RPUSH", "l", "a", "b"]), b":2\r\n");
    c.check(
        &resp(&["EVAL", "local r = redis.call('lrange','l',0,-1) return {type(r), r[2], redis.call('llen','l'), type(redis.call('get','none'))}", "0"]),
        b"*4\r\n$5\r\ntable\r\n$1\r\nb\r\n:2\r\n$7\r\nboolean\r\n",
    );
    c.check(
        &resp(&["EVAL", "return redis.call('set','s','x').ok", "0"]),
        b"$2\r\nOK\r\n",
    );
    c.check(
        &resp(&["EVAL", "return redis.pcall('incr','s')", "0"]),
        b"-ERR value is not an integer or out of range\r\n",
    );
    c.check(
        &resp(&[
            "EVAL",
            "local e = redis.pcall('incr','s') return e.err",
            "0",
        ]),
        b"$43\r\nERR value is not an integer or out of range\r\n",
    );
    c.check(
        &resp(&["EVAL", "return redis.call('incr','s')", "0"]),
        b"-ERR value is not an integer or out of range script: c243b9f46db13ba8f69da41b45a77708832babed, on @user_script:1.\r\n",
    );
    c.check(
        &resp(&["EVAL", "return redis.call('nosuch')", "0"]),
        b"-ERR Unknown Redis command called from script script: 206396248e12c6e742fd7296250433c8d7343b74, on @user_script:1.\r\n",
    );
    c.check(
        &resp(&["EVAL", "\nreturn redis.call('exec')", "0"]),
        b"-ERR This Redis command is not allowed from script script: 6a5de804131176998b586dbf2456e752d2d44573, on @user_script:2.\r\n",
    );
    c.check(
        &resp(&["EVAL", "error('boom')", "0"]),
        b"-ERR user_script:1: boom script: 82903a0434f1503e152f89c03c9acd881a0e8150, on @user_script:1.\r\n",
    );
    c.check(
        &resp(&["EVAL", "x=1", "0"]),
        b"-ERR user_script:1: Attempt to modify a readonly table script: 7caf6056913504f0508c65faf2dc3f94ff65bcfd, on @user_script:1.\r\n",
    );
    c.check(
        &resp(&["EVAL", "return os", "0"]),
        b"-ERR user_script:1: Script attempted to access nonexistent global variable 'os' script: f03b5ad6e7d58786b6a5e879efbea4a4408f5c2f, on @user_script:1.\r\n",
    );
    c.check(
        &resp(&["EVAL_RO", "return redis.call('set', KEYS[1], ARGV[1])", "1", "k", "v"]),
        b"-ERR Write commands are not allowed from read-only scripts. script: 55b22c0d0cedf3866879ce7c854970626dcef0c3, on @user_script:1.\r\n",
    );
}

#[test]
fn a_scripts_writes_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(
        &resp(&["EVAL", "redis.call('set', KEYS[1], ARGV[1]) redis.call('select', 2) redis.call('rpush', 'l', ARGV[1]) return redis.call('incr', 'n')", "1", "k", "v"]),
        b":1\r\n",
    );
    // The script's SELECT does not change the caller's database.
    c.check(&resp(&["GET", "k"]), b"$1\r\nv\r\n");
    c.check(
        &resp(&["EVAL", "return redis.call('del', 'nothing')", "0"]),
        b":0\r\n",
    );
    drop(c);
    server.stop();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(&resp(&["GET", "k"]), b"$1\r\nv\r\n");
    c.check(&resp(&["SELECT", "2"]), b"+OK\r\n");
    c.check(&resp(&["LRANGE", "l", "0", "-1"]), b"*1\r\n$1\r\nv\r\n");
    c.check(&resp(&["GET", "n"]), b"$1\r\n1\r\n");
}

#[test]
fn monitor_shows_the_eval_then_its_commands_from_lua() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut monitor = server.raw();
    monitor.check(&resp(&["MONITOR"]), b"+OK\r\n");
    let mut c = server.raw();
    c.check(
        &resp(&[
            "EVAL",
            "redis.call('set',KEYS[1],ARGV[1])",
            "1",
            "foo",
            "bar",
        ]),
        b"$-1\r\n",
    );
    let seen = String::from_utf8(monitor.roundtrip_any(b"")).unwrap();
    let lines: Vec<&str> = seen.lines().collect();
    assert_eq!(lines.len(), 2, "{seen}");
    assert!(lines[0].contains("\"EVAL\""), "{seen}");
    assert!(lines[1].contains(" lua] \"set\" \"foo\" \"bar\""), "{seen}");
}

#[test]
fn a_read_in_a_script_tracks_the_declared_keys() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    let mut other = server.raw();
    let _ = c.roundtrip_any(&resp(&["HELLO", "3"]));
    c.check(&resp(&["CLIENT", "TRACKING", "on"]), b"+OK\r\n");
    // A script that only writes tracks nothing.
    c.check(
        &resp(&["EVAL", "redis.call('set', 'k3', 'bar')", "1", "k1"]),
        b"_\r\n",
    );
    other.check(&resp(&["SET", "k1", "1"]), b"+OK\r\n");
    // One that reads tracks the keys it declared.
    c.check(
        &resp(&["EVAL", "redis.call('get', 'k3')", "1", "k1"]),
        b"_\r\n",
    );
    other.check(&resp(&["SET", "k3", "2"]), b"+OK\r\n");
    other.check(&resp(&["SET", "k1", "2"]), b"+OK\r\n");
    c.check(
        &resp(&["PING"]),
        b">2\r\n$10\r\ninvalidate\r\n*1\r\n$2\r\nk1\r\n+PONG\r\n",
    );
}
