//! Byte-level protocol tests for the list commands and ZMPOP, in RESP2 and
//! RESP3: replies, null shapes and error texts as Redis 7.0 sends them.

mod common;

use std::io::{Read, Write};

use common::{Raw, TestServer};

const WRONGTYPE: &[u8] = b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";

/// Switches `c` to RESP3, consuming the HELLO reply (its client id varies)
/// by reading up to the PONG sent after it.
fn resp3(c: &mut Raw) {
    c.stream.write_all(b"HELLO 3\r\nPING\r\n").unwrap();
    let mut got = Vec::new();
    let mut byte = [0u8; 1];
    while !got.ends_with(b"+PONG\r\n") {
        c.stream.read_exact(&mut byte).expect("HELLO reply");
        got.push(byte[0]);
    }
}

#[test]
fn pop_with_count_and_null_shapes() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(b"RPUSH l a b c d e\r\n", b":5\r\n");
    c.check(b"LPOP l 2\r\n", b"*2\r\n$1\r\na\r\n$1\r\nb\r\n");
    c.check(b"RPOP l 1\r\n", b"*1\r\n$1\r\ne\r\n");
    c.check(b"LPOP l 0\r\nRPOP l 0\r\n", b"*0\r\n*0\r\n");
    c.check(b"LPOP nokey\r\nLPOP nokey 0\r\n", b"$-1\r\n*-1\r\n");
    c.check(
        b"LPOP l -1\r\nLPOP l x\r\n",
        b"-ERR value is out of range, must be positive\r\n-ERR value is out of range, must be positive\r\n",
    );
    c.check(
        b"LPOP l 1 1\r\nRPOP l 1 1\r\n",
        b"-ERR wrong number of arguments for 'lpop' command\r\n-ERR wrong number of arguments for 'rpop' command\r\n",
    );
    c.check(
        b"RPOP l 10\r\nEXISTS l\r\n",
        b"*2\r\n$1\r\nd\r\n$1\r\nc\r\n:0\r\n",
    );
    resp3(&mut c);
    c.check(b"LPOP nokey\r\nLPOP nokey 1\r\n", b"_\r\n_\r\n");
    c.check(b"RPUSH l a\r\nLPOP l 0\r\n", b":1\r\n*0\r\n");
}

#[test]
fn lmove_and_rpoplpush() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(b"RPUSH src a b c\r\n", b":3\r\n");
    c.check(b"LMOVE src dst LEFT RIGHT\r\n", b"$1\r\na\r\n");
    c.check(b"LMOVE src dst right left\r\n", b"$1\r\nc\r\n");
    c.check(b"LRANGE dst 0 -1\r\n", b"*2\r\n$1\r\nc\r\n$1\r\na\r\n");
    c.check(b"LMOVE src dst UP LEFT\r\n", b"-ERR syntax error\r\n");
    c.check(b"LMOVE nokey dst LEFT LEFT\r\n", b"$-1\r\n");
    // A destination of another type: nothing moves.
    c.check(b"SET str x\r\nLMOVE src str LEFT LEFT\r\n", b"+OK\r\n");
    c.check(b"", WRONGTYPE);
    c.check(b"LLEN src\r\n", b":1\r\n");
    c.check(b"RPOPLPUSH str dst\r\n", WRONGTYPE);
    // The same list rotates; the last element empties the source.
    c.check(b"RPUSH r 1 2 3\r\nRPOPLPUSH r r\r\n", b":3\r\n$1\r\n3\r\n");
    c.check(
        b"LRANGE r 0 -1\r\n",
        b"*3\r\n$1\r\n3\r\n$1\r\n1\r\n$1\r\n2\r\n",
    );
    c.check(b"RPOPLPUSH src dst\r\nEXISTS src\r\n", b"$1\r\nb\r\n:0\r\n");
}

