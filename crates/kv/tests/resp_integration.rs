//! Byte-level tests of what joins the command families: the keyspace
//! events of commands built beside the notification API (bits, HLL, geo,
//! SORT, DUMP/RESTORE, COPY/MOVE, sorted-set stores, list moves, blocking
//! pops, eviction), COMMAND INFO's key ranges and key flags, and RESTORE's
//! IDLETIME and FREQ.

mod common;

use common::{resp_bytes, Raw, TestServer};

/// The pmessage bytes for pattern `*`.
fn pmessage(channel: &str, message: &str) -> Vec<u8> {
    format!(
        "*4\r\n$8\r\npmessage\r\n$1\r\n*\r\n${}\r\n{channel}\r\n${}\r\n{message}\r\n",
        channel.len(),
        message.len()
    )
    .into_bytes()
}

/// Both messages of one event on `key` of database `db`.
fn event_in(db: usize, key: &str, event: &str) -> Vec<u8> {
    let mut out = pmessage(&format!("__keyspace@{db}__:{key}"), event);
    out.extend(pmessage(&format!("__keyevent@{db}__:{event}"), key));
    out
}

/// Both messages of one event on `key` of database 0.
fn event(key: &str, name: &str) -> Vec<u8> {
    event_in(0, key, name)
}

/// The messages of `events`, each `(key, event)` in database 0, in order.
fn events(list: &[(&str, &str)]) -> Vec<u8> {
    list.iter().flat_map(|(k, e)| event(k, e)).collect()
}

/// A client of `server` with every class (`KEA`) turned on, and a pattern
/// subscriber to everything.
fn notified(server: &TestServer) -> (Raw, Raw) {
    let mut c = server.raw();
    c.check(b"CONFIG SET notify-keyspace-events KEA\r\n", b"+OK\r\n");
    let mut sub = server.raw();
    sub.check(
        b"PSUBSCRIBE *\r\n",
        b"*3\r\n$10\r\npsubscribe\r\n$1\r\n*\r\n:1\r\n",
    );
    (c, sub)
}

/// The payload of a bulk string reply.
fn bulk_payload(reply: &[u8]) -> Vec<u8> {
    let end = reply
        .iter()
        .position(|&b| b == b'\r')
        .expect("a bulk header");
    let len: usize = std::str::from_utf8(&reply[1..end])
        .unwrap()
        .parse()
        .unwrap();
    reply[end + 2..end + 2 + len].to_vec()
}

#[test]
fn bit_and_hll_commands_raise_their_events() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let (mut c, mut sub) = notified(&server);
    // SETBIT raises `setbit` only when the bit (or the length) changes.
    c.check(b"SETBIT b 3 1\r\nSETBIT b 3 1\r\n", b":0\r\n:1\r\n");
    // BITFIELD: a write on a new key, a write that changes nothing (no
    // event), a read (no event), a refused write creating the key (none).
    c.check(
        b"BITFIELD bf SET u8 0 0\r\nBITFIELD bf SET u8 0 0\r\nBITFIELD bf GET u8 0\r\nBITFIELD bf2 OVERFLOW FAIL INCRBY u2 0 5\r\n",
        b"*1\r\n:0\r\n*1\r\n:0\r\n*1\r\n:0\r\n*1\r\n$-1\r\n",
    );
    c.check(b"SETRANGE b 0 x\r\n", b":1\r\n");
    c.check(
        b"SET s abc\r\nBITOP AND d s\r\nBITOP AND d nosuch\r\nBITOP AND d nosuch\r\n",
        b"+OK\r\n:3\r\n:0\r\n:0\r\n",
    );
    c.check(
        b"PFADD h a\r\nPFADD h a\r\nPFMERGE h2 h\r\n",
        b":1\r\n:0\r\n+OK\r\n",
    );
    sub.check(
        b"",
        &events(&[
            ("b", "setbit"),
            ("bf", "setbit"),
            ("b", "setrange"),
            ("s", "set"),
            ("d", "set"),
            ("d", "del"),
            ("h", "pfadd"),
            ("h2", "pfadd"),
        ]),
    );
    c.check(
        b"INCRBYFLOAT f 1.5\r\nINCR i\r\nDECRBY i 3\r\nAPPEND s d\r\n",
        b"$3\r\n1.5\r\n:1\r\n:-2\r\n:4\r\n",
    );
    sub.check(
        b"",
        &events(&[
            ("f", "incrbyfloat"),
            ("i", "incrby"),
            // Redis names every INCR/DECR form's event `incrby`.
            ("i", "incrby"),
            ("s", "append"),
        ]),
    );
}

