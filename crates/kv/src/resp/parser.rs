//! The request parser: multi-bulk (`*2\r\n$3\r\nGET\r\n$1\r\nk\r\n`) and
//! inline (`GET k\r\n`, what telnet and nc send) commands.
//!
//! The parser is resumable: when a command is only partly in the buffer it
//! remembers how far it got, so a large command arriving in many reads is
//! scanned once, not once per read. It never allocates in proportion to a
//! length the client *announced*; memory grows only with bytes that actually
//! arrived, and every length is checked against [`Limits`] first.

use std::fmt;

/// Longest header line (`*N` or `$N`) or inline request without a newline,
/// in bytes, before the request is refused (Redis's `PROTO_INLINE_MAX_SIZE`).
pub const INLINE_LEN_MAX_BYTES: usize = 64 * 1024;
/// Argument slots reserved up front, whatever count the client announces.
const ARGS_RESERVE_MAX: usize = 64;

/// Limits on what one client may send, checked before anything is allocated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Most arguments in one command.
    pub args_max: usize,
    /// Longest bulk argument in bytes (`proto-max-bulk-len`).
    pub bulk_len_max_bytes: usize,
}

impl Limits {
    /// Redis's defaults: 1 Mi arguments, 512 MiB bulk strings.
    pub const DEFAULT: Limits = Limits {
        args_max: 1024 * 1024,
        bulk_len_max_bytes: 512 * 1024 * 1024,
    };
    /// What a client that has not authenticated yet may send (Redis 7 keeps
    /// unauthenticated clients to tiny commands so they cannot make the
    /// server allocate).
    pub const UNAUTHENTICATED: Limits = Limits {
        args_max: 10,
        bulk_len_max_bytes: 16 * 1024,
    };
}

impl Default for Limits {
    fn default() -> Limits {
        Limits::DEFAULT
    }
}

/// A malformed request. The server answers `-ERR Protocol error: <reason>`
/// and closes the connection, as Redis does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProtocolError {
    /// Redis's wording of what is wrong.
    pub reason: String,
}

impl ProtocolError {
    fn new(reason: impl Into<String>) -> ProtocolError {
        ProtocolError {
            reason: reason.into(),
        }
    }
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Protocol error: {}", self.reason)
    }
}

impl std::error::Error for ProtocolError {}

/// The arguments of one parsed command: ranges into a byte buffer.
#[derive(Clone, Copy, Debug)]
pub struct Args<'a> {
    base: &'a [u8],
    ranges: &'a [(usize, usize)],
}

impl<'a> Args<'a> {
    /// Arguments given as ranges of `base`.
    pub fn new(base: &'a [u8], ranges: &'a [(usize, usize)]) -> Args<'a> {
        Args { base, ranges }
    }

    /// Number of arguments, the command name included.
    pub fn len(&self) -> usize {
        self.ranges.len()
    }

    /// Whether there is no argument at all.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Argument `index`; empty if out of range (callers check arity first).
    pub fn get(&self, index: usize) -> &'a [u8] {
        match self.ranges.get(index) {
            Some(&(start, end)) => &self.base[start..end],
            None => &[],
        }
    }

    /// Iterates over the arguments.
    pub fn iter(&self) -> impl Iterator<Item = &'a [u8]> + '_ {
        let base = self.base;
        self.ranges.iter().map(move |&(s, e)| &base[s..e])
    }

    /// The arguments from `from` on (empty past the end): COMMAND
    /// GETKEYS looks at the command it names as a command of its own.
    pub fn tail(&self, from: usize) -> Args<'a> {
        Args {
            base: self.base,
            ranges: self.ranges.get(from..).unwrap_or(&[]),
        }
    }

    /// Copies the arguments out.
    pub fn to_vec(&self) -> Vec<Vec<u8>> {
        self.iter().map(<[u8]>::to_vec).collect()
    }
}

/// Argument slots a parser keeps between commands (16 KiB).
const RANGES_KEEP: usize = 1024;

/// Where a multi-bulk command stands between reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Nothing of the next command parsed yet.
    Start,
    /// Inside a multi-bulk command: `remaining` arguments still to come.
    MultiBulk { remaining: usize },
}

