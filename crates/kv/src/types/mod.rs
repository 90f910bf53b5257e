//! The values a key can hold, and the number parsing and formatting rules
//! Redis applies to them.

pub mod geohash;
pub mod hll;
pub mod long_double;
pub mod number;
pub mod stream;
mod string;
pub mod zset;

use std::collections::{HashMap, HashSet, VecDeque};
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

pub use stream::Stream;
pub(crate) use string::jemalloc_class;
pub use string::Str;
pub use zset::{LexBound, ScoreBound, ZSet};

/// Keys, members, fields and string values: immutable, shared byte
/// strings. Two words (one less than a `Vec`), and cloning one is a
/// reference-count increment: the rewrite's copy-before-write clones a
/// segment's map without copying any key or value bytes (issue #5).
pub type Bytes = Arc<[u8]>;

/// A collection shared copy-on-write: cloning is a reference-count
/// increment, and the first mutation through [`DerefMut`] of a value a
/// rewrite snapshot still holds copies it (`Arc::make_mut`). So a captured
/// segment shares every collection with the live one until one side
/// changes it.
#[derive(Debug, Default, PartialEq)]
pub struct Shared<T>(Arc<T>);

impl<T> Clone for Shared<T> {
    fn clone(&self) -> Shared<T> {
        Shared(Arc::clone(&self.0))
    }
}

impl<T> Deref for Shared<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: Clone> DerefMut for Shared<T> {
    fn deref_mut(&mut self) -> &mut T {
        Arc::make_mut(&mut self.0)
    }
}

/// Where the reference counts of the `Arc` behind `shared` start (std's
/// `Arc` keeps its two counts just before the value), for a prefetch
/// before many clones. Only a prefetch address: were the layout
/// different, a prefetch would be wasted, nothing more.
pub(crate) fn arc_counts<T>(shared: &Arc<T>) -> *const u8 {
    Arc::as_ptr(shared)
        .cast::<u8>()
        .wrapping_sub(2 * std::mem::size_of::<usize>())
}

impl<'a, T> IntoIterator for &'a Shared<T>
where
    &'a T: IntoIterator,
{
    type Item = <&'a T as IntoIterator>::Item;
    type IntoIter = <&'a T as IntoIterator>::IntoIter;
    fn into_iter(self) -> Self::IntoIter {
        (&*self.0).into_iter()
    }
}

impl<T> Shared<T> {
    /// Wraps `value`.
    pub fn new(value: T) -> Shared<T> {
        Shared(Arc::new(value))
    }

    /// The value for modification when nothing else shares it; `None`
    /// (and no copy made) while a rewrite snapshot or another clone does.
    pub fn get_mut_unshared(&mut self) -> Option<&mut T> {
        Arc::get_mut(&mut self.0)
    }
}

/// A hash's fields.
pub type HashValue = HashMap<Bytes, Str>;
/// A list's elements.
pub type ListValue = VecDeque<Str>;
/// A set's members: [`Str`]s, hashed and compared by content, so a large
/// member can move to the PM tier as a hash value does.
pub type SetValue = HashSet<Str>;

/// The value at a key. Collections are behind one pointer, and strings are
/// thin, so the enum is two words.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A string (Redis also stores integers as strings here).
    Str(Str),
    /// A hash.
    Hash(Shared<HashValue>),
    /// A list.
    List(Shared<ListValue>),
    /// A set.
    Set(Shared<SetValue>),
    /// A sorted set.
    ZSet(Shared<ZSet>),
    /// A stream.
    Stream(Shared<Stream>),
}

const _: () = assert!(std::mem::size_of::<Value>() == 16);

/// The cache lines from the third of an allocation at `start` up to
/// `end`, the first two being those [`Value::prefetch`] loads. Counted
/// from the line `start` lies in: a 16-byte-aligned header seldom starts a
/// line, so even a 100-byte string usually ends in a third.
fn lines_after_two(start: usize, end: usize) -> impl Iterator<Item = usize> {
    let third = (start - start % 64).wrapping_add(128);
    (third..end).step_by(64)
}

