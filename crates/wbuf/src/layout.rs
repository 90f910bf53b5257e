//! The on-PM layout: superblock, slot headers and where each slot's data
//! lives. Pure encoding and decoding, so the decoders can be property
//! tested on arbitrary bytes. `docs/format.md` ("PM write buffer") draws it.

use std::fmt;

/// First bytes of a write-buffer region.
pub const MAGIC: [u8; 8] = *b"FRTWBUF1";
/// Current format version.
pub const VERSION: u32 = 1;
/// Bytes of the superblock (one page).
pub const SUPERBLOCK_LEN: usize = 4096;
/// Bytes of one slot header (one cache line).
pub const SLOT_HEADER_LEN: usize = 64;
/// Offset of the failure-atomic destage mark word.
pub const MARK_OFFSET: usize = 40;
/// Bytes of the superblock fields covered by its CRC (after the magic).
const FIELDS_END: usize = 32;
/// Smallest and largest block sizes accepted.
pub const BLOCK_MIN: u32 = 512;
/// See [`BLOCK_MIN`].
pub const BLOCK_MAX: u32 = 1 << 20;
/// Page alignment of the header table and the data area.
const PAGE: usize = 4096;

const _: () = assert!(MARK_OFFSET.is_multiple_of(8) && MARK_OFFSET >= FIELDS_END + 8);
const _: () = assert!(SLOT_HEADER_LEN >= 24 && SLOT_HEADER_LEN.is_multiple_of(8));

/// Why bytes are not a valid superblock or slot header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayoutError {
    /// Offset of the offending field within the structure.
    pub offset: u64,
    /// What is wrong, for the user.
    pub reason: String,
}

impl LayoutError {
    fn new(offset: usize, reason: impl Into<String>) -> LayoutError {
        LayoutError {
            offset: offset as u64,
            reason: reason.into(),
        }
    }
}

impl fmt::Display for LayoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at byte {}: {}", self.offset, self.reason)
    }
}

/// The shape of a buffer: fixed when it is created.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// Bytes per block (a power of two).
    pub block: u32,
    /// Number of slots.
    pub slots: u64,
    /// Offset of slot 0's data.
    pub data_offset: u64,
}

fn round_up(value: u64, to: u64) -> u64 {
    value.div_ceil(to) * to
}

impl Geometry {
    /// The largest geometry with `block`-byte blocks that fits in
    /// `region_len` bytes, or why there is none.
    pub fn fit(block: u32, region_len: usize) -> Result<Geometry, LayoutError> {
        check_block(block)?;
        let region = region_len as u64;
        let per_slot = u64::from(block) + SLOT_HEADER_LEN as u64;
        // Page rounding of the header table and of the data start costs at
        // most two pages; take them off first, then shrink until it fits.
        let mut slots = region.saturating_sub((SUPERBLOCK_LEN + 2 * PAGE) as u64) / per_slot;
        while slots >= 2 {
            let geometry = Geometry::with_slots(block, slots);
            if geometry.region_len() <= region {
                return Ok(geometry);
            }
            slots -= 1;
        }
        Err(LayoutError::new(
            0,
            format!("a {region_len}-byte region holds fewer than two {block}-byte blocks"),
        ))
    }

    /// The geometry of `slots` slots of `block` bytes.
    pub fn with_slots(block: u32, slots: u64) -> Geometry {
        let headers_end = SUPERBLOCK_LEN as u64 + slots * SLOT_HEADER_LEN as u64;
        Geometry {
            block,
            slots,
            data_offset: round_up(headers_end, PAGE as u64),
        }
    }

    /// Bytes of PM the geometry spans.
    pub fn region_len(&self) -> u64 {
        self.data_offset + self.slots * u64::from(self.block)
    }

    /// Offset of slot `slot`'s header.
    pub fn header_at(&self, slot: u32) -> usize {
        SUPERBLOCK_LEN + slot as usize * SLOT_HEADER_LEN
    }

    /// Offset of slot `slot`'s data.
    pub fn data_at(&self, slot: u32) -> usize {
        self.data_offset as usize + slot as usize * self.block as usize
    }
}

