//! Byte-level tests of client eviction (`maxmemory-clients`), CLIENT
//! NO-EVICT, and the client memory CLIENT LIST and INFO report: clients
//! whose query or output buffers pass the limit are closed, the largest
//! first, exempt clients never, and `evicted_clients` counts them.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::time::{Duration, Instant};

use common::{resp, Raw, TestServer};

/// The value of INFO field `name` in `section`.
fn info_field(c: &mut Raw, section: &str, name: &str) -> String {
    let text = c.bulk(&resp(&["INFO", section]));
    let text = String::from_utf8_lossy(&text).into_owned();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// The connection's CLIENT ID.
fn client_id(c: &mut Raw) -> u64 {
    let reply = line_reply(c, b"CLIENT ID\r\n");
    reply.trim_start_matches(':').parse().expect("an id")
}

/// A numeric field of client `id`'s CLIENT LIST line, as `by` sees it.
fn list_field(by: &mut Raw, id: u64, field: &str) -> u64 {
    let line = by.bulk(&resp(&["CLIENT", "LIST", "ID", &id.to_string()]));
    let line = String::from_utf8_lossy(&line).into_owned();
    line.split(' ')
        .find_map(|kv| kv.strip_prefix(&format!("{field}=")))
        .unwrap_or_else(|| panic!("no {field} in {line:?}"))
        .trim()
        .parse()
        .expect("a number")
}

/// Whether the server closed `c`: reads (and drops) what arrives until
/// the end of the stream or a reset; `false` if it stays open for 10 s.
fn closed_by_server(c: &mut Raw) -> bool {
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match c.stream.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return true,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
}

/// Sends the start of a SET whose value is `value_len` bytes and
/// `sent` bytes of that value, without finishing it: the server holds
/// them in the client's query buffer. Write errors (the server closed
/// the client meanwhile) are ignored.
fn send_partial_set(c: &mut Raw, key: &str, value_len: usize, sent: usize) {
    let head = format!(
        "*3\r\n$3\r\nSET\r\n${}\r\n{key}\r\n${value_len}\r\n",
        key.len()
    );
    if c.stream.write_all(head.as_bytes()).is_err() {
        return;
    }
    let chunk = vec![b'x'; 64 * 1024];
    let mut left = sent;
    while left > 0 {
        let n = left.min(chunk.len());
        if c.stream.write_all(&chunk[..n]).is_err() {
            return;
        }
        left -= n;
    }
}

/// Waits until the server holds at least `bytes` in client `id`'s query
/// buffer (it reads a large write over several turns).
fn wait_for_query_buffer(by: &mut Raw, id: u64, bytes: u64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while list_field(by, id, "qbuf") < bytes {
        assert!(Instant::now() < deadline, "client {id} never sent {bytes}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Sends `input` and reads a one-line reply (without its CRLF).
fn line_reply(c: &mut Raw, input: &[u8]) -> String {
    c.stream.write_all(input).expect("send");
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while !line.ends_with(b"\r\n") {
        c.stream.read_exact(&mut byte).expect("reply");
        line.push(byte[0]);
    }
    line.truncate(line.len() - 2);
    String::from_utf8_lossy(&line).into_owned()
}

/// A controlling connection exempt from eviction.
fn controller(server: &TestServer) -> Raw {
    let mut c = server.raw();
    c.check(b"CLIENT NO-EVICT on\r\n", b"+OK\r\n");
    c
}

#[test]
fn maxmemory_clients_takes_bytes_or_a_percentage_in_resp2_and_resp3() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(
        b"CONFIG GET maxmemory-clients\r\n",
        b"*2\r\n$17\r\nmaxmemory-clients\r\n$1\r\n0\r\n",
    );
    c.check(
        b"CONFIG SET maxmemory-clients 10%\r\nCONFIG GET maxmemory-clients\r\n",
        b"+OK\r\n*2\r\n$17\r\nmaxmemory-clients\r\n$3\r\n10%\r\n",
    );
    c.check(
        b"CONFIG SET maxmemory-clients 3mb\r\nCONFIG GET maxmemory-clients\r\n",
        b"+OK\r\n*2\r\n$17\r\nmaxmemory-clients\r\n$7\r\n3145728\r\n",
    );
    let refused = "-ERR CONFIG SET failed (possibly related to argument 'maxmemory-clients') - ";
    c.check(
        b"CONFIG SET maxmemory-clients 101%\r\n",
        format!("{refused}percentage argument must be less or equal to 100\r\n").as_bytes(),
    );
    for bad in ["-1", "abc"] {
        c.check(
            &resp(&["CONFIG", "SET", "maxmemory-clients", bad]),
            format!("{refused}argument must be a memory or percent value\r\n").as_bytes(),
        );
    }
    c.hello3();
    c.check(
        b"CONFIG SET maxmemory-clients 0%\r\nCONFIG GET maxmemory-clients\r\n",
        b"+OK\r\n%1\r\n$17\r\nmaxmemory-clients\r\n$1\r\n0\r\n",
    );
    server.stop();
}

#[test]
fn no_evict_sets_the_e_flag_and_checks_its_argument() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    let id = client_id(&mut c);
    c.check(b"CLIENT NO-EVICT on\r\n", b"+OK\r\n");
    let line = c.bulk(b"CLIENT INFO\r\n");
    assert!(
        String::from_utf8_lossy(&line).contains(" flags=e "),
        "{line:?}"
    );
    c.check(b"CLIENT NO-EVICT maybe\r\n", b"-ERR syntax error\r\n");
    c.check(
        b"CLIENT NO-EVICT\r\n",
        b"-ERR wrong number of arguments for 'client|no-evict' command\r\n",
    );
    // Another client sees the flag too, and RESP3 replies alike.
    let mut other = server.raw();
    let line = other.bulk(&resp(&["CLIENT", "LIST", "ID", &id.to_string()]));
    assert!(String::from_utf8_lossy(&line).contains(" flags=e "));
    c.hello3();
    c.check(b"CLIENT NO-EVICT OFF\r\n", b"+OK\r\n");
    let line = other.bulk(&resp(&["CLIENT", "LIST", "ID", &id.to_string()]));
    assert!(String::from_utf8_lossy(&line).contains(" flags=N "));
    server.stop();
}

#[test]
fn client_list_reports_query_buffer_and_transaction_memory() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut by = server.raw();
    let mut x = server.raw();
    let id = client_id(&mut x);
    x.check(b"MULTI\r\nSET a b\r\n", b"+OK\r\n+QUEUED\r\n");
    // As Redis: the arguments' bytes and a pointer each.
    assert_eq!(list_field(&mut by, id, "multi-mem"), 3 + 1 + 1 + 3 * 8);
    x.check(b"DISCARD\r\n", b"+OK\r\n");
    assert_eq!(list_field(&mut by, id, "multi-mem"), 0);
    let before = list_field(&mut by, id, "tot-mem");
    send_partial_set(&mut x, "k", 1_000_000, 300_000);
    wait_for_query_buffer(&mut by, id, 300_000);
    let during = list_field(&mut by, id, "tot-mem");
    assert!(during >= before + 300_000, "{before} -> {during}");
    let normal: u64 = info_field(&mut by, "memory", "mem_clients_normal")
        .parse()
        .unwrap();
    assert!(normal >= during, "mem_clients_normal {normal} < {during}");
    server.stop();
}

#[test]
fn a_client_whose_query_buffer_passes_the_limit_is_evicted() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = controller(&server);
    let mut bystander = server.raw();
    c.check(b"CONFIG SET maxmemory-clients 1mb\r\n", b"+OK\r\n");
    let mut hog = server.raw();
    send_partial_set(&mut hog, "k", 4_000_000, 2_000_000);
    assert!(closed_by_server(&mut hog), "the hog was not evicted");
    assert_eq!(info_field(&mut c, "stats", "evicted_clients"), "1");
    // The small client was not needed to get under the limit.
    bystander.check(b"PING\r\n", b"+PONG\r\n");
    c.check(b"CONFIG RESETSTAT\r\n", b"+OK\r\n");
    assert_eq!(info_field(&mut c, "stats", "evicted_clients"), "0");
    server.stop();
}

