//! [`Batch`] and [`Wal::append_batch`]: several records appended as one.
//!
//! A single-threaded producer that runs many small operations between two
//! points where it waits for durability (a server's event-loop turn) pays,
//! with [`Wal::append`], two lock rounds per record and, on persistent
//! memory, one persist (flushes and a fence) per record. Appending them as
//! a batch takes the lock once to reserve the range and the LSNs of all of
//! them, frames them into one buffer outside the lock, writes it with one
//! device write (on PM: one copy, flushes of its lines, one fence) and takes
//! the lock once more to complete them all.
//!
//! Each record keeps its own frame, LSN and checksum, so readers, recovery
//! and the crash argument are those of single appends (`docs/format.md`):
//! a crash in the middle of a batch's write leaves records that are whole,
//! absent or torn, in any order, past the durable prefix, exactly as
//! concurrent appenders do; none of them was reported durable.
//!
//! On persistent memory a single record is padded to whole cache lines so
//! that no two appenders, each flushing its own range, share a line. A
//! batch is one appender's range: its records lie back to back at the
//! format's 8-byte alignment and only the last is padded, so the batch
//! ends on a line as a single record does (a 101-byte command takes 136
//! bytes instead of 192: fewer lines to flush, fewer pages to ready).

use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard};

use crate::error::{Error, Result};
use crate::group::State;
use crate::reader::payload_len_max;
use crate::record::{encode_record, encode_record_padded, framed_len, Lsn, RECORD_ALIGN};
use crate::writer::Wal;

/// What a batch's buffers keep between batches; a burst's growth past it
/// is given back.
const BATCH_KEEP_BYTES: usize = 1 << 20;

/// Payloads waiting to be appended together by [`Wal::append_batch`], in
/// order.
#[derive(Debug, Default)]
pub struct Batch {
    /// The payloads, back to back.
    bytes: Vec<u8>,
    /// Where each payload ends in `bytes`.
    ends: Vec<usize>,
    /// The framed records of the PM path, reused between batches.
    frame: Vec<u8>,
}

impl Batch {
    /// An empty batch.
    pub fn new() -> Batch {
        Batch::default()
    }

    /// Adds a record with `payload`.
    pub fn push(&mut self, payload: &[u8]) {
        self.bytes.extend_from_slice(payload);
        self.ends.push(self.bytes.len());
    }

    /// Adds a record whose payload `fill` writes at the end of the given
    /// buffer (so it is built in place, not copied); nothing is added if
    /// `fill` returns `false`. Returns what `fill` returned.
    pub fn push_with(&mut self, fill: impl FnOnce(&mut Vec<u8>) -> bool) -> bool {
        let start = self.bytes.len();
        if fill(&mut self.bytes) {
            self.ends.push(self.bytes.len());
            true
        } else {
            self.bytes.truncate(start);
            false
        }
    }

    /// How many records the batch holds.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether the batch holds no record.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The payload bytes of all its records.
    pub fn payload_bytes(&self) -> usize {
        self.bytes.len()
    }

    /// The payloads, in order.
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> + '_ {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts
            .zip(self.ends.iter().copied())
            .map(|(start, end)| self.bytes.get(start..end).unwrap_or_default())
    }

    /// Empties the batch, giving back what a burst grew it to.
    pub fn clear(&mut self) {
        let used = self.bytes.len();
        self.bytes.clear();
        ferrite_io::buf::give_back(&mut self.bytes, used, BATCH_KEEP_BYTES);
        self.ends.clear();
    }
}

impl Wal {
    /// Appends every record of `batch`, in order, with consecutive LSNs, and
    /// empties it; returns the LSN of its last record (the LSN before the
    /// next one if it was empty). The records are durable once
    /// [`Wal::commit`] of that LSN returns, as for [`Wal::append`]; on
    /// persistent memory they are durable when this returns. On an error
    /// none of the batch's records is durable and the batch is emptied.
    pub fn append_batch(&self, batch: &mut Batch) -> Result<Lsn> {
        let result = self.append_batch_inner(batch);
        batch.clear();
        result
    }

