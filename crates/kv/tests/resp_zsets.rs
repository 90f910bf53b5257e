//! Byte-level protocol tests for sorted sets, RESP2 and RESP3: every
//! expected reply is what Redis 7.0 answers to the same input.

mod common;

use common::TestServer;

/// ZADD's NX/XX/GT/LT/CH/INCR, NaN and infinite scores, ZINCRBY, ZMSCORE.
#[test]
fn zadd_options_scores_and_their_errors() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    // ZADD options and their errors.
    c.check(b"ZADD z 1 a 2 b 3 c\r\n", b":3\r\n");
    c.check(b"ZADD z NX 9 a 4 d\r\n", b":1\r\n");
    c.check(b"ZADD z XX CH 5 a 7 zz\r\n", b":1\r\n");
    c.check(b"ZADD z GT CH 1 a 6 b\r\n", b":1\r\n");
    c.check(b"ZADD z LT CH 1 a 9 c\r\n", b":1\r\n");
    c.check(
        b"ZADD z NX XX 1 a\r\n",
        b"-ERR XX and NX options at the same time are not compatible\r\n",
    );
    c.check(
        b"ZADD z GT LT 1 a\r\n",
        b"-ERR GT, LT, and/or NX options at the same time are not compatible\r\n",
    );
    c.check(
        b"ZADD z NX GT 1 a\r\n",
        b"-ERR GT, LT, and/or NX options at the same time are not compatible\r\n",
    );
    c.check(
        b"ZADD z INCR 1 a 2 b\r\n",
        b"-ERR INCR option supports a single increment-element pair\r\n",
    );
    c.check(
        b"ZADD z 1\r\n",
        b"-ERR wrong number of arguments for 'zadd' command\r\n",
    );
    c.check(b"ZADD z abc a\r\n", b"-ERR value is not a valid float\r\n");
    c.check(b"ZADD z nan a\r\n", b"-ERR value is not a valid float\r\n");
    c.check(b"ZADD z INCR 2.5 a\r\n", b"$3\r\n3.5\r\n");
    c.check(b"ZADD z XX INCR 1 nosuch\r\n", b"$-1\r\n");
    c.check(b"ZADD z GT INCR -1 a\r\n", b"$-1\r\n");
    c.check(b"ZADD nosuch XX 1 a\r\n", b":0\r\n");
    c.check(b"EXISTS nosuch\r\n", b":0\r\n");
    c.check(b"ZADD inf +inf a\r\n", b":1\r\n");
    c.check(
        b"ZINCRBY inf -inf a\r\n",
        b"-ERR resulting score is not a number (NaN)\r\n",
    );
    c.check(
        b"ZADD inf INCR -inf a\r\n",
        b"-ERR resulting score is not a number (NaN)\r\n",
    );
    c.check(b"ZSCORE inf a\r\n", b"$3\r\ninf\r\n");
    c.check(b"ZADD z 1.5e2 e -inf f\r\n", b":2\r\n");
    c.check(b"ZRANGE z 0 -1 WITHSCORES\r\n", b"*12\r\n$1\r\nf\r\n$4\r\n-inf\r\n$1\r\nc\r\n$1\r\n3\r\n$1\r\na\r\n$3\r\n3.5\r\n$1\r\nd\r\n$1\r\n4\r\n$1\r\nb\r\n$1\r\n6\r\n$1\r\ne\r\n$3\r\n150\r\n");
    c.check(b"ZINCRBY z 1 newmember\r\n", b"$1\r\n1\r\n");
    c.check(
        b"ZINCRBY z notanumber a\r\n",
        b"-ERR value is not a valid float\r\n",
    );
    c.check(
        b"ZMSCORE z a nosuch b\r\n",
        b"*3\r\n$3\r\n3.5\r\n$-1\r\n$1\r\n6\r\n",
    );
    c.check(b"ZMSCORE nosuch a\r\n", b"*1\r\n$-1\r\n");
}

