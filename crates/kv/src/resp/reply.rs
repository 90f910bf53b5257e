//! The reply encoder. One [`ReplyBuf`] per connection accumulates replies
//! in the connection's protocol version: RESP2 by default, RESP3 after
//! `HELLO 3` (maps, sets, doubles and a distinct null).

/// The protocol version a connection speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Protocol {
    /// RESP2, the default.
    #[default]
    Resp2,
    /// RESP3, chosen with `HELLO 3`.
    Resp3,
}

impl Protocol {
    /// The number `HELLO` reports.
    pub fn version(self) -> i64 {
        match self {
            Protocol::Resp2 => 2,
            Protocol::Resp3 => 3,
        }
    }
}

/// Formats a double the way Redis 7.0 replies with one (ZSCORE, ZRANGE
/// WITHSCORES, RESP3 doubles): C's `%.17g`, so 1.1 reads
/// `1.1000000000000001`; `inf`/`-inf` for infinities. Seventeen
/// significant digits always read back to the same double.
pub fn format_double(value: f64) -> String {
    if value.is_infinite() {
        return if value > 0.0 {
            "inf".into()
        } else {
            "-inf".into()
        };
    }
    if value.is_nan() {
        return "nan".into();
    }
    if value == 0.0 {
        return if value.is_sign_negative() { "-0" } else { "0" }.into();
    }
    // A whole number below 10^15 has at most 15 digits, which `%.17g`
    // prints exactly and without a point: its integer's digits. Scripts
    // pass counters to `redis.call` as such doubles, so this path skips
    // the two float formattings below on every call.
    if value.fract() == 0.0 && value.abs() < 1e15 {
        return (value as i64).to_string();
    }
    const PRECISION: i32 = 17;
    // Rust's `e` formatting rounds the exact binary value to 17 significant
    // digits, as printf does; it only differs in how it writes them.
    let scientific = format!("{:.*e}", (PRECISION - 1) as usize, value);
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    if !(-4..PRECISION).contains(&exponent) {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!(
            "{}e{sign}{:02}",
            strip_fraction_zeros(mantissa),
            exponent.unsigned_abs()
        )
    } else {
        let decimals = (PRECISION - 1 - exponent) as usize;
        strip_fraction_zeros(&format!("{value:.decimals$}")).to_string()
    }
}

/// `%g` drops trailing zeros of the fraction, and the point if nothing is
/// left after it.
fn strip_fraction_zeros(text: &str) -> &str {
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.')
    } else {
        text
    }
}

/// Writes `value` in decimal without going through `fmt`.
pub fn push_i64(out: &mut Vec<u8>, value: i64) {
    let mut digits = [0u8; 20];
    let mut n = value.unsigned_abs();
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if value < 0 {
        out.push(b'-');
    }
    out.extend_from_slice(&digits[at..]);
}

/// Replies waiting to be written to one connection.
#[derive(Debug, Default)]
pub struct ReplyBuf {
    /// The encoded bytes.
    pub buf: Vec<u8>,
    /// The protocol they are encoded in.
    pub proto: Protocol,
}

impl ReplyBuf {
    /// An empty buffer for `proto`.
    pub fn new(proto: Protocol) -> ReplyBuf {
        ReplyBuf {
            buf: Vec::new(),
            proto,
        }
    }

    fn header(&mut self, tag: u8, n: i64) {
        self.buf.push(tag);
        push_i64(&mut self.buf, n);
        self.buf.extend_from_slice(b"\r\n");
    }

    /// `+text`.
    pub fn simple(&mut self, text: &str) {
        self.buf.push(b'+');
        self.buf.extend_from_slice(text.as_bytes());
        self.buf.extend_from_slice(b"\r\n");
    }

    /// `+OK`.
    pub fn ok(&mut self) {
        self.buf.extend_from_slice(b"+OK\r\n");
    }

