//! Byte-level protocol tests for ACL users (Redis 7.0): the rules of ACL
//! SETUSER and how ACL LIST and GETUSER show them, AUTH and HELLO AUTH,
//! NOPERM refusals for commands, keys and channels (at top level, in
//! MULTI, at EXEC, in scripts), ACL LOG, DRYRUN, and the ACL file.

mod common;

use common::{resp, Raw, TestServer};

const DEFAULT_LINE: &str = "user default on nopass ~* &* +@all";

fn bulk(text: &str) -> Vec<u8> {
    format!("${}\r\n{text}\r\n", text.len()).into_bytes()
}

/// Sends `args` and asserts the reply is the bulk string `text`.
#[track_caller]
fn check_bulk(c: &mut Raw, args: &[&str], text: &str) {
    c.check(&resp(args), &bulk(text));
}

/// The ACL LIST line of `user` (without `user <name> `).
fn list_line(c: &mut Raw, user: &str) -> String {
    let out = c.roundtrip_any(&resp(&["ACL", "LIST"]));
    let text = String::from_utf8_lossy(&out).into_owned();
    let prefix = format!("user {user} ");
    text.split("\r\n")
        .find_map(|l| l.strip_prefix(&prefix).map(str::to_string))
        .unwrap_or_default()
}

#[test]
fn users_rules_and_list() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    check_bulk(&mut c, &["ACL", "WHOAMI"], "default");
    c.check(&resp(&["ACL", "USERS"]), b"*1\r\n$7\r\ndefault\r\n");
    c.check(
        &resp(&["ACL", "LIST"]),
        &[b"*1\r\n".to_vec(), bulk(DEFAULT_LINE)].concat(),
    );
    c.check(&resp(&["ACL", "SETUSER", "u1"]), b"+OK\r\n");
    assert_eq!(list_line(&mut c, "u1"), "off resetchannels -@all");
    c.check(
        &resp(&[
            "ACL",
            "SETUSER",
            "u2",
            "reset",
            "on",
            ">x",
            "%R~foo*",
            "~bar",
            "&ch*",
            "+get",
            "(+set ~k*)",
        ]),
        b"+OK\r\n",
    );
    assert_eq!(
        list_line(&mut c, "u2"),
        "on sanitize-payload #2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881 %R~foo* ~bar resetchannels &ch* -@all +get (~k* resetchannels -@all +set)"
    );
    // A selector spread over several arguments is joined.
    c.check(
        &resp(&["ACL", "SETUSER", "u3", "(", "+get", ")"]),
        b"+OK\r\n",
    );
    assert_eq!(
        list_line(&mut c, "u3"),
        "off resetchannels -@all (resetchannels -@all +get)"
    );
    c.check(
        &resp(&["ACL", "SETUSER", "u3", "clearselectors"]),
        b"+OK\r\n",
    );
    assert_eq!(list_line(&mut c, "u3"), "off resetchannels -@all");
    // Read and write flags of one pattern add up to `~`.
    c.check(
        &resp(&[
            "ACL", "SETUSER", "z", "%RW~a", "%R~b", "%W~b", "%R~c", "%W~d",
        ]),
        b"+OK\r\n",
    );
    assert_eq!(
        list_line(&mut c, "z"),
        "off ~a ~b %R~c %W~d resetchannels -@all"
    );
    // Categories and commands are described back from the bitmap.
    c.check(
        &resp(&["ACL", "SETUSER", "z", "+@all", "-@string"]),
        b"+OK\r\n",
    );
    assert!(list_line(&mut c, "z").ends_with("+@all -@string"));
    c.check(
        &resp(&["ACL", "SETUSER", "z", "-@all", "+@set", "+client|id"]),
        b"+OK\r\n",
    );
    assert!(list_line(&mut c, "z").ends_with("-@all +@set +client|id"));
    c.check(
        &resp(&["ACL", "SETUSER", "z", "nocommands", "+select|0"]),
        b"+OK\r\n",
    );
    assert!(list_line(&mut c, "z").ends_with("-@all +select|0"));
    c.check(&resp(&["ACL", "SETUSER", "z", "allcommands"]), b"+OK\r\n");
    assert!(list_line(&mut c, "z").ends_with("+@all"));
    c.check(&resp(&["ACL", "DELUSER", "u1", "u3", "nobody"]), b":2\r\n");
    c.check(
        &resp(&["ACL", "USERS"]),
        b"*3\r\n$7\r\ndefault\r\n$2\r\nu2\r\n$1\r\nz\r\n",
    );
}

