//! RESP, the Redis serialisation protocol: a resumable request parser with
//! limits ([`parser`]) and a reply encoder for RESP2 and RESP3 ([`reply`]).

pub mod parser;
pub mod reply;

pub use parser::{Args, Limits, Parser, ProtocolError};
pub use reply::{format_double, Protocol, ReplyBuf};
