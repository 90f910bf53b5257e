//! `cjson.decode`: CJSON's tokenizer and parser. The C library reads a
//! NUL-terminated string, so a zero byte ends the input wherever it is;
//! numbers go through `strtod`, which also takes hex, `inf` and `nan` when
//! invalid numbers are allowed (the default). Errors name the token found
//! and its 1-based position, as `Expected value but found T_END at
//! character 4`.

use mlua::{Lua, MultiValue, Table, Value};

use super::super::{arg_error, check_bytes, one, raise, Outcome, MAX_C_STACK};
use super::{null, Config};

/// A token, or what went wrong reading one.
#[derive(Debug)]
enum Token {
    ObjBegin,
    ObjEnd,
    ArrBegin,
    ArrEnd,
    Str(Vec<u8>),
    Num(f64),
    Bool(bool),
    Null,
    Colon,
    Comma,
    End,
    Error(&'static str),
}

impl Token {
    /// The name errors give a token found where it was not expected.
    fn name(&self) -> &'static str {
        match self {
            Token::ObjBegin => "T_OBJ_BEGIN",
            Token::ObjEnd => "T_OBJ_END",
            Token::ArrBegin => "T_ARR_BEGIN",
            Token::ArrEnd => "T_ARR_END",
            Token::Str(_) => "T_STRING",
            Token::Num(_) => "T_NUMBER",
            Token::Bool(_) => "T_BOOLEAN",
            Token::Null => "T_NULL",
            Token::Colon => "T_COLON",
            Token::Comma => "T_COMMA",
            Token::End => "T_END",
            Token::Error(what) => what,
        }
    }
}