/// ZRANGE by rank, score and name, reversed and limited, and the old range commands.
#[test]
fn zrange_in_every_form() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    // ZRANGE in its 6.2 forms.
    c.check(b"ZADD z 1 a 2 b 3 c 4 d 5 e\r\n", b":5\r\n");
    c.check(
        b"ZRANGE z 0 -1\r\n",
        b"*5\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n$1\r\ne\r\n",
    );
    c.check(
        b"ZRANGE z 1 2 REV WITHSCORES\r\n",
        b"*4\r\n$1\r\nd\r\n$1\r\n4\r\n$1\r\nc\r\n$1\r\n3\r\n",
    );
    c.check(
        b"ZRANGE z (1 4 BYSCORE\r\n",
        b"*3\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n",
    );
    c.check(
        b"ZRANGE z 4 (1 BYSCORE REV\r\n",
        b"*3\r\n$1\r\nd\r\n$1\r\nc\r\n$1\r\nb\r\n",
    );
    c.check(
        b"ZRANGE z -inf +inf BYSCORE LIMIT 1 2 WITHSCORES\r\n",
        b"*4\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n3\r\n",
    );
    c.check(
        b"ZRANGE z +inf -inf BYSCORE REV LIMIT 0 -1\r\n",
        b"*5\r\n$1\r\ne\r\n$1\r\nd\r\n$1\r\nc\r\n$1\r\nb\r\n$1\r\na\r\n",
    );
    c.check(b"ZRANGE z 0 -1 BYSCORE LIMIT -1 2\r\n", b"*0\r\n");
    c.check(
        b"ZRANGE z - + BYLEX\r\n",
        b"*5\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n$1\r\ne\r\n",
    );
    c.check(
        b"ZRANGE z [d - BYLEX REV LIMIT 1 2\r\n",
        b"*2\r\n$1\r\nc\r\n$1\r\nb\r\n",
    );
    c.check(b"ZRANGE z 0 1 LIMIT 0 1\r\n", b"-ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX\r\n");
    c.check(
        b"ZRANGE z - + BYLEX WITHSCORES\r\n",
        b"-ERR syntax error, WITHSCORES not supported in combination with BYLEX\r\n",
    );
    c.check(b"ZRANGE z 0 1 BYSCORE BYLEX\r\n", b"-ERR syntax error\r\n");
    c.check(b"ZRANGE z 0 1 REV REV\r\n", b"-ERR syntax error\r\n");
    c.check(
        b"ZRANGE z a b BYSCORE\r\n",
        b"-ERR min or max is not a float\r\n",
    );
    c.check(
        b"ZRANGE z a b BYLEX\r\n",
        b"-ERR min or max not valid string range item\r\n",
    );
    c.check(
        b"ZRANGE z a 1\r\n",
        b"-ERR value is not an integer or out of range\r\n",
    );
    c.check(b"ZRANGE z 0 1 LIMIT 0\r\n", b"-ERR syntax error\r\n");
    c.check(b"ZRANGE nosuch 0 -1\r\n", b"*0\r\n");
    c.check(
        b"ZREVRANGE z 0 1 WITHSCORES\r\n",
        b"*4\r\n$1\r\ne\r\n$1\r\n5\r\n$1\r\nd\r\n$1\r\n4\r\n",
    );
    c.check(
        b"ZREVRANGEBYSCORE z 4 2 WITHSCORES LIMIT 1 5\r\n",
        b"*4\r\n$1\r\nc\r\n$1\r\n3\r\n$1\r\nb\r\n$1\r\n2\r\n",
    );
    c.check(
        b"ZREVRANGEBYSCORE z 4 2 BYSCORE\r\n",
        b"-ERR syntax error\r\n",
    );
    c.check(
        b"ZRANGEBYSCORE z (2 (5\r\n",
        b"*2\r\n$1\r\nc\r\n$1\r\nd\r\n",
    );
    c.check(
        b"ZREVRANGEBYLEX z (d [b\r\n",
        b"*2\r\n$1\r\nc\r\n$1\r\nb\r\n",
    );
    c.check(
        b"ZREVRANGEBYLEX z + - LIMIT 0 2\r\n",
        b"*2\r\n$1\r\ne\r\n$1\r\nd\r\n",
    );
    c.check(b"ZRANGEBYLEX z [b (d\r\n", b"*2\r\n$1\r\nb\r\n$1\r\nc\r\n");
    c.check(
        b"ZRANGEBYLEX z b d\r\n",
        b"-ERR min or max not valid string range item\r\n",
    );
    c.check(b"ZCOUNT z (1 +inf\r\n", b":4\r\n");
    c.check(b"ZLEXCOUNT z [b +\r\n", b":4\r\n");
    c.check(b"ZCOUNT z x 1\r\n", b"-ERR min or max is not a float\r\n");
    c.check(b"ZRANK z c\r\n", b":2\r\n");
    c.check(b"ZREVRANK z c\r\n", b":2\r\n");
    c.check(b"ZRANK z nosuch\r\n", b"$-1\r\n");
}

