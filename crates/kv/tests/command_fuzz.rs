//! Every command of the table with random arguments: keys of each type,
//! numbers at the edges of their ranges, option words, and bytes that are
//! not text. Whatever a client sends, the server answers it with exactly
//! one reply and keeps the connection; a panic in a command would end the
//! server thread and fail here with the command that caused it.
//!
//! `FERRITE_FUZZ_SEED` picks another seed and `FERRITE_FUZZ_COMMANDS`
//! another count (the default run is short).

mod common;

use std::io::Write;

use common::repl::try_read_reply;
use common::{resp_bytes, Raw, TestServer};
use ferrite_kv::commands::all_commands;

/// Commands left out: those that block, change the connection's protocol
/// or reply mode, queue what follows, reach other servers, stop the
/// server, or change who may run the rest; and PFSELFTEST, seconds of
/// work in a debug build with no arguments to vary.
#[rustfmt::skip]
const LEFT_OUT: &[&str] = &[
    "acl", "asking", "auth", "bgrewriteaof", "bgsave", "blmove", "blmpop", "blpop", "brpop",
    "brpoplpush", "bzmpop", "bzpopmax", "bzpopmin", "client", "cluster", "config", "debug",
    "failover", "hello", "migrate", "monitor", "multi", "pfselftest", "psubscribe", "psync",
    "punsubscribe", "quit", "readonly", "readwrite", "replicaof", "reset", "save", "shutdown",
    "slaveof", "ssubscribe", "subscribe", "sunsubscribe", "sync", "unsubscribe", "wait",
    "waitaof", "xread", "xreadgroup",
];

/// Keys that hold each type (see [`SETUP`]), and some that do not exist.
#[rustfmt::skip]
const KEYS: &[&str] = &[
    "str", "num", "list", "hash", "set", "zset", "stream", "hll", "geo", "none", "other",
];

/// Values that exist before every round of commands.
#[rustfmt::skip]
const SETUP: &[&[&str]] = &[
    &["SET", "str", "hello world"],
    &["SET", "num", "12345"],
    &["RPUSH", "list", "a", "b", "c", "1", "2"],
    &["HSET", "hash", "f", "v", "n", "1", "x", "1.5"],
    &["SADD", "set", "1", "2", "a", "b"],
    &["ZADD", "zset", "1", "a", "2", "b", "3", "c"],
    &["XADD", "stream", "1-1", "f", "v"],
    &["XADD", "stream", "2-1", "f", "v"],
    &["XGROUP", "CREATE", "stream", "g", "0"],
    &["PFADD", "hll", "a", "b", "c"],
    &["GEOADD", "geo", "13.361389", "38.115556", "p", "15.087269", "37.502669", "q"],
];

/// Numbers, and text a number parser must refuse. No value here makes a
/// command allocate hundreds of megabytes (a large SETRANGE offset).
#[rustfmt::skip]
const NUMBERS: &[&str] = &[
    "0", "1", "-1", "2", "3", "7", "64", "-100", "100", "1000", "65536", "9223372036854775807",
    "-9223372036854775808", "9223372036854775806", "18446744073709551615", "-2147483648",
    "4611686018427387904", "1.5", "-0.5", "inf", "-inf", "+inf", "nan", "1e308", "-1e308",
    "5e-324", "0x10", "", " 1", "1 ", "(1", "[a", "(a", "-", "+", "0-0", "0-1", "1-*", "*", "$",
    ">", "#3", "u8", "i64", "u63", "i1", "180", "-85.05112879", "1e400",
];