#[test]
fn the_largest_client_is_evicted_first() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = controller(&server);
    c.check(b"CONFIG SET maxmemory-clients 1mb\r\n", b"+OK\r\n");
    let mut small = server.raw();
    let small_id = client_id(&mut small);
    send_partial_set(&mut small, "s", 200_001, 200_000);
    wait_for_query_buffer(&mut c, small_id, 200_000);
    let mut large = server.raw();
    send_partial_set(&mut large, "l", 4_000_000, 1_000_000);
    assert!(closed_by_server(&mut large), "the larger client stayed");
    assert_eq!(info_field(&mut c, "stats", "evicted_clients"), "1");
    // The smaller one is still served: its SET completes.
    small.check(b"x\r\n", b"+OK\r\n");
    c.check(b"STRLEN s\r\n", b":200001\r\n");
    server.stop();
}

#[test]
fn a_client_that_does_not_read_its_replies_is_evicted() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = controller(&server);
    c.check(
        b"SETRANGE big 1048575 x\r\nCONFIG SET maxmemory-clients 4mb\r\n",
        b":1048576\r\n+OK\r\n",
    );
    // Fifty 1 MiB replies would pile up in its output buffer within one
    // read: it goes once they pass the limit, before its next GET runs.
    let mut reader = server.raw();
    let gets = b"GET big\r\n".repeat(50);
    reader.stream.write_all(&gets).unwrap();
    assert!(closed_by_server(&mut reader));
    assert_eq!(info_field(&mut c, "stats", "evicted_clients"), "1");
    // A few 1 MiB replies reach the limit, whatever the buffer's growth.
    let stats = info_field(&mut c, "commandstats", "cmdstat_get");
    let calls: u64 = stats
        .strip_prefix("calls=")
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{stats}"));
    assert!((1..=4).contains(&calls), "{stats}");
    server.stop();
}

