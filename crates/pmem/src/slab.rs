//! [`SlabHeap`]: a heap of immutable values on persistent memory, and
//! [`SlabRef`], the reference-counted handle of one value.
//!
//! The heap is a [`PmemRegion`] cut into 1 MiB pages; a page is given to
//! one size class when that class first needs room, and carved into slots
//! of the class's size (classes grow by 1.125x from 64 bytes to a page,
//! as memcached's slabs do by 1.25x). A value takes one slot of the smallest class that
//! holds it. Slots never move, so a handle's address stays valid for its
//! whole life and readers need no lock.
//!
//! Why a handle may give out `&[u8]` into the mapping: a slot's bytes are
//! written once, by [`SlabHeap::store`], before the handle exists, and the
//! slot returns to its free list only when the last clone of the handle is
//! dropped. So no write to the mapping ever overlaps bytes a live handle
//! can see, and the heap's region is never handed to anyone else.
//!
//! The heap is a cache, not a store: its contents are not meant to be read
//! back after a restart (the key-value server rebuilds it from its log), so
//! [`SlabHeap::create`] discards whatever the file held.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError};

use crate::error::{Error, Result};
use crate::medium::PmemMedium;
use crate::model::ModelChoice;
use crate::region::{MapOptions, PmemRegion};
use crate::stats::FlushStats;

/// Bytes of one page: the unit a class takes from the heap.
pub const PAGE_BYTES: usize = 1 << 20;
/// The smallest slot.
pub const MIN_SLOT: usize = 64;
/// The largest value a heap holds (one page).
pub const MAX_VALUE: usize = PAGE_BYTES;
/// Bits of a handle's packed location that hold the length (up to and
/// including [`MAX_VALUE`]).
const LEN_BITS: u32 = 21;

/// The slot sizes: 64 bytes, then 1.125 times the previous, rounded up to
/// 16 bytes, up to one page (79 classes). An eighth, not memcached's
/// quarter, bounds the rounding waste to about 12%: a 1 KiB value takes a
/// 1040-byte slot instead of 1200.
fn class_sizes() -> Vec<usize> {
    let mut sizes = vec![MIN_SLOT];
    while let Some(&last) = sizes.last() {
        if last >= PAGE_BYTES {
            break;
        }
        let next = (last + last / 8).div_ceil(16) * 16;
        sizes.push(next.min(PAGE_BYTES));
    }
    sizes
}

/// One class's free slots and the part of its newest page not yet carved.
#[derive(Debug, Default)]
struct Class {
    free: Vec<u64>,
    carve_at: usize,
    carve_end: usize,
}

/// The allocator's state, behind the heap's mutex.
#[derive(Debug)]
struct Classes {
    classes: Vec<Class>,
    /// Pages handed to classes so far (pages are given out in order).
    next_page: usize,
}

/// What a heap holds, for INFO.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SlabStats {
    /// Bytes of the heap.
    pub capacity: u64,
    /// Bytes of the slots in use (what the values take, rounding included).
    pub slot_bytes: u64,
    /// The values' own bytes.
    pub value_bytes: u64,
    /// Values stored and not yet freed.
    pub values: u64,
    /// Pages given to classes.
    pub pages: u64,
    /// Values stored since the heap was created.
    pub stores: u64,
    /// Bytes read through handles since the heap was created.
    pub read_bytes: u64,
}

impl SlabStats {
    /// Bytes not in any used slot: free slots of assigned pages and pages
    /// not yet assigned.
    pub fn free_bytes(&self) -> u64 {
        self.capacity.saturating_sub(self.slot_bytes)
    }

    /// Slot bytes per value byte (1.0: no waste; 1.0 when empty).
    pub fn frag_ratio(&self) -> f64 {
        if self.value_bytes == 0 {
            1.0
        } else {
            self.slot_bytes as f64 / self.value_bytes as f64
        }
    }
}

/// A heap of immutable values over a mapped file. See the module comment.
#[derive(Debug)]
pub struct SlabHeap {
    region: PmemRegion,
    base: *const u8,
    capacity: usize,
    sizes: Vec<usize>,
    inner: Mutex<Classes>,
    slot_bytes: AtomicU64,
    value_bytes: AtomicU64,
    values: AtomicU64,
    pages: AtomicU64,
    stores: AtomicU64,
    read_bytes: AtomicU64,
}

// SAFETY: `base` is the start of `region`'s mapping, which lives as long as
// the heap and never moves; the bytes behind it are only written into free
// slots under `inner`'s lock and only read through live handles, whose
// slots no one writes (see the module comment).
unsafe impl Send for SlabHeap {}
// SAFETY: as above.
unsafe impl Sync for SlabHeap {}