#[test]
fn setuser_errors() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    let cases: &[(&[&str], &str)] = &[
        (&["ACL", "SETUSER", "a a"], "-ERR Usernames can't contain spaces or null characters\r\n"),
        (&["ACL", "SETUSER", "u", "+nosuch"], "-ERR Error in ACL SETUSER modifier '+nosuch': Unknown command or category name in ACL\r\n"),
        (&["ACL", "SETUSER", "u", "+@nosuch"], "-ERR Error in ACL SETUSER modifier '+@nosuch': Unknown command or category name in ACL\r\n"),
        (&["ACL", "SETUSER", "u", "-config|asdf"], "-ERR Error in ACL SETUSER modifier '-config|asdf': Unknown command or category name in ACL\r\n"),
        (&["ACL", "SETUSER", "u", "+get|a|b"], "-ERR Error in ACL SETUSER modifier '+get|a|b': Unknown command or category name in ACL\r\n"),
        (&["ACL", "SETUSER", "u", "+config|get|x"], "-ERR Error in ACL SETUSER modifier '+config|get|x': Allowing first-arg of a subcommand is not supported\r\n"),
        (&["ACL", "SETUSER", "u", "bogus"], "-ERR Error in ACL SETUSER modifier 'bogus': Syntax error\r\n"),
        (&["ACL", "SETUSER", "u", "%X~k"], "-ERR Error in ACL SETUSER modifier '%X~k': Syntax error\r\n"),
        (&["ACL", "SETUSER", "u", "#abc"], "-ERR Error in ACL SETUSER modifier '#abc': The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters\r\n"),
        (&["ACL", "SETUSER", "u", "<nope"], "-ERR Error in ACL SETUSER modifier '<nope': The password you are trying to remove from the user does not exist\r\n"),
        (&["ACL", "SETUSER", "u", "~*", "~x"], "-ERR Error in ACL SETUSER modifier '~x': Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns\r\n"),
        (&["ACL", "SETUSER", "u", "&*", "&x"], "-ERR Error in ACL SETUSER modifier '&x': Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels\r\n"),
        (&["ACL", "SETUSER", "u", "(+get", "~x"], "-ERR Unmatched parenthesis in acl selector starting at '(+get'.\r\n"),
        (&["ACL", "SETUSER", "u", "(+nosuch)"], "-ERR Error in ACL SETUSER modifier '(+nosuch)': Unknown command or category name in ACL\r\n"),
        (&["ACL", "DELUSER", "default"], "-ERR The 'default' user cannot be removed\r\n"),
        (&["ACL", "CAT", "nosuch"], "-ERR Unknown category 'nosuch'\r\n"),
        (&["ACL", "CAT", "a", "b"], "-ERR unknown subcommand or wrong number of arguments for 'CAT'. Try ACL HELP.\r\n"),
        (&["ACL", "HELP", "x"], "-ERR wrong number of arguments for 'acl|help' command\r\n"),
        (&["ACL", "GENPASS", "0"], "-ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096\r\n"),
        (&["ACL", "GENPASS", "5000"], "-ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096\r\n"),
        (&["ACL", "LOAD"], "-ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.\r\n"),
        (&["ACL", "NOPE"], "-ERR unknown subcommand 'NOPE'. Try ACL HELP.\r\n"),
    ];
    for (args, expected) in cases {
        c.check(&resp(args), expected.as_bytes());
    }
    // A failed SETUSER changes nothing, not even the part before the error.
    c.check(&resp(&["ACL", "GETUSER", "u"]), b"$-1\r\n");
    c.check(&resp(&["ACL", "SETUSER", "v", "on", "+nosuch"]), b"-ERR Error in ACL SETUSER modifier '+nosuch': Unknown command or category name in ACL\r\n");
    c.check(&resp(&["ACL", "USERS"]), b"*1\r\n$7\r\ndefault\r\n");
    c.check(&resp(&["ACL", "GENPASS"]), b"$64\r\n");
    let rest = c.roundtrip_any(b"");
    assert_eq!(rest.len(), 66, "64 hex digits and CRLF");
    c.check(&resp(&["ACL", "GENPASS", "5"]), b"$2\r\n");
    assert_eq!(c.roundtrip_any(b"").len(), 4);
}

