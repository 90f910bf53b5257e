//! The x87 80-bit `long double` Redis computes HINCRBYFLOAT (and
//! INCRBYFLOAT) in, emulated: a 64-bit mantissa, decimal text read with
//! correct rounding as `strtold` reads it, sums rounded to nearest even,
//! and the "human" format Redis prints (`%.17Lf`, trailing zeros dropped).
//! An `f64` gives other digits (`0.1 + 0.2` is `0.30000000000000004`
//! there, `0.3` in Redis), so the arithmetic itself must match.

/// Longest text read as a number, in bytes (Redis's
/// `MAX_LONG_DOUBLE_CHARS`).
const TEXT_LEN_MAX_BYTES: usize = 5 * 1024;
/// Largest binary exponent of a finite value (x87: 16383).
const EXP_MAX: i64 = 16383;
/// Smallest binary exponent of the top bit of a value read from text: a
/// smaller one underflows to zero, which Redis refuses (x87's smallest
/// subnormal is 2^-16445; half of it rounds away).
const TOP_EXP_MIN: i64 = -16446;

/// A finite or infinite extended-precision number: `mant × 2^exp`, with
/// `mant`'s top bit set unless the value is zero.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LongDouble {
    neg: bool,
    mant: u64,
    exp: i64,
    inf: bool,
}

impl LongDouble {
    /// Zero.
    pub const ZERO: LongDouble = LongDouble {
        neg: false,
        mant: 0,
        exp: 0,
        inf: false,
    };

    /// Whether the value is infinite.
    pub fn is_infinite(&self) -> bool {
        self.inf
    }

    /// Reads `text` as Redis's `string2ld` does: decimal with an optional
    /// exponent, or `inf`/`infinity`; no spaces, no NaN, no overflow.
    pub fn parse(text: &[u8]) -> Option<LongDouble> {
        if text.is_empty() || text.len() >= TEXT_LEN_MAX_BYTES {
            return None;
        }
        let (neg, body) = match text[0] {
            b'-' => (true, &text[1..]),
            b'+' => (false, &text[1..]),
            _ => (false, text),
        };
        let lower = body.to_ascii_lowercase();
        if lower == b"inf" || lower == b"infinity" {
            return Some(LongDouble {
                neg,
                mant: 0,
                exp: 0,
                inf: true,
            });
        }
        let value = if lower.starts_with(b"0x") {
            from_hex(&lower[2..])?
        } else {
            let (digits, exp10) = decimal_parts(body)?;
            from_decimal(&digits, exp10)?
        };
        Some(LongDouble { neg, ..value })
    }

    /// `%.17Lf` with trailing zeros (and a bare point) removed, `-0` as
    /// `0`: Redis's `LD_STR_HUMAN`. Infinities print as `inf`/`-inf`.
    pub fn to_human(&self) -> String {
        if self.inf {
            return if self.neg { "-inf" } else { "inf" }.to_string();
        }
        let digits = if self.exp >= 0 {
            let mut n = Big::from_u64(self.mant);
            n.shl(self.exp as u64);
            n.mul_small(10u32.pow(9));
            n.mul_small(10u32.pow(8));
            n.to_decimal()
        } else {
            let mut n = Big::from_u64(self.mant);
            n.mul_small(10u32.pow(9));
            n.mul_small(10u32.pow(8));
            n.shr_round_even((-self.exp) as u64);
            n.to_decimal()
        };
        let digits = format!("{digits:0>18}");
        let (int, frac) = digits.split_at(digits.len() - 17);
        let frac = frac.trim_end_matches('0');
        let mut text = if frac.is_empty() {
            int.to_string()
        } else {
            format!("{int}.{frac}")
        };
        if self.neg && text != "0" {
            text.insert(0, '-');
        }
        text
    }
}

impl std::ops::Add for LongDouble {
    type Output = LongDouble;

    /// The sum, rounded to nearest even; overflow (or `inf - inf`)
    /// gives an infinity.
    fn add(self, other: LongDouble) -> LongDouble {
        if self.inf || other.inf {
            let neg = if self.inf { self.neg } else { other.neg };
            return LongDouble {
                neg,
                mant: 0,
                exp: 0,
                inf: true,
            };
        }
        if other.mant == 0 {
            return if self.mant == 0 {
                LongDouble {
                    neg: self.neg && other.neg,
                    ..LongDouble::ZERO
                }
            } else {
                self
            };
        }
        if self.mant == 0 {
            return other;
        }
        let magnitude = |v: &LongDouble| (v.exp, v.mant);
        let (big, small) = if magnitude(&self) >= magnitude(&other) {
            (self, other)
        } else {
            (other, self)
        };
        const GUARD: u32 = 62;
        let a = u128::from(big.mant) << GUARD;
        let shift = big.exp - small.exp;
        let mut b = u128::from(small.mant) << GUARD;
        if shift >= 127 {
            b = 1;
        } else if shift > 0 {
            let lost = b & ((1u128 << shift) - 1) != 0;
            b = (b >> shift) | u128::from(lost);
        }
        let sum = if big.neg == small.neg { a + b } else { a - b };
        if sum == 0 {
            return LongDouble::ZERO;
        }
        round_to_64(big.neg, sum, big.exp - i64::from(GUARD), false)
    }
}

