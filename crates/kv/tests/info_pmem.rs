//! INFO pmem: what the log's appends cost persistent-memory media (flush
//! and media accounting of the log file), with the log on emulated PM and
//! on a plain file.

mod common;

use std::time::{Duration, Instant};

use common::{resp, Raw, TestServer};
use ferrite_kv::config::LogDevice;

fn info(c: &mut Raw, section: &str) -> String {
    String::from_utf8(c.bulk(&resp(&["INFO", section]))).expect("utf-8")
}

fn field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix(':')))
}

fn number(info: &str, name: &str) -> f64 {
    field(info, name)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no number {name} in {info:?}"))
}

/// INFO pmem once the server's figures (refreshed on its timer) show at
/// least `user_bytes` appended.
fn info_after(c: &mut Raw, user_bytes: f64) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = info(c, "pmem");
        if number(&text, "pmem_user_bytes") >= user_bytes || Instant::now() > deadline {
            return text;
        }
        std::thread::yield_now();
    }
}

#[test]
fn info_pmem_reports_media_bytes_per_user_byte_of_the_log() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = TestServer::start_with(dir.path(), |config| {
        config.log_device = LogDevice::PmemEmulated;
    });
    let mut c = server.raw();
    let value = "v".repeat(1000);
    let sets = 50;
    for i in 0..sets {
        c.check(&resp(&["SET", &format!("key:{i}"), &value]), b"+OK\r\n");
    }
    // Every SET logs at least its value's bytes.
    let text = info_after(&mut c, (sets * value.len()) as f64);
    assert!(text.starts_with("# Pmem\r\n"), "{text}");
    assert_eq!(field(&text, "pmem_log"), Some("emulated"), "{text}");
    assert_eq!(
        field(&text, "pmem_model"),
        Some(ferrite_pmem::model::selected().name())
    );
    let user = number(&text, "pmem_user_bytes");
    assert!(user >= (sets * value.len()) as f64, "{text}");
    let requests = number(&text, "pmem_requests");
    let media_lines = number(&text, "pmem_media_lines");
    let absorbed = number(&text, "pmem_absorbed");
    let rmw = number(&text, "pmem_read_modify_writes");
    // Each SET's 1 KiB value reaches the DIMM as at least 16 requests.
    assert!(requests >= (sets * 16) as f64, "{text}");
    // Every request opened a media line or was absorbed into one.
    assert_eq!(requests, media_lines + absorbed, "{text}");
    assert!(rmw <= media_lines, "{text}");
    assert_eq!(number(&text, "pmem_media_bytes"), media_lines * 256.0);
    let ratio = number(&text, "pmem_media_bytes_per_user_byte");
    let expected = media_lines * 256.0 / user;
    assert!((ratio - expected).abs() < 1e-3, "{ratio} vs {expected}");
    // A log append writes its record (the command, framed) and nothing
    // twice: between the payload's own size and a few times it.
    assert!((1.0..3.0).contains(&ratio), "{text}");
    // More SETs, more media bytes.
    for i in 0..sets {
        c.check(&resp(&["SET", &format!("more:{i}"), &value]), b"+OK\r\n");
    }
    let later = info_after(&mut c, user + (sets * value.len()) as f64);
    assert!(number(&later, "pmem_media_lines") > media_lines, "{later}");
    // Not in the default set (Redis has no such section), in `all`.
    assert!(!info(&mut c, "default").contains("# Pmem"));
    assert!(info(&mut c, "all").contains("# Pmem\r\npmem_log:emulated"));
}

#[test]
fn info_pmem_on_a_file_log_counts_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(&resp(&["SET", "k", "v"]), b"+OK\r\n");
    let text = info(&mut c, "pmem");
    assert_eq!(field(&text, "pmem_log"), Some("none"), "{text}");
    for name in [
        "pmem_requests",
        "pmem_media_lines",
        "pmem_read_modify_writes",
        "pmem_absorbed",
        "pmem_media_bytes_per_user_byte",
    ] {
        assert_eq!(number(&text, name), 0.0, "{name}: {text}");
    }
}
