//! A selector: one set of permissions (commands, keys, channels). Every
//! user has a root selector and may have more; a command is allowed when
//! any one selector allows all of it. The rules (`+get`, `~key*`,
//! `%R~key*`, `&chan`...) and the text ACL LIST shows for them follow
//! Redis 7.0.

use std::collections::BTreeMap;

use super::catalog::{self, Bits, Catalog, WORDS};
use crate::commands::acl;
use crate::keyspace::glob::glob_match;

/// A key pattern may be read through.
pub const READ: u8 = 1;
/// A key pattern may be written through.
pub const WRITE: u8 = 2;
/// Both.
pub const ALL: u8 = READ | WRITE;

/// Why a rule was refused, as Redis words each case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleError {
    /// An unknown command or category.
    Unknown,
    /// A rule that makes no sense, or a pattern with spaces.
    Syntax,
    /// A key pattern after `allkeys`.
    KeyAfterAll,
    /// A channel pattern after `allchannels`.
    ChannelAfterAll,
    /// `<pass` or `!hash` for a password the user does not have.
    NoSuchPassword,
    /// A `#hash` that is not 64 lower-case hex digits.
    BadHash,
    /// A user defined twice in the configuration.
    Duplicate,
    /// `+cmd|sub|arg`.
    SubcommandFirstArg,
}

impl RuleError {
    /// The text ACL SETUSER puts after the failing modifier.
    pub fn text(self) -> &'static str {
        match self {
            RuleError::Unknown => "Unknown command or category name in ACL",
            RuleError::Syntax => "Syntax error",
            RuleError::KeyAfterAll => "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns",
            RuleError::ChannelAfterAll => "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels",
            RuleError::NoSuchPassword => "The password you are trying to remove from the user does not exist",
            RuleError::BadHash => "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters",
            RuleError::Duplicate => "Duplicate user found. A user can only be defined once in config files",
            RuleError::SubcommandFirstArg => "Allowing first-arg of a subcommand is not supported",
        }
    }
}

/// A key pattern with what it grants ([`READ`], [`WRITE`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyPattern {
    /// [`READ`] and/or [`WRITE`].
    pub flags: u8,
    /// A glob pattern.
    pub pattern: Vec<u8>,
}

/// One selector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selector {
    /// The user's own selector (rules outside parentheses).
    pub root: bool,
    /// `allkeys`: every key, any access.
    pub all_keys: bool,
    /// `allchannels`.
    pub all_channels: bool,
    /// `allcommands` and nothing taken away since.
    pub all_commands: bool,
    /// Started from `+@all`: commands added later would be allowed (what
    /// Redis keeps in a reserved bit, and ACL LIST shows as `+@all`).
    pub future: bool,
    /// Allowed command ids.
    pub allowed: Bits,
    /// First arguments allowed for a command otherwise denied (`+select|0`).
    pub first_args: BTreeMap<usize, Vec<Vec<u8>>>,
    /// Key patterns, in the order added.
    pub keys: Vec<KeyPattern>,
    /// Channel patterns, in the order added.
    pub channels: Vec<Vec<u8>>,
}

/// Whether `s` has a white-space or NUL byte (not allowed in user names
/// and patterns).
pub fn has_spaces(s: &[u8]) -> bool {
    s.iter()
        .any(|&b| b == 0 || b == b' ' || (b'\t'..=b'\r').contains(&b))
}

impl Selector {
    /// An empty selector: no commands, no keys; channels per
    /// `acl-pubsub-default` (`all_channels`).
    pub fn new(root: bool, all_channels: bool) -> Selector {
        Selector {
            root,
            all_keys: false,
            all_channels,
            all_commands: false,
            future: false,
            allowed: [0; WORDS],
            first_args: BTreeMap::new(),
            keys: Vec::new(),
            channels: Vec::new(),
        }
    }

    fn set_bit(&mut self, id: usize, on: bool) {
        catalog::set_bit(&mut self.allowed, id, on);
        if !on {
            self.all_commands = false;
        }
    }

