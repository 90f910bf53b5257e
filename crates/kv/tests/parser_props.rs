//! Arbitrary bytes into the RESP parser: it never panics, never loops,
//! and never holds more than the limits and the input allow.

use ferrite_kv::resp::parser::INLINE_LEN_MAX_BYTES;
use ferrite_kv::resp::{Limits, Parser};
use proptest::prelude::*;

/// Feeds `input` in `chunk`-sized reads the way the server does; returns
/// the commands parsed, or stops at the first protocol error.
fn feed(input: &[u8], chunk: usize, limits: &Limits) -> usize {
    let mut parser = Parser::new();
    let mut buf = Vec::new();
    let mut commands = 0;
    for piece in input.chunks(chunk.max(1)) {
        buf.extend_from_slice(piece);
        let mut at = 0;
        loop {
            match parser.parse(&buf[at..], limits) {
                Ok(Some(n)) => {
                    assert!(
                        n > 0 && at + n <= buf.len(),
                        "consumed {n} of {}",
                        buf.len() - at
                    );
                    let args = parser.args(&buf[at..]);
                    // Inline requests are bounded by their 64 KiB line
                    // instead of the argument count.
                    let inline = buf[at] != b'*';
                    assert!(inline || args.len() <= limits.args_max);
                    assert!(args.len() <= INLINE_LEN_MAX_BYTES || !inline);
                    for arg in args.iter() {
                        assert!(arg.len() <= limits.bulk_len_max_bytes.max(buf.len()));
                    }
                    commands += 1;
                    at += n;
                }
                Ok(None) => break,
                Err(_) => return commands,
            }
        }
        buf.drain(..at);
    }
    commands
}

fn resp_like() -> impl Strategy<Value = Vec<u8>> {
    let token = prop_oneof![
        Just(b"*".to_vec()),
        Just(b"$".to_vec()),
        Just(b"\r\n".to_vec()),
        Just(b"\"".to_vec()),
        Just(b"-1".to_vec()),
        Just(b"2147483648".to_vec()),
        (0u32..100).prop_map(|n| n.to_string().into_bytes()),
        proptest::collection::vec(any::<u8>(), 0..8),
        Just(b"SET k v".to_vec()),
    ];
    proptest::collection::vec(token, 0..40).prop_map(|parts| parts.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_bytes_never_panic(input in proptest::collection::vec(any::<u8>(), 0..512), chunk in 1usize..64) {
        feed(&input, chunk, &Limits::DEFAULT);
        feed(&input, chunk, &Limits::UNAUTHENTICATED);
    }

    #[test]
    fn resp_shaped_bytes_never_panic(input in resp_like(), chunk in 1usize..64) {
        let tight = Limits { args_max: 4, bulk_len_max_bytes: 16 };
        feed(&input, chunk, &tight);
        feed(&input, chunk, &Limits::DEFAULT);
    }

    #[test]
    fn chunking_does_not_change_the_result(cmds in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..20), 1..6), chunk in 1usize..16) {
        let mut input = Vec::new();
        for c in &cmds {
            input.extend_from_slice(format!("*2\r\n$4\r\nECHO\r\n${}\r\n", c.len()).as_bytes());
            input.extend_from_slice(c);
            input.extend_from_slice(b"\r\n");
        }
        prop_assert_eq!(feed(&input, chunk, &Limits::DEFAULT), cmds.len());
        prop_assert_eq!(feed(&input, input.len(), &Limits::DEFAULT), cmds.len());
    }
}

#[test]
fn announced_sizes_allocate_nothing_up_front() {
    // A client announcing a huge command gets nothing reserved for it: the
    // parser's memory follows the bytes that arrived.
    let mut parser = Parser::new();
    let input = b"*1000000\r\n$536870912\r\nabc";
    assert_eq!(parser.parse(input, &Limits::DEFAULT), Ok(None));
    assert!(std::mem::size_of_val(&parser) < 256);
}
