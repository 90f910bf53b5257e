//! INFO's `instantaneous_*` figures: rates over the last moments rather
//! than since start, as monitoring tools plot them.
//!
//! As Redis does, each rate is the mean of the last [`SAMPLES`] samples,
//! one taken every [`SAMPLE_PERIOD`] by the timer: a sample is the
//! counter's growth since the previous sample over the time between them,
//! per second. The figure thus covers about the last 1.6 seconds, and an
//! idle server reads 0 within that time.

use std::time::{Duration, Instant};

/// Samples averaged into one figure.
pub const SAMPLES: usize = 16;
/// The shortest time between two samples.
pub const SAMPLE_PERIOD: Duration = Duration::from_millis(100);

/// One counter's recent rate.
#[derive(Clone, Debug, Default)]
pub struct Rate {
    /// Per-second rates of the last samples (a ring).
    samples: [f64; SAMPLES],
    /// Where the next sample goes.
    next: usize,
    /// The counter and the time at the previous sample.
    last: Option<(u64, Instant)>,
}

impl Rate {
    /// Takes a sample of `counter` at `now`. The first call only sets the
    /// starting point. A counter that went down (CONFIG RESETSTAT) counts
    /// as a sample of 0.
    pub fn sample(&mut self, counter: u64, now: Instant) {
        if let Some((before, at)) = self.last {
            let elapsed = now.saturating_duration_since(at).as_secs_f64();
            let rate = if elapsed > 0.0 {
                counter.saturating_sub(before) as f64 / elapsed
            } else {
                0.0
            };
            self.samples[self.next] = rate;
            self.next = (self.next + 1) % SAMPLES;
        }
        self.last = Some((counter, now));
    }

    /// The mean of the samples, per second.
    pub fn per_second(&self) -> f64 {
        self.samples.iter().sum::<f64>() / SAMPLES as f64
    }
}

/// The rates INFO stats reports.
#[derive(Clone, Debug, Default)]
pub struct Instantaneous {
    /// Commands processed.
    pub ops: Rate,
    /// Bytes read from clients.
    pub input_bytes: Rate,
    /// Bytes written to clients.
    pub output_bytes: Rate,
    /// When the last sample was taken.
    last: Option<Instant>,
}

impl Instantaneous {
    /// Samples every rate if [`SAMPLE_PERIOD`] has passed since the last
    /// time; called from the timer, which may tick faster (`hz`).
    pub fn tick(&mut self, stats: &crate::state::Stats, now: Instant) {
        if self
            .last
            .is_some_and(|at| now.saturating_duration_since(at) < SAMPLE_PERIOD)
        {
            return;
        }
        self.last = Some(now);
        self.ops.sample(stats.commands_processed, now);
        self.input_bytes.sample(stats.net_input_bytes, now);
        self.output_bytes.sample(stats.net_output_bytes, now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_is_the_mean_of_the_last_samples() {
        let t0 = Instant::now();
        let mut rate = Rate::default();
        rate.sample(0, t0);
        assert_eq!(rate.per_second(), 0.0, "one point is no sample");
        // 100 more every 100 ms: 1000 a second once the ring is full.
        for i in 1..=SAMPLES as u64 {
            rate.sample(i * 100, t0 + SAMPLE_PERIOD * i as u32);
        }
        assert!((rate.per_second() - 1000.0).abs() < 1e-6);
        // Idle for a whole ring: back to 0.
        let end = SAMPLES as u64 * 100;
        for i in 1..=SAMPLES as u32 {
            rate.sample(end, t0 + SAMPLE_PERIOD * (SAMPLES as u32 + i));
        }
        assert_eq!(rate.per_second(), 0.0);
    }

    #[test]
    fn a_reset_counter_reads_as_no_growth() {
        let t0 = Instant::now();
        let mut rate = Rate::default();
        rate.sample(500, t0);
        rate.sample(10, t0 + SAMPLE_PERIOD);
        assert_eq!(rate.per_second(), 0.0);
    }

    #[test]
    fn ticks_closer_than_the_period_take_no_sample() {
        let t0 = Instant::now();
        let mut stats = crate::state::Stats::default();
        let mut metrics = Instantaneous::default();
        metrics.tick(&stats, t0);
        stats.commands_processed = 1600;
        metrics.tick(&stats, t0 + Duration::from_millis(10));
        assert_eq!(metrics.ops.per_second(), 0.0);
        metrics.tick(&stats, t0 + SAMPLE_PERIOD);
        assert!((metrics.ops.per_second() - 1000.0).abs() < 1e-6);
    }
}
