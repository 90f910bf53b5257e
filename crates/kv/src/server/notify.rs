//! Turns what the keyspace recorded while a command (or the timer) ran
//! into messages: keyspace notifications on their Pub/Sub channels, and
//! tracking invalidations for changed keys and flushed databases.

use crate::keyspace::events::{KEYEVENT, KEYSPACE};
use crate::resp::reply::push_i64;
use crate::state::State;

use super::pubsub::{publish, Kind};
use super::tracking;

/// Copies the settings the keyspace needs to record events and changes:
/// called before each command and timer run.
pub fn prepare(state: &mut State) {
    state.keyspace.notify_flags = state.config.notify_keyspace_events;
    state.keyspace.track_changes = state.pubsub.tracking.active();
    if state.keyspace.track_changes {
        let keys_max = state
            .config
            .accepted_int("tracking-table-max-keys")
            .map_or(0, |n| n.max(0) as usize);
        tracking::limit(&mut state.pubsub, &state.clients, keys_max);
    }
}

/// Publishes the queued keyspace events and sends the invalidations for
/// changed keys, in the order they happened.
pub fn settle(state: &mut State) {
    if !state.keyspace.changed.is_empty() || state.keyspace.flushed {
        let changed = std::mem::take(&mut state.keyspace.changed);
        for (key, by_command) in changed {
            tracking::invalidate_key(&mut state.pubsub, &state.clients, &key, by_command);
        }
        if std::mem::take(&mut state.keyspace.flushed) {
            tracking::invalidate_all(&mut state.pubsub, &state.clients);
        }
    }
    if state.keyspace.events.is_empty() {
        return;
    }
    let flags = state.config.notify_keyspace_events;
    for event in std::mem::take(&mut state.keyspace.events) {
        if flags & event.class == 0 {
            continue;
        }
        let mut db = Vec::with_capacity(4);
        push_i64(&mut db, event.db as i64);
        if flags & KEYSPACE != 0 {
            let mut channel = b"__keyspace@".to_vec();
            channel.extend_from_slice(&db);
            channel.extend_from_slice(b"__:");
            channel.extend_from_slice(&event.key);
            publish(
                &mut state.pubsub,
                &state.clients,
                &channel,
                event.event.as_bytes(),
                Kind::Plain,
            );
        }
        if flags & KEYEVENT != 0 {
            let mut channel = b"__keyevent@".to_vec();
            channel.extend_from_slice(&db);
            channel.extend_from_slice(b"__:");
            channel.extend_from_slice(event.event.as_bytes());
            publish(
                &mut state.pubsub,
                &state.clients,
                &channel,
                &event.key,
                Kind::Plain,
            );
        }
    }
}