#[test]
fn getuser_resp2_and_resp3() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(
        &resp(&[
            "ACL",
            "SETUSER",
            "u2",
            "reset",
            "on",
            ">x",
            "%R~foo*",
            "~bar",
            "&ch*",
            "+get",
            "(+set ~k*)",
        ]),
        b"+OK\r\n",
    );
    let hash = "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881";
    let body = |map: &str, set: &str| {
        format!(
            "{map}6\r\n$5\r\nflags\r\n{set}2\r\n$2\r\non\r\n$16\r\nsanitize-payload\r\n$9\r\npasswords\r\n*1\r\n$64\r\n{hash}\r\n$8\r\ncommands\r\n$10\r\n-@all +get\r\n$4\r\nkeys\r\n$12\r\n%R~foo* ~bar\r\n$8\r\nchannels\r\n$4\r\n&ch*\r\n$9\r\nselectors\r\n*1\r\n{map}3\r\n$8\r\ncommands\r\n$10\r\n-@all +set\r\n$4\r\nkeys\r\n$3\r\n~k*\r\n$8\r\nchannels\r\n$0\r\n\r\n"
        )
        .replace("{map}", map)
    };
    c.check(
        &resp(&["ACL", "GETUSER", "u2"]),
        body("*", "*")
            .replace("*6", "*12")
            .replace("*3\r\n$8", "*6\r\n$8")
            .as_bytes(),
    );
    c.roundtrip_any(&resp(&["HELLO", "3"]));
    c.check(&resp(&["ACL", "GETUSER", "u2"]), body("%", "~").as_bytes());
    c.check(&resp(&["ACL", "GETUSER", "nobody"]), b"_\r\n");
}

#[test]
fn auth_and_hello() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(&resp(&["AUTH", "x"]), b"-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?\r\n");
    c.check(
        &resp(&["ACL", "SETUSER", "u", ">p1", ">p2", "+acl"]),
        b"+OK\r\n",
    );
    // New users are off.
    c.check(
        &resp(&["AUTH", "u", "p1"]),
        b"-WRONGPASS invalid username-password pair or user is disabled.\r\n",
    );
    c.check(&resp(&["ACL", "SETUSER", "u", "on", "<p1"]), b"+OK\r\n");
    c.check(
        &resp(&["AUTH", "u", "p1"]),
        b"-WRONGPASS invalid username-password pair or user is disabled.\r\n",
    );
    c.check(&resp(&["AUTH", "u", "p2"]), b"+OK\r\n");
    check_bulk(&mut c, &["ACL", "WHOAMI"], "u");
    c.check(
        &resp(&["AUTH", "nobody", "x"]),
        b"-WRONGPASS invalid username-password pair or user is disabled.\r\n",
    );
    // HELLO AUTH logs in and switches protocol at once.
    let mut h = server.raw();
    let hello = h.roundtrip_any(&resp(&["HELLO", "3", "AUTH", "u", "p2"]));
    assert!(
        hello.starts_with(b"%7\r\n"),
        "{}",
        String::from_utf8_lossy(&hello)
    );
    check_bulk(&mut h, &["ACL", "WHOAMI"], "u");
    h.check(
        &resp(&["HELLO", "3", "AUTH", "u", "bad"]),
        b"-WRONGPASS invalid username-password pair or user is disabled.\r\n",
    );
    // requirepass is the default user's password, CONFIG SET too.
    c.check(&resp(&["AUTH", "default", ""]), b"+OK\r\n");
    c.check(&resp(&["CONFIG", "SET", "requirepass", "s3"]), b"+OK\r\n");
    let mut n = server.raw();
    n.check(
        &resp(&["GET", "k"]),
        b"-NOAUTH Authentication required.\r\n",
    );
    n.check(&resp(&["AUTH", "s3"]), b"+OK\r\n");
    n.check(&resp(&["GET", "k"]), b"$-1\r\n");
    assert!(list_line(&mut n, "default").starts_with("on #"));
    n.check(&resp(&["CONFIG", "SET", "requirepass", ""]), b"+OK\r\n");
    assert_eq!(list_line(&mut n, "default"), "on nopass ~* &* +@all");
    // With default off, new connections must authenticate.
    n.check(&resp(&["ACL", "SETUSER", "default", "off"]), b"+OK\r\n");
    let mut m = server.raw();
    m.check(&resp(&["PING"]), b"-NOAUTH Authentication required.\r\n");
    n.check(&resp(&["ACL", "SETUSER", "default", "on"]), b"+OK\r\n");
}