/// The digits (no leading zeros needed) and the power of ten of a decimal
/// `digits[.digits][e[+-]digits]`, or `None` if `body` is not one.
fn decimal_parts(body: &[u8]) -> Option<(Vec<u8>, i64)> {
    let (mantissa, exponent) = match body.iter().position(|&b| b == b'e' || b == b'E') {
        Some(at) => (&body[..at], Some(&body[at + 1..])),
        None => (body, None),
    };
    let (int, frac) = match mantissa.iter().position(|&b| b == b'.') {
        Some(at) => (&mantissa[..at], &mantissa[at + 1..]),
        None => (mantissa, &[][..]),
    };
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    if !int.iter().chain(frac).all(u8::is_ascii_digit) {
        return None;
    }
    let mut exp10: i64 = match exponent {
        None => 0,
        Some(e) => {
            let (neg, digits) = match e.first() {
                Some(b'-') => (true, &e[1..]),
                Some(b'+') => (false, &e[1..]),
                _ => (false, e),
            };
            if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
                return None;
            }
            // Any exponent this long is far past the range either way.
            let magnitude: i64 = std::str::from_utf8(&digits[..digits.len().min(9)])
                .ok()?
                .parse()
                .ok()?;
            if neg {
                -magnitude
            } else {
                magnitude
            }
        }
    };
    exp10 -= frac.len() as i64;
    let mut digits: Vec<u8> = int.iter().chain(frac).map(|d| d - b'0').collect();
    let leading = digits.iter().take_while(|&&d| d == 0).count();
    digits.drain(..leading);
    Some((digits, exp10))
}

/// `digits × 10^exp10`, correctly rounded.
fn from_decimal(digits: &[u8], exp10: i64) -> Option<LongDouble> {
    if digits.is_empty() {
        return Some(LongDouble::ZERO);
    }
    // Past these the value is surely out of range (or zero).
    let magnitude10 = digits.len() as i64 + exp10;
    if magnitude10 > 4940 {
        return None;
    }
    if magnitude10 < -4955 {
        return None;
    }
    let mut n = Big::default();
    for chunk in digits.chunks(9) {
        let mut part = 0u32;
        for &d in chunk {
            part = part * 10 + u32::from(d);
        }
        n.mul_small(10u32.pow(chunk.len() as u32));
        n.add_small(part);
    }
    let mut exp2 = 0i64;
    let mut inexact = false;
    if exp10 >= 0 {
        for _ in 0..exp10 {
            n.mul_small(10);
        }
    } else {
        // Scale up so the quotient keeps more than 66 bits, then divide.
        let need = 70 + (-exp10 as f64 * std::f64::consts::LOG2_10).ceil() as i64;
        let shift = (need - n.bit_len() as i64).max(0);
        n.shl(shift as u64);
        exp2 -= shift;
        let mut left = -exp10;
        while left > 0 {
            let step = left.min(9) as u32;
            inexact |= n.div_small(10u32.pow(step)) != 0;
            left -= i64::from(step);
        }
    }
    finish(&n, exp2, inexact)
}

/// `n × 2^exp2` rounded, or `None` when it overflows or underflows.
fn finish(n: &Big, exp2: i64, inexact: bool) -> Option<LongDouble> {
    let (top, bits) = n.top_128();
    let value = round_to_64(false, top, exp2 + bits, inexact);
    if value.inf || value.exp + 63 < TOP_EXP_MIN {
        return None;
    }
    Some(value)
}

/// A hexadecimal float after its `0x`: `h[.h][p[+-]d]`, as `strtold`
/// reads it.
fn from_hex(body: &[u8]) -> Option<LongDouble> {
    let (mantissa, exponent) = match body.iter().position(|&b| b == b'p') {
        Some(at) => (&body[..at], Some(&body[at + 1..])),
        None => (body, None),
    };
    let (int, frac) = match mantissa.iter().position(|&b| b == b'.') {
        Some(at) => (&mantissa[..at], &mantissa[at + 1..]),
        None => (mantissa, &[][..]),
    };
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    let mut n = Big::default();
    for &h in int.iter().chain(frac) {
        let digit = char::from(h).to_digit(16)?;
        n.shl(4);
        n.add_small(digit);
    }
    let mut exp2 = -4 * frac.len() as i64;
    if let Some(e) = exponent {
        let (neg, digits) = match e.first() {
            Some(b'-') => (true, &e[1..]),
            Some(b'+') => (false, &e[1..]),
            _ => (false, e),
        };
        if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let magnitude: i64 = std::str::from_utf8(&digits[..digits.len().min(9)])
            .ok()?
            .parse()
            .ok()?;
        exp2 += if neg { -magnitude } else { magnitude };
    }
    if n.bit_len() == 0 {
        return Some(LongDouble::ZERO);
    }
    finish(&n, exp2, false)
}

