//! The x87 80-bit `long double` that Redis 7.0's INCRBYFLOAT computes in
//! (on x86-64 Linux): a 64-bit significand, exponents down to 2^-16445
//! (subnormals included) and up to 2^16384, round-half-to-even. Parsing
//! follows glibc's `strtold` as Redis's `string2ld` filters it, and
//! [`LongDouble::to_human`] prints as Redis's `LD_STR_HUMAN` does
//! (`%.17Lf`, then trailing zeros cut). Exact big-integer arithmetic makes
//! every step correctly rounded, like the hardware and glibc.
//!
//! ```
//! use ferrite_kv::types::long_double::LongDouble;
//! let a = LongDouble::parse(b"3.0").unwrap();
//! let b = LongDouble::parse(b"1.23456789012345678").unwrap();
//! assert_eq!(a.add(b).to_human(), "4.23456789012345678");
//! ```

use num_bigint::BigUint;

/// Significand bits.
const SIGNIFICAND_BITS: u64 = 64;
/// The exponent of the lowest subnormal's unit bit.
const UNIT_EXP_MIN: i64 = -16445;
/// The largest exponent a 64-bit significand's unit bit may have.
const UNIT_EXP_MAX: i64 = 16383 - 63;
/// Longest accepted text, as Redis's `MAX_LONG_DOUBLE_CHARS` buffer.
const TEXT_LEN_MAX: usize = 5 * 1024;

/// A finite or infinite value: `±significand * 2^exponent`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LongDouble {
    /// A finite value (zero has a zero significand).
    Finite {
        negative: bool,
        significand: u64,
        exponent: i64,
    },
    /// Plus or minus infinity.
    Infinite { negative: bool },
}

/// Rounds `magnitude * 2^exponent` (plus a non-zero tail below it when
/// `sticky`) to the nearest value with a 64-bit significand.
fn round(negative: bool, magnitude: BigUint, exponent: i64, sticky: bool) -> LongDouble {
    let bits = magnitude.bits() as i64;
    let shift = (bits - SIGNIFICAND_BITS as i64)
        .max(UNIT_EXP_MIN - exponent)
        .max(0);
    let (mut kept, mut exponent) = (magnitude.clone() >> shift as usize, exponent + shift);
    if shift > 0 {
        let dropped = magnitude - (kept.clone() << shift as usize);
        let half = BigUint::from(1u8) << (shift - 1) as usize;
        let up = dropped > half || (dropped == half && (sticky || kept.bit(0)));
        if up {
            kept += 1u8;
            if kept.bits() > SIGNIFICAND_BITS {
                kept >>= 1usize;
                exponent += 1;
            }
        }
    }
    if kept.bits() == 0 {
        return LongDouble::Finite {
            negative,
            significand: 0,
            exponent: 0,
        };
    }
    // The unit bit's exponent, with the significand's top bit at 63.
    let top = exponent + kept.bits() as i64 - 1;
    if top - 63 > UNIT_EXP_MAX {
        return LongDouble::Infinite { negative };
    }
    let significand = kept.iter_u64_digits().next().unwrap_or(0);
    LongDouble::Finite {
        negative,
        significand,
        exponent,
    }
}

/// Digits of `text` in `radix`, with an optional point: the integer they
/// spell and how many came after the point; `None` if there are none.
fn digits(text: &[u8], radix: u32) -> Option<(BigUint, i64)> {
    let mut value = BigUint::from(0u8);
    let (mut fraction, mut any, mut point) = (0i64, false, false);
    for &c in text {
        if c == b'.' && !point {
            point = true;
            continue;
        }
        let d = char::from(c).to_digit(radix)?;
        value = value * radix + d;
        any = true;
        if point {
            fraction += 1;
        }
    }
    any.then_some((value, fraction))
}

/// A decimal exponent's digits, clamped (the value is then far out of
/// range anyway).
fn exponent_value(text: &[u8]) -> Option<i64> {
    let (negative, digits) = match text.first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n = digits
        .iter()
        .fold(0i64, |n, d| (n * 10 + i64::from(d - b'0')).min(1 << 40));
    Some(if negative { -n } else { n })
}

