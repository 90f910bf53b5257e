//! Byte-level protocol tests: raw RESP in, exact bytes out. Strings, keys,
//! expiry and protocol errors.

mod common;

use common::{resp, TestServer};

#[test]
fn strings() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(b"PING\r\n", b"+PONG\r\n");
    c.check(&resp(&["SET", "k", "v"]), b"+OK\r\n");
    c.check(&resp(&["GET", "k"]), b"$1\r\nv\r\n");
    c.check(&resp(&["GET", "nope"]), b"$-1\r\n");
    c.check(b"SET k v2 GET\r\n", b"$1\r\nv\r\n");
    c.check(b"SET k v3 NX\r\n", b"$-1\r\n");
    c.check(b"SET k v3 XX\r\n", b"+OK\r\n");
    c.check(b"SET k v NX XX\r\n", b"-ERR syntax error\r\n");
    c.check(
        b"SET k v EX 0\r\n",
        b"-ERR invalid expire time in 'set' command\r\n",
    );
    c.check(
        b"SET k v EX x\r\n",
        b"-ERR value is not an integer or out of range\r\n",
    );
    c.check(b"SET k v EX 10 PX 10\r\n", b"-ERR syntax error\r\n");
    c.check(b"SETNX k z\r\n", b":0\r\n");
    c.check(b"SETNX k2 z\r\n", b":1\r\n");
    c.check(b"SETEX k3 100 v\r\n", b"+OK\r\n");
    c.check(b"TTL k3\r\n", b":100\r\n");
    c.check(
        b"SETEX k3 -1 v\r\n",
        b"-ERR invalid expire time in 'setex' command\r\n",
    );
    c.check(b"PSETEX k3 100000 v\r\n", b"+OK\r\n");
    c.check(b"GETSET k2 y\r\n", b"$1\r\nz\r\n");
    c.check(b"GETDEL k2\r\n", b"$1\r\ny\r\n");
    c.check(b"GETDEL k2\r\n", b"$-1\r\n");
    c.check(b"GETEX k3 PERSIST\r\n", b"$1\r\nv\r\n");
    c.check(b"TTL k3\r\n", b":-1\r\n");
    c.check(b"GETEX k3 EX 50\r\n", b"$1\r\nv\r\n");
    c.check(b"TTL k3\r\n", b":50\r\n");
    c.check(b"MSET a 1 b 2\r\n", b"+OK\r\n");
    c.check(
        b"MSET a 1 b\r\n",
        b"-ERR wrong number of arguments for 'mset' command\r\n",
    );
    c.check(b"MGET a b nope\r\n", b"*3\r\n$1\r\n1\r\n$1\r\n2\r\n$-1\r\n");
    c.check(b"MSETNX a 1 c 3\r\n", b":0\r\n");
    c.check(b"MSETNX c 3 d 4\r\n", b":1\r\n");
    c.check(b"INCR a\r\n", b":2\r\n");
    c.check(b"INCRBY a 10\r\n", b":12\r\n");
    c.check(b"DECR a\r\n", b":11\r\n");
    c.check(b"DECRBY a 20\r\n", b":-9\r\n");
    c.check(
        b"INCR k\r\n",
        b"-ERR value is not an integer or out of range\r\n",
    );
    c.check(
        b"SET big 9223372036854775807\r\nINCR big\r\n",
        b"+OK\r\n-ERR increment or decrement would overflow\r\n",
    );
    c.check(b"INCRBYFLOAT f 10.5\r\n", b"$4\r\n10.5\r\n");
    c.check(b"INCRBYFLOAT f 0.1\r\n", b"$4\r\n10.6\r\n");
    c.check(
        b"INCRBYFLOAT f x\r\n",
        b"-ERR value is not a valid float\r\n",
    );
    c.check(
        b"APPEND s hello\r\nAPPEND s \" world\"\r\n",
        b":5\r\n:11\r\n",
    );
    c.check(b"STRLEN s\r\nSTRLEN nope\r\n", b":11\r\n:0\r\n");
    c.check(b"GETRANGE s 0 4\r\n", b"$5\r\nhello\r\n");
    c.check(b"GETRANGE s -5 -1\r\n", b"$5\r\nworld\r\n");
    c.check(b"GETRANGE s 100 200\r\n", b"$0\r\n\r\n");
    c.check(
        b"SETRANGE s 6 WORLD\r\nGET s\r\n",
        b":11\r\n$11\r\nhello WORLD\r\n",
    );
    c.check(
        b"SETRANGE pad 3 x\r\nGET pad\r\n",
        b":4\r\n$4\r\n\x00\x00\x00x\r\n",
    );
    c.check(b"SETRANGE s -1 x\r\n", b"-ERR offset is out of range\r\n");
    c.check(
        b"GET\r\n",
        b"-ERR wrong number of arguments for 'get' command\r\n",
    );
    c.check(
        b"LPUSH l x\r\nGET l\r\n",
        b":1\r\n-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
    );
    c.check(
        b"APPEND l x\r\n",
        b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
    );
}

