//! Reading a directive's arguments by its [`Kind`], with Redis's error
//! texts, into the text CONFIG GET shows. Every value is checked here once;
//! what is stored is either this text (directives without effect) or a
//! typed field filled from it (`fields.rs`).

use std::borrow::Cow;

use super::table::{Directive, Kind, Special, Unit, MULTI_ARG};

/// A refusal, worded as Redis words it (without the directive's name).
pub type Refusal = Cow<'static, str>;

/// Where a value comes from: some directives read differently.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// The config file or command line; `first_save` is whether no `save`
    /// line came before (the first one replaces the default, later ones add
    /// to it, as in Redis).
    Startup {
        /// No `save` directive was read yet.
        first_save: bool,
    },
    /// CONFIG SET.
    Runtime,
}

/// Checks `args` for `directive`, given its current text `previous`;
/// returns the new text.
pub fn parse(
    directive: &Directive,
    args: &[String],
    previous: &str,
    source: Source,
) -> Result<String, Refusal> {
    if directive.flags & MULTI_ARG == 0 {
        let [value] = args else {
            return Err(Cow::Borrowed("wrong number of arguments"));
        };
        return single(directive.kind, value);
    }
    match directive.kind {
        Kind::Flags(names) => flags(names, args),
        Kind::Special(special) => multi(special, args, previous, source),
        kind => match args {
            [value] => single(kind, value),
            _ => Err(Cow::Borrowed("wrong number of arguments")),
        },
    }
}

fn single(kind: Kind, value: &str) -> Result<String, Refusal> {
    match kind {
        Kind::Bool => match value.to_ascii_lowercase().as_str() {
            "yes" => Ok("yes".into()),
            "no" => Ok("no".into()),
            _ => Err(Cow::Borrowed("argument must be 'yes' or 'no'")),
        },
        Kind::Num {
            min,
            max,
            signed,
            unit,
        } => number(value, min, max, signed, unit),
        Kind::Enum(names) => names
            .iter()
            .find(|n| n.eq_ignore_ascii_case(value))
            .map(|n| n.to_string())
            .ok_or_else(|| enum_refusal(names)),
        Kind::Flags(names) => flags(names, &[value.to_string()]),
        Kind::Text => Ok(value.to_string()),
        Kind::Special(special) => special_single(special, value),
    }
}

fn enum_refusal(names: &[&str]) -> Refusal {
    Cow::Owned(format!(
        "argument(s) must be one of the following: {}",
        names.join(", ")
    ))
}

/// Reads a size as Redis does: digits then an optional unit (`b`, `k`,
/// `kb`, `m`, `mb`, `g`, `gb`, any case); no sign.
pub fn parse_memory(text: &str) -> Option<u64> {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let (number, unit) = text.split_at(digits);
    let scale: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1_000_000,
        "mb" => 1 << 20,
        "g" => 1_000_000_000,
        "gb" => 1 << 30,
        _ => return None,
    };
    // An empty number reads as 0, as strtoull does.
    let n = if number.is_empty() {
        0
    } else {
        number.parse::<u64>().ok()?
    };
    Some(n.wrapping_mul(scale))
}

fn number(value: &str, min: i64, max: i64, signed: bool, unit: Unit) -> Result<String, Refusal> {
    let parsed: Option<i64> = match unit {
        Unit::Plain => crate::types::number::parse_i64(value.as_bytes()),
        Unit::Memory => parse_memory(value).map(|n| n as i64),
        Unit::MemoryPercent => parse_memory(value).map(|n| n as i64).or_else(|| {
            let digits = value.strip_suffix('%').filter(|d| !d.is_empty())?;
            crate::types::number::parse_i64(digits.as_bytes())
                .filter(|n| *n >= 0)
                .map(|n| -n)
        }),
        Unit::Octal => i64::from_str_radix(value, 8).ok(),
    };
    let Some(n) = parsed else {
        return Err(Cow::Borrowed(match unit {
            Unit::Plain => "argument couldn't be parsed into an integer",
            Unit::Memory => "argument must be a memory value",
            Unit::MemoryPercent => "argument must be a memory or percent value",
            Unit::Octal => "argument couldn't be parsed as an octal number",
        }));
    };
    if !signed {
        let (low, high, un) = (min as u64, max as u64, n as u64);
        if un < low || un > high {
            return Err(Cow::Owned(if unit == Unit::Octal {
                format!("argument must be between {low:o} and {high:o} inclusive")
            } else {
                format!("argument must be between {low} and {high} inclusive")
            }));
        }
    } else if unit == Unit::MemoryPercent && n < 0 {
        if n < min {
            return Err(Cow::Owned(format!(
                "percentage argument must be less or equal to {}",
                -min
            )));
        }
    } else if n < min || n > max {
        return Err(Cow::Owned(format!(
            "argument must be between {min} and {max} inclusive"
        )));
    }
    Ok(render_number(n, signed, unit))
}

