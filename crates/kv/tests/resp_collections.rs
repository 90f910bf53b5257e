//! Byte-level protocol tests for hashes, lists, sets and sorted sets.

mod common;

use common::TestServer;

const WRONGTYPE: &[u8] = b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";

#[test]
fn hashes() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(b"HSET h a 1 b 2\r\nHSET h a 3\r\n", b":2\r\n:0\r\n");
    c.check(
        b"HSET h a\r\n",
        b"-ERR wrong number of arguments for 'hset' command\r\n",
    );
    c.check(
        b"HGET h a\r\nHGET h z\r\nHGET nope a\r\n",
        b"$1\r\n3\r\n$-1\r\n$-1\r\n",
    );
    c.check(b"HMGET h a z\r\n", b"*2\r\n$1\r\n3\r\n$-1\r\n");
    c.check(
        b"HLEN h\r\nHEXISTS h b\r\nHEXISTS h z\r\n",
        b":2\r\n:1\r\n:0\r\n",
    );
    c.check(b"HSETNX h a 9\r\nHSETNX h c 9\r\n", b":0\r\n:1\r\n");
    c.check(b"HINCRBY h a 5\r\n", b":8\r\n");
    c.check(b"HINCRBYFLOAT h f 1.5\r\n", b"$3\r\n1.5\r\n");
    c.check(
        b"HSET h s x\r\nHINCRBY h s 1\r\n",
        b":1\r\n-ERR hash value is not an integer\r\n",
    );
    c.check(
        b"HINCRBYFLOAT h s 1\r\n",
        b"-ERR hash value is not a float\r\n",
    );
    c.check(b"HDEL h s f c nope\r\n", b":3\r\n");
    c.check(b"HSTRLEN h a\r\n", b":1\r\n");
    let all = c.roundtrip_any(b"HGETALL h\r\n");
    assert!(all.starts_with(b"*4\r\n"), "{all:?}");
    c.check(b"HDEL h a b\r\nEXISTS h\r\n", b":2\r\n:0\r\n");
    c.check(
        b"HSET h only 1\r\nHKEYS h\r\nHVALS h\r\n",
        b":1\r\n*1\r\n$4\r\nonly\r\n*1\r\n$1\r\n1\r\n",
    );
    c.check(
        b"HSCAN h 0 MATCH o*\r\n",
        b"*2\r\n$1\r\n0\r\n*2\r\n$4\r\nonly\r\n$1\r\n1\r\n",
    );
    c.check(
        b"SET s x\r\nHGET s a\r\n",
        &[b"+OK\r\n", WRONGTYPE].concat(),
    );
    c.hello3();
    c.check(b"HGETALL h\r\n", b"%1\r\n$4\r\nonly\r\n$1\r\n1\r\n");
}

