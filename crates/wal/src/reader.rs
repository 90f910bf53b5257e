//! Reading records back: a buffered cursor over a device, the parser of one
//! record, and [`LogReader`], which iterates a log from the start.

use std::sync::Arc;

use ferrite_io::Device;

use crate::error::{Error, Result};
use crate::record::{LogHeader, Lsn, RecordHeader, LOG_HEADER_LEN, RECORD_HEADER_LEN};

/// Bytes read from the device at a time.
const CHUNK: usize = 256 << 10;

/// Buffered reads of a device, so scanning small records does not cost one
/// device call per field.
pub(crate) struct Cursor<'a> {
    device: &'a dyn Device,
    len: u64,
    buf: Vec<u8>,
    buf_start: u64,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(device: &'a dyn Device) -> Cursor<'a> {
        Cursor::with_buffer(device, Vec::new())
    }

    /// A cursor reusing `buf` (whose contents are ignored).
    fn with_buffer(device: &'a dyn Device, mut buf: Vec<u8>) -> Cursor<'a> {
        buf.clear();
        Cursor {
            device,
            len: device.len(),
            buf,
            buf_start: 0,
        }
    }

    /// Device length when the cursor was made.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// The `n` bytes at `offset`, or `None` if the device ends before.
    pub(crate) fn bytes(&mut self, offset: u64, n: usize) -> Result<Option<&[u8]>> {
        let Some(end) = offset.checked_add(n as u64) else {
            return Ok(None);
        };
        if end > self.len {
            return Ok(None);
        }
        let cached_end = self.buf_start + self.buf.len() as u64;
        if offset < self.buf_start || end > cached_end {
            let want = n.max(CHUNK).min((self.len - offset) as usize);
            self.buf.resize(want, 0);
            let read = self.device.read_at(offset, &mut self.buf)?;
            self.buf.truncate(read);
            self.buf_start = offset;
            if read < n {
                return Ok(None);
            }
        }
        let at = (offset - self.buf_start) as usize;
        Ok(Some(&self.buf[at..at + n]))
    }
}

/// One record read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// Its LSN.
    pub lsn: Lsn,
    /// Byte offset of its header in the file.
    pub offset: u64,
    /// The payload, as appended.
    pub payload: Vec<u8>,
}

/// What is at an offset where a record is expected.
pub(crate) enum Parsed {
    /// An intact record; the next one starts at `end`.
    Record { header: RecordHeader, end: u64 },
    /// No intact record: the reason, for reports.
    Invalid(String),
}

/// The largest payload a log file with this header can hold: a record never
/// exceeds the in-flight window.
pub(crate) fn payload_len_max(header: &LogHeader) -> usize {
    usize::try_from(header.window_bytes)
        .unwrap_or(usize::MAX)
        .saturating_sub(RECORD_HEADER_LEN)
}

/// Parses the record at `offset`, which should carry `expect` (or any LSN
/// if `expect` is `None`).
pub(crate) fn parse_at(
    cursor: &mut Cursor<'_>,
    header: &LogHeader,
    offset: u64,
    expect: Option<Lsn>,
) -> Result<Parsed> {
    let Some(head) = cursor.bytes(offset, RECORD_HEADER_LEN)? else {
        return Ok(Parsed::Invalid(
            "the file ends inside a record header".into(),
        ));
    };
    let mut raw = [0u8; RECORD_HEADER_LEN];
    raw.copy_from_slice(head);
    let Some(record) = RecordHeader::parse(&raw, payload_len_max(header)) else {
        let reason = if raw.iter().all(|&b| b == 0) {
            "zeroed bytes (never written)"
        } else {
            "no record header (bad magic, flags or length)"
        };
        return Ok(Parsed::Invalid(reason.into()));
    };
    if let Some(lsn) = expect {
        if record.lsn != lsn {
            return Ok(Parsed::Invalid(format!(
                "record carries LSN {} where {lsn} belongs",
                record.lsn
            )));
        }
    }
    let payload_at = offset + RECORD_HEADER_LEN as u64;
    let Some(payload) = cursor.bytes(payload_at, record.payload_len)? else {
        return Ok(Parsed::Invalid("the file ends inside the payload".into()));
    };
    if !record.verify(header.salt, payload) {
        return Ok(Parsed::Invalid("checksum mismatch".into()));
    }
    Ok(Parsed::Record {
        header: record,
        end: offset + record.framed_len() as u64,
    })
}