fn check_block(block: u32) -> Result<(), LayoutError> {
    if !(BLOCK_MIN..=BLOCK_MAX).contains(&block) || !block.is_power_of_two() {
        return Err(LayoutError::new(
            12,
            format!("block size {block} is not a power of two in {BLOCK_MIN}..={BLOCK_MAX}"),
        ));
    }
    Ok(())
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    let mut word = [0u8; 4];
    if let Some(src) = bytes.get(at..at + 4) {
        word.copy_from_slice(src);
    }
    u32::from_le_bytes(word)
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0u8; 8];
    if let Some(src) = bytes.get(at..at + 8) {
        word.copy_from_slice(src);
    }
    u64::from_le_bytes(word)
}

/// The superblock's fields after the magic, with their CRC: what creation
/// writes and drains before it stores the magic.
pub fn encode_superblock_fields(geometry: &Geometry) -> [u8; FIELDS_END + 8] {
    let mut out = [0u8; FIELDS_END + 8];
    out[8..12].copy_from_slice(&VERSION.to_le_bytes());
    out[12..16].copy_from_slice(&geometry.block.to_le_bytes());
    out[16..24].copy_from_slice(&geometry.slots.to_le_bytes());
    out[24..32].copy_from_slice(&geometry.data_offset.to_le_bytes());
    let crc = crc32c::crc32c(&out[8..FIELDS_END]);
    out[FIELDS_END..FIELDS_END + 4].copy_from_slice(&crc.to_le_bytes());
    out
}

/// What the first bytes of a region say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Superblock {
    /// No magic: no buffer was ever created here.
    Absent,
    /// A valid buffer of this geometry.
    Valid(Geometry),
}

/// Decodes the first `FIELDS_END + 8` bytes of a region (shorter input is
/// an error) and checks the geometry against `region_len`.
pub fn decode_superblock(bytes: &[u8], region_len: u64) -> Result<Superblock, LayoutError> {
    let Some(magic) = bytes.get(..8) else {
        return Err(LayoutError::new(0, "region shorter than a superblock"));
    };
    if magic.iter().all(|&b| b == 0) {
        return Ok(Superblock::Absent);
    }
    if magic != MAGIC {
        return Err(LayoutError::new(
            0,
            "not a Ferrite write buffer (bad magic)",
        ));
    }
    if bytes.len() < FIELDS_END + 8 {
        return Err(LayoutError::new(0, "region shorter than a superblock"));
    }
    let crc = u32_at(bytes, FIELDS_END);
    if crc32c::crc32c(&bytes[8..FIELDS_END]) != crc {
        return Err(LayoutError::new(FIELDS_END, "superblock checksum mismatch"));
    }
    let version = u32_at(bytes, 8);
    if version != VERSION {
        return Err(LayoutError::new(
            8,
            format!("unsupported version {version}"),
        ));
    }
    let block = u32_at(bytes, 12);
    check_block(block)?;
    let slots = u64_at(bytes, 16);
    if !(2..=u64::from(u32::MAX)).contains(&slots) {
        return Err(LayoutError::new(
            16,
            format!("slot count {slots} out of range"),
        ));
    }
    let expected = Geometry::with_slots(block, slots);
    let data_offset = u64_at(bytes, 24);
    if data_offset != expected.data_offset {
        return Err(LayoutError::new(
            24,
            format!("data offset {data_offset} does not follow {slots} slot headers"),
        ));
    }
    if expected.region_len() > region_len {
        return Err(LayoutError::new(
            16,
            format!(
                "{slots} slots of {block} bytes need {} bytes, the region has {region_len}",
                expected.region_len()
            ),
        ));
    }
    Ok(Superblock::Valid(expected))
}

/// The destage mark word: the highest sequence number synced to the file,
/// and whether the buffer was closed clean.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mark {
    /// Every version numbered up to this is in the synced file.
    pub seq: u64,
    /// The last close destaged everything and nothing was staged since.
    pub clean: bool,
}

