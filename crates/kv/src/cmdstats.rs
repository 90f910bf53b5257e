//! Per-command counters for INFO commandstats, errorstats and
//! latencystats: calls, time, rejections and failures per command (and
//! per subcommand, `config|get`), error replies per error code, and a
//! latency histogram per command.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

/// Most distinct error codes errorstats tracks, as in Redis; further codes
/// are counted in `total_error_replies` only.
const ERROR_CODES_MAX: usize = 128;

/// Exact buckets below this many nanoseconds; above, each power of two is
/// split into this many buckets (about 1.6% precision).
const SUB_BUCKETS: u64 = 64;
/// Latencies are clamped to 1 ns..1 s, as Redis clamps them.
const LATENCY_MAX_NS: u64 = 1_000_000_000;

/// A latency histogram in nanoseconds with log-linear buckets.
#[derive(Clone, Debug, Default)]
pub struct Histogram {
    buckets: Vec<u64>,
    count: u64,
}

fn bucket_of(ns: u64) -> usize {
    if ns < SUB_BUCKETS {
        return ns as usize;
    }
    let power = 63 - u64::from(ns.leading_zeros()); // >= 6
    let shift = power - 6;
    let sub = (ns >> shift) - SUB_BUCKETS;
    (SUB_BUCKETS + (power - 6) * SUB_BUCKETS + sub) as usize
}

/// The highest value that falls in bucket `index`.
fn bucket_top(index: usize) -> u64 {
    let index = index as u64;
    if index < SUB_BUCKETS {
        return index;
    }
    let shift = (index - SUB_BUCKETS) / SUB_BUCKETS;
    let sub = (index - SUB_BUCKETS) % SUB_BUCKETS;
    ((SUB_BUCKETS + sub + 1) << shift) - 1
}

impl Histogram {
    /// Records one latency.
    pub fn record(&mut self, elapsed: Duration) {
        let ns = (elapsed.as_nanos().min(u128::from(LATENCY_MAX_NS)) as u64).max(1);
        let at = bucket_of(ns);
        if self.buckets.len() <= at {
            self.buckets.resize(at + 1, 0);
        }
        self.buckets[at] += 1;
        self.count += 1;
    }

    /// The latency in nanoseconds at percentile `p` (0 to 100).
    pub fn percentile_ns(&self, p: f64) -> u64 {
        let wanted = ((p / 100.0) * self.count as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (at, n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= wanted {
                return bucket_top(at);
            }
        }
        0
    }

    /// Latencies recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// LATENCY HISTOGRAM's view: for each power-of-two bucket from 1024 ns
    /// on (1024, 2048, 4096... as Redis's histogram iterates), its highest
    /// value in whole microseconds (`(edge - 1) / 1000`: 1, 2, 4... 32,
    /// 65, 131...) and how many latencies fell at or below it, for the
    /// buckets where that count grew. The fine buckets split every power
    /// of two exactly, so the counts are exact.
    pub fn power_of_two_cdf(&self) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let mut previous = 0;
        let mut edge = 1024u64;
        while previous < self.count && edge <= 2 * LATENCY_MAX_NS {
            let below: u64 = self
                .buckets
                .iter()
                .enumerate()
                .take_while(|&(at, _)| bucket_top(at) < edge)
                .map(|(_, n)| n)
                .sum();
            if below > previous {
                out.push(((edge - 1) / 1000, below));
                previous = below;
            }
            edge *= 2;
        }
        out
    }
}

/// One command's counters.
#[derive(Clone, Debug, Default)]
pub struct CommandStats {
    /// Calls that ran.
    pub calls: u64,
    /// Microseconds spent in them.
    pub usec: u64,
    /// Calls refused before running (arity, OOM, MISCONF, NOAUTH...).
    pub rejected_calls: u64,
    /// Calls that ran and replied with an error.
    pub failed_calls: u64,
    /// Latencies, while `latency-tracking` is on.
    pub latency: Histogram,
}

/// A command's name: the command, and the subcommand or "".
pub type CommandName = (&'static str, &'static str);

/// Where a name's two strings are: their addresses and lengths. Equal
/// places mean equal text, so a lookup by place compares no bytes.
type NamePlace = (usize, usize, usize, usize);

fn place_of(name: CommandName) -> NamePlace {
    (
        name.0.as_ptr() as usize,
        name.0.len(),
        name.1.as_ptr() as usize,
        name.1.len(),
    )
}

