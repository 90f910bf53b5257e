//! The media model's charge for reading back what a thread just persisted:
//! lines written back with `clwb` stay cached (a hit, not charged), lines
//! written back with `clflushopt` or `clflush` are invalidated (a miss,
//! charged), as the instructions are defined.

use ferrite_pmem::model::ModelChoice;
use ferrite_pmem::{
    Dispatch, DramCosts, FlushInstruction, MapMode, MapOptions, MediaModel, MediaParams,
    PmemMedium, PmemRegion,
};

fn region(dir: &tempfile::TempDir, flush: FlushInstruction, nt: bool) -> Option<PmemRegion> {
    let mut options = MapOptions::new(4 << 20);
    let threshold = if nt { 0 } else { usize::MAX };
    let dispatch = Dispatch::for_mode(MapMode::Emulated)
        .with_nt_threshold(threshold)
        .with_flush(flush)
        .ok()?;
    options.dispatch = Some(dispatch);
    let path = dir.path().join(format!("{flush}-{nt}"));
    Some(PmemRegion::map_with_model(path, options, ModelChoice::Optane).expect("map"))
}

/// Persists 4 KiB at `at`, reads `len` bytes at `read_at` back, and returns
/// how many reads the model charged as misses.
fn misses_of_read_back(region: &PmemRegion, at: usize, read_at: usize, len: usize) -> u64 {
    let model = ferrite_pmem::model::active().expect("the model was made for the region");
    region.copy_persist(at, &[0x5A; 4096]).expect("persist");
    let before = model.read_misses();
    let mut back = vec![0u8; len];
    region.read(read_at, &mut back).expect("read");
    if at <= read_at && read_at + len <= at + 4096 {
        assert!(
            back.iter().all(|&b| b == 0x5A),
            "the read returns what was persisted"
        );
    }
    model.read_misses() - before
}

#[test]
fn reads_after_a_persist_hit_or_miss_by_the_flush_instruction() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Every x86_64 CPU has clflush; clwb and clflushopt are checked where
    // the CPU has them (the dispatch refuses them otherwise).
    let clflush = region(&dir, FlushInstruction::Clflush, false).expect("clflush");
    assert_eq!(
        misses_of_read_back(&clflush, 0, 0, 4096),
        1,
        "clflush invalidates"
    );
    if let Some(clflushopt) = region(&dir, FlushInstruction::Clflushopt, false) {
        assert_eq!(misses_of_read_back(&clflushopt, 0, 0, 4096), 1);
    }
    let params = ferrite_pmem::model::active().expect("model").params();
    if let Some(clwb) = region(&dir, FlushInstruction::Clwb, false) {
        let kept = u64::from(!params.clwb_keeps_lines);
        assert_eq!(
            misses_of_read_back(&clwb, 0, 0, 4096),
            kept,
            "clwb keeps the lines"
        );
        assert_eq!(
            misses_of_read_back(&clwb, 8192, 9000, 1000),
            kept,
            "inside the range"
        );
        // Outside the range just written back: a miss.
        assert_eq!(misses_of_read_back(&clwb, 8192, 16384, 64), 1);
        // A later persist elsewhere does not forget the cached range unless
        // it was invalidated; a streamed rewrite of it bypasses the cache.
        if let Some(streamed) = region(&dir, FlushInstruction::Clwb, true) {
            assert_eq!(misses_of_read_back(&streamed, 0, 0, 4096), 1, "streamed");
        }
    }
}

#[test]
fn only_clwb_keeps_lines_and_only_if_the_parameter_says_so() {
    let mut params = MediaParams::optane();
    let model = MediaModel::new(params, DramCosts::default());
    assert!(model.keeps_lines(FlushInstruction::Clwb));
    for flush in [
        FlushInstruction::Clflushopt,
        FlushInstruction::Clflush,
        FlushInstruction::Msync,
    ] {
        assert!(!model.keeps_lines(flush), "{flush}");
    }
    params
        .override_with(|name| (name == "CLWB_KEEPS_LINES").then(|| "0".to_string()))
        .expect("override");
    assert!(!params.clwb_keeps_lines);
    let evicting = MediaModel::new(params, DramCosts::default());
    assert!(!evicting.keeps_lines(FlushInstruction::Clwb));
}
