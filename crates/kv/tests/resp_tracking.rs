//! Byte-level tests of client-side caching (CLIENT TRACKING): the exact
//! invalidation messages each client receives, RESP3 pushes on the same
//! connection and RESP2 messages through a redirect client.

mod common;

use common::{Raw, TestServer};

/// The RESP2 message a redirect client gets for invalidated `keys`.
fn redirected(keys: &[&str]) -> Vec<u8> {
    let mut out = format!(
        "*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n*{}\r\n",
        keys.len()
    )
    .into_bytes();
    for k in keys {
        out.extend(format!("${}\r\n{k}\r\n", k.len()).bytes());
    }
    out
}

/// The RESP3 push for invalidated `keys`.
fn pushed(keys: &[&str]) -> Vec<u8> {
    let mut out = format!(">2\r\n$10\r\ninvalidate\r\n*{}\r\n", keys.len()).into_bytes();
    for k in keys {
        out.extend(format!("${}\r\n{k}\r\n", k.len()).bytes());
    }
    out
}

/// A RESP2 client subscribed to the invalidation channel; returns it and
/// its id.
fn redirect_target(server: &TestServer) -> (Raw, u64) {
    let mut r = server.raw();
    let id = r.roundtrip_any(b"CLIENT ID\r\n");
    let id: u64 = String::from_utf8_lossy(&id[1..id.len() - 2])
        .parse()
        .unwrap();
    r.check(
        b"SUBSCRIBE __redis__:invalidate\r\n",
        b"*3\r\n$9\r\nsubscribe\r\n$20\r\n__redis__:invalidate\r\n:1\r\n",
    );
    (r, id)
}

#[test]
fn redirected_invalidations_in_resp2() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let (mut target, id) = redirect_target(&server);
    let mut reader = server.raw();
    let mut writer = server.raw();
    reader.check(
        format!("CLIENT TRACKING ON REDIRECT {id}\r\n").as_bytes(),
        b"+OK\r\n",
    );
    reader.check(b"MGET a b\r\nGET c\r\n", b"*2\r\n$-1\r\n$-1\r\n$-1\r\n");
    writer.check(b"MSET a 1 b 2\r\nSET d 4\r\n", b"+OK\r\n+OK\r\n");
    target.check(b"", &[redirected(&["a"]), redirected(&["b"])].concat());
    // Invalidated keys are forgotten until read again.
    writer.check(b"SET a 5\r\nSET c 3\r\n", b"+OK\r\n+OK\r\n");
    target.check(b"", &redirected(&["c"]));
    reader.check(
        b"CLIENT GETREDIR\r\nCLIENT TRACKING OFF\r\nCLIENT GETREDIR\r\n",
        format!(":{id}\r\n+OK\r\n:-1\r\n").as_bytes(),
    );
    reader.check(b"GET a\r\n", b"$1\r\n5\r\n");
    writer.check(b"SET a 6\r\nFLUSHALL\r\n", b"+OK\r\n+OK\r\n");
    // Tracking is off: not even the flush reaches the target; the next
    // message it gets is the publisher's.
    writer.check(b"PUBLISH __redis__:invalidate hi\r\n", b":1\r\n");
    target.check(
        b"",
        b"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n$2\r\nhi\r\n",
    );
}

#[test]
fn resp3_invalidation_follows_the_reply() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.hello3();
    c.check(b"CLIENT TRACKING ON\r\nGET k\r\n", b"+OK\r\n_\r\n");
    // The client's own write: the invalidation comes after the reply.
    c.check(b"SET k v\r\n", &[&b"+OK\r\n"[..], &pushed(&["k"])].concat());
    c.check(b"GET k\r\n", b"$1\r\nv\r\n");
    c.check(
        b"MULTI\r\nSET k 1\r\nGET k\r\nEXEC\r\n",
        &[
            &b"+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n+OK\r\n$1\r\n1\r\n"[..],
            &pushed(&["k"]),
        ]
        .concat(),
    );
    // Another client's write.
    let mut other = server.raw();
    other.check(b"DEL k\r\n", b":1\r\n");
    c.check(b"", &pushed(&["k"]));
    // A flush invalidates everything with a null.
    c.check(b"GET k\r\n", b"_\r\n");
    c.check(b"FLUSHDB\r\n", b"+OK\r\n>2\r\n$10\r\ninvalidate\r\n_\r\n");
    // NOLOOP: no message for the client's own writes.
    c.check(
        b"CLIENT TRACKING ON NOLOOP\r\nGET k\r\nSET k 2\r\n",
        b"+OK\r\n_\r\n+OK\r\n",
    );
    other.check(b"GET k\r\n", b"$1\r\n2\r\n");
    c.check(b"GET k\r\n", b"$1\r\n2\r\n");
    other.check(b"SET k 3\r\n", b"+OK\r\n");
    c.check(b"", &pushed(&["k"]));
}

