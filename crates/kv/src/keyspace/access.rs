//! Each key's access clock, as Redis keeps it: 24 bits per key, read by
//! OBJECT IDLETIME and OBJECT FREQ and by eviction's sampling.
//!
//! With an LRU policy (or none) the clock is the Unix second of the last
//! access, modulo 2^24 (194 days, then it wraps, as Redis's does). With an
//! LFU policy it is the minute of the counter's last decrement (16 bits)
//! above a logarithmic access counter (8 bits): a new key starts at
//! [`LFU_INIT`], an access increments it with probability
//! 1 / ((counter - LFU_INIT) * lfu-log-factor + 1), and it loses one for
//! every `lfu-decay-time` minutes without access.

/// What the clocks count (the `maxmemory-policy` and its LFU knobs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AccessPolicy {
    /// An LFU policy is selected: clocks are counters.
    pub lfu: bool,
    /// `lfu-log-factor`.
    pub lfu_log_factor: u32,
    /// `lfu-decay-time`, in minutes (0: counters never decay).
    pub lfu_decay_minutes: u32,
}

impl Default for AccessPolicy {
    fn default() -> AccessPolicy {
        AccessPolicy {
            lfu: false,
            lfu_log_factor: 10,
            lfu_decay_minutes: 1,
        }
    }
}

/// The counter a new key starts with, so it is not evicted at once.
pub const LFU_INIT: u32 = 5;
/// The LRU clock's range: 24 bits of seconds.
const LRU_CLOCK_MAX: u32 = (1 << 24) - 1;

/// The LRU clock at `now_ms`.
pub fn lru_clock(now_ms: i64) -> u32 {
    ((now_ms / 1000) as u64 & u64::from(LRU_CLOCK_MAX)) as u32
}

/// Milliseconds since the access a clock of `clock` recorded (LRU mode).
pub fn idle_ms(clock: u32, now_ms: i64) -> u64 {
    let now = lru_clock(now_ms);
    let seconds = if now >= clock {
        now - clock
    } else {
        LRU_CLOCK_MAX - clock + now
    };
    u64::from(seconds) * 1000
}

fn minutes(now_ms: i64) -> u32 {
    ((now_ms / 60_000) as u64 & 0xFFFF) as u32
}

/// Minutes since `last` (a 16-bit minute), wrapping as Redis's does.
fn minutes_since(last: u32, now_ms: i64) -> u32 {
    let now = minutes(now_ms);
    if now >= last {
        now - last
    } else {
        0xFFFF - last + now
    }
}

/// The counter of an LFU clock after its decay up to `now_ms`.
pub fn lfu_counter(clock: u32, now_ms: i64, policy: &AccessPolicy) -> u32 {
    let counter = clock & 0xFF;
    if policy.lfu_decay_minutes == 0 {
        return counter;
    }
    let periods = minutes_since(clock >> 8, now_ms) / policy.lfu_decay_minutes;
    counter.saturating_sub(periods)
}

/// The clock a key gets when it is created.
pub fn fresh(now_ms: i64, policy: &AccessPolicy) -> u32 {
    if policy.lfu {
        (minutes(now_ms) << 8) | LFU_INIT
    } else {
        lru_clock(now_ms)
    }
}

/// An LFU clock holding `counter` as of `now_ms` (RESTORE ... FREQ).
pub fn with_counter(now_ms: i64, counter: u32) -> u32 {
    (minutes(now_ms) << 8) | counter.min(255)
}

/// The clock after an access at `now_ms`; `random` is uniform in [0, 1).
pub fn accessed(clock: u32, now_ms: i64, policy: &AccessPolicy, random: f64) -> u32 {
    if !policy.lfu {
        return lru_clock(now_ms);
    }
    let mut counter = lfu_counter(clock, now_ms, policy);
    if counter < 255 {
        let base = f64::from(counter.saturating_sub(LFU_INIT));
        let p = 1.0 / (base * f64::from(policy.lfu_log_factor) + 1.0);
        if random < p {
            counter += 1;
        }
    }
    (minutes(now_ms) << 8) | counter
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lru_idle_time_counts_seconds_and_wraps() {
        let clock = lru_clock(10_000);
        assert_eq!(idle_ms(clock, 13_999), 3000);
        let late = lru_clock(i64::from(LRU_CLOCK_MAX) * 1000);
        assert_eq!(idle_ms(late, 2000), 2000);
    }

    #[test]
    fn lfu_counts_up_logarithmically_and_decays() {
        let policy = AccessPolicy {
            lfu: true,
            ..AccessPolicy::default()
        };
        let mut clock = fresh(0, &policy);
        assert_eq!(lfu_counter(clock, 0, &policy), LFU_INIT);
        // A certain increment (random 0) each time: 100 accesses.
        for _ in 0..100 {
            clock = accessed(clock, 0, &policy, 0.0);
        }
        assert_eq!(lfu_counter(clock, 0, &policy), 105);
        // A near-certain miss past the initial value.
        assert_eq!(
            lfu_counter(accessed(clock, 0, &policy, 0.99), 0, &policy),
            105
        );
        // Ten minutes later ten decrements.
        assert_eq!(lfu_counter(clock, 600_000, &policy), 95);
    }
}
