//! Byte-level protocol tests for streams: replies and error texts exactly
//! as Redis 7.0.15 gives them (RESP2 and RESP3), blocking reads, and the
//! keyspace notifications stream writes raise.

mod common;

use std::io::Write;
use std::time::{Duration, Instant};

use common::{Raw, TestServer};

/// Entries, trims, deletes, XSETID and the option errors of XADD, XTRIM,
/// XRANGE and XREAD.
#[test]
fn entries_ranges_and_trims() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    let _ = c.roundtrip_any(b"FLUSHALL\r\n");
    c.check(b"XADD s 1-1 a 1 b 2\r\n", b"$3\r\n1-1\r\n");
    c.check(b"XADD s 1-* c 3\r\n", b"$3\r\n1-2\r\n");
    c.check(
        b"XADD s 0-0 a 1\r\n",
        b"-ERR The ID specified in XADD must be greater than 0-0\r\n",
    );
    c.check(
        b"XADD s 1-1 a 1\r\n",
        b"-ERR The ID specified in XADD is equal or smaller than the target stream top item\r\n",
    );
    c.check(
        b"XADD s 2 a\r\n",
        b"-ERR wrong number of arguments for 'xadd' command\r\n",
    );
    c.check(b"XADD nope NOMKSTREAM * a 1\r\n", b"$-1\r\n");
    c.check(b"XLEN s\r\n", b":2\r\n");
    c.check(b"XRANGE s - +\r\n", b"*2\r\n*2\r\n$3\r\n1-1\r\n*4\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n*2\r\n$3\r\n1-2\r\n*2\r\n$1\r\nc\r\n$1\r\n3\r\n");
    c.check(
        b"XREVRANGE s + - COUNT 1\r\n",
        b"*1\r\n*2\r\n$3\r\n1-2\r\n*2\r\n$1\r\nc\r\n$1\r\n3\r\n",
    );
    c.check(
        b"XRANGE s (1-1 +\r\n",
        b"*1\r\n*2\r\n$3\r\n1-2\r\n*2\r\n$1\r\nc\r\n$1\r\n3\r\n",
    );
    c.check(b"XRANGE s - + COUNT 0\r\n", b"*-1\r\n");
    c.check(
        b"XRANGE s x +\r\n",
        b"-ERR Invalid stream ID specified as stream command argument\r\n",
    );
    c.check(b"XRANGE s - + FOO\r\n", b"-ERR syntax error\r\n");
    c.check(
        b"XRANGE s (18446744073709551615-18446744073709551615 +\r\n",
        b"-ERR invalid start ID for the interval\r\n",
    );
    c.check(b"XADD s MAXLEN 1 3-0 d 4\r\n", b"$3\r\n3-0\r\n");
    c.check(
        b"XRANGE s - +\r\n",
        b"*1\r\n*2\r\n$3\r\n3-0\r\n*2\r\n$1\r\nd\r\n$1\r\n4\r\n",
    );
    c.check(b"XDEL s 3-0 9-9\r\n", b":1\r\n");
    c.check(b"XLEN s\r\n", b":0\r\n");
    c.check(b"XINFO STREAM s\r\n", b"*20\r\n$6\r\nlength\r\n:0\r\n$15\r\nradix-tree-keys\r\n:0\r\n$16\r\nradix-tree-nodes\r\n:1\r\n$17\r\nlast-generated-id\r\n$3\r\n3-0\r\n$20\r\nmax-deleted-entry-id\r\n$3\r\n3-0\r\n$13\r\nentries-added\r\n:3\r\n$23\r\nrecorded-first-entry-id\r\n$3\r\n0-0\r\n$6\r\ngroups\r\n:0\r\n$11\r\nfirst-entry\r\n$-1\r\n$10\r\nlast-entry\r\n$-1\r\n");
    c.check(b"XSETID s 2-0\r\n", b"+OK\r\n");
    c.check(
        b"XSETID s 10-0 ENTRIESADDED 1 MAXDELETEDID 11-0\r\n",
        b"-ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id\r\n",
    );
    c.check(b"XSETID nokey 1-0\r\n", b"-ERR no such key\r\n");
    c.check(
        b"XTRIM s LIMIT 3\r\n",
        b"-ERR syntax error, LIMIT cannot be used without specifying a trimming strategy\r\n",
    );
    c.check(
        b"XTRIM s MAXLEN = 0 LIMIT 3\r\n",
        b"-ERR syntax error, LIMIT cannot be used without the special ~ option\r\n",
    );
    c.check(b"XTRIM s MINID 5\r\n", b":0\r\n");
    c.check(
        b"XADD s MAXLEN 1 MINID 1 * a 1\r\n",
        b"-ERR syntax error, MAXLEN and MINID options at the same time are not compatible\r\n",
    );
    c.check(
        b"XADD s MAXLEN -1 * a 1\r\n",
        b"-ERR The MAXLEN argument must be >= 0.\r\n",
    );
    c.check(
        b"XADD s LIMIT 5 * a 1\r\n",
        b"-ERR syntax error, LIMIT cannot be used without specifying a trimming strategy\r\n",
    );
    c.check(b"SET str x\r\n", b"+OK\r\n");
    c.check(
        b"XADD str * a 1\r\n",
        b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
    );
    c.check(
        b"XLEN str\r\n",
        b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
    );
    c.check(
        b"XREAD STREAMS s\r\n",
        b"-ERR wrong number of arguments for 'xread' command\r\n",
    );
    c.check(b"XREAD FOO STREAMS s 0\r\n", b"-ERR syntax error\r\n");
    c.check(
        b"XREAD NOACK STREAMS s 0\r\n",
        b"-ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead.\r\n",
    );
    c.check(b"XREAD STREAMS s >\r\n", b"-ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.\r\n");
}

