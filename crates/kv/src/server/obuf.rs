//! `client-output-buffer-limit`: a client that lets its replies pile up
//! unread (a slow subscriber, a pipeline of huge replies) is closed before
//! it holds the server's memory, as Redis closes it.
//!
//! A client's class decides its limits (`config/obuf.rs`): subscribed
//! clients are `pubsub`, replicas `slave` (their stream is bounded in
//! `replicas.rs`), everyone else `normal`. The measure is the reply bytes
//! not yet written to the socket. The hard limit closes a client the
//! moment its unsent replies reach it; the soft limit closes it once they
//! have stayed at or over it for `soft_seconds` without a break. The check
//! runs after each command a client runs (so a pipeline stops at the
//! command that crossed the limit, and none of its replies is sent), after
//! messages are delivered to it, and on the timer (a soft limit expires
//! without new traffic). A closed client's unsent replies are dropped;
//! the writes its commands made stay made, and logged.

use std::time::{Duration, Instant};

use super::conn::Conn;
use crate::config::obuf::{ClientClass, OutputLimit};

/// Whether a client holding `pending` unsent reply bytes at `now` is over
/// `limit`; `since` keeps when it went over the soft limit.
pub(super) fn over(
    since: &mut Option<Instant>,
    limit: OutputLimit,
    pending: u64,
    now: Instant,
) -> bool {
    if limit.hard_bytes > 0 && pending >= limit.hard_bytes {
        return true;
    }
    if limit.soft_bytes == 0 || pending < limit.soft_bytes {
        *since = None;
        return false;
    }
    let first = *since.get_or_insert(now);
    now.saturating_duration_since(first) > Duration::from_secs(limit.soft_seconds)
}

/// The class whose limits apply to a client that `subscribed` or not.
pub(super) fn class(subscribed: bool) -> ClientClass {
    if subscribed {
        ClientClass::Pubsub
    } else {
        ClientClass::Normal
    }
}

impl super::Server {
    /// Checks connection `conn` against its class's limits; if it is over,
    /// drops its unsent replies and marks it for closing, and returns true.
    pub(super) fn enforce_output_limit(&mut self, conn: &mut Conn) -> bool {
        let pending = conn.reply.buf.len().saturating_sub(conn.out_sent);
        let limits = &self.state.config.client_output_buffer_limits;
        // This runs after every command: below the smallest limit of the
        // classes a client can be in, with no soft clock running, nothing
        // can be over, and the class need not be looked up.
        let floor = [ClientClass::Normal, ClientClass::Pubsub]
            .into_iter()
            .flat_map(|c| [limits.of(c).hard_bytes, limits.of(c).soft_bytes])
            .filter(|&bytes| bytes > 0)
            .min();
        let below = floor.is_none_or(|floor| (pending as u64) < floor);
        if conn.closing || below && conn.soft_over_since.is_none() {
            return false;
        }
        let id = conn.session.id;
        let class = class(self.state.pubsub.is_subscribed(id));
        let limit = self.state.config.client_output_buffer_limits.of(class);
        if !over(
            &mut conn.soft_over_since,
            limit,
            pending as u64,
            Instant::now(),
        ) {
            return false;
        }
        tracing::warn!(
            "client {id} closed for overcoming its output buffer limits ({pending} bytes, class {class:?})"
        );
        conn.reply.buf.truncate(conn.out_sent);
        conn.closing = true;
        true
    }

    /// The timer's pass: soft limits expire without new traffic.
    pub(super) fn check_output_limits(&mut self) {
        for index in 0..self.conns.len() {
            let Some(mut conn) = self.conns[index].take() else {
                continue;
            };
            let replica = conn.session.sync_requested;
            let closed = !replica && self.enforce_output_limit(&mut conn);
            self.conns[index] = Some(conn);
            if closed {
                self.mark_ready(index);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_reached_at_their_value_and_the_soft_one_after_its_time() {
        let limit = OutputLimit {
            hard_bytes: 1000,
            soft_bytes: 100,
            soft_seconds: 2,
        };
        let t0 = Instant::now();
        let mut since = None;
        let mut check = |pending: u64, at: Duration| over(&mut since, limit, pending, t0 + at);
        assert!(!check(99, Duration::ZERO));
        assert!(!check(100, Duration::ZERO), "soft: not before its time");
        assert!(!check(500, Duration::from_secs(2)));
        assert!(check(500, Duration::from_millis(2001)));
        // Falling under the soft limit starts the clock again.
        assert!(!check(50, Duration::from_secs(3)));
        assert!(!check(150, Duration::from_secs(4)));
        assert!(check(1000, Duration::from_secs(4)), "hard: at once");
    }
}