/// A container being filled.
enum Open<'lua> {
    Array { t: Table<'lua>, next: i64 },
    Object { t: Table<'lua>, key: Vec<u8> },
}

struct Parser<'a, 'c> {
    data: &'a [u8],
    at: usize,
    cfg: &'c Config,
    /// Where the last token started (0-based), for error messages.
    token_at: usize,
    depth: i64,
    /// Stack slots the C parser would hold (its limit bounds nesting).
    slots: usize,
}

impl Parser<'_, '_> {
    /// The byte at `i`, zero past the end (the C string's terminator).
    fn byte(&self, i: usize) -> u8 {
        self.data.get(i).copied().unwrap_or(0)
    }

    fn error_at(&mut self, what: &'static str) -> Token {
        self.token_at = self.at;
        Token::Error(what)
    }

    fn next_token(&mut self) -> Token {
        while matches!(self.byte(self.at), b' ' | b'\t' | b'\n' | b'\r') {
            self.at += 1;
        }
        self.token_at = self.at;
        let c = self.byte(self.at);
        let single = match c {
            b'{' => Some(Token::ObjBegin),
            b'}' => Some(Token::ObjEnd),
            b'[' => Some(Token::ArrBegin),
            b']' => Some(Token::ArrEnd),
            b',' => Some(Token::Comma),
            b':' => Some(Token::Colon),
            _ => None,
        };
        if let Some(token) = single {
            self.at += 1;
            return token;
        }
        let rest = &self.data[self.at.min(self.data.len())..];
        match c {
            0 => Token::End,
            b'"' => self.string(),
            b'-' | b'0'..=b'9' => {
                if !self.cfg.decode_invalid && self.invalid_number() {
                    return self.error_at("invalid number");
                }
                self.number()
            }
            b't' if rest.starts_with(b"true") => {
                self.at += 4;
                Token::Bool(true)
            }
            b'f' if rest.starts_with(b"false") => {
                self.at += 5;
                Token::Bool(false)
            }
            b'n' if rest.starts_with(b"null") => {
                self.at += 4;
                Token::Null
            }
            b'i' | b'I' | b'n' | b'N' | b'+'
                if self.cfg.decode_invalid && self.invalid_number() =>
            {
                self.number()
            }
            _ => self.error_at("invalid token"),
        }
    }

    /// Whether the number here is one strict JSON refuses (`+`, hex,
    /// leading zeros, `inf`, `nan`).
    fn invalid_number(&self) -> bool {
        let mut i = self.at;
        match self.byte(i) {
            b'+' => return true,
            b'-' => i += 1,
            _ => {}
        }
        let c = self.byte(i);
        if c == b'0' {
            let next = self.byte(i + 1);
            return next | 0x20 == b'x' || next.is_ascii_digit();
        }
        if c <= b'9' {
            return false;
        }
        let word = [self.byte(i), self.byte(i + 1), self.byte(i + 2)].map(|b| b | 0x20);
        &word == b"inf" || &word == b"nan"
    }

    fn number(&mut self) -> Token {
        match strtod(self.data, self.at) {
            Some((value, end)) => {
                self.at = end;
                Token::Num(value)
            }
            None => self.error_at("invalid number"),
        }
    }

    fn string(&mut self) -> Token {
        self.at += 1;
        let mut out = Vec::new();
        loop {
            let c = self.byte(self.at);
            match c {
                b'"' => break,
                0 => return self.error_at("unexpected end of string"),
                b'\\' => {
                    let decoded = match self.byte(self.at + 1) {
                        b'"' => b'"',
                        b'\\' => b'\\',
                        b'/' => b'/',
                        b'b' => b'\x08',
                        b't' => b'\t',
                        b'n' => b'\n',
                        b'f' => b'\x0c',
                        b'r' => b'\r',
                        b'u' => match self.unicode_escape(&mut out) {
                            Some(()) => continue,
                            None => return self.error_at("invalid unicode escape code"),
                        },
                        _ => return self.error_at("invalid escape code"),
                    };
                    out.push(decoded);
                    self.at += 2;
                }
                _ => {
                    out.push(c);
                    self.at += 1;
                }
            }
        }
        self.at += 1;
        Token::Str(out)
    }

    fn hex4(&self, i: usize) -> Option<u32> {
        (i..i + 4).try_fold(0u32, |acc, j| {
            char::from(self.byte(j))
                .to_digit(16)
                .map(|d| (acc << 4) | d)
        })
    }

    /// Appends the UTF-8 of `\uXXXX` (or a surrogate pair of them) and
    /// moves past it; `None` leaves the position at the backslash.
    fn unicode_escape(&mut self, out: &mut Vec<u8>) -> Option<()> {
        let mut code = self.hex4(self.at + 2)?;
        let mut len = 6;
        if code & 0xf800 == 0xd800 {
            if code & 0x400 != 0 {
                return None;
            }
            if self.byte(self.at + 6) != b'\\' || self.byte(self.at + 7) != b'u' {
                return None;
            }
            let low = self.hex4(self.at + 8)?;
            if low & 0xfc00 != 0xdc00 {
                return None;
            }
            code = (((code & 0x3ff) << 10) | (low & 0x3ff)) + 0x10000;
            len = 12;
        }
        let mut buf = [0u8; 4];
        let ch = char::from_u32(code)?;
        out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
        self.at += len;
        Some(())
    }

    fn fail(&self, expected: &str, found: &Token) -> super::super::Failure {
        raise(format!(
            "Expected {expected} but found {} at character {}",
            found.name(),
            self.token_at + 1
        ))
    }

    /// Enters a container needing `slots` more stack slots in C.
    fn descend(&mut self, slots: usize) -> Outcome<()> {
        self.depth += 1;
        if self.depth <= self.cfg.decode_max_depth && self.slots + slots <= MAX_C_STACK {
            return Ok(());
        }
        Err(raise(format!(
            "Found too many nested data structures ({}) at character {}",
            self.depth, self.at
        )))
    }

    /// Reads an object key and its colon, leaving the key.
    fn key(&mut self, token: Token) -> Outcome<Vec<u8>> {
        let Token::Str(key) = token else {
            return Err(self.fail("object key string", &token));
        };
        let colon = self.next_token();
        if !matches!(colon, Token::Colon) {
            return Err(self.fail("colon", &colon));
        }
        Ok(key)
    }

    /// Parses the value starting with `token` and everything after it.
    fn parse<'lua>(&mut self, lua: &'lua Lua, mut token: Token) -> Outcome<Value<'lua>> {
        let mut open: Vec<Open<'lua>> = Vec::new();
        loop {
            let mut value = match self.start(lua, token, &mut open)? {
                Step::Value(v) => v,
                Step::Next(next) => {
                    token = next;
                    continue;
                }
            };
            // Store the finished value in its container, closing every
            // container that ends after it.
            loop {
                let Some(top) = open.last_mut() else {
                    return Ok(value);
                };
                match self.store(lua, top, value)? {
                    Some(next) => {
                        token = next;
                        break;
                    }
                    None => value = self.close(open.pop()),
                }
            }
        }
    }

    /// A value from `token`: a scalar, an empty container, or a container
    /// opened on `open` (then the token its first item starts with).
    fn start<'lua>(
        &mut self,
        lua: &'lua Lua,
        token: Token,
        open: &mut Vec<Open<'lua>>,
    ) -> Outcome<Step<'lua>> {
        Ok(Step::Value(match token {
            Token::Str(s) => Value::String(lua.create_string(&s)?),
            Token::Num(n) => Value::Number(n),
            Token::Bool(b) => Value::Boolean(b),
            Token::Null => null(),
            Token::ObjBegin => {
                self.descend(3)?;
                let t = lua.create_table()?;
                let first = self.next_token();
                if matches!(first, Token::ObjEnd) {
                    self.depth -= 1;
                    Value::Table(t)
                } else {
                    let key = self.key(first)?;
                    self.slots += 2;
                    open.push(Open::Object { t, key });
                    return Ok(Step::Next(self.next_token()));
                }
            }
            Token::ArrBegin => {
                self.descend(2)?;
                let t = lua.create_table()?;
                let first = self.next_token();
                if matches!(first, Token::ArrEnd) {
                    self.depth -= 1;
                    Value::Table(t)
                } else {
                    self.slots += 1;
                    open.push(Open::Array { t, next: 1 });
                    return Ok(Step::Next(first));
                }
            }
            other => return Err(self.fail("value", &other)),
        }))
    }

    /// Stores `value` in the innermost container and reads what follows:
    /// the token of the next item, or `None` when the container ended.
    fn store<'lua>(
        &mut self,
        lua: &'lua Lua,
        top: &mut Open<'lua>,
        value: Value<'lua>,
    ) -> Outcome<Option<Token>> {
        let after = self.next_token();
        match top {
            Open::Array { t, next } => {
                t.raw_set(*next, value)?;
                *next += 1;
                match after {
                    Token::Comma => Ok(Some(self.next_token())),
                    Token::ArrEnd => Ok(None),
                    other => Err(self.fail("comma or array end", &other)),
                }
            }
            Open::Object { t, key } => {
                t.raw_set(lua.create_string(&*key)?, value)?;
                match after {
                    Token::Comma => {
                        let next = self.next_token();
                        *key = self.key(next)?;
                        Ok(Some(self.next_token()))
                    }
                    Token::ObjEnd => Ok(None),
                    other => Err(self.fail("comma or object end", &other)),
                }
            }
        }
    }

    /// An ended container, which becomes the value for its parent.
    fn close<'lua>(&mut self, closed: Option<Open<'lua>>) -> Value<'lua> {
        self.depth -= 1;
        match closed {
            Some(Open::Array { t, .. }) => {
                self.slots -= 1;
                Value::Table(t)
            }
            Some(Open::Object { t, .. }) => {
                self.slots -= 2;
                Value::Table(t)
            }
            None => Value::Nil,
        }
    }
}