/// A resumable request parser; see the module documentation.
#[derive(Debug)]
pub struct Parser {
    state: State,
    /// Offset, relative to the start of the current command, where parsing
    /// resumes.
    cursor: usize,
    ranges: Vec<(usize, usize)>,
    inline: Vec<u8>,
    is_inline: bool,
    /// Where the argument being awaited ends (offset from the command's
    /// start, its CRLF included), when it is a big one.
    big_arg_end: Option<usize>,
}

/// Arguments of at least this many bytes get their whole room in the
/// query buffer as soon as their header is read (Redis's
/// `PROTO_MBULK_BIG_ARG`).
pub const BIG_ARG_BYTES: usize = 32 * 1024;

impl Default for Parser {
    fn default() -> Parser {
        Parser::new()
    }
}

/// Finds `\r\n` in `buf` at or after `from`; returns the offset of `\r`.
fn find_crlf(buf: &[u8], from: usize) -> Option<usize> {
    let mut at = from;
    while at < buf.len() {
        let nl = at + buf[at..].iter().position(|&b| b == b'\n')?;
        if nl > 0 && buf[nl - 1] == b'\r' && nl > from {
            return Some(nl - 1);
        }
        at = nl + 1;
    }
    None
}

/// Parses a header number the way Redis does (`string2ll`): an optional
/// minus sign, no leading zeros, no spaces, no plus sign.
pub fn parse_i64(text: &[u8]) -> Option<i64> {
    let (negative, digits) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    if digits.is_empty() || digits.len() > 20 {
        return None;
    }
    if digits[0] == b'0' && (digits.len() > 1 || negative) {
        return None;
    }
    let mut value: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        let digit = i64::from(d - b'0');
        value = value.checked_mul(10)?;
        value = if negative {
            value.checked_sub(digit)?
        } else {
            value.checked_add(digit)?
        };
    }
    Some(value)
}

impl Parser {
    /// A parser at the start of a command.
    pub fn new() -> Parser {
        Parser {
            state: State::Start,
            cursor: 0,
            ranges: Vec::new(),
            inline: Vec::new(),
            is_inline: false,
            big_arg_end: None,
        }
    }

    /// When the last [`Parser::parse`] stopped inside an argument of at
    /// least [`BIG_ARG_BYTES`]: the offset from the command's start where
    /// that argument's CRLF ends. Redis grows the query buffer to hold
    /// such an argument at once (so CLIENT LIST's `qbuf-free` and
    /// `tot-mem`, and client eviction, count its full size while it
    /// arrives); the event loop does the same with this figure.
    pub fn big_arg_end(&self) -> Option<usize> {
        self.big_arg_end
    }

    /// Whether a command is partly parsed (bytes of it were consumed).
    pub fn is_mid_command(&self) -> bool {
        self.cursor > 0
    }

    /// Parses the next command at the start of `buf`.
    ///
    /// Returns `Ok(Some(consumed))` when a whole command is there (read it
    /// with [`Parser::args`] against the same `buf`; an empty command, such
    /// as a blank inline line, has no arguments and should be skipped),
    /// `Ok(None)` when more bytes are needed. `buf` must start where the
    /// previous complete command ended, and keep the bytes already seen.
    pub fn parse(&mut self, buf: &[u8], limits: &Limits) -> Result<Option<usize>, ProtocolError> {
        self.big_arg_end = None;
        if self.state == State::Start {
            let Some(&first) = buf.first() else {
                return Ok(None);
            };
            if first != b'*' {
                return self.parse_inline(buf);
            }
            let Some(cr) = find_crlf(buf, 1) else {
                if buf.len() > INLINE_LEN_MAX_BYTES {
                    return Err(ProtocolError::new("too big mbulk count string"));
                }
                return Ok(None);
            };
            let count = match parse_i64(&buf[1..cr]) {
                Some(n)
                    if n <= 0 || (n <= i64::from(i32::MAX) && (n as usize) <= limits.args_max) =>
                {
                    n
                }
                // As Redis, a client that has not authenticated is told
                // why its count is refused.
                Some(_) if *limits == Limits::UNAUTHENTICATED => {
                    return Err(ProtocolError::new("unauthenticated multibulk length"))
                }
                _ => return Err(ProtocolError::new("invalid multibulk length")),
            };
            self.ranges.clear();
            self.is_inline = false;
            self.cursor = cr + 2;
            if count <= 0 {
                return Ok(Some(self.finish()));
            }
            let remaining = count as usize;
            // What a command of many arguments grew the table to goes back
            // with the next smaller one (as a connection's input buffer).
            if self.ranges.capacity() > RANGES_KEEP.max(4 * remaining) {
                self.ranges.shrink_to(RANGES_KEEP.max(2 * remaining));
            }
            self.ranges.reserve(remaining.min(ARGS_RESERVE_MAX));
            self.state = State::MultiBulk { remaining };
        }
        self.parse_bulks(buf, limits)
    }