impl Mark {
    /// The word stored at [`MARK_OFFSET`].
    pub fn encode(self) -> u64 {
        (self.seq << 1) | u64::from(self.clean)
    }

    /// The mark a word holds.
    pub fn decode(word: u64) -> Mark {
        Mark {
            seq: word >> 1,
            clean: word & 1 == 1,
        }
    }
}

/// One slot's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotHeader {
    /// Byte offset of the block in the file (a multiple of the block size).
    pub offset: u64,
    /// Sequence number, at least 1.
    pub seq: u64,
    /// Valid bytes of the image.
    pub len: u32,
}

impl SlotHeader {
    /// The header bytes for this slot holding `image` (`image.len()` must
    /// be `self.len`).
    pub fn encode(&self, image: &[u8]) -> [u8; SLOT_HEADER_LEN] {
        let mut out = [0u8; SLOT_HEADER_LEN];
        out[0..8].copy_from_slice(&self.offset.to_le_bytes());
        out[8..16].copy_from_slice(&self.seq.to_le_bytes());
        out[16..20].copy_from_slice(&self.len.to_le_bytes());
        let crc = crc32c::crc32c_append(crc32c::crc32c(&out[..20]), image);
        out[20..24].copy_from_slice(&crc.to_le_bytes());
        out
    }

    /// Decodes a header without its image: the fields, checked for shape
    /// against the block size. `Ok(None)` for a never-written slot.
    pub fn decode(bytes: &[u8], block: u32) -> Result<Option<(SlotHeader, u32)>, LayoutError> {
        if bytes.len() < 24 {
            return Err(LayoutError::new(0, "slot header shorter than 24 bytes"));
        }
        let header = SlotHeader {
            offset: u64_at(bytes, 0),
            seq: u64_at(bytes, 8),
            len: u32_at(bytes, 16),
        };
        if header.seq == 0 {
            return Ok(None);
        }
        if !header.offset.is_multiple_of(u64::from(block.max(1))) {
            return Err(LayoutError::new(0, "block offset not block aligned"));
        }
        if header.len == 0 || header.len > block {
            return Err(LayoutError::new(
                16,
                format!("image length {} not in 1..={block}", header.len),
            ));
        }
        Ok(Some((header, u32_at(bytes, 20))))
    }

    /// Whether `crc` (from [`SlotHeader::decode`]) matches this header and
    /// `image`.
    pub fn checks(&self, crc: u32, image: &[u8]) -> bool {
        let fields = self.encode(&[]);
        crc32c::crc32c_append(crc32c::crc32c(&fields[..20]), image) == crc
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geometry_fits_and_aligns() {
        let g = Geometry::fit(16384, 64 << 20).expect("fits");
        assert!(g.region_len() <= 64 << 20);
        assert_eq!(g.data_offset % 4096, 0);
        assert!(g.slots > 4000);
        assert!(Geometry::fit(16384, 8192).is_err());
        assert!(Geometry::fit(1000, 1 << 20).is_err());
    }

    #[test]
    fn superblock_round_trips() {
        let g = Geometry::fit(4096, 1 << 20).expect("fits");
        let mut bytes = encode_superblock_fields(&g).to_vec();
        assert_eq!(decode_superblock(&bytes, 1 << 20), Ok(Superblock::Absent));
        bytes[..8].copy_from_slice(&MAGIC);
        assert_eq!(decode_superblock(&bytes, 1 << 20), Ok(Superblock::Valid(g)));
        bytes[20] ^= 1;
        assert!(decode_superblock(&bytes, 1 << 20).is_err());
    }

    #[test]
    fn header_crc_covers_the_image() {
        let h = SlotHeader {
            offset: 8192,
            seq: 7,
            len: 3,
        };
        let bytes = h.encode(b"abc");
        let (back, crc) = SlotHeader::decode(&bytes, 4096).expect("ok").expect("some");
        assert_eq!(back, h);
        assert!(back.checks(crc, b"abc"));
        assert!(!back.checks(crc, b"abd"));
    }
}