/// ZRANGESTORE (an empty result deletes the destination) and ZREMRANGEBY*.
#[test]
fn zrangestore_and_range_removals() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(b"ZADD z 1 a 2 b 3 c 4 d 5 e\r\n", b":5\r\n");
    // ZRANGESTORE.
    c.check(b"ZRANGESTORE dst z 1 -2\r\n", b":3\r\n");
    c.check(
        b"ZRANGE dst 0 -1 WITHSCORES\r\n",
        b"*6\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n3\r\n$1\r\nd\r\n$1\r\n4\r\n",
    );
    c.check(
        b"ZRANGESTORE dst z 4 2 BYSCORE REV LIMIT 0 2\r\n",
        b":2\r\n",
    );
    c.check(
        b"ZRANGE dst 0 -1 WITHSCORES\r\n",
        b"*4\r\n$1\r\nc\r\n$1\r\n3\r\n$1\r\nd\r\n$1\r\n4\r\n",
    );
    c.check(b"ZRANGESTORE dst z [c + BYLEX\r\n", b":3\r\n");
    c.check(b"ZRANGESTORE dst z 5 10\r\n", b":0\r\n");
    c.check(b"EXISTS dst\r\n", b":0\r\n");
    c.check(
        b"ZRANGESTORE dst z 0 -1 WITHSCORES\r\n",
        b"-ERR syntax error\r\n",
    );
    c.check(b"ZRANGESTORE dst nosuch 0 -1\r\n", b":0\r\n");
    c.check(b"SET str x\r\n", b"+OK\r\n");
    c.check(
        b"ZRANGESTORE dst str 0 -1\r\n",
        b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
    );
    c.check(
        b"ZRANGE str 0 -1\r\n",
        b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
    );
    // ZREMRANGEBY*.
    c.check(b"ZADD r 1 a 2 b 3 c 4 d 5 e 6 f\r\n", b":6\r\n");
    c.check(b"ZREMRANGEBYRANK r 0 1\r\n", b":2\r\n");
    c.check(b"ZREMRANGEBYSCORE r (3 4\r\n", b":1\r\n");
    c.check(b"ZREMRANGEBYLEX r [e +\r\n", b":2\r\n");
    c.check(b"ZRANGE r 0 -1\r\n", b"*1\r\n$1\r\nc\r\n");
    c.check(
        b"ZREMRANGEBYSCORE r x 1\r\n",
        b"-ERR min or max is not a float\r\n",
    );
    c.check(
        b"ZREMRANGEBYLEX r x y\r\n",
        b"-ERR min or max not valid string range item\r\n",
    );
    c.check(
        b"ZREMRANGEBYRANK r a 1\r\n",
        b"-ERR value is not an integer or out of range\r\n",
    );
    c.check(b"ZREMRANGEBYRANK r 0 -1\r\n", b":1\r\n");
    c.check(b"EXISTS r\r\n", b":0\r\n");
    c.check(b"ZREMRANGEBYRANK nosuch 0 -1\r\n", b":0\r\n");
}