/// A number as CONFIG GET shows it.
fn render_number(n: i64, signed: bool, unit: Unit) -> String {
    match unit {
        Unit::MemoryPercent if n < 0 => format!("{}%", n.unsigned_abs()),
        Unit::Memory | Unit::MemoryPercent if !signed => (n as u64).to_string(),
        Unit::Memory | Unit::MemoryPercent => n.to_string(),
        Unit::Octal => format!("{:o}", n as u64),
        Unit::Plain if !signed => (n as u64).to_string(),
        Unit::Plain => n.to_string(),
    }
}

/// A set of flags out of `names` (the first, `default`, is none).
fn flags(names: &[&str], args: &[String]) -> Result<String, Refusal> {
    let mut bits = 0u32;
    for arg in args {
        let at = names
            .iter()
            .position(|n| n.eq_ignore_ascii_case(arg))
            .ok_or_else(|| enum_refusal(names))?;
        if at > 0 {
            bits |= 1 << at;
        }
    }
    let has = |name: &str| {
        names
            .iter()
            .position(|n| *n == name)
            .is_some_and(|at| bits & (1 << at) != 0)
    };
    if has("save") && has("nosave") {
        return Err(Cow::Borrowed(
            "shutdown options SAVE and NOSAVE can't be used simultaneously",
        ));
    }
    if bits == 0 {
        return Ok(names.first().copied().unwrap_or_default().to_string());
    }
    let set: Vec<&str> = names
        .iter()
        .enumerate()
        .filter(|(at, _)| bits & (1 << at) != 0)
        .map(|(_, n)| *n)
        .collect();
    Ok(set.join(" "))
}

fn special_single(special: Special, value: &str) -> Result<String, Refusal> {
    match special {
        Special::Dir => {
            if value.is_empty() {
                return Err(Cow::Borrowed("No such file or directory"));
            }
            Ok(value.to_string())
        }
        Special::NotifyKeyspaceEvents => notify_flags(value),
        Special::CpuList => match crate::cpus::parse(value) {
            Ok(_) => Ok(value.to_string()),
            Err(e) => Err(Cow::Owned(e)),
        },
        _ => multi(special, &[value.to_string()], "", Source::Runtime),
    }
}

fn multi(
    special: Special,
    args: &[String],
    previous: &str,
    source: Source,
) -> Result<String, Refusal> {
    let empty = matches!(args, [only] if only.is_empty());
    match special {
        Special::Save => save(args, empty, previous, source),
        Special::Bind => {
            if args.len() > 16 {
                return Err(Cow::Borrowed("Too many bind addresses specified."));
            }
            Ok(if empty { String::new() } else { args.join(" ") })
        }
        Special::ClientOutputBufferLimit => output_buffer_limits(args, previous),
        Special::OomScoreAdjValues => {
            if args.len() != 3 {
                return Err(Cow::Borrowed("wrong number of arguments"));
            }
            let mut out = Vec::new();
            for a in args {
                match a.parse::<i64>() {
                    Ok(n) if (-2000..=2000).contains(&n) => out.push(n.to_string()),
                    _ => return Err(Cow::Borrowed(
                        "Invalid oom-score-adj-values, elements must be between -2000 and 2000.",
                    )),
                }
            }
            Ok(out.join(" "))
        }
        Special::Replicaof => match args {
            [host, port] if host.eq_ignore_ascii_case("no") && port.eq_ignore_ascii_case("one") => {
                Ok(String::new())
            }
            [host, port] => match port.parse::<u16>() {
                Ok(p) => Ok(format!("{host} {p}")),
                Err(_) => Err(Cow::Borrowed("Invalid master port")),
            },
            _ => Err(Cow::Borrowed("wrong number of arguments")),
        },
        Special::LatencyTrackingInfoPercentiles => {
            if empty || args.is_empty() {
                return Ok(String::new());
            }
            let mut out = Vec::new();
            for a in args {
                let p = crate::types::number::parse_f64(a.as_bytes()).ok_or(Cow::Borrowed(
                    "Invalid latency-tracking-info-percentiles parameters",
                ))?;
                if !(0.0..=100.0).contains(&p) {
                    return Err(Cow::Borrowed(
                        "latency-tracking-info-percentiles parameters should sit between [0.0,100.0]",
                    ));
                }
                out.push(format_percentile(p));
            }
            Ok(out.join(" "))
        }
        Special::Dir | Special::NotifyKeyspaceEvents | Special::CpuList => match args {
            [value] => special_single(special, value),
            _ => Err(Cow::Borrowed("wrong number of arguments")),
        },
    }
}