/// Rounds `sum × 2^exp` (plus a nonzero tail below `sum` if `sticky`) to
/// a 64-bit mantissa, nearest even.
fn round_to_64(neg: bool, sum: u128, exp: i64, sticky: bool) -> LongDouble {
    let top = 127 - sum.leading_zeros() as i64;
    let mut exp = exp;
    let mant: u64 = if top <= 63 {
        // Exact: fits already (a tail below, if any, is far below half).
        let m = (sum << (63 - top)) as u64;
        exp -= 63 - top;
        m
    } else {
        let shift = (top - 63) as u32;
        let kept = (sum >> shift) as u64;
        let half = 1u128 << (shift - 1);
        let rest = sum & ((1u128 << shift) - 1);
        exp += i64::from(shift);
        let up = rest > half || (rest == half && (sticky || kept & 1 == 1));
        if up {
            match kept.checked_add(1) {
                Some(m) => m,
                None => {
                    exp += 1;
                    1 << 63
                }
            }
        } else {
            kept
        }
    };
    if exp + 63 > EXP_MAX {
        return LongDouble {
            neg,
            mant: 0,
            exp: 0,
            inf: true,
        };
    }
    LongDouble {
        neg,
        mant,
        exp,
        inf: false,
    }
}

/// An unsigned integer in base 2^32 limbs, little-endian: just what the
/// conversions above need.
#[derive(Clone, Debug, Default)]
struct Big(Vec<u32>);

impl Big {
    fn from_u64(v: u64) -> Big {
        let mut b = Big(vec![v as u32, (v >> 32) as u32]);
        b.trim();
        b
    }

    fn trim(&mut self) {
        while self.0.last() == Some(&0) {
            self.0.pop();
        }
    }

    fn bit_len(&self) -> u64 {
        match self.0.last() {
            None => 0,
            Some(top) => (self.0.len() as u64 - 1) * 32 + u64::from(32 - top.leading_zeros()),
        }
    }

    fn mul_small(&mut self, m: u32) {
        let mut carry = 0u64;
        for limb in &mut self.0 {
            let v = u64::from(*limb) * u64::from(m) + carry;
            *limb = v as u32;
            carry = v >> 32;
        }
        if carry > 0 {
            self.0.push(carry as u32);
        }
    }

    fn add_small(&mut self, a: u32) {
        let mut carry = u64::from(a);
        for limb in &mut self.0 {
            if carry == 0 {
                return;
            }
            let v = u64::from(*limb) + carry;
            *limb = v as u32;
            carry = v >> 32;
        }
        if carry > 0 {
            self.0.push(carry as u32);
        }
    }

    /// Divides in place; returns the remainder.
    fn div_small(&mut self, d: u32) -> u32 {
        let mut rem = 0u64;
        for limb in self.0.iter_mut().rev() {
            let v = (rem << 32) | u64::from(*limb);
            *limb = (v / u64::from(d)) as u32;
            rem = v % u64::from(d);
        }
        self.trim();
        rem as u32
    }

    fn shl(&mut self, bits: u64) {
        let (limbs, bits) = ((bits / 32) as usize, (bits % 32) as u32);
        if bits > 0 {
            let mut carry = 0u32;
            for limb in &mut self.0 {
                let v = (u64::from(*limb) << bits) | u64::from(carry);
                *limb = v as u32;
                carry = (v >> 32) as u32;
            }
            if carry > 0 {
                self.0.push(carry);
            }
        }
        self.0.splice(0..0, std::iter::repeat_n(0, limbs));
    }

    /// Shifts right by `bits`, rounding to nearest even.
    fn shr_round_even(&mut self, bits: u64) {
        if bits == 0 {
            return;
        }
        let bit = |b: &Big, i: u64| {
            b.0.get((i / 32) as usize)
                .is_some_and(|l| (l >> (i % 32)) & 1 == 1)
        };
        let round = bit(self, bits - 1);
        let below = (0..bits - 1).any(|i| bit(self, i));
        let (limbs, shift) = ((bits / 32) as usize, (bits % 32) as u32);
        if limbs >= self.0.len() {
            self.0.clear();
        } else {
            self.0.drain(..limbs);
            if shift > 0 {
                let mut carry = 0u32;
                for limb in self.0.iter_mut().rev() {
                    let v = *limb;
                    *limb = (v >> shift) | carry;
                    carry = v << (32 - shift);
                }
            }
            self.trim();
        }
        let odd = self.0.first().is_some_and(|l| l & 1 == 1);
        if round && (below || odd) {
            self.add_small(1);
        }
    }