#[test]
fn geo_and_sort_stores_raise_their_events_or_del() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let (mut c, mut sub) = notified(&server);
    c.check(b"GEOADD g 13 38 p\r\nGEOADD g 13 38 p\r\n", b":1\r\n:0\r\n");
    c.check(
        b"GEOSEARCHSTORE gd g FROMLONLAT 13 38 BYRADIUS 10 km\r\nGEORADIUS g 13 38 10 km STORE gd2\r\n",
        b":1\r\n:1\r\n",
    );
    // An empty result deletes the destination; a missing source too.
    c.check(
        b"GEORADIUS g 0 0 1 km STORE gd2\r\nGEOSEARCHSTORE gd nosuch FROMLONLAT 0 0 BYRADIUS 1 km\r\nGEOSEARCHSTORE gd nosuch FROMLONLAT 0 0 BYRADIUS 1 km\r\n",
        b":0\r\n:0\r\n:0\r\n",
    );
    c.check(
        b"RPUSH l 3 1 2\r\nSORT l STORE st\r\nSORT nosuch STORE st\r\nSORT nosuch STORE st\r\n",
        b":3\r\n:3\r\n:0\r\n:0\r\n",
    );
    sub.check(
        b"",
        &events(&[
            ("g", "zadd"),
            ("gd", "geosearchstore"),
            ("gd2", "georadiusstore"),
            ("gd2", "del"),
            ("gd", "del"),
            ("l", "rpush"),
            ("st", "sortstore"),
            ("st", "del"),
        ]),
    );
}

#[test]
fn restore_copy_and_move_raise_their_events_in_their_databases() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let (mut c, mut sub) = notified(&server);
    c.check(b"SET s v\r\n", b"+OK\r\n");
    let payload = bulk_payload(&c.roundtrip_any(b"DUMP s\r\n"));
    c.check(&resp_bytes(&[b"RESTORE", b"r", b"0", &payload]), b"+OK\r\n");
    // REPLACE with a TTL already past deletes the key it replaced.
    c.check(
        &resp_bytes(&[b"RESTORE", b"r", b"1", &payload, b"REPLACE", b"ABSTTL"]),
        b"+OK\r\n",
    );
    c.check(
        b"COPY s c DB 2\r\nMOVE s 3\r\nCOPY c c2\r\n",
        b":1\r\n:1\r\n:0\r\n",
    );
    let mut expected = events(&[("s", "set"), ("r", "restore"), ("r", "del")]);
    expected.extend(event_in(2, "c", "copy_to"));
    expected.extend(event_in(0, "s", "move_from"));
    expected.extend(event_in(3, "s", "move_to"));
    sub.check(b"", &expected);
}

#[test]
fn sorted_set_removals_and_stores_raise_their_events() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let (mut c, mut sub) = notified(&server);
    c.check(
        b"ZADD z 1 a 2 b 3 c 4 d\r\nZREMRANGEBYSCORE z 1 1\r\nZREMRANGEBYSCORE z 9 9\r\nZREMRANGEBYLEX z [b [b\r\nZREMRANGEBYRANK z 0 -1\r\n",
        b":4\r\n:1\r\n:0\r\n:1\r\n:2\r\n",
    );
    sub.check(
        b"",
        &events(&[
            ("z", "zadd"),
            ("z", "zremrangebyscore"),
            ("z", "zremrangebylex"),
            ("z", "zremrangebyrank"),
            ("z", "del"),
        ]),
    );
    c.check(
        b"ZADD z 1 a\r\nZUNIONSTORE u 1 z\r\nZINTERSTORE i 1 z\r\nZDIFFSTORE d 1 z\r\nZRANGESTORE r z 0 -1\r\n",
        b":1\r\n:1\r\n:1\r\n:1\r\n:1\r\n",
    );
    sub.check(
        b"",
        &events(&[
            ("z", "zadd"),
            ("u", "zunionstore"),
            ("i", "zinterstore"),
            ("d", "zdiffstore"),
            ("r", "zrangestore"),
        ]),
    );
    // An empty result deletes an existing destination (`del`) and raises
    // nothing for a missing one; ZINTERCARD raises nothing.
    c.check(
        b"ZUNIONSTORE u 1 nosuch\r\nZINTERSTORE i 2 z nosuch\r\nZDIFFSTORE d 2 z z\r\nZRANGESTORE r nosuch 0 -1\r\nZRANGESTORE r nosuch 0 -1\r\nZINTERCARD 1 z\r\nSINTERCARD 1 nosuch\r\nSET end 1\r\n",
        b":0\r\n:0\r\n:0\r\n:0\r\n:0\r\n:1\r\n:0\r\n+OK\r\n",
    );
    sub.check(
        b"",
        &events(&[
            ("u", "del"),
            ("i", "del"),
            ("d", "del"),
            ("r", "del"),
            ("end", "set"),
        ]),
    );
}