#[test]
fn noperm_commands_keys_channels() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut admin = server.raw();
    admin.check(
        &resp(&[
            "ACL",
            "SETUSER",
            "u",
            "on",
            "nopass",
            "+get",
            "+set",
            "+publish",
            "+subscribe",
            "+client|id",
            "~obj:*",
            "&news",
        ]),
        b"+OK\r\n",
    );
    let mut c = server.raw();
    c.check(&resp(&["AUTH", "u", "x"]), b"+OK\r\n");
    c.check(&resp(&["SET", "obj:1", "v"]), b"+OK\r\n");
    c.check(
        &resp(&["GET", "other"]),
        b"-NOPERM this user has no permissions to access one of the keys used as arguments\r\n",
    );
    c.check(
        &resp(&["INCR", "obj:1"]),
        b"-NOPERM this user has no permissions to run the 'incr' command\r\n",
    );
    c.check(
        &resp(&["CLIENT", "INFO"]),
        b"-NOPERM this user has no permissions to run the 'client|info' command\r\n",
    );
    c.check(&resp(&["CLIENT", "ID"]), b":");
    c.roundtrip_any(b"");
    c.check(
        &resp(&["PUBLISH", "other", "m"]),
        b"-NOPERM this user has no permissions to access one of the channels used as arguments\r\n",
    );
    c.check(&resp(&["PUBLISH", "news", "m"]), b":0\r\n");
    c.check(
        &resp(&["SUBSCRIBE", "news", "other"]),
        b"-NOPERM this user has no permissions to access one of the channels used as arguments\r\n",
    );
    // AUTH needs no permission.
    c.check(&resp(&["AUTH", "u", "x"]), b"+OK\r\n");
    let log = admin.roundtrip_any(&resp(&["ACL", "LOG"]));
    let text = String::from_utf8_lossy(&log);
    // PUBLISH and SUBSCRIBE to `other` are one entry, counted twice.
    assert!(text.starts_with("*4\r\n*14\r\n$5\r\ncount\r\n:2\r\n$6\r\nreason\r\n$7\r\nchannel\r\n$7\r\ncontext\r\n$8\r\ntoplevel\r\n$6\r\nobject\r\n$5\r\nother\r\n$8\r\nusername\r\n$1\r\nu\r\n$11\r\nage-seconds\r\n"), "{text}");
    assert!(text.contains("$6\r\nreason\r\n$3\r\nkey\r\n$7\r\ncontext\r\n$8\r\ntoplevel\r\n$6\r\nobject\r\n$5\r\nother\r\n"), "{text}");
    assert!(
        text.contains("$6\r\nobject\r\n$11\r\nclient|info\r\n"),
        "{text}"
    );
    assert!(text.contains("cmd=get user=u "), "{text}");
    // The same failure again counts in its entry.
    c.check(
        &resp(&["GET", "other"]),
        b"-NOPERM this user has no permissions to access one of the keys used as arguments\r\n",
    );
    let log = admin.roundtrip_any(&resp(&["ACL", "LOG", "1"]));
    assert!(
        log.starts_with(b"*1\r\n*14\r\n$5\r\ncount\r\n:2\r\n$6\r\nreason\r\n$3\r\nkey\r\n"),
        "{}",
        String::from_utf8_lossy(&log)
    );
    admin.check(&resp(&["ACL", "LOG", "RESET"]), b"+OK\r\n");
    admin.check(&resp(&["ACL", "LOG"]), b"*0\r\n");
    let stats = admin.roundtrip_any(&resp(&["INFO", "errorstats"]));
    assert!(
        String::from_utf8_lossy(&stats).contains("errorstat_NOPERM:count=6"),
        "{}",
        String::from_utf8_lossy(&stats)
    );
}

#[test]
fn read_and_write_key_permissions() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut admin = server.raw();
    admin.check(&resp(&["MSET", "r:1", "a", "w:1", "b"]), b"+OK\r\n");
    admin.check(
        &resp(&[
            "ACL", "SETUSER", "u", "on", "nopass", "+@all", "%R~r:*", "%W~w:*", "%RW~rw:*",
        ]),
        b"+OK\r\n",
    );
    let mut c = server.raw();
    c.check(&resp(&["AUTH", "u", "x"]), b"+OK\r\n");
    let noperm =
        b"-NOPERM this user has no permissions to access one of the keys used as arguments\r\n";
    c.check(&resp(&["GET", "r:1"]), b"$1\r\na\r\n");
    c.check(&resp(&["SET", "r:1", "x"]), noperm);
    c.check(&resp(&["GET", "w:1"]), noperm);
    c.check(&resp(&["SET", "w:1", "x"]), b"+OK\r\n");
    // SET ... GET reads the old value: it needs both.
    c.check(&resp(&["SET", "w:1", "y", "GET"]), noperm);
    c.check(&resp(&["SET", "rw:1", "y", "GET"]), b"$-1\r\n");
    // LMOVE reads and deletes from its source, inserts into its target.
    c.check(&resp(&["LMOVE", "r:1", "w:2", "LEFT", "LEFT"]), noperm);
    // EXISTS touches no data: any pattern that matches will do.
    c.check(&resp(&["EXISTS", "w:1", "r:1"]), b":2\r\n");
    c.check(&resp(&["EXISTS", "z"]), noperm);
    // DRYRUN says which key, without running anything.
    check_bulk(
        &mut admin,
        &["ACL", "DRYRUN", "u", "SET", "r:1", "x"],
        "This user has no permissions to access the 'r:1' key",
    );
    admin.check(&resp(&["ACL", "DRYRUN", "u", "GET", "r:1"]), b"+OK\r\n");
    admin.check(&resp(&["ACL", "DRYRUN", "default", "GET", "x"]), b"+OK\r\n");
    admin.check(
        &resp(&["ACL", "DRYRUN", "nobody", "GET", "x"]),
        b"-ERR User 'nobody' not found\r\n",
    );
    admin.check(
        &resp(&["ACL", "DRYRUN", "u", "NOSUCH"]),
        b"-ERR Command 'NOSUCH' not found\r\n",
    );
    admin.check(
        &resp(&["ACL", "DRYRUN", "u", "GET"]),
        b"-ERR wrong number of arguments for 'get' command\r\n",
    );
}

