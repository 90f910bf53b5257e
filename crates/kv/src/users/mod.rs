//! ACL users (Redis 7.0): who may log in, and what each may run, on which
//! keys and channels. The model is in [`User`] and [`Selector`]; the
//! commands (ACL SETUSER...) and the checks at dispatch are in
//! `commands/acl_cmd.rs`, which derives each command's keys and their
//! access from the command table's key specifications. `docs/acl.md`
//! describes the design.

mod catalog;
mod file;
pub mod log;
mod selector;
mod user;

use std::collections::BTreeMap;

pub use catalog::{get as catalog, Catalog};
pub use file::{file_path, load_file, save_file};
pub use log::{Context, Entry as LogEntry, Log, Reason};
pub use selector::{channel_in, RuleError, Selector, ALL, READ, WRITE};
pub use user::{hash_password, merge_selectors, valid_name, User};

use crate::config::Config;
use crate::resp::Args;

/// The name of the user every connection starts as.
pub const DEFAULT_USER: &[u8] = b"default";

/// What a command needs checked: its id, the position of its first
/// argument, its keys and channels.
#[derive(Debug)]
pub struct Request<'a> {
    /// Its catalog id.
    pub id: usize,
    /// Where its first argument is (2 for a subcommand).
    pub first_arg_at: usize,
    /// The command line.
    pub args: &'a Args<'a>,
    /// Flagged `no-auth` (AUTH, HELLO): allowed whatever the rules.
    pub no_auth: bool,
    /// Key positions with the access each needs ([`READ`], [`WRITE`]).
    pub keys: &'a [(usize, u8)],
    /// Channel positions, and whether each is a PSUBSCRIBE pattern.
    pub channels: &'a [(usize, bool)],
}

/// Why a command was refused, and the argument that was (for keys and
/// channels).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Denied {
    /// Command, key or channel.
    pub reason: Reason,
    /// The argument's position (0 for a command).
    pub at: usize,
}

/// All users and the ACL log.
#[derive(Debug)]
pub struct Acl {
    /// By name, in byte order (ACL LIST's order).
    pub users: BTreeMap<Vec<u8>, User>,
    /// ACL LOG.
    pub log: Log,
}

impl Default for Acl {
    fn default() -> Acl {
        let mut users = BTreeMap::new();
        users.insert(DEFAULT_USER.to_vec(), User::default_user());
        Acl {
            users,
            log: Log::default(),
        }
    }
}

/// Whether `acl-pubsub-default` gives new users every channel.
pub fn pubsub_default_all(config: &Config) -> bool {
    config.acl_pubsub_all
}

impl Acl {
    /// The users of a starting server: `default` (with `requirepass`),
    /// then the `user` lines of the configuration, then the ACL file.
    /// `Err` says why the server must not start.
    pub fn at_startup(config: &Config) -> Result<Acl, String> {
        let mut acl = Acl::default();
        acl.set_default_password(config.requirepass.as_deref().map(str::as_bytes));
        let aclfile = config.aclfile.clone();
        if !aclfile.is_empty() && !config.users.is_empty() {
            return Err("Configuring Redis with users defined in redis.conf and at the same setting an ACL file path is invalid. This setup is very likely to lead to configuration errors and security holes, please define either an ACL file or declare users directly in your redis.conf, but not both.".into());
        }
        let all_channels = pubsub_default_all(config);
        for line in &config.users {
            acl.load_config_user(line, all_channels)?;
        }
        if !aclfile.is_empty() {
            let path = file_path(&aclfile, &config.dir);
            acl.users = load_file(&aclfile, &path, all_channels)
                .map_err(|e| format!("Aborting Redis startup because of ACL errors: {e}"))?;
        }
        Ok(acl)
    }

    fn load_config_user(&mut self, line: &[String], all_channels: bool) -> Result<(), String> {
        let Some((name, rules)) = line.split_first() else {
            return Err("'user' needs a user name".into());
        };
        let rules: Vec<Vec<u8>> = rules.iter().map(|r| r.as_bytes().to_vec()).collect();
        let rules = merge_selectors(&rules)
            .map_err(|_| format!("Unmatched parenthesis in acl selector for user '{name}'"))?;
        if !valid_name(name.as_bytes()) {
            return Err("Spaces not allowed in ACL usernames".into());
        }
        let mut user = User::new(name.as_bytes(), all_channels);
        if name.as_bytes() == DEFAULT_USER {
            user = self.users.get(DEFAULT_USER).cloned().unwrap_or(user);
            let _ = user.apply(b"reset", all_channels);
        }
        for rule in &rules {
            user.apply(rule, all_channels).map_err(|e| {
                format!(
                    "Error loading ACL rule '{}' for the user named '{name}': {}",
                    String::from_utf8_lossy(rule),
                    e.text()
                )
            })?;
        }
        self.users.insert(name.as_bytes().to_vec(), user);
        Ok(())
    }