    /// Allows or denies command `id`, and all its subcommands.
    fn change(&mut self, cat: &Catalog, id: usize, on: bool) {
        self.set_bit(id, on);
        self.first_args.remove(&id);
        if let Some(entry) = cat.entries.get(id) {
            for sub in entry.subs.clone() {
                self.set_bit(sub, on);
            }
        }
    }

    /// `+@cat` / `-@cat`: every command of the category, and the
    /// subcommands of containers in it.
    fn change_category(&mut self, cat: &Catalog, bit: u64, on: bool) {
        for (id, entry) in cat.entries.iter().enumerate() {
            if entry.categories & bit != 0 {
                self.change(cat, id, on);
            }
        }
    }

    fn set_all(&mut self, on: bool) {
        self.allowed = if on { [u64::MAX; WORDS] } else { [0; WORDS] };
        self.all_commands = on;
        self.future = on;
        self.first_args.clear();
    }

    /// Applies one rule; on error the selector may be partly changed (the
    /// caller works on a copy).
    pub fn apply(&mut self, op: &[u8]) -> Result<(), RuleError> {
        let is = |word: &str| op.eq_ignore_ascii_case(word.as_bytes());
        if is("allkeys") || is("~*") {
            self.all_keys = true;
            self.keys.clear();
        } else if is("resetkeys") {
            self.all_keys = false;
            self.keys.clear();
        } else if is("allchannels") || is("&*") {
            self.all_channels = true;
            self.channels.clear();
        } else if is("resetchannels") {
            self.all_channels = false;
            self.channels.clear();
        } else if is("allcommands") || is("+@all") {
            self.set_all(true);
        } else if is("nocommands") || is("-@all") {
            self.set_all(false);
        } else {
            match op.first() {
                Some(b'~' | b'%') => self.add_key_pattern(op)?,
                Some(b'&') => self.add_channel(op)?,
                Some(b'+' | b'-') if op.get(1) == Some(&b'@') => {
                    let bit = catalog::category(&op[2..]).ok_or(RuleError::Unknown)?;
                    self.change_category(catalog::get(), bit, op[0] == b'+');
                }
                Some(b'+') => self.allow_command(&op[1..])?,
                Some(b'-') => {
                    let cat = catalog::get();
                    let id = cat.find(&op[1..]).ok_or(RuleError::Unknown)?;
                    self.change(cat, id, false);
                }
                _ => return Err(RuleError::Syntax),
            }
        }
        Ok(())
    }

    fn add_key_pattern(&mut self, op: &[u8]) -> Result<(), RuleError> {
        if self.all_keys {
            return Err(RuleError::KeyAfterAll);
        }
        let (flags, offset) = if op[0] == b'%' {
            let mut flags = 0;
            let mut offset = 1;
            while offset < op.len() {
                match op[offset] {
                    b'R' | b'r' if flags & READ == 0 => flags |= READ,
                    b'W' | b'w' if flags & WRITE == 0 => flags |= WRITE,
                    b'~' => {
                        offset += 1;
                        break;
                    }
                    _ => return Err(RuleError::Syntax),
                }
                offset += 1;
            }
            if flags == 0 {
                return Err(RuleError::Syntax);
            }
            (flags, offset)
        } else {
            (ALL, 1)
        };
        let pattern = op.get(offset..).unwrap_or_default();
        if has_spaces(pattern) {
            return Err(RuleError::Syntax);
        }
        match self.keys.iter_mut().find(|k| k.pattern == pattern) {
            Some(existing) => existing.flags |= flags,
            None => self.keys.push(KeyPattern {
                flags,
                pattern: pattern.to_vec(),
            }),
        }
        self.all_keys = false;
        Ok(())
    }