impl SlabHeap {
    /// Maps `path` as a heap of `capacity` bytes (rounded down to whole
    /// pages, at least one), discarding what the file held. `model`
    /// chooses the media model for this heap (`None`: the process's).
    pub fn create(
        path: impl AsRef<Path>,
        capacity: usize,
        model: Option<ModelChoice>,
    ) -> Result<Arc<SlabHeap>> {
        let path = path.as_ref();
        let pages = capacity / PAGE_BYTES;
        if pages == 0 {
            return Err(Error::Config {
                reason: format!("a PM heap needs at least {PAGE_BYTES} bytes, got {capacity}"),
            });
        }
        let capacity = pages * PAGE_BYTES;
        // The old contents mean nothing (the heap is rebuilt from the log):
        // truncating drops their blocks before the new ones are allocated.
        if path.exists() {
            std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .and_then(|f| f.set_len(0))
                .map_err(|e| Error::io("truncate", path, e))?;
        }
        let options = MapOptions {
            max_len: capacity,
            ..MapOptions::new(capacity)
        };
        let region = match model {
            Some(model) => PmemRegion::map_with_model(path, options, model)?,
            None => PmemRegion::map_with(path, options)?,
        };
        let base = region.read_ptr(0, capacity).ok_or(Error::OutOfBounds {
            offset: 0,
            len: capacity,
            mapped: region.len(),
        })?;
        let sizes = class_sizes();
        let classes = sizes.iter().map(|_| Class::default()).collect();
        Ok(Arc::new(SlabHeap {
            region,
            base,
            capacity,
            sizes,
            inner: Mutex::new(Classes {
                classes,
                next_page: 0,
            }),
            slot_bytes: AtomicU64::new(0),
            value_bytes: AtomicU64::new(0),
            values: AtomicU64::new(0),
            pages: AtomicU64::new(0),
            stores: AtomicU64::new(0),
            read_bytes: AtomicU64::new(0),
        }))
    }

    /// The class that holds `len` bytes, if any.
    fn class_of(&self, len: usize) -> Option<usize> {
        let class = self.sizes.partition_point(|&size| size < len);
        (class < self.sizes.len()).then_some(class)
    }

    /// Copies `data` into a free slot and persists it; `None` when the
    /// value is longer than [`MAX_VALUE`] or no slot of its class is left
    /// (the heap is full for it), or the copy failed.
    pub fn store(self: &Arc<Self>, data: &[u8]) -> Option<SlabRef> {
        let class = self.class_of(data.len().max(1))?;
        let offset = self.take_slot(class)?;
        let at = usize::try_from(offset).ok()?;
        if let Err(error) = self.region.copy_persist(at, data) {
            tracing::warn!(%error, "PM heap: a value could not be written");
            self.give_back(class, offset);
            return None;
        }
        let slot = self.sizes[class] as u64;
        self.slot_bytes.fetch_add(slot, Relaxed);
        self.value_bytes.fetch_add(data.len() as u64, Relaxed);
        self.values.fetch_add(1, Relaxed);
        self.stores.fetch_add(1, Relaxed);
        Some(SlabRef {
            heap: Arc::clone(self),
            loc: (offset << LEN_BITS) | data.len() as u64,
        })
    }

    /// A free slot of `class`: a freed one, else carved from the class's
    /// newest page, else from a new page.
    fn take_slot(&self, class: usize) -> Option<u64> {
        let size = self.sizes[class];
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let total_pages = self.capacity / PAGE_BYTES;
        let next_page = inner.next_page;
        let entry = inner.classes.get_mut(class)?;
        if let Some(offset) = entry.free.pop() {
            return Some(offset);
        }
        if entry.carve_at + size > entry.carve_end {
            if next_page >= total_pages {
                return None;
            }
            entry.carve_at = next_page * PAGE_BYTES;
            entry.carve_end = entry.carve_at + PAGE_BYTES;
            inner.next_page += 1;
            self.pages.fetch_add(1, Relaxed);
        }
        let entry = inner.classes.get_mut(class)?;
        let offset = entry.carve_at;
        entry.carve_at += size;
        Some(offset as u64)
    }

    fn give_back(&self, class: usize, offset: u64) {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(entry) = inner.classes.get_mut(class) {
            entry.free.push(offset);
        }
    }

    /// What the heap holds now.
    pub fn stats(&self) -> SlabStats {
        SlabStats {
            capacity: self.capacity as u64,
            slot_bytes: self.slot_bytes.load(Relaxed),
            value_bytes: self.value_bytes.load(Relaxed),
            values: self.values.load(Relaxed),
            pages: self.pages.load(Relaxed),
            stores: self.stores.load(Relaxed),
            read_bytes: self.read_bytes.load(Relaxed),
        }
    }

    /// The flush accounting of the heap's region (every store's persist).
    pub fn flush_stats(&self) -> FlushStats {
        self.region.stats()
    }

