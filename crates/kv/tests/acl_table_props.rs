//! ACL against the whole command table: for every category, a user denied
//! that category gets NOPERM for every command and subcommand in it; and a
//! user whose key pattern excludes a key gets NOPERM for every command that
//! names that key. Derived from the table, so a command added later is
//! covered without a test of its own.

mod common;

use std::io::Write;

use common::repl::read_reply;
use common::{resp, Raw, TestServer};
use ferrite_kv::commands::{acl, all_commands, flags, full_name, CommandSpec};

/// Every command and subcommand, with its container.
fn every_spec() -> Vec<(Option<&'static CommandSpec>, &'static CommandSpec)> {
    let mut out = Vec::new();
    for spec in all_commands() {
        if spec.subcommands.is_empty() {
            out.push((None, spec));
        }
        for sub in spec.subcommands {
            out.push((Some(spec), sub));
        }
    }
    out
}

/// The command's name (and subcommand) followed by `fill` up to the
/// smallest argument count its arity allows.
fn args_for(container: Option<&CommandSpec>, spec: &CommandSpec, fill: &str) -> Vec<String> {
    let mut args = Vec::new();
    if let Some(c) = container {
        args.push(c.name.to_string());
    }
    args.push(spec.name.to_string());
    while args.len() < spec.arity.unsigned_abs() as usize {
        args.push(fill.to_string());
    }
    args
}

/// Sends one command and returns its whole RESP2 reply.
fn send(c: &mut Raw, args: &[String]) -> Vec<u8> {
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    c.stream.write_all(&resp(&refs)).expect("send");
    let mut out = Vec::new();
    read_reply(&mut c.stream, &mut out);
    out
}

/// A connection logged in as `user` (created with `rules`).
fn login(server: &TestServer, admin: &mut Raw, user: &str, rules: &[&str]) -> Raw {
    let mut setuser = vec!["ACL", "SETUSER", user, "reset", "on", "nopass"];
    setuser.extend_from_slice(rules);
    admin.check(&resp(&setuser), b"+OK\r\n");
    let mut c = server.raw();
    c.check(&resp(&["AUTH", user, "x"]), b"+OK\r\n");
    c
}

/// A server where DEBUG and MODULE pass their own refusal (which comes
/// before ACL's, as in Redis), so ACL decides for them too.
fn open_server(dir: &std::path::Path) -> TestServer {
    TestServer::start_with(dir, |c| {
        c.set("enable-debug-command", &["yes".into()]).unwrap();
        c.set("enable-module-command", &["yes".into()]).unwrap();
    })
}

#[test]
fn every_command_of_a_denied_category_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let server = open_server(dir.path());
    let mut admin = server.raw();
    let mut checked = 0;
    for (i, category) in acl::NAMES.iter().enumerate() {
        let deny = format!("-@{category}");
        let mut c = login(
            &server,
            &mut admin,
            &format!("u{i}"),
            &["+@all", &deny, "~*", "&*"],
        );
        for (container, spec) in every_spec() {
            // AUTH, HELLO and QUIT answer any client, as in Redis.
            if acl::of(spec) & acl::bit(category) == 0 || spec.has(flags::NOAUTH) {
                continue;
            }
            let args = args_for(container, spec, "k");
            let want = format!(
                "-NOPERM this user has no permissions to run the '{}' command\r\n",
                full_name(container, spec)
            );
            assert_eq!(
                String::from_utf8_lossy(&send(&mut c, &args)),
                want,
                "{args:?} with {deny}"
            );
            checked += 1;
        }
    }
    assert!(checked > 400, "only {checked} checks");
    server.stop();
}

#[test]
fn every_command_naming_a_denied_key_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let server = open_server(dir.path());
    let mut admin = server.raw();
    let mut c = login(&server, &mut admin, "keys", &["+@all", "~allowed*", "&*"]);
    let mut checked = 0;
    for (container, spec) in every_spec() {
        if spec.has(flags::NOAUTH) {
            continue;
        }
        let args = args_for(container, spec, "denied");
        // The keys the table finds in these arguments, as the ACL check
        // finds them; commands naming none are not about keys.
        let mut getkeys = vec!["COMMAND".to_string(), "GETKEYS".to_string()];
        getkeys.extend(args.iter().cloned());
        let keys = send(&mut admin, &getkeys);
        if !keys.starts_with(b"*") || keys.starts_with(b"*0") {
            continue;
        }
        let reply = send(&mut c, &args);
        assert!(
            reply.starts_with(
                b"-NOPERM this user has no permissions to access one of the keys used as arguments"
            ),
            "{args:?}: {}",
            String::from_utf8_lossy(&reply)
        );
        checked += 1;
    }
    assert!(checked > 150, "only {checked} checks");
    server.stop();
}
