//! The DIMM's write-combining buffer as the flush accounting models it
//! (`stats.rs`, module comment): one open 256-byte media line per thread,
//! into which requests for its cache lines merge.

use crate::stats::MEDIA_LINE;

/// Cache lines per media line.
pub(crate) const LINES_PER_MEDIA: u64 = (MEDIA_LINE / 64) as u64;
/// Mask of a media line whose four cache lines all arrived.
pub(crate) const FULL_MASK: u64 = (1 << LINES_PER_MEDIA) - 1;

/// What one request range did to the combining buffer.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Combine {
    /// The open line after it (`OPEN`'s encoding).
    pub(crate) open: u64,
    /// Media lines opened.
    pub(crate) opened: u64,
    /// Of which right after the line before them.
    pub(crate) sequential: u64,
    /// Lines closed before all four of their cache lines arrived.
    pub(crate) rmw: u64,
}

impl Combine {
    /// Cache lines of `[first_cl, end_cl)` inside media line `media`, as a
    /// mask of the line's four cache lines.
    fn mask(media: u64, first_cl: u64, end_cl: u64) -> u64 {
        let base = media * LINES_PER_MEDIA;
        let low = first_cl.max(base) - base;
        let high = end_cl.min(base + LINES_PER_MEDIA) - base;
        FULL_MASK & ((1 << high) - 1) & !((1 << low) - 1)
    }

    /// A request for cache lines `mask` of media line `media`: merged into
    /// the open line, or closing it and opening this one.
    fn request(&mut self, media: u64, mask: u64) {
        let open_line = self.open >> 4;
        if self.open != 0 && open_line == media + 1 {
            self.open |= mask;
            return;
        }
        if self.open != 0 && self.open & FULL_MASK != FULL_MASK {
            self.rmw += 1;
        }
        if self.open != 0 && open_line == media {
            // The open line is `media - 1`: this one follows it.
            self.sequential += 1;
        }
        self.opened += 1;
        self.open = ((media + 1) << 4) | mask;
    }

    /// Requests for cache lines `[first_cl, end_cl)` (not empty). The media
    /// lines strictly inside the range are whole and sequential, so they
    /// are counted in one step however long the range.
    pub(crate) fn range(&mut self, first_cl: u64, end_cl: u64) {
        let first = first_cl / LINES_PER_MEDIA;
        let last = (end_cl - 1) / LINES_PER_MEDIA;
        self.request(first, Combine::mask(first, first_cl, end_cl));
        if last == first {
            return;
        }
        if last - first > 1 {
            self.request(first + 1, FULL_MASK);
            let more = last - first - 2;
            self.opened += more;
            self.sequential += more;
            self.open = (last << 4) | FULL_MASK;
        }
        self.request(last, Combine::mask(last, first_cl, end_cl));
    }
}