    /// Bytes of the heap.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

/// One value in a [`SlabHeap`]: its slot stays allocated while a clone of
/// the handle lives. Two words (the heap and the packed offset and length).
#[derive(Debug)]
pub struct SlabRef {
    heap: Arc<SlabHeap>,
    loc: u64,
}

impl SlabRef {
    fn offset(&self) -> usize {
        (self.loc >> LEN_BITS) as usize
    }

    /// The value's length, without reading PM.
    pub fn len(&self) -> usize {
        (self.loc & ((1 << LEN_BITS) - 1)) as usize
    }

    /// Whether the value is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The value's bytes, read in place from the mapping. Charged to the
    /// media model as a read of the slot (the load latency of its first
    /// 256-byte line and the bandwidth of the rest) and counted in
    /// [`SlabStats::read_bytes`].
    pub fn bytes(&self) -> &[u8] {
        let (offset, len) = (self.offset(), self.len());
        self.heap.region.charge_read(offset, len);
        self.heap.read_bytes.fetch_add(len as u64, Relaxed);
        // SAFETY: `[offset, offset + len)` lies in the heap's mapping
        // (`store` put it there, inside `capacity`), which lives while
        // `self.heap` does; its bytes were written before this handle
        // existed and are not written again until the last handle is
        // dropped (the module comment), so no write aliases this slice.
        unsafe { std::slice::from_raw_parts(self.heap.base.add(offset), len) }
    }

    /// The address of the value's first byte, for a prefetch; reads
    /// nothing.
    pub fn addr(&self) -> *const u8 {
        self.heap.base.wrapping_add(self.offset())
    }

    /// The heap this value lives in.
    pub fn heap(&self) -> &Arc<SlabHeap> {
        &self.heap
    }
}

impl Drop for SlabRef {
    fn drop(&mut self) {
        let len = self.len();
        let Some(class) = self.heap.class_of(len.max(1)) else {
            return;
        };
        self.heap
            .slot_bytes
            .fetch_sub(self.heap.sizes[class] as u64, Relaxed);
        self.heap.value_bytes.fetch_sub(len as u64, Relaxed);
        self.heap.values.fetch_sub(1, Relaxed);
        self.heap.give_back(class, self.offset() as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn heap(pages: usize) -> (tempfile::TempDir, Arc<SlabHeap>) {
        let dir = tempfile::tempdir().expect("temp dir");
        let heap =
            SlabHeap::create(dir.path().join("heap"), pages * PAGE_BYTES, None).expect("heap maps");
        (dir, heap)
    }

    #[test]
    fn classes_grow_by_a_quarter_and_end_at_a_page() {
        let sizes = class_sizes();
        assert_eq!(sizes[0], 64);
        assert_eq!(sizes[1], 80);
        assert_eq!(sizes.len(), 79);
        assert_eq!(*sizes.last().expect("classes"), PAGE_BYTES);
        assert!(sizes.windows(2).all(|w| w[0] < w[1] && w[0] % 16 == 0));
    }

    #[test]
    fn a_value_reads_back_and_its_slot_is_reused_once_freed() {
        let (_dir, heap) = heap(2);
        let a = heap.store(&[7u8; 1000]).expect("room");
        assert_eq!(a.bytes(), &[7u8; 1000][..]);
        let at = a.offset();
        let stats = heap.stats();
        assert_eq!((stats.values, stats.value_bytes), (1, 1000));
        assert_eq!(stats.slot_bytes, 1040, "1000 fits the 1040-byte class");
        drop(a);
        assert_eq!(heap.stats().slot_bytes, 0);
        let b = heap.store(&[9u8; 999]).expect("room");
        assert_eq!(b.offset(), at, "the freed slot is taken first");
        assert_eq!(b.bytes(), &[9u8; 999][..]);
        assert_eq!(heap.stats().read_bytes, 1999);
    }

    #[test]
    fn a_full_heap_refuses_and_a_free_makes_room() {
        let (_dir, heap) = heap(1);
        let big = heap.store(&vec![1u8; MAX_VALUE]).expect("one page");
        assert!(heap.store(&[2u8; 100]).is_none(), "no page left");
        assert!(heap.store(&vec![0u8; MAX_VALUE + 1]).is_none());
        drop(big);
        // The page stays with its class: a page-sized value fits again.
        assert!(heap.store(&vec![3u8; MAX_VALUE]).is_some());
    }

    #[test]
    fn the_old_contents_are_discarded_and_a_zero_heap_refused() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("heap");
        std::fs::write(&path, vec![0xAB; 4096]).expect("write");
        let heap = SlabHeap::create(&path, PAGE_BYTES, None).expect("maps");
        let v = heap.store(b"").expect("room");
        assert!(v.is_empty());
        assert!(SlabHeap::create(dir.path().join("small"), 4096, None).is_err());
    }
}
