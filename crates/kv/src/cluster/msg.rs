//! The cluster bus's binary messages, Redis 7.0's layout
//! (`docs/cluster.md`): a 2,256-byte header, integers in network byte
//! order, then a body by type. [`decode`] checks every length before it
//! reads and returns an error, never panics, on any input.

use super::node::{NodeId, ID_LEN};
use super::slot::SLOTS;

/// The signature every message starts with.
pub const SIGNATURE: &[u8; 4] = b"RCmb";
/// The protocol version.
pub const VERSION: u16 = 1;
/// Header length: every message is at least this long.
pub const HEADER_LEN: usize = 2256;
/// One gossip entry.
pub const GOSSIP_LEN: usize = 104;
/// Bytes of an IP address field.
pub const IP_LEN: usize = 46;
/// Bytes of the slots bitmap.
pub const BITMAP_LEN: usize = SLOTS / 8;
/// The longest message accepted (a PUBLISH of large payloads may be
/// long; anything past this closes the link).
pub const MESSAGE_LEN_MAX: usize = 64 << 20;

const _: () = assert!(80 + BITMAP_LEN == 2128);
const _: () = assert!(2168 + IP_LEN == 2214);

/// Message types.
pub mod types {
    pub const PING: u16 = 0;
    pub const PONG: u16 = 1;
    pub const MEET: u16 = 2;
    pub const FAIL: u16 = 3;
    pub const PUBLISH: u16 = 4;
    pub const FAILOVER_AUTH_REQUEST: u16 = 5;
    pub const FAILOVER_AUTH_ACK: u16 = 6;
    pub const UPDATE: u16 = 7;
    pub const MFSTART: u16 = 8;
    pub const MODULE: u16 = 9;
    pub const PUBLISHSHARD: u16 = 10;
}

/// `CLUSTER INFO`'s name of each type.
pub const TYPE_NAMES: [&str; 11] = [
    "ping",
    "pong",
    "meet",
    "fail",
    "publish",
    "auth-req",
    "auth-ack",
    "update",
    "mfstart",
    "module",
    "publishshard",
];

/// The header: what the sender says of itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    pub kind: u16,
    pub port: u16,
    pub count: u16,
    pub current_epoch: u64,
    pub config_epoch: u64,
    pub offset: u64,
    pub sender: [u8; ID_LEN],
    pub slots: Box<[u8; BITMAP_LEN]>,
    pub primary: [u8; ID_LEN],
    pub ip: String,
    pub pport: u16,
    pub cport: u16,
    pub flags: u16,
    pub state_fail: bool,
    pub mflags: [u8; 3],
}

/// One gossip entry: what the sender knows of another node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gossip {
    pub id: [u8; ID_LEN],
    pub ping_sent_s: u32,
    pub pong_received_s: u32,
    pub ip: String,
    pub port: u16,
    pub cport: u16,
    pub flags: u16,
    pub pport: u16,
}

/// A message's body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Body {
    /// PING, PONG, MEET: gossip entries.
    Ping(Vec<Gossip>),
    /// FAIL: the node that failed.
    Fail([u8; ID_LEN]),
    /// PUBLISH / PUBLISHSHARD: channel and message.
    Publish(Vec<u8>, Vec<u8>),
    /// UPDATE: a node's config epoch and slots.
    Update(u64, [u8; ID_LEN], Box<[u8; BITMAP_LEN]>),
    /// Failover auth request / ack, MFSTART: the header says it all.
    Empty,
    /// A type this node reads and ignores.
    Other,
}

/// A decoded message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pub header: Header,
    pub body: Body,
}

/// Why bytes are not a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// Fewer bytes than the length field or the header needs.
    Short,
    /// Not `RCmb`.
    Signature,
    /// A length below the header's or above [`MESSAGE_LEN_MAX`].
    Length(u32),
    /// The body is too short for its type.
    Body,
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    b.get(at..at + 2)
        .map(|s| u16::from_be_bytes([s[0], s[1]]))
        .unwrap_or(0)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut out = [0u8; 4];
    if let Some(s) = b.get(at..at + 4) {
        out.copy_from_slice(s);
    }
    u32::from_be_bytes(out)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut out = [0u8; 8];
    if let Some(s) = b.get(at..at + 8) {
        out.copy_from_slice(s);
    }
    u64::from_be_bytes(out)
}