    fn add_channel(&mut self, op: &[u8]) -> Result<(), RuleError> {
        if self.all_channels {
            return Err(RuleError::ChannelAfterAll);
        }
        let pattern = &op[1..];
        if has_spaces(pattern) {
            return Err(RuleError::Syntax);
        }
        if !self.channels.iter().any(|c| c == pattern) {
            self.channels.push(pattern.to_vec());
        }
        Ok(())
    }

    /// `+cmd`, `+container|sub`, or `+cmd|first-arg`.
    fn allow_command(&mut self, name: &[u8]) -> Result<(), RuleError> {
        let cat = catalog::get();
        let Some(bar) = name.iter().rposition(|&b| b == b'|') else {
            let id = cat.find(name).ok_or(RuleError::Unknown)?;
            self.change(cat, id, true);
            return Ok(());
        };
        let (head, arg) = (&name[..bar], &name[bar + 1..]);
        let id = cat.find(head).ok_or(RuleError::Unknown)?;
        let entry = &cat.entries[id];
        if entry.parent.is_some() {
            return Err(RuleError::SubcommandFirstArg);
        }
        if arg.is_empty() {
            return Err(RuleError::Syntax);
        }
        if !entry.subs.is_empty() {
            let sub = cat.find(name).ok_or(RuleError::Unknown)?;
            self.change(cat, sub, true);
            return Ok(());
        }
        tracing::warn!(
            "Deprecation warning: Allowing a first arg of an otherwise blocked command is a misuse of ACL and may get disabled in the future (offender: +{})",
            String::from_utf8_lossy(name)
        );
        let list = self.first_args.entry(id).or_default();
        if !list.iter().any(|a| a.eq_ignore_ascii_case(arg)) {
            list.push(arg.to_vec());
        }
        Ok(())
    }

    /// Whether command `id` may run with first argument `first` (the
    /// argument after the command's name; `None` when there is none).
    pub fn command_ok(&self, id: usize, first: Option<&[u8]>) -> bool {
        if self.all_commands || catalog::bit(&self.allowed, id) {
            return true;
        }
        match (first, self.first_args.get(&id)) {
            (Some(arg), Some(list)) => list.iter().any(|a| a.eq_ignore_ascii_case(arg)),
            _ => false,
        }
    }

    /// Whether `key` may be used with access `need` ([`READ`] and/or
    /// [`WRITE`]; 0 for a key whose data is not touched, which any
    /// matching pattern allows).
    pub fn key_ok(&self, key: &[u8], need: u8) -> bool {
        self.all_keys
            || self
                .keys
                .iter()
                .any(|p| p.flags & need == need && glob_match(&p.pattern, key))
    }

    /// Whether every key may be used with access `need` (`~*`, `%R~*`...).
    pub fn all_keys_ok(&self, need: u8) -> bool {
        self.all_keys
            || self
                .keys
                .iter()
                .any(|p| p.flags & need == need && p.pattern == b"*")
    }

    /// Whether channel `name` may be used; a `pattern` (PSUBSCRIBE's) must
    /// equal an allowed pattern literally.
    pub fn channel_ok(&self, name: &[u8], pattern: bool) -> bool {
        self.all_channels || channel_in(&self.channels, name, pattern)
    }