    fn append_batch_inner(&self, batch: &mut Batch) -> Result<Lsn> {
        let state = self.shared.lock();
        if batch.is_empty() {
            return Ok(state.next_lsn - 1);
        }
        let max = self
            .shared
            .config
            .record_bytes_max
            .min(payload_len_max(&state.segment.header));
        let mut packed = 0u64;
        for payload in batch.iter() {
            if payload.len() > max {
                return Err(Error::RecordTooLarge {
                    len: payload.len(),
                    max,
                });
            }
            packed += framed_len(payload.len(), RECORD_ALIGN) as u64;
        }
        let size = packed.next_multiple_of(state.segment.align as u64);
        let window = state.segment.header.window_bytes;
        if size > window {
            return Err(Error::BatchTooLarge {
                bytes: size,
                window,
            });
        }
        let mut state = self.admit(state, size)?;
        let counters = &self.shared.counters;
        let records = batch.len() as u64;
        counters.records.fetch_add(records, Ordering::Relaxed);
        counters
            .payload_bytes
            .fetch_add(batch.payload_bytes() as u64, Ordering::Relaxed);
        counters.device_bytes.fetch_add(size, Ordering::Relaxed);
        if state.segment.self_persist {
            return self.append_batch_self_persisted(state, size, batch);
        }
        let (salt, hint) = (state.segment.header.salt, state.durable_lsn);
        for payload in batch.iter() {
            let lsn = state.next_lsn;
            encode_record(&mut state.buffer, salt, lsn, hint, payload, RECORD_ALIGN);
            state.next_lsn += 1;
        }
        state.next_offset += size;
        Ok(state.next_lsn - 1)
    }

    /// PM path: reserve the whole range and every LSN, frame and persist
    /// outside the lock with one write, complete them all.
    fn append_batch_self_persisted(
        &self,
        mut state: MutexGuard<'_, State>,
        size: u64,
        batch: &mut Batch,
    ) -> Result<Lsn> {
        let offset = state.next_offset;
        self.make_room(&mut state, offset + size)?;
        let first = state.next_lsn;
        let records = batch.len() as u64;
        let last = first + records - 1;
        let hint = state.durable_lsn;
        // Every record ends where the next begins; the last one's padding
        // takes the batch to the end of its reserved range.
        let mut end = offset;
        for (i, payload) in batch.iter().enumerate() {
            end += framed_len(payload.len(), RECORD_ALIGN) as u64;
            if i + 1 == batch.len() {
                end = offset + size;
            }
            state.pending.push_back((end, false));
        }
        state.next_lsn = last + 1;
        state.next_offset += size;
        let segment = Arc::clone(&state.segment);
        drop(state);
        let mut frame = std::mem::take(&mut batch.frame);
        frame.clear();
        let salt = segment.header.salt;
        for (lsn, payload) in (first..).zip(batch.iter()) {
            let pad = if lsn == last {
                size as usize - frame.len() - framed_len(payload.len(), RECORD_ALIGN)
            } else {
                0
            };
            encode_record_padded(&mut frame, salt, lsn, hint, payload, pad);
        }
        debug_assert_eq!(frame.len() as u64, size);
        let result = segment.device.write_at(offset, &frame).and_then(|()| {
            if segment.sync_after_write {
                segment.device.sync()?;
            }
            Ok(())
        });
        let written = frame.len();
        ferrite_io::buf::give_back(&mut frame, written, BATCH_KEEP_BYTES);
        batch.frame = frame;
        self.shared
            .counters
            .self_persisted
            .fetch_add(records, Ordering::Relaxed);
        self.shared
            .complete_range(first, last, result.map_err(Into::into))?;
        Ok(last)
    }
}
