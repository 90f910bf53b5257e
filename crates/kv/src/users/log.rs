//! ACL LOG: the recent permission failures, newest first. A failure like
//! one of the ten newest (same reason, context, object and user, within a
//! minute) bumps that entry's count instead of adding one, as in Redis.

use std::collections::VecDeque;

/// How many of the newest entries a new failure is compared with.
const SCAN_MAX: usize = 10;
/// Failures further apart than this (ms) are separate entries.
const GROUPING_MS: i64 = 60_000;

/// Why a command or login was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Reason {
    /// The command or subcommand is not allowed.
    Command,
    /// A key is not allowed.
    Key,
    /// A wrong password, or a disabled or unknown user.
    Auth,
    /// A channel is not allowed.
    Channel,
}

impl Reason {
    /// The name ACL LOG shows.
    pub fn name(self) -> &'static str {
        match self {
            Reason::Command => "command",
            Reason::Key => "key",
            Reason::Auth => "auth",
            Reason::Channel => "channel",
        }
    }
}

/// Where the refused command ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Context {
    /// Sent by the client.
    Toplevel,
    /// Queued in, or run by, a transaction.
    Multi,
    /// Called by a script.
    Lua,
}

impl Context {
    /// The name ACL LOG shows.
    pub fn name(self) -> &'static str {
        match self {
            Context::Toplevel => "toplevel",
            Context::Multi => "multi",
            Context::Lua => "lua",
        }
    }
}

/// One entry.
#[derive(Clone, Debug)]
pub struct Entry {
    /// Failures it stands for.
    pub count: u64,
    /// Why.
    pub reason: Reason,
    /// Where.
    pub context: Context,
    /// The command, key, channel, or (for auth) the command's name.
    pub object: Vec<u8>,
    /// The user refused.
    pub username: Vec<u8>,
    /// Unix ms of the latest failure.
    pub updated_ms: i64,
    /// CLIENT LIST's line for the client, at the latest failure.
    pub client_info: String,
}

/// The log.
#[derive(Debug, Default)]
pub struct Log {
    /// Newest first.
    pub entries: VecDeque<Entry>,
}

impl Log {
    /// Records `entry`, keeping at most `max_len` entries.
    pub fn add(&mut self, entry: Entry, max_len: usize) {
        let similar = self.entries.iter().take(SCAN_MAX).position(|e| {
            e.reason == entry.reason
                && e.context == entry.context
                && (e.updated_ms - entry.updated_ms).abs() <= GROUPING_MS
                && e.object == entry.object
                && e.username == entry.username
        });
        if let Some(at) = similar {
            if let Some(mut old) = self.entries.remove(at) {
                old.count += 1;
                old.updated_ms = entry.updated_ms;
                old.client_info = entry.client_info;
                self.entries.push_front(old);
            }
            return;
        }
        self.entries.push_front(entry);
        self.entries.truncate(max_len);
    }

    /// ACL LOG RESET.
    pub fn clear(&mut self) {
        self.entries.clear();
    }
}
