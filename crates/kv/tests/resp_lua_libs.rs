//! Byte-level tests of the Lua libraries scripts get (`cjson`, `cmsgpack`,
//! `bit`, `struct`), through EVAL: each script's reply is the one Redis
//! 7.0.15 gives (error replies name the script's SHA1, filled in here), and
//! decoding arbitrary bytes always answers.

mod common;
mod lua_libs_cases;

use common::{resp, Raw, TestServer};
use lua_libs_cases::{BIT, CJSON, CMSGPACK, STRUCT};
use std::io::{Read, Write};

use proptest::prelude::*;

/// Runs `script` with no keys and compares the reply with `expected`
/// (`SHA` standing for the script's SHA1); a mismatch is described.
fn run_script(c: &mut Raw, script: &str, expected: &[u8]) -> Option<String> {
    let sha = sha1_smol::Sha1::from(script.as_bytes())
        .digest()
        .to_string();
    let marker: &[u8] = b"script: SHA";
    let expected = match expected.windows(marker.len()).position(|w| w == marker) {
        Some(at) => {
            let mut out = expected[..at].to_vec();
            out.extend_from_slice(format!("script: {sha}").as_bytes());
            out.extend_from_slice(&expected[at + marker.len()..]);
            out
        }
        None => expected.to_vec(),
    };
    c.stream
        .write_all(&resp(&["EVAL", script, "0"]))
        .expect("send");
    let got = read_reply(c);
    (got != expected).then(|| {
        format!(
            "script {script:?}\n  got      {:?}\n  expected {:?}",
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&expected)
        )
    })
}

#[track_caller]
fn check_script(c: &mut Raw, script: &str, expected: &[u8]) {
    if let Some(mismatch) = run_script(c, script, expected) {
        panic!("{mismatch}");
    }
}

/// Runs each case on a fresh server, in order (cjson settings persist
/// from one script to the next, as in Redis), and reports every mismatch.
fn run_cases(cases: &[(&str, &[u8])]) {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    let mismatches: Vec<String> = cases
        .iter()
        .filter_map(|(script, expected)| run_script(&mut c, script, expected))
        .collect();
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

#[test]
fn cjson_replies_as_redis() {
    run_cases(CJSON);
}

#[test]
fn cmsgpack_replies_as_redis() {
    run_cases(CMSGPACK);
}

#[test]
fn bit_replies_as_redis() {
    run_cases(BIT);
}

#[test]
fn struct_replies_as_redis() {
    run_cases(STRUCT);
}

/// Reads one whole reply (any RESP2 type) from `c`.
fn read_reply(c: &mut Raw) -> Vec<u8> {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while !line.ends_with(b"\r\n") {
        c.stream.read_exact(&mut byte).expect("reply");
        line.push(byte[0]);
    }
    let n: i64 = std::str::from_utf8(&line[1..line.len() - 2])
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(-1);
    match line[0] {
        b'$' if n >= 0 => {
            let mut body = vec![0u8; n as usize + 2];
            c.stream.read_exact(&mut body).expect("bulk");
            line.extend_from_slice(&body);
        }
        b'*' if n > 0 => {
            for _ in 0..n {
                let item = read_reply(c);
                line.extend_from_slice(&item);
            }
        }
        _ => {}
    }
    line
}

/// Runs `script` under `pcall` over each generated input (as ARGV[1])
/// against one server, checking every call answers with a reply.
fn fuzz(script: &str, inputs: impl Strategy<Value = Vec<Vec<u8>>>, cases: u32) {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let c = std::cell::RefCell::new(server.raw());
    let config = ProptestConfig::with_cases(cases);
    let mut runner = proptest::test_runner::TestRunner::new(config);
    runner
        .run(&inputs, |args| {
            let mut command = format!("*{}\r\n$4\r\nEVAL\r\n", args.len() + 3).into_bytes();
            command.extend_from_slice(
                format!("${}\r\n{script}\r\n$1\r\n0\r\n", script.len()).as_bytes(),
            );
            for arg in &args {
                command.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
                command.extend_from_slice(arg);
                command.extend_from_slice(b"\r\n");
            }
            let mut c = c.borrow_mut();
            c.stream.write_all(&command).expect("send");
            let reply = read_reply(&mut c);
            prop_assert!(reply.first() == Some(&b'*'), "reply {:?}", reply);
            Ok(())
        })
        .unwrap();
    // The server still answers afterwards.
    c.borrow_mut().check(b"PING\r\n", b"+PONG\r\n");
}

/// Bytes drawn mostly from `alphabet` pieces, so inputs get past the first
/// byte often.
fn pieces(alphabet: &'static [&'static [u8]], max: usize) -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        3 => proptest::sample::select(alphabet).prop_map(<[u8]>::to_vec),
        1 => proptest::collection::vec(any::<u8>(), 0..4),
    ];
    proptest::collection::vec(piece, 0..max).prop_map(|parts| parts.concat())
}

