//! Byte-level tests of Pub/Sub and MONITOR with several raw connections:
//! the exact bytes each client receives, in order. A publisher's reply is
//! read before the subscriber's messages, and the server delivers
//! messages to other clients before it writes the publisher's reply, so
//! no test sleeps.

mod common;

use common::TestServer;

#[test]
fn subscribe_publish_unsubscribe_resp2() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut sub = server.raw();
    let mut publisher = server.raw();
    sub.check(
        b"SUBSCRIBE chan1 chan2 chan1\r\n",
        b"*3\r\n$9\r\nsubscribe\r\n$5\r\nchan1\r\n:1\r\n\
          *3\r\n$9\r\nsubscribe\r\n$5\r\nchan2\r\n:2\r\n\
          *3\r\n$9\r\nsubscribe\r\n$5\r\nchan1\r\n:2\r\n",
    );
    publisher.check(
        b"PUBLISH chan1 hello\r\nPUBLISH nobody x\r\n",
        b":1\r\n:0\r\n",
    );
    sub.check(
        b"",
        b"*3\r\n$7\r\nmessage\r\n$5\r\nchan1\r\n$5\r\nhello\r\n",
    );
    publisher.check(
        b"PUBSUB NUMSUB chan1 chan3\r\nPUBSUB CHANNELS chan2\r\nPUBSUB NUMPAT\r\n",
        b"*4\r\n$5\r\nchan1\r\n:1\r\n$5\r\nchan3\r\n:0\r\n*1\r\n$5\r\nchan2\r\n:0\r\n",
    );
    // Only the Pub/Sub commands, PING, QUIT and RESET while subscribed.
    sub.check(
        b"GET k\r\nPING\r\nPING foo\r\n",
        b"-ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n\
          *2\r\n$4\r\npong\r\n$0\r\n\r\n*2\r\n$4\r\npong\r\n$3\r\nfoo\r\n",
    );
    sub.check(
        b"CLIENT LIST\r\n",
        b"-ERR Can't execute 'client|list': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n",
    );
    sub.check(
        b"UNSUBSCRIBE chan1 nope\r\n",
        b"*3\r\n$11\r\nunsubscribe\r\n$5\r\nchan1\r\n:1\r\n\
          *3\r\n$11\r\nunsubscribe\r\n$4\r\nnope\r\n:1\r\n",
    );
    sub.check(
        b"UNSUBSCRIBE\r\n",
        b"*3\r\n$11\r\nunsubscribe\r\n$5\r\nchan2\r\n:0\r\n",
    );
    sub.check(
        b"UNSUBSCRIBE\r\nPUNSUBSCRIBE\r\nPING\r\n",
        b"*3\r\n$11\r\nunsubscribe\r\n$-1\r\n:0\r\n*3\r\n$12\r\npunsubscribe\r\n$-1\r\n:0\r\n+PONG\r\n",
    );
    publisher.check(b"PUBLISH chan2 x\r\n", b":0\r\n");
}

