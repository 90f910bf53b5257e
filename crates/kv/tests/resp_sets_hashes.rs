//! Byte-level protocol tests for sets and hashes, RESP2 and RESP3: every
//! expected reply is what Redis 7.0 answers to the same input.

mod common;

use common::TestServer;

/// SINTERCARD, SMISMEMBER, the store forms, SMOVE, SPOP and SRANDMEMBER edge cases, SSCAN.
#[test]
fn sets_counting_moving_popping() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    // SINTERCARD and its errors.
    c.check(b"SADD s1 a b c d\r\n", b":4\r\n");
    c.check(b"SADD s2 b c d e\r\n", b":4\r\n");
    c.check(b"SADD s3 c d\r\n", b":2\r\n");
    c.check(b"SINTERCARD 2 s1 s2\r\n", b":3\r\n");
    c.check(b"SINTERCARD 3 s1 s2 s3 LIMIT 1\r\n", b":1\r\n");
    c.check(b"SINTERCARD 2 s1 s2 LIMIT 0\r\n", b":3\r\n");
    c.check(b"SINTERCARD 2 s1 nosuch\r\n", b":0\r\n");
    c.check(
        b"SINTERCARD 0 s1\r\n",
        b"-ERR numkeys should be greater than 0\r\n",
    );
    c.check(
        b"SINTERCARD x s1\r\n",
        b"-ERR numkeys should be greater than 0\r\n",
    );
    c.check(
        b"SINTERCARD 3 s1 s2\r\n",
        b"-ERR Number of keys can't be greater than number of args\r\n",
    );
    c.check(
        b"SINTERCARD 1 s1 LIMIT -1\r\n",
        b"-ERR LIMIT can't be negative\r\n",
    );
    c.check(
        b"SINTERCARD 1 s1 LIMIT x\r\n",
        b"-ERR LIMIT can't be negative\r\n",
    );
    c.check(b"SINTERCARD 1 s1 LIMIT\r\n", b"-ERR syntax error\r\n");
    c.check(b"SINTERCARD 1 s1 FOO 1\r\n", b"-ERR syntax error\r\n");
    c.check(b"SET str x\r\n", b"+OK\r\n");
    c.check(
        b"SINTERCARD 2 s1 str\r\n",
        b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
    );
    c.check(
        b"SINTERCARD 2 nosuch str\r\n",
        b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
    );
    // SMISMEMBER.
    c.check(b"SMISMEMBER s1 a z\r\n", b"*2\r\n:1\r\n:0\r\n");
    c.check(b"SMISMEMBER nosuch a\r\n", b"*1\r\n:0\r\n");
    c.check(
        b"SMISMEMBER str a\r\n",
        b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
    );
    // The store forms delete an empty destination.
    c.check(b"SINTERSTORE dst s1 s2\r\n", b":3\r\n");
    c.check(b"SMEMBERS nosuchyet\r\n", b"*0\r\n");
    c.check(b"SINTERSTORE dst s1 nosuch\r\n", b":0\r\n");
    c.check(b"EXISTS dst\r\n", b":0\r\n");
    c.check(b"SUNIONSTORE dst nosuch nosuch2\r\n", b":0\r\n");
    c.check(b"EXISTS dst\r\n", b":0\r\n");
    c.check(b"SDIFFSTORE dst s3 s1\r\n", b":0\r\n");
    c.check(b"EXISTS dst\r\n", b":0\r\n");
    c.check(
        b"SUNIONSTORE dst s1 str\r\n",
        b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
    );
    c.check(b"SDIFFSTORE dst s3 s2 s1\r\n", b":0\r\n");
    // SMOVE.
    c.check(b"SMOVE s1 s3 a\r\n", b":1\r\n");
    c.check(b"SISMEMBER s3 a\r\n", b":1\r\n");
    c.check(b"SMOVE s1 s3 a\r\n", b":0\r\n");
    c.check(b"SMOVE nosuch str a\r\n", b":0\r\n");
    c.check(
        b"SMOVE str s1 a\r\n",
        b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
    );
    c.check(
        b"SMOVE s1 str b\r\n",
        b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
    );
    c.check(b"SMOVE s3 s3 a\r\n", b":1\r\n");
    c.check(b"SMOVE s3 s3 zz\r\n", b":0\r\n");
    // SPOP and SRANDMEMBER edge cases.
    c.check(b"SPOP nosuch\r\n", b"$-1\r\n");
    c.check(b"SPOP nosuch 3\r\n", b"*0\r\n");
    c.check(b"SPOP s1 0\r\n", b"*0\r\n");
    c.check(
        b"SPOP s1 -1\r\n",
        b"-ERR value is out of range, must be positive\r\n",
    );
    c.check(
        b"SPOP s1 x\r\n",
        b"-ERR value is out of range, must be positive\r\n",
    );
    c.check(b"SPOP s1 1 2\r\n", b"-ERR syntax error\r\n");
    c.check(b"SRANDMEMBER nosuch\r\n", b"$-1\r\n");
    c.check(b"SRANDMEMBER nosuch 3\r\n", b"*0\r\n");
    c.check(b"SRANDMEMBER s1 0\r\n", b"*0\r\n");
    c.check(
        b"SRANDMEMBER s1 x\r\n",
        b"-ERR value is not an integer or out of range\r\n",
    );
    c.check(b"SRANDMEMBER s1 -9223372036854775808\r\n", b"-ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807\r\n");
    c.check(b"SRANDMEMBER s1 1 2\r\n", b"-ERR syntax error\r\n");
    c.check(b"SADD one only\r\n", b":1\r\n");
    c.check(
        b"SRANDMEMBER one -3\r\n",
        b"*3\r\n$4\r\nonly\r\n$4\r\nonly\r\n$4\r\nonly\r\n",
    );
    c.check(b"SRANDMEMBER one 5\r\n", b"*1\r\n$4\r\nonly\r\n");
    c.check(b"SPOP one 5\r\n", b"*1\r\n$4\r\nonly\r\n");
    c.check(b"EXISTS one\r\n", b":0\r\n");
    c.check(
        b"SSCAN s3 0 MATCH a*\r\n",
        b"*2\r\n$1\r\n0\r\n*1\r\n$1\r\na\r\n",
    );
    c.check(b"SSCAN s3 x\r\n", b"-ERR invalid cursor\r\n");
    c.check(b"SSCAN s3 0 COUNT 0\r\n", b"-ERR syntax error\r\n");
    c.check(b"SSCAN s3 0 MATCH\r\n", b"-ERR syntax error\r\n");
    c.hello3();
    c.check(b"SPOP nosuch 2\r\n", b"~0\r\n");
    c.check(b"SINTERCARD 2 s1 s2\r\n", b":3\r\n");
    c.check(b"SMISMEMBER s1 b z\r\n", b"*2\r\n:1\r\n:0\r\n");
    c.check(b"SADD one only\r\n", b":1\r\n");
    c.check(b"SPOP one 1\r\n", b"~1\r\n$4\r\nonly\r\n");
}

