//! The CRC-64 that closes a DUMP payload: the "Jones" polynomial
//! (0xad93d23594c935a9), reflected input and output, initial value 0 and
//! no final XOR, as Redis computes it. Stored little-endian.

/// The Jones polynomial, bit-reversed for the reflected algorithm.
const POLY_REFLECTED: u64 = 0x95ac_9329_ac4b_c9b5;

/// One table entry per byte value, built at compile time.
const TABLE: [u64; 256] = build_table();

const fn build_table() -> [u64; 256] {
    let mut table = [0u64; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u64;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ POLY_REFLECTED
            } else {
                crc >> 1
            };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
}

/// Continues `crc` over `data` (start with 0).
pub fn crc64(mut crc: u64, data: &[u8]) -> u64 {
    for &byte in data {
        crc = TABLE[((crc ^ u64::from(byte)) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_check_value_of_the_jones_crc() {
        assert_eq!(crc64(0, b"123456789"), 0xe9c6_d914_c4b8_d9ca);
        assert_eq!(crc64(crc64(0, b"1234"), b"56789"), 0xe9c6_d914_c4b8_d9ca);
    }
}
