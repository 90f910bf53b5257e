//! A user: whether it may log in, its password hashes, and its selectors
//! (the root one first). Rules apply to a copy first, so a rejected
//! ACL SETUSER changes nothing.

use sha2::{Digest, Sha256};

use super::selector::{has_spaces, RuleError, Selector};
use crate::resp::parser::split_args;

/// Hex digits of a SHA-256 password hash.
pub const HASH_LEN: usize = 64;

/// One user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    /// Its name.
    pub name: Vec<u8>,
    /// `on`: may authenticate.
    pub enabled: bool,
    /// `nopass`: any password works.
    pub nopass: bool,
    /// `sanitize-payload` (`Some(true)`), `skip-sanitize-payload`
    /// (`Some(false)`), or neither yet.
    pub sanitize: Option<bool>,
    /// SHA-256 hashes of its passwords, hex, in the order added.
    pub passwords: Vec<String>,
    /// The root selector first, then the others in the order added.
    pub selectors: Vec<Selector>,
}

/// The SHA-256 of `password`, as lower-case hex.
pub fn hash_password(password: &[u8]) -> String {
    let digest = Sha256::digest(password);
    let mut hex = String::with_capacity(HASH_LEN);
    for b in digest {
        hex.push_str(&format!("{b:02x}"));
    }
    hex
}

fn valid_hash(hash: &[u8]) -> bool {
    hash.len() == HASH_LEN && hash.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Compares two equal-length texts in time that does not depend on
/// where they differ.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

impl User {
    /// A new user as Redis creates one: off, no password, no commands,
    /// no keys; channels per `acl-pubsub-default`.
    pub fn new(name: &[u8], all_channels: bool) -> User {
        User {
            name: name.to_vec(),
            enabled: false,
            nopass: false,
            sanitize: None,
            passwords: Vec::new(),
            selectors: vec![Selector::new(true, all_channels)],
        }
    }

    /// The `default` user of a fresh server: on, no password, everything.
    pub fn default_user() -> User {
        let mut user = User::new(b"default", false);
        for rule in ["+@all", "~*", "&*", "on", "nopass"] {
            // These rules are valid by construction.
            let _ = user.apply(rule.as_bytes(), false);
        }
        user
    }

    /// The root selector.
    pub fn root(&self) -> &Selector {
        &self.selectors[0]
    }

    /// Applies one rule (`acl-pubsub-default`'s `allchannels` is
    /// `all_channels`, for `reset`).
    pub fn apply(&mut self, op: &[u8], all_channels: bool) -> Result<(), RuleError> {
        let is = |word: &str| op.eq_ignore_ascii_case(word.as_bytes());
        if op.is_empty() {
            return Ok(());
        }
        if is("on") {
            self.enabled = true;
        } else if is("off") {
            self.enabled = false;
        } else if is("skip-sanitize-payload") {
            self.sanitize = Some(false);
        } else if is("sanitize-payload") {
            self.sanitize = Some(true);
        } else if is("nopass") {
            self.nopass = true;
            self.passwords.clear();
        } else if is("resetpass") {
            self.nopass = false;
            self.passwords.clear();
        } else if is("clearselectors") {
            self.selectors.truncate(1);
        } else if is("reset") {
            self.nopass = false;
            self.passwords.clear();
            self.enabled = false;
            self.sanitize = Some(true);
            self.selectors.truncate(1);
            let root = &mut self.selectors[0];
            for rule in ["resetkeys", "resetchannels", "-@all"] {
                root.apply(rule.as_bytes())?;
            }
            root.all_channels = all_channels;
        } else {
            match op[0] {
                b'>' | b'#' => self.add_password(op)?,
                b'<' | b'!' => self.remove_password(op)?,
                b'(' if op.last() == Some(&b')') => {
                    self.selectors.push(selector_from(op, all_channels)?);
                }
                _ => self.selectors[0].apply(op)?,
            }
        }
        Ok(())
    }

    fn add_password(&mut self, op: &[u8]) -> Result<(), RuleError> {
        let hash = if op[0] == b'>' {
            hash_password(&op[1..])
        } else if valid_hash(&op[1..]) {
            String::from_utf8_lossy(&op[1..]).into_owned()
        } else {
            return Err(RuleError::BadHash);
        };
        if !self.passwords.contains(&hash) {
            self.passwords.push(hash);
        }
        self.nopass = false;
        Ok(())
    }

    fn remove_password(&mut self, op: &[u8]) -> Result<(), RuleError> {
        let hash = if op[0] == b'<' {
            hash_password(&op[1..])
        } else if valid_hash(&op[1..]) {
            String::from_utf8_lossy(&op[1..]).into_owned()
        } else {
            return Err(RuleError::BadHash);
        };
        let at = self
            .passwords
            .iter()
            .position(|p| *p == hash)
            .ok_or(RuleError::NoSuchPassword)?;
        self.passwords.remove(at);
        Ok(())
    }

    /// Whether `password` logs this user in (being enabled aside).
    pub fn password_ok(&self, password: &[u8]) -> bool {
        if self.nopass {
            return true;
        }
        let hashed = hash_password(password);
        self.passwords
            .iter()
            .any(|p| same_secret(p.as_bytes(), hashed.as_bytes()))
    }

    /// The flags GETUSER lists, in Redis's order.
    pub fn flag_names(&self) -> Vec<&'static str> {
        let mut out = vec![if self.enabled { "on" } else { "off" }];
        if self.nopass {
            out.push("nopass");
        }
        match self.sanitize {
            Some(false) => out.push("skip-sanitize-payload"),
            Some(true) => out.push("sanitize-payload"),
            None => {}
        }
        out
    }

    /// The rules that recreate the user, as ACL LIST and the ACL file
    /// write them (after `user <name> `).
    pub fn describe(&self) -> String {
        let mut out = String::new();
        for flag in self.flag_names() {
            out.push_str(flag);
            out.push(' ');
        }
        for p in &self.passwords {
            out.push('#');
            out.push_str(p);
            out.push(' ');
        }
        for s in &self.selectors {
            if s.root {
                out.push_str(&s.describe());
            } else {
                out.push_str(&format!(" ({})", s.describe()));
            }
        }
        out
    }

    /// Whether any selector allows every channel.
    pub fn any_all_channels(&self) -> bool {
        self.selectors.iter().any(|s| s.all_channels)
    }
}

