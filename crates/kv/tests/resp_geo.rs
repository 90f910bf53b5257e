//! Byte-level protocol tests for the geo commands: Redis 7.0's scores,
//! coordinates, geohash strings and distances, byte for byte in RESP2 and
//! RESP3, its errors, and the same positions after a restart.

mod common;

use common::TestServer;

const WRONGTYPE: &[u8] = b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";
const SICILY: &[u8] = b"GEOADD Sicily 13.361389 38.115556 Palermo 15.087269 37.502669 Catania\r\n";

#[test]
fn positions_hashes_and_distances() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(SICILY, b":2\r\n");
    c.check(b"ZSCORE Sicily Palermo\r\n", b"$16\r\n3479099956230698\r\n");
    c.check(
        b"GEOPOS Sicily Palermo nosuch\r\n",
        b"*2\r\n*2\r\n$20\r\n13.36138933897018433\r\n$20\r\n38.11555639549629859\r\n*-1\r\n",
    );
    c.check(
        b"GEOHASH Sicily Palermo Catania nosuch\r\n",
        b"*3\r\n$11\r\nsqc8b49rny0\r\n$11\r\nsqdtr74hyu0\r\n$-1\r\n",
    );
    c.check(
        b"GEODIST Sicily Palermo Catania km\r\n",
        b"$8\r\n166.2742\r\n",
    );
    c.check(b"GEODIST Sicily Palermo Palermo\r\n", b"$6\r\n0.0000\r\n");
    c.check(
        b"GEODIST Sicily Palermo nosuch\r\nGEODIST nokey a b\r\n",
        b"$-1\r\n$-1\r\n",
    );
    c.check(
        b"GEODIST Sicily Palermo Catania parsec\r\n",
        b"-ERR unsupported unit provided. please use M, KM, FT, MI\r\n",
    );
    c.check(b"GEOPOS nokey a\r\n", b"*1\r\n*-1\r\n");
    c.hello3();
    c.check(
        b"GEOPOS Sicily Palermo nosuch\r\n",
        b"*2\r\n*2\r\n,13.36138933897018433\r\n,38.11555639549629859\r\n_\r\n",
    );
    c.check(
        b"GEOHASH Sicily nosuch\r\nGEODIST Sicily Palermo nosuch\r\n",
        b"*1\r\n_\r\n_\r\n",
    );
    c.check(
        b"SET s x\r\nGEOPOS s a\r\n",
        &[b"+OK\r\n", WRONGTYPE].concat(),
    );
}

#[test]
fn searches_in_both_protocols() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(SICILY, b":2\r\n");
    let catania = b"*4\r\n$7\r\nCatania\r\n$7\r\n56.4413\r\n:3479447370796909\r\n*2\r\n";
    let palermo = b"*4\r\n$7\r\nPalermo\r\n$8\r\n190.4424\r\n:3479099956230698\r\n*2\r\n";
    c.check(
        b"GEORADIUS Sicily 15 37 200 km WITHDIST WITHHASH WITHCOORD ASC\r\n",
        &[
            &b"*2\r\n"[..],
            catania,
            b"$20\r\n15.08726745843887329\r\n$20\r\n37.50266842333162032\r\n",
            palermo,
            b"$20\r\n13.36138933897018433\r\n$20\r\n38.11555639549629859\r\n",
        ]
        .concat(),
    );
    c.check(
        b"GEOSEARCH Sicily FROMMEMBER Palermo BYBOX 400 400 km DESC WITHDIST\r\n",
        b"*2\r\n*2\r\n$7\r\nCatania\r\n$8\r\n166.2742\r\n*2\r\n$7\r\nPalermo\r\n$6\r\n0.0000\r\n",
    );
    c.check(
        b"GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 100 km\r\n",
        b"*1\r\n$7\r\nCatania\r\n",
    );
    // ANY stops at the first match in the order cells are read.
    c.check(
        b"GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 500 km COUNT 1 ANY WITHHASH\r\n",
        b"*1\r\n*2\r\n$7\r\nPalermo\r\n:3479099956230698\r\n",
    );
    c.check(
        b"GEOSEARCH nokey FROMLONLAT 15 37 BYRADIUS 100 km\r\n",
        b"*0\r\n",
    );
    c.hello3();
    c.check(
        b"GEORADIUS_RO Sicily 15 37 200 km WITHDIST WITHHASH WITHCOORD ASC\r\n",
        &[
            &b"*2\r\n"[..],
            catania,
            b",15.08726745843887329\r\n,37.50266842333162032\r\n",
            palermo,
            b",13.36138933897018433\r\n,38.11555639549629859\r\n",
        ]
        .concat(),
    );
}