fn id_at(b: &[u8], at: usize) -> [u8; ID_LEN] {
    let mut out = [0u8; ID_LEN];
    if let Some(s) = b.get(at..at + ID_LEN) {
        out.copy_from_slice(s);
    }
    out
}

/// A NUL-padded text field.
fn text_at(b: &[u8], at: usize, len: usize) -> String {
    let field = b.get(at..at + len).unwrap_or(&[]);
    let end = field.iter().position(|&c| c == 0).unwrap_or(field.len());
    String::from_utf8_lossy(&field[..end]).into_owned()
}

/// The total length a buffer's first 8 bytes announce, once they are
/// there: `Ok(None)` while fewer than 8 bytes arrived.
pub fn announced_len(buf: &[u8]) -> Result<Option<usize>, DecodeError> {
    if buf.len() < 8 {
        return Ok(None);
    }
    if &buf[..4] != SIGNATURE {
        return Err(DecodeError::Signature);
    }
    let len = u32_at(buf, 4);
    if (len as usize) < HEADER_LEN || len as usize > MESSAGE_LEN_MAX {
        return Err(DecodeError::Length(len));
    }
    Ok(Some(len as usize))
}

/// Decodes one whole message (exactly the announced length).
pub fn decode(buf: &[u8]) -> Result<Message, DecodeError> {
    let len = announced_len(buf)?.ok_or(DecodeError::Short)?;
    if buf.len() < len {
        return Err(DecodeError::Short);
    }
    let buf = &buf[..len];
    let mut slots = Box::new([0u8; BITMAP_LEN]);
    slots.copy_from_slice(&buf[80..80 + BITMAP_LEN]);
    let header = Header {
        kind: u16_at(buf, 12),
        port: u16_at(buf, 10),
        count: u16_at(buf, 14),
        current_epoch: u64_at(buf, 16),
        config_epoch: u64_at(buf, 24),
        offset: u64_at(buf, 32),
        sender: id_at(buf, 40),
        slots,
        primary: id_at(buf, 2128),
        ip: text_at(buf, 2168, IP_LEN),
        pport: u16_at(buf, 2246),
        cport: u16_at(buf, 2248),
        flags: u16_at(buf, 2250),
        state_fail: buf[2252] != 0,
        mflags: [buf[2253], buf[2254], buf[2255]],
    };
    let body_bytes = &buf[HEADER_LEN..];
    let body = decode_body(&header, body_bytes)?;
    Ok(Message { header, body })
}

fn decode_body(header: &Header, b: &[u8]) -> Result<Body, DecodeError> {
    Ok(match header.kind {
        types::PING | types::PONG | types::MEET => {
            let count = usize::from(header.count);
            if b.len() < count * GOSSIP_LEN {
                return Err(DecodeError::Body);
            }
            let gossip = (0..count)
                .map(|i| {
                    let g = &b[i * GOSSIP_LEN..(i + 1) * GOSSIP_LEN];
                    Gossip {
                        id: id_at(g, 0),
                        ping_sent_s: u32_at(g, 40),
                        pong_received_s: u32_at(g, 44),
                        ip: text_at(g, 48, IP_LEN),
                        port: u16_at(g, 94),
                        cport: u16_at(g, 96),
                        flags: u16_at(g, 98),
                        pport: u16_at(g, 100),
                    }
                })
                .collect();
            // Extensions (the announced host name) follow; Ferrite reads
            // host names from `cluster-announce-hostname` only.
            Body::Ping(gossip)
        }
        types::FAIL => {
            if b.len() < ID_LEN {
                return Err(DecodeError::Body);
            }
            Body::Fail(id_at(b, 0))
        }
        types::PUBLISH | types::PUBLISHSHARD => {
            let channel_len = u32_at(b, 0) as usize;
            let message_len = u32_at(b, 4) as usize;
            let end = 8usize
                .checked_add(channel_len)
                .and_then(|n| n.checked_add(message_len))
                .ok_or(DecodeError::Body)?;
            if b.len() < end {
                return Err(DecodeError::Body);
            }
            Body::Publish(
                b[8..8 + channel_len].to_vec(),
                b[8 + channel_len..end].to_vec(),
            )
        }
        types::UPDATE => {
            if b.len() < 8 + ID_LEN + BITMAP_LEN {
                return Err(DecodeError::Body);
            }
            let mut slots = Box::new([0u8; BITMAP_LEN]);
            slots.copy_from_slice(&b[8 + ID_LEN..8 + ID_LEN + BITMAP_LEN]);
            Body::Update(u64_at(b, 0), id_at(b, 8), slots)
        }
        types::FAILOVER_AUTH_REQUEST | types::FAILOVER_AUTH_ACK | types::MFSTART => Body::Empty,
        _ => Body::Other,
    })
}