#[test]
fn lists() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(b"RPUSH l a b c\r\nLPUSH l z\r\n", b":3\r\n:4\r\n");
    c.check(
        b"LRANGE l 0 -1\r\n",
        b"*4\r\n$1\r\nz\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n",
    );
    c.check(b"LRANGE l 5 10\r\nLRANGE nope 0 -1\r\n", b"*0\r\n*0\r\n");
    c.check(
        b"LLEN l\r\nLINDEX l -1\r\nLINDEX l 10\r\n",
        b":4\r\n$1\r\nc\r\n$-1\r\n",
    );
    c.check(
        b"LSET l 0 y\r\nLSET l 10 y\r\nLSET nope 0 y\r\n",
        b"+OK\r\n-ERR index out of range\r\n-ERR no such key\r\n",
    );
    c.check(b"LPOP l\r\nRPOP l\r\n", b"$1\r\ny\r\n$1\r\nc\r\n");
    c.check(
        b"RPUSH l a a b a\r\nLREM l 2 a\r\nLRANGE l 0 -1\r\n",
        b":6\r\n:2\r\n*4\r\n$1\r\nb\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\na\r\n",
    );
    c.check(
        b"LREM l -1 a\r\nLRANGE l 0 -1\r\n",
        b":1\r\n*3\r\n$1\r\nb\r\n$1\r\na\r\n$1\r\nb\r\n",
    );
    c.check(
        b"LINSERT l BEFORE a x\r\nLINSERT l AFTER zz x\r\nLINSERT nope AFTER a x\r\n",
        b":4\r\n:-1\r\n:0\r\n",
    );
    c.check(b"LINSERT l MIDDLE a x\r\n", b"-ERR syntax error\r\n");
    c.check(
        b"LTRIM l 1 2\r\nLRANGE l 0 -1\r\n",
        b"+OK\r\n*2\r\n$1\r\nx\r\n$1\r\na\r\n",
    );
    c.check(
        b"LPOP l 5\r\nEXISTS l\r\n",
        b"*2\r\n$1\r\nx\r\n$1\r\na\r\n:0\r\n",
    );
    c.check(b"LPOP nope 2\r\nLPOP nope\r\n", b"*-1\r\n$-1\r\n");
    c.check(
        b"LPOP l -1\r\n",
        b"-ERR value is out of range, must be positive\r\n",
    );
    c.check(b"LPUSHX nope a\r\nRPUSHX nope a\r\n", b":0\r\n:0\r\n");
    c.check(
        b"SET s x\r\nLPUSH s a\r\n",
        &[b"+OK\r\n", WRONGTYPE].concat(),
    );
}

#[test]
fn sets() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(b"SADD s a b c\r\nSADD s a\r\n", b":3\r\n:0\r\n");
    c.check(
        b"SCARD s\r\nSISMEMBER s a\r\nSISMEMBER s z\r\n",
        b":3\r\n:1\r\n:0\r\n",
    );
    c.check(b"SMISMEMBER s a z\r\n", b"*2\r\n:1\r\n:0\r\n");
    c.check(b"SREM s a z\r\n", b":1\r\n");
    c.check(b"SADD t b d\r\nSINTER s t\r\n", b":2\r\n*1\r\n$1\r\nb\r\n");
    c.check(b"SDIFF s t\r\n", b"*1\r\n$1\r\nc\r\n");
    c.check(b"SUNIONSTORE u s t\r\nSCARD u\r\n", b":3\r\n:3\r\n");
    c.check(
        b"SINTERSTORE i s t\r\nSMEMBERS i\r\n",
        b":1\r\n*1\r\n$1\r\nb\r\n",
    );
    c.check(b"SDIFFSTORE e s s\r\nEXISTS e\r\n", b":0\r\n:0\r\n");
    c.check(
        b"SADD one x\r\nSPOP one\r\nEXISTS one\r\n",
        b":1\r\n$1\r\nx\r\n:0\r\n",
    );
    c.check(b"SPOP nope\r\nSPOP nope 2\r\n", b"$-1\r\n*0\r\n");
    c.check(
        b"SADD one x\r\nSRANDMEMBER one\r\nSRANDMEMBER one -3\r\n",
        b":1\r\n$1\r\nx\r\n*3\r\n$1\r\nx\r\n$1\r\nx\r\n$1\r\nx\r\n",
    );
    c.check(b"SRANDMEMBER nope\r\n", b"$-1\r\n");
    c.check(b"SSCAN one 0\r\n", b"*2\r\n$1\r\n0\r\n*1\r\n$1\r\nx\r\n");
    c.check(
        b"SET str x\r\nSADD str a\r\nSINTER s str\r\n",
        &[b"+OK\r\n", WRONGTYPE, WRONGTYPE].concat(),
    );
}