#[test]
fn geoadd_options_and_errors() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(SICILY, b":2\r\n");
    c.check(
        b"GEOADD Sicily XX CH 13.361389 38.1 Palermo 1 1 nobody\r\nGEOADD Sicily NX 13.361389 38.115556 Palermo\r\n",
        b":1\r\n:0\r\n",
    );
    c.check(
        b"ZSCORE Sicily Palermo\r\nZSCORE Sicily nobody\r\n",
        b"$16\r\n3479099893316159\r\n$-1\r\n",
    );
    c.check(
        b"GEOADD nokey XX 1 1 a\r\nEXISTS nokey\r\n",
        b":0\r\n:0\r\n",
    );
    c.check(
        b"GEOADD Sicily 200 1 a\r\nGEOADD Sicily x 1 a\r\nGEOADD Sicily NX XX 1 1 a\r\nGEOADD Sicily GT 1 1 a\r\n",
        b"-ERR invalid longitude,latitude pair 200.000000,1.000000\r\n-ERR value is not a valid float\r\n-ERR syntax error\r\n-ERR syntax error\r\n",
    );
    c.check(
        b"GEOADD Sicily 1 1\r\n",
        b"-ERR wrong number of arguments for 'geoadd' command\r\n",
    );
    c.check(
        b"GEOSEARCH Sicily BYRADIUS 1 km ASC WITHDIST\r\nGEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 1 km ANY\r\n",
        b"-ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for GEOSEARCH\r\n-ERR the ANY argument requires COUNT argument\r\n",
    );
    c.check(
        b"GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 1 parsec\r\nGEOSEARCH Sicily FROMMEMBER nobody BYRADIUS 1 km\r\n",
        b"-ERR unsupported unit provided. please use M, KM, FT, MI\r\n-ERR could not decode requested zset member\r\n",
    );
    c.check(
        b"GEORADIUS Sicily 15 37 -1 km\r\nGEORADIUS Sicily 15 37 1 km COUNT 0\r\nGEORADIUS_RO Sicily 15 37 200 km STORE dst\r\n",
        b"-ERR radius cannot be negative\r\n-ERR COUNT must be > 0\r\n-ERR syntax error\r\n",
    );
    c.check(
        b"SET s x\r\nGEORADIUS s 1 1 1 km\r\nGEOADD s 1 1 a\r\n",
        &[b"+OK\r\n", WRONGTYPE, WRONGTYPE].concat(),
    );
}

#[test]
fn stores_replace_or_delete_the_destination() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(SICILY, b":2\r\n");
    c.check(
        b"GEORADIUS Sicily 15 37 200 km STORE dst\r\nZRANGE dst 0 -1 WITHSCORES\r\n",
        b":2\r\n*4\r\n$7\r\nPalermo\r\n$16\r\n3479099956230698\r\n$7\r\nCatania\r\n$16\r\n3479447370796909\r\n",
    );
    c.check(
        b"GEORADIUS Sicily 15 37 200 km STOREDIST dst COUNT 1\r\nZRANGE dst 0 -1 WITHSCORES\r\n",
        b":1\r\n*2\r\n$7\r\nCatania\r\n$18\r\n56.441257870158204\r\n",
    );
    c.check(
        b"GEORADIUS Sicily 15 37 200 km STORE dst WITHDIST\r\n",
        b"-ERR STORE option in GEORADIUS is not compatible with WITHDIST, WITHHASH and WITHCOORD options\r\n",
    );
    c.check(
        b"GEOSEARCHSTORE dst2 Sicily FROMLONLAT 15 37 BYBOX 400 400 km STOREDIST\r\nZCARD dst2\r\n",
        b":2\r\n:2\r\n",
    );
    c.check(
        b"GEOSEARCHSTORE dst2 Sicily FROMLONLAT 0 0 BYRADIUS 1 km\r\nEXISTS dst2\r\n",
        b":0\r\n:0\r\n",
    );
    c.check(
        b"GEORADIUSBYMEMBER nokey nobody 1 km STORE dst\r\nEXISTS dst\r\n",
        b":0\r\n:0\r\n",
    );
}

#[test]
fn a_restart_keeps_positions_and_stored_searches() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(SICILY, b":2\r\n");
    c.check(
        b"GEOADD Sicily CH 12.758489 38.788135 edge1 17.241510 38.788135 edge2\r\n",
        b":2\r\n",
    );
    c.check(b"GEORADIUS Sicily 15 37 200 km STORE near\r\n", b":2\r\n");
    c.check(
        b"GEOSEARCHSTORE box Sicily FROMLONLAT 15 37 BYBOX 400 400 km STOREDIST\r\n",
        b":4\r\n",
    );
    let query = b"GEOPOS Sicily Palermo Catania edge1 edge2\r\nZRANGE near 0 -1 WITHSCORES\r\nZRANGE box 0 -1 WITHSCORES\r\n";
    let before = c.roundtrip_any(query);
    drop(c);
    server.stop();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    assert_eq!(before, c.roundtrip_any(query));
    c.check(
        b"GEOPOS Sicily Palermo\r\n",
        b"*1\r\n*2\r\n$20\r\n13.36138933897018433\r\n$20\r\n38.11555639549629859\r\n",
    );
}

#[test]
fn equal_distances_come_out_in_redis_order() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(
        b"GEOADD ties 1 40 a 1 40 b 1 40 c 1 40 d 1 40 e 2 40 f 2 40 g 1 40 h 2 40 i 1 40 j\r\n",
        b":10\r\n",
    );
    c.check(
        b"GEORADIUS ties 1 40 500 km COUNT 3\r\n",
        b"*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n",
    );
    // Redis's partial quicksort, not a stable sort, decides the fourth.
    c.check(
        b"GEORADIUS ties 1 40 500 km COUNT 4 DESC\r\n",
        b"*4\r\n$1\r\nf\r\n$1\r\ng\r\n$1\r\ni\r\n$1\r\nd\r\n",
    );
}