    /// The top (up to) 128 bits as an integer, and how many bits lie
    /// below them (a nonzero tail there is folded into the lowest bit).
    fn top_128(&self) -> (u128, i64) {
        let len = self.bit_len();
        if len <= 128 {
            let mut v = 0u128;
            for (i, limb) in self.0.iter().enumerate() {
                v |= u128::from(*limb) << (32 * i);
            }
            return (v, 0);
        }
        let below = len - 126;
        let mut v = 0u128;
        for i in (below..len).rev() {
            let set = self.0[(i / 32) as usize] >> (i % 32) & 1 == 1;
            v = (v << 1) | u128::from(set);
        }
        let tail = (0..below).any(|i| self.0[(i / 32) as usize] >> (i % 32) & 1 == 1);
        (v << 1 | u128::from(tail), below as i64 - 1)
    }

    fn to_decimal(&self) -> String {
        let mut n = self.clone();
        let mut parts = Vec::new();
        while !n.0.is_empty() {
            parts.push(n.div_small(1_000_000_000));
        }
        let mut text = parts
            .pop()
            .map_or_else(|| "0".to_string(), |p| p.to_string());
        for p in parts.iter().rev() {
            text.push_str(&format!("{p:09}"));
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sum(a: &str, b: &str) -> String {
        let a = LongDouble::parse(a.as_bytes()).unwrap();
        let b = LongDouble::parse(b.as_bytes()).unwrap();
        (a + b).to_human()
    }

    /// Each expected text is what Redis 7.0 on x86-64 answers.
    #[test]
    fn sums_print_as_redis_prints_them() {
        assert_eq!(sum("0.1", "0.2"), "0.3");
        assert_eq!(sum("0.3", "0.3"), "0.6");
        assert_eq!(sum("0.6", "1.1"), "1.7");
        assert_eq!(sum("0", "3.0e-5"), "0.00003");
        assert_eq!(sum("0.00003", "1.5"), "1.50003");
        assert_eq!(sum("0", "123456789.123"), "123456789.12299999999959255");
        assert_eq!(
            sum("123456789.12299999999959255", "0.001"),
            "123456789.12399999999615829"
        );
        assert_eq!(sum("0", "1e17"), "100000000000000000");
        assert_eq!(sum("100000000000000000", "1.5"), "100000000000000001.5");
        assert_eq!(sum("5000", "1.5e-7"), "5000.00000014999999998");
        assert_eq!(sum("10.5", "0.1"), "10.6");
        assert_eq!(sum("10.6", "-10.6"), "0");
        assert_eq!(sum("-0", "-0"), "0");
        assert_eq!(sum("1.23", "0.77"), "2");
        assert_eq!(sum("2", "-0.1"), "1.9");
        assert_eq!(sum("17179869184", "17179869184"), "34359738368");
    }

    #[test]
    fn text_that_is_not_a_number_is_refused() {
        for bad in [
            "", " 1", "1 ", "abc", "nan", "1e", ".", "1.5.2", "--1", "1e99999", "1e-5000", "0x",
        ] {
            assert_eq!(LongDouble::parse(bad.as_bytes()), None, "{bad:?}");
        }
        assert!(LongDouble::parse(b"-inf").unwrap().is_infinite());
        assert_eq!(LongDouble::parse(b".5").unwrap().to_human(), "0.5");
        assert_eq!(LongDouble::parse(b"5.").unwrap().to_human(), "5");
        assert_eq!(LongDouble::parse(b"0x10").unwrap().to_human(), "16");
        assert_eq!(LongDouble::parse(b"0x1.8p1").unwrap().to_human(), "3");
        assert_eq!(LongDouble::parse(b"1e-4950").unwrap().to_human(), "0");
    }

    #[test]
    fn the_largest_double_doubled_is_still_finite() {
        let max = LongDouble::parse(b"1.7976931348623157e308").unwrap();
        let twice = max + max;
        assert!(!twice.is_infinite());
        assert!(twice.to_human().starts_with("35953862697246313999184209354820886809677289388865835697062884153035325704624879270940373721677417112885758683885104137861741672690227211071579455605295523414699795537257678967123632658809118886985907489458125496133883476929775824555243666719790770566420656500950322338241623544031997185275360493372667907"));
    }
}