#[test]
fn lpos() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(b"RPUSH l a b c 1 2 3 c c\r\n", b":8\r\n");
    c.check(b"LPOS l c\r\nLPOS l c RANK 2\r\n", b":2\r\n:6\r\n");
    c.check(b"LPOS l c RANK -1\r\nLPOS l c RANK 4\r\n", b":7\r\n$-1\r\n");
    c.check(b"LPOS l c COUNT 0\r\n", b"*3\r\n:2\r\n:6\r\n:7\r\n");
    c.check(b"LPOS l c COUNT 2 RANK -1\r\n", b"*2\r\n:7\r\n:6\r\n");
    c.check(b"LPOS l c COUNT 0 MAXLEN 3\r\n", b"*1\r\n:2\r\n");
    c.check(
        b"LPOS l x COUNT 2\r\nLPOS nokey x COUNT 2\r\n",
        b"*0\r\n*0\r\n",
    );
    c.check(b"LPOS nokey x\r\n", b"$-1\r\n");
    c.check(b"LPOS l c RANK 0\r\n", b"-ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list\r\n");
    c.check(
        b"LPOS l c COUNT -1\r\nLPOS l c COUNT x\r\n",
        b"-ERR COUNT can't be negative\r\n-ERR COUNT can't be negative\r\n",
    );
    c.check(
        b"LPOS l c MAXLEN -1\r\n",
        b"-ERR MAXLEN can't be negative\r\n",
    );
    c.check(
        b"LPOS l c RANK\r\nLPOS l c FOO 1\r\n",
        b"-ERR syntax error\r\n-ERR syntax error\r\n",
    );
    c.check(
        b"LPOS l c RANK x\r\n",
        b"-ERR value is not an integer or out of range\r\n",
    );
    resp3(&mut c);
    c.check(b"LPOS l zz\r\n", b"_\r\n");
}

#[test]
fn lmpop_and_zmpop() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(b"RPUSH l2 a b c\r\n", b":3\r\n");
    c.check(
        b"LMPOP 2 l1 l2 RIGHT COUNT 2\r\n",
        b"*2\r\n$2\r\nl2\r\n*2\r\n$1\r\nc\r\n$1\r\nb\r\n",
    );
    c.check(
        b"LMPOP 1 l2 LEFT\r\n",
        b"*2\r\n$2\r\nl2\r\n*1\r\n$1\r\na\r\n",
    );
    c.check(b"LMPOP 1 l2 LEFT\r\n", b"*-1\r\n");
    c.check(
        b"LMPOP 0 l LEFT\r\nLMPOP x l LEFT\r\n",
        b"-ERR numkeys should be greater than 0\r\n-ERR numkeys should be greater than 0\r\n",
    );
    c.check(
        b"LMPOP 1 l LEFT COUNT 0\r\n",
        b"-ERR count should be greater than 0\r\n",
    );
    c.check(
        b"LMPOP 1 l\r\nLMPOP 2 l LEFT\r\nLMPOP 1 l MIDDLE\r\nLMPOP 1 l LEFT COUNT 1 COUNT 1\r\n",
        b"-ERR wrong number of arguments for 'lmpop' command\r\n-ERR syntax error\r\n-ERR syntax error\r\n-ERR syntax error\r\n",
    );
    c.check(b"SET s x\r\nLMPOP 1 s LEFT\r\n", b"+OK\r\n");
    c.check(b"", WRONGTYPE);
    c.check(b"ZADD z 1 a 2.5 b 3 c\r\n", b":3\r\n");
    c.check(
        b"ZMPOP 1 z MIN\r\n",
        b"*2\r\n$1\r\nz\r\n*1\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n",
    );
    c.check(
        b"ZMPOP 2 nokey z MAX COUNT 5\r\n",
        b"*2\r\n$1\r\nz\r\n*2\r\n*2\r\n$1\r\nc\r\n$1\r\n3\r\n*2\r\n$1\r\nb\r\n$3\r\n2.5\r\n",
    );
    c.check(
        b"ZMPOP 1 z MIN\r\nZMPOP 1 z FOO\r\n",
        b"*-1\r\n-ERR syntax error\r\n",
    );
    c.check(b"ZMPOP 1 s MIN\r\n", WRONGTYPE);
    resp3(&mut c);
    c.check(b"ZADD z 1.5 a\r\n", b":1\r\n");
    c.check(
        b"ZMPOP 1 z MIN\r\n",
        b"*2\r\n$1\r\nz\r\n*1\r\n*2\r\n$1\r\na\r\n,1.5\r\n",
    );
    c.check(b"ZMPOP 1 z MIN\r\nLMPOP 1 l LEFT\r\n", b"_\r\n_\r\n");
}

