//! The compact blobs a DUMP payload may embed, read into their elements:
//! listpacks (Redis 7), ziplists and zipmaps (older versions) and
//! intsets. Integers come back as their decimal text, as Redis reads them.
//! Every header, length and entry is checked against the blob: a bad blob
//! is `None`, never a panic or an out-of-bounds read.

/// A cursor over a blob.
struct Cursor<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn new(data: &'a [u8], at: usize) -> Cursor<'a> {
        Cursor { data, at }
    }

    fn byte(&mut self) -> Option<u8> {
        let b = *self.data.get(self.at)?;
        self.at += 1;
        Some(b)
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.at.checked_add(n)?;
        let slice = self.data.get(self.at..end)?;
        self.at = end;
        Some(slice)
    }

    fn peek(&self) -> Option<u8> {
        self.data.get(self.at).copied()
    }

    /// A little-endian signed integer of `n` bytes (1 to 8).
    fn int_le(&mut self, n: usize) -> Option<i64> {
        let bytes = self.take(n)?;
        let mut raw = [0u8; 8];
        raw[..n].copy_from_slice(bytes);
        let value = u64::from_le_bytes(raw);
        let shift = 64 - 8 * n as u32;
        Some(((value << shift) as i64) >> shift)
    }

    fn u32_le(&mut self) -> Option<u32> {
        let b = self.take(4)?;
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
}

fn int_text(value: i64) -> Vec<u8> {
    value.to_string().into_bytes()
}

/// The bytes of a listpack entry's back-length field for an entry of
/// `len` bytes (encoding and data).
pub(super) fn backlen_size(len: usize) -> usize {
    match len {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2_097_150 => 3,
        2_097_151..=268_435_454 => 4,
        _ => 5,
    }
}

/// The elements of a listpack: a 6-byte header (total bytes, element
/// count or 65535 when unknown), the entries, an end byte 0xff.
pub fn listpack(blob: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut c = Cursor::new(blob, 0);
    let total = c.u32_le()? as usize;
    let count = c.int_le(2)? as u16;
    if total != blob.len() || blob.last() != Some(&0xff) {
        return None;
    }
    let mut out = Vec::new();
    loop {
        let start = c.at;
        let b = c.byte()?;
        if b == 0xff {
            break;
        }
        let element = match b {
            0x00..=0x7f => int_text(i64::from(b)),
            0x80..=0xbf => c.take(usize::from(b & 0x3f))?.to_vec(),
            0xc0..=0xdf => {
                let raw = (i64::from(b & 0x1f) << 8) | i64::from(c.byte()?);
                int_text(if raw >= 1 << 12 { raw - (1 << 13) } else { raw })
            }
            0xe0..=0xef => {
                let len = (usize::from(b & 0x0f) << 8) | usize::from(c.byte()?);
                c.take(len)?.to_vec()
            }
            0xf0 => {
                let len = c.u32_le()? as usize;
                c.take(len)?.to_vec()
            }
            0xf1 => int_text(c.int_le(2)?),
            0xf2 => int_text(c.int_le(3)?),
            0xf3 => int_text(c.int_le(4)?),
            0xf4 => int_text(c.int_le(8)?),
            _ => return None,
        };
        c.take(backlen_size(c.at - start))?;
        out.push(element);
    }
    if c.at != blob.len() || (count != u16::MAX && usize::from(count) != out.len()) {
        return None;
    }
    Some(out)
}

/// The elements of a ziplist: a 10-byte header (total bytes, tail offset,
/// element count or 65535), entries each starting with the previous
/// entry's length, an end byte 0xff. As Redis's integrity check, each
/// entry's previous length must be the previous entry's size (0 for the
/// first) and the tail offset must be where the last entry starts (the
/// header's end when empty): a reader walking back from the tail would
/// otherwise leave the blob.
pub fn ziplist(blob: &[u8]) -> Option<Vec<Vec<u8>>> {
    const HEADER_BYTES: usize = 10;
    let mut c = Cursor::new(blob, 0);
    let total = c.u32_le()? as usize;
    let tail = c.u32_le()? as usize;
    let count = c.int_le(2)? as u16;
    if total != blob.len() || tail >= blob.len() || blob.last() != Some(&0xff) {
        return None;
    }
    let mut out = Vec::new();
    let (mut prev_size, mut last_start) = (0usize, HEADER_BYTES);
    while c.peek()? != 0xff {
        let start = c.at;
        let prev_len = match c.byte()? {
            0xfe => c.u32_le()? as usize,
            b => usize::from(b),
        };
        if prev_len != prev_size {
            return None;
        }
        let e = c.byte()?;
        let element = match e >> 6 {
            0 => c.take(usize::from(e & 0x3f))?.to_vec(),
            1 => {
                let len = (usize::from(e & 0x3f) << 8) | usize::from(c.byte()?);
                c.take(len)?.to_vec()
            }
            2 => {
                let b = c.take(4)?;
                let len = u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize;
                c.take(len)?.to_vec()
            }
            _ => int_text(match e {
                0xc0 => c.int_le(2)?,
                0xd0 => c.int_le(4)?,
                0xe0 => c.int_le(8)?,
                0xf0 => c.int_le(3)?,
                0xfe => c.int_le(1)?,
                0xf1..=0xfd => i64::from(e & 0x0f) - 1,
                _ => return None,
            }),
        };
        out.push(element);
        prev_size = c.at - start;
        last_start = start;
    }
    if c.at + 1 != blob.len()
        || tail != last_start
        || (count != u16::MAX && usize::from(count) != out.len())
    {
        return None;
    }
    Some(out)
}

/// The members of an intset: encoding (2, 4 or 8 bytes per member) and
/// count as little-endian 32-bit words, then the members.
pub fn intset(blob: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut c = Cursor::new(blob, 0);
    let width = c.u32_le()? as usize;
    let count = c.u32_le()? as usize;
    if !matches!(width, 2 | 4 | 8) || count.checked_mul(width)?.checked_add(8)? != blob.len() {
        return None;
    }
    (0..count).map(|_| c.int_le(width).map(int_text)).collect()
}

/// A zipmap's length field: one byte below 254, else 254 and four bytes.
fn zipmap_len(c: &mut Cursor<'_>) -> Option<usize> {
    match c.byte()? {
        254 => Some(c.u32_le()? as usize),
        255 => None,
        b => Some(usize::from(b)),
    }
}

/// The fields and values of a zipmap (Redis before 2.6), in order.
pub fn zipmap(blob: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut c = Cursor::new(blob, 1);
    let mut out = Vec::new();
    while c.peek()? != 0xff {
        let key_len = zipmap_len(&mut c)?;
        out.push(c.take(key_len)?.to_vec());
        let value_len = zipmap_len(&mut c)?;
        let free = usize::from(c.byte()?);
        out.push(c.take(value_len)?.to_vec());
        c.take(free)?;
    }
    (c.at + 1 == blob.len()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listpack_of_small_int_string_and_int16() {
        // 7-bit 5, 6-bit string "ab", int16 1000.
        let mut lp = vec![0, 0, 0, 0, 3, 0];
        lp.extend_from_slice(&[5, 1]);
        lp.extend_from_slice(&[0x82, b'a', b'b', 3]);
        lp.extend_from_slice(&[0xf1, 0xe8, 0x03, 3]);
        lp.push(0xff);
        let total = lp.len() as u32;
        lp[..4].copy_from_slice(&total.to_le_bytes());
        let got = listpack(&lp).expect("valid listpack");
        assert_eq!(got, vec![b"5".to_vec(), b"ab".to_vec(), b"1000".to_vec()]);
        lp[4] = 4;
        assert_eq!(listpack(&lp), None);
    }

    /// A ziplist of "ab" (6-bit string), 12 (immediate), -2 (int8) and
    /// 70000 (int24), each entry led by the previous entry's length.
    #[test]
    fn a_ziplist_of_strings_and_integers() {
        let mut zl = vec![0; 10];
        zl.extend_from_slice(&[0, 0x02, b'a', b'b']);
        zl.extend_from_slice(&[4, 0xfd]);
        zl.extend_from_slice(&[2, 0xfe, 0xfe]);
        zl.extend_from_slice(&[3, 0xf0, 0x70, 0x11, 0x01]);
        zl.push(0xff);
        let total = zl.len() as u32;
        zl[..4].copy_from_slice(&total.to_le_bytes());
        zl[4..8].copy_from_slice(&(total - 6).to_le_bytes());
        zl[8..10].copy_from_slice(&4u16.to_le_bytes());
        let got = ziplist(&zl).expect("valid ziplist");
        let want: Vec<Vec<u8>> = ["ab", "12", "-2", "70000"]
            .iter()
            .map(|s| s.as_bytes().to_vec())
            .collect();
        assert_eq!(got, want);
        zl[8] = 5;
        assert_eq!(ziplist(&zl), None);
    }

    #[test]
    fn a_zipmap_with_free_bytes_after_a_value() {
        // One pair: "f" => "vv", two free bytes after the value.
        let blob = [1, 1, b'f', 2, 2, b'v', b'v', 0, 0, 0xff];
        assert_eq!(zipmap(&blob), Some(vec![b"f".to_vec(), b"vv".to_vec()]));
        assert_eq!(zipmap(&blob[..8]), None);
    }

    #[test]
    fn an_intset_reads_signed_members() {
        let mut blob = vec![2, 0, 0, 0, 2, 0, 0, 0];
        blob.extend_from_slice(&(-3i16).to_le_bytes());
        blob.extend_from_slice(&7i16.to_le_bytes());
        assert_eq!(intset(&blob), Some(vec![b"-3".to_vec(), b"7".to_vec()]));
        assert_eq!(intset(&blob[..10]), None);
    }
}