/// Consumer groups: creation, reads, pending entries, claims, XINFO, and
/// the RESP3 forms of XREAD and XINFO.
#[test]
fn consumer_groups_and_resp3() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    let _ = c.roundtrip_any(b"FLUSHALL\r\n");
    c.check(b"XADD s 1-0 f v\r\n", b"$3\r\n1-0\r\n");
    c.check(b"XADD s 2-0 f w\r\n", b"$3\r\n2-0\r\n");
    c.check(b"XGROUP CREATE s g 0\r\n", b"+OK\r\n");
    c.check(
        b"XGROUP CREATE s g 0\r\n",
        b"-BUSYGROUP Consumer Group name already exists\r\n",
    );
    c.check(b"XGROUP CREATE nokey g 0\r\n", b"-ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.\r\n");
    c.check(
        b"XGROUP CREATE s g2 $ ENTRIESREAD -5\r\n",
        b"-ERR value for ENTRIESREAD must be positive or -1\r\n",
    );
    c.check(
        b"XGROUP SETID s nog 0\r\n",
        b"-NOGROUP No such consumer group 'nog' for key name 's'\r\n",
    );
    c.check(
        b"XREADGROUP GROUP g alice COUNT 1 STREAMS s >\r\n",
        b"*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n1-0\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n",
    );
    c.check(
        b"XREADGROUP GROUP g bob STREAMS s >\r\n",
        b"*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n2-0\r\n*2\r\n$1\r\nf\r\n$1\r\nw\r\n",
    );
    c.check(
        b"XREADGROUP GROUP g alice STREAMS s 0\r\n",
        b"*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n1-0\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n",
    );
    c.check(b"XREADGROUP GROUP g alice STREAMS s $\r\n", b"-ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set.\r\n");
    c.check(
        b"XREADGROUP STREAMS s >\r\n",
        b"-ERR wrong number of arguments for 'xreadgroup' command\r\n",
    );
    c.check(b"XPENDING s g\r\n", b"*4\r\n:2\r\n$3\r\n1-0\r\n$3\r\n2-0\r\n*2\r\n*2\r\n$5\r\nalice\r\n$1\r\n1\r\n*2\r\n$3\r\nbob\r\n$1\r\n1\r\n");
    c.check(b"XPENDING s g - + 10 nobody\r\n", b"*0\r\n");
    c.check(b"XACK s g 1-0 9-0\r\n", b":1\r\n");
    c.check(
        b"XACK s g bad\r\n",
        b"-ERR Invalid stream ID specified as stream command argument\r\n",
    );
    c.check(b"XPENDING s g IDLE 99999999 - + 10\r\n", b"*0\r\n");
    c.check(b"XPENDING s g - +\r\n", b"-ERR syntax error\r\n");
    c.check(b"XCLAIM s g carol 0 2-0 JUSTID\r\n", b"*1\r\n$3\r\n2-0\r\n");
    c.check(
        b"XCLAIM s g carol 0 2-0 BOGUS\r\n",
        b"-ERR Unrecognized XCLAIM option 'BOGUS'\r\n",
    );
    c.check(
        b"XCLAIM s nog carol 0 2-0\r\n",
        b"-NOGROUP No such key 's' or consumer group 'nog'\r\n",
    );
    c.check(
        b"XAUTOCLAIM s g dave 0 0 COUNT 1 JUSTID\r\n",
        b"*3\r\n$3\r\n0-0\r\n*1\r\n$3\r\n2-0\r\n*0\r\n",
    );
    c.check(
        b"XAUTOCLAIM s g dave 0 0 COUNT 0\r\n",
        b"-ERR COUNT must be > 0\r\n",
    );
    c.check(b"XINFO GROUPS s\r\n", b"*1\r\n*12\r\n$4\r\nname\r\n$1\r\ng\r\n$9\r\nconsumers\r\n:4\r\n$7\r\npending\r\n:1\r\n$17\r\nlast-delivered-id\r\n$3\r\n2-0\r\n$12\r\nentries-read\r\n:2\r\n$3\r\nlag\r\n:0\r\n");
    c.check(
        b"XINFO CONSUMERS s nog\r\n",
        b"-NOGROUP No such consumer group 'nog' for key name 's'\r\n",
    );
    c.check(b"XGROUP CREATECONSUMER s g erin\r\n", b":1\r\n");
    c.check(b"XGROUP CREATECONSUMER s g erin\r\n", b":0\r\n");
    c.check(b"XGROUP DELCONSUMER s g dave\r\n", b":1\r\n");
    c.check(b"XGROUP SETID s g 0 ENTRIESREAD 0\r\n", b"+OK\r\n");
    c.check(b"XGROUP DESTROY s g\r\n", b":1\r\n");
    c.check(b"XGROUP DESTROY s g\r\n", b":0\r\n");
    c.check(
        b"XREADGROUP GROUP g a STREAMS s >\r\n",
        b"-NOGROUP No such key 's' or consumer group 'g' in XREADGROUP with GROUP option\r\n",
    );
    c.check(
        b"XREAD COUNT 1 STREAMS s 0\r\n",
        b"*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n1-0\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n",
    );
    c.check(b"XREAD STREAMS s $\r\n", b"*-1\r\n");
    c.check(
        b"XGROUP FOO\r\n",
        b"-ERR unknown subcommand 'FOO'. Try XGROUP HELP.\r\n",
    );
    c.check(
        b"XGROUP CREATE s\r\n",
        b"-ERR wrong number of arguments for 'xgroup|create' command\r\n",
    );
    c.check(b"XINFO STREAM nokey\r\n", b"-ERR no such key\r\n");
    c.check(
        b"XINFO STREAM s FULL COUNT\r\n",
        b"-ERR unknown subcommand or wrong number of arguments for 'STREAM'. Try XINFO HELP.\r\n",
    );
    c.hello3();
    c.check(b"XREAD STREAMS s 0\r\n", b"%1\r\n$1\r\ns\r\n*2\r\n*2\r\n$3\r\n1-0\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n*2\r\n$3\r\n2-0\r\n*2\r\n$1\r\nf\r\n$1\r\nw\r\n");
    c.check(b"XRANGE s - + COUNT 0\r\n", b"_\r\n");
    c.check(b"XREAD STREAMS s $\r\n", b"_\r\n");
    c.check(b"XINFO STREAM s\r\n", b"%10\r\n$6\r\nlength\r\n:2\r\n$15\r\nradix-tree-keys\r\n:1\r\n$16\r\nradix-tree-nodes\r\n:2\r\n$17\r\nlast-generated-id\r\n$3\r\n2-0\r\n$20\r\nmax-deleted-entry-id\r\n$3\r\n0-0\r\n$13\r\nentries-added\r\n:2\r\n$23\r\nrecorded-first-entry-id\r\n$3\r\n1-0\r\n$6\r\ngroups\r\n:0\r\n$11\r\nfirst-entry\r\n*2\r\n$3\r\n1-0\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n$10\r\nlast-entry\r\n*2\r\n$3\r\n2-0\r\n*2\r\n$1\r\nf\r\n$1\r\nw\r\n");
    c.check(
        b"XPENDING s nog\r\n",
        b"-NOGROUP No such key 's' or consumer group 'nog'\r\n",
    );
    c.check(b"XGROUP CREATE s g3 0\r\n", b"+OK\r\n");
    c.check(b"XINFO STREAM s FULL\r\n", b"%9\r\n$6\r\nlength\r\n:2\r\n$15\r\nradix-tree-keys\r\n:1\r\n$16\r\nradix-tree-nodes\r\n:2\r\n$17\r\nlast-generated-id\r\n$3\r\n2-0\r\n$20\r\nmax-deleted-entry-id\r\n$3\r\n0-0\r\n$13\r\nentries-added\r\n:2\r\n$23\r\nrecorded-first-entry-id\r\n$3\r\n1-0\r\n$7\r\nentries\r\n*2\r\n*2\r\n$3\r\n1-0\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n*2\r\n$3\r\n2-0\r\n*2\r\n$1\r\nf\r\n$1\r\nw\r\n$6\r\ngroups\r\n*1\r\n%7\r\n$4\r\nname\r\n$2\r\ng3\r\n$17\r\nlast-delivered-id\r\n$3\r\n0-0\r\n$12\r\nentries-read\r\n_\r\n$3\r\nlag\r\n:2\r\n$9\r\npel-count\r\n:0\r\n$7\r\npending\r\n*0\r\n$9\r\nconsumers\r\n*0\r\n");
}

