//! What idle CPUs do while a client-server experiment runs.
//!
//! A closed request-reply load over loopback wakes the other core for
//! nearly every reply. In a VM whose idle driver halts a vCPU at once
//! (`haltpoll.guest_halt_poll_ns=0`, as on the machines this project is
//! measured on), each of those wake-ups goes through the hypervisor: a
//! round trip between two threads on the two cores took about 70 µs with
//! halting idle and 20 µs with polling idle
//! (`docs/results/bench-host-noise.md`). The steady rate then measures the host's wake-up cost, and
//! whatever keeps a vCPU busy (a rewrite's workers, Redis's fork child)
//! *raises* the clients' rate: no longer a comparison of servers.
//!
//! So the `kv` and `rewrite` experiments hold a CPU latency QoS request of
//! 0 µs on `/dev/cpu_dma_latency` (the kernel's PM QoS interface, what
//! tuned's latency profiles set) for their whole run: idle CPUs poll
//! instead of halting, for both servers of every comparison alike.
//! `--host-idle` leaves the host's default; the result file says which.

use std::fs::File;
use std::io::Write;

use crate::report::Report;

/// The kernel's CPU latency QoS device.
pub const QOS_DEVICE: &str = "/dev/cpu_dma_latency";

/// The idle policy in force; the request lasts as long as this value.
#[derive(Debug)]
pub enum IdlePolicy {
    /// A request of 0 µs is held: idle CPUs poll.
    Poll(File),
    /// The host's default, as asked (`--host-idle`).
    Host,
    /// Polling was asked for but could not be had (why).
    Unavailable(String),
}

impl IdlePolicy {
    /// Holds a 0 µs request if `poll`, else leaves the host's default.
    pub fn hold(poll: bool) -> IdlePolicy {
        if !poll {
            return IdlePolicy::Host;
        }
        let opened = std::fs::OpenOptions::new().write(true).open(QOS_DEVICE);
        // The device takes a 32-bit binary value in native byte order;
        // the request stands until the file is closed.
        match opened.and_then(|mut f| f.write_all(&0i32.to_ne_bytes()).map(|()| f)) {
            Ok(f) => IdlePolicy::Poll(f),
            Err(e) => IdlePolicy::Unavailable(format!("{QOS_DEVICE}: {e}")),
        }
    }

    /// A short name for the result file: `poll`, `host` or `host
    /// (polling unavailable: why)`.
    pub fn describe(&self) -> String {
        match self {
            IdlePolicy::Poll(_) => "poll".to_string(),
            IdlePolicy::Host => "host".to_string(),
            IdlePolicy::Unavailable(why) => format!("host (polling unavailable: {why})"),
        }
    }

    /// The sentence for the report's notes.
    pub fn note(&self) -> String {
        const HALTING: &str =
            "on a VM that halts idle vCPUs the request-reply rates measure wake-ups";
        match self {
            IdlePolicy::Poll(_) => format!(
                "idle CPUs poll: a 0 us CPU latency request is held on {QOS_DEVICE} for the whole run, \
                 for every server alike (a halted vCPU takes tens of microseconds to wake; \
                 --host-idle leaves the host's default)"
            ),
            IdlePolicy::Host => {
                format!("idle CPUs as the host's idle driver decides (--host-idle): {HALTING}")
            }
            IdlePolicy::Unavailable(why) => format!(
                "idle CPUs as the host's idle driver decides: polling could not be held ({why}); {HALTING}"
            ),
        }
    }

    /// Holds the policy `--host-idle` asks for (polling unless given) and
    /// records it in `report`: a note, and the figure `cpu_idle`. Keep the
    /// value for the whole run.
    pub fn hold_for(host_idle: bool, report: &mut Report) -> IdlePolicy {
        let policy = IdlePolicy::hold(!host_idle);
        report.note(policy.note());
        report.figure("cpu_idle", policy.describe());
        policy
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The machine's current CPU latency limit in µs (the least of every
    /// request held), if the device can be read.
    fn current_limit_us() -> Option<i32> {
        let bytes = std::fs::read(QOS_DEVICE).ok()?;
        Some(i32::from_ne_bytes(bytes.get(..4)?.try_into().ok()?))
    }

    #[test]
    fn host_idle_holds_nothing() {
        let policy = IdlePolicy::hold(false);
        assert!(matches!(policy, IdlePolicy::Host));
        assert_eq!(policy.describe(), "host");
    }

    #[test]
    fn polling_is_held_until_dropped_or_says_why_not() {
        match IdlePolicy::hold(true) {
            IdlePolicy::Poll(f) => {
                assert_eq!(current_limit_us(), Some(0), "a held request of 0 us");
                drop(f);
            }
            IdlePolicy::Unavailable(why) => {
                assert!(why.starts_with(QOS_DEVICE), "{why}");
                let described = IdlePolicy::Unavailable(why).describe();
                assert!(described.starts_with("host (polling unavailable: "));
            }
            IdlePolicy::Host => panic!("polling was asked for"),
        }
    }
}