/// ZUNION/ZINTER/ZDIFF, their STORE forms and ZINTERCARD: weights, aggregates, sets as inputs, numkeys errors.
#[test]
fn unions_intersections_differences() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    // Unions, intersections, differences; sets count as score 1.
    c.check(b"ZADD za 1 a 2 b 3 c\r\n", b":3\r\n");
    c.check(b"ZADD zb 10 b 20 c 30 d\r\n", b":3\r\n");
    c.check(b"SADD sc c d e\r\n", b":3\r\n");
    c.check(b"ZUNION 2 za zb WITHSCORES\r\n", b"*8\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$2\r\n12\r\n$1\r\nc\r\n$2\r\n23\r\n$1\r\nd\r\n$2\r\n30\r\n");
    c.check(b"ZUNION 2 za zb WEIGHTS 2 0.5 AGGREGATE MAX WITHSCORES\r\n", b"*8\r\n$1\r\na\r\n$1\r\n2\r\n$1\r\nb\r\n$1\r\n5\r\n$1\r\nc\r\n$2\r\n10\r\n$1\r\nd\r\n$2\r\n15\r\n");
    c.check(
        b"ZINTER 2 za zb AGGREGATE MIN WITHSCORES\r\n",
        b"*4\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n3\r\n",
    );
    c.check(
        b"ZINTER 3 za zb sc WITHSCORES\r\n",
        b"*2\r\n$1\r\nc\r\n$2\r\n24\r\n",
    );
    c.check(
        b"ZDIFF 2 za zb WITHSCORES\r\n",
        b"*2\r\n$1\r\na\r\n$1\r\n1\r\n",
    );
    c.check(
        b"ZDIFF 1 sc WITHSCORES\r\n",
        b"*6\r\n$1\r\nc\r\n$1\r\n1\r\n$1\r\nd\r\n$1\r\n1\r\n$1\r\ne\r\n$1\r\n1\r\n",
    );
    c.check(
        b"ZUNION 3 za zb sc\r\n",
        b"*5\r\n$1\r\na\r\n$1\r\ne\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n",
    );
    c.check(b"ZUNIONSTORE out 2 za zb WEIGHTS 1 -1\r\n", b":4\r\n");
    c.check(b"ZRANGE out 0 -1 WITHSCORES\r\n", b"*8\r\n$1\r\nd\r\n$3\r\n-30\r\n$1\r\nc\r\n$3\r\n-17\r\n$1\r\nb\r\n$2\r\n-8\r\n$1\r\na\r\n$1\r\n1\r\n");
    c.check(b"ZINTERSTORE out 2 za sc\r\n", b":1\r\n");
    c.check(
        b"ZRANGE out 0 -1 WITHSCORES\r\n",
        b"*2\r\n$1\r\nc\r\n$1\r\n4\r\n",
    );
    c.check(b"ZDIFFSTORE out 2 za zb\r\n", b":1\r\n");
    c.check(
        b"ZRANGE out 0 -1 WITHSCORES\r\n",
        b"*2\r\n$1\r\na\r\n$1\r\n1\r\n",
    );
    c.check(b"ZINTERSTORE out 2 za nosuch\r\n", b":0\r\n");
    c.check(b"EXISTS out\r\n", b":0\r\n");
    c.check(b"ZINTERCARD 2 za zb\r\n", b":2\r\n");
    c.check(b"ZINTERCARD 2 za zb LIMIT 1\r\n", b":1\r\n");
    c.check(b"ZINTERCARD 3 za zb sc LIMIT 0\r\n", b":1\r\n");
    c.check(
        b"ZINTERCARD 2 za zb LIMIT -1\r\n",
        b"-ERR LIMIT can't be negative\r\n",
    );
    c.check(
        b"ZINTERCARD 0 za\r\n",
        b"-ERR at least 1 input key is needed for 'zintercard' command\r\n",
    );
    c.check(b"ZINTERCARD 3 za zb\r\n", b"-ERR syntax error\r\n");
    c.check(b"ZINTERCARD 1 za WEIGHTS 1\r\n", b"-ERR syntax error\r\n");
    c.check(
        b"ZUNION 0 za\r\n",
        b"-ERR at least 1 input key is needed for 'zunion' command\r\n",
    );
    c.check(
        b"ZUNION -1 za\r\n",
        b"-ERR at least 1 input key is needed for 'zunion' command\r\n",
    );
    c.check(
        b"ZUNION x za\r\n",
        b"-ERR value is not an integer or out of range\r\n",
    );
    c.check(b"ZUNION 3 za zb\r\n", b"-ERR syntax error\r\n");
    c.check(b"ZUNION 2 za zb WEIGHTS 1\r\n", b"-ERR syntax error\r\n");
    c.check(
        b"ZUNION 2 za zb WEIGHTS 1 x\r\n",
        b"-ERR weight value is not a float\r\n",
    );
    c.check(
        b"ZUNION 2 za zb AGGREGATE AVG\r\n",
        b"-ERR syntax error\r\n",
    );
    c.check(b"ZDIFF 2 za zb WEIGHTS 1 2\r\n", b"-ERR syntax error\r\n");
    c.check(b"ZDIFF 2 za zb AGGREGATE SUM\r\n", b"-ERR syntax error\r\n");
    c.check(
        b"ZUNIONSTORE out 2 za zb WITHSCORES\r\n",
        b"-ERR syntax error\r\n",
    );
    c.check(
        b"ZUNIONSTORE out 0 za\r\n",
        b"-ERR at least 1 input key is needed for 'zunionstore' command\r\n",
    );
    c.check(
        b"ZDIFFSTORE out 0 za\r\n",
        b"-ERR at least 1 input key is needed for 'zdiffstore' command\r\n",
    );
    c.check(
        b"ZINTERSTORE out 0 za\r\n",
        b"-ERR at least 1 input key is needed for 'zinterstore' command\r\n",
    );
    c.check(b"SET str x\r\n", b"+OK\r\n");
    c.check(
        b"ZUNION 2 za str\r\n",
        b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
    );
    c.check(
        b"ZUNIONSTORE out 2 za str\r\n",
        b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
    );
    c.check(b"ZADD inf1 +inf a\r\n", b":1\r\n");
    c.check(b"ZADD inf2 -inf a\r\n", b":1\r\n");
    c.check(
        b"ZUNION 2 inf1 inf2 WITHSCORES\r\n",
        b"*2\r\n$1\r\na\r\n$1\r\n0\r\n",
    );
    c.check(
        b"ZINTER 2 inf1 inf2 WITHSCORES\r\n",
        b"*2\r\n$1\r\na\r\n$1\r\n0\r\n",
    );
    c.check(
        b"ZUNION 2 inf1 inf2 WEIGHTS 0 1 WITHSCORES\r\n",
        b"*2\r\n$1\r\na\r\n$4\r\n-inf\r\n",
    );
}