/// Waits until INFO reports `n` blocked clients.
fn wait_blocked(control: &mut Raw, n: usize) {
    let want = format!("blocked_clients:{n}\r\n");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let info = control.roundtrip_any(b"INFO clients\r\n");
        if String::from_utf8_lossy(&info).contains(&want) {
            return;
        }
        assert!(Instant::now() < deadline, "never {want:?}");
        std::thread::yield_now();
    }
}

/// Blocked XREAD and XREADGROUP are served by XADD in the order they
/// blocked, `$` meaning the last ID when they blocked; a destroyed group
/// or a deleted key fails XREADGROUP; a timeout answers nil.
#[test]
fn blocking_reads() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    let (mut b1, mut b2) = (server.raw(), server.raw());
    c.check(b"XADD s 1-0 f v\r\n", b"$3\r\n1-0\r\n");
    b1.stream
        .write_all(b"XREAD BLOCK 0 STREAMS s $\r\n")
        .unwrap();
    wait_blocked(&mut c, 1);
    b2.stream
        .write_all(b"XREAD BLOCK 0 STREAMS other s 0 1-0\r\n")
        .unwrap();
    wait_blocked(&mut c, 2);
    c.check(b"XADD s 2-0 g w\r\n", b"$3\r\n2-0\r\n");
    let served = b"*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n2-0\r\n*2\r\n$1\r\ng\r\n$1\r\nw\r\n";
    b1.check(b"", served);
    b2.check(b"", served);
    // A group read blocks with `>`, is served a new entry, and fails once
    // the group is destroyed or the key deleted.
    c.check(b"XGROUP CREATE s grp $\r\n", b"+OK\r\n");
    b1.stream
        .write_all(b"XREADGROUP GROUP grp alice BLOCK 0 STREAMS s >\r\n")
        .unwrap();
    wait_blocked(&mut c, 1);
    c.check(b"XADD s 3-0 h x\r\n", b"$3\r\n3-0\r\n");
    b1.check(
        b"",
        b"*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n3-0\r\n*2\r\n$1\r\nh\r\n$1\r\nx\r\n",
    );
    c.check(
        b"XPENDING s grp\r\n",
        b"*4\r\n:1\r\n$3\r\n3-0\r\n$3\r\n3-0\r\n*1\r\n*2\r\n$5\r\nalice\r\n$1\r\n1\r\n",
    );
    b1.stream
        .write_all(b"XREADGROUP GROUP grp alice BLOCK 0 STREAMS s >\r\n")
        .unwrap();
    wait_blocked(&mut c, 1);
    c.check(b"XGROUP DESTROY s grp\r\n", b":1\r\n");
    b1.check(
        b"",
        b"-NOGROUP the consumer group this client was blocked on no longer exists\r\n",
    );
    c.check(b"XGROUP CREATE s grp $\r\n", b"+OK\r\n");
    b1.stream
        .write_all(b"XREADGROUP GROUP grp alice BLOCK 0 STREAMS s >\r\n")
        .unwrap();
    wait_blocked(&mut c, 1);
    c.check(b"DEL s\r\n", b":1\r\n");
    b1.check(b"", b"-UNBLOCKED the stream key no longer exists\r\n");
    b1.check(b"XREAD BLOCK 10 STREAMS s 0\r\n", b"*-1\r\n");
    // Inside MULTI a blocking read answers at once.
    c.check(
        b"MULTI\r\nXREAD BLOCK 0 STREAMS s $\r\nEXEC\r\n",
        b"+OK\r\n+QUEUED\r\n*1\r\n*-1\r\n",
    );
}

