//! [`give_back`]: the shrink policy of reused byte buffers.

/// Gives back what a burst grew a reused buffer to. A `Vec` keeps its
/// largest capacity for as long as it lives, so one pipelined bulk load
/// (a million SETs) would hold megabytes in the log's batch buffers or a
/// connection's buffers for the life of the server or the client.
///
/// `used` is what the round that just ended took from `buf`. A buffer
/// holding more than `keep` bytes and more than four times what it holds
/// and used shrinks to twice that (at least `keep`): rounds of one size
/// reallocate nothing, and a burst's memory goes with the next smaller
/// round. What `buf` holds is never cut.
pub fn give_back(buf: &mut Vec<u8>, used: usize, keep: usize) {
    let need = used.max(buf.len());
    if buf.capacity() > keep && buf.capacity() > 4 * need {
        buf.shrink_to((2 * need).max(keep));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEEP: usize = 64 << 10;

    #[test]
    fn a_burst_grown_buffer_shrinks_after_a_smaller_round() {
        // The round of the burst itself keeps it.
        let mut buf = vec![0u8; 8 << 20];
        buf.clear();
        give_back(&mut buf, 8 << 20, KEEP);
        assert_eq!(buf.capacity(), 8 << 20);
        // A small round after it gives back all but the kept minimum.
        give_back(&mut buf, 100, KEEP);
        assert_eq!(buf.capacity(), KEEP);

        // Bytes still held (a command still arriving) are never cut, and
        // keep room for as much again.
        let mut buf = Vec::with_capacity(16 << 20);
        buf.resize(3 << 20, 7u8);
        give_back(&mut buf, 0, KEEP);
        assert_eq!(buf.capacity(), 6 << 20);
        assert!(buf.iter().all(|&b| b == 7) && buf.len() == 3 << 20);
        buf.truncate(1 << 20);
        give_back(&mut buf, 0, KEEP);
        assert_eq!(buf.capacity(), 2 << 20);
        assert!(buf.iter().all(|&b| b == 7) && buf.len() == 1 << 20);

        // Rounds of a steady size reallocate nothing.
        let mut buf = Vec::with_capacity(1 << 20);
        for _ in 0..3 {
            give_back(&mut buf, 600 << 10, KEEP);
            assert_eq!(buf.capacity(), 1 << 20);
        }
        // Buffers within `keep` are left alone.
        let mut buf = Vec::with_capacity(KEEP);
        give_back(&mut buf, 0, KEEP);
        assert_eq!(buf.capacity(), KEEP);
    }
}