    fn parse_bulks(&mut self, buf: &[u8], limits: &Limits) -> Result<Option<usize>, ProtocolError> {
        while let State::MultiBulk { remaining } = self.state {
            if remaining == 0 {
                return Ok(Some(self.finish()));
            }
            let at = self.cursor;
            let Some(&first) = buf.get(at) else {
                return Ok(None);
            };
            if first != b'$' {
                return Err(ProtocolError::new(format!(
                    "expected '$', got '{}'",
                    char::from(first)
                )));
            }
            let Some(cr) = find_crlf(buf, at + 1) else {
                if buf.len() - at > INLINE_LEN_MAX_BYTES {
                    return Err(ProtocolError::new("too big bulk count string"));
                }
                return Ok(None);
            };
            let len = match parse_i64(&buf[at + 1..cr]) {
                Some(n) if n >= 0 && (n as u64) <= limits.bulk_len_max_bytes as u64 => n as usize,
                Some(n) if n >= 0 && *limits == Limits::UNAUTHENTICATED => {
                    return Err(ProtocolError::new("unauthenticated bulk length"))
                }
                _ => return Err(ProtocolError::new("invalid bulk length")),
            };
            let data = cr + 2;
            // The two bytes after the data are the CRLF terminator; like
            // Redis, they are skipped without being inspected.
            if buf.len() < data + len + 2 {
                self.big_arg_end = (len >= BIG_ARG_BYTES).then_some(data + len + 2);
                return Ok(None);
            }
            self.ranges.push((data, data + len));
            self.cursor = data + len + 2;
            self.state = State::MultiBulk {
                remaining: remaining - 1,
            };
        }
        Ok(None)
    }

    fn finish(&mut self) -> usize {
        let consumed = self.cursor;
        self.cursor = 0;
        self.state = State::Start;
        consumed
    }

    fn parse_inline(&mut self, buf: &[u8]) -> Result<Option<usize>, ProtocolError> {
        let Some(nl) = buf.iter().position(|&b| b == b'\n') else {
            if buf.len() > INLINE_LEN_MAX_BYTES {
                return Err(ProtocolError::new("too big inline request"));
            }
            return Ok(None);
        };
        let line = &buf[..nl];
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        self.ranges.clear();
        self.inline.clear();
        self.is_inline = true;
        split_inline(line, &mut self.inline, &mut self.ranges)?;
        self.cursor = nl + 1;
        Ok(Some(self.finish()))
    }

    /// The arguments of the command the last successful [`Parser::parse`]
    /// returned, given the same `buf`.
    pub fn args<'a>(&'a self, buf: &'a [u8]) -> Args<'a> {
        if self.is_inline {
            Args::new(&self.inline, &self.ranges)
        } else {
            Args::new(buf, &self.ranges)
        }
    }
}

fn hex_value(b: u8) -> Option<u8> {
    char::from(b).to_digit(16).map(|d| d as u8)
}

/// Splits a line into arguments the way inline commands and config files
/// are split (see [`split_inline`]).
pub fn split_args(line: &[u8]) -> Result<Vec<Vec<u8>>, ProtocolError> {
    let mut out = Vec::new();
    let mut ranges = Vec::new();
    split_inline(line, &mut out, &mut ranges)?;
    Ok(ranges.iter().map(|&(s, e)| out[s..e].to_vec()).collect())
}