#[test]
fn selectors_are_not_additive() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut admin = server.raw();
    admin.check(
        &resp(&[
            "ACL",
            "SETUSER",
            "s",
            "on",
            "nopass",
            "-@all",
            "(+@write ~write::*)",
            "(+@read ~read::*)",
        ]),
        b"+OK\r\n",
    );
    let mut c = server.raw();
    c.check(&resp(&["AUTH", "s", "x"]), b"+OK\r\n");
    c.check(
        &resp(&["PING"]),
        b"-NOPERM this user has no permissions to run the 'ping' command\r\n",
    );
    c.check(&resp(&["SET", "write::a", "1"]), b"+OK\r\n");
    c.check(&resp(&["GET", "read::a"]), b"$-1\r\n");
    c.check(
        &resp(&["GET", "write::a"]),
        b"-NOPERM this user has no permissions to access one of the keys used as arguments\r\n",
    );
    // A key refusal outranks a command refusal in the log.
    let log = admin.roundtrip_any(&resp(&["ACL", "LOG", "1"]));
    assert!(String::from_utf8_lossy(&log).contains("$6\r\nreason\r\n$3\r\nkey\r\n"));
}

#[test]
fn transactions_and_scripts() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut admin = server.raw();
    admin.check(
        &resp(&[
            "ACL", "SETUSER", "t", "on", ">p", "+multi", "+exec", "+incr", "+eval", "~obj:*",
        ]),
        b"+OK\r\n",
    );
    let mut c = server.raw();
    c.check(&resp(&["AUTH", "t", "p"]), b"+OK\r\n");
    // Refused when queued: the transaction aborts.
    c.check(&resp(&["MULTI"]), b"+OK\r\n");
    c.check(
        &resp(&["GET", "obj:1"]),
        b"-NOPERM this user has no permissions to run the 'get' command\r\n",
    );
    c.check(
        &resp(&["EXEC"]),
        b"-EXECABORT Transaction discarded because of previous errors.\r\n",
    );
    // Refused at EXEC: rules changed after queueing.
    c.check(&resp(&["MULTI"]), b"+OK\r\n");
    c.check(&resp(&["INCR", "obj:1"]), b"+QUEUED\r\n");
    admin.check(&resp(&["ACL", "SETUSER", "t", "-incr"]), b"+OK\r\n");
    c.check(&resp(&["EXEC"]), b"*1\r\n-NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: no permission to execute the command or subcommand\r\n");
    let log = admin.roundtrip_any(&resp(&["ACL", "LOG", "1"]));
    assert!(String::from_utf8_lossy(&log)
        .contains("$7\r\ncontext\r\n$5\r\nmulti\r\n$6\r\nobject\r\n$4\r\nincr\r\n"));
    // A script's calls are checked as the user.
    let out = c.roundtrip_any(&resp(&["EVAL", "return redis.pcall('incr', 'obj:1')", "0"]));
    assert_eq!(
        out,
        b"-ERR The user executing the script can't run this command or subcommand\r\n".to_vec(),
        "{}",
        String::from_utf8_lossy(&out)
    );
    admin.check(&resp(&["ACL", "SETUSER", "t", "+incr"]), b"+OK\r\n");
    let out = c.roundtrip_any(&resp(&["EVAL", "return redis.pcall('incr', 'other')", "0"]));
    assert_eq!(out, b"-ERR The user executing the script can't access at least one of the keys mentioned in the command arguments\r\n".to_vec());
    c.check(
        &resp(&["EVAL", "return redis.call('incr', KEYS[1])", "1", "obj:2"]),
        b":1\r\n",
    );
    let log = admin.roundtrip_any(&resp(&["ACL", "LOG", "1"]));
    assert!(String::from_utf8_lossy(&log)
        .contains("$7\r\ncontext\r\n$3\r\nlua\r\n$6\r\nobject\r\n$5\r\nother\r\n"));
}

