//! HyperLogLog values in Redis's own string representation, so that a
//! value written here reads in Redis and back (GET/SET, DUMP) and PFCOUNT
//! gives Redis's number for the same elements.
//!
//! The string is a 16-byte header, then the registers:
//! - bytes 0..4: the magic `HYLL`;
//! - byte 4: the encoding, 0 dense or 1 sparse; bytes 5..8 unused;
//! - bytes 8..16: the cached cardinality, little-endian; the top bit of
//!   byte 15 set means the cache is stale.
//!
//! There are 16384 registers of 6 bits. Dense: 12288 bytes, register `i`
//! at bit `6 i`, least significant bits first. Sparse: a run-length code of
//! one-byte and two-byte opcodes — `00xxxxxx` a run of 1..64 zero
//! registers, `01xxxxxx yyyyyyyy` a run of 1..16384 zero registers (14-bit
//! length minus one), `1vvvvvxx` a run of 1..4 registers of value 1..32. A
//! sparse value turns dense when a register needs a value above 32 or when
//! it would grow past `hll-sparse-max-bytes`.
//!
//! An element picks a register and a value from MurmurHash64A of its bytes
//! with seed `0xadc83b19`: the low 14 bits index the register, and the
//! value is one plus the number of zero bits above them (at most 51). The
//! cardinality is Otmar Ertl's improved estimator over the histogram of
//! register values (arXiv:1702.01284), as Redis 4 and later compute it.
//!
//! Nothing here trusts the bytes: a corrupt value gives an error, never a
//! panic (a property test feeds arbitrary bytes).

/// Bits of the hash that index a register.
const INDEX_BITS: u32 = 14;
/// Number of registers.
pub const REGISTERS: usize = 1 << INDEX_BITS;
/// Hash bits above the index; a register holds at most this plus one.
const RANK_BITS: u32 = 64 - INDEX_BITS;
/// Largest value a 6-bit register holds.
const REGISTER_MAX: u8 = 63;
/// Header bytes before the registers.
pub const HEADER_BYTES: usize = 16;
/// Length of a dense value, header included.
pub const DENSE_BYTES: usize = HEADER_BYTES + (REGISTERS * 6).div_ceil(8);
/// Redis's default `hll-sparse-max-bytes`.
pub const SPARSE_MAX_BYTES_DEFAULT: usize = 3000;
/// The hash seed Redis uses, so elements land in the same registers.
const HASH_SEED: u64 = 0xadc8_3b19;
/// Largest value a sparse VAL opcode holds.
const SPARSE_VAL_MAX: u8 = 32;
/// Longest run of a VAL opcode.
const SPARSE_VAL_RUN_MAX: usize = 4;
/// Longest run of a one-byte ZERO opcode.
const SPARSE_ZERO_RUN_MAX: usize = 64;
/// Longest run of a two-byte XZERO opcode.
const SPARSE_XZERO_RUN_MAX: usize = 16384;
/// The byte of the header holding the stale-cache bit, and the bit.
const STALE_BYTE: usize = 15;
const STALE_BIT: u8 = 0x80;

const _: () = assert!(DENSE_BYTES == 12304);

/// The register count a sparse walk reports when a VAL run crosses the
/// last register. Redis as shipped with its out-of-bounds fix
/// (CVE-2025-32023) refuses such a value even when the runs before it add
/// up to exactly 16384, and so does this.
const OVERFLOWED: usize = usize::MAX;

/// Why a string cannot be used as a HyperLogLog.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HllError {
    /// Not an HLL at all (magic, encoding or dense length): Redis answers
    /// WRONGTYPE.
    NotHll,
    /// An HLL header over a corrupt sparse body: Redis answers INVALIDOBJ.
    Corrupt,
}

/// The two encodings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    /// 16384 packed 6-bit registers.
    Dense,
    /// Run-length opcodes.
    Sparse,
}

/// One sparse opcode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    /// A run of zero registers, from a one-byte (`long == false`) or
    /// two-byte opcode.
    Zero { run: usize, long: bool },
    /// A run of registers holding `value`.
    Val { value: u8, run: usize },
}

