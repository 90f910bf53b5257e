//! What a server reads at start-up or from a master, damaged: an RDB file
//! (or a full sync's payload), a cluster `nodes.conf`, a configuration
//! file and an ACL file. Each reader must answer with an error or a
//! result, never a panic, whatever the bytes. The RDB cases start from a
//! well-formed file whose checksum is zero (a writer that computed none),
//! so that a damaged body is decoded in full rather than refused at the
//! footer.

mod common;

use common::hex;
use ferrite_kv::cluster::state::parse_config;
use ferrite_kv::config::Config;
use ferrite_kv::keyspace::Keyspace;
use ferrite_kv::rdb::dump::{leading_aux, load_bytes};
use ferrite_kv::rdb::file::decode;
use proptest::prelude::*;

/// Object bodies Redis 7.0.15 wrote (type byte first): a quicklist of
/// listpacks, an intset, a listpack sorted set, and an LZF-compressed
/// string.
const BODIES: [&str; 4] = [
    "120102121200000004008161020101816202ded402ff",
    "0b0e0200000003000000fdff01000200",
    "111d1d0000000600816302842d696e660581610283312e35048162020201ff",
    "00c30b40780361626361e06902016263",
];

/// A length-prefixed RDB string of fewer than 64 bytes.
fn short_string(out: &mut Vec<u8>, text: &[u8]) {
    out.push(text.len() as u8);
    out.extend_from_slice(text);
}

/// A whole RDB file: header, auxiliary fields, two databases with their
/// sizes, one key with an expiry, the four objects above, EOF and a zero
/// checksum.
fn well_formed_rdb() -> Vec<u8> {
    let mut out = b"REDIS0010".to_vec();
    for (name, value) in [(&b"redis-ver"[..], &b"7.0.15"[..]), (b"repl-offset", b"0")] {
        out.push(0xfa);
        short_string(&mut out, name);
        short_string(&mut out, value);
    }
    for db in [0u8, 3] {
        out.extend_from_slice(&[0xfe, db, 0xfb, 4, 1]);
        out.push(0xfc);
        out.extend_from_slice(&4_102_444_800_000i64.to_le_bytes());
        for (i, body) in BODIES.iter().enumerate() {
            let body = hex(body);
            let Some((&kind, object)) = body.split_first() else {
                continue;
            };
            out.push(kind);
            short_string(&mut out, format!("key{i}").as_bytes());
            out.extend_from_slice(object);
        }
    }
    out.push(0xff);
    out.extend_from_slice(&[0; 8]);
    out
}

/// Runs every reader of RDB bytes over `bytes`.
fn read_rdb(bytes: &[u8]) {
    let _ = decode(bytes, 16, |_| {});
    let _ = leading_aux(bytes);
    let mut keyspace = Keyspace::new(16);
    let _ = load_bytes(bytes, &mut keyspace, false, 0);
}

#[test]
fn the_well_formed_file_loads() {
    let mut keys = 0;
    decode(&well_formed_rdb(), 16, |_| keys += 1).expect("decodes");
    assert_eq!(keys, 2 * BODIES.len());
    let mut keyspace = Keyspace::new(16);
    load_bytes(&well_formed_rdb(), &mut keyspace, false, 0).expect("loads");
    assert_eq!(keyspace.db(3).len(), BODIES.len());
}

/// A good value three times in four, else one of `bad`.
fn mostly(good: &'static str, bad: &[&'static str]) -> BoxedStrategy<String> {
    prop_oneof![
        3 => Just(good.to_string()),
        1 => prop::sample::select(bad.to_vec()).prop_map(String::from),
    ]
    .boxed()
}

/// A line of `nodes.conf`: the eight fields and slot specifications,
/// each mostly good, the line cut short after any field half the time.
fn node_line() -> impl Strategy<Value = String> {
    const ID: &str = "e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca";
    let fields = vec![
        mostly(ID, &["-", "xyz", "67ed2db8d677e59ec4a4cefb06858cf2a1a89fa"]),
        mostly(
            "127.0.0.1:30001@40001,host",
            &[":0@0", "127.0.0.1", "a:b@c", "@", "1:2@", ":99999"],
        ),
        mostly(
            "myself,master",
            &["slave", "fail?,handshake,noaddr", "nosuchflag", ","],
        ),
        mostly("-", &[ID, "xyz"]),
        mostly("0", &["-1", "18446744073709551616", "x"]),
        mostly("0", &["-1", "x"]),
        mostly("1", &["-1", "x", ""]),
        mostly("connected", &["disconnected", "x"]),
        mostly(
            "0-16383",
            &[
                "16384",
                "5-3",
                "[7->-e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca]",
                "[7-<-x]",
                "[]",
                "-",
            ],
        ),
    ];
    (fields, any::<bool>(), any::<prop::sample::Index>()).prop_map(|(mut words, cut, at)| {
        if cut {
            words.truncate(at.index(words.len() + 1));
        }
        words.join(" ")
    })
}