/// Option words of many commands.
#[rustfmt::skip]
const WORDS: &[&str] = &[
    "WITHSCORES", "LIMIT", "COUNT", "MATCH", "TYPE", "BYSCORE", "BYLEX", "REV", "NX", "XX", "GT",
    "LT", "CH", "INCR", "EX", "PX", "EXAT", "PXAT", "KEEPTTL", "GET", "PERSIST", "LEFT", "RIGHT",
    "BEFORE", "AFTER", "MIN", "MAX", "SUM", "WEIGHTS", "AGGREGATE", "STORE", "STOREDIST", "BY",
    "ASC", "DESC", "ALPHA", "WITHCOORD", "WITHDIST", "WITHHASH", "ANY", "FROMMEMBER", "FROMLONLAT",
    "BYRADIUS", "BYBOX", "m", "km", "MAXLEN", "MINID", "NOMKSTREAM", "IDLE", "TIME", "RETRYCOUNT",
    "FORCE", "JUSTID", "FULL", "OVERFLOW", "WRAP", "SAT", "FAIL", "SET", "INCRBY", "BIT", "BYTE",
    "AND", "OR", "XOR", "NOT", "RANK", "MAXLEN", "IDX", "LEN", "MINMATCHLEN", "WITHMATCHLEN",
    "REPLACE", "ABSTTL", "IDLETIME", "FREQ", "DB", "COPY", "SCHEDULE", "ASYNC", "SYNC", "USAGE",
    "SAMPLES", "ENCODING", "HELP", "NUMSUB", "CHANNELS",
];

/// A small generator (xorshift), so a seed gives the same commands.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from.get(self.below(from.len())).copied().unwrap_or("")
    }
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Every command and subcommand not left out, as the words that name it.
fn command_names() -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for spec in all_commands() {
        if LEFT_OUT.contains(&spec.name) {
            continue;
        }
        if spec.subcommands.is_empty() {
            out.push(vec![spec.name.to_string()]);
        }
        for sub in spec.subcommands {
            out.push(vec![spec.name.to_string(), sub.name.to_string()]);
        }
    }
    out
}

/// One argument: a key, a number, an option word or a few random bytes.
fn argument(rng: &mut Rng) -> Vec<u8> {
    match rng.below(4) {
        0 => rng.pick(KEYS).as_bytes().to_vec(),
        1 => rng.pick(NUMBERS).as_bytes().to_vec(),
        2 => rng.pick(WORDS).as_bytes().to_vec(),
        _ => (0..rng.below(6)).map(|_| rng.next() as u8).collect(),
    }
}

/// Sends `args` and a marker behind it; returns how many replies came
/// before the marker's, or the error that ended the connection.
fn replies_to(c: &mut Raw, args: &[&[u8]], marker: &str) -> std::io::Result<usize> {
    let mut request = resp_bytes(args);
    request.extend(resp_bytes(&[b"ECHO", marker.as_bytes()]));
    c.stream.write_all(&request)?;
    let echoed = format!("${}\r\n{marker}\r\n", marker.len()).into_bytes();
    let mut replies = 0;
    loop {
        let mut reply = Vec::new();
        try_read_reply(&mut c.stream, &mut reply)?;
        if reply == echoed {
            return Ok(replies);
        }
        replies += 1;
    }
}

#[test]
fn random_commands_get_one_reply_each_and_never_end_the_server() {
    let seed = env_number("FERRITE_FUZZ_SEED", 1) | 1;
    let count = env_number("FERRITE_FUZZ_COMMANDS", 20000);
    let names = command_names();
    assert!(
        names.len() > 200,
        "the table lists {} commands",
        names.len()
    );
    let dir = tempfile::tempdir().expect("dir");
    let server = TestServer::start(dir.path());
    let mut c = server.raw();
    let mut rng = Rng(seed);
    for i in 0..count {
        if i % 200 == 0 {
            for setup in SETUP {
                let args: Vec<&[u8]> = setup.iter().map(|a| a.as_bytes()).collect();
                let got = replies_to(&mut c, &args, "setup");
                assert!(matches!(got, Ok(1)), "{setup:?}: {got:?}");
            }
        }
        let mut words: Vec<Vec<u8>> = match names.get(rng.below(names.len())) {
            Some(name) => name.iter().map(|w| w.as_bytes().to_vec()).collect(),
            None => continue,
        };
        for _ in 0..rng.below(8) {
            words.push(argument(&mut rng));
        }
        let args: Vec<&[u8]> = words.iter().map(Vec::as_slice).collect();
        let shown: Vec<String> = words
            .iter()
            .map(|w| String::from_utf8_lossy(w).into_owned())
            .collect();
        match replies_to(&mut c, &args, &format!("marker{i}")) {
            Ok(1) => {}
            Ok(n) => panic!("{n} replies to {shown:?} (seed {seed}, command {i})"),
            Err(e) => panic!("{shown:?} ended the connection: {e} (seed {seed}, command {i})"),
        }
    }
}
