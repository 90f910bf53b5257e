//! Numbers inside strings, with Redis's strictness: what INCR accepts, what
//! INCRBYFLOAT prints, how scores and ranges parse.

pub use crate::resp::parser::parse_i64;

/// Longest string Redis tries to read as a number, in bytes.
const NUMBER_LEN_MAX_BYTES: usize = 5 * 1024;

/// Parses a float like Redis's `string2ld`/`strtod` use in commands: decimal
/// or exponent notation, `inf`/`-inf`/`+inf`, no spaces, never NaN.
pub fn parse_f64(text: &[u8]) -> Option<f64> {
    if text.is_empty() || text.len() > NUMBER_LEN_MAX_BYTES {
        return None;
    }
    if text[0].is_ascii_whitespace() || text[text.len() - 1].is_ascii_whitespace() {
        return None;
    }
    let s = std::str::from_utf8(text).ok()?;
    let lower = s.to_ascii_lowercase();
    let value = match lower.as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => f64::INFINITY,
        "-inf" | "-infinity" => f64::NEG_INFINITY,
        _ => {
            // Rust accepts "nan" and "infinity" spellings that strtod-based
            // Redis treats differently; only digits, signs, dots and
            // exponents get here.
            if !lower
                .bytes()
                .all(|b| b.is_ascii_digit() || matches!(b, b'+' | b'-' | b'.' | b'e'))
            {
                return None;
            }
            lower.parse::<f64>().ok()?
        }
    };
    (!value.is_nan()).then_some(value)
}

/// Formats the result of INCRBYFLOAT/HINCRBYFLOAT: plain decimal, no
/// exponent, no trailing zeros (Redis's "human friendly" long double).
pub fn format_float_human(value: f64) -> String {
    // Rust's Display never uses an exponent and prints the shortest text
    // that reads back to the same double, which is what this needs; Redis
    // prints at most 17 digits after the point (`%.17Lf`), so a longer
    // fraction is rounded there and its trailing zeros dropped.
    if value == 0.0 {
        // Redis prints a negative zero as 0.
        return "0".to_string();
    }
    let text = format!("{value}");
    match text.split_once('.') {
        Some((_, fraction)) if fraction.len() > 17 => {
            let rounded = format!("{value:.17}");
            let trimmed = rounded.trim_end_matches('0').trim_end_matches('.');
            match trimmed {
                "-0" => "0".to_string(),
                other => other.to_string(),
            }
        }
        _ => text,
    }
}

/// Reads a string value as an integer for INCR and friends.
pub fn value_as_i64(text: &[u8]) -> Option<i64> {
    if text.len() > 20 {
        return None;
    }
    parse_i64(text)
}

/// Clamps a Redis-style index (negative counts from the end) to `0..len`;
/// returns `None` for an empty range.
pub fn normalize_range(start: i64, stop: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i64;
    let mut start = if start < 0 { len + start } else { start };
    let mut stop = if stop < 0 { len + stop } else { stop };
    if start < 0 {
        start = 0;
    }
    if stop >= len {
        stop = len - 1;
    }
    if start > stop || start >= len || len == 0 {
        return None;
    }
    if stop < 0 {
        stop = 0;
    }
    Some((start as usize, stop as usize))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats() {
        assert_eq!(parse_f64(b"1.5"), Some(1.5));
        assert_eq!(parse_f64(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_f64(b"1e3"), Some(1000.0));
        assert_eq!(parse_f64(b"nan"), None);
        assert_eq!(parse_f64(b" 1"), None);
        assert_eq!(parse_f64(b"abc"), None);
        assert_eq!(format_float_human(10.5), "10.5");
        assert_eq!(format_float_human(3.0e3), "3000");
        assert_eq!(format_float_human(1.9), "1.9");
        assert_eq!(format_float_human(1e-20), "0");
        assert_eq!(format_float_human(-1e-20), "0");
        assert_eq!(format_float_human(-0.0), "0");
        assert_eq!(format_float_human(1.5e-7), "0.00000015");
    }

    #[test]
    fn ranges() {
        assert_eq!(normalize_range(0, -1, 3), Some((0, 2)));
        assert_eq!(normalize_range(-100, 100, 3), Some((0, 2)));
        assert_eq!(normalize_range(2, 1, 3), None);
        assert_eq!(normalize_range(0, -1, 0), None);
        assert_eq!(normalize_range(5, 10, 3), None);
    }
}