/// HRANDFIELD's count forms, HSETNX, HSTRLEN, HINCRBYFLOAT's format and errors.
#[test]
fn hashes_random_fields_and_float_increments() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    // HRANDFIELD in its count forms.
    c.check(b"HSET h a 1\r\n", b":1\r\n");
    c.check(b"HRANDFIELD h\r\n", b"$1\r\na\r\n");
    c.check(
        b"HRANDFIELD h 5 WITHVALUES\r\n",
        b"*2\r\n$1\r\na\r\n$1\r\n1\r\n",
    );
    c.check(
        b"HRANDFIELD h -3\r\n",
        b"*3\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n",
    );
    c.check(
        b"HRANDFIELD h -2 WITHVALUES\r\n",
        b"*4\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\na\r\n$1\r\n1\r\n",
    );
    c.check(b"HRANDFIELD h 0\r\n", b"*0\r\n");
    c.check(b"HRANDFIELD nosuch\r\n", b"$-1\r\n");
    c.check(b"HRANDFIELD nosuch 3\r\n", b"*0\r\n");
    c.check(
        b"HRANDFIELD h x\r\n",
        b"-ERR value is not an integer or out of range\r\n",
    );
    c.check(b"HRANDFIELD h 1 x\r\n", b"-ERR syntax error\r\n");
    c.check(b"HRANDFIELD h 1 WITHVALUES x\r\n", b"-ERR syntax error\r\n");
    c.check(b"HRANDFIELD h -9223372036854775808\r\n", b"-ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807\r\n");
    c.check(
        b"HRANDFIELD h -9223372036854770000 WITHVALUES\r\n",
        b"-ERR value is out of range\r\n",
    );
    // HSETNX, HSTRLEN.
    c.check(b"HSETNX h a 2\r\n", b":0\r\n");
    c.check(b"HSETNX h b 2\r\n", b":1\r\n");
    c.check(b"HSTRLEN h b\r\n", b":1\r\n");
    c.check(b"HSTRLEN h nosuch\r\n", b":0\r\n");
    c.check(b"HSTRLEN nosuch a\r\n", b":0\r\n");
    // HINCRBYFLOAT's formatting and errors.
    c.check(b"HINCRBYFLOAT h f 10.5\r\n", b"$4\r\n10.5\r\n");
    c.check(b"HINCRBYFLOAT h f 0.1\r\n", b"$4\r\n10.6\r\n");
    c.check(b"HINCRBYFLOAT h f -10.6\r\n", b"$1\r\n0\r\n");
    c.check(b"HINCRBYFLOAT h g 5.0e3\r\n", b"$4\r\n5000\r\n");
    c.check(
        b"HINCRBYFLOAT h f +inf\r\n",
        b"-ERR value is NaN or Infinity\r\n",
    );
    c.check(
        b"HINCRBYFLOAT h f x\r\n",
        b"-ERR value is not a valid float\r\n",
    );
    c.check(b"HINCRBYFLOAT h a 1.23\r\n", b"$4\r\n2.23\r\n");
    c.check(b"HINCRBYFLOAT h a 0.77\r\n", b"$1\r\n3\r\n");
    c.check(b"HINCRBYFLOAT h a -0.1\r\n", b"$3\r\n2.9\r\n");
    c.check(
        b"HINCRBY h a 1\r\n",
        b"-ERR hash value is not an integer\r\n",
    );
    c.check(b"HSET h i 9223372036854775807\r\n", b":1\r\n");
    c.check(
        b"HINCRBY h i 1\r\n",
        b"-ERR increment or decrement would overflow\r\n",
    );
    c.check(
        b"HINCRBY h i x\r\n",
        b"-ERR value is not an integer or out of range\r\n",
    );
    c.check(b"HSCAN h 0 MATCH nomatch*\r\n", b"*2\r\n$1\r\n0\r\n*0\r\n");
    c.check(b"HSCAN h 0 COUNT 0\r\n", b"-ERR syntax error\r\n");
    c.check(b"SET str x\r\n", b"+OK\r\n");
    c.check(
        b"HRANDFIELD str\r\n",
        b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
    );
    c.check(
        b"HRANDFIELD str 1\r\n",
        b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
    );
    c.check(
        b"HSETNX str a 1\r\n",
        b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
    );
    c.hello3();
    c.check(b"HRANDFIELD nosuch\r\n", b"_\r\n");
    c.check(b"HRANDFIELD nosuch 3\r\n", b"*0\r\n");
    c.check(b"HSET one k v\r\n", b":1\r\n");
    c.check(
        b"HRANDFIELD one 2 WITHVALUES\r\n",
        b"*1\r\n*2\r\n$1\r\nk\r\n$1\r\nv\r\n",
    );
    c.check(
        b"HRANDFIELD one -2 WITHVALUES\r\n",
        b"*2\r\n*2\r\n$1\r\nk\r\n$1\r\nv\r\n*2\r\n$1\r\nk\r\n$1\r\nv\r\n",
    );
    c.check(b"HRANDFIELD one 1\r\n", b"*1\r\n$1\r\nk\r\n");
    c.check(b"HINCRBYFLOAT one n 2.5\r\n", b"$3\r\n2.5\r\n");
}