#[test]
fn deleted_and_revoked_clients_are_closed() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut admin = server.raw();
    admin.check(
        &resp(&[
            "ACL", "SETUSER", "d", "on", "nopass", "+@all", "allkeys", "&ch:*",
        ]),
        b"+OK\r\n",
    );
    let mut c = server.raw();
    c.check(&resp(&["AUTH", "d", "x"]), b"+OK\r\n");
    let mut sub = server.raw();
    sub.check(&resp(&["AUTH", "d", "x"]), b"+OK\r\n");
    sub.check(
        &resp(&["SUBSCRIBE", "ch:1"]),
        b"*3\r\n$9\r\nsubscribe\r\n$4\r\nch:1\r\n:1\r\n",
    );
    // Keeping the pattern keeps the subscriber.
    admin.check(&resp(&["ACL", "SETUSER", "d", "&other"]), b"+OK\r\n");
    sub.check(&resp(&["PING"]), b"*2\r\n$4\r\npong\r\n$0\r\n\r\n");
    admin.check(
        &resp(&["ACL", "SETUSER", "d", "resetchannels", "&other"]),
        b"+OK\r\n",
    );
    assert!(sub.is_closed());
    c.check(&resp(&["PING"]), b"+PONG\r\n");
    let list = admin.roundtrip_any(&resp(&["CLIENT", "LIST"]));
    assert!(String::from_utf8_lossy(&list).contains(" user=d "));
    admin.check(&resp(&["ACL", "DELUSER", "d"]), b":1\r\n");
    assert!(c.is_closed());
    // Deleting its own user: the reply comes, then the connection closes.
    admin.check(
        &resp(&["ACL", "SETUSER", "e", "on", "nopass", "+acl"]),
        b"+OK\r\n",
    );
    let mut e = server.raw();
    e.check(&resp(&["AUTH", "e", "x"]), b"+OK\r\n");
    e.check(&resp(&["ACL", "DELUSER", "e"]), b":1\r\n");
    assert!(e.is_closed());
}

#[test]
fn aclfile_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("users.acl");
    std::fs::write(
        &path,
        "user default on nopass ~* &* +@all\nuser alice on >alice ~obj:* resetchannels -@all +get (+set ~k*)\n\n",
    )
    .unwrap();
    let aclfile = path.display().to_string();
    let server = TestServer::start_with(dir.path(), |c| {
        c.set("aclfile", std::slice::from_ref(&aclfile)).unwrap();
    });
    let mut c = server.raw();
    c.check(&resp(&["AUTH", "alice", "alice"]), b"+OK\r\n");
    c.check(&resp(&["GET", "obj:1"]), b"$-1\r\n");
    c.check(&resp(&["AUTH", "default", "x"]), b"+OK\r\n");
    c.check(
        &resp(&["ACL", "SETUSER", "bob", "on", "nopass", "+@set", "~set*"]),
        b"+OK\r\n",
    );
    c.check(&resp(&["ACL", "SAVE"]), b"+OK\r\n");
    let saved = std::fs::read_to_string(&path).unwrap();
    assert_eq!(saved.lines().count(), 3, "{saved}");
    assert!(saved.starts_with("user alice on #"), "{saved}");
    assert!(
        saved.contains("\nuser bob on nopass ~set* resetchannels -@all +@set\n"),
        "{saved}"
    );
    assert!(
        saved.ends_with("user default on nopass ~* &* +@all\n"),
        "{saved}"
    );
    // No temporary file is left behind.
    assert_eq!(
        std::fs::read_dir(dir.path())
            .unwrap()
            .filter(|e| e
                .as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .contains(".tmp-"))
            .count(),
        0
    );
    // LOAD replaces the users and closes the replaced users' clients.
    let mut alice = server.raw();
    alice.check(&resp(&["AUTH", "alice", "alice"]), b"+OK\r\n");
    std::fs::write(&path, "user carol on nopass +@all ~*\n").unwrap();
    c.check(&resp(&["ACL", "LOAD"]), b"+OK\r\n");
    assert!(alice.is_closed());
    c.check(
        &resp(&["ACL", "USERS"]),
        b"*2\r\n$5\r\ncarol\r\n$7\r\ndefault\r\n",
    );
    // A broken file changes nothing.
    std::fs::write(&path, "user x on +nosuch\nuser x on\nfoo\n").unwrap();
    c.check(&resp(&["ACL", "LOAD"]), format!("-ERR {aclfile}:1: Error in applying operation '+nosuch': Unknown command or category name in ACL. WARNING: Duplicate user 'x' found on line 2. {aclfile}:3 should start with user keyword followed by the username. WARNING: ACL errors detected, no change to the previously active ACL rules was performed\r\n").as_bytes());
    c.check(
        &resp(&["ACL", "USERS"]),
        b"*2\r\n$5\r\ncarol\r\n$7\r\ndefault\r\n",
    );
}

