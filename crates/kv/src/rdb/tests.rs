//! Payloads real Redis 7.0.15 produced for each encoding, decoded here;
//! round trips of what DUMP writes; and arbitrary bytes, which must give
//! an error and never a panic.

use proptest::prelude::*;

use super::*;
use crate::types::stream::StreamId;

fn hex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex digit pair"))
        .collect()
}

fn strings(value: &Value) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = match value {
        Value::Str(s) => vec![s.to_vec()],
        Value::List(l) => l.iter().map(|e| e.to_vec()).collect(),
        Value::Set(s) => s.iter().map(|e| e.to_vec()).collect(),
        Value::Hash(h) => h
            .iter()
            .map(|(f, v)| [&f[..], b"=", &v[..]].concat())
            .collect(),
        Value::ZSet(z) => z
            .iter()
            .map(|(m, s)| [m, b"=", s.to_string().as_bytes()].concat())
            .collect(),
        Value::Stream(s) => s
            .range(StreamId::MIN, StreamId::MAX, false)
            .map(|e| {
                let fields = e.fields.iter().map(|(f, v)| [&f[..], b"=", v].concat());
                [
                    e.id.text().into_bytes(),
                    fields.collect::<Vec<_>>().concat(),
                ]
                .concat()
            })
            .collect(),
    };
    if !matches!(value, Value::List(_) | Value::Stream(_)) {
        out.sort();
    }
    out
}

fn check(payload: &str, kind: &str, expected: &[&str]) {
    let value = restore(&hex(payload)).expect("Redis's payload restores");
    assert_eq!(value.type_name(), kind);
    let expected: Vec<Vec<u8>> = expected.iter().map(|e| e.as_bytes().to_vec()).collect();
    assert_eq!(strings(&value), expected, "payload {payload}");
    // What DUMP writes for it reads back to the same value.
    assert_eq!(restore(&dump(&value)).as_ref(), Ok(&value));
}

#[test]
fn redis_strings_raw_integer_and_compressed() {
    check("00036261720a00e6be4960ee66fd17", "string", &["bar"]);
    check("00c139300a009d94ea2793fc08b9", "string", &["12345"]);
    check("00c290eefeff0a002875de7b13eb2800", "string", &["-70000"]);
    let long = "abc".repeat(40);
    check(
        "00c30b40780361626361e069020162630a00c494a1702ae23e06",
        "string",
        &[long.as_str()],
    );
}

#[test]
fn redis_collections_in_their_compact_and_plain_encodings() {
    check(
        "120102121200000004008161020101816202ded402ff0a00583e1f56153956f2",
        "list",
        &["a", "1", "b", "-300"],
    );
    check(
        "0b0e0200000003000000fdff010002000a00d1b78ed9bc07c27f",
        "set",
        &["-3", "1", "2"],
    );
    check(
        "02030162016101630a0099cc80dd5982d255",
        "set",
        &["a", "b", "c"],
    );
    check(
        "1012120000000400816602817602816e020501ff0a008490939f57b4f3c2",
        "hash",
        &["f=v", "n=5"],
    );
    check(
        "0402016ec005016601760a008e8cc45af376f18b",
        "hash",
        &["f=v", "n=5"],
    );
    check(
        "111d1d0000000600816302842d696e660581610283312e35048162020201ff0a0017dce91ab8436c89",
        "zset",
        &["a=1.5", "b=2", "c=-inf"],
    );
    check(
        "0503016200000000000000400161000000000000f83f0163000000000000f0ff0a0071650286e46a3ac7",
        "zset",
        &["a=1.5", "b=2", "c=-inf"],
    );
}

#[test]
fn a_wrong_checksum_or_newer_version_is_refused() {
    let mut payload = hex("00036261720a00e6be4960ee66fd17");
    let last = payload.len() - 1;
    payload[last] ^= 1;
    assert_eq!(restore(&payload), Err(RestoreError::VersionOrChecksum));
    assert_eq!(restore(b"short"), Err(RestoreError::VersionOrChecksum));
    let mut newer = vec![0, 1, b'x'];
    newer.extend_from_slice(&(RDB_VERSION + 1).to_le_bytes());
    let crc = crc64(0, &newer);
    newer.extend_from_slice(&crc.to_le_bytes());
    assert_eq!(restore(&newer), Err(RestoreError::VersionOrChecksum));
}