impl Op {
    /// The opcode at `at` (a two-byte opcode cut short by the end of the
    /// string reads its missing byte as zero, as Redis's terminated
    /// strings do).
    fn at(bytes: &[u8], at: usize) -> Op {
        let b = bytes.get(at).copied().unwrap_or(0);
        match b & 0xc0 {
            0x00 => Op::Zero {
                run: usize::from(b & 0x3f) + 1,
                long: false,
            },
            0x40 => {
                let low = bytes.get(at + 1).copied().unwrap_or(0);
                Op::Zero {
                    run: ((usize::from(b & 0x3f) << 8) | usize::from(low)) + 1,
                    long: true,
                }
            }
            _ => Op::Val {
                value: ((b >> 2) & 0x1f) + 1,
                run: usize::from(b & 0x3) + 1,
            },
        }
    }

    fn bytes(self) -> usize {
        match self {
            Op::Zero { long: true, .. } => 2,
            _ => 1,
        }
    }

    fn run(self) -> usize {
        match self {
            Op::Zero { run, .. } | Op::Val { run, .. } => run,
        }
    }
}

/// Appends the opcode for a run of `run` zero registers (1..=16384).
fn push_zero(out: &mut Vec<u8>, run: usize) {
    if run > SPARSE_ZERO_RUN_MAX {
        let n = run - 1;
        out.push(0x40 | ((n >> 8) as u8 & 0x3f));
        out.push((n & 0xff) as u8);
    } else {
        out.push((run - 1) as u8);
    }
}

/// The VAL opcode for `run` (1..=4) registers of `value` (1..=32).
fn val_byte(value: u8, run: usize) -> u8 {
    0x80 | ((value - 1) << 2) | ((run - 1) as u8)
}

/// MurmurHash64A, reading 8-byte blocks little-endian on every machine.
pub fn murmur64a(data: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = seed ^ (data.len() as u64).wrapping_mul(M);
    let mut blocks = data.chunks_exact(8);
    for block in &mut blocks {
        let mut word = [0u8; 8];
        word.copy_from_slice(block);
        let mut k = u64::from_le_bytes(word).wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        for (i, &b) in tail.iter().enumerate() {
            h ^= u64::from(b) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// The register an element goes to and the value it offers.
pub fn register_of(element: &[u8]) -> (usize, u8) {
    let hash = murmur64a(element, HASH_SEED);
    let index = (hash as usize) & (REGISTERS - 1);
    let rest = (hash >> INDEX_BITS) | (1u64 << RANK_BITS);
    (index, rest.trailing_zeros() as u8 + 1)
}

/// Register `i` of packed dense registers.
pub fn dense_get(registers: &[u8], i: usize) -> u8 {
    let bit = i * 6;
    let (byte, shift) = (bit / 8, (bit % 8) as u32);
    let low = u32::from(registers.get(byte).copied().unwrap_or(0));
    let high = u32::from(registers.get(byte + 1).copied().unwrap_or(0));
    (((low >> shift) | (high << (8 - shift))) & u32::from(REGISTER_MAX)) as u8
}

/// Sets register `i` of packed dense registers to `value` (at most 63).
pub fn dense_put(registers: &mut [u8], i: usize, value: u8) {
    let bit = i * 6;
    let (byte, shift) = (bit / 8, (bit % 8) as u32);
    let value = u32::from(value & REGISTER_MAX);
    let mask = u32::from(REGISTER_MAX);
    if let Some(b) = registers.get_mut(byte) {
        *b = ((u32::from(*b) & !(mask << shift)) | (value << shift)) as u8;
    }
    if let Some(b) = registers.get_mut(byte + 1) {
        let spill = 8 - shift;
        *b = ((u32::from(*b) & !(mask >> spill)) | (value >> spill)) as u8;
    }
}

/// Ertl's sigma function.
fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let (mut y, mut z) = (1.0, x);
    loop {
        x *= x;
        let before = z;
        z += x * y;
        y += y;
        if z == before {
            return z;
        }
    }
}

/// Ertl's tau function.
fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let (mut y, mut z) = (1.0, 1.0 - x);
    loop {
        x = x.sqrt();
        let before = z;
        y *= 0.5;
        z -= (1.0 - x) * (1.0 - x) * y;
        if z == before {
            return z / 3.0;
        }
    }
}

/// The cardinality estimate from a histogram of register values.
fn estimate(histogram: &[u64; 64]) -> u64 {
    const ALPHA_INF: f64 = 0.721_347_520_444_481_7;
    let m = REGISTERS as f64;
    let top = RANK_BITS as usize + 1;
    let mut z = m * tau((m - histogram[top] as f64) / m);
    for j in (1..top).rev() {
        z += histogram[j] as f64;
        z *= 0.5;
    }
    z += m * sigma(histogram[0] as f64 / m);
    (ALPHA_INF * m * m / z).round() as u64
}

/// The cardinality of one register per byte (PFCOUNT over several keys).
pub fn count_registers(registers: &[u8; REGISTERS]) -> u64 {
    let mut histogram = [0u64; 64];
    for &r in registers {
        histogram[usize::from(r & 63)] += 1;
    }
    estimate(&histogram)
}

/// A HyperLogLog value whose header has been checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hll {
    bytes: Vec<u8>,
}

