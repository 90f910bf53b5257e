//! The bus decoder: arbitrary bytes give an error or a message, never a
//! panic; every message the encoder writes decodes to itself; and the
//! header's fields sit at the offsets Redis 7.0's layout puts them.

use ferrite_kv::cluster::msg::{self, types, Body, Gossip, Header, Message, BITMAP_LEN};
use proptest::prelude::*;

fn header(kind: u16, seed: u64) -> Header {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut slots = Box::new([0u8; BITMAP_LEN]);
    for _ in 0..rng.usize(..64) {
        msg::set_bit(&mut slots, rng.usize(..16384));
    }
    let mut sender = [0u8; 40];
    sender
        .iter_mut()
        .for_each(|b| *b = b"0123456789abcdef"[rng.usize(..16)]);
    Header {
        kind,
        port: rng.u16(..),
        count: 0,
        current_epoch: rng.u64(..),
        config_epoch: rng.u64(..),
        offset: rng.u64(..),
        sender,
        slots,
        primary: [0; 40],
        ip: "10.1.2.3".into(),
        pport: rng.u16(..),
        cport: rng.u16(..),
        flags: rng.u16(..),
        state_fail: rng.bool(),
        mflags: [rng.u8(..), 0, 0],
    }
}

fn gossip(i: u8) -> Gossip {
    Gossip {
        id: [b'a' + i % 6; 40],
        ping_sent_s: u32::from(i) * 7,
        pong_received_s: u32::from(i) * 11,
        ip: format!("127.0.0.{i}"),
        port: 7000 + u16::from(i),
        cport: 17000 + u16::from(i),
        flags: 1,
        pport: 0,
    }
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..3000)) {
        let _ = msg::announced_len(&bytes);
        let _ = msg::decode(&bytes);
    }

    #[test]
    fn a_valid_header_with_a_damaged_body_never_panics(
        kind in 0u16..12,
        count in any::<u16>(),
        body in proptest::collection::vec(any::<u8>(), 0..600),
    ) {
        let mut bytes = msg::encode(&Message { header: header(kind, 1), body: Body::Other });
        bytes[14..16].copy_from_slice(&count.to_be_bytes());
        bytes.extend_from_slice(&body);
        let len = bytes.len() as u32;
        bytes[4..8].copy_from_slice(&len.to_be_bytes());
        let _ = msg::decode(&bytes);
    }

    #[test]
    fn encoded_messages_decode_to_themselves(seed in any::<u64>(), n in 0u8..8, which in 0u8..4) {
        let (kind, body) = match which {
            0 => (types::PING, Body::Ping((0..n).map(gossip).collect())),
            1 => (types::FAIL, Body::Fail([b'f'; 40])),
            2 => (types::PUBLISH, Body::Publish(b"chan".to_vec(), vec![n; usize::from(n)])),
            _ => (types::UPDATE, Body::Update(u64::from(n), [b'e'; 40], Box::new([n; BITMAP_LEN]))),
        };
        let mut message = Message { header: header(kind, seed), body };
        let bytes = msg::encode(&message);
        if let Body::Ping(g) = &message.body {
            message.header.count = g.len() as u16;
        }
        prop_assert_eq!(msg::decode(&bytes).expect("decodes"), message);
    }
}

#[test]
fn header_fields_are_at_redis_offsets() {
    let h = header(types::PONG, 5);
    let bytes = msg::encode(&Message {
        header: h.clone(),
        body: Body::Ping(vec![gossip(1)]),
    });
    assert_eq!(&bytes[0..4], b"RCmb");
    assert_eq!(
        u32::from_be_bytes(bytes[4..8].try_into().unwrap()) as usize,
        2256 + 104
    );
    assert_eq!(bytes.len(), 2256 + 104);
    assert_eq!(u16::from_be_bytes([bytes[8], bytes[9]]), 1);
    assert_eq!(u16::from_be_bytes([bytes[10], bytes[11]]), h.port);
    assert_eq!(u16::from_be_bytes([bytes[12], bytes[13]]), types::PONG);
    assert_eq!(u16::from_be_bytes([bytes[14], bytes[15]]), 1);
    assert_eq!(
        u64::from_be_bytes(bytes[16..24].try_into().unwrap()),
        h.current_epoch
    );
    assert_eq!(&bytes[40..80], &h.sender);
    assert_eq!(&bytes[2168..2176], b"10.1.2.3");
    assert_eq!(u16::from_be_bytes([bytes[2248], bytes[2249]]), h.cport);
    assert_eq!(u16::from_be_bytes([bytes[2250], bytes[2251]]), h.flags);
    // Slot 0 is bit 0 of byte 0 in Redis's bitmap.
    let mut slots = Box::new([0u8; BITMAP_LEN]);
    msg::set_bit(&mut slots, 0);
    msg::set_bit(&mut slots, 16383);
    assert_eq!(slots[0], 1);
    assert_eq!(slots[2047], 0x80);
    // The gossip entry: ID, times, IP, then ports and flags at 94..102.
    let g = &bytes[2256..];
    assert_eq!(&g[48..57], b"127.0.0.1");
    assert_eq!(u16::from_be_bytes([g[94], g[95]]), 7001);
    assert_eq!(u16::from_be_bytes([g[96], g[97]]), 17001);
}

#[test]
fn bad_signatures_and_lengths_are_refused() {
    let mut bytes = msg::encode(&Message {
        header: header(types::PING, 2),
        body: Body::Ping(vec![]),
    });
    assert!(msg::decode(&bytes).is_ok());
    bytes[0] = b'X';
    assert_eq!(msg::decode(&bytes), Err(msg::DecodeError::Signature));
    bytes[0] = b'R';
    bytes[4..8].copy_from_slice(&100u32.to_be_bytes());
    assert_eq!(msg::decode(&bytes), Err(msg::DecodeError::Length(100)));
    assert_eq!(msg::announced_len(&bytes[..5]), Ok(None));
}