#[test]
fn list_moves_and_multi_pops_raise_pop_then_push_events() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let (mut c, mut sub) = notified(&server);
    // LMOVE raises the push on the destination, then the pop, then `del`
    // of an emptied source.
    c.check(
        b"RPUSH src x\r\nLMOVE src dst LEFT RIGHT\r\nLMOVE nosuch dst LEFT RIGHT\r\nRPOPLPUSH dst dst\r\n",
        b":1\r\n$1\r\nx\r\n$-1\r\n$1\r\nx\r\n",
    );
    sub.check(
        b"",
        &events(&[
            ("src", "rpush"),
            ("dst", "rpush"),
            ("src", "lpop"),
            ("src", "del"),
            ("dst", "lpush"),
            ("dst", "rpop"),
        ]),
    );
    c.check(
        b"RPUSH l a b c\r\nLMPOP 2 nosuch l RIGHT COUNT 2\r\nLMPOP 1 l LEFT COUNT 5\r\n",
        b":3\r\n*2\r\n$1\r\nl\r\n*2\r\n$1\r\nc\r\n$1\r\nb\r\n*2\r\n$1\r\nl\r\n*1\r\n$1\r\na\r\n",
    );
    c.check(
        b"ZADD z 1 a 2 b\r\nZMPOP 1 z MAX\r\nZMPOP 1 z MIN COUNT 9\r\n",
        b":2\r\n*2\r\n$1\r\nz\r\n*1\r\n*2\r\n$1\r\nb\r\n$1\r\n2\r\n*2\r\n$1\r\nz\r\n*1\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n",
    );
    sub.check(
        b"",
        &events(&[
            ("l", "rpush"),
            ("l", "rpop"),
            ("l", "lpop"),
            ("l", "del"),
            ("z", "zadd"),
            ("z", "zpopmax"),
            ("z", "zpopmin"),
            ("z", "del"),
        ]),
    );
}

#[test]
fn served_blocking_pops_raise_their_non_blocking_events() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let (mut c, mut sub) = notified(&server);
    // Blocked clients are confirmed blocked (CLIENT LIST counts them)
    // before the pushes that serve them.
    let mut b1 = server.raw();
    let mut b2 = server.raw();
    let mut b3 = server.raw();
    let mut b4 = server.raw();
    let blocking: [(&mut Raw, &[u8]); 4] = [
        (&mut b1, b"BLMOVE bl dst RIGHT LEFT 0\r\n"),
        (&mut b2, b"BZPOPMIN bz 0\r\n"),
        (&mut b3, b"BLMPOP 0 1 bm LEFT COUNT 3\r\n"),
        (&mut b4, b"BLPOP bp 0\r\n"),
    ];
    for (client, cmd) in blocking {
        client.check(cmd, b"");
    }
    loop {
        let info = c.roundtrip_any(b"INFO clients\r\n");
        if String::from_utf8_lossy(&info).contains("blocked_clients:4") {
            break;
        }
    }
    c.check(
        b"RPUSH bl a b\r\nZADD bz 1 a\r\nRPUSH bm a b\r\nRPUSH bp a\r\n",
        b":2\r\n:1\r\n:2\r\n:1\r\n",
    );
    b1.check(b"", b"$1\r\nb\r\n");
    b2.check(b"", b"*3\r\n$2\r\nbz\r\n$1\r\na\r\n$1\r\n1\r\n");
    b3.check(b"", b"*2\r\n$2\r\nbm\r\n*2\r\n$1\r\na\r\n$1\r\nb\r\n");
    b4.check(b"", b"*2\r\n$2\r\nbp\r\n$1\r\na\r\n");
    sub.check(
        b"",
        &events(&[
            ("bl", "rpush"),
            ("dst", "lpush"),
            ("bl", "rpop"),
            ("bz", "zadd"),
            ("bz", "zpopmin"),
            ("bz", "del"),
            ("bm", "rpush"),
            ("bm", "lpop"),
            ("bm", "del"),
            ("bp", "rpush"),
            ("bp", "lpop"),
            ("bp", "del"),
        ]),
    );
}