impl Default for Hll {
    fn default() -> Hll {
        Hll::new()
    }
}

impl Hll {
    /// An empty HLL: sparse, one XZERO over every register, cache valid
    /// at 0 (as Redis creates one).
    pub fn new() -> Hll {
        let mut bytes = Vec::with_capacity(HEADER_BYTES + 2);
        bytes.extend_from_slice(b"HYLL\x01\0\0\0");
        bytes.extend_from_slice(&[0; 8]);
        push_zero(&mut bytes, SPARSE_XZERO_RUN_MAX);
        Hll { bytes }
    }

    /// Checks a string as Redis checks it before any HLL command: length,
    /// magic, encoding, and the exact length of a dense value. A sparse
    /// body is checked only when it is read.
    pub fn from_bytes(bytes: &[u8]) -> Result<Hll, HllError> {
        if bytes.len() < HEADER_BYTES || &bytes[..4] != b"HYLL" || bytes[4] > 1 {
            return Err(HllError::NotHll);
        }
        if bytes[4] == 0 && bytes.len() != DENSE_BYTES {
            return Err(HllError::NotHll);
        }
        Ok(Hll {
            bytes: bytes.to_vec(),
        })
    }

    /// The string representation.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The encoding.
    pub fn encoding(&self) -> Encoding {
        if self.bytes[4] == 0 {
            Encoding::Dense
        } else {
            Encoding::Sparse
        }
    }

    /// The cached cardinality, if it is not stale.
    pub fn cached(&self) -> Option<u64> {
        if self.bytes[STALE_BYTE] & STALE_BIT != 0 {
            return None;
        }
        let mut card = [0u8; 8];
        card.copy_from_slice(&self.bytes[8..16]);
        Some(u64::from_le_bytes(card))
    }

    /// Stores `card` as the cached cardinality (valid).
    pub fn set_cached(&mut self, card: u64) {
        self.bytes[8..16].copy_from_slice(&card.to_le_bytes());
    }

    /// Marks the cached cardinality stale.
    pub fn invalidate(&mut self) {
        self.bytes[STALE_BYTE] |= STALE_BIT;
    }

    /// Adds an element; `Ok(true)` if a register grew.
    pub fn add(&mut self, element: &[u8], sparse_max_bytes: usize) -> Result<bool, HllError> {
        let (index, value) = register_of(element);
        self.raise(index, value, sparse_max_bytes)
    }

    /// Raises register `index` to `value` if it is lower; `Ok(true)` if it
    /// changed. A sparse value may turn dense.
    pub fn raise(
        &mut self,
        index: usize,
        value: u8,
        sparse_max_bytes: usize,
    ) -> Result<bool, HllError> {
        match self.encoding() {
            Encoding::Dense => {
                let registers = &mut self.bytes[HEADER_BYTES..];
                if value > dense_get(registers, index) {
                    dense_put(registers, index, value);
                    return Ok(true);
                }
                Ok(false)
            }
            Encoding::Sparse => self.sparse_raise(index, value, sparse_max_bytes),
        }
    }

