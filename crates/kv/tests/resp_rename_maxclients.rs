//! `rename-command` (config file only) and `maxclients`, through a real
//! server: renamed and removed commands as clients see them, and the
//! refusal of clients past the limit with Redis's error.

mod common;

use common::{resp, TestServer};
use ferrite_kv::config::Config;

#[test]
fn renamed_and_removed_commands_as_clients_see_them() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start_with(dir.path(), |c: &mut Config| {
        c.apply_text(
            "rename-command config cfg\nrename-command flushall \"\"\nrename-command get fetch\n",
            "test",
        )
        .unwrap();
    });
    let mut raw = server.raw();
    raw.check(
        &resp(&["CONFIG", "GET", "maxclients"]),
        b"-ERR unknown command 'CONFIG', with args beginning with: 'GET' 'maxclients' \r\n",
    );
    raw.check(
        &resp(&["CFG", "GET", "maxclients"]),
        b"*2\r\n$10\r\nmaxclients\r\n$5\r\n10000\r\n",
    );
    raw.check(
        &resp(&["FLUSHALL"]),
        b"-ERR unknown command 'FLUSHALL', with args beginning with: \r\n",
    );
    // Scripts call commands by the names clients use.
    raw.check(&resp(&["SET", "k", "v"]), b"+OK\r\n");
    raw.check(&resp(&["FETCH", "k"]), b"$1\r\nv\r\n");
    raw.check(
        &resp(&["EVAL", "return redis.call('fetch', KEYS[1])", "1", "k"]),
        b"$1\r\nv\r\n",
    );
}

#[test]
fn a_bad_rename_is_refused_when_the_file_is_read() {
    let mut config = Config::default();
    let err = config
        .apply_text("rename-command nosuch x\n", "test")
        .unwrap_err()
        .to_string();
    assert!(err.contains("No such command in rename-command"), "{err}");
    let err = config
        .apply_text("rename-command get set\n", "test")
        .unwrap_err()
        .to_string();
    assert!(err.contains("Target command name already exists"), "{err}");
    // CONFIG SET does not know the directive, as in Redis.
    assert!(config
        .set_at_runtime(&[("rename-command".into(), "get g".into())], true)
        .is_err());
}

#[test]
fn clients_past_maxclients_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start_with(dir.path(), |c: &mut Config| c.maxclients = 2);
    let mut a = server.raw();
    a.check(&resp(&["PING"]), b"+PONG\r\n");
    let mut b = server.raw();
    b.check(&resp(&["PING"]), b"+PONG\r\n");
    let mut c = server.raw();
    c.check(b"", b"-ERR max number of clients reached\r\n");
    let info = a.bulk(&resp(&["INFO", "stats"]));
    assert!(
        String::from_utf8_lossy(&info).contains("rejected_connections:1"),
        "{}",
        String::from_utf8_lossy(&info)
    );
}