    /// The command rules as Redis describes them: `+@all` or `-@all`, the
    /// categories that fit best, then single commands, so that applying
    /// the text to a fresh selector gives the same bitmap.
    pub fn describe_commands(&self) -> String {
        let cat = catalog::get();
        let additive = !self.future;
        let mut rules = String::from(if additive { "-@all " } else { "+@all " });
        let mut fake = Selector::new(false, false);
        fake.set_all(!additive);
        let mut temp = Selector::new(false, false);
        temp.allowed = self.allowed;
        let mut applied = [false; 64];
        loop {
            let mut best: Option<usize> = None;
            let (mut min_diff, mut max_same) = (usize::MAX, 0);
            for (j, _) in acl::NAMES.iter().enumerate() {
                if applied[j] {
                    continue;
                }
                let (on, off) = temp.count_category(cat, 1 << j);
                let (diff, same) = if additive { (off, on) } else { (on, off) };
                if same > diff && (diff < min_diff || (diff == min_diff && same > max_same)) {
                    best = Some(j);
                    min_diff = diff;
                    max_same = same;
                }
            }
            let Some(j) = best else { break };
            fake.change_category(cat, 1 << j, additive);
            temp.change_category(cat, 1 << j, !additive);
            rules.push_str(if additive { "+@" } else { "-@" });
            rules.push_str(acl::NAMES[j]);
            rules.push(' ');
            applied[j] = true;
        }
        for (id, entry) in cat.entries.iter().enumerate() {
            if entry.parent.is_some() {
                continue;
            }
            self.describe_single(cat, &mut fake, id, &mut rules);
            for sub in entry.subs.clone() {
                self.describe_single(cat, &mut fake, sub, &mut rules);
            }
            let user_bit = catalog::bit(&self.allowed, id);
            if let (false, Some(args)) = (user_bit, self.first_args.get(&id)) {
                for arg in args {
                    rules.push('+');
                    rules.push_str(&entry.full);
                    rules.push('|');
                    rules.push_str(&String::from_utf8_lossy(arg));
                    rules.push(' ');
                }
            }
        }
        rules.pop();
        rules
    }

    fn describe_single(&self, cat: &Catalog, fake: &mut Selector, id: usize, rules: &mut String) {
        let user_bit = catalog::bit(&self.allowed, id);
        if user_bit != catalog::bit(&fake.allowed, id) {
            rules.push(if user_bit { '+' } else { '-' });
            rules.push_str(&cat.entries[id].full);
            rules.push(' ');
            fake.change(cat, id, user_bit);
        }
    }

    /// How many commands of category `bit` are allowed and denied.
    fn count_category(&self, cat: &Catalog, bit: u64) -> (usize, usize) {
        let mut counts = (0, 0);
        for (id, entry) in cat.entries.iter().enumerate() {
            if entry.categories & bit != 0 {
                if catalog::bit(&self.allowed, id) {
                    counts.0 += 1;
                } else {
                    counts.1 += 1;
                }
            }
        }
        counts
    }

    /// The key patterns as GETUSER shows them: `~*`, or each pattern.
    pub fn describe_keys(&self) -> String {
        if self.all_keys {
            return "~*".into();
        }
        let parts: Vec<String> = self.keys.iter().map(pattern_text).collect();
        parts.join(" ")
    }

    /// The channel patterns as GETUSER shows them.
    pub fn describe_channels(&self) -> String {
        if self.all_channels {
            return "&*".into();
        }
        let parts: Vec<String> = self
            .channels
            .iter()
            .map(|c| format!("&{}", String::from_utf8_lossy(c)))
            .collect();
        parts.join(" ")
    }

    /// The whole selector as ACL LIST shows it.
    pub fn describe(&self) -> String {
        let mut out = String::new();
        if self.all_keys {
            out.push_str("~* ");
        } else {
            for k in &self.keys {
                out.push_str(&pattern_text(k));
                out.push(' ');
            }
        }
        if self.all_channels {
            out.push_str("&* ");
        } else {
            out.push_str("resetchannels ");
            for c in &self.channels {
                out.push('&');
                out.push_str(&String::from_utf8_lossy(c));
                out.push(' ');
            }
        }
        out.push_str(&self.describe_commands());
        out
    }
}

/// Whether `name` is allowed by `list` (a PSUBSCRIBE `pattern` only by an
/// equal entry).
pub fn channel_in(list: &[Vec<u8>], name: &[u8], pattern: bool) -> bool {
    list.iter().any(|p| {
        if pattern {
            p.as_slice() == name
        } else {
            glob_match(p, name)
        }
    })
}

fn pattern_text(k: &KeyPattern) -> String {
    let prefix = match k.flags {
        READ => "%R~",
        WRITE => "%W~",
        _ => "~",
    };
    format!("{prefix}{}", String::from_utf8_lossy(&k.pattern))
}