#[test]
fn evicted_keys_raise_evicted() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let (mut c, mut sub) = notified(&server);
    c.check(
        b"SET k v\r\nCONFIG SET maxmemory-policy allkeys-lru\r\nCONFIG SET maxmemory 1\r\n",
        b"+OK\r\n+OK\r\n+OK\r\n",
    );
    // CONFIG SET evicts at once: the event arrives with no further command.
    sub.check(b"", &events(&[("k", "set"), ("k", "evicted")]));
    c.check(b"DBSIZE\r\nCONFIG SET maxmemory 0\r\n", b":0\r\n+OK\r\n");
}

/// The integer of an integer reply.
fn int_of(reply: &[u8]) -> i64 {
    let text = String::from_utf8_lossy(reply);
    text.trim()
        .strip_prefix(':')
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("not an integer reply: {text:?}"))
}

#[test]
fn restore_idletime_and_freq_set_the_access_clock_under_their_policy() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(b"SET s v\r\n", b"+OK\r\n");
    let payload = bulk_payload(&c.roundtrip_any(b"DUMP s\r\n"));
    let restore = |key: &[u8], option: &[u8], value: &[u8]| {
        resp_bytes(&[b"RESTORE", key, b"0", &payload, option, value])
    };
    // Under an LRU (or no) policy IDLETIME counts; FREQ is ignored.
    c.check(&restore(b"a", b"IDLETIME", b"1000"), b"+OK\r\n");
    let idle = int_of(&c.roundtrip_any(b"OBJECT IDLETIME a\r\n"));
    assert!((1000..=1002).contains(&idle), "idle {idle}");
    c.check(&restore(b"b", b"FREQ", b"100"), b"+OK\r\n");
    c.check(b"OBJECT IDLETIME b\r\n", b":0\r\n");
    // Under an LFU policy FREQ counts (no decay here); IDLETIME is
    // ignored, the key keeping a new key's counter.
    c.check(
        b"CONFIG SET maxmemory-policy allkeys-lfu\r\nCONFIG SET lfu-decay-time 0\r\n",
        b"+OK\r\n+OK\r\n",
    );
    c.check(&restore(b"c", b"FREQ", b"100"), b"+OK\r\n");
    c.check(b"OBJECT FREQ c\r\n", b":100\r\n");
    c.check(&restore(b"d", b"IDLETIME", b"1000"), b"+OK\r\n");
    c.check(b"OBJECT FREQ d\r\n", b":5\r\n");
}

