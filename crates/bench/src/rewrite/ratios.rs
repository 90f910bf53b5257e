//! The rewrite experiment's statistics: medians over runs and the issue's
//! ratios, with their targets.

use std::collections::BTreeMap;

use serde_json::json;

use super::{Medians, RunsByConfig, FERRITE};
use crate::report::{median, median_ratio, Report};

pub(super) fn medians(runs: &RunsByConfig) -> Medians {
    runs.iter()
        .map(|(label, list)| {
            let mut keys: Vec<&String> = list.iter().flat_map(|m| m.keys()).collect();
            keys.sort();
            keys.dedup();
            let figures = keys
                .into_iter()
                .map(|k| {
                    let values: Vec<f64> = list.iter().filter_map(|m| m.get(k)).copied().collect();
                    (k.clone(), median(&values))
                })
                .collect();
            (label.clone(), figures)
        })
        .collect()
}

/// One ratio: its key, numerator and denominator as (configuration,
/// figure), the target (NaN: none) and whether lower is the goal.
type RatioSpec = (
    &'static str,
    (&'static str, &'static str),
    (&'static str, &'static str),
    f64,
    bool,
);

const RP: &str = "redis_preamble";
const RA: &str = "redis_aof";

/// The ratios, Ferrite/Redis unless named `_vs_own_`.
const RATIOS: [RatioSpec; 12] = [
    (
        "duration_vs_redis_preamble",
        (FERRITE, "rewrite_ms"),
        (RP, "rewrite_ms"),
        0.5,
        true,
    ),
    (
        "duration_t1_vs_redis_preamble",
        ("ferrite_t1", "rewrite_ms"),
        (RP, "rewrite_ms"),
        f64::NAN,
        true,
    ),
    (
        "duration_vs_redis_aof",
        (FERRITE, "rewrite_ms"),
        (RA, "rewrite_ms"),
        f64::NAN,
        true,
    ),
    (
        "throughput_during_vs_redis",
        (FERRITE, "during_ops"),
        (RP, "during_ops"),
        1.8,
        false,
    ),
    (
        "throughput_during_vs_redis_aof",
        (FERRITE, "during_ops"),
        (RA, "during_ops"),
        f64::NAN,
        false,
    ),
    (
        "throughput_during_vs_own_steady",
        (FERRITE, "during_ops"),
        (FERRITE, "steady_ops"),
        0.9,
        false,
    ),
    (
        "p99_during_vs_redis",
        (FERRITE, "during_p99_us"),
        (RP, "during_p99_us"),
        f64::NAN,
        true,
    ),
    (
        "peak_memory_vs_redis",
        (FERRITE, "peak_memory_bytes"),
        (RP, "peak_memory_bytes"),
        0.6,
        true,
    ),
    (
        "peak_memory_vs_redis_aof",
        (FERRITE, "peak_memory_bytes"),
        (RA, "peak_memory_bytes"),
        f64::NAN,
        true,
    ),
    (
        "peak_memory_vs_own_steady",
        (FERRITE, "peak_memory_bytes"),
        (FERRITE, "steady_memory_bytes"),
        1.15,
        true,
    ),
    (
        "recovery_vs_redis_preamble",
        (FERRITE, "recovery_ms"),
        (RP, "recovery_ms"),
        1.0,
        true,
    ),
    (
        "recovery_vs_redis_aof",
        (FERRITE, "recovery_ms"),
        (RA, "recovery_ms"),
        f64::NAN,
        true,
    ),
];

/// One ratio's value: for a configuration against itself (`_vs_own_`), the
/// median over runs of each run's ratio, since both figures come from the
/// same run; across configurations, which run in turn, the ratio of their
/// medians.
fn ratio_value(m: &Medians, runs: &RunsByConfig, num: (&str, &str), den: (&str, &str)) -> f64 {
    if num.0 != den.0 {
        return of_medians(m, num, den);
    }
    let list = runs.get(num.0).map_or(&[][..], |list| &list[..]);
    median_ratio(
        list.iter()
            .filter_map(|f| Some((*f.get(num.1)?, *f.get(den.1)?))),
    )
}

fn of_medians(m: &Medians, num: (&str, &str), den: (&str, &str)) -> f64 {
    let get = |(label, key): (&str, &str)| {
        m.get(label)
            .and_then(|f| f.get(key))
            .copied()
            .unwrap_or(f64::NAN)
    };
    get(num) / get(den)
}

/// Records the ratios of one dataset (unsuffixed too for the first one),
/// whether each meets the target, and every ratio of medians.
pub(super) fn record_ratios(
    report: &mut Report,
    m: &Medians,
    runs: &RunsByConfig,
    name: &str,
    first: bool,
) {
    let mut targets = BTreeMap::new();
    let mut medians_only = BTreeMap::new();
    for &(key, num, den, target, lower) in &RATIOS {
        let value = ratio_value(m, runs, num, den);
        medians_only.insert(key, of_medians(m, num, den));
        report.ratio(format!("{key}_{name}"), value);
        if first {
            report.ratio(key, value);
        }
        if target.is_finite() {
            let met = if lower {
                value <= target
            } else {
                value >= target
            };
            targets.insert(
                key,
                json!({"value": value, "target": target, "lower_is_better": lower, "met": met}),
            );
        }
    }
    report.figure(format!("targets_{name}"), &targets);
    report.figure(format!("ratios_of_medians_{name}"), &medians_only);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_ratios_pair_runs_and_cross_ratios_take_medians() {
        let run = |steady: f64, during: f64| {
            BTreeMap::from([
                ("steady_ops".to_string(), steady),
                ("during_ops".to_string(), during),
            ])
        };
        // Per-run during/steady 0.9, 0.5, 1.0: median 0.9, while the
        // medians' ratio is 40 / 40 = 1.0.
        let mut runs = RunsByConfig::new();
        runs.insert(
            FERRITE.into(),
            vec![run(40.0, 36.0), run(60.0, 30.0), run(20.0, 20.0)],
        );
        runs.insert("other".into(), vec![run(10.0, 10.0), run(10.0, 20.0)]);
        let m = medians(&runs);
        let own = ratio_value(&m, &runs, (FERRITE, "during_ops"), (FERRITE, "steady_ops"));
        assert!((own - 0.9).abs() < 1e-12, "{own}");
        let cross = ratio_value(&m, &runs, (FERRITE, "during_ops"), ("other", "during_ops"));
        assert!((cross - 30.0 / 15.0).abs() < 1e-12, "{cross}");
        assert!(ratio_value(&m, &runs, ("missing", "a"), ("missing", "b")).is_nan());
    }
}