/// What a token started.
enum Step<'lua> {
    /// A whole value.
    Value(Value<'lua>),
    /// A container, now open; its first item starts with this token.
    Next(Token),
}

/// `cjson.decode(text)`.
pub(super) fn decode<'lua>(
    lua: &'lua Lua,
    cfg: &Config,
    args: Vec<Value<'lua>>,
) -> Outcome<MultiValue<'lua>> {
    if args.len() != 1 {
        return Err(arg_error(lua, 1, "expected 1 argument"));
    }
    let text = check_bytes(lua, &args, 1)?;
    let data = text.as_bytes();
    if data.len() >= 2 && (data[0] == 0 || data[1] == 0) {
        return Err(raise("JSON parser does not support UTF-16 or UTF-32"));
    }
    let mut p = Parser {
        data,
        at: 0,
        cfg,
        token_at: 0,
        depth: 0,
        slots: 1,
    };
    let first = p.next_token();
    let value = p.parse(lua, first)?;
    let last = p.next_token();
    if !matches!(last, Token::End) {
        return Err(p.fail("the end", &last));
    }
    Ok(one(value))
}

/// C's `strtod` on the bytes from `start`: the number and where it ends,
/// `None` when no number starts there. Takes decimal, hex (`0x1.8p3`),
/// `inf`, `infinity` and `nan` (with an optional `(chars)`), any case.
pub(super) fn strtod(d: &[u8], start: usize) -> Option<(f64, usize)> {
    let at = |i: usize| d.get(i).copied().unwrap_or(0);
    let mut i = start;
    let negative = match at(i) {
        b'-' => {
            i += 1;
            true
        }
        b'+' => {
            i += 1;
            false
        }
        _ => false,
    };
    let sign = if negative { -1.0 } else { 1.0 };
    let lower = |i: usize, word: &[u8]| (0..word.len()).all(|k| at(i + k) | 0x20 == word[k]);
    if lower(i, b"inf") {
        let len = if lower(i, b"infinity") { 8 } else { 3 };
        return Some((sign * f64::INFINITY, i + len));
    }
    if lower(i, b"nan") {
        let mut end = i + 3;
        if at(end) == b'(' {
            let mut j = end + 1;
            while at(j).is_ascii_alphanumeric() || at(j) == b'_' {
                j += 1;
            }
            if at(j) == b')' {
                end = j + 1;
            }
        }
        return Some((sign * f64::NAN, end));
    }
    if at(i) == b'0' && at(i + 1) | 0x20 == b'x' {
        if let Some((value, end)) = hex_float(d, i + 2) {
            return Some((sign * value, end));
        }
        // "0x" without hex digits reads as the zero alone.
        return Some((sign * 0.0, i + 1));
    }
    decimal(d, i).map(|(value, end)| (sign * value, end))
}

