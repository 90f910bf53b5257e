//! One node of the cluster as this node knows it: identity, address,
//! role, epochs, liveness, and its line in `CLUSTER NODES` and
//! `nodes.conf`.

use std::fmt;

/// Length of a node ID: 40 hexadecimal characters.
pub const ID_LEN: usize = 40;

/// A node's ID, 40 lower-case hexadecimal characters (bytes kept as sent:
/// an ID read from the bus is checked with [`NodeId::parse`]).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(pub [u8; ID_LEN]);

impl NodeId {
    /// A random ID, as a new node or a node in handshake gets.
    pub fn random(rng: &mut fastrand::Rng) -> NodeId {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut id = [0u8; ID_LEN];
        for b in id.iter_mut() {
            *b = HEX[rng.usize(..16)];
        }
        NodeId(id)
    }

    /// `bytes` as an ID if it is exactly 40 hexadecimal characters.
    pub fn parse(bytes: &[u8]) -> Option<NodeId> {
        let id: [u8; ID_LEN] = bytes.try_into().ok()?;
        id.iter().all(u8::is_ascii_hexdigit).then_some(NodeId(id))
    }

    /// The all-zero bytes the bus sends for "no node".
    pub fn is_null(bytes: &[u8]) -> bool {
        bytes.iter().all(|&b| b == 0)
    }

    /// The ID as text.
    pub fn as_str(&self) -> &str {
        // Every constructor checks or produces ASCII hex.
        std::str::from_utf8(&self.0).unwrap_or("")
    }
}

impl fmt::Debug for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Node flags, with the bit values Redis sends on the bus.
pub mod flags {
    /// A primary.
    pub const MASTER: u16 = 1;
    /// A replica.
    pub const SLAVE: u16 = 2;
    /// This node thinks it may be failing (no PONG within the timeout).
    pub const PFAIL: u16 = 4;
    /// The cluster agreed it is failing.
    pub const FAIL: u16 = 8;
    /// This node.
    pub const MYSELF: u16 = 16;
    /// Met, its first PONG (and real ID) not received yet.
    pub const HANDSHAKE: u16 = 32;
    /// Address unknown.
    pub const NOADDR: u16 = 64;
    /// Send it a MEET rather than a PING.
    pub const MEET: u16 = 128;
    /// A primary that replicas may migrate to.
    pub const MIGRATE_TO: u16 = 256;
    /// A replica that never fails over.
    pub const NOFAILOVER: u16 = 512;
}

/// The names `CLUSTER NODES` gives the flags, in its order.
const FLAG_NAMES: [(u16, &str); 8] = [
    (flags::MYSELF, "myself"),
    (flags::MASTER, "master"),
    (flags::SLAVE, "slave"),
    (flags::PFAIL, "fail?"),
    (flags::FAIL, "fail"),
    (flags::HANDSHAKE, "handshake"),
    (flags::NOADDR, "noaddr"),
    (flags::NOFAILOVER, "nofailover"),
];

/// `flags` as `CLUSTER NODES` writes them (`myself,master`, `noflags`).
pub fn flags_text(bits: u16) -> String {
    let names: Vec<&str> = FLAG_NAMES
        .iter()
        .filter(|(bit, _)| bits & bit != 0)
        .map(|(_, name)| *name)
        .collect();
    if names.is_empty() {
        "noflags".to_string()
    } else {
        names.join(",")
    }
}

/// The flags a `nodes.conf` line names; `None` for an unknown name.
pub fn parse_flags(text: &str) -> Option<u16> {
    let mut bits = 0;
    for name in text.split(',') {
        bits |= match name {
            "noflags" => 0,
            "meet" => flags::MEET,
            _ => FLAG_NAMES.iter().find(|(_, n)| *n == name)?.0,
        };
    }
    Some(bits)
}

/// What this node knows of one node.
#[derive(Clone, Debug)]
pub struct Node {
    /// Its ID.
    pub id: NodeId,
    /// [`flags`] bits.
    pub flags: u16,
    /// Its IP address as last seen (empty while unknown).
    pub ip: String,
    /// Its client port.
    pub port: u16,
    /// Its plaintext client port when `port` is TLS, else 0.
    pub pport: u16,
    /// Its cluster bus port.
    pub cport: u16,
    /// The host name it announces (empty for none).
    pub hostname: String,
    /// Its primary, for a replica (may be unknown to this node's table).
    pub primary: Option<NodeId>,
    /// The epoch of its claim on its slots.
    pub config_epoch: u64,
    /// When this node sent it the PING not yet answered, 0 for none
    /// (Unix milliseconds).
    pub ping_sent_ms: i64,
    /// When this node last received its PONG (Unix milliseconds).
    pub pong_received_ms: i64,
    /// When it was marked FAIL (Unix milliseconds).
    pub fail_time_ms: i64,
    /// When the node entry was created (Unix milliseconds), to give up on
    /// a handshake that never completes.
    pub created_ms: i64,
    /// Whether this node has a working outbound bus link to it.
    pub link_up: bool,
    /// Primaries that reported it failing, and when.
    pub fail_reports: Vec<(NodeId, i64)>,
    /// Its replication offset as last gossiped.
    pub repl_offset: i64,
    /// When this node last voted for a replica of it (Unix milliseconds).
    pub voted_ms: i64,
}

impl Node {
    /// A node with an address and no slots.
    pub fn new(id: NodeId, flags: u16, ip: &str, port: u16, cport: u16, now_ms: i64) -> Node {
        Node {
            id,
            flags,
            ip: ip.to_string(),
            port,
            pport: 0,
            cport,
            hostname: String::new(),
            primary: None,
            config_epoch: 0,
            ping_sent_ms: 0,
            pong_received_ms: 0,
            fail_time_ms: 0,
            created_ms: now_ms,
            link_up: false,
            fail_reports: Vec::new(),
            repl_offset: 0,
            voted_ms: 0,
        }
    }

    /// Whether a flag is set.
    pub fn has(&self, flag: u16) -> bool {
        self.flags & flag != 0
    }

    /// Whether it is a primary.
    pub fn is_primary(&self) -> bool {
        self.has(flags::MASTER)
    }

    /// Whether it is a replica.
    pub fn is_replica(&self) -> bool {
        self.has(flags::SLAVE)
    }

    /// `ip:port@cport[,hostname]`, as `CLUSTER NODES` shows the address.
    pub fn address_text(&self) -> String {
        if self.hostname.is_empty() {
            format!("{}:{}@{}", self.ip, self.port, self.cport)
        } else {
            format!("{}:{}@{},{}", self.ip, self.port, self.cport, self.hostname)
        }
    }
}
