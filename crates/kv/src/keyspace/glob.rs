//! Glob-style patterns for KEYS, SCAN MATCH and friends: `*`, `?`, `[abc]`,
//! `[^a]`, `[a-z]` and `\` escapes, matched on bytes.

/// Deepest `*` nesting the matcher follows before giving up, so a hostile
/// pattern cannot take exponential time (Redis has a similar guard).
const STAR_NESTING_MAX: usize = 1000;

/// Whether `text` matches `pattern`.
pub fn glob_match(pattern: &[u8], text: &[u8]) -> bool {
    let mut budget = STAR_NESTING_MAX;
    match_from(pattern, text, &mut budget)
}

fn match_from(mut p: &[u8], mut t: &[u8], budget: &mut usize) -> bool {
    while let Some(&c) = p.first() {
        match c {
            b'*' => {
                while p.first() == Some(&b'*') {
                    p = &p[1..];
                }
                if p.is_empty() {
                    return true;
                }
                if *budget == 0 {
                    return false;
                }
                *budget -= 1;
                for skip in 0..=t.len() {
                    if match_from(p, &t[skip..], budget) {
                        return true;
                    }
                }
                return false;
            }
            b'?' => {
                if t.is_empty() {
                    return false;
                }
                t = &t[1..];
                p = &p[1..];
            }
            b'[' => {
                let Some(&ch) = t.first() else {
                    return false;
                };
                let (matched, rest) = match_class(&p[1..], ch);
                if !matched {
                    return false;
                }
                p = rest;
                t = &t[1..];
            }
            b'\\' if p.len() >= 2 => {
                if t.first() != Some(&p[1]) {
                    return false;
                }
                p = &p[2..];
                t = &t[1..];
            }
            _ => {
                if t.first() != Some(&c) {
                    return false;
                }
                p = &p[1..];
                t = &t[1..];
            }
        }
    }
    t.is_empty()
}

/// Matches `ch` against a class whose body starts at `p` (after `[`);
/// returns whether it matched and the pattern after the closing `]`.
fn match_class(mut p: &[u8], ch: u8) -> (bool, &[u8]) {
    let negate = p.first() == Some(&b'^');
    if negate {
        p = &p[1..];
    }
    let mut matched = false;
    loop {
        match p {
            [] => break,
            [b']', rest @ ..] => {
                p = rest;
                break;
            }
            [b'\\', e, rest @ ..] => {
                matched |= *e == ch;
                p = rest;
            }
            [lo, b'-', hi, rest @ ..] if *hi != b']' => {
                let (lo, hi) = if lo <= hi { (*lo, *hi) } else { (*hi, *lo) };
                matched |= (lo..=hi).contains(&ch);
                p = rest;
            }
            [c, rest @ ..] => {
                matched |= *c == ch;
                p = rest;
            }
        }
    }
    (matched != negate, p)
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn patterns() {
        assert!(glob_match(b"*", b"anything"));
        assert!(glob_match(b"h?llo", b"hello"));
        assert!(glob_match(b"h*llo", b"heeeello"));
        assert!(glob_match(b"h[ae]llo", b"hallo"));
        assert!(!glob_match(b"h[^e]llo", b"hello"));
        assert!(glob_match(b"h[a-b]llo", b"hbllo"));
        assert!(glob_match(b"a\\*", b"a*"));
        assert!(!glob_match(b"a\\*", b"ab"));
        assert!(!glob_match(b"user:*", b"usr:1"));
        assert!(!glob_match(
            &[b'*'; 64].iter().chain(b"x").copied().collect::<Vec<_>>(),
            &[b'a'; 64]
        ));
    }
}