    /// Makes the value dense; `Ok(true)` if it was sparse.
    pub fn to_dense(&mut self) -> Result<bool, HllError> {
        if self.encoding() == Encoding::Dense {
            return Ok(false);
        }
        let mut dense = vec![0u8; DENSE_BYTES];
        dense[..HEADER_BYTES].copy_from_slice(&self.bytes[..HEADER_BYTES]);
        dense[4] = 0;
        let mut index = 0usize;
        self.walk_sparse(|op| {
            match op {
                Op::Zero { run, .. } => index += run,
                Op::Val { value, run } => {
                    if index + run > REGISTERS {
                        index = OVERFLOWED;
                        return false;
                    }
                    for i in index..index + run {
                        dense_put(&mut dense[HEADER_BYTES..], i, value);
                    }
                    index += run;
                }
            }
            true
        });
        if index != REGISTERS {
            return Err(HllError::Corrupt);
        }
        self.bytes = dense;
        Ok(true)
    }

    /// Calls `visit` on each sparse opcode in order until it returns false.
    fn walk_sparse(&self, mut visit: impl FnMut(Op) -> bool) {
        let mut at = HEADER_BYTES;
        while at < self.bytes.len() {
            let op = Op::at(&self.bytes, at);
            if !visit(op) {
                return;
            }
            at += op.bytes();
        }
    }

    /// The cardinality estimate computed from the registers (not the cache).
    pub fn count(&self) -> Result<u64, HllError> {
        let mut histogram = [0u64; 64];
        match self.encoding() {
            Encoding::Dense => {
                let registers = &self.bytes[HEADER_BYTES..];
                for i in 0..REGISTERS {
                    histogram[usize::from(dense_get(registers, i))] += 1;
                }
            }
            Encoding::Sparse => {
                let mut index = 0usize;
                self.walk_sparse(|op| {
                    index = index.saturating_add(op.run());
                    match op {
                        Op::Zero { run, .. } => histogram[0] += run as u64,
                        Op::Val { value, run } => histogram[usize::from(value)] += run as u64,
                    }
                    true
                });
                if index != REGISTERS {
                    return Err(HllError::Corrupt);
                }
            }
        }
        Ok(estimate(&histogram))
    }

    /// Raises each of `max`'s registers to this value's where it is lower.
    pub fn merge_into(&self, max: &mut [u8; REGISTERS]) -> Result<(), HllError> {
        match self.encoding() {
            Encoding::Dense => {
                let registers = &self.bytes[HEADER_BYTES..];
                for (i, m) in max.iter_mut().enumerate() {
                    *m = (*m).max(dense_get(registers, i));
                }
                Ok(())
            }
            Encoding::Sparse => {
                let mut index = 0usize;
                self.walk_sparse(|op| match op {
                    Op::Zero { run, .. } => {
                        index += run;
                        true
                    }
                    Op::Val { value, run } => {
                        if index + run > REGISTERS {
                            index = OVERFLOWED;
                            return false;
                        }
                        for m in &mut max[index..index + run] {
                            *m = (*m).max(value);
                        }
                        index += run;
                        true
                    }
                });
                if index == REGISTERS {
                    Ok(())
                } else {
                    Err(HllError::Corrupt)
                }
            }
        }
    }

    /// The dense registers, one per element (a dense value only).
    pub fn dense_registers(&self) -> Option<Vec<u8>> {
        let registers = self.bytes.get(HEADER_BYTES..)?;
        (self.encoding() == Encoding::Dense)
            .then(|| (0..REGISTERS).map(|i| dense_get(registers, i)).collect())
    }

    /// PFDEBUG DECODE's text for a sparse value: `z:N`, `Z:N` and
    /// `v:VALUE,N` opcodes separated by spaces.
    pub fn decode_sparse(&self) -> Option<String> {
        if self.encoding() != Encoding::Sparse {
            return None;
        }
        let mut parts = Vec::new();
        self.walk_sparse(|op| {
            parts.push(match op {
                Op::Zero { run, long: false } => format!("z:{run}"),
                Op::Zero { run, long: true } => format!("Z:{run}"),
                Op::Val { value, run } => format!("v:{value},{run}"),
            });
            true
        });
        Some(parts.join(" "))
    }

