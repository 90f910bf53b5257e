//! String values: immutable, shared, one word wide, in whichever of two
//! layouts costs fewer allocated bytes for the string's length.
//!
//! - **Thin**: one block holding the reference count, the length and the
//!   bytes (16 bytes of header). A 100-byte string takes 116 bytes, served
//!   from jemalloc's 128-byte class.
//! - **Split**: a 32-byte block (reference counts and a pointer with the
//!   length) and the bytes in a block of their own. A 1 KiB string takes
//!   32 + 1024 bytes, where the thin layout's 1040 bytes land in the
//!   1280-byte class: a quarter more than the payload, 224 bytes a value
//!   lost to rounding, about 210 MiB at a million values.
//!
//! The allocator rounds every request up to a size class (8; multiples of
//! 16 up to 64; then four classes per doubling, see
//! `ferrite_alloc::size_class`). A header pushes a length just under a
//! class boundary into the next class, up to a quarter larger; the split
//! layout pays a fixed 32 bytes and one more pointer to follow instead.
//! [`Str::new`] picks the split layout only where its two blocks are
//! strictly smaller than the thin one, so a string never costs more than
//! before: lengths at or just under a power of two from 256 bytes up
//! (256, 512, 1024, 4096: the sizes clients most often pick) and the
//! lengths just under every other class boundary above 1 KiB.
//!
//! A third form holds a string moved to the PM value tier
//! (`docs/tier.md`): a slot of the PM heap, freed with the last clone. Its
//! bytes, like the other forms', are reachable only through [`Deref`], so
//! every command that reads a string works on a PM-resident one; its
//! length is read from the handle, without touching PM.

use std::borrow::Borrow;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::Arc;

/// Bytes of the thin layout's header: the reference count and the length.
const THIN_HEADER: usize = 16;
/// Bytes of the split layout's first block: `Arc`'s two counts and the
/// boxed slice's pointer and length.
const SPLIT_HEAD: usize = 32;

/// A string value; cloning is a reference-count increment. See the module
/// documentation for its two layouts.
#[derive(Clone)]
pub struct Str(Repr);

#[derive(Clone)]
enum Repr {
    Thin(triomphe::ThinArc<(), u8>),
    Split(Arc<Box<[u8]>>),
    Pm(Arc<ferrite_pmem::SlabRef>),
}

/// jemalloc's size class for a request of `size` bytes (its default build:
/// 16-byte quantum, four classes per doubling), the rule the layout choice
/// is made by. It matches `ferrite_alloc::size_class` (a test checks),
/// which this crate does not depend on: kv runs under any allocator, but
/// the binaries serve from jemalloc, so its classes decide.
pub(crate) const fn jemalloc_class(size: usize) -> usize {
    if size <= 8 {
        return 8;
    }
    if size <= 64 {
        return size.next_multiple_of(16);
    }
    match size.checked_next_power_of_two() {
        Some(top) => size.next_multiple_of(top / 8),
        None => size,
    }
}

/// Whether a string of `len` bytes takes fewer bytes split than thin.
pub(crate) const fn splits(len: usize) -> bool {
    SPLIT_HEAD + jemalloc_class(len) < jemalloc_class(THIN_HEADER + len)
}

impl Str {
    /// Copies `data` into a new string, in the layout that allocates less.
    pub fn new(data: &[u8]) -> Str {
        if splits(data.len()) {
            Str(Repr::Split(Arc::new(data.into())))
        } else {
            Str(Repr::Thin(triomphe::ThinArc::from_header_and_slice(
                (),
                data,
            )))
        }
    }

    /// A copy of this string in `heap`, or `None` when the heap has no
    /// room for it. The demotion step of the tier.
    pub fn to_pm(&self, heap: &Arc<ferrite_pmem::SlabHeap>) -> Option<Str> {
        heap.store(self).map(|slot| Str(Repr::Pm(Arc::new(slot))))
    }

    /// Whether the bytes are in the PM tier.
    pub fn is_pm(&self) -> bool {
        matches!(self.0, Repr::Pm(_))
    }

    /// The string's length, without reading its bytes (for a PM value,
    /// from its handle: no PM access is charged).
    pub fn len(&self) -> usize {
        match &self.0 {
            Repr::Thin(thin) => thin.slice.len(),
            Repr::Split(split) => split.len(),
            Repr::Pm(slot) => slot.len(),
        }
    }

    /// Whether the string is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Runs `change` on the bytes in place when no one else holds this
    /// string (no rewrite snapshot, no other clone) and it is in DRAM;
    /// `false`, and nothing done, otherwise (for a PM value the caller
    /// then builds a new DRAM string: its promotion). Lets SETBIT and BITFIELD change a large bitmap
    /// without copying it.
    pub fn change_in_place(&mut self, change: impl FnOnce(&mut [u8])) -> bool {
        match &mut self.0 {
            Repr::Thin(thin) => thin.with_arc_mut(|arc| match triomphe::Arc::get_mut(arc) {
                Some(unique) => {
                    change(unique.slice_mut());
                    true
                }
                None => false,
            }),
            Repr::Split(split) => match Arc::get_mut(split) {
                Some(unique) => {
                    change(unique);
                    true
                }
                None => false,
            },
            Repr::Pm(_) => false,
        }
    }

