//! The on-media format: the log header and record framing.
//!
//! The byte layouts and the crash argument are drawn in `docs/format.md`
//! ("Write-ahead log"). Everything is little-endian.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;

/// A log sequence number: records are numbered consecutively, without gaps,
/// across log files (a new file starts where the old one ended).
pub type Lsn = u64;

/// First bytes of a log file.
pub const LOG_MAGIC: [u8; 8] = *b"FRTWAL\r\n";
/// Current format version.
pub const LOG_VERSION: u32 = 1;
/// Bytes of the log header; the first record starts here.
pub const LOG_HEADER_LEN: usize = 64;
/// First bytes of every record, `b"FWR1"` as a little-endian u32.
pub const RECORD_MAGIC: u32 = u32::from_le_bytes(*b"FWR1");
/// Bytes of a record header; the payload follows.
pub const RECORD_HEADER_LEN: usize = 32;
/// Records start at multiples of this (payloads are zero-padded), so that
/// recovery can look for later records at aligned offsets only.
pub const RECORD_ALIGN: usize = 8;
/// Records a self-persisting (PM) writer pads to: one cache line, so that no
/// two appenders ever flush the same line.
pub const PM_RECORD_ALIGN: usize = 64;
/// Largest payload the format can frame.
pub const PAYLOAD_LEN_FORMAT_MAX: usize = u32::MAX as usize - RECORD_ALIGN;
/// Largest extra padding a record may carry (a writer pads records to end
/// on a cache line on persistent memory).
pub const PAD_LEN_MAX: usize = 4096;

// Header field offsets.
const H_VERSION: usize = 8;
const H_HEADER_LEN: usize = 12;
const H_BASE_LSN: usize = 16;
const H_SALT: usize = 24;
const H_WINDOW: usize = 32;
const H_CRC: usize = 60;

// Record field offsets.
const R_LEN: usize = 4;
const R_LSN: usize = 8;
const R_HINT: usize = 16;
const R_PAD: usize = 24;
const R_CRC: usize = 28;

const _: () = assert!(H_WINDOW + 8 <= H_CRC && H_CRC + 4 == LOG_HEADER_LEN);
const _: () = assert!(LOG_HEADER_LEN.is_multiple_of(RECORD_ALIGN));
const _: () =
    assert!(R_CRC + 4 == RECORD_HEADER_LEN && RECORD_HEADER_LEN.is_multiple_of(RECORD_ALIGN));
const _: () = assert!(R_LSN.is_multiple_of(8) && R_HINT.is_multiple_of(8));

/// The header at offset 0 of every log file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogHeader {
    /// LSN of the first record of this file.
    pub base_lsn: Lsn,
    /// Random per file; mixed into every record checksum, so records of
    /// another log file (or a stale copy) never validate here.
    pub salt: u64,
    /// The most bytes that can be appended past the durable end of the log
    /// at any time (`max_in_flight_bytes` when the file was created). Only
    /// this close to the durable end can a crash leave a hole; recovery
    /// uses it to tell a torn tail from damage in the middle.
    pub window_bytes: u64,
}

impl LogHeader {
    /// A header for a new file, with a fresh random salt.
    pub fn new(base_lsn: Lsn, window_bytes: u64) -> LogHeader {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        // RandomState is seeded randomly per process; hashing the time with
        // it gives a salt that differs between files and between runs.
        let salt = RandomState::new().hash_one(nanos ^ base_lsn);
        LogHeader {
            base_lsn,
            salt,
            window_bytes,
        }
    }

    /// The 64 header bytes.
    pub fn encode(&self) -> [u8; LOG_HEADER_LEN] {
        let mut bytes = [0u8; LOG_HEADER_LEN];
        bytes[..8].copy_from_slice(&LOG_MAGIC);
        put_u32(&mut bytes, H_VERSION, LOG_VERSION);
        put_u32(&mut bytes, H_HEADER_LEN, LOG_HEADER_LEN as u32);
        put_u64(&mut bytes, H_BASE_LSN, self.base_lsn);
        put_u64(&mut bytes, H_SALT, self.salt);
        put_u64(&mut bytes, H_WINDOW, self.window_bytes);
        let crc = crc32c::crc32c(&bytes[..H_CRC]);
        put_u32(&mut bytes, H_CRC, crc);
        bytes
    }