/// RESP3 replies (doubles, nested pairs) and ZRANDMEMBER's counts and errors.
#[test]
fn resp3_pairs_and_random_members() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(
        b"ZADD za 1 a 2 b 3 c\r\nZADD zb 10 b 20 c 30 d\r\n",
        b":3\r\n:3\r\n",
    );
    c.hello3();
    c.check(b"ZUNION 2 za zb WITHSCORES\r\n", b"*4\r\n*2\r\n$1\r\na\r\n,1\r\n*2\r\n$1\r\nb\r\n,12\r\n*2\r\n$1\r\nc\r\n,23\r\n*2\r\n$1\r\nd\r\n,30\r\n");
    c.check(b"ZINTER 2 za zb\r\n", b"*2\r\n$1\r\nb\r\n$1\r\nc\r\n");
    c.check(
        b"ZRANGE za 0 -1 WITHSCORES\r\n",
        b"*3\r\n*2\r\n$1\r\na\r\n,1\r\n*2\r\n$1\r\nb\r\n,2\r\n*2\r\n$1\r\nc\r\n,3\r\n",
    );
    c.check(b"ZRANGE za 0 0\r\n", b"*1\r\n$1\r\na\r\n");
    c.check(b"ZPOPMIN za\r\n", b"*2\r\n$1\r\na\r\n,1\r\n");
    c.check(b"ZPOPMIN za 1\r\n", b"*1\r\n*2\r\n$1\r\nb\r\n,2\r\n");
    c.check(b"ZRANDMEMBER nosuch\r\n", b"_\r\n");
    c.check(b"ZRANDMEMBER nosuch 3\r\n", b"*0\r\n");
    c.check(b"ZRANDMEMBER za 0\r\n", b"*0\r\n");
    c.check(b"ZMSCORE za c nosuch\r\n", b"*2\r\n,3\r\n_\r\n");
    c.check(b"ZSCORE za c\r\n", b",3\r\n");
    c.check(b"ZINCRBY za 1.5 c\r\n", b",4.5\r\n");
    c.check(b"ZADD za INCR 1 c\r\n", b",5.5\r\n");
    c.check(
        b"ZSCAN za 0\r\n",
        b"*2\r\n$1\r\n0\r\n*2\r\n$1\r\nc\r\n$3\r\n5.5\r\n",
    );
    c.check(
        b"ZRANDMEMBER za 5 WITHSCORES\r\n",
        b"*1\r\n*2\r\n$1\r\nc\r\n,5.5\r\n",
    );
    let _ = c.roundtrip_any(b"HELLO 2\r\n");
    c.check(
        b"ZRANDMEMBER za 5 WITHSCORES\r\n",
        b"*2\r\n$1\r\nc\r\n$3\r\n5.5\r\n",
    );
    c.check(b"ZRANDMEMBER za -2 x\r\n", b"-ERR syntax error\r\n");
    c.check(
        b"ZRANDMEMBER za 1 WITHSCORES x\r\n",
        b"-ERR syntax error\r\n",
    );
    c.check(b"ZRANDMEMBER za -9223372036854775808\r\n", b"-ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807\r\n");
    c.check(
        b"ZRANDMEMBER za -9223372036854770000 WITHSCORES\r\n",
        b"-ERR value is out of range\r\n",
    );
    c.check(
        b"ZRANDMEMBER za x\r\n",
        b"-ERR value is not an integer or out of range\r\n",
    );
}

