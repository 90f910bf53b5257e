//! The values a key can hold, and the number parsing and formatting rules
//! Redis applies to them.

pub mod number;
pub mod zset;

use std::collections::{HashMap, HashSet, VecDeque};

pub use zset::{LexBound, ScoreBound, ZSet};

/// Keys, members, fields and string values: immutable byte strings. A boxed
/// slice is two words, one less than a `Vec`, which matters for memory per
/// key.
pub type Bytes = Box<[u8]>;

/// A hash's fields.
pub type HashValue = HashMap<Bytes, Bytes>;
/// A list's elements.
pub type ListValue = VecDeque<Bytes>;
/// A set's members.
pub type SetValue = HashSet<Bytes>;

/// The value at a key. Collections are boxed so the common case, a string,
/// keeps the enum at three words.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A string (Redis also stores integers as strings here).
    Str(Bytes),
    /// A hash.
    Hash(Box<HashValue>),
    /// A list.
    List(Box<ListValue>),
    /// A set.
    Set(Box<SetValue>),
    /// A sorted set.
    ZSet(Box<ZSet>),
}

const _: () = assert!(std::mem::size_of::<Value>() <= 24);

impl Value {
    /// The name TYPE replies with.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Str(_) => "string",
            Value::Hash(_) => "hash",
            Value::List(_) => "list",
            Value::Set(_) => "set",
            Value::ZSet(_) => "zset",
        }
    }

    /// Whether the value is an empty collection (which Redis never keeps).
    pub fn is_empty_collection(&self) -> bool {
        match self {
            Value::Str(_) => false,
            Value::Hash(h) => h.is_empty(),
            Value::List(l) => l.is_empty(),
            Value::Set(s) => s.is_empty(),
            Value::ZSet(z) => z.is_empty(),
        }
    }

    /// A new empty hash.
    pub fn new_hash() -> Value {
        Value::Hash(Box::default())
    }

    /// A new empty list.
    pub fn new_list() -> Value {
        Value::List(Box::default())
    }

    /// A new empty set.
    pub fn new_set() -> Value {
        Value::Set(Box::default())
    }

    /// A new empty sorted set.
    pub fn new_zset() -> Value {
        Value::ZSet(Box::default())
    }
}

/// Copies bytes into a [`Bytes`].
pub fn bytes(data: &[u8]) -> Bytes {
    data.into()
}
