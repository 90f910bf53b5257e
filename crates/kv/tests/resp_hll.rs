//! Byte-level protocol tests for the HyperLogLog commands: replies in RESP2
//! and RESP3, Redis's exact bytes for the values (so a value moves between
//! Redis and Ferrite), its errors, and the same state after a restart.

mod common;

use common::{hex, resp, TestServer};

/// What Redis 7.0 stores for PFADD of `e0` .. `e199` (sparse, 513 bytes).
const REDIS_200: &str = "48594c4c010000000000000000000080368421801980409f8408a40e88409084406c9c0190018812883884409480411c8817884055800080407a80411d8812804075800d842a8040638440768c404684414880098040d5800980409480407e9040738040628440a280408384405d84148040cb8407840d8040f080405e80068427844081803c844047840780404e80408f84039404844043840c842684406e80407380404084409d84198019802a8441028c088441298010801c884060801080404b8c4052881b8040b080406e8040bc802b8c40f58040618c1a840380407e80408080404580088440fd80405a80406684409f8040468c108c018401841e8811802384407d8440de84406280308812844065840784198040de84404684408b8814802988008402800a8840578041a79011842e844070801f840180189440f98440848c168421813c881d801380368410804089844044804147800380228040b88440bb88404684168040c684404980048440e680404380388c405c80405584409980268005800380405480409e88404c882e8840448040b080198408841f880380405b841b803f804044804055800d88128440d380405988408b800290407e800784407b801d841d8040af8418840f844045803384404f80288440a78440768040578419844048800e9022840a80406a840d8039801380409a8828804046844044";

fn bulk(data: &[u8]) -> Vec<u8> {
    [format!("${}\r\n", data.len()).as_bytes(), data, b"\r\n"].concat()
}

fn pfadd_200(key: &str) -> Vec<u8> {
    let names: Vec<String> = (0..200).map(|i| format!("e{i}")).collect();
    let mut args = vec!["PFADD", key];
    args.extend(names.iter().map(String::as_str));
    resp(&args)
}

const NOT_HLL: &[u8] = b"-WRONGTYPE Key is not a valid HyperLogLog string value.\r\n";
const CORRUPT: &[u8] = b"-INVALIDOBJ Corrupted HLL object detected\r\n";
const WRONGTYPE: &[u8] = b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";

#[test]
fn values_are_redis_bytes_and_the_cache_is_kept_in_them() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(b"PFADD h a b c\r\n", b":1\r\n");
    let stale = b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\x80\x60\xf3\x80\x50\xb1\x84\x4b\xfb\x80\x42\x5a";
    c.check(b"GET h\r\n", &bulk(stale));
    c.check(b"PFCOUNT h\r\n", b":3\r\n");
    let mut cached = stale.to_vec();
    cached[8] = 3;
    cached[15] = 0;
    c.check(b"GET h\r\n", &bulk(&cached));
    c.check(
        b"PFADD h a\r\nGETRANGE h 15 15\r\n",
        b":0\r\n$1\r\n\x00\r\n",
    );
    c.check(
        b"PFADD h z\r\nGETRANGE h 15 15\r\n",
        b":1\r\n$1\r\n\x80\r\n",
    );
    c.check(
        b"PFDEBUG DECODE h\r\nPFDEBUG ENCODING h\r\n",
        b"$56\r\nZ:8436 v:1,1 Z:144 v:1,1 Z:4129 v:2,1 Z:3068 v:1,1 Z:603\r\n+sparse\r\n",
    );
    c.check(&pfadd_200("big"), b":1\r\n");
    c.check(b"GET big\r\n", &bulk(&hex(REDIS_200)));
    c.check(b"PFCOUNT big\r\n", b":200\r\n");
    // A value Redis wrote counts the same here.
    let mut set = b"*3\r\n$3\r\nSET\r\n$4\r\ncopy\r\n".to_vec();
    set.extend_from_slice(&bulk(&hex(REDIS_200)));
    c.check(&set, b"+OK\r\n");
    c.check(b"PFCOUNT copy\r\nPFCOUNT copy h\r\n", b":200\r\n:204\r\n");
}

#[test]
fn merge_debug_and_encodings() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(
        b"PFADD a 1 2 3\r\nPFADD b 3 4 5\r\nPFMERGE m a b nokey\r\nPFCOUNT m\r\n",
        b":1\r\n:1\r\n+OK\r\n:5\r\n",
    );
    c.check(b"PFCOUNT nokey\r\nPFCOUNT nokey other\r\n", b":0\r\n:0\r\n");
    c.check(
        b"PFADD e\r\nPFCOUNT e\r\nPFADD e\r\n",
        b":1\r\n:0\r\n:0\r\n",
    );
    c.check(
        b"PFDEBUG TODENSE a\r\nPFDEBUG TODENSE a\r\nPFDEBUG ENCODING a\r\nSTRLEN a\r\n",
        b":1\r\n:0\r\n+dense\r\n:12304\r\n",
    );
    c.check(
        b"PFDEBUG DECODE a\r\n",
        b"-ERR HLL encoding is not sparse\r\n",
    );
    c.check(b"PFCOUNT a\r\nPFCOUNT a b\r\n", b":3\r\n:5\r\n");
    let regs = c.roundtrip_any(b"PFDEBUG GETREG b\r\n");
    assert!(regs.starts_with(b"*16384\r\n:"), "{:?}", &regs[..20]);
    c.check(b"PFDEBUG ENCODING b\r\n", b"+dense\r\n");
    c.check(
        b"PFDEBUG FOO b\r\nPFDEBUG FOO nokey\r\n",
        b"-ERR Unknown PFDEBUG subcommand 'FOO'\r\n-ERR The specified key does not exist\r\n",
    );
    c.check(
        b"PFDEBUG GETREG\r\n",
        b"-ERR wrong number of arguments for 'pfdebug' command\r\n",
    );
    // A dense input makes the destination dense.
    c.check(
        b"PFMERGE m2 nokey a\r\nPFDEBUG ENCODING m2\r\n",
        b"+OK\r\n+dense\r\n",
    );
    // A smaller limit promotes sooner.
    c.check(b"CONFIG SET hll-sparse-max-bytes 100\r\n", b"+OK\r\n");
    let mut args = vec!["PFADD", "small"];
    let names: Vec<String> = (0..40).map(|i| format!("e{i}")).collect();
    args.extend(names.iter().map(String::as_str));
    c.check(&resp(&args), b":1\r\n");
    c.check(
        b"PFDEBUG ENCODING small\r\nPFCOUNT small\r\n",
        b"+dense\r\n:40\r\n",
    );
    c.hello3();
    c.check(
        b"PFCOUNT small\r\nPFDEBUG ENCODING small\r\n",
        b":40\r\n+dense\r\n",
    );
}