#[test]
fn a_subscriber_that_does_not_read_is_evicted() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut publisher = controller(&server);
    publisher.check(b"CONFIG SET maxmemory-clients 1mb\r\n", b"+OK\r\n");
    let mut subscriber = server.raw();
    subscriber.check(
        b"SUBSCRIBE ch\r\n",
        b"*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n",
    );
    // Its socket takes some messages; the rest piles up until it is
    // evicted, after which a message reaches nobody.
    let message = "m".repeat(500_000);
    let publish = resp(&["PUBLISH", "ch", &message]);
    let mut last = String::new();
    for _ in 0..400 {
        last = line_reply(&mut publisher, &publish);
        if last == ":0" {
            break;
        }
    }
    assert_eq!(last, ":0", "the subscriber was never evicted");
    assert_eq!(info_field(&mut publisher, "stats", "evicted_clients"), "1");
    assert!(closed_by_server(&mut subscriber));
    server.stop();
}

#[test]
fn exempt_clients_stay_while_evictable_ones_go() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = controller(&server);
    c.check(b"CONFIG SET maxmemory-clients 1mb\r\n", b"+OK\r\n");
    let mut bystander = server.raw();
    bystander.check(b"PING\r\n", b"+PONG\r\n");
    let mut keeper = controller(&server);
    send_partial_set(&mut keeper, "k", 2_000_001, 2_000_000);
    // Over the limit with only the keeper to blame: as Redis, every
    // evictable client goes, the exempt ones stay.
    assert!(closed_by_server(&mut bystander));
    keeper.check(b"x\r\n", b"+OK\r\n");
    assert_eq!(info_field(&mut c, "stats", "evicted_clients"), "1");
    server.stop();
}

#[test]
fn a_percentage_applies_to_maxmemory_and_means_no_limit_without_it() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = controller(&server);
    // 10% of no maxmemory: no limit.
    c.check(b"CONFIG SET maxmemory-clients 10%\r\n", b"+OK\r\n");
    let mut hog = server.raw();
    send_partial_set(&mut hog, "k", 2_000_001, 2_000_000);
    hog.check(b"x\r\n", b"+OK\r\n");
    // 10% of 10 MB: 1 MB.
    c.check(b"CONFIG SET maxmemory 10mb\r\n", b"+OK\r\n");
    send_partial_set(&mut hog, "k", 4_000_000, 2_000_000);
    assert!(closed_by_server(&mut hog));
    assert_eq!(info_field(&mut c, "stats", "evicted_clients"), "1");
    server.stop();
}

/// A numeric INFO memory field.
fn memory_field(c: &mut Raw, name: &str) -> u64 {
    info_field(c, "memory", name)
        .parse()
        .unwrap_or_else(|_| panic!("no {name}"))
}

#[test]
fn a_replica_is_counted_apart_and_never_evicted() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = controller(&server);
    c.check(b"CONFIG SET maxmemory-clients 1mb\r\n", b"+OK\r\n");
    let mut replica = server.raw();
    let replica_id = client_id(&mut replica);
    replica.stream.write_all(b"SYNC\r\n").unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let line = c.bulk(&resp(&["CLIENT", "LIST", "ID", &replica_id.to_string()]));
        if String::from_utf8_lossy(&line).contains(" flags=S ") {
            break;
        }
        assert!(Instant::now() < deadline, "never attached: {line:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
    // 20 MB of writes the replica does not read: far more than its
    // socket takes, so its reply buffer holds megabytes.
    let value = "v".repeat(500_000);
    for i in 0..40 {
        c.check(&resp(&["SET", &format!("k{i}"), &value]), b"+OK\r\n");
    }
    let slaves = memory_field(&mut c, "mem_clients_slaves");
    assert!(slaves > 2_000_000, "mem_clients_slaves {slaves}");
    assert_eq!(memory_field(&mut c, "mem_not_counted_for_evict"), slaves);
    let backlog = memory_field(&mut c, "mem_replication_backlog");
    assert!(backlog > 0);
    // The shared replication buffer is the backlog (Redis's suite checks
    // it does not shrink when a replica leaves); the replica's unsent
    // replies are its own.
    assert_eq!(
        memory_field(&mut c, "mem_total_replication_buffers"),
        backlog
    );
    // Neither counted with the normal clients nor evicted.
    assert!(memory_field(&mut c, "mem_clients_normal") < 1_000_000);
    assert_eq!(info_field(&mut c, "stats", "evicted_clients"), "0");
    let line = c.bulk(&resp(&["CLIENT", "LIST", "ID", &replica_id.to_string()]));
    assert!(String::from_utf8_lossy(&line).contains(" flags=S "));
    server.stop();
}