/// Splits an inline request into arguments with the quoting rules of
/// redis-cli: `"..."` with C escapes (`\n`, `\xHH`...), `'...'` with `\'`.
fn split_inline(
    line: &[u8],
    out: &mut Vec<u8>,
    ranges: &mut Vec<(usize, usize)>,
) -> Result<(), ProtocolError> {
    let unbalanced = || ProtocolError::new("unbalanced quotes in request");
    let mut i = 0;
    loop {
        while i < line.len() && line[i].is_ascii_whitespace() {
            i += 1;
        }
        if i == line.len() {
            return Ok(());
        }
        let start = out.len();
        let quote = match line[i] {
            q @ (b'"' | b'\'') => {
                i += 1;
                Some(q)
            }
            _ => None,
        };
        loop {
            let Some(&c) = line.get(i) else {
                if quote.is_some() {
                    return Err(unbalanced());
                }
                break;
            };
            match quote {
                None if c.is_ascii_whitespace() => break,
                None => out.push(c),
                Some(q) if c == q => {
                    // A closing quote must be followed by a space or the end.
                    if line.get(i + 1).is_some_and(|n| !n.is_ascii_whitespace()) {
                        return Err(unbalanced());
                    }
                    i += 1;
                    break;
                }
                Some(b'"') if c == b'\\' && i + 1 < line.len() => {
                    i += 1;
                    let e = line[i];
                    let hex = (e == b'x' && i + 2 < line.len())
                        .then(|| Some(hex_value(line[i + 1])? * 16 + hex_value(line[i + 2])?))
                        .flatten();
                    if let Some(h) = hex {
                        out.push(h);
                        i += 2;
                    } else {
                        out.push(match e {
                            b'n' => b'\n',
                            b'r' => b'\r',
                            b't' => b'\t',
                            b'b' => 8,
                            b'a' => 7,
                            other => other,
                        });
                    }
                }
                Some(b'\'') if c == b'\\' && line.get(i + 1) == Some(&b'\'') => {
                    i += 1;
                    out.push(b'\'');
                }
                Some(_) => out.push(c),
            }
            i += 1;
        }
        ranges.push((start, out.len()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(input: &[u8]) -> Result<Vec<Vec<Vec<u8>>>, ProtocolError> {
        let mut parser = Parser::new();
        let mut at = 0;
        let mut out = Vec::new();
        while let Some(n) = parser.parse(&input[at..], &Limits::DEFAULT)? {
            out.push(parser.args(&input[at..]).to_vec());
            at += n;
        }
        Ok(out)
    }

    #[test]
    fn multibulk_and_inline() {
        let cmds = parse_all(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\nSET a \"b c\\x41\"\r\n").unwrap();
        assert_eq!(cmds[0], vec![b"GET".to_vec(), b"k".to_vec()]);
        assert_eq!(
            cmds[1],
            vec![b"SET".to_vec(), b"a".to_vec(), b"b cA".to_vec()]
        );
    }

    #[test]
    fn resumes_byte_by_byte() {
        let input = b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n";
        let mut parser = Parser::new();
        for end in 0..input.len() {
            assert_eq!(parser.parse(&input[..end], &Limits::DEFAULT).unwrap(), None);
        }
        assert_eq!(
            parser.parse(input, &Limits::DEFAULT).unwrap(),
            Some(input.len())
        );
        assert_eq!(parser.args(input).get(2), b"value");
    }

    #[test]
    fn errors_use_redis_wording() {
        let err = |b: &[u8]| parse_all(b).unwrap_err().to_string();
        assert_eq!(err(b"*x\r\n"), "Protocol error: invalid multibulk length");
        assert_eq!(
            err(b"*1\r\n+a\r\n"),
            "Protocol error: expected '+', got '+'".replace("'+', got", "'$', got")
        );
        assert_eq!(err(b"*1\r\n$-5\r\n"), "Protocol error: invalid bulk length");
        assert_eq!(
            err(b"SET \"a\r\n"),
            "Protocol error: unbalanced quotes in request"
        );
        let limits = Limits {
            args_max: 2,
            bulk_len_max_bytes: 4,
        };
        let mut p = Parser::new();
        assert!(p.parse(b"*3\r\n", &limits).is_err());
        assert!(p.parse(b"*1\r\n$5\r\n", &limits).is_err());
    }

    #[test]
    fn numbers_are_strict() {
        assert_eq!(parse_i64(b"-12"), Some(-12));
        assert_eq!(parse_i64(b"0"), Some(0));
        for bad in [
            &b"01"[..],
            b"+1",
            b" 1",
            b"",
            b"-",
            b"-0",
            b"99999999999999999999",
        ] {
            assert_eq!(parse_i64(bad), None, "{bad:?}");
        }
    }
}