    /// An error; `text` starts with its code (`ERR ...`, `WRONGTYPE ...`).
    /// Newlines would break the framing, so they become spaces.
    pub fn error(&mut self, text: &str) {
        self.buf.push(b'-');
        self.buf.extend(
            text.bytes()
                .map(|b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
        );
        self.buf.extend_from_slice(b"\r\n");
    }

    /// `:n`.
    pub fn int(&mut self, n: i64) {
        self.header(b':', n);
    }

    /// A bulk string.
    pub fn bulk(&mut self, data: &[u8]) {
        self.header(b'$', data.len() as i64);
        self.buf.extend_from_slice(data);
        self.buf.extend_from_slice(b"\r\n");
    }

    /// An integer as a bulk string (what Redis does for INCRBYFLOAT-like
    /// replies and numeric hash fields).
    pub fn bulk_i64(&mut self, n: i64) {
        let mut text = Vec::with_capacity(20);
        push_i64(&mut text, n);
        self.bulk(&text);
    }

    /// A bulk string or the null bulk string.
    pub fn bulk_opt(&mut self, data: Option<&[u8]>) {
        match data {
            Some(d) => self.bulk(d),
            None => self.null(),
        }
    }

    /// The null bulk string (`$-1`; `_` in RESP3).
    pub fn null(&mut self) {
        match self.proto {
            Protocol::Resp2 => self.buf.extend_from_slice(b"$-1\r\n"),
            Protocol::Resp3 => self.buf.extend_from_slice(b"_\r\n"),
        }
    }

    /// The null array (`*-1`; `_` in RESP3).
    pub fn null_array(&mut self) {
        match self.proto {
            Protocol::Resp2 => self.buf.extend_from_slice(b"*-1\r\n"),
            Protocol::Resp3 => self.buf.extend_from_slice(b"_\r\n"),
        }
    }

    /// An array header for `n` elements.
    pub fn array(&mut self, n: usize) {
        self.header(b'*', n as i64);
    }

    /// A map header for `n` pairs (a flat array of `2n` in RESP2).
    pub fn map(&mut self, n: usize) {
        match self.proto {
            Protocol::Resp2 => self.header(b'*', 2 * n as i64),
            Protocol::Resp3 => self.header(b'%', n as i64),
        }
    }

    /// A push header for `n` elements (RESP3 `>`; an array in RESP2):
    /// Pub/Sub messages and invalidations a client did not ask for.
    pub fn push(&mut self, n: usize) {
        match self.proto {
            Protocol::Resp2 => self.header(b'*', n as i64),
            Protocol::Resp3 => self.header(b'>', n as i64),
        }
    }

    /// A set header (an array in RESP2).
    pub fn set(&mut self, n: usize) {
        match self.proto {
            Protocol::Resp2 => self.header(b'*', n as i64),
            Protocol::Resp3 => self.header(b'~', n as i64),
        }
    }

    /// A double (a bulk string in RESP2).
    pub fn double(&mut self, value: f64) {
        let text = format_double(value);
        match self.proto {
            Protocol::Resp2 => self.bulk(text.as_bytes()),
            Protocol::Resp3 => {
                self.buf.push(b',');
                self.buf.extend_from_slice(text.as_bytes());
                self.buf.extend_from_slice(b"\r\n");
            }
        }
    }

    /// A verbatim text (RESP3 `=`; a bulk string in RESP2), as INFO uses.
    pub fn verbatim(&mut self, text: &str) {
        match self.proto {
            Protocol::Resp2 => self.bulk(text.as_bytes()),
            Protocol::Resp3 => {
                self.header(b'=', text.len() as i64 + 4);
                self.buf.extend_from_slice(b"txt:");
                self.buf.extend_from_slice(text.as_bytes());
                self.buf.extend_from_slice(b"\r\n");
            }
        }
    }

    /// An array of bulk strings.
    pub fn bulks<'a>(&mut self, items: impl ExactSizeIterator<Item = &'a [u8]>) {
        self.array(items.len());
        for item in items {
            self.bulk(item);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_print_like_redis() {
        assert_eq!(format_double(3.0), "3");
        assert_eq!(format_double(-2.0), "-2");
        assert_eq!(format_double(1.5), "1.5");
        assert_eq!(format_double(0.1), "0.10000000000000001");
        assert_eq!(format_double(f64::INFINITY), "inf");
        assert_eq!(format_double(f64::NEG_INFINITY), "-inf");
        // C's %.17g, as Redis 7.0's replies.
        assert_eq!(format_double(1.1), "1.1000000000000001");
        assert_eq!(format_double(0.3), "0.29999999999999999");
        assert_eq!(format_double(1e20), "1e+20");
        assert_eq!(format_double(1.5e-7), "1.4999999999999999e-07");
        assert_eq!(format_double(0.0001), "0.0001");
        assert_eq!(format_double(123456789.0), "123456789");
        assert_eq!(format_double(1e16), "10000000000000000");
        assert_eq!(format_double(1e17), "1e+17");
        assert_eq!(format_double(-0.0), "-0");
        assert_eq!(format_double(3.0e-5), "3.0000000000000001e-05");
    }

    #[test]
    fn resp2_and_resp3_differ_where_they_should() {
        let mut two = ReplyBuf::new(Protocol::Resp2);
        let mut three = ReplyBuf::new(Protocol::Resp3);
        for r in [&mut two, &mut three] {
            r.null();
            r.map(1);
            r.double(1.5);
        }
        assert_eq!(two.buf, b"$-1\r\n*2\r\n$3\r\n1.5\r\n");
        assert_eq!(three.buf, b"_\r\n%1\r\n,1.5\r\n");
    }

    #[test]
    fn integers() {
        let mut r = ReplyBuf::default();
        r.int(i64::MIN);
        r.int(0);
        assert_eq!(r.buf, b":-9223372036854775808\r\n:0\r\n");
    }
}