    /// Parses and checks header bytes; the error says what is wrong.
    pub fn decode(bytes: &[u8; LOG_HEADER_LEN]) -> Result<LogHeader, String> {
        if bytes[..8] != LOG_MAGIC {
            return Err("bad magic".into());
        }
        if crc32c::crc32c(&bytes[..H_CRC]) != get_u32(bytes, H_CRC) {
            return Err("header checksum mismatch".into());
        }
        let version = get_u32(bytes, H_VERSION);
        if version != LOG_VERSION {
            return Err(format!("unsupported version {version}"));
        }
        let header_len = get_u32(bytes, H_HEADER_LEN);
        if header_len as usize != LOG_HEADER_LEN {
            return Err(format!("unsupported header length {header_len}"));
        }
        let header = LogHeader {
            base_lsn: get_u64(bytes, H_BASE_LSN),
            salt: get_u64(bytes, H_SALT),
            window_bytes: get_u64(bytes, H_WINDOW),
        };
        if header.window_bytes == 0 {
            return Err("zero in-flight window".into());
        }
        Ok(header)
    }
}

/// Bytes a record with a payload of `payload_len` bytes takes on the medium
/// when records are padded to multiples of `align` (8, or 64 to give every
/// record its own cache lines on persistent memory).
pub fn framed_len(payload_len: usize, align: usize) -> usize {
    debug_assert!(align.is_power_of_two() && (RECORD_ALIGN..=PAD_LEN_MAX).contains(&align));
    (RECORD_HEADER_LEN + payload_len).next_multiple_of(align)
}

/// Zero bytes after the 8-aligned payload, to reach a multiple of `align`.
fn pad_len(payload_len: usize, align: usize) -> usize {
    framed_len(payload_len, align) - framed_len(payload_len, RECORD_ALIGN)
}

/// Appends the framed record to `out`: header, payload, zero padding up to
/// a multiple of `align`. `durable_hint` is an LSN known durable when the
/// record is framed.
pub fn encode_record(
    out: &mut Vec<u8>,
    salt: u64,
    lsn: Lsn,
    durable_hint: Lsn,
    payload: &[u8],
    align: usize,
) {
    let pad = pad_len(payload.len(), align);
    encode_record_padded(out, salt, lsn, durable_hint, payload, pad);
}

/// [`encode_record`] with `pad` zero bytes after the 8-aligned payload
/// (a multiple of [`RECORD_ALIGN`], at most [`PAD_LEN_MAX`]): the last
/// record of a batch is padded to end the batch on a cache line.
pub fn encode_record_padded(
    out: &mut Vec<u8>,
    salt: u64,
    lsn: Lsn,
    durable_hint: Lsn,
    payload: &[u8],
    pad: usize,
) {
    debug_assert!(payload.len() <= PAYLOAD_LEN_FORMAT_MAX);
    debug_assert!(durable_hint < lsn, "a record cannot vouch for itself");
    debug_assert!(pad <= PAD_LEN_MAX && pad.is_multiple_of(RECORD_ALIGN));
    let mut header = [0u8; RECORD_HEADER_LEN];
    put_u32(&mut header, 0, RECORD_MAGIC);
    put_u32(&mut header, R_LEN, payload.len() as u32);
    put_u64(&mut header, R_LSN, lsn);
    put_u64(&mut header, R_HINT, durable_hint);
    put_u32(&mut header, R_PAD, pad as u32);
    let crc = record_crc(salt, &header, payload);
    put_u32(&mut header, R_CRC, crc);
    out.extend_from_slice(&header);
    out.extend_from_slice(payload);
    let framed = framed_len(payload.len(), RECORD_ALIGN) + pad;
    out.resize(out.len() + framed - RECORD_HEADER_LEN - payload.len(), 0);
}

fn record_crc(salt: u64, header: &[u8; RECORD_HEADER_LEN], payload: &[u8]) -> u32 {
    let crc = crc32c::crc32c(&salt.to_le_bytes());
    let crc = crc32c::crc32c_append(crc, &header[..R_CRC]);
    crc32c::crc32c_append(crc, payload)
}

/// A record header that passed the checks that need no payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordHeader {
    /// Payload bytes.
    pub payload_len: usize,
    /// The record's LSN.
    pub lsn: Lsn,
    /// An LSN that was durable when this record was framed.
    pub durable_hint: Lsn,
    /// Zero bytes after the 8-aligned payload.
    pub pad_len: usize,
    crc: u32,
    raw: [u8; RECORD_HEADER_LEN],
}