/// Every counter INFO's commandstats, errorstats and latencystats show.
#[derive(Clone, Debug, Default)]
pub struct CommandTable {
    /// Per command, in the order each was first counted.
    entries: Vec<(CommandName, CommandStats)>,
    /// Where each name's counters are in `entries`, by the place of its
    /// strings. Every command counts itself at least once (a script's
    /// calls too), and the names are the command table's own static
    /// strings, so this hashes four words and compares no text: a map by
    /// the names' text cost 4% of a pipelined command's cycles, in
    /// SipHash and `memcmp`. A name given through other strings of the
    /// same text is found by its text once, then by its place too.
    by_place: HashMap<NamePlace, usize, foldhash::fast::FixedState>,
    /// Error replies per code (`ERR`, `WRONGTYPE`...).
    pub errors: BTreeMap<String, u64>,
    /// Every error reply.
    pub error_replies: u64,
}

impl CommandTable {
    /// The counters of `name`.
    pub fn of(&mut self, name: CommandName) -> &mut CommandStats {
        let place = place_of(name);
        let at = match self.by_place.get(&place) {
            Some(&at) => at,
            None => {
                let at = match self.entries.iter().position(|(n, _)| *n == name) {
                    Some(at) => at,
                    None => {
                        self.entries.push((name, CommandStats::default()));
                        self.entries.len() - 1
                    }
                };
                self.by_place.insert(place, at);
                at
            }
        };
        // `by_place` holds only positions of `entries`, which only grows
        // (a reset replaces the whole table).
        &mut self.entries[at].1
    }

    /// The counters of `name`, if it was ever counted.
    pub fn get(&self, name: CommandName) -> Option<&CommandStats> {
        match self.by_place.get(&place_of(name)) {
            Some(&at) => self.entries.get(at).map(|(_, s)| s),
            None => self
                .entries
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, s)| s),
        }
    }

    /// Counts an error reply by its code, the text before the first space
    /// (`ERR` when there is none in the first 32 bytes, as Redis does).
    pub fn error(&mut self, text: &str) {
        self.error_replies += 1;
        let head = &text.as_bytes()[..text.len().min(32)];
        let code = match head.iter().position(|&b| b == b' ') {
            Some(at) => &text[..at],
            None => "ERR",
        };
        if let Some(n) = self.errors.get_mut(code) {
            *n += 1;
        } else if self.errors.len() < ERROR_CODES_MAX {
            self.errors.insert(code.to_string(), 1);
        }
    }

    /// Commands by their INFO name (`set`, `config|get`), sorted.
    pub fn sorted(&self) -> Vec<(String, &CommandStats)> {
        let mut out: Vec<(String, &CommandStats)> = self
            .entries
            .iter()
            .map(|((name, sub), s)| {
                let label = if sub.is_empty() {
                    name.to_string()
                } else {
                    format!("{name}|{sub}")
                };
                (label, s)
            })
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_each_value_once_and_in_order() {
        let mut last_top = 0;
        for ns in 1..200_000u64 {
            let at = bucket_of(ns);
            assert!(bucket_top(at) >= ns, "{ns}");
            if at > 0 {
                assert!(bucket_top(at - 1) < ns, "{ns}");
            }
            assert!(bucket_top(at) >= last_top);
            last_top = bucket_top(at);
        }
        let at = bucket_of(LATENCY_MAX_NS);
        let top = bucket_top(at);
        assert!(top >= LATENCY_MAX_NS && (top - LATENCY_MAX_NS) * 50 < LATENCY_MAX_NS);
    }

    #[test]
    fn the_power_of_two_view_counts_each_latency_once() {
        let mut h = Histogram::default();
        for ns in [1, 500, 1023, 1024, 70_000, 70_000, 999_999_999] {
            h.record(Duration::from_nanos(ns));
        }
        assert_eq!(
            h.power_of_two_cdf(),
            vec![(1, 3), (2, 4), (131, 6), (1_073_741, 7)]
        );
        assert!(Histogram::default().power_of_two_cdf().is_empty());
    }

    #[test]
    fn percentiles_read_the_histogram() {
        let mut h = Histogram::default();
        for us in 1..=100u64 {
            h.record(Duration::from_micros(us));
        }
        let p50 = h.percentile_ns(50.0);
        assert!((50_000..=51_000).contains(&p50), "{p50}");
        let p100 = h.percentile_ns(100.0);
        assert!((100_000..=102_000).contains(&p100), "{p100}");
        assert_eq!(h.percentile_ns(0.0), h.percentile_ns(1.0));
    }

    #[test]
    fn error_codes_are_the_first_word() {
        let mut t = CommandTable::default();
        t.error("ERR syntax error");
        t.error("WRONGTYPE Operation against a key");
        t.error("NOSPACEATALLINTHISERRORTEXTWHICHISLONG");
        assert_eq!(t.errors.get("ERR"), Some(&2));
        assert_eq!(t.errors.get("WRONGTYPE"), Some(&1));
        assert_eq!(t.error_replies, 3);
    }
}
