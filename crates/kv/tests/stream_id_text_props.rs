//! `StreamId::text`, the `ms-seq` form replies and the log show, for any
//! pair of 64-bit parts: the two decimal numbers joined by a dash, as
//! Rust's own formatting writes them, down to the extremes.

use ferrite_kv::types::stream::StreamId;
use proptest::prelude::*;

proptest! {
    #[test]
    fn text_is_both_parts_in_decimal(ms in any::<u64>(), seq in any::<u64>()) {
        prop_assert_eq!(StreamId { ms, seq }.text(), format!("{ms}-{seq}"));
    }
}

#[test]
fn extremes() {
    assert_eq!(StreamId { ms: 0, seq: 0 }.text(), "0-0");
    assert_eq!(
        StreamId {
            ms: u64::MAX,
            seq: u64::MAX
        }
        .text(),
        "18446744073709551615-18446744073709551615"
    );
    assert_eq!(
        StreamId {
            ms: 1_700_000_000_000,
            seq: 10
        }
        .text(),
        "1700000000000-10"
    );
}