impl RecordHeader {
    /// Parses a record header; `None` if the magic, padding or length are
    /// impossible (a zeroed or torn region).
    pub fn parse(bytes: &[u8; RECORD_HEADER_LEN], payload_len_max: usize) -> Option<RecordHeader> {
        if get_u32(bytes, 0) != RECORD_MAGIC {
            return None;
        }
        let payload_len = get_u32(bytes, R_LEN) as usize;
        let lsn = get_u64(bytes, R_LSN);
        let durable_hint = get_u64(bytes, R_HINT);
        let pad_len = get_u32(bytes, R_PAD) as usize;
        if payload_len > payload_len_max || durable_hint >= lsn {
            return None;
        }
        if pad_len > PAD_LEN_MAX || !pad_len.is_multiple_of(RECORD_ALIGN) {
            return None;
        }
        Some(RecordHeader {
            payload_len,
            lsn,
            durable_hint,
            pad_len,
            crc: get_u32(bytes, R_CRC),
            raw: *bytes,
        })
    }

    /// Whether `payload` is this record's, intact, in a file with `salt`.
    pub fn verify(&self, salt: u64, payload: &[u8]) -> bool {
        payload.len() == self.payload_len && record_crc(salt, &self.raw, payload) == self.crc
    }

    /// Bytes the record takes, padding included.
    pub fn framed_len(&self) -> usize {
        framed_len(self.payload_len, RECORD_ALIGN) + self.pad_len
    }
}

fn put_u32(bytes: &mut [u8], at: usize, value: u32) {
    bytes[at..at + 4].copy_from_slice(&value.to_le_bytes());
}

fn put_u64(bytes: &mut [u8], at: usize, value: u64) {
    bytes[at..at + 8].copy_from_slice(&value.to_le_bytes());
}

fn get_u32(bytes: &[u8], at: usize) -> u32 {
    let mut word = [0u8; 4];
    word.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(word)
}

fn get_u64(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(word)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips_and_detects_damage() {
        let header = LogHeader::new(42, 1 << 20);
        let mut bytes = header.encode();
        assert_eq!(LogHeader::decode(&bytes), Ok(header));
        bytes[20] ^= 1;
        assert!(LogHeader::decode(&bytes).is_err());
    }

    #[test]
    fn record_round_trips_and_every_bit_flip_is_caught() {
        let mut out = Vec::new();
        encode_record(&mut out, 7, 5, 3, b"SET k v", RECORD_ALIGN);
        assert_eq!(out.len(), framed_len(7, RECORD_ALIGN));
        assert_eq!(out.len() % RECORD_ALIGN, 0);
        for bit in 0..(RECORD_HEADER_LEN + 7) * 8 {
            let mut damaged = out.clone();
            damaged[bit / 8] ^= 1 << (bit % 8);
            let head: [u8; RECORD_HEADER_LEN] =
                damaged[..RECORD_HEADER_LEN].try_into().expect("32 bytes");
            let ok = RecordHeader::parse(&head, 1024).is_some_and(|h| {
                damaged.len() >= RECORD_HEADER_LEN + h.payload_len
                    && h.verify(
                        7,
                        &damaged[RECORD_HEADER_LEN..RECORD_HEADER_LEN + h.payload_len],
                    )
            });
            assert!(!ok, "flip of bit {bit} went unnoticed");
        }
        let head: [u8; RECORD_HEADER_LEN] = out[..32].try_into().expect("32 bytes");
        let parsed = RecordHeader::parse(&head, 1024).expect("valid");
        assert_eq!(
            (parsed.lsn, parsed.durable_hint, parsed.payload_len),
            (5, 3, 7)
        );
        assert!(parsed.verify(7, &out[32..39]));
        assert!(!parsed.verify(8, &out[32..39]), "another file's salt");
    }

    #[test]
    fn cache_line_padding_is_recorded_and_checked() {
        let mut out = Vec::new();
        encode_record(&mut out, 1, 2, 1, &[9u8; 100], 64);
        assert_eq!(out.len(), 192);
        let head: [u8; RECORD_HEADER_LEN] = out[..32].try_into().expect("32 bytes");
        let parsed = RecordHeader::parse(&head, 1024).expect("valid");
        assert_eq!(parsed.framed_len(), 192);
        assert_eq!(parsed.pad_len, 192 - 136);
    }
}