#[test]
fn patterns_and_mixed_counts() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut sub = server.raw();
    let mut other = server.raw();
    let mut publisher = server.raw();
    sub.check(
        b"PSUBSCRIBE foo.* bar.*\r\nSUBSCRIBE foo.1\r\n",
        b"*3\r\n$10\r\npsubscribe\r\n$5\r\nfoo.*\r\n:1\r\n\
          *3\r\n$10\r\npsubscribe\r\n$5\r\nbar.*\r\n:2\r\n\
          *3\r\n$9\r\nsubscribe\r\n$5\r\nfoo.1\r\n:3\r\n",
    );
    other.check(
        b"PSUBSCRIBE foo.*\r\n",
        b"*3\r\n$10\r\npsubscribe\r\n$5\r\nfoo.*\r\n:1\r\n",
    );
    publisher.check(b"PUBSUB NUMPAT\r\n", b":2\r\n");
    // One channel subscriber and two pattern subscriptions.
    publisher.check(b"PUBLISH foo.1 hi\r\nPUBLISH foo1 no\r\n", b":3\r\n:0\r\n");
    sub.check(
        b"",
        b"*3\r\n$7\r\nmessage\r\n$5\r\nfoo.1\r\n$2\r\nhi\r\n\
          *4\r\n$8\r\npmessage\r\n$5\r\nfoo.*\r\n$5\r\nfoo.1\r\n$2\r\nhi\r\n",
    );
    other.check(
        b"",
        b"*4\r\n$8\r\npmessage\r\n$5\r\nfoo.*\r\n$5\r\nfoo.1\r\n$2\r\nhi\r\n",
    );
    sub.check(
        b"PUNSUBSCRIBE foo.*\r\n",
        b"*3\r\n$12\r\npunsubscribe\r\n$5\r\nfoo.*\r\n:2\r\n",
    );
    publisher.check(b"PUBLISH foo.2 x\r\n", b":1\r\n");
    other.check(
        b"",
        b"*4\r\n$8\r\npmessage\r\n$5\r\nfoo.*\r\n$5\r\nfoo.2\r\n$1\r\nx\r\n",
    );
    // A client that leaves drops its subscriptions.
    drop(other);
    sub.check(b"RESET\r\n", b"+RESET\r\n");
    let mut probe = server.raw();
    probe.check(b"PUBSUB NUMPAT\r\nPUBLISH foo.3 x\r\n", b":0\r\n:0\r\n");
}

#[test]
fn shard_channels() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut sub = server.raw();
    let mut publisher = server.raw();
    sub.check(
        b"SSUBSCRIBE s1 s2\r\nSUBSCRIBE s1\r\n",
        b"*3\r\n$10\r\nssubscribe\r\n$2\r\ns1\r\n:1\r\n\
          *3\r\n$10\r\nssubscribe\r\n$2\r\ns2\r\n:2\r\n\
          *3\r\n$9\r\nsubscribe\r\n$2\r\ns1\r\n:1\r\n",
    );
    publisher.check(
        b"SPUBLISH s1 a\r\nPUBSUB SHARDNUMSUB s1 x\r\nPUBSUB SHARDCHANNELS s2\r\n",
        b":1\r\n*4\r\n$2\r\ns1\r\n:1\r\n$1\r\nx\r\n:0\r\n*1\r\n$2\r\ns2\r\n",
    );
    sub.check(b"", b"*3\r\n$8\r\nsmessage\r\n$2\r\ns1\r\n$1\r\na\r\n");
    sub.check(
        b"SUNSUBSCRIBE s2\r\n",
        b"*3\r\n$12\r\nsunsubscribe\r\n$2\r\ns2\r\n:1\r\n",
    );
    sub.check(
        b"UNSUBSCRIBE\r\nGET k\r\n",
        b"*3\r\n$11\r\nunsubscribe\r\n$2\r\ns1\r\n:0\r\n\
          -ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n",
    );
    sub.check(
        b"SUNSUBSCRIBE\r\nGET k\r\n",
        b"*3\r\n$12\r\nsunsubscribe\r\n$2\r\ns1\r\n:0\r\n$-1\r\n",
    );
}

#[test]
fn resp3_pushes_and_no_restriction() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut sub = server.raw();
    let mut publisher = server.raw();
    sub.hello3();
    sub.check(
        b"SUBSCRIBE ch\r\nUNSUBSCRIBE x\r\n",
        b">3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n>3\r\n$11\r\nunsubscribe\r\n$1\r\nx\r\n:1\r\n",
    );
    // RESP3 clients may run anything while subscribed; PING is plain.
    sub.check(b"GET k\r\nPING\r\n", b"_\r\n+PONG\r\n");
    publisher.check(b"PUBLISH ch m\r\n", b":1\r\n");
    sub.check(b"", b">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$1\r\nm\r\n");
    // A message to the publisher itself precedes its PUBLISH reply.
    sub.check(
        b"PUBLISH ch self\r\n",
        b">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$4\r\nself\r\n:1\r\n",
    );
    sub.check(
        b"UNSUBSCRIBE\r\nUNSUBSCRIBE\r\n",
        b">3\r\n$11\r\nunsubscribe\r\n$2\r\nch\r\n:0\r\n>3\r\n$11\r\nunsubscribe\r\n_\r\n:0\r\n",
    );
}