/// A selector from `(rule rule ...)`.
fn selector_from(op: &[u8], all_channels: bool) -> Result<Selector, RuleError> {
    let inner = &op[1..op.len() - 1];
    let mut selector = Selector::new(false, all_channels);
    let rules = split_args(inner).map_err(|_| RuleError::Syntax)?;
    for rule in rules {
        selector.apply(&rule)?;
    }
    Ok(selector)
}

/// Joins a selector spread over several arguments (`(` `+get` `~k)`)
/// into one; `Err` is the index of an unclosed `(`.
pub fn merge_selectors(args: &[Vec<u8>]) -> Result<Vec<Vec<u8>>, usize> {
    let mut out = Vec::with_capacity(args.len());
    let mut open: Option<(usize, Vec<u8>)> = None;
    for (j, op) in args.iter().enumerate() {
        if let Some((start, mut acc)) = open.take() {
            acc.push(b' ');
            acc.extend_from_slice(op);
            if op.last() == Some(&b')') {
                out.push(acc);
            } else {
                open = Some((start, acc));
            }
            continue;
        }
        if op.first() == Some(&b'(') && op.last() != Some(&b')') {
            open = Some((j, op.clone()));
            continue;
        }
        out.push(op.clone());
    }
    match open {
        Some((start, _)) => Err(start),
        None => Ok(out),
    }
}

/// Whether `name` may name a user (no spaces or NUL bytes).
pub fn valid_name(name: &[u8]) -> bool {
    !has_spaces(name)
}
