//! Hash slots: which of the 16,384 slots a key belongs to, as Redis
//! Cluster computes it (CRC16/XMODEM of the key, or of its hash tag).

/// Number of hash slots in a cluster.
pub const SLOTS: usize = 16384;

/// CRC16 with polynomial 0x1021 and initial value 0 (XMODEM), the
/// checksum Redis Cluster hashes keys with. A table of 256 entries built
/// at compile time keeps it to one lookup per byte.
const fn crc16_table() -> [u16; 256] {
    let mut table = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = (i as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
}

static CRC16_TABLE: [u16; 256] = crc16_table();

/// CRC16/XMODEM of `bytes`.
pub fn crc16(bytes: &[u8]) -> u16 {
    bytes.iter().fold(0u16, |crc, &b| {
        (crc << 8) ^ CRC16_TABLE[usize::from(((crc >> 8) as u8) ^ b)]
    })
}

/// The part of `key` that is hashed: the bytes between the first `{` and
/// the first `}` after it when there is at least one byte between them
/// (the hash tag), else the whole key.
pub fn hash_tag(key: &[u8]) -> &[u8] {
    let Some(open) = key.iter().position(|&b| b == b'{') else {
        return key;
    };
    let rest = &key[open + 1..];
    match rest.iter().position(|&b| b == b'}') {
        Some(close) if close > 0 => &rest[..close],
        _ => key,
    }
}

/// The hash slot of `key`.
pub fn key_slot(key: &[u8]) -> u16 {
    crc16(hash_tag(key)) & (SLOTS as u16 - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc16_check_value() {
        // The standard check value of CRC-16/XMODEM.
        assert_eq!(crc16(b"123456789"), 0x31C3);
    }

    #[test]
    fn hash_tags() {
        assert_eq!(hash_tag(b"{user1000}.following"), b"user1000");
        assert_eq!(hash_tag(b"foo{}{bar}"), b"foo{}{bar}");
        assert_eq!(hash_tag(b"foo{{bar}}zap"), b"{bar");
        assert_eq!(hash_tag(b"foo{bar}{zap}"), b"bar");
        assert_eq!(hash_tag(b"{"), b"{");
        assert_eq!(key_slot(b"{user1000}.a"), key_slot(b"{user1000}.b"));
    }
}