#[test]
fn command_info_reports_legacy_ranges_flags_and_categories_as_redis() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    // Each reply is checked up to its ACL categories, on its own
    // connection (the rest of the reply is left unread).
    let prefixes: [(&[u8], &[u8]); 6] = [
        (
            b"COMMAND INFO zunionstore\r\n",
            b"*1\r\n*10\r\n$11\r\nzunionstore\r\n:-4\r\n*3\r\n+write\r\n+denyoom\r\n+movablekeys\r\n:1\r\n:1\r\n:1\r\n*3\r\n+@write\r\n+@sortedset\r\n+@slow\r\n",
        ),
        (
            b"COMMAND INFO sort\r\n",
            b"*1\r\n*10\r\n$4\r\nsort\r\n:-2\r\n*3\r\n+write\r\n+denyoom\r\n+movablekeys\r\n:1\r\n:1\r\n:1\r\n*6\r\n+@write\r\n+@set\r\n+@sortedset\r\n+@list\r\n+@slow\r\n+@dangerous\r\n",
        ),
        (
            b"COMMAND INFO georadius\r\n",
            b"*1\r\n*10\r\n$9\r\ngeoradius\r\n:-6\r\n*3\r\n+write\r\n+denyoom\r\n+movablekeys\r\n:1\r\n:1\r\n:1\r\n",
        ),
        (
            b"COMMAND INFO lmpop\r\n",
            b"*1\r\n*10\r\n$5\r\nlmpop\r\n:-4\r\n*2\r\n+write\r\n+movablekeys\r\n:0\r\n:0\r\n:0\r\n",
        ),
        (
            b"COMMAND INFO del\r\n",
            b"*1\r\n*10\r\n$3\r\ndel\r\n:-2\r\n*1\r\n+write\r\n:1\r\n:-1\r\n:1\r\n*3\r\n+@keyspace\r\n+@write\r\n+@slow\r\n",
        ),
        (
            b"COMMAND INFO ping\r\n",
            b"*1\r\n*10\r\n$4\r\nping\r\n:-1\r\n*1\r\n+fast\r\n:0\r\n:0\r\n:0\r\n*2\r\n+@fast\r\n+@connection\r\n",
        ),
    ];
    for (input, prefix) in prefixes {
        server.raw().check(input, prefix);
    }
    // The finder still decides the keys.
    server.raw().check(
        b"COMMAND GETKEYS ZUNIONSTORE dst 2 a b WEIGHTS 1 2\r\n",
        b"*3\r\n$3\r\ndst\r\n$1\r\na\r\n$1\r\nb\r\n",
    );
}

/// A key specification's `begin_search` at index `at`.
fn begin_index(at: i64) -> String {
    format!("$12\r\nbegin_search\r\n*4\r\n$4\r\ntype\r\n$5\r\nindex\r\n$4\r\nspec\r\n*2\r\n$5\r\nindex\r\n:{at}\r\n")
}

/// A key specification's `find_keys` of one key.
const FIND_ONE: &str = "$9\r\nfind_keys\r\n*4\r\n$4\r\ntype\r\n$5\r\nrange\r\n$4\r\nspec\r\n*6\r\n$7\r\nlastkey\r\n:0\r\n$7\r\nkeystep\r\n:1\r\n$5\r\nlimit\r\n:0\r\n";

#[test]
fn command_info_describes_movable_key_specifications() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let keynum = "$9\r\nfind_keys\r\n*4\r\n$4\r\ntype\r\n$6\r\nkeynum\r\n$4\r\nspec\r\n*6\r\n$9\r\nkeynumidx\r\n:0\r\n$8\r\nfirstkey\r\n:1\r\n$7\r\nkeystep\r\n:1\r\n";
    let zunionstore = format!(
        "*1\r\n*10\r\n$11\r\nzunionstore\r\n:-4\r\n*3\r\n+write\r\n+denyoom\r\n+movablekeys\r\n:1\r\n:1\r\n:1\r\n*3\r\n+@write\r\n+@sortedset\r\n+@slow\r\n*0\r\n*2\r\n\
         *6\r\n$5\r\nflags\r\n*2\r\n+OW\r\n+update\r\n{}{FIND_ONE}\
         *6\r\n$5\r\nflags\r\n*2\r\n+RO\r\n+access\r\n{}{keynum}*0\r\n",
        begin_index(1),
        begin_index(2)
    );
    server
        .raw()
        .check(b"COMMAND INFO zunionstore\r\n", zunionstore.as_bytes());
    let keyword = |word: &str| {
        format!(
            "$12\r\nbegin_search\r\n*4\r\n$4\r\ntype\r\n$7\r\nkeyword\r\n$4\r\nspec\r\n*4\r\n$7\r\nkeyword\r\n${}\r\n{word}\r\n$9\r\nstartfrom\r\n:6\r\n",
            word.len()
        )
    };
    let georadius = format!(
        "*1\r\n*10\r\n$9\r\ngeoradius\r\n:-6\r\n*3\r\n+write\r\n+denyoom\r\n+movablekeys\r\n:1\r\n:1\r\n:1\r\n*3\r\n+@write\r\n+@geo\r\n+@slow\r\n*0\r\n*3\r\n\
         *6\r\n$5\r\nflags\r\n*2\r\n+RO\r\n+access\r\n{}{FIND_ONE}\
         *6\r\n$5\r\nflags\r\n*2\r\n+OW\r\n+update\r\n{}{FIND_ONE}\
         *6\r\n$5\r\nflags\r\n*2\r\n+OW\r\n+update\r\n{}{FIND_ONE}*0\r\n",
        begin_index(1),
        keyword("STORE"),
        keyword("STOREDIST")
    );
    server
        .raw()
        .check(b"COMMAND INFO georadius\r\n", georadius.as_bytes());
    let blmpop = format!(
        "*1\r\n*10\r\n$6\r\nblmpop\r\n:-5\r\n*3\r\n+write\r\n+blocking\r\n+movablekeys\r\n:0\r\n:0\r\n:0\r\n*4\r\n+@write\r\n+@list\r\n+@slow\r\n+@blocking\r\n*0\r\n*1\r\n\
         *6\r\n$5\r\nflags\r\n*3\r\n+RW\r\n+access\r\n+delete\r\n{}{keynum}*0\r\n",
        begin_index(2)
    );
    server
        .raw()
        .check(b"COMMAND INFO blmpop\r\n", blmpop.as_bytes());
}

