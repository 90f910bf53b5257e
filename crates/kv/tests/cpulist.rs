//! `server_cpulist` pins the event loop (Redis's directive and syntax);
//! the CPU lists are start-up settings, refused by CONFIG SET, and a bad
//! list is a configuration error.

mod common;

use common::{resp, TestServer};
use ferrite_kv::config::Config;

/// The CPUs a thread of this process may run on, from `/proc`.
fn allowed(task: &std::path::Path) -> Option<String> {
    let status = std::fs::read_to_string(task.join("status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(|v| v.trim().to_string())
}

#[test]
fn server_cpulist_pins_the_event_loop_only() {
    let own = allowed(std::path::Path::new("/proc/thread-self")).expect("/proc");
    let cpus = ferrite_kv::cpus::parse(&own.replace(' ', ""))
        .expect("list")
        .expect("cpus");
    let last = *cpus.last().expect("a CPU");
    let dir = tempfile::tempdir().expect("tempdir");
    let server = TestServer::start_with(dir.path(), |c| {
        c.set("server_cpulist", &[last.to_string()])
            .expect("valid list");
    });
    // One round trip: the loop has pinned itself before it answers.
    server.raw().check(&resp(&["PING"]), b"+PONG\r\n");
    let pinned: Vec<String> = std::fs::read_dir("/proc/self/task")
        .expect("tasks")
        .flatten()
        .filter_map(|t| allowed(&t.path()))
        .filter(|a| *a == last.to_string())
        .collect();
    if cpus.len() > 1 {
        // This thread and every other keep the process's set.
        assert_eq!(pinned.len(), 1, "exactly the loop is pinned");
        assert_eq!(
            allowed(std::path::Path::new("/proc/thread-self")),
            Some(own)
        );
    }
    server.raw().check(
        &resp(&["CONFIG", "GET", "server_cpulist"]),
        format!(
            "*2\r\n$14\r\nserver_cpulist\r\n${}\r\n{last}\r\n",
            last.to_string().len()
        )
        .as_bytes(),
    );
    let reply = server
        .raw()
        .roundtrip_any(&resp(&["CONFIG", "SET", "aof_rewrite_cpulist", "0"]));
    assert!(
        String::from_utf8_lossy(&reply).contains("can't set immutable config"),
        "{}",
        String::from_utf8_lossy(&reply)
    );
    server.stop();
}

#[test]
fn bad_cpu_lists_are_configuration_errors() {
    let mut config = Config::default();
    for bad in ["3-1", "x", "0-4:0", "1,,2"] {
        let err = config
            .set("aof_rewrite_cpulist", &[bad.to_string()])
            .unwrap_err();
        assert!(err.contains("aof_rewrite_cpulist"), "{err}");
    }
    config
        .set("aof_rewrite_cpulist", &["0-7:2".to_string()])
        .expect("stride");
    assert_eq!(
        config.cpulist("aof_rewrite_cpulist"),
        Some(vec![0, 2, 4, 6])
    );
    assert_eq!(config.cpulist("server_cpulist"), None);
}