/// A percentile as Redis prints it: `%f` without trailing zeros (`99.9`,
/// `50`).
pub fn format_percentile(p: f64) -> String {
    let text = format!("{p:.6}");
    let text = text.trim_end_matches('0');
    text.trim_end_matches('.').to_string()
}

fn save(args: &[String], empty: bool, previous: &str, source: Source) -> Result<String, Refusal> {
    let args: &[String] = if empty { &[] } else { args };
    let bad = || Cow::Borrowed("Invalid save parameters");
    if !args.len().is_multiple_of(2) {
        return Err(bad());
    }
    let mut pairs = Vec::new();
    for (at, a) in args.iter().enumerate() {
        let n: i64 = a.parse().map_err(|_| bad())?;
        let least = if at % 2 == 0 { 1 } else { 0 };
        if n < least {
            return Err(bad());
        }
        pairs.push(n.to_string());
    }
    // In the file, `save ""` clears and further lines add; at run time
    // the new value replaces the old.
    let keep_previous = matches!(source, Source::Startup { first_save: false }) && !empty;
    if keep_previous && !previous.is_empty() {
        let mut all = vec![previous.to_string()];
        all.extend(pairs);
        return Ok(all.join(" "));
    }
    Ok(pairs.join(" "))
}

const CLASSES: [&str; 3] = ["normal", "slave", "pubsub"];

fn output_buffer_limits(args: &[String], previous: &str) -> Result<String, Refusal> {
    if !args.len().is_multiple_of(4) {
        return Err(Cow::Borrowed(
            "Wrong number of arguments in buffer limit configuration.",
        ));
    }
    let mut limits: Vec<String> = previous
        .split(' ')
        .collect::<Vec<_>>()
        .chunks(4)
        .map(|c| c[1..].join(" "))
        .collect();
    limits.resize(3, "0 0 0".into());
    for group in args.chunks(4) {
        let class = match group[0].to_ascii_lowercase().as_str() {
            "normal" => 0,
            "slave" | "replica" => 1,
            "pubsub" => 2,
            _ => {
                return Err(Cow::Borrowed(
                    "Invalid client class specified in buffer limit configuration.",
                ))
            }
        };
        let hard = parse_memory(&group[1]);
        let soft = parse_memory(&group[2]);
        let seconds = group[3].parse::<i64>().ok().filter(|s| *s >= 0);
        let (Some(hard), Some(soft), Some(seconds)) = (hard, soft, seconds) else {
            return Err(Cow::Borrowed(
                "Error in hard, soft or soft_seconds setting in buffer limit configuration.",
            ));
        };
        limits[class] = format!("{hard} {soft} {seconds}");
    }
    let out: Vec<String> = CLASSES
        .iter()
        .zip(&limits)
        .map(|(class, l)| format!("{class} {l}"))
        .collect();
    Ok(out.join(" "))
}

/// Keyspace notification classes: the letters Redis accepts, shown in
/// Redis's canonical order (`A` for all the type classes).
fn notify_flags(value: &str) -> Result<String, Refusal> {
    const TYPES: &str = "g$lshzxetd";
    let mut seen = std::collections::BTreeSet::new();
    for c in value.chars() {
        match c {
            'A' => seen.extend(TYPES.chars()),
            'g' | '$' | 'l' | 's' | 'h' | 'z' | 'x' | 'e' | 'K' | 'E' | 't' | 'm' | 'd' | 'n' => {
                seen.insert(c);
            }
            _ => {
                return Err(Cow::Borrowed(
                    "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.",
                ))
            }
        }
    }
    let mut out = String::new();
    if TYPES.chars().all(|c| seen.contains(&c)) {
        out.push('A');
    } else {
        out.extend("g$lshzxetdn".chars().filter(|c| seen.contains(c)));
    }
    out.extend("KEm".chars().filter(|c| seen.contains(c)));
    Ok(out)
}