#[test]
fn errors_name_wrong_and_corrupt_values() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(
        b"SET s foo\r\nPFADD s a\r\n",
        &[b"+OK\r\n", NOT_HLL].concat(),
    );
    c.check(
        b"SET t HYLL\r\nPFCOUNT t\r\n",
        &[b"+OK\r\n", NOT_HLL].concat(),
    );
    c.check(
        b"PFCOUNT s t\r\nPFMERGE d s\r\n",
        &[NOT_HLL, NOT_HLL].concat(),
    );
    c.check(b"PFDEBUG ENCODING t\r\n", NOT_HLL);
    c.check(
        b"LPUSH l a\r\nPFADD l a\r\nPFCOUNT l\r\n",
        &[b":1\r\n", WRONGTYPE, WRONGTYPE].concat(),
    );
    c.check(b"PFADD h a b c\r\nAPPEND h hello\r\n", b":1\r\n:32\r\n");
    c.check(
        b"PFCOUNT h\r\nPFCOUNT h a\r\nPFMERGE x h\r\n",
        &[CORRUPT, CORRUPT, CORRUPT].concat(),
    );
    c.check(
        b"PFDEBUG TODENSE h\r\nPFDEBUG GETREG h\r\n",
        &[CORRUPT, CORRUPT].concat(),
    );
    c.check(b"EXISTS x\r\n", b":0\r\n");
    // Broken magic, unknown encoding, a dense value of the wrong length.
    c.check(
        b"PFADD m a\r\nSETRANGE m 0 0123\r\nPFCOUNT m\r\n",
        &[b":1\r\n:21\r\n", NOT_HLL].concat(),
    );
    c.check(
        b"DEL m\r\nPFADD m a\r\nSETRANGE m 4 x\r\nPFCOUNT m\r\n",
        &[b":1\r\n:1\r\n:21\r\n", NOT_HLL].concat(),
    );
    c.check(
        b"DEL m\r\nPFADD m a\r\nSETRANGE m 4 \x00\r\nPFCOUNT m\r\n",
        &[b":1\r\n:1\r\n:21\r\n", NOT_HLL].concat(),
    );
}

#[test]
fn a_restart_keeps_values_and_counts() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(&pfadd_200("big"), b":1\r\n");
    c.check(
        b"PFADD a x y z\r\nPFCOUNT a\r\nPFMERGE m a big\r\n",
        b":1\r\n:3\r\n+OK\r\n",
    );
    c.check(b"PFADD d 1 2\r\nPFDEBUG TODENSE d\r\n", b":1\r\n:1\r\n");
    let before = c.roundtrip_any(b"GET big\r\nGET a\r\nGET m\r\nGET d\r\n");
    drop(c);
    server.stop();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    let after = c.roundtrip_any(b"GET big\r\nGET a\r\nGET m\r\nGET d\r\n");
    assert_eq!(before, after);
    c.check(
        b"PFCOUNT big\r\nPFCOUNT a\r\nPFCOUNT m\r\nPFCOUNT d\r\n",
        b":200\r\n:3\r\n:203\r\n:2\r\n",
    );
    c.check(
        b"PFDEBUG ENCODING d\r\nGETRANGE a 15 15\r\n",
        b"+dense\r\n$1\r\n\x00\r\n",
    );
}

#[test]
fn command_info_shows_redis_flags_and_keys() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    // PFCOUNT may replicate, but Redis keeps that flag out of COMMAND INFO.
    let info = c.roundtrip_any(b"COMMAND INFO pfcount\r\n");
    let head = b"*1\r\n*10\r\n$7\r\npfcount\r\n:-2\r\n*1\r\n+readonly\r\n:1\r\n:-1\r\n:1\r\n*3\r\n+@read\r\n+@hyperloglog\r\n+@slow\r\n";
    assert!(info.starts_with(head), "{}", String::from_utf8_lossy(&info));
    let info = c.roundtrip_any(b"COMMAND INFO pfdebug\r\n");
    let head = b"*1\r\n*10\r\n$7\r\npfdebug\r\n:3\r\n*3\r\n+write\r\n+denyoom\r\n+admin\r\n:2\r\n:2\r\n:1\r\n";
    assert!(info.starts_with(head), "{}", String::from_utf8_lossy(&info));
}