/// HINCRBYFLOAT's digits are those of Redis's long double arithmetic.
#[test]
fn hincrbyfloat_digits_are_redis_long_double_digits() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    // HINCRBYFLOAT computes in an 80-bit long double, as Redis does.
    c.check(b"HINCRBYFLOAT h a 0.1\r\n", b"$3\r\n0.1\r\n");
    c.check(b"HINCRBYFLOAT h a 0.2\r\n", b"$3\r\n0.3\r\n");
    c.check(b"HINCRBYFLOAT h b 5000\r\n", b"$4\r\n5000\r\n");
    c.check(
        b"HINCRBYFLOAT h b 1.5e-7\r\n",
        b"$22\r\n5000.00000014999999998\r\n",
    );
    c.check(
        b"HINCRBYFLOAT h c 123456789.123\r\n",
        b"$27\r\n123456789.12299999999959255\r\n",
    );
    c.check(
        b"HINCRBYFLOAT h d 1e17\r\n",
        b"$18\r\n100000000000000000\r\n",
    );
    c.check(
        b"HINCRBYFLOAT h d 1.5\r\n",
        b"$20\r\n100000000000000001.5\r\n",
    );
    c.check(b"HINCRBYFLOAT h e 0x10\r\n", b"$2\r\n16\r\n");
    c.check(b"HSET h big 1.7976931348623157e308\r\n", b":1\r\n");
    c.check(b"HINCRBYFLOAT h big 1.7976931348623157e308\r\n", b"$309\r\n359538626972463139991842093548208868096772893888658356970628841530353257046248792709403737216774171128857586838851041378617416726902272110715794556052955234146997955372576789671236326588091188869859074894581254961338834769297758245552436667197907705664206565009503223382416235440319971852753604933726679072768\r\n");
    c.check(b"HSET h inf inf\r\n", b":1\r\n");
    c.check(
        b"HINCRBYFLOAT h inf 1\r\n",
        b"-ERR increment would produce NaN or Infinity\r\n",
    );
    c.check(
        b"HINCRBYFLOAT h x 1e99999\r\n",
        b"-ERR value is not a valid float\r\n",
    );
}