#[test]
fn bcast_prefixes() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    let mut writer = server.raw();
    c.hello3();
    c.check(
        b"CLIENT TRACKING ON BCAST PREFIX a: PREFIX b:\r\n",
        b"+OK\r\n",
    );
    // One round's keys under a prefix arrive together, sorted.
    writer.check(b"MSET a:2 x a:1 y c:1 z\r\n", b"+OK\r\n");
    c.check(b"", &pushed(&["a:1", "a:2"]));
    writer.check(b"SET b:1 x\r\n", b"+OK\r\n");
    c.check(b"", &pushed(&["b:1"]));
    c.check(
        b"CLIENT TRACKING ON BCAST PREFIX a:x\r\n",
        b"-ERR Prefix 'a:x' overlaps with an existing prefix 'a:'. Prefixes for a single client must not overlap.\r\n",
    );
    c.check(
        b"CLIENT TRACKING ON\r\n",
        b"-ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.\r\n",
    );
    c.check(
        b"CLIENT TRACKINGINFO\r\n",
        b"%3\r\n$5\r\nflags\r\n~2\r\n$2\r\non\r\n$5\r\nbcast\r\n$8\r\nredirect\r\n:0\r\n$8\r\nprefixes\r\n*2\r\n$2\r\na:\r\n$2\r\nb:\r\n",
    );
}

#[test]
fn optin_optout_and_errors() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    let mut writer = server.raw();
    c.hello3();
    c.check(
        b"CLIENT CACHING YES\r\n",
        b"-ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled\r\n",
    );
    c.check(
        b"CLIENT TRACKING ON OPTIN\r\nGET a\r\nCLIENT CACHING YES\r\nGET b\r\nCLIENT CACHING NO\r\n",
        b"+OK\r\n_\r\n+OK\r\n_\r\n-ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.\r\n",
    );
    writer.check(b"SET a 1\r\nSET b 1\r\n", b"+OK\r\n+OK\r\n");
    c.check(b"", &pushed(&["b"]));
    c.check(
        b"CLIENT TRACKINGINFO\r\n",
        b"%3\r\n$5\r\nflags\r\n~2\r\n$2\r\non\r\n$5\r\noptin\r\n$8\r\nredirect\r\n:0\r\n$8\r\nprefixes\r\n*0\r\n",
    );
    c.check(
        b"CLIENT TRACKING ON OPTOUT\r\n",
        b"-ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.\r\n",
    );
    c.check(
        b"CLIENT TRACKING OFF\r\nCLIENT TRACKING ON OPTIN OPTOUT\r\nCLIENT TRACKING ON BCAST OPTIN\r\nCLIENT TRACKING ON PREFIX x\r\n",
        b"+OK\r\n-ERR You can't specify both OPTIN mode and OPTOUT mode\r\n\
          -ERR OPTIN and OPTOUT are not compatible with BCAST\r\n\
          -ERR PREFIX option requires BCAST mode to be enabled\r\n",
    );
    c.check(
        b"CLIENT TRACKING ON REDIRECT 9999\r\nCLIENT TRACKING MAYBE\r\nCLIENT TRACKING ON FOO\r\n",
        b"-ERR The client ID you want redirect to does not exist\r\n-ERR syntax error\r\n-ERR syntax error\r\n",
    );
    c.check(
        b"CLIENT TRACKING OFF\r\nCLIENT TRACKINGINFO\r\n",
        b"+OK\r\n%3\r\n$5\r\nflags\r\n~1\r\n$3\r\noff\r\n$8\r\nredirect\r\n:-1\r\n$8\r\nprefixes\r\n*0\r\n",
    );
}

