//! A PM device doubles while small, then grows by at most
//! `PM_GROWTH_STEP_MAX` past what it is asked to cover, whether an
//! extension (`set_len`) or a preparation ahead (`prepare`) grows it: on
//! tmpfs every byte grown is a page the kernel clears at once.

use ferrite_io::{Device, PmPolicy, PmemDevice, PM_GROWTH_STEP_MAX, PM_HEADER_LEN};
use ferrite_pmem::PmemMedium;

const MIB: u64 = 1 << 20;

#[test]
fn growth_overshoots_what_is_needed_by_at_most_the_step_cap() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("grown.pm");
    let dev = PmemDevice::open(&path, PmPolicy::DrainEveryWrite).expect("open");
    let cap = PM_GROWTH_STEP_MAX as u64;
    let mut end = 0;
    // Past three caps of extensions, 4 MiB at a time as the log makes them.
    while end < 3 * cap + 8 * MIB {
        end += 4 * MIB;
        dev.set_len(end).expect("extend");
        let mapped = dev.medium().len() as u64;
        assert!(
            mapped >= PM_HEADER_LEN as u64 + end,
            "the mapping covers the length"
        );
        assert!(
            mapped <= PM_HEADER_LEN as u64 + end + cap,
            "grew to {mapped} bytes for a length of {end}"
        );
        let file = std::fs::metadata(&path).expect("stat").len();
        assert_eq!(file, mapped, "the file is allocated as far as it is mapped");
    }
    let ahead = end + 16 * MIB;
    dev.prepare(ahead).expect("prepare");
    let mapped = dev.medium().len() as u64;
    assert!(mapped >= PM_HEADER_LEN as u64 + ahead);
    assert!(
        mapped <= PM_HEADER_LEN as u64 + ahead + cap,
        "prepare grew to {mapped} bytes for {ahead}"
    );
    assert_eq!(dev.len(), end, "prepare keeps the length");
}