#[test]
fn config_file_users_and_rewrite() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("ferrite.conf");
    std::fs::write(&conf, "user alice on nopass ~* +@all\nport 0\n").unwrap();
    let text = std::fs::read_to_string(&conf).unwrap();
    let server = TestServer::start_with(dir.path(), |c| {
        c.apply_text(&text, "ferrite.conf").unwrap();
        c.file = Some(conf.clone());
    });
    let mut c = server.raw();
    c.check(&resp(&["AUTH", "alice", "x"]), b"+OK\r\n");
    c.check(
        &resp(&["ACL", "SETUSER", "bob", "on", ">pw", "+get", "~k"]),
        b"+OK\r\n",
    );
    c.check(&resp(&["CONFIG", "REWRITE"]), b"+OK\r\n");
    let after = std::fs::read_to_string(&conf).unwrap();
    assert!(
        after.starts_with("user alice on nopass ~* resetchannels +@all\n"),
        "{after}"
    );
    assert!(after.contains("\nuser bob on #"), "{after}");
    assert!(
        after.contains("\nuser default on nopass ~* &* +@all\n"),
        "{after}"
    );
    // Each user once.
    assert_eq!(after.matches("user alice").count(), 1, "{after}");
}

#[test]
fn first_args_patterns_and_sort_options() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut admin = server.raw();
    admin.check(&resp(&["RPUSH", "l", "1"]), b":1\r\n");
    admin.check(
        &resp(&[
            "ACL",
            "SETUSER",
            "f",
            "on",
            "nopass",
            "-@all",
            "+select|0",
            "+psubscribe",
            "+sort",
            "~l",
            "&news.*",
        ]),
        b"+OK\r\n",
    );
    let mut c = server.raw();
    c.check(&resp(&["AUTH", "f", "x"]), b"+OK\r\n");
    c.check(&resp(&["SELECT", "0"]), b"+OK\r\n");
    c.check(
        &resp(&["SELECT", "1"]),
        b"-NOPERM this user has no permissions to run the 'select' command\r\n",
    );
    // A PSUBSCRIBE pattern must equal an allowed pattern.
    c.check(
        &resp(&["PSUBSCRIBE", "news.a*"]),
        b"-NOPERM this user has no permissions to access one of the channels used as arguments\r\n",
    );
    // SORT's BY and GET patterns need read access to every key.
    c.check(
        &resp(&["SORT", "l", "BY", "w*"]),
        b"-ERR BY option of SORT denied due to insufficient ACL permissions.\r\n",
    );
    c.check(
        &resp(&["SORT", "l", "GET", "#"]),
        b"-ERR GET option of SORT denied due to insufficient ACL permissions.\r\n",
    );
    c.check(&resp(&["SORT", "l", "BY", "nosort"]), b"*1\r\n$1\r\n1\r\n");
    admin.check(&resp(&["ACL", "SETUSER", "f", "%R~*"]), b"+OK\r\n");
    c.check(&resp(&["SORT", "l", "BY", "w*"]), b"*1\r\n$1\r\n1\r\n");
    c.check(
        &resp(&["PSUBSCRIBE", "news.*"]),
        b"*3\r\n$10\r\npsubscribe\r\n$6\r\nnews.*\r\n:1\r\n",
    );
}

