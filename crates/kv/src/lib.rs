//! Ferrite's Redis-compatible key-value server.
//!
//! - [`resp`]: the RESP2/RESP3 protocol, a resumable parser with limits and
//!   a reply encoder.
//! - [`keyspace`]: databases split into segments by key hash, each its own
//!   hash map (the unit of the coming fork-less parallel log rewrite), with
//!   lazy and active expiry.
//! - [`types`]: strings, hashes, lists, sets, sorted sets.
//! - [`commands`]: the command table and every command.
//! - [`aof`]: the append-only file on Ferrite's devices, with group commit,
//!   recovery and `check`.
//! - [`server`]: the event loop.
//!
//! Running commands without a network, as the tests do:
//!
//! ```
//! use ferrite_kv::commands::{execute, Ctx, Propagation, Session};
//! use ferrite_kv::config::Config;
//! use ferrite_kv::resp::{Limits, Parser, ReplyBuf};
//! use ferrite_kv::state::State;
//!
//! let mut state = State::new(Config::default());
//! let mut session = Session { authenticated: true, ..Session::default() };
//! let (mut reply, mut prop) = (ReplyBuf::default(), Propagation::default());
//! let input = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\nGET k\r\n";
//! let (mut parser, mut at) = (Parser::new(), 0);
//! while let Some(n) = parser.parse(&input[at..], &Limits::DEFAULT)? {
//!     let mut ctx = Ctx { state: &mut state, session: &mut session, reply: &mut reply, prop: &mut prop, busy: None };
//!     execute(&mut ctx, &parser.args(&input[at..]));
//!     at += n;
//! }
//! assert_eq!(reply.buf, b"+OK\r\n$5\r\nhello\r\n");
//! // What the log would get: the SET, as RESP.
//! assert_eq!(prop.buf, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\n");
//! # Ok::<(), ferrite_kv::resp::ProtocolError>(())
//! ```

pub mod aof;
pub mod client_memory;
pub mod cluster;
pub mod cmdstats;
pub mod commands;
pub mod config;
pub mod cpus;
mod error;
pub mod info;
pub mod keyspace;
pub mod lazyfree;
pub mod memory;
pub mod metrics;
pub mod oom;
pub mod rdb;
pub mod resp;
pub mod rewrite;
pub mod server;
pub mod state;
pub mod tier;
pub mod tls;
pub mod types;
pub mod users;

pub use error::{Error, Result};
pub use server::{serve, Server, ShutdownHandle};
