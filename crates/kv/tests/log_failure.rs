//! The log on simulated devices: power failures (unsynced writes dropped or
//! torn) must keep every acknowledged write, and failed syncs or a full
//! disk must put the server in the refusing (MISCONF) state.

mod common;

use std::sync::Arc;
use std::thread::JoinHandle;

use common::Raw;
use ferrite_io::{Device, SimFile};
use ferrite_kv::config::{AppendFsync, Config};
use ferrite_kv::{Server, ShutdownHandle};

struct SimServer {
    raw_addr: std::net::SocketAddr,
    handle: ShutdownHandle,
    thread: Option<JoinHandle<ferrite_kv::Result<()>>>,
}

impl SimServer {
    fn start(sim: Arc<SimFile>) -> SimServer {
        SimServer::start_with(sim, AppendFsync::Always)
    }

    fn start_with(sim: Arc<SimFile>, appendfsync: AppendFsync) -> SimServer {
        let config = Config {
            port: 0,
            appendfsync,
            ..Config::default()
        };
        let device: Arc<dyn Device> = sim;
        let server = Server::bind_with(config, Some(device)).expect("server starts");
        let raw_addr = server.local_addr().expect("bound");
        let handle = server.shutdown_handle();
        let thread = Some(std::thread::spawn(move || server.run()));
        SimServer {
            raw_addr,
            handle,
            thread,
        }
    }

    fn raw(&self) -> Raw {
        Raw::connect(self.raw_addr)
    }
}

impl Drop for SimServer {
    fn drop(&mut self) {
        self.handle.shutdown();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[test]
fn power_failure_keeps_every_acknowledged_write() {
    let iterations: u64 = std::env::var("FERRITE_CRASH_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    for seed in 0..iterations {
        let sim = Arc::new(SimFile::new("/sim/appendonly.aof"));
        let server = SimServer::start(Arc::clone(&sim));
        let mut c = server.raw();
        let acked = 10 + seed as usize % 20;
        for i in 0..acked {
            c.check(format!("SET k{i} v{i}\r\n").as_bytes(), b"+OK\r\n");
        }
        // Unacknowledged work in flight when the power goes.
        let _ = std::io::Write::write_all(
            &mut c.stream,
            b"SET late 1\r\nMULTI\r\nSET t1 x\r\nSET t2 x\r\nEXEC\r\n",
        );
        let image = sim.crash_image(seed);
        drop(server);
        let restored = Arc::new(SimFile::from_image("/sim/appendonly.aof", image));
        let server = SimServer::start(restored);
        let mut c = server.raw();
        for i in 0..acked {
            c.check(
                format!("GET k{i}\r\n").as_bytes(),
                format!("$2\r\nv{i}\r\n")
                    .replace("$2", &format!("${}", format!("v{i}").len()))
                    .as_bytes(),
            );
        }
        let both = c.roundtrip_any(b"EXISTS t1 t2\r\n");
        assert!(
            both == b":0\r\n" || both == b":2\r\n",
            "seed {seed}: half a transaction: {both:?}"
        );
    }
}

#[test]
fn failed_sync_refuses_writes_and_serves_reads() {
    let sim = Arc::new(SimFile::new("/sim/appendonly.aof"));
    let server = SimServer::start(Arc::clone(&sim));
    let mut c = server.raw();
    c.check(b"SET a 1\r\n", b"+OK\r\n");
    sim.fail_next_syncs(1);
    // The write whose sync failed is never acknowledged: its connection is
    // closed without a reply.
    let _ = std::io::Write::write_all(&mut c.stream, b"SET b 2\r\n");
    assert!(c.is_closed());
    let mut c = server.raw();
    c.check(b"GET a\r\n", b"$1\r\n1\r\n");
    let misconf = c.roundtrip_any(b"SET c 3\r\n");
    assert!(
        misconf.starts_with(b"-MISCONF Errors writing to the AOF file: "),
        "{:?}",
        String::from_utf8_lossy(&misconf)
    );
    let info = String::from_utf8_lossy(&c.roundtrip_any(b"INFO persistence\r\n")).into_owned();
    assert!(info.contains("aof_last_write_status:err"), "{info}");
}

#[test]
fn full_disk_refuses_writes() {
    full_disk_refuses_writes_with(AppendFsync::Always);
}

/// With `everysec` the event loop writes the log itself (no committer
/// thread): a failed write must poison the log just the same.
#[test]
fn full_disk_refuses_writes_with_everysec() {
    full_disk_refuses_writes_with(AppendFsync::EverySec);
}

fn full_disk_refuses_writes_with(appendfsync: AppendFsync) {
    let sim = Arc::new(SimFile::new("/sim/appendonly.aof"));
    sim.set_space_limit(Some(4096));
    let server = SimServer::start_with(Arc::clone(&sim), appendfsync);
    let mut c = server.raw();
    let value = "x".repeat(1000);
    let mut refused = false;
    let mut acked = Vec::new();
    for i in 0..20 {
        let reply = c.roundtrip_any(format!("SET k{i} {value}\r\n").as_bytes());
        if reply.is_empty() {
            c = server.raw();
            continue;
        }
        if reply.starts_with(b"-MISCONF") {
            refused = true;
            break;
        }
        assert_eq!(reply, b"+OK\r\n");
        acked.push(i);
    }
    assert!(refused, "writes were never refused on a full disk");
    assert!(!acked.is_empty(), "nothing fitted before the disk was full");
    c.check(
        b"GET k0\r\n",
        format!("${}\r\n{value}\r\n", value.len()).as_bytes(),
    );
    // Every acknowledged write is in the file the OS holds (what a restart
    // after kill -9 reads): none was acknowledged unwritten.
    let mut image = vec![0; sim.len() as usize];
    let read = sim.read_at(0, &mut image).expect("read the log");
    image.truncate(read);
    drop(c);
    drop(server);
    let restored = Arc::new(SimFile::from_image("/sim/appendonly.aof", image));
    let server = SimServer::start_with(restored, appendfsync);
    let mut c = server.raw();
    for i in acked {
        c.check(format!("EXISTS k{i}\r\n").as_bytes(), b":1\r\n");
    }
}

#[test]
fn failed_background_sync_of_everysec_refuses_writes() {
    let sim = Arc::new(SimFile::new("/sim/appendonly.aof"));
    let server = SimServer::start_with(Arc::clone(&sim), AppendFsync::EverySec);
    let mut c = server.raw();
    c.check(b"SET a 1\r\n", b"+OK\r\n");
    sim.fail_next_syncs(1);
    // Acknowledged once written (everysec); the once-a-second sync fails.
    c.check(b"SET b 2\r\n", b"+OK\r\n");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let info = String::from_utf8_lossy(&c.roundtrip_any(b"INFO persistence\r\n")).into_owned();
        if info.contains("aof_last_write_status:err") {
            assert!(info.contains("ferrite_log_failure:"), "{info}");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the failed sync was never reported: {info}"
        );
    }
    let misconf = c.roundtrip_any(b"SET c 3\r\n");
    assert!(misconf.starts_with(b"-MISCONF"), "{misconf:?}");
    c.check(b"GET b\r\n", b"$1\r\n2\r\n");
}