/// Corners found by comparing random commands with Redis: LIMIT with a
/// count of -1, negative zero scores, name ranges over mixed scores.
#[test]
fn corners_redis_answers_its_own_way() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    // A LIMIT whose count is -1 is no LIMIT, even on a rank range.
    c.check(b"ZADD z 1 a 2 b 3 c\r\n", b":3\r\n");
    c.check(
        b"ZRANGE z 0 -1 LIMIT 5 -1\r\n",
        b"*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n",
    );
    c.check(b"ZRANGESTORE dst z 0 0 LIMIT 1 -1\r\n", b":1\r\n");
    // A negative zero score reads back as 0; an increment's reply keeps its sign.
    c.check(b"ZADD nz -0 a\r\n", b":1\r\n");
    c.check(b"ZSCORE nz a\r\n", b"$1\r\n0\r\n");
    c.check(b"ZINCRBY nz2 -0 a\r\n", b"$2\r\n-0\r\n");
    c.check(b"ZSCORE nz2 a\r\n", b"$1\r\n0\r\n");
    c.check(b"HINCRBYFLOAT h f -0\r\n", b"$1\r\n0\r\n");
    // Name ranges over mixed scores scan a small set in order, as Redis does.
    c.check(b"ZADD mixed 1 d 2 a 3 c 4 b 5 e\r\n", b":5\r\n");
    c.check(
        b"ZRANGEBYLEX mixed [b [d\r\n",
        b"*4\r\n$1\r\nd\r\n$1\r\na\r\n$1\r\nc\r\n$1\r\nb\r\n",
    );
    c.check(
        b"ZREVRANGEBYLEX mixed [d [b\r\n",
        b"*2\r\n$1\r\nb\r\n$1\r\nc\r\n",
    );
    c.check(b"ZLEXCOUNT mixed [b +\r\n", b":5\r\n");
    c.check(b"ZRANGEBYLEX mixed - [c\r\n", b"*0\r\n");
    c.check(b"ZRANGEBYLEX mixed (e +\r\n", b"*0\r\n");
    c.check(b"ZRANGEBYLEX mixed [c [b\r\n", b"*0\r\n");
    c.check(b"ZREMRANGEBYLEX mixed [a [c\r\n", b":0\r\n");
    c.check(
        b"ZRANGE mixed 0 -1\r\n",
        b"*5\r\n$1\r\nd\r\n$1\r\na\r\n$1\r\nc\r\n$1\r\nb\r\n$1\r\ne\r\n",
    );
    // A computed negative zero prints as -0 until it is stored small.
    c.check(b"ZADD zero 0 a\r\n", b":1\r\n");
    c.check(
        b"ZINTER 1 zero WEIGHTS -1 WITHSCORES\r\n",
        b"*2\r\n$1\r\na\r\n$2\r\n-0\r\n",
    );
    c.check(b"ZINTERSTORE zdst 1 zero WEIGHTS -1\r\n", b":1\r\n");
    c.check(b"ZSCORE zdst a\r\n", b"$1\r\n0\r\n");
}
