//! Opening a buffer: creation, the clean fast path, and recovery (replay
//! of every valid slot past the destage mark, in sequence order).

use std::path::Path;

use ferrite_io::{Device, Error, Result};
use ferrite_pmem::PmemMedium;

use crate::config::WbufConfig;
use crate::layout::{
    decode_superblock, encode_superblock_fields, Geometry, Mark, SlotHeader, Superblock, MAGIC,
    MARK_OFFSET, SLOT_HEADER_LEN,
};

/// What opening found.
#[derive(Debug)]
pub(crate) struct Opened {
    pub geometry: Geometry,
    /// The persisted destage mark: every slot is at or below it.
    pub mark: u64,
    pub replayed_bytes: u64,
    pub syncs: u64,
}

fn corrupt(path: &Path, offset: u64, reason: String) -> Error {
    Error::Corrupt {
        path: path.to_path_buf(),
        offset,
        reason,
    }
}

/// Opens the buffer on `pm`: creates it on zeros, else recovers it into
/// `backing`. On return the file holds every staged write, synced, and the
/// mark (persisted, `clean` cleared) covers every slot.
pub(crate) fn open<M: PmemMedium>(
    pm: &M,
    pm_path: &Path,
    backing: &dyn Device,
    config: &WbufConfig,
) -> Result<Opened> {
    let mut first = [0u8; MARK_OFFSET + 8];
    pm.read(0, &mut first)?;
    let geometry = match decode_superblock(&first, pm.len() as u64) {
        Ok(Superblock::Absent) => return create(pm, pm_path, config),
        Ok(Superblock::Valid(geometry)) => geometry,
        Err(e) => return Err(corrupt(pm_path, e.offset, e.reason)),
    };
    if geometry.block != config.block_bytes {
        tracing::warn!(
            "write buffer {} keeps its {}-byte blocks (setting asks for {})",
            pm_path.display(),
            geometry.block,
            config.block_bytes
        );
    }
    let mark = Mark::decode(pm.load_u64(MARK_OFFSET)?);
    if mark.clean {
        // Cleared before any write can be staged: a crash after the first
        // write must find this buffer dirty.
        store_mark(pm, mark.seq)?;
        return Ok(Opened {
            geometry,
            mark: mark.seq,
            replayed_bytes: 0,
            syncs: 0,
        });
    }
    recover(pm, &geometry, backing, mark.seq)
}

fn store_mark<M: PmemMedium>(pm: &M, seq: u64) -> Result<()> {
    pm.store_u64(MARK_OFFSET, Mark { seq, clean: false }.encode())?;
    pm.persist(MARK_OFFSET, 8)?;
    Ok(())
}

/// Lays out a new buffer: fields and zeroed headers drained first, then
/// the magic that commits them.
fn create<M: PmemMedium>(pm: &M, pm_path: &Path, config: &WbufConfig) -> Result<Opened> {
    let geometry = Geometry::fit(config.block_bytes, pm.len()).map_err(|e| {
        corrupt(
            pm_path,
            e.offset,
            format!("cannot create a write buffer: {}", e.reason),
        )
    })?;
    let fields = encode_superblock_fields(&geometry);
    pm.copy_nodrain(8, &fields[8..])?;
    pm.memset_nodrain(MARK_OFFSET, 0, 8)?;
    let headers = geometry.slots as usize * SLOT_HEADER_LEN;
    pm.memset_nodrain(geometry.header_at(0), 0, headers)?;
    pm.drain();
    pm.copy_persist(0, &MAGIC)?;
    // Debug, not info: the SQLite VFS creates a buffer per transaction
    // for its rollback journal.
    tracing::debug!(
        "created write buffer {}: {} slots of {} bytes ({})",
        pm_path.display(),
        geometry.slots,
        geometry.block,
        pm.mode().durability()
    );
    Ok(Opened {
        geometry,
        mark: 0,
        replayed_bytes: 0,
        syncs: 0,
    })
}

/// A valid slot found past the mark.
struct Found {
    seq: u64,
    offset: u64,
    slot: u32,
    len: u32,
}

/// Every slot whose header and image check out and whose number is past
/// `mark`. Anything else holds nothing: a torn write was never
/// acknowledged, and a slot at or below the mark is in the file.
fn scan<M: PmemMedium>(pm: &M, geometry: &Geometry, mark: u64) -> Result<Vec<Found>> {
    let mut found = Vec::new();
    let mut header = [0u8; SLOT_HEADER_LEN];
    let mut image = vec![0u8; geometry.block as usize];
    for slot in 0..geometry.slots as u32 {
        pm.read(geometry.header_at(slot), &mut header)?;
        let (h, crc) = match SlotHeader::decode(&header, geometry.block) {
            Ok(Some(decoded)) => decoded,
            Ok(None) => continue,
            Err(e) => {
                tracing::debug!("write-buffer slot {slot} skipped: {e}");
                continue;
            }
        };
        if h.seq <= mark {
            continue;
        }
        let image = &mut image[..h.len as usize];
        pm.read(geometry.data_at(slot), image)?;
        if !h.checks(crc, image) {
            tracing::debug!("write-buffer slot {slot} (seq {}) torn: skipped", h.seq);
            continue;
        }
        found.push(Found {
            seq: h.seq,
            offset: h.offset,
            slot,
            len: h.len,
        });
    }
    found.sort_unstable_by_key(|f| f.seq);
    Ok(found)
}

/// Replays every valid slot past `mark` into the file in sequence order,
/// syncs, then persists the new mark. PM is not changed before that last
/// store, so a crash in here recovers the same way again.
fn recover<M: PmemMedium>(
    pm: &M,
    geometry: &Geometry,
    backing: &dyn Device,
    mark: u64,
) -> Result<Opened> {
    let found = scan(pm, geometry, mark)?;
    let mut image = vec![0u8; geometry.block as usize];
    let mut replayed_bytes = 0u64;
    let mut last = mark;
    for f in &found {
        let image = &mut image[..f.len as usize];
        pm.read(geometry.data_at(f.slot), image)?;
        backing.write_at(f.offset, image)?;
        replayed_bytes += u64::from(f.len);
        last = last.max(f.seq);
    }
    let mut syncs = 0;
    if !found.is_empty() {
        backing.sync()?;
        syncs = 1;
        tracing::info!(
            "write buffer recovered: {} blocks ({replayed_bytes} bytes) replayed to {}",
            found.len(),
            backing.path().display()
        );
    }
    store_mark(pm, last)?;
    Ok(Opened {
        geometry: *geometry,
        mark: last,
        replayed_bytes,
        syncs,
    })
}