/// The decimal digits (with an optional fraction and exponent) at `i`.
fn decimal(d: &[u8], i: usize) -> Option<(f64, usize)> {
    let at = |i: usize| d.get(i).copied().unwrap_or(0);
    let digits_from = |mut j: usize| {
        while at(j).is_ascii_digit() {
            j += 1;
        }
        j
    };
    let int_end = digits_from(i);
    let mut end = int_end;
    let mut any = int_end > i;
    if at(end) == b'.' {
        let frac_end = digits_from(end + 1);
        any |= frac_end > end + 1;
        end = frac_end;
    }
    if !any {
        return None;
    }
    if at(end) | 0x20 == b'e' {
        let mut j = end + 1;
        if matches!(at(j), b'+' | b'-') {
            j += 1;
        }
        let exp_end = digits_from(j);
        if exp_end > j {
            end = exp_end;
        }
    }
    // Rust's parser wants digits around the point where C takes "1." and
    // "1.e5".
    let text = std::str::from_utf8(&d[i..end]).ok()?;
    let text = text.replace(".e", "e").replace(".E", "E");
    let text = text.strip_suffix('.').unwrap_or(&text);
    let value: f64 = if text.starts_with('.') {
        format!("0{text}").parse().ok()?
    } else {
        text.parse().ok()?
    };
    Some((value, end))
}

/// The hex digits (with an optional fraction and binary exponent) after
/// `0x`; `None` when no hex digit follows.
fn hex_float(d: &[u8], start: usize) -> Option<(f64, usize)> {
    let at = |i: usize| d.get(i).copied().unwrap_or(0);
    let hex = |i: usize| char::from(at(i)).to_digit(16);
    let mut i = start;
    let mut value = 0.0f64;
    let mut any = false;
    while let Some(digit) = hex(i) {
        value = value * 16.0 + f64::from(digit);
        any = true;
        i += 1;
    }
    let mut scale = 0i32;
    if at(i) == b'.' {
        let mut j = i + 1;
        while let Some(digit) = hex(j) {
            value = value * 16.0 + f64::from(digit);
            scale = scale.saturating_sub(4);
            any = true;
            j += 1;
        }
        if any {
            i = j;
        }
    }
    if !any {
        return None;
    }
    if at(i) | 0x20 == b'p' {
        let mut j = i + 1;
        let negative = match at(j) {
            b'-' => {
                j += 1;
                true
            }
            b'+' => {
                j += 1;
                false
            }
            _ => false,
        };
        let digits_start = j;
        let mut exp: i32 = 0;
        while at(j).is_ascii_digit() {
            exp = exp
                .saturating_mul(10)
                .saturating_add(i32::from(at(j) - b'0'));
            j += 1;
        }
        if j > digits_start {
            scale = scale.saturating_add(if negative { -exp } else { exp });
            i = j;
        }
    }
    Some((value * 2f64.powi(scale), i))
}

#[cfg(test)]
mod tests {
    use super::strtod;

    #[test]
    fn strtod_reads_what_c_reads() {
        assert_eq!(strtod(b"12abc", 0), Some((12.0, 2)));
        assert_eq!(strtod(b"-5e3,", 0), Some((-5000.0, 4)));
        assert_eq!(strtod(b"1e", 0), Some((1.0, 1)));
        assert_eq!(strtod(b"1.", 0), Some((1.0, 2)));
        assert_eq!(strtod(b"1.e2x", 0), Some((100.0, 4)));
        assert_eq!(strtod(b".5e1", 0), Some((5.0, 4)));
        assert_eq!(strtod(b"-.5", 0), Some((-0.5, 3)));
        assert_eq!(strtod(b"0x10", 0), Some((16.0, 4)));
        assert_eq!(strtod(b"0x", 0), Some((0.0, 1)));
        assert_eq!(strtod(b"0x1p4", 0), Some((16.0, 5)));
        assert_eq!(strtod(b"-Infinity", 0), Some((f64::NEG_INFINITY, 9)));
        assert_eq!(strtod(b"-", 0), None);
        assert!(strtod(b"nan", 0).is_some_and(|(v, e)| v.is_nan() && e == 3));
    }
}