/// The payload of the intact record whose header `parse_at` read at
/// `offset` (already in the cursor's buffer).
pub(crate) fn payload_of<'c>(
    cursor: &'c mut Cursor<'_>,
    offset: u64,
    record: &RecordHeader,
) -> Result<&'c [u8]> {
    let payload_at = offset + RECORD_HEADER_LEN as u64;
    Ok(cursor
        .bytes(payload_at, record.payload_len)?
        .unwrap_or_default())
}

/// Reads and checks the log header of `device`.
pub(crate) fn read_header(device: &dyn Device) -> Result<LogHeader> {
    let mut bytes = [0u8; LOG_HEADER_LEN];
    let read = device.read_at(0, &mut bytes)?;
    let bad = |reason: String| Error::BadHeader {
        path: device.path().to_path_buf(),
        reason,
    };
    if read < LOG_HEADER_LEN {
        return Err(bad(format!("file is {read} bytes, shorter than a header")));
    }
    LogHeader::decode(&bytes).map_err(bad)
}

/// Iterates the intact records of a log from the start, in LSN order,
/// stopping before the first damaged or missing one.
///
/// Open the log with [`crate::Wal::open`] (or run [`crate::recover`]) first:
/// that decides whether an invalid record is the torn tail or damage. The
/// reader itself never changes the file.
#[derive(Debug)]
pub struct LogReader {
    device: Arc<dyn Device>,
    header: LogHeader,
    offset: u64,
    next_lsn: Lsn,
    done: bool,
    /// Bytes read ahead: `cache_start` is the device offset of `cache[0]`.
    cache: Vec<u8>,
    cache_start: u64,
}

impl LogReader {
    /// A reader at the first record of `device`.
    pub fn open(device: Arc<dyn Device>) -> Result<LogReader> {
        let header = read_header(device.as_ref())?;
        Ok(LogReader {
            device,
            header,
            offset: LOG_HEADER_LEN as u64,
            next_lsn: header.base_lsn,
            done: false,
            cache: Vec::new(),
            cache_start: 0,
        })
    }

    /// The header of the file.
    pub fn header(&self) -> LogHeader {
        self.header
    }

    /// Where the next record would start.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The LSN the next record would carry.
    pub fn next_lsn(&self) -> Lsn {
        self.next_lsn
    }

    fn read_one(&mut self) -> Result<Option<Record>> {
        let device = Arc::clone(&self.device);
        let mut cursor = Cursor::with_buffer(device.as_ref(), Vec::new());
        cursor.buf = std::mem::take(&mut self.cache);
        cursor.buf_start = self.cache_start;
        let result = self.parse_next(&mut cursor);
        self.cache = std::mem::take(&mut cursor.buf);
        self.cache_start = cursor.buf_start;
        result
    }

    fn parse_next(&mut self, cursor: &mut Cursor<'_>) -> Result<Option<Record>> {
        let parsed = parse_at(cursor, &self.header, self.offset, Some(self.next_lsn))?;
        let Parsed::Record { header, end } = parsed else {
            return Ok(None);
        };
        let payload = payload_of(cursor, self.offset, &header)?.to_vec();
        let record = Record {
            lsn: header.lsn,
            offset: self.offset,
            payload,
        };
        self.offset = end;
        self.next_lsn += 1;
        Ok(Some(record))
    }
}

impl Iterator for LogReader {
    type Item = Result<Record>;

    fn next(&mut self) -> Option<Result<Record>> {
        if self.done {
            return None;
        }
        match self.read_one() {
            Ok(Some(record)) => Some(Ok(record)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}