#[test]
fn broken_redirect_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let (target, id) = redirect_target(&server);
    let mut c = server.raw();
    let mut writer = server.raw();
    c.hello3();
    c.check(
        format!("CLIENT TRACKING ON REDIRECT {id}\r\nGET k\r\n").as_bytes(),
        b"+OK\r\n_\r\n",
    );
    drop(target);
    // Wait until the server has seen the target leave.
    let gone = format!("id={id} ");
    while String::from_utf8_lossy(&writer.roundtrip_any(b"CLIENT LIST\r\n")).contains(&gone) {}
    writer.check(b"SET k 1\r\n", b"+OK\r\n");
    c.check(
        b"",
        format!(">2\r\n$21\r\ntracking-redir-broken\r\n:{id}\r\n").as_bytes(),
    );
    let list = writer.roundtrip_any(b"CLIENT LIST\r\n");
    let text = String::from_utf8_lossy(&list);
    assert!(text.contains("flags=tR db=0"), "{text}");
    assert!(text.contains(&format!("redir={id} ")), "{text}");
}

#[test]
fn table_limit_and_info() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    let mut admin = server.raw();
    c.hello3();
    c.check(
        b"CLIENT TRACKING ON\r\nMGET a b\r\n",
        b"+OK\r\n*2\r\n_\r\n_\r\n",
    );
    let info = String::from_utf8(admin.roundtrip_any(b"INFO\r\n")).unwrap();
    for line in [
        "tracking_clients:1\r\n",
        "tracking_total_keys:2\r\n",
        "tracking_total_items:2\r\n",
    ] {
        assert!(info.contains(line), "{line} in {info}");
    }
    // Over the limit, keys are dropped and their clients told so, before
    // the reply of the client's next command.
    admin.check(b"CONFIG SET tracking-table-max-keys 1\r\n", b"+OK\r\n");
    let got = c.roundtrip_any(b"PING\r\n");
    assert!(
        got == [pushed(&["a"]), b"+PONG\r\n".to_vec()].concat()
            || got == [pushed(&["b"]), b"+PONG\r\n".to_vec()].concat(),
        "{}",
        String::from_utf8_lossy(&got)
    );
    // A flush empties the table even when nobody tracks anymore.
    c.check(b"CLIENT TRACKING OFF\r\n", b"+OK\r\n");
    admin.check(b"FLUSHALL\r\n", b"+OK\r\n");
    let info = String::from_utf8(admin.roundtrip_any(b"INFO\r\n")).unwrap();
    assert!(info.contains("tracking_total_keys:0\r\n"), "{info}");
    assert!(info.contains("tracking_clients:0\r\n"), "{info}");
}

#[test]
fn redirect_target_changing_the_key_gets_the_push_first() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut target = server.raw();
    let mut reader = server.raw();
    target.hello3();
    let id = target.roundtrip_any(b"CLIENT ID\r\n");
    let id = String::from_utf8_lossy(&id[1..id.len() - 2]).into_owned();
    reader.check(
        format!("CLIENT TRACKING ON REDIRECT {id}\r\nGET a\r\n").as_bytes(),
        b"+OK\r\n$-1\r\n",
    );
    // Redis writes the invalidation when the key changes, before the
    // writer's own reply.
    target.check(
        b"SET a 2\r\n",
        &[pushed(&["a"]), b"+OK\r\n".to_vec()].concat(),
    );
}

#[test]
fn bcast_noloop_still_reports_expiry() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.hello3();
    // The client's own SET is left out; the key's expiry is not.
    c.check(
        b"CLIENT TRACKING ON BCAST NOLOOP\r\nSET k v PX 1\r\n",
        b"+OK\r\n+OK\r\n",
    );
    let push = pushed(&["k"]);
    let mut seen = Vec::new();
    while !seen.windows(push.len()).any(|w| w == push.as_slice()) {
        seen.extend(c.roundtrip_any(b"EXISTS k\r\n"));
    }
    let text = String::from_utf8_lossy(&seen);
    assert_eq!(text.matches("invalidate").count(), 1, "{text}");
}