    /// Where the string's first block starts (thin: the reference count,
    /// then the length and the bytes; split: the counts and the pointer to
    /// the bytes), for a prefetch; reads no memory.
    pub(crate) fn heap_addr(&self) -> *const u8 {
        match &self.0 {
            Repr::Thin(thin) => thin.heap_ptr().cast(),
            Repr::Split(split) => Arc::as_ptr(split).cast::<u8>().wrapping_sub(16),
            Repr::Pm(slot) => slot.addr(),
        }
    }

    /// Whether the bytes lie in the first block, right after its header
    /// (thin), rather than in a block of their own (split).
    pub(crate) fn is_thin(&self) -> bool {
        matches!(self.0, Repr::Thin(_))
    }

    /// The sizes of the blocks this string holds, as requested from the
    /// allocator (each is then rounded to its size class), for MEMORY
    /// USAGE.
    pub(crate) fn block_requests(&self) -> [usize; 2] {
        match &self.0 {
            Repr::Thin(_) => [THIN_HEADER + self.len(), 0],
            Repr::Split(_) => [SPLIT_HEAD, self.len()],
            Repr::Pm(_) => [SPLIT_HEAD, 0],
        }
    }
}

impl Deref for Str {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &self.0 {
            Repr::Thin(thin) => &thin.slice,
            Repr::Split(split) => split,
            Repr::Pm(slot) => slot.bytes(),
        }
    }
}

/// Equal when the bytes are, whatever the layouts (two strings of one
/// length always share a layout, but nothing relies on that).
impl PartialEq for Str {
    fn eq(&self, other: &Str) -> bool {
        self.len() == other.len() && **self == **other
    }
}

impl Eq for Str {}

/// Hashed by content, as `[u8]` hashes, so a set of strings finds a member
/// from the bytes a command names (through [`Borrow`]) wherever the
/// member's bytes live. Hashing a PM member reads it from PM (charged to
/// the media model): a set does so when it grows and rehashes, and the
/// tier's moves do so once per member moved (`docs/tier.md`).
impl Hash for Str {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (**self).hash(state);
    }
}

/// Ordered by content, as `[u8]` orders: a sorted set orders members of
/// one score by their bytes, wherever they live.
impl Ord for Str {
    fn cmp(&self, other: &Str) -> std::cmp::Ordering {
        (**self).cmp(&**other)
    }
}

impl PartialOrd for Str {
    fn partial_cmp(&self, other: &Str) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Borrow<[u8]> for Str {
    fn borrow(&self) -> &[u8] {
        self
    }
}

impl AsRef<[u8]> for Str {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl Default for Str {
    fn default() -> Str {
        Str::new(&[])
    }
}

impl std::fmt::Debug for Str {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        <[u8] as std::fmt::Debug>::fmt(self, f)
    }
}

impl From<&[u8]> for Str {
    fn from(data: &[u8]) -> Str {
        Str::new(data)
    }
}

impl From<Vec<u8>> for Str {
    fn from(data: Vec<u8>) -> Str {
        Str::new(&data)
    }
}

impl<const N: usize> From<&[u8; N]> for Str {
    fn from(data: &[u8; N]) -> Str {
        Str::new(data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_class_rule_is_jemallocs() {
        for size in (0..70_000).chain((1 << 20) - 100..(1 << 20) + 100) {
            assert_eq!(
                jemalloc_class(size),
                ferrite_alloc::size_class(size),
                "{size}"
            );
        }
    }

    #[test]
    fn split_only_where_it_allocates_less() {
        assert!(!splits(0) && !splits(100) && !splits(1000));
        assert!(splits(1024) && splits(4096) && splits(256));
        for len in 0..20_000 {
            let thin = jemalloc_class(THIN_HEADER + len);
            let split = SPLIT_HEAD + jemalloc_class(len);
            assert_eq!(splits(len), split < thin, "{len}");
            let chosen = if splits(len) { split } else { thin };
            assert!(chosen <= thin, "{len}: never more than the thin layout");
        }
    }

    #[test]
    fn both_layouts_hold_the_bytes_and_change_in_place_when_unshared() {
        for len in [0usize, 3, 100, 256, 1000, 1024, 4096, 5000] {
            let data: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
            let mut s = Str::new(&data);
            assert_eq!(&*s, &data[..]);
            assert_eq!(s.is_thin(), !splits(len), "{len}");
            let shared = s.clone();
            assert!(!s.change_in_place(|b| b.fill(1)), "shared: not in place");
            assert_eq!(&*shared, &data[..]);
            drop(shared);
            assert!(s.change_in_place(|b| b.fill(1)));
            assert!(s.iter().all(|&b| b == 1), "{len}");
            let blocks = s.block_requests();
            assert_eq!(
                blocks.iter().sum::<usize>() - len,
                if s.is_thin() { 16 } else { 32 }
            );
        }
    }
}