    /// Raises a register of a sparse value in place, as Redis edits it, so
    /// the bytes stay Redis's: the opcode covering the register is split
    /// into at most three (zeros or old value, the new value, zeros or old
    /// value), then adjacent VAL opcodes of equal value near it are merged.
    /// Turns dense when `value` exceeds what sparse holds or the value
    /// would grow past `sparse_max_bytes`.
    fn sparse_raise(
        &mut self,
        index: usize,
        value: u8,
        sparse_max_bytes: usize,
    ) -> Result<bool, HllError> {
        if value > SPARSE_VAL_MAX {
            return self.promote_and_raise(index, value);
        }
        let end = self.bytes.len();
        let (mut at, mut first, mut prev, mut found) = (HEADER_BYTES, 0usize, None, None);
        while at < end {
            let op = Op::at(&self.bytes, at);
            if index < first + op.run() {
                found = Some(op);
                break;
            }
            prev = Some(at);
            at += op.bytes();
            first += op.run();
        }
        let Some(op) = found else {
            return Err(HllError::Corrupt);
        };
        match op {
            Op::Val { value: old, .. } if old >= value => return Ok(false),
            Op::Val { run: 1, .. }
            | Op::Zero {
                run: 1,
                long: false,
            } => {
                self.bytes[at] = val_byte(value, 1);
            }
            _ => {
                let last = first + op.run() - 1;
                let mut seq = Vec::with_capacity(5);
                let push_run = |seq: &mut Vec<u8>, run: usize| match op {
                    Op::Zero { .. } => push_zero(seq, run),
                    Op::Val { value: old, .. } => seq.push(val_byte(old, run)),
                };
                if index != first {
                    push_run(&mut seq, index - first);
                }
                seq.push(val_byte(value, 1));
                if index != last {
                    push_run(&mut seq, last - index);
                }
                let grown = end + seq.len() - op.bytes();
                if seq.len() > op.bytes() && grown > sparse_max_bytes {
                    return self.promote_and_raise(index, value);
                }
                let tail_from = (at + op.bytes()).min(end);
                let mut bytes = Vec::with_capacity(grown + 1);
                bytes.extend_from_slice(&self.bytes[..at]);
                bytes.extend_from_slice(&seq);
                bytes.extend_from_slice(&self.bytes[tail_from..]);
                // A two-byte opcode cut short by the end of the string
                // counted its missing byte: the result keeps Redis's length.
                bytes.truncate(grown);
                self.bytes = bytes;
            }
        }
        self.merge_values_from(prev.unwrap_or(HEADER_BYTES));
        self.invalidate();
        Ok(true)
    }

    /// Merges adjacent VAL opcodes of equal value whose runs fit in one,
    /// over at most five opcodes from byte `at`.
    fn merge_values_from(&mut self, mut at: usize) {
        let mut budget = 5;
        while at < self.bytes.len() && budget > 0 {
            budget -= 1;
            let here = Op::at(&self.bytes, at);
            let Op::Val { value, run } = here else {
                at += here.bytes();
                continue;
            };
            if at + 1 < self.bytes.len() && self.bytes[at + 1] & 0x80 != 0 {
                if let Op::Val {
                    value: next_value,
                    run: next_run,
                } = Op::at(&self.bytes, at + 1)
                {
                    if next_value == value && run + next_run <= SPARSE_VAL_RUN_MAX {
                        self.bytes[at + 1] = val_byte(value, run + next_run);
                        self.bytes.remove(at);
                        continue;
                    }
                }
            }
            at += 1;
        }
    }