impl Value {
    /// The name TYPE replies with.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Str(_) => "string",
            Value::Hash(_) => "hash",
            Value::List(_) => "list",
            Value::Set(_) => "set",
            Value::ZSet(_) => "zset",
            Value::Stream(_) => "stream",
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
            // An empty stream is kept: it still has its last ID and groups.
            Value::Stream(_) => false,
        }
    }

    /// Starts loading the value's heap allocation into the cache, for code
    /// that walks many values and will read each soon (a rewrite worker
    /// serialising a segment). Reads no memory itself.
    pub fn prefetch(&self) {
        let addr = match self {
            Value::Str(s) => s.heap_addr(),
            Value::Hash(h) => Arc::as_ptr(&h.0).cast(),
            Value::List(l) => Arc::as_ptr(&l.0).cast(),
            Value::Set(s) => Arc::as_ptr(&s.0).cast(),
            Value::ZSet(z) => Arc::as_ptr(&z.0).cast(),
            Value::Stream(x) => Arc::as_ptr(&x.0).cast(),
        };
        ferrite_host::hint::prefetch(addr);
        // A short string's header and bytes span up to two more lines.
        ferrite_host::hint::prefetch(addr.wrapping_add(64));
    }

    /// A string's length; `None` for a collection.
    pub fn str_len(&self) -> Option<usize> {
        match self {
            Value::Str(s) => Some(s.len()),
            _ => None,
        }
    }

    /// Starts loading the lines of a string after the two
    /// [`Value::prefetch`] asked for, up to `limit` bytes of it, as data
    /// read once (`prefetchnta`: kept out of the outer caches where the
    /// CPU allows). A value of a few hundred bytes to a few KiB is a run
    /// of lines too short for the hardware prefetcher to ramp up on;
    /// longer ones it streams. Reads the string's length (and, for a
    /// string whose bytes have a block of their own, where that block
    /// is), so call it once the first line is likely in the cache.
    pub fn prefetch_rest_once(&self, limit: usize) {
        // A PM value is not prefetched: reading its address would charge
        // the media model for a read the caller may not make.
        if let Value::Str(s) = self {
            if s.is_pm() {
                return;
            }
            let end = s.as_ptr().wrapping_add(s.len().min(limit)) as usize;
            if s.is_thin() {
                for line in lines_after_two(s.heap_addr() as usize, end) {
                    ferrite_host::hint::prefetch_once(line as *const u8);
                }
            } else {
                // The two lines [`Value::prefetch`] loaded were the small
                // first block's: every line of the bytes is still to load.
                let start = s.as_ptr() as usize;
                for line in (start - start % 64..end).step_by(64) {
                    ferrite_host::hint::prefetch_once(line as *const u8);
                }
            }
        }
    }

    /// Starts loading the line that holds the value's reference count, for
    /// code about to clone many values (a copy-before-write of a chunk of
    /// the keyspace). Reads no memory itself.
    pub fn prefetch_count(&self) {
        let addr = match self {
            Value::Str(s) => s.heap_addr(),
            Value::Hash(h) => arc_counts(&h.0),
            Value::List(l) => arc_counts(&l.0),
            Value::Set(s) => arc_counts(&s.0),
            Value::ZSet(z) => arc_counts(&z.0),
            Value::Stream(x) => arc_counts(&x.0),
        };
        ferrite_host::hint::prefetch(addr);
    }

    /// A new empty hash.
    pub fn new_hash() -> Value {
        Value::Hash(Shared::default())
    }

    /// A new empty list.
    pub fn new_list() -> Value {
        Value::List(Shared::default())
    }

    /// A new empty set.
    pub fn new_set() -> Value {
        Value::Set(Shared::default())
    }

    /// A new empty sorted set.
    pub fn new_zset() -> Value {
        Value::ZSet(Shared::default())
    }

    /// A new empty stream.
    pub fn new_stream() -> Value {
        Value::Stream(Shared::default())
    }
}

/// Copies bytes into a [`Bytes`].
pub fn bytes(data: &[u8]) -> Bytes {
    data.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every line a string's bytes touch is loaded by [`Value::prefetch`]
    /// (the allocation's first two lines) or by the rest after them,
    /// wherever in a line the allocation starts.
    #[test]
    fn the_two_first_lines_and_the_rest_cover_every_byte() {
        for len in [1usize, 40, 48, 100, 112, 113, 200, 1000] {
            for offset in (0..64).step_by(8) {
                let start = 4096 + offset;
                let bytes = start + 16..start + 16 + len;
                let first = start - start % 64;
                let mut loaded = vec![first, first + 64];
                loaded.extend(lines_after_two(start, bytes.end));
                for byte in bytes {
                    let line = byte - byte % 64;
                    assert!(
                        loaded.contains(&line),
                        "{len} bytes at offset {offset}: line {line} not loaded"
                    );
                }
                assert!(loaded[2..].iter().all(|&l| l >= first + 128));
            }
        }
    }

    #[test]
    fn a_string_has_a_length_and_a_collection_has_none() {
        assert_eq!(Value::Str(Str::from(&b"abc"[..])).str_len(), Some(3));
        assert_eq!(Value::new_list().str_len(), None);
    }
}
