//! LZF decompression, for strings Redis compressed in a DUMP payload
//! (`rdbcompression yes`, strings over 20 bytes). The format: a control
//! byte below 32 starts a run of `ctrl + 1` literal bytes; any other is a
//! back-reference of `(ctrl >> 5) + 2` bytes (a length field of 7 takes
//! one more byte) at distance `((ctrl & 0x1f) << 8) + next byte + 1`.
//! Every read and every reference is checked: a bad stream is an error.

/// The most output allocated before any of it is produced.
const PREALLOCATE_MAX: usize = 1 << 20;

/// Decompresses `input` into exactly `out_len` bytes, or `None` when the
/// stream is malformed or does not produce exactly that many.
pub fn decompress(input: &[u8], out_len: usize) -> Option<Vec<u8>> {
    // The claimed size is not trusted for the allocation: the output grows
    // only as far as the stream really expands.
    let mut out = Vec::with_capacity(out_len.min(PREALLOCATE_MAX));
    let mut at = 0;
    while at < input.len() {
        let ctrl = usize::from(input[at]);
        at += 1;
        if ctrl < 32 {
            let run = input.get(at..at + ctrl + 1)?;
            if out.len() + run.len() > out_len {
                return None;
            }
            out.extend_from_slice(run);
            at += ctrl + 1;
            continue;
        }
        let mut len = ctrl >> 5;
        if len == 7 {
            len += usize::from(*input.get(at)?);
            at += 1;
        }
        let low = usize::from(*input.get(at)?);
        at += 1;
        let distance = ((ctrl & 0x1f) << 8) + low + 1;
        let from = out.len().checked_sub(distance)?;
        let len = len + 2;
        if out.len() + len > out_len {
            return None;
        }
        // Byte by byte: a reference may overlap the bytes it produces.
        for i in 0..len {
            let byte = out[from + i];
            out.push(byte);
        }
    }
    (out.len() == out_len).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_and_overlapping_references() {
        // "abc" as literals, then 6 bytes copied from 3 back: "abcabcabc".
        let stream = [2, b'a', b'b', b'c', (4 << 5), 2];
        assert_eq!(decompress(&stream, 9).as_deref(), Some(&b"abcabcabc"[..]));
        assert_eq!(decompress(&stream, 8), None);
        assert_eq!(decompress(&[(1 << 5), 0], 3), None);
        assert_eq!(decompress(&[5, b'a'], 6), None);
    }
}
