//! The ACL file (`aclfile`): one `user <name> <rules...>` line per user,
//! as ACL LIST prints them. Loading is all or nothing; saving replaces the
//! file atomically (a synced temporary file renamed over it, then the
//! directory synced), so a crash leaves the old file or the new one.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::Path;

use super::selector::{has_spaces, RuleError};
use super::user::{merge_selectors, User};
use super::DEFAULT_USER;

/// Where ACL file `name` is: a relative name is inside `dir` (Redis
/// works from its `dir`).
pub fn file_path(name: &str, dir: &Path) -> std::path::PathBuf {
    let path = Path::new(name);
    if path.is_relative() && !dir.as_os_str().is_empty() {
        dir.join(path)
    } else {
        path.to_path_buf()
    }
}

/// The users of ACL file `path` (configured as `file`, which messages
/// show), or the error text ACL LOAD replies (without `ERR `). Users a
/// line creates start with `all_channels` per `acl-pubsub-default`; a
/// file without `default` gets a fresh one.
pub fn load_file(
    file: &str,
    path: &Path,
    all_channels: bool,
) -> Result<BTreeMap<Vec<u8>, User>, String> {
    let bytes = std::fs::read(path).map_err(|e| {
        format!(
            "Error loading ACLs, opening file '{file}': {}",
            strerror(&e)
        )
    })?;
    let mut users = BTreeMap::new();
    let mut errors = String::new();
    for (i, raw) in bytes.split(|&b| b == b'\n').enumerate() {
        let line = trim(raw, b" \t\r\n");
        if line.is_empty() {
            continue;
        }
        let n = i + 1;
        let argv: Vec<Vec<u8>> = line.split(|&b| b == b' ').map(<[u8]>::to_vec).collect();
        if argv.len() < 2 || argv[0] != b"user" {
            errors.push_str(&format!(
                "{file}:{n} should start with user keyword followed by the username. "
            ));
            continue;
        }
        let name = &argv[1];
        if has_spaces(name) {
            errors.push_str(&format!(
                "'{file}:{n}: username '{}' contains invalid characters. ",
                String::from_utf8_lossy(name)
            ));
            continue;
        }
        if users.contains_key(name) {
            errors.push_str(&format!(
                "WARNING: Duplicate user '{}' found on line {n}. ",
                String::from_utf8_lossy(name)
            ));
            continue;
        }
        let mut user = User::new(name, all_channels);
        match merge_selectors(&argv[2..]) {
            Err(_) => errors.push_str(&format!(
                "{file}:{n}: Unmatched parenthesis in selector definition."
            )),
            Ok(rules) => apply_line(&mut user, &rules, all_channels, file, n, &mut errors),
        }
        users.insert(name.clone(), user);
    }
    if !errors.is_empty() {
        errors.push_str("WARNING: ACL errors detected, no change to the previously active ACL rules was performed");
        return Err(errors);
    }
    users
        .entry(DEFAULT_USER.to_vec())
        .or_insert_with(User::default_user);
    Ok(users)
}

/// Applies one line's rules, noting each unknown command and the first
/// other error.
fn apply_line(
    user: &mut User,
    rules: &[Vec<u8>],
    all_channels: bool,
    path: &str,
    n: usize,
    errors: &mut String,
) {
    let mut syntax_error = false;
    for rule in rules {
        let rule = trim(rule, b"\t\r\n");
        match user.apply(rule, all_channels) {
            Ok(()) => {}
            Err(RuleError::Unknown) => errors.push_str(&format!(
                "{path}:{n}: Error in applying operation '{}': {}. ",
                String::from_utf8_lossy(rule),
                RuleError::Unknown.text()
            )),
            Err(e) if !syntax_error => {
                errors.push_str(&format!("{path}:{n}: {}. ", e.text()));
                syntax_error = true;
            }
            Err(_) => {}
        }
    }
}

/// Writes `users` to `path` in ACL file form, replacing it atomically.
pub fn save_file(path: &Path, users: &BTreeMap<Vec<u8>, User>) -> std::io::Result<()> {
    let mut text = Vec::new();
    for (name, user) in users {
        text.extend_from_slice(b"user ");
        text.extend_from_slice(name);
        text.push(b' ');
        text.extend_from_slice(user.describe().as_bytes());
        text.push(b'\n');
    }
    let mut temp = path.as_os_str().to_owned();
    temp.push(format!(
        ".tmp-{}-{}",
        std::process::id(),
        crate::state::unix_ms()
    ));
    let temp = std::path::PathBuf::from(temp);
    let result = (|| {
        let mut file = std::fs::File::create(&temp)?;
        file.write_all(&text)?;
        file.sync_all()?;
        std::fs::rename(&temp, path)?;
        let dir = path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        std::fs::File::open(dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}

fn trim<'a>(mut s: &'a [u8], set: &[u8]) -> &'a [u8] {
    while let [first, rest @ ..] = s {
        if !set.contains(first) {
            break;
        }
        s = rest;
    }
    while let [rest @ .., last] = s {
        if !set.contains(last) {
            break;
        }
        s = rest;
    }
    s
}

/// The C library's text for an I/O error (`No such file or directory`),
/// without Rust's ` (os error N)` suffix.
fn strerror(e: &std::io::Error) -> String {
    let text = e.to_string();
    match text.find(" (os error") {
        Some(at) => text[..at].to_string(),
        None => text,
    }
}