    /// Turns a sparse value dense, then raises the register.
    fn promote_and_raise(&mut self, index: usize, value: u8) -> Result<bool, HllError> {
        self.to_dense()?;
        let registers = &mut self.bytes[HEADER_BYTES..];
        if value > dense_get(registers, index) {
            dense_put(registers, index, value);
        }
        self.invalidate();
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn an_empty_value_is_redis_bytes_and_counts_zero() {
        let h = Hll::new();
        assert_eq!(h.as_bytes(), b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\0\x7f\xff");
        assert_eq!(h.count(), Ok(0));
        assert_eq!(h.cached(), Some(0));
    }

    #[test]
    fn dense_registers_keep_their_neighbours() {
        let mut regs = vec![0u8; DENSE_BYTES - HEADER_BYTES];
        for i in 0..REGISTERS {
            dense_put(&mut regs, i, (i * 7 % 64) as u8);
        }
        for i in 0..REGISTERS {
            assert_eq!(dense_get(&regs, i), (i * 7 % 64) as u8);
        }
    }

    #[test]
    fn sparse_and_dense_agree_and_sparse_turns_dense() {
        let mut sparse = Hll::new();
        let mut dense = Hll::new();
        dense.to_dense().unwrap();
        for n in 0..5000u32 {
            let e = n.to_string();
            let a = sparse.add(e.as_bytes(), SPARSE_MAX_BYTES_DEFAULT).unwrap();
            let b = dense.add(e.as_bytes(), SPARSE_MAX_BYTES_DEFAULT).unwrap();
            assert_eq!(a, b);
            if n % 97 == 0 {
                assert_eq!(sparse.count(), dense.count());
            }
        }
        assert_eq!(sparse.encoding(), Encoding::Dense);
        let card = dense.count().unwrap();
        assert!((4800..5200).contains(&card), "{card}");
    }

    #[test]
    fn a_small_sparse_value_stays_sparse_and_decodes() {
        let mut h = Hll::new();
        for e in [&b"a"[..], b"b", b"c"] {
            h.add(e, SPARSE_MAX_BYTES_DEFAULT).unwrap();
        }
        assert_eq!(h.encoding(), Encoding::Sparse);
        assert_eq!(h.count(), Ok(3));
        assert!(h.cached().is_none());
        let text = h.decode_sparse().unwrap();
        assert_eq!(text.matches("v:").count(), 3, "{text}");
    }

    #[test]
    fn bad_headers_are_not_hlls_and_bad_bodies_are_corrupt() {
        assert_eq!(Hll::from_bytes(b"HYLL"), Err(HllError::NotHll));
        assert_eq!(
            Hll::from_bytes(b"HYLX\x01\0\0\0\0\0\0\0\0\0\0\0\x7f\xff"),
            Err(HllError::NotHll)
        );
        assert_eq!(
            Hll::from_bytes(b"HYLL\0\0\0\0\0\0\0\0\0\0\0\0\x7f\xff"),
            Err(HllError::NotHll)
        );
        let mut bytes = Hll::new().as_bytes().to_vec();
        bytes.extend_from_slice(b"hello");
        let h = Hll::from_bytes(&bytes).unwrap();
        assert_eq!(h.count(), Err(HllError::Corrupt));
    }

    proptest! {
        /// Whatever the bytes, every operation answers without panicking.
        #[test]
        fn arbitrary_bytes_never_panic(
            body in proptest::collection::vec(any::<u8>(), 0..64),
            dense in any::<bool>(),
            elements in proptest::collection::vec(any::<u32>(), 0..8),
        ) {
            let mut bytes = b"HYLL".to_vec();
            bytes.push(u8::from(!dense));
            bytes.extend_from_slice(&[0; 11]);
            bytes.extend_from_slice(&body);
            if dense {
                bytes.resize(DENSE_BYTES, 0x5a);
            }
            for candidate in [&bytes[..], &body[..]] {
                let Ok(mut h) = Hll::from_bytes(candidate) else { continue };
                let _ = h.count();
                let mut max = [0u8; REGISTERS];
                let _ = h.merge_into(&mut max);
                let _ = h.decode_sparse();
                for e in &elements {
                    let _ = h.add(&e.to_le_bytes(), 40);
                }
                let _ = h.clone().to_dense();
                let _ = h.dense_registers();
            }
        }
    }
}