/// A payload around `body` with a correct footer, so the decoder itself
/// is exercised rather than the checksum.
fn sealed(body: &[u8]) -> Vec<u8> {
    let mut out = body.to_vec();
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64(0, &out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

#[test]
fn empty_collections_and_unknown_types_are_bad_data() {
    for body in [&[1u8, 0][..], &[2, 0], &[4, 0], &[5, 0], &[15, 0], &[200]] {
        assert_eq!(restore(&sealed(body)), Err(RestoreError::BadFormat));
    }
    // A duplicate set member.
    assert_eq!(
        restore(&sealed(&[2, 2, 1, b'a', 1, b'a'])),
        Err(RestoreError::BadFormat)
    );
}

#[test]
fn huge_claimed_lengths_are_refused_before_any_allocation() {
    // An LZF string claiming 2^40 bytes from 1 compressed byte.
    let mut body = vec![0, 0xc3, 1, 0x81];
    body.extend_from_slice(&(1u64 << 40).to_be_bytes());
    body.push(0);
    assert_eq!(restore(&sealed(&body)), Err(RestoreError::BadFormat));
    // A sorted set claiming 2^32 members in a few bytes.
    let mut body = vec![5, 0x80];
    body.extend_from_slice(&u32::MAX.to_be_bytes());
    body.extend_from_slice(&[1, b'a']);
    assert_eq!(restore(&sealed(&body)), Err(RestoreError::BadFormat));
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = restore(&bytes);
        let _ = restore(&sealed(&bytes));
    }

    #[test]
    fn mutated_redis_payloads_never_panic(
        which in 0usize..4,
        at in any::<prop::sample::Index>(),
        byte in any::<u8>(),
    ) {
        let bodies = [
            "120102121200000004008161020101816202ded402ff",
            "0b0e0200000003000000fdff01000200",
            "111d1d0000000600816302842d696e660581610283312e35048162020201ff",
            "00c30b40780361626361e069020162630a",
        ];
        let mut body = hex(bodies[which]);
        let i = at.index(body.len());
        body[i] = byte;
        let _ = restore(&sealed(&body));
    }
}

/// What Redis 7.0.15 dumped for a stream: entries 1-1 (a, b) and 5-0 (c)
/// with 1-2 deleted between them, group `g` with 1-1 pending for `alice`,
/// and a consumer `bob` with nothing pending.
const REDIS_STREAM_DUMP: &str = "130110000000000000000100000000000000014046460000001900020101010201816102816202000102010001000101018568656c6c6f0605010301000101010201817802050100010401dfff020101816302f2e09304040601ff0205000101010203010167010181ffffffffffffffff0100000000000000010000000000000001ab19ad17a2010000010205616c696365ab19ad17a2010000010000000000000001000000000000000103626f62b819ad17a2010000000a00149651899d0d476a";

#[test]
fn a_redis_stream_restores_and_dumps_back_equal() {
    let Value::Stream(s) = restore(&hex(REDIS_STREAM_DUMP)).expect("valid stream payload") else {
        panic!("not a stream");
    };
    assert_eq!((s.length, s.entries_added), (2, 3));
    assert_eq!(
        (s.last_id.text(), s.max_deleted_id.text()),
        ("5-0".into(), "1-2".into())
    );
    let v = Value::Stream(s.clone());
    assert_eq!(
        strings(&v),
        vec![b"1-1a=1b=hello".to_vec(), b"5-0c=300000".to_vec()]
    );
    let g = &s.groups[&b"g"[..]];
    let pending = &g.pel[&StreamId { ms: 1, seq: 1 }];
    assert_eq!(
        (&pending.consumer[..], pending.delivery_count),
        (&b"alice"[..], 1)
    );
    assert!(g.consumers[&b"bob"[..]].pel.is_empty());
    assert_eq!(restore(&dump(&v)), Ok(v));
}

proptest! {
    #[test]
    fn mutated_stream_payloads_never_panic(at in any::<prop::sample::Index>(), byte in any::<u8>()) {
        let mut payload = hex(REDIS_STREAM_DUMP);
        let body_len = payload.len() - 10;
        let i = at.index(body_len);
        payload[i] = byte;
        let _ = restore(&sealed(&payload[..body_len]));
    }
}
