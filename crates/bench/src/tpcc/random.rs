//! TPC-C's random input rules (clause 2.1.6 and 4.3.2): NURand, random
//! strings, customer last names.

/// The syllables of customer last names (clause 4.3.2.3).
const SYLLABLES: [&str; 10] = [
    "BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING",
];

/// The run-time constants C of NURand (clause 2.1.6): one set for the load,
/// one for the run, with the C_LAST delta the spec requires.
#[derive(Clone, Copy, Debug)]
pub struct Constants {
    pub c_last: u64,
    pub c_id: u64,
    pub ol_i_id: u64,
}

impl Constants {
    /// Constants for loading.
    pub fn for_load(rng: &mut fastrand::Rng) -> Constants {
        Constants {
            c_last: rng.u64(..256),
            c_id: rng.u64(..1024),
            ol_i_id: rng.u64(..8192),
        }
    }

    /// Constants for the run: C_ID and OL_I_ID are the load's, C_LAST
    /// differs from the load's by 65..=119 but not 96 or 112 (2.1.6.1).
    pub fn for_run(load: Constants, rng: &mut fastrand::Rng) -> Constants {
        let delta = loop {
            let d = 65 + rng.u64(..55);
            if d != 96 && d != 112 {
                break d;
            }
        };
        Constants {
            c_last: (load.c_last + delta) % 256,
            ..load
        }
    }
}

/// The workload's random source.
#[derive(Debug)]
pub struct Rand {
    rng: fastrand::Rng,
    pub constants: Constants,
}

impl Rand {
    pub fn new(seed: u64, constants: Constants) -> Rand {
        Rand {
            rng: fastrand::Rng::with_seed(seed),
            constants,
        }
    }

    /// Uniform in `[lo, hi]`.
    pub fn uniform(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.rng.u64(..(hi - lo + 1).max(1))
    }

    /// Uniform float in `[lo, hi]` with two decimals.
    pub fn money(&mut self, lo: f64, hi: f64) -> f64 {
        let cents = self.uniform((lo * 100.0) as u64, (hi * 100.0) as u64);
        cents as f64 / 100.0
    }

    /// NURand(A, x, y) = (((random(0, A) | random(x, y)) + C) % (y - x + 1)) + x.
    pub fn nurand(&mut self, a: u64, x: u64, y: u64) -> u64 {
        let c = match a {
            255 => self.constants.c_last,
            1023 => self.constants.c_id,
            _ => self.constants.ol_i_id,
        };
        (((self.uniform(0, a) | self.uniform(x, y)) + c) % (y - x + 1)) + x
    }

    /// A customer id by the spec's non-uniform rule.
    pub fn customer_id(&mut self) -> u64 {
        self.nurand(1023, 1, 3000)
    }

    /// An item id by the spec's non-uniform rule.
    pub fn item_id(&mut self) -> u64 {
        self.nurand(8191, 1, 100_000)
    }

    /// A last name for a run-time lookup.
    pub fn last_name(&mut self) -> String {
        let n = self.nurand(255, 0, 999);
        last_name(n)
    }

    /// A last name for customers 1001..3000 at load time (NURand with the
    /// load's C_LAST).
    pub fn last_name_for_load(&mut self) -> String {
        self.last_name()
    }

    /// Random alphanumeric string of length in `[lo, hi]` (a-string).
    pub fn astring(&mut self, lo: u64, hi: u64) -> String {
        const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
        let len = self.uniform(lo, hi);
        (0..len)
            .map(|_| CHARS[self.rng.u64(..(CHARS.len() as u64).max(1)) as usize] as char)
            .collect()
    }

    /// Random digit string of length in `[lo, hi]` (n-string).
    pub fn nstring(&mut self, lo: u64, hi: u64) -> String {
        let len = self.uniform(lo, hi);
        (0..len)
            .map(|_| char::from(b'0' + self.rng.u64(..10) as u8))
            .collect()
    }

    /// A zip code: four random digits then "11111".
    pub fn zip(&mut self) -> String {
        format!("{}11111", self.nstring(4, 4))
    }

    /// I_DATA / S_DATA: 26..50 chars, 10% with "ORIGINAL" somewhere.
    pub fn data_with_original(&mut self) -> String {
        let mut data = self.astring(26, 50);
        if self.uniform(1, 10) == 1 {
            let at = self.uniform(0, data.len() as u64 - 8) as usize;
            data.replace_range(at..at + 8, "ORIGINAL");
        }
        data
    }

    /// Percent check: true with probability `percent`/100.
    pub fn percent(&mut self, percent: u64) -> bool {
        self.uniform(1, 100) <= percent
    }

    /// A random permutation of `1..=n`.
    pub fn permutation(&mut self, n: u64) -> Vec<u64> {
        let mut v: Vec<u64> = (1..=n).collect();
        for i in (1..v.len()).rev() {
            let j = self.rng.u64(..(i as u64 + 1).max(1)) as usize;
            v.swap(i, j);
        }
        v
    }
}

/// The last name of number `n` in `0..1000` (three syllables by digit).
pub fn last_name(n: u64) -> String {
    let n = n % 1000;
    [n / 100, (n / 10) % 10, n % 10]
        .iter()
        .map(|&d| SYLLABLES[d as usize])
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_names_follow_the_syllable_table() {
        assert_eq!(last_name(0), "BARBARBAR");
        assert_eq!(last_name(371), "PRICALLYOUGHT");
        assert_eq!(last_name(999), "EINGEINGEING");
    }

    #[test]
    fn nurand_stays_in_range_and_run_c_last_delta_is_legal() {
        let mut seed = fastrand::Rng::with_seed(1);
        let load = Constants::for_load(&mut seed);
        for _ in 0..100 {
            let run = Constants::for_run(load, &mut seed);
            let delta = (run.c_last + 256 - load.c_last) % 256;
            assert!((65..=119).contains(&delta) && delta != 96 && delta != 112);
        }
        let mut r = Rand::new(7, load);
        for _ in 0..10_000 {
            assert!((1..=3000).contains(&r.customer_id()));
            assert!((1..=100_000).contains(&r.item_id()));
        }
    }
}