/// Splits `text` at the first `marker` (either case) into mantissa and
/// exponent.
fn split_exponent(text: &[u8], marker: u8) -> (&[u8], Option<&[u8]>) {
    match text.iter().position(|c| c.to_ascii_lowercase() == marker) {
        Some(at) => (&text[..at], Some(&text[at + 1..])),
        None => (text, None),
    }
}

/// `value * 10^power` rounded; `None` out of range (ERANGE in C).
fn from_decimal(negative: bool, value: BigUint, power: i64) -> Option<LongDouble> {
    let digits = value.to_string().len() as i64;
    // Far outside 1e-4951..1e4933 the result is zero or infinite.
    if digits + power > 4940 {
        return None;
    }
    if digits + power < -4970 {
        return None;
    }
    let rounded = if power >= 0 {
        round(
            negative,
            value * BigUint::from(10u8).pow(power as u32),
            0,
            false,
        )
    } else {
        let divisor = BigUint::from(10u8).pow((-power) as u32);
        let scale = (divisor.bits() as i64 - value.bits() as i64 + 66).max(0);
        let scaled = value << scale as usize;
        let quotient = &scaled / &divisor;
        let sticky = quotient.clone() * &divisor != scaled;
        round(negative, quotient, -scale, sticky)
    };
    Some(rounded)
}

impl LongDouble {
    /// Zero.
    pub const ZERO: LongDouble = LongDouble::Finite {
        negative: false,
        significand: 0,
        exponent: 0,
    };

    /// Parses a number as Redis's `string2ld` accepts it: `strtold`'s
    /// decimal, hexadecimal and infinity forms, the whole text, no leading
    /// space, no NaN, nothing that overflows or underflows to zero.
    pub fn parse(text: &[u8]) -> Option<LongDouble> {
        if text.is_empty() || text.len() >= TEXT_LEN_MAX {
            return None;
        }
        let (negative, body) = match text[0] {
            b'-' => (true, &text[1..]),
            b'+' => (false, &text[1..]),
            _ => (false, text),
        };
        if body.eq_ignore_ascii_case(b"inf") || body.eq_ignore_ascii_case(b"infinity") {
            return Some(LongDouble::Infinite { negative });
        }
        let hex = body.len() > 2 && body[0] == b'0' && body[1].eq_ignore_ascii_case(&b'x');
        let (text, radix, marker) = if hex {
            (&body[2..], 16, b'p')
        } else {
            (body, 10, b'e')
        };
        let (mantissa, power) = split_exponent(text, marker);
        let (value, fraction) = digits(mantissa, radix)?;
        let power = power.map_or(Some(0), exponent_value)?;
        if value.bits() == 0 {
            return Some(LongDouble::Finite {
                negative,
                significand: 0,
                exponent: 0,
            });
        }
        let parsed = if hex {
            let exponent = power
                .saturating_sub(4 * fraction)
                .clamp(-(1 << 20), 1 << 20);
            round(negative, value, exponent, false)
        } else {
            from_decimal(negative, value, power - fraction)?
        };
        match parsed {
            LongDouble::Finite { significand, .. } if significand != 0 => Some(parsed),
            // A non-zero text that rounds to zero or infinity: ERANGE.
            _ => None,
        }
    }

    /// Whether the value is infinite.
    pub fn is_infinite(&self) -> bool {
        matches!(self, LongDouble::Infinite { .. })
    }

    /// The correctly rounded sum; NaN (infinities of both signs) is `None`.
    pub fn checked_add(&self, other: &LongDouble) -> Option<LongDouble> {
        use LongDouble::{Finite, Infinite};
        match (self, other) {
            (Infinite { negative: a }, Infinite { negative: b }) if a != b => None,
            (Infinite { .. }, _) => Some(self.clone()),
            (_, Infinite { .. }) => Some(other.clone()),
            (
                Finite {
                    negative: na,
                    significand: sa,
                    exponent: ea,
                },
                Finite {
                    negative: nb,
                    significand: sb,
                    exponent: eb,
                },
            ) => {
                let base = (*ea).min(*eb);
                let a = BigUint::from(*sa) << (ea - base) as usize;
                let b = BigUint::from(*sb) << (eb - base) as usize;
                let (negative, magnitude) = if na == nb {
                    (*na, a + b)
                } else if a >= b {
                    (*na, a - b)
                } else {
                    (*nb, b - a)
                };
                // An exact zero sum of opposite signs is +0, as in C.
                let negative = negative && magnitude.bits() != 0;
                Some(round(negative, magnitude, base, false))
            }
        }
    }