#[test]
fn client_list_counts_subscriptions() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut sub = server.raw();
    let mut admin = server.raw();
    sub.check(b"CLIENT ID\r\n", b":1\r\n");
    let _ = sub.roundtrip_any(b"SUBSCRIBE a b\r\nPSUBSCRIBE p*\r\nSSUBSCRIBE s\r\n");
    let list = admin.roundtrip_any(b"CLIENT LIST\r\n");
    let text = String::from_utf8_lossy(&list);
    let line = text
        .lines()
        .find(|l| l.contains("id=1 "))
        .expect("client 1");
    assert!(line.contains(" flags=P "), "{line}");
    assert!(line.contains(" sub=2 psub=1 ssub=1 "), "{line}");
}

#[test]
fn pubsub_errors_and_help() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(
        b"PUBSUB\r\nPUBSUB FOO\r\nPUBLISH a\r\nSUBSCRIBE\r\n",
        b"-ERR wrong number of arguments for 'pubsub' command\r\n\
          -ERR unknown subcommand 'FOO'. Try PUBSUB HELP.\r\n\
          -ERR wrong number of arguments for 'publish' command\r\n\
          -ERR wrong number of arguments for 'subscribe' command\r\n",
    );
    c.check(
        b"PUBSUB CHANNELS a b\r\nPUBSUB NUMPAT x\r\n",
        b"-ERR unknown subcommand or wrong number of arguments for 'CHANNELS'. Try PUBSUB HELP.\r\n\
          -ERR wrong number of arguments for 'pubsub|numpat' command\r\n",
    );
    let help = c.roundtrip_any(b"PUBSUB HELP\r\n");
    assert!(
        help.starts_with(
            b"*14\r\n+PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\r\n"
        ),
        "{}",
        String::from_utf8_lossy(&help)
    );
    // SUBSCRIBE is queued in MULTI and runs at EXEC.
    c.check(
        b"MULTI\r\nSUBSCRIBE x\r\nEXEC\r\n",
        b"+OK\r\n+QUEUED\r\n*1\r\n*3\r\n$9\r\nsubscribe\r\n$1\r\nx\r\n:1\r\n",
    );
}

#[test]
fn monitor_shows_other_clients_commands() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut mon = server.raw();
    let mut c = server.raw();
    mon.check(b"MONITOR\r\n", b"+OK\r\n");
    c.check(
        b"SET k \"a b\\x01\"\r\nAUTH secret\r\nCONFIG GET port\r\nGET k\r\n",
        b"+OK\r\n-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?\r\n*2\r\n$4\r\nport\r\n",
    );
    let addr = c.stream.local_addr().unwrap().to_string();
    let expected = [
        format!(" [0 {addr}] \"SET\" \"k\" \"a b\\x01\"\r\n"),
        format!(" [0 {addr}] \"AUTH\" \"(redacted)\"\r\n"),
        format!(" [0 {addr}] \"GET\" \"k\"\r\n"),
    ];
    let mut got = Vec::new();
    while got.len() < expected.iter().map(String::len).sum::<usize>() + 3 * 18 {
        let mut buf = [0u8; 4096];
        let n = std::io::Read::read(&mut mon.stream, &mut buf).unwrap();
        assert!(n > 0);
        got.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8(got).unwrap();
    let lines: Vec<&str> = text.split_inclusive("\r\n").collect();
    assert_eq!(lines.len(), 3, "{text}");
    for (line, tail) in lines.iter().zip(&expected) {
        // `+<seconds>.<6 digits>` then the client and the arguments.
        assert!(line.starts_with('+'), "{line}");
        let (stamp, rest) = line[1..].split_at(line[1..].find(' ').unwrap());
        let (secs, micros) = stamp.split_once('.').unwrap();
        assert!(secs.len() >= 10 && micros.len() == 6, "{line}");
        assert_eq!(rest, tail);
    }
}