/// Values for configuration directives: numbers, units, switches, the
/// client classes, and broken quoting.
const CONFIG_VALUES: &[&str] = &[
    "0",
    "-1",
    "1",
    "1gb",
    "100%",
    "-5%",
    "yes",
    "no",
    "\"",
    "'",
    "\"a\\x4\"",
    "\"\\\"",
    "\"a\"b",
    "normal",
    "slave",
    "pubsub",
    "KEA",
    "$",
    "9223372036854775808",
    "1e400",
    "",
    "\"\"",
    "900",
    "0-3",
    "a,b",
];

/// Lines of an ACL file, rules drawn from a vocabulary that includes
/// every rule's prefix alone and unbalanced selectors.
fn acl_text() -> impl Strategy<Value = String> {
    let rule = prop::sample::select(vec![
        "on",
        "off",
        ">pw",
        "<pw",
        "#",
        "!",
        ">",
        "<",
        "~*",
        "~",
        "%R~k",
        "%",
        "%RW",
        "%X~k",
        "&",
        "&ch",
        "+@all",
        "-@",
        "+@",
        "+",
        "-",
        "+get",
        "-set",
        "+config|get",
        "+select|0",
        "+config|",
        "|",
        "(~x +get)",
        "(",
        ")",
        "()",
        "(+@nosuch)",
        "allkeys",
        "resetkeys",
        "reset",
        "nopass",
        "clearselectors",
        "allchannels",
        "resetchannels",
        "",
    ]);
    let line = (
        prop::sample::select(vec!["user", "user", "nope", ""]),
        prop::sample::select(vec!["default", "alice", "", "a b"]),
        prop::collection::vec(rule, 0..6),
    )
        .prop_map(|(word, name, rules)| format!("{word} {name} {}", rules.join(" ")));
    prop::collection::vec(line, 1..5).prop_map(|lines| lines.join("\n"))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn damaged_rdb_files_never_panic(
        changes in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        cut in any::<prop::sample::Index>(),
        truncate in any::<bool>(),
    ) {
        let mut bytes = well_formed_rdb();
        for (at, byte) in changes {
            let i = at.index(bytes.len());
            bytes[i] = byte;
        }
        if truncate {
            bytes.truncate(cut.index(bytes.len()));
        }
        read_rdb(&bytes);
    }

    #[test]
    fn arbitrary_rdb_bodies_never_panic(body in prop::collection::vec(any::<u8>(), 0..400)) {
        let mut bytes = b"REDIS0010".to_vec();
        bytes.extend_from_slice(&body);
        read_rdb(&bytes);
    }

    #[test]
    fn damaged_nodes_conf_never_panics(
        lines in prop::collection::vec(node_line(), 0..4),
        vars in prop::sample::select(vec![
            "", "vars currentEpoch 5 lastVoteEpoch 2", "vars currentEpoch", "vars x y z",
        ]),
    ) {
        let text = format!("{}\n{vars}\n", lines.join("\n"));
        let _ = parse_config(&text, 7000, 17000);
    }

    #[test]
    fn damaged_acl_files_never_panic(text in acl_text(), all_channels in any::<bool>()) {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("users.acl");
        std::fs::write(&path, &text).expect("write");
        let _ = ferrite_kv::users::load_file("users.acl", &path, all_channels);
    }
}

/// Every directive, as a file line with up to five values from
/// [`CONFIG_VALUES`], 64 times each (a seeded generator, so a failure
/// repeats): a whole file stops at its first bad line, so each line is
/// applied on its own.
#[test]
fn every_directive_with_damaged_values_is_refused_or_taken() {
    let mut rng = fastrand::Rng::with_seed(7);
    for directive in ferrite_kv::config::table::DIRECTIVES {
        if directive.name == "include" {
            continue;
        }
        for _ in 0..64 {
            let values: Vec<&str> = (0..rng.usize(0..6))
                .filter_map(|_| CONFIG_VALUES.get(rng.usize(..CONFIG_VALUES.len())).copied())
                .collect();
            let line = format!("{} {}", directive.name, values.join(" "));
            let mut config = Config::default();
            // The configuration is dropped after a panic, never used.
            let applied = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let _ = config.apply_text(&line, "fuzzed.conf");
            }));
            assert!(applied.is_ok(), "{} {values:?} panicked", directive.name);
        }
    }
}