#[test]
fn keys_and_expiry() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(b"MSET a 1 b 2 c 3\r\n", b"+OK\r\n");
    c.check(b"EXISTS a b nope a\r\n", b":3\r\n");
    c.check(b"DEL a nope\r\n", b":1\r\n");
    c.check(b"UNLINK b\r\n", b":1\r\n");
    c.check(b"TYPE c\r\nTYPE nope\r\n", b"+string\r\n+none\r\n");
    c.check(b"RENAME c d\r\nGET d\r\n", b"+OK\r\n$1\r\n3\r\n");
    c.check(b"RENAME nope x\r\n", b"-ERR no such key\r\n");
    c.check(
        b"SET e 5\r\nRENAMENX d e\r\nRENAMENX d f\r\n",
        b"+OK\r\n:0\r\n:1\r\n",
    );
    c.check(b"DBSIZE\r\n", b":2\r\n");
    c.check(b"KEYS f\r\nKEYS z*\r\n", b"*1\r\n$1\r\nf\r\n*0\r\n");
    c.check(
        b"EXPIRE f 100\r\nTTL f\r\nPTTL nope\r\n",
        b":1\r\n:100\r\n:-2\r\n",
    );
    c.check(
        b"EXPIRE f 10 NX\r\nEXPIRE f 1000 GT\r\nTTL f\r\n",
        b":0\r\n:1\r\n:1000\r\n",
    );
    c.check(
        b"EXPIRE f 10 NX XX\r\n",
        b"-ERR NX and XX, GT or LT options at the same time are not compatible\r\n",
    );
    c.check(
        b"EXPIRE f x\r\n",
        b"-ERR value is not an integer or out of range\r\n",
    );
    c.check(
        b"PERSIST f\r\nPERSIST f\r\nTTL f\r\n",
        b":1\r\n:0\r\n:-1\r\n",
    );
    c.check(
        b"EXPIREAT f 4102444800\r\nEXPIRETIME f\r\n",
        b":1\r\n:4102444800\r\n",
    );
    c.check(
        b"PEXPIREAT f 4102444800000\r\nPEXPIRETIME f\r\n",
        b":1\r\n:4102444800000\r\n",
    );
    c.check(b"EXPIRE e -1\r\nEXISTS e\r\n", b":1\r\n:0\r\n");
    c.check(b"PEXPIRE f 30\r\n", b":1\r\n");
    std::thread::sleep(std::time::Duration::from_millis(60));
    c.check(b"GET f\r\nDBSIZE\r\n", b"$-1\r\n:0\r\n");
    c.check(b"SET x 1\r\nRANDOMKEY\r\n", b"+OK\r\n$1\r\nx\r\n");
    c.check(
        b"SCAN 0 MATCH x COUNT 100000\r\n",
        b"*2\r\n$1\r\n0\r\n*1\r\n$1\r\nx\r\n",
    );
    c.check(b"SCAN abc\r\n", b"-ERR invalid cursor\r\n");
    c.check(b"SCAN 0 COUNT 0\r\n", b"-ERR syntax error\r\n");
    c.check(
        b"SCAN 0 TYPE hash COUNT 100000\r\n",
        b"*2\r\n$1\r\n0\r\n*0\r\n",
    );
}

#[test]
fn active_expiry_removes_keys_nobody_reads() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    for i in 0..50 {
        c.check(format!("SET k{i} v PX 20\r\n").as_bytes(), b"+OK\r\n");
    }
    std::thread::sleep(std::time::Duration::from_millis(600));
    c.check(b"DBSIZE\r\n", b":0\r\n");
}

#[test]
fn protocol_errors_and_limits() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(
        b"FOO a b\r\n",
        b"-ERR unknown command 'FOO', with args beginning with: 'a' 'b' \r\n",
    );
    c.check(b"\r\n\r\nPING\r\n", b"+PONG\r\n");
    c.check(b"*0\r\nPING\r\n", b"+PONG\r\n");
    c.check(
        b"SET \"a b\" 'c d'\r\nGET \"a b\"\r\n",
        b"+OK\r\n$3\r\nc d\r\n",
    );
    c.check(
        b"*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nECHO\r\n$3\r\nhey\r\n",
        b"+PONG\r\n$3\r\nhey\r\n",
    );
    c.check(
        b"*x\r\n",
        b"-ERR Protocol error: invalid multibulk length\r\n",
    );
    assert!(c.is_closed());
    let mut c = server.raw();
    c.check(
        b"*1\r\n+PING\r\n",
        b"-ERR Protocol error: expected '$', got '+'\r\n",
    );
    let mut c = server.raw();
    c.check(
        b"*1\r\n$-3\r\n",
        b"-ERR Protocol error: invalid bulk length\r\n",
    );
    let mut c = server.raw();
    c.check(
        b"*1\r\n$999999999999\r\n",
        b"-ERR Protocol error: invalid bulk length\r\n",
    );
    let mut c = server.raw();
    c.check(
        b"ECHO \"unterminated\r\n",
        b"-ERR Protocol error: unbalanced quotes in request\r\n",
    );
    let mut c = server.raw();
    let long_inline = vec![b'a'; 70 * 1024];
    c.check(
        &long_inline,
        b"-ERR Protocol error: too big inline request\r\n",
    );
    let mut c = server.raw();
    c.check(
        b"*2000000\r\n",
        b"-ERR Protocol error: invalid multibulk length\r\n",
    );
}

#[test]
fn query_buffer_limit_closes_the_connection() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start_with(dir.path(), |c| {
        c.client_query_buffer_limit_bytes = 1024 * 1024;
    });
    let mut c = server.raw();
    let mut big = b"*2\r\n$4\r\nECHO\r\n$2000000\r\n".to_vec();
    big.extend(std::iter::repeat_n(b'x', 1_100_000));
    let _ = std::io::Write::write_all(&mut c.stream, &big);
    assert!(c.is_closed());
    server.raw().check(b"PING\r\n", b"+PONG\r\n");
}