#[test]
fn pubsub_default_and_relative_aclfile() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("u.acl"), "user alice on nopass +@all ~*\n").unwrap();
    let server = TestServer::start_with(dir.path(), |c| {
        c.set("aclfile", &["u.acl".to_string()]).unwrap();
        c.set("acl-pubsub-default", &["allchannels".to_string()])
            .unwrap();
    });
    let mut c = server.raw();
    // The file is found in `dir`; its users get every channel.
    let alice = c.roundtrip_any(&resp(&["ACL", "GETUSER", "alice"]));
    assert!(String::from_utf8_lossy(&alice).contains("$8\r\nchannels\r\n$2\r\n&*\r\n"));
    c.check(&resp(&["ACL", "SETUSER", "x", "&a"]), b"-ERR Error in ACL SETUSER modifier '&a': Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels\r\n");
    c.check(
        &resp(&["CONFIG", "SET", "acl-pubsub-default", "resetchannels"]),
        b"+OK\r\n",
    );
    c.check(&resp(&["ACL", "SETUSER", "x", "&a"]), b"+OK\r\n");
    assert_eq!(list_line(&mut c, "x"), "off resetchannels &a -@all");
    c.check(&resp(&["ACL", "SAVE"]), b"+OK\r\n");
    let saved = std::fs::read_to_string(dir.path().join("u.acl")).unwrap();
    assert!(
        saved.contains("user x off resetchannels &a -@all\n"),
        "{saved}"
    );
    // CONFIG SET of a password is hidden from SLOWLOG.
    c.check(
        &resp(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]),
        b"+OK\r\n",
    );
    c.check(
        &resp(&["CONFIG", "SET", "masterauth", "secret"]),
        b"+OK\r\n",
    );
    let slow = c.roundtrip_any(&resp(&["SLOWLOG", "GET", "1"]));
    let slow = String::from_utf8_lossy(&slow);
    assert!(
        slow.contains("$10\r\n(redacted)\r\n") && !slow.contains("secret"),
        "{slow}"
    );
}

#[test]
fn categories_follow_redis_table() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    let text = |c: &mut Raw, cat: &str| {
        String::from_utf8_lossy(&c.roundtrip_any(&resp(&["ACL", "CAT", cat]))).into_owned()
    };
    let read = text(&mut c, "read");
    assert!(
        read.contains("\r\nget\r\n") && !read.contains("eval_ro"),
        "{read}"
    );
    let pubsub = text(&mut c, "pubsub");
    assert!(
        pubsub.contains("\r\npubsub|numpat\r\n") && !pubsub.contains("pubsub|help"),
        "{pubsub}"
    );
    let keyspace = text(&mut c, "KEYSPACE");
    assert!(keyspace.contains("\r\nobject|encoding\r\n") && !keyspace.contains("\r\nset\r\n"));
    // Each category alone is described as itself.
    // Every category with commands (`stream` has none without streams).
    let all = [
        "keyspace",
        "read",
        "write",
        "set",
        "sortedset",
        "list",
        "hash",
        "string",
        "bitmap",
        "hyperloglog",
        "geo",
        "pubsub",
        "admin",
        "fast",
        "slow",
        "blocking",
        "dangerous",
        "connection",
        "transaction",
        "scripting",
    ];
    for cat in all {
        c.check(
            &resp(&["ACL", "SETUSER", "r", "reset", &format!("+@{cat}")]),
            b"+OK\r\n",
        );
        let getuser = c.roundtrip_any(&resp(&["ACL", "GETUSER", "r"]));
        let want = format!("-@all +@{cat}");
        let shown = format!("${}\r\n{want}\r\n", want.len());
        assert!(String::from_utf8_lossy(&getuser).contains(&shown), "{cat}");
        c.check(
            &resp(&["ACL", "SETUSER", "r", "reset", "+@all", &format!("-@{cat}")]),
            b"+OK\r\n",
        );
        let getuser = c.roundtrip_any(&resp(&["ACL", "GETUSER", "r"]));
        let want = format!("+@all -@{cat}");
        let shown = format!("${}\r\n{want}\r\n", want.len());
        assert!(String::from_utf8_lossy(&getuser).contains(&shown), "{cat}");
    }
}

#[test]
fn scripts_ask_acl_check_cmd_without_logging() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.check(
        b"EVAL \"return redis.acl_check_cmd('set','x','1')\" 0\r\n",
        b":1\r\n",
    );
    c.check(
        b"EVAL \"return redis.acl_check_cmd('nosuch')\" 0\r\n",
        b"-ERR Invalid command passed to redis.acl_check_cmd() script: d2491587bab5149c93be0dce4426f7a06ba9e1a1, on @user_script:1.\r\n",
    );
    c.check(
        b"ACL SETUSER lim on >pw +@all -set ~*\r\nAUTH lim pw\r\n",
        b"+OK\r\n+OK\r\n",
    );
    c.check(
        b"EVAL \"return redis.acl_check_cmd('set','x','1')\" 0\r\nEVAL \"return redis.acl_check_cmd('get','x')\" 0\r\nACL LOG\r\n",
        b"$-1\r\n:1\r\n*0\r\n",
    );
}