const JSON_PIECES: &[&[u8]] = &[
    b"{",
    b"}",
    b"[",
    b"]",
    b",",
    b":",
    b"\"",
    b"\"a\"",
    b"1",
    b"-2.5e3",
    b"0x1F",
    b"true",
    b"false",
    b"null",
    b"nan",
    b"-Infinity",
    b"\\u00e9",
    b"\\ud83d\\ude00",
    b"\\",
    b" ",
    b"\0",
];

const MSGPACK_PIECES: &[&[u8]] = &[
    b"\x91",
    b"\x9f",
    b"\x81",
    b"\x8f",
    b"\xdc\x00\x02",
    b"\xde\x00\x01",
    b"\xdd\x00\x00\x00\x01",
    b"\xc0",
    b"\xc2",
    b"\xc3",
    b"\xca",
    b"\xcb",
    b"\xcc",
    b"\xcf",
    b"\xd3",
    b"\xd9\x01",
    b"\xa3",
    b"\xdb\x00\x00\x00\x02",
    b"\x7f",
    b"\xe0",
    b"\xc1",
];

const STRUCT_FORMATS: &[&[u8]] = &[
    b"<", b">", b"!", b"!4", b"b", b"B", b"h", b"H", b"l", b"L", b"T", b"i", b"I3", b"i16", b"c",
    b"c0", b"c2", b"s", b"f", b"d", b"x", b" ", b"9", b"z",
];

#[test]
fn decoding_arbitrary_bytes_always_answers() {
    fuzz(
        "return {pcall(cjson.decode, ARGV[1])}",
        pieces(JSON_PIECES, 24).prop_map(|b| vec![b]),
        400,
    );
    fuzz(
        "return {pcall(cmsgpack.unpack, ARGV[1])}",
        pieces(MSGPACK_PIECES, 24).prop_map(|b| vec![b]),
        400,
    );
    fuzz(
        "return {pcall(struct.unpack, ARGV[1], ARGV[2], tonumber(ARGV[3]))}",
        (
            pieces(STRUCT_FORMATS, 8),
            proptest::collection::vec(any::<u8>(), 0..40),
            -2i64..50,
        )
            .prop_map(|(f, d, start)| vec![f, d, start.to_string().into_bytes()]),
        400,
    );
}

#[test]
fn deep_nesting_stops_at_the_c_limits() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    // MessagePack arrays nest 3999 deep; the 4000th runs into the C
    // decoder's stack limit, with its message.
    let script = "local ok = pcall(cmsgpack.unpack, string.rep('\\145', 3999) .. '\\1') return ok";
    check_script(&mut c, script, b":1\r\n");
    let script = "return {pcall(cmsgpack.unpack, string.rep('\\145', 4000) .. '\\1')}";
    check_script(
        &mut c,
        script,
        b"*2\r\n$-1\r\n$51\r\nstack overflow (in function mp_decode_to_lua_array)\r\n",
    );
    // JSON nesting within the configured limit decodes.
    let script = "cjson.decode_max_depth(3000) \
                  local t = cjson.decode(string.rep('[', 2500) .. string.rep(']', 2500)) \
                  cjson.decode_max_depth(1000) return type(t)";
    check_script(&mut c, script, b"$5\r\ntable\r\n");
}

#[test]
fn library_values_reach_resp3_clients_as_in_redis() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    c.stream.write_all(&resp(&["HELLO", "3"])).expect("send");
    read_resp3_hello(&mut c);
    let cases: &[(&str, &[u8])] = &[
        (
            r#"return cjson.decode('[1,2.5,"a",true,{"k":null}]')"#,
            b"*5\r\n:1\r\n:2\r\n$1\r\na\r\n:1\r\n*0\r\n",
        ),
        (
            "return {cmsgpack.unpack(cmsgpack.pack(1.5, 'x', false))}",
            b"*3\r\n:1\r\n$1\r\nx\r\n_\r\n",
        ),
        (
            "return {bit.tobit(2^32+1), struct.size('>i')}",
            b"*2\r\n:1\r\n:4\r\n",
        ),
        (
            "return cjson.decode('[')",
            b"-ERR user_script:1: Expected value but found T_END at character 2 script: SHA, on @user_script:1.\r\n",
        ),
    ];
    for (script, expected) in cases {
        check_script(&mut c, script, expected);
    }
}

/// Skips the map HELLO 3 answers with (its values are flat: strings,
/// numbers and one array of modules).
fn read_resp3_hello(c: &mut Raw) {
    let mut byte = [0u8; 1];
    let mut line = Vec::new();
    while !line.ends_with(b"\r\n") {
        c.stream.read_exact(&mut byte).expect("hello");
        line.push(byte[0]);
    }
    assert_eq!(line[0], b'%', "{}", String::from_utf8_lossy(&line));
    let pairs: usize = std::str::from_utf8(&line[1..line.len() - 2])
        .unwrap()
        .parse()
        .unwrap();
    for _ in 0..pairs * 2 {
        read_reply(c);
    }
}