    /// The `default` user (always there).
    pub fn default_user(&self) -> Option<&User> {
        self.users.get(DEFAULT_USER)
    }

    /// Whether a connection that never authenticated may run commands:
    /// `default` is on and needs no password.
    pub fn default_open(&self) -> bool {
        self.default_user().is_some_and(|u| u.enabled && u.nopass)
    }

    /// Whether `name` with `password` logs in.
    pub fn credentials_ok(&self, name: &[u8], password: &[u8]) -> bool {
        self.users
            .get(name)
            .is_some_and(|u| u.enabled && u.password_ok(password))
    }

    /// `requirepass`: the default user's only password, or none.
    pub fn set_default_password(&mut self, password: Option<&[u8]>) {
        if let Some(user) = self.users.get_mut(DEFAULT_USER) {
            let _ = user.apply(b"resetpass", false);
            let rule = match password {
                Some(p) => [b">".as_slice(), p].concat(),
                None => b"nopass".to_vec(),
            };
            let _ = user.apply(&rule, false);
        }
    }

    /// User `name` with `rules` applied to a copy of it (or to a new
    /// user), or the error text ACL SETUSER replies.
    pub fn staged(
        &self,
        name: &[u8],
        rules: &[Vec<u8>],
        all_channels: bool,
    ) -> Result<User, String> {
        let rules = merge_selectors(rules).map_err(|at| {
            format!(
                "ERR Unmatched parenthesis in acl selector starting at '{}'.",
                String::from_utf8_lossy(&rules[at])
            )
        })?;
        let mut user = match self.users.get(name) {
            Some(u) => u.clone(),
            None => User::new(name, all_channels),
        };
        for rule in &rules {
            user.apply(rule, all_channels).map_err(|e| {
                format!(
                    "ERR Error in ACL SETUSER modifier '{}': {}",
                    String::from_utf8_lossy(rule),
                    e.text()
                )
            })?;
        }
        Ok(user)
    }

    /// Checks `req` for user `name`: allowed when any selector allows it
    /// all; otherwise the refusal Redis would log (a command refusal if no
    /// selector allows the command, else the last key or channel).
    pub fn check(&self, name: &[u8], req: &Request<'_>) -> Result<(), Denied> {
        let Some(user) = self.users.get(name) else {
            // A deleted user's clients are closed; until then, nothing.
            return Err(Denied {
                reason: Reason::Command,
                at: 0,
            });
        };
        check_user(user, req)
    }
}

/// [`Acl::check`] for a user at hand.
pub fn check_user(user: &User, req: &Request<'_>) -> Result<(), Denied> {
    let mut worst = Denied {
        reason: Reason::Command,
        at: 0,
    };
    for s in &user.selectors {
        match check_selector(s, req) {
            Ok(()) => return Ok(()),
            Err(d) => {
                if d.reason > worst.reason || (d.reason == worst.reason && d.at > worst.at) {
                    worst = d;
                }
            }
        }
    }
    Err(worst)
}

/// Checks `req` against one selector.
pub fn check_selector(s: &Selector, req: &Request<'_>) -> Result<(), Denied> {
    if !s.all_commands && !req.no_auth {
        let first = (req.args.len() > req.first_arg_at).then(|| req.args.get(req.first_arg_at));
        if !s.command_ok(req.id, first) {
            return Err(Denied {
                reason: Reason::Command,
                at: 0,
            });
        }
    }
    if !s.all_keys {
        for &(at, need) in req.keys {
            if !s.key_ok(req.args.get(at), need) {
                return Err(Denied {
                    reason: Reason::Key,
                    at,
                });
            }
        }
    }
    if !s.all_channels {
        for &(at, pattern) in req.channels {
            if !s.channel_ok(req.args.get(at), pattern) {
                return Err(Denied {
                    reason: Reason::Channel,
                    at,
                });
            }
        }
    }
    Ok(())
}

/// When `old` becomes `new`, the channel patterns its subscribers must
/// still match, or `None` when none can have lost anything (some
/// selector allows every channel, or every old pattern is kept).
pub fn channels_after_change(new: &User, old: &User) -> Option<Vec<Vec<u8>>> {
    if new.any_all_channels() {
        return None;
    }
    let upcoming: Vec<Vec<u8>> = new
        .selectors
        .iter()
        .flat_map(|s| s.channels.iter().cloned())
        .collect();
    let kept = old
        .selectors
        .iter()
        .all(|s| !s.all_channels && s.channels.iter().all(|c| upcoming.contains(c)));
    (!kept).then_some(upcoming)
}