#[test]
fn client_reply_silences_replies_but_not_pushes() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(
        b"CLIENT REPLY SKIP\r\nSET a 1\r\nGET a\r\nCLIENT REPLY FOO\r\n",
        b"$1\r\n1\r\n-ERR syntax error\r\n",
    );
    c.check(
        b"CLIENT REPLY OFF\r\nSET a 2\r\nCLIENT REPLY SKIP\r\nGET nope\r\nCLIENT REPLY ON\r\nGET a\r\n",
        b"+OK\r\n$1\r\n2\r\n",
    );
    let mut publisher = server.raw();
    c.check(
        b"CLIENT REPLY OFF\r\nPSUBSCRIBE *\r\n",
        b"*3\r\n$10\r\npsubscribe\r\n$1\r\n*\r\n:1\r\n",
    );
    publisher.check(b"PUBLISH x y\r\n", b":1\r\n");
    c.check(
        b"PING\r\n",
        b"*4\r\n$8\r\npmessage\r\n$1\r\n*\r\n$1\r\nx\r\n$1\r\ny\r\n",
    );
    // PING's reply was dropped: the next bytes are the confirmation.
    c.check(
        b"PUNSUBSCRIBE\r\n",
        b"*3\r\n$12\r\npunsubscribe\r\n$1\r\n*\r\n:0\r\n",
    );
}

#[test]
fn monitor_orders_transactions_and_skips_admin() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut mon = server.raw();
    let mut c = server.raw();
    mon.check(b"MONITOR\r\n", b"+OK\r\n");
    c.check(
        b"MULTI\r\nSET foo bar\r\nEXEC\r\nMULTI\r\nNOSUCH\r\nEXEC\r\nCLIENT LIST\r\nPING\r\n",
        b"+OK\r\n+QUEUED\r\n*1\r\n+OK\r\n+OK\r\n-ERR unknown command 'NOSUCH', with args beginning with: \r\n-EXECABORT Transaction discarded because of previous errors.\r\n",
    );
    let _ = c.roundtrip_any(b"");
    let mut text = String::new();
    while text.matches("\r\n").count() < 6 {
        let mut buf = [0u8; 4096];
        let n = std::io::Read::read(&mut mon.stream, &mut buf).unwrap();
        assert!(n > 0);
        text.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    let args: Vec<&str> = text
        .lines()
        .map(|l| l.split_once("] ").map_or(l, |(_, rest)| rest))
        .collect();
    assert_eq!(
        args,
        [
            "\"MULTI\"",
            "\"SET\" \"foo\" \"bar\"",
            "\"EXEC\"",
            "\"MULTI\"",
            "\"EXEC\"",
            "\"PING\""
        ],
        "{text}"
    );
}

#[test]
fn a_subscriber_that_never_reads_is_disconnected() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut sub = server.raw();
    let mut publisher = server.raw();
    sub.check(
        b"SUBSCRIBE ch\r\n",
        b"*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n",
    );
    let message = "x".repeat(1024 * 1024);
    let publish = common::resp(&["PUBLISH", "ch", &message]);
    // 48 MB for a reader that reads nothing: past the 32 MB hard limit
    // even with the sockets' buffers full.
    let mut delivered = 0;
    for _ in 0..48 {
        std::io::Write::write_all(&mut publisher.stream, &publish).unwrap();
        let mut reply = [0u8; 4];
        std::io::Read::read_exact(&mut publisher.stream, &mut reply).unwrap();
        delivered += i32::from(&reply == b":1\r\n");
    }
    assert!(delivered < 48, "the subscriber was never dropped");
    publisher.check(b"PUBSUB NUMSUB ch\r\n", b"*2\r\n$2\r\nch\r\n:0\r\n");
}