#[test]
fn sorted_sets() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(b"ZADD z 1 a 2 b 3 c\r\n", b":3\r\n");
    c.check(
        b"ZADD z NX 10 a 4 d\r\nZSCORE z a\r\n",
        b":1\r\n$1\r\n1\r\n",
    );
    c.check(
        b"ZADD z XX CH 5 a 9 nope\r\nZSCORE z nope\r\n",
        b":1\r\n$-1\r\n",
    );
    c.check(b"ZADD z GT 1 a\r\nZSCORE z a\r\n", b":0\r\n$1\r\n5\r\n");
    c.check(b"ZADD z INCR 1.5 a\r\n", b"$3\r\n6.5\r\n");
    c.check(
        b"ZADD z NX XX 1 a\r\n",
        b"-ERR XX and NX options at the same time are not compatible\r\n",
    );
    c.check(
        b"ZADD z GT LT 1 a\r\n",
        b"-ERR GT, LT, and/or NX options at the same time are not compatible\r\n",
    );
    c.check(
        b"ZADD z INCR 1 a 2 b\r\n",
        b"-ERR INCR option supports a single increment-element pair\r\n",
    );
    c.check(b"ZADD z x a\r\n", b"-ERR value is not a valid float\r\n");
    c.check(
        b"ZCARD z\r\nZRANK z b\r\nZREVRANK z b\r\nZRANK z nope\r\n",
        b":4\r\n:0\r\n:3\r\n$-1\r\n",
    );
    c.check(b"ZRANGE z 0 1\r\n", b"*2\r\n$1\r\nb\r\n$1\r\nc\r\n");
    c.check(
        b"ZRANGE z 0 0 WITHSCORES\r\n",
        b"*2\r\n$1\r\nb\r\n$1\r\n2\r\n",
    );
    c.check(
        b"ZRANGE z (2 4 BYSCORE\r\n",
        b"*2\r\n$1\r\nc\r\n$1\r\nd\r\n",
    );
    c.check(
        b"ZRANGE z +inf -inf BYSCORE REV LIMIT 0 2\r\n",
        b"*2\r\n$1\r\na\r\n$1\r\nd\r\n",
    );
    c.check(b"ZRANGE z 0 1 LIMIT 0 1\r\n", b"-ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX\r\n");
    c.check(
        b"ZRANGEBYSCORE z 3 +inf\r\n",
        b"*3\r\n$1\r\nc\r\n$1\r\nd\r\n$1\r\na\r\n",
    );
    c.check(
        b"ZRANGEBYSCORE z x 1\r\n",
        b"-ERR min or max is not a float\r\n",
    );
    c.check(b"ZREVRANGE z 0 0\r\n", b"*1\r\n$1\r\na\r\n");
    c.check(b"ZCOUNT z -inf 3\r\n", b":2\r\n");
    c.check(b"ZINCRBY z 10 b\r\n", b"$2\r\n12\r\n");
    c.check(b"ZREM z b nope\r\n", b":1\r\n");
    c.check(b"ZPOPMIN z\r\n", b"*2\r\n$1\r\nc\r\n$1\r\n3\r\n");
    c.check(
        b"ZPOPMAX z 5\r\nEXISTS z\r\n",
        b"*4\r\n$1\r\na\r\n$3\r\n6.5\r\n$1\r\nd\r\n$1\r\n4\r\n:0\r\n",
    );
    c.check(
        b"ZADD lex 0 a 0 b 0 c\r\nZRANGE lex [b + BYLEX\r\n",
        b":3\r\n*2\r\n$1\r\nb\r\n$1\r\nc\r\n",
    );
    c.check(b"ZRANGEBYLEX lex - (b\r\n", b"*1\r\n$1\r\na\r\n");
    c.check(
        b"ZRANGEBYLEX lex a b\r\n",
        b"-ERR min or max not valid string range item\r\n",
    );
    c.check(
        b"ZSCAN lex 0 MATCH a\r\n",
        b"*2\r\n$1\r\n0\r\n*2\r\n$1\r\na\r\n$1\r\n0\r\n",
    );
    c.check(b"ZMSCORE lex a nope\r\n", b"*2\r\n$1\r\n0\r\n$-1\r\n");
    c.hello3();
    c.check(
        b"ZSCORE lex a\r\nZRANGE lex 0 0 WITHSCORES\r\n",
        b",0\r\n*1\r\n*2\r\n$1\r\na\r\n,0\r\n",
    );
    c.check(
        b"SET s x\r\nZADD s 1 a\r\n",
        &[b"+OK\r\n", WRONGTYPE].concat(),
    );
}