/// Stream writes raise their keyspace events.
#[test]
fn keyspace_events() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    let mut sub = server.raw();
    c.check(b"CONFIG SET notify-keyspace-events Et\r\n", b"+OK\r\n");
    sub.check(
        b"PSUBSCRIBE __keyevent@0__:*\r\n",
        b"*3\r\n$10\r\npsubscribe\r\n$16\r\n__keyevent@0__:*\r\n:1\r\n",
    );
    let commands: &[(&[u8], &str)] = &[
        (b"XADD s MAXLEN 1 1-0 f v\r\n", "xadd"),
        (b"XADD s MAXLEN 1 2-0 f v\r\n", "xadd"),
        (b"", "xtrim"),
        (b"XGROUP CREATE s g 0\r\n", "xgroup-create"),
        (b"XGROUP CREATECONSUMER s g c\r\n", "xgroup-createconsumer"),
        (b"XGROUP DELCONSUMER s g c\r\n", "xgroup-delconsumer"),
        (b"XGROUP SETID s g 0\r\n", "xgroup-setid"),
        (b"XGROUP DESTROY s g\r\n", "xgroup-destroy"),
        (b"XSETID s 5-0\r\n", "xsetid"),
        (b"XDEL s 2-0\r\n", "xdel"),
        (b"XADD s 6-0 f v\r\n", "xadd"),
        (b"XTRIM s MAXLEN 0\r\n", "xtrim"),
    ];
    for (command, event) in commands {
        if !command.is_empty() {
            let _ = c.roundtrip_any(command);
        }
        let channel = format!("__keyevent@0__:{event}");
        let expected = format!(
            "*4\r\n$8\r\npmessage\r\n$16\r\n__keyevent@0__:*\r\n${}\r\n{channel}\r\n$1\r\ns\r\n",
            channel.len()
        );
        sub.check(b"", expected.as_bytes());
    }
}