    /// [`LongDouble::checked_add`], NaN as infinity (callers refuse both).
    pub fn add(&self, other: LongDouble) -> LongDouble {
        self.checked_add(&other)
            .unwrap_or(LongDouble::Infinite { negative: false })
    }

    /// Prints as C's `%.17Lf`, then cuts trailing zeros after the point
    /// (and the point), and `-0` becomes `0`: Redis's human format.
    pub fn to_human(&self) -> String {
        let (negative, significand, exponent) = match self {
            LongDouble::Infinite { negative } => {
                return if *negative { "-inf" } else { "inf" }.to_string();
            }
            LongDouble::Finite {
                negative,
                significand,
                exponent,
            } => (*negative, *significand, *exponent),
        };
        let scaled = BigUint::from(significand) * BigUint::from(10u8).pow(17);
        let units = if exponent >= 0 {
            scaled << exponent as usize
        } else {
            let shift = (-exponent) as usize;
            let kept = scaled.clone() >> shift;
            let dropped = scaled - (kept.clone() << shift);
            let half = BigUint::from(1u8) << (shift - 1);
            if dropped > half || (dropped == half && kept.bit(0)) {
                kept + 1u8
            } else {
                kept
            }
        };
        let mut text = format!("{units:0>18}");
        text.insert(text.len() - 17, '.');
        let trimmed = text.trim_end_matches('0').trim_end_matches('.');
        if trimmed == "0" || !negative {
            trimmed.to_string()
        } else {
            format!("-{trimmed}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::LongDouble;

    fn sum(a: &str, b: &str) -> String {
        let a = LongDouble::parse(a.as_bytes()).expect("a parses");
        let b = LongDouble::parse(b.as_bytes()).expect("b parses");
        a.add(b).to_human()
    }

    #[test]
    fn matches_redis_7_0() {
        // Replies of Redis 7.0.15 on x86-64 Linux.
        assert_eq!(sum("3.0", "0.1"), "3.1");
        assert_eq!(sum("3.1", "1.23456789012345678"), "4.33456789012345678");
        assert_eq!(sum("5.0e3", "1e20"), "100000000000000005000");
        assert_eq!(sum("0", "0x10"), "16");
        assert_eq!(sum("1", "-1.1"), "-0.1");
        assert_eq!(sum("0", "1e-5"), "0.00001");
        assert_eq!(sum("0", "-0"), "0");
        assert_eq!(sum("17179869184", "1.5"), "17179869185.5");
        assert_eq!(sum("0.0243902439024390", "-0.0243902439024390"), "0");
        assert!(sum("0", "1e308").starts_with("99999999999999999996685879655"));
    }

    #[test]
    fn refuses_what_string2ld_refuses() {
        for bad in [
            "", " 1", "1 ", "nan", "-nan", "1e", "1e+", ".", "0x", "1x", "1e99999", "1e-99999",
            "1\0", "++1",
        ] {
            assert!(LongDouble::parse(bad.as_bytes()).is_none(), "{bad:?}");
        }
        for good in [
            "inf",
            "-Infinity",
            "1.",
            ".5",
            "+3",
            "0x1.8p3",
            "0e99999",
            "1E5",
        ] {
            assert!(LongDouble::parse(good.as_bytes()).is_some(), "{good:?}");
        }
        let inf = LongDouble::parse(b"inf").unwrap();
        let minus = LongDouble::parse(b"-inf").unwrap();
        assert!(inf.checked_add(&minus).is_none());
        assert!(inf.add(LongDouble::ZERO).is_infinite());
    }
}