#[test]
fn getkeysandflags_resolves_bitfield_and_skips_shard_channels() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(
        b"COMMAND GETKEYSANDFLAGS BITFIELD k GET u8 0 OVERFLOW SAT\r\n",
        b"*1\r\n*2\r\n$1\r\nk\r\n*2\r\n+RO\r\n+access\r\n",
    );
    c.check(
        b"COMMAND GETKEYSANDFLAGS BITFIELD k GET u8 0 INCRBY u8 0 1\r\n",
        b"*1\r\n*2\r\n$1\r\nk\r\n*3\r\n+RW\r\n+access\r\n+update\r\n",
    );
    c.check(
        b"COMMAND GETKEYSANDFLAGS SPUBLISH c m\r\nCOMMAND GETKEYS SSUBSCRIBE c\r\n",
        b"-ERR The command has no key arguments\r\n-ERR The command has no key arguments\r\n",
    );
}

#[test]
fn command_info_carries_redis_tips() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(
        b"COMMAND INFO ping\r\n",
        b"*1\r\n*10\r\n$4\r\nping\r\n:-1\r\n*1\r\n+fast\r\n:0\r\n:0\r\n:0\r\n*2\r\n+@fast\r\n+@connection\r\n*2\r\n$25\r\nrequest_policy:all_shards\r\n$29\r\nresponse_policy:all_succeeded\r\n*0\r\n*0\r\n",
    );
    c.check(
        b"COMMAND INFO del\r\n",
        b"*1\r\n*10\r\n$3\r\ndel\r\n:-2\r\n*1\r\n+write\r\n:1\r\n:-1\r\n:1\r\n*3\r\n+@keyspace\r\n+@write\r\n+@slow\r\n*2\r\n$26\r\nrequest_policy:multi_shard\r\n$23\r\nresponse_policy:agg_sum\r\n*1\r\n*6\r\n$5\r\nflags\r\n*2\r\n+RM\r\n+delete\r\n$12\r\nbegin_search\r\n*4\r\n$4\r\ntype\r\n$5\r\nindex\r\n$4\r\nspec\r\n*2\r\n$5\r\nindex\r\n:1\r\n$9\r\nfind_keys\r\n*4\r\n$4\r\ntype\r\n$5\r\nrange\r\n$4\r\nspec\r\n*6\r\n$7\r\nlastkey\r\n:-1\r\n$7\r\nkeystep\r\n:1\r\n$5\r\nlimit\r\n:0\r\n*0\r\n",
    );
}

#[test]
fn debug_quicklist_packed_threshold_takes_any_size_up_to_4gb_less_1mb() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start_with(dir.path(), |c| {
        c.set("enable-debug-command", &["yes".into()]).unwrap()
    });
    let mut c = server.raw();
    c.check(
        b"DEBUG QUICKLIST-PACKED-THRESHOLD 1b\r\nDEBUG QUICKLIST-PACKED-THRESHOLD 0\r\nDEBUG QUICKLIST-PACKED-THRESHOLD 4293918720\r\n",
        b"+OK\r\n+OK\r\n+OK\r\n",
    );
    c.check(
        b"DEBUG QUICKLIST-PACKED-THRESHOLD 4293918721\r\nDEBUG QUICKLIST-PACKED-THRESHOLD x\r\n",
        b"-ERR argument must be a memory value bigger than 1 and smaller than 4gb\r\n-ERR argument must be a memory value bigger than 1 and smaller than 4gb\r\n",
    );
}
