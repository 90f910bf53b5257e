//! Byte-level tests of LOLWUT, MODULE, CONFIG HELP and RESTORE-ASKING, in
//! RESP2 and RESP3, against the replies of Redis 7.0.15.

mod common;

use common::{resp, TestServer};

#[test]
fn lolwut_answers_the_version_or_draws_schotter_and_the_skyline() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(&resp(&["LOLWUT"]), b"$18\r\nRedis ver. 7.0.15\n\r\n");
    c.check(
        &resp(&["LOLWUT", "VERSION", "7", "ignored"]),
        b"$18\r\nRedis ver. 7.0.15\n\r\n",
    );
    // VERSION without a number is not the option.
    c.check(
        &resp(&["LOLWUT", "VERSION"]),
        b"$18\r\nRedis ver. 7.0.15\n\r\n",
    );
    c.check(
        &resp(&["LOLWUT", "VERSION", "x"]),
        b"-ERR value is not an integer or out of range\r\n",
    );
    c.check(
        &resp(&["LOLWUT", "VERSION", "5", "10", "x"]),
        b"-ERR value is not an integer or out of range\r\n",
    );
    // Schotter, 10 columns: a canvas 20 pixels wide is 10 Braille cells a
    // line; 2 x 2 squares of side 8 make 16 + 4 pixel rows, 5 lines.
    let art =
        String::from_utf8(c.bulk(&resp(&["LOLWUT", "VERSION", "5", "10", "2", "2"]))).unwrap();
    let (drawing, credit) = art
        .split_once("\n\n")
        .expect("a blank line before the credit");
    assert_eq!(
        credit,
        "Georg Nees - schotter, plotter on paper, 1968. Redis ver. 7.0.15\n"
    );
    let lines: Vec<&str> = drawing.lines().collect();
    assert_eq!(lines.len(), 5, "{drawing}");
    for line in &lines {
        assert_eq!(line.chars().count(), 10);
        assert!(line
            .chars()
            .all(|ch| ('\u{2800}'..='\u{28ff}').contains(&ch)));
    }
    assert!(
        drawing.chars().any(|ch| ch != '\u{2800}' && ch != '\n'),
        "no square drawn"
    );
    // Limits clamp rather than refuse: 0 columns is one.
    let tiny =
        String::from_utf8(c.bulk(&resp(&["LOLWUT", "VERSION", "5", "0", "0", "0"]))).unwrap();
    assert!(tiny.ends_with("Redis ver. 7.0.15\n"));
    // The skyline, 12 x 3: one escape-coloured space per pixel.
    let city = String::from_utf8(c.bulk(&resp(&["LOLWUT", "VERSION", "6", "12", "3"]))).unwrap();
    let (drawing, credit) = city.split_once("\nDedicated").expect("credit");
    assert!(credit.ends_with("Plaguemon by hikikomori. Redis ver. 7.0.15\n"));
    assert_eq!(drawing.lines().count(), 3);
    for line in drawing.lines() {
        assert_eq!(line.matches("\x1b[0m").count(), 12);
    }
    // RESP3: a verbatim string of type txt.
    c.hello3();
    c.check(&resp(&["LOLWUT"]), b"=22\r\ntxt:Redis ver. 7.0.15\n\r\n");
    server.stop();
}

#[test]
fn module_is_refused_unless_enabled_and_then_loads_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    let refused = b"-ERR MODULE command not allowed. If the enable-module-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.\r\n";
    c.check(&resp(&["MODULE", "LIST"]), refused);
    c.check(&resp(&["MODULE", "HELP"]), refused);
    // Arity comes before the refusal, as in Redis.
    c.check(
        &resp(&["MODULE", "LOAD"]),
        b"-ERR wrong number of arguments for 'module|load' command\r\n",
    );
    server.stop();

    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start_with(dir.path(), |config| {
        config
            .set("enable-module-command", &["yes".into()])
            .unwrap();
    });
    let mut c = server.raw();
    c.check(&resp(&["MODULE", "LIST"]), b"*0\r\n");
    c.check(
        &resp(&["MODULE", "LOAD", "/nonexistent.so", "a"]),
        b"-ERR Error loading the extension. Please check the server logs.\r\n",
    );
    c.check(
        &resp(&["MODULE", "LOADEX", "/nonexistent.so", "CONFIG", "a", "b"]),
        b"-ERR Error loading the extension. Please check the server logs.\r\n",
    );
    c.check(
        &resp(&["MODULE", "UNLOAD", "foo"]),
        b"-ERR Error unloading module: no such module with that name\r\n",
    );
    c.check(
        &resp(&["MODULE", "FOO"]),
        b"-ERR unknown subcommand 'FOO'. Try MODULE HELP.\r\n",
    );
    let help = c.roundtrip_any(&resp(&["MODULE", "HELP"]));
    assert!(help.starts_with(
        b"*11\r\n+MODULE <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\r\n+LIST\r\n"
    ));
    assert!(help.ends_with(b"+HELP\r\n+    Prints this help.\r\n"));
    c.hello3();
    c.check(&resp(&["MODULE", "LIST"]), b"*0\r\n");
    server.stop();
}

#[test]
fn config_help_and_restore_asking() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(
        &resp(&["CONFIG", "HELP"]),
        b"*11\r\n+CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\r\n+GET <pattern>\r\n+    Return parameters matching the glob-like <pattern> and their values.\r\n+SET <directive> <value>\r\n+    Set the configuration <directive> to <value>.\r\n+RESETSTAT\r\n+    Reset statistics reported by the INFO command.\r\n+REWRITE\r\n+    Rewrite the configuration file.\r\n+HELP\r\n+    Prints this help.\r\n",
    );
    c.check(
        &resp(&["CONFIG", "HELP", "x"]),
        b"-ERR wrong number of arguments for 'config|help' command\r\n",
    );
    // RESTORE-ASKING is RESTORE: a payload dumped here restores under a
    // new name, and a bad one is refused with RESTORE's error.
    c.check(&resp(&["SET", "k", "v"]), b"+OK\r\n");
    let payload = c.bulk(&resp(&["DUMP", "k"]));
    let mut restore = Vec::new();
    restore.extend_from_slice(b"*4\r\n$14\r\nRESTORE-ASKING\r\n$2\r\nk2\r\n$1\r\n0\r\n");
    restore.extend_from_slice(format!("${}\r\n", payload.len()).as_bytes());
    restore.extend_from_slice(&payload);
    restore.extend_from_slice(b"\r\n");
    c.check(&restore, b"+OK\r\n");
    c.check(&resp(&["GET", "k2"]), b"$1\r\nv\r\n");
    c.check(
        &resp(&["RESTORE-ASKING", "k3", "0", "junk"]),
        b"-ERR DUMP payload version or checksum are wrong\r\n",
    );
    c.check(
        &resp(&["COMMAND", "INFO", "restore-asking"]),
        b"*1\r\n*10\r\n$14\r\nrestore-asking\r\n:-4\r\n*3\r\n+write\r\n+denyoom\r\n+asking\r\n:1\r\n:1\r\n:1\r\n",
    );
    server.stop();
}
