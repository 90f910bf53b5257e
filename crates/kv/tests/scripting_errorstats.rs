//! Errors from scripts count in INFO errorstats and commandstats once, as
//! Redis 7.0 counts them: an error a command replied is counted by that
//! command (failed or rejected) and not again by the EVAL that passes it
//! on; an error the script makes itself (`redis.error_reply`, a Lua error)
//! is counted for the EVAL.

mod common;

use common::{resp, Raw, TestServer};

/// The INFO section `section` as text.
fn info(c: &mut Raw, section: &str) -> String {
    let body = c.bulk(&resp(&["INFO", section]));
    String::from_utf8(body).unwrap()
}

fn field<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix(':')))
}

/// Resets the statistics, runs `command` expecting `reply`, and returns
/// (errorstats, commandstats, total_error_replies).
fn run(c: &mut Raw, command: &[&str], reply: &[u8]) -> (String, String, String) {
    c.check(&resp(&["CONFIG", "RESETSTAT"]), b"+OK\r\n");
    c.check(&resp(command), reply);
    let errors = info(c, "errorstats");
    let commands = info(c, "commandstats");
    let total = field(&info(c, "stats"), "total_error_replies")
        .unwrap()
        .to_string();
    (errors, commands, total)
}

#[test]
fn an_error_passed_on_from_redis_call_counts_once() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    let (errors, commands, total) = run(
        &mut c,
        &["EVAL", "return redis.call('select', 99)", "0"],
        b"-ERR DB index is out of range script: 18e1229a222ce22829424a3c59b1c28095147cdd, on @user_script:1.\r\n",
    );
    assert_eq!(field(&errors, "errorstat_ERR"), Some("count=1"), "{errors}");
    assert_eq!(total, "1");
    let select = field(&commands, "cmdstat_select").unwrap();
    assert!(
        select.contains("rejected_calls=0,failed_calls=1"),
        "{select}"
    );
    let eval = field(&commands, "cmdstat_eval").unwrap();
    assert!(eval.contains("rejected_calls=0,failed_calls=1"), "{eval}");
    server.stop();
}

#[test]
fn error_tables_count_unless_a_command_counted_them() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    // A script's own error reply: counted under its code, EVAL failed.
    let (errors, commands, total) = run(
        &mut c,
        &["EVAL", "return redis.error_reply('MY_CODE custom')", "0"],
        b"-MY_CODE custom\r\n",
    );
    assert_eq!(
        field(&errors, "errorstat_MY_CODE"),
        Some("count=1"),
        "{errors}"
    );
    assert_eq!(total, "1");
    assert!(field(&commands, "cmdstat_eval")
        .unwrap()
        .contains("failed_calls=1"));
    // Without a code, and with a leading '-', Redis's wording.
    c.check(
        &resp(&["EVAL", "return redis.error_reply('')", "0"]),
        b"-ERR \r\n",
    );
    c.check(
        &resp(&["EVAL", "return redis.error_reply('NOCODE')", "0"]),
        b"-ERR NOCODE\r\n",
    );
    c.check(
        &resp(&["EVAL", "return redis.error_reply('-X y')", "0"]),
        b"-X y\r\n",
    );
    // A command's error returned through pcall: the command counted it.
    c.check(&resp(&["SET", "s", "1"]), b"+OK\r\n");
    let (errors, commands, total) = run(
        &mut c,
        &["EVAL", "return redis.pcall('lpush', 's', 'x')", "0"],
        b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
    );
    assert_eq!(
        field(&errors, "errorstat_WRONGTYPE"),
        Some("count=1"),
        "{errors}"
    );
    assert_eq!(total, "1");
    assert!(field(&commands, "cmdstat_lpush")
        .unwrap()
        .contains("failed_calls=1"));
    assert!(field(&commands, "cmdstat_eval")
        .unwrap()
        .contains("failed_calls=1"));
    // A pcall'd error the script swallows: the command's count only.
    let (errors, commands, total) = run(
        &mut c,
        &[
            "EVAL",
            "local t = redis.pcall('lpush', 's', 'x') return 1",
            "0",
        ],
        b":1\r\n",
    );
    assert_eq!(
        field(&errors, "errorstat_WRONGTYPE"),
        Some("count=1"),
        "{errors}"
    );
    assert_eq!(total, "1");
    assert!(field(&commands, "cmdstat_eval")
        .unwrap()
        .contains("failed_calls=0"));
    server.stop();
}

#[test]
fn a_write_refused_in_a_read_only_script_is_a_rejected_call_counted_once() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    let (errors, commands, total) = run(
        &mut c,
        &[
            "EVAL_RO",
            "local t = redis.pcall('set', 'x', 'y') return t['err']",
            "1",
            "x",
        ],
        b"$58\r\nERR Write commands are not allowed from read-only scripts.\r\n",
    );
    assert_eq!(field(&errors, "errorstat_ERR"), Some("count=1"), "{errors}");
    assert_eq!(total, "1");
    let set = field(&commands, "cmdstat_set").unwrap();
    assert!(
        set.starts_with("calls=0,") && set.contains("rejected_calls=1,failed_calls=0"),
        "{set}"
    );
    assert!(field(&commands, "cmdstat_eval_ro")
        .unwrap()
        .contains("failed_calls=0"));
    server.stop();
}