fn put_text(out: &mut [u8], text: &str) {
    let n = text.len().min(out.len().saturating_sub(1));
    out[..n].copy_from_slice(&text.as_bytes()[..n]);
}

/// Encodes a message.
pub fn encode(message: &Message) -> Vec<u8> {
    let h = &message.header;
    let mut out = vec![0u8; HEADER_LEN];
    out[..4].copy_from_slice(SIGNATURE);
    out[8..10].copy_from_slice(&VERSION.to_be_bytes());
    out[10..12].copy_from_slice(&h.port.to_be_bytes());
    out[12..14].copy_from_slice(&h.kind.to_be_bytes());
    out[16..24].copy_from_slice(&h.current_epoch.to_be_bytes());
    out[24..32].copy_from_slice(&h.config_epoch.to_be_bytes());
    out[32..40].copy_from_slice(&h.offset.to_be_bytes());
    out[40..80].copy_from_slice(&h.sender);
    out[80..2128].copy_from_slice(&h.slots[..]);
    out[2128..2168].copy_from_slice(&h.primary);
    put_text(&mut out[2168..2214], &h.ip);
    out[2246..2248].copy_from_slice(&h.pport.to_be_bytes());
    out[2248..2250].copy_from_slice(&h.cport.to_be_bytes());
    out[2250..2252].copy_from_slice(&h.flags.to_be_bytes());
    out[2252] = u8::from(h.state_fail);
    out[2253..2256].copy_from_slice(&h.mflags);
    let mut count = 0u16;
    match &message.body {
        Body::Ping(gossip) => {
            for g in gossip {
                let mut e = [0u8; GOSSIP_LEN];
                e[..40].copy_from_slice(&g.id);
                e[40..44].copy_from_slice(&g.ping_sent_s.to_be_bytes());
                e[44..48].copy_from_slice(&g.pong_received_s.to_be_bytes());
                put_text(&mut e[48..94], &g.ip);
                e[94..96].copy_from_slice(&g.port.to_be_bytes());
                e[96..98].copy_from_slice(&g.cport.to_be_bytes());
                e[98..100].copy_from_slice(&g.flags.to_be_bytes());
                e[100..102].copy_from_slice(&g.pport.to_be_bytes());
                out.extend_from_slice(&e);
            }
            count = gossip.len() as u16;
        }
        Body::Fail(id) => out.extend_from_slice(id),
        Body::Publish(channel, payload) => {
            out.extend_from_slice(&(channel.len() as u32).to_be_bytes());
            out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
            out.extend_from_slice(channel);
            out.extend_from_slice(payload);
        }
        Body::Update(epoch, id, slots) => {
            out.extend_from_slice(&epoch.to_be_bytes());
            out.extend_from_slice(id);
            out.extend_from_slice(&slots[..]);
        }
        Body::Empty | Body::Other => {}
    }
    out[14..16].copy_from_slice(&count.to_be_bytes());
    let len = out.len() as u32;
    out[4..8].copy_from_slice(&len.to_be_bytes());
    out
}

/// Whether `slot` is set in a bitmap.
pub fn bit(bitmap: &[u8; BITMAP_LEN], slot: usize) -> bool {
    bitmap
        .get(slot / 8)
        .is_some_and(|byte| byte & (1 << (slot % 8)) != 0)
}

/// Sets `slot` in a bitmap.
pub fn set_bit(bitmap: &mut [u8; BITMAP_LEN], slot: usize) {
    if let Some(byte) = bitmap.get_mut(slot / 8) {
        *byte |= 1 << (slot % 8);
    }
}

/// Whether an ID field names a node (the null ID names none).
pub fn node_id(bytes: &[u8; ID_LEN]) -> Option<NodeId> {
    if NodeId::is_null(bytes) {
        None
    } else {
        NodeId::parse(bytes)
    }
}
