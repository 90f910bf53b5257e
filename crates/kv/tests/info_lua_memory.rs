//! INFO memory reads the EVAL interpreter's memory without making one:
//! a server that ran no script reports 0, and the first INFO adds nothing
//! to `used_memory` that a `maxmemory` set from its figure would then
//! evict keys for.

mod common;

use common::{Raw, TestServer};

fn memory_field(c: &mut Raw, name: &str) -> String {
    let text = c.bulk(b"INFO memory\r\n");
    String::from_utf8_lossy(&text)
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")).map(str::to_string))
        .unwrap_or_else(|| panic!("no {name}"))
}

#[test]
fn info_reports_no_interpreter_until_a_script_makes_one() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    for _ in 0..2 {
        assert_eq!(memory_field(&mut c, "used_memory_lua"), "0");
        assert_eq!(memory_field(&mut c, "number_of_cached_scripts"), "0");
    }
    c.check(b"EVAL \"return 1\" 0\r\n", b":1\r\n");
    assert_ne!(memory_field(&mut c, "used_memory_lua"), "0");
    assert_eq!(memory_field(&mut c, "number_of_cached_scripts"), "1");
    server.stop();
}