#[test]
fn edits_and_their_errors() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(b"RPUSH l a b c\r\n", b":3\r\n");
    c.check(b"LINSERT l MIDDLE a x\r\n", b"-ERR syntax error\r\n");
    c.check(
        b"LINSERT nokey BEFORE a x\r\nLINSERT l BEFORE zz x\r\n",
        b":0\r\n:-1\r\n",
    );
    c.check(b"LINSERT l AFTER a x\r\n", b":4\r\n");
    c.check(
        b"LSET nokey 0 x\r\nLSET l 10 x\r\n",
        b"-ERR no such key\r\n-ERR index out of range\r\n",
    );
    c.check(
        b"LSET l -1 z\r\nLINDEX l -1\r\nLINDEX l 99\r\n",
        b"+OK\r\n$1\r\nz\r\n$-1\r\n",
    );
    // The key is looked up before the index is parsed, as in Redis.
    c.check(
        b"LINDEX nokey x\r\nLSET nokey x v\r\n",
        b"$-1\r\n-ERR no such key\r\n",
    );
    c.check(b"SET str v\r\nLINDEX str x\r\n", b"+OK\r\n");
    c.check(b"", WRONGTYPE);
    c.check(b"LSET str x v\r\n", WRONGTYPE);
    c.check(
        b"LINDEX l x\r\n",
        b"-ERR value is not an integer or out of range\r\n",
    );
    c.check(
        b"LREM l 0 x\r\nLTRIM l 1 -1\r\nLRANGE l 0 -1\r\n",
        b":1\r\n+OK\r\n*2\r\n$1\r\nb\r\n$1\r\nz\r\n",
    );
    c.check(
        b"LRANGE l 5 1\r\nLTRIM l 5 1\r\nEXISTS l\r\n",
        b"*0\r\n+OK\r\n:0\r\n",
    );
}

#[test]
fn list_writes_replay_to_the_same_state() {
    let dir = tempfile::tempdir().unwrap();
    let script: &[u8] = b"RPUSH l a b c d e f\r\nLMOVE l m LEFT RIGHT\r\nRPOPLPUSH l m\r\nLMPOP 2 none l RIGHT COUNT 2\r\nLINSERT l BEFORE c x\r\nLSET l 0 y\r\nLREM l 1 x\r\nRPUSH l t u v\r\nLTRIM l 1 -2\r\nLPOP l 1\r\nZADD z 1 a 2 b 3 c\r\nZMPOP 1 z MAX COUNT 2\r\n";
    let state: &[u8] = b"LRANGE l 0 -1\r\nLRANGE m 0 -1\r\nZRANGE z 0 -1 WITHSCORES\r\n";
    let expected: &[u8] =
        b"*2\r\n$1\r\nt\r\n$1\r\nu\r\n*2\r\n$1\r\nf\r\n$1\r\na\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n";
    {
        let server = TestServer::start(dir.path());
        let mut c = server.raw();
        c.check(
            script,
            b":6\r\n$1\r\na\r\n$1\r\nf\r\n*2\r\n$1\r\nl\r\n*2\r\n$1\r\ne\r\n$1\r\nd\r\n:3\r\n+OK\r\n:1\r\n:5\r\n+OK\r\n*1\r\n$1\r\nc\r\n:3\r\n*2\r\n$1\r\nz\r\n*2\r\n*2\r\n$1\r\nc\r\n$1\r\n3\r\n*2\r\n$1\r\nb\r\n$1\r\n2\r\n",
        );
        c.check(state, expected);
        server.stop();
    }
    let server = TestServer::start(dir.path());
    server.raw().check(state, expected);
}
