//! Media accounting on known patterns, and the media model: its refusal on
//! real PM, its charges, and that it never changes what is persisted.

use std::time::Instant;

use ferrite_pmem::model::{check_model_for_mode, ModelChoice};
use ferrite_pmem::{
    Dispatch, DramCosts, Error, FlushInstruction, FlushStats, MapMode, MapOptions, MediaModel,
    MediaParams, MediaRead, MediaWork, PmemMedium, PmemRegion,
};
use proptest::prelude::*;

/// A region on emulated PM that flushes with cached stores (no streaming),
/// so every copy's cache lines are flush requests.
fn cached_region(dir: &tempfile::TempDir, name: &str, model: ModelChoice) -> PmemRegion {
    let mut options = MapOptions::new(4 << 20);
    let dispatch = Dispatch::for_mode(MapMode::Emulated).with_nt_threshold(usize::MAX);
    options.dispatch = Some(
        dispatch
            .with_flush(FlushInstruction::Clflush)
            .expect("clflush"),
    );
    PmemRegion::map_with_model(dir.path().join(name), options, model).expect("map")
}

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

/// Persists 64 bytes at `offset` and returns what that did.
fn persist_64(region: &PmemRegion, offset: usize) -> FlushStats {
    let before = region.stats();
    region.copy_persist(offset, &[0xAB; 64]).expect("persist");
    region.stats() - before
}

#[test]
fn a_64_byte_write_is_one_request_and_one_media_line() {
    let dir = tempdir();
    let region = cached_region(&dir, "one", ModelChoice::Off);
    let delta = persist_64(&region, 4096);
    assert_eq!(delta.requests, 1, "{delta}");
    assert_eq!(delta.media_lines, 1, "{delta}");
    assert_eq!(delta.media_bytes(), 256);
    assert_eq!(delta.absorbed, 0);
    assert_eq!(delta.media_bytes_per_user_byte(64), 4.0);
}

#[test]
fn four_adjacent_64_byte_lines_are_one_media_line() {
    let dir = tempdir();
    let region = cached_region(&dir, "four", ModelChoice::Off);
    let before = region.stats();
    for k in 0..4 {
        region
            .copy_persist(8192 + 64 * k, &[k as u8; 64])
            .expect("persist");
    }
    // Moving on closes the line: it was whole, so no read-modify-write.
    region.copy_persist(1 << 20, &[9; 64]).expect("persist");
    let delta = region.stats() - before;
    assert_eq!(delta.requests, 5, "{delta}");
    assert_eq!(delta.media_lines, 2, "{delta}");
    assert_eq!(delta.absorbed, 3, "{delta}");
    assert_eq!(delta.read_modify_writes, 0, "{delta}");
    assert_eq!(delta.fences, 5);
}

#[test]
fn a_partial_line_is_one_read_modify_write() {
    let dir = tempdir();
    let region = cached_region(&dir, "partial", ModelChoice::Off);
    let before = region.stats();
    // 100 bytes: two of the media line's four cache lines.
    region.copy_persist(12288, &[1; 100]).expect("persist");
    region.copy_persist(1 << 20, &[2; 256]).expect("persist");
    let delta = region.stats() - before;
    assert_eq!(delta.read_modify_writes, 1, "{delta}");
    assert_eq!(delta.requests, 2 + 4);
    assert_eq!(delta.media_lines, 2);
}

#[test]
fn rewrites_of_less_than_a_media_line_are_absorbed() {
    // Tonic's single-thread finding: rewriting a footprint under 256 bytes
    // per flush reaches the media once; 512 bytes alternate two lines.
    let dir = tempdir();
    let region = cached_region(&dir, "footprint", ModelChoice::Off);
    let before = region.stats();
    for _ in 0..100 {
        region.copy_persist(0, &[3; 128]).expect("persist");
    }
    let small = region.stats() - before;
    assert_eq!(small.requests, 200);
    assert!(small.media_lines <= 1, "{small}");
    let before = region.stats();
    for _ in 0..100 {
        region.copy_persist(65536, &[4; 512]).expect("persist");
    }
    let large = region.stats() - before;
    assert_eq!(large.requests, 800);
    assert!(large.media_lines >= 199, "{large}");
}

#[test]
fn the_model_is_refused_on_real_pm_only() {
    let refused = check_model_for_mode(ModelChoice::Optane, MapMode::RealPm);
    assert!(matches!(refused, Err(Error::Config { .. })), "{refused:?}");
    assert!(check_model_for_mode(ModelChoice::Off, MapMode::RealPm).is_ok());
    assert!(check_model_for_mode(ModelChoice::Optane, MapMode::Emulated).is_ok());
    assert!(check_model_for_mode(ModelChoice::Optane, MapMode::Simulated).is_ok());
}

#[test]
fn model_choice_and_parameters_parse() {
    assert_eq!(ModelChoice::parse("optane").ok(), Some(ModelChoice::Optane));
    assert_eq!(ModelChoice::parse(" OFF ").ok(), Some(ModelChoice::Off));
    assert_eq!(ModelChoice::parse("").ok(), Some(ModelChoice::Off));
    assert!(ModelChoice::parse("3dxp").is_err());
    let mut params = MediaParams::optane();
    params
        .override_with(|name| (name == "DIMMS").then(|| "6".to_string()))
        .expect("override");
    assert_eq!(params.dimms, 6);
    assert_eq!(params.dimm_write_gbps, 2.3);
    let bad = params.override_with(|name| (name == "READ_SEQ_NS").then(|| "-1".to_string()));
    assert!(matches!(bad, Err(Error::Config { .. })), "{bad:?}");
}

#[test]
fn charges_follow_the_parameters() {
    let dram = DramCosts {
        random_ns: 100.0,
        seq_ns: 20.0,
        line_copy_ns: 10.0,
    };
    let model = MediaModel::new(MediaParams::optane(), dram);
    let line_write = 256.0 / 2.3;
    let work = MediaWork {
        lines: 4,
        sequential: 3,
        read_modify_writes: 1,
        last_line: 0,
    };
    let expected = 4.0 * line_write + 256.0 / 6.6;
    assert!((model.write_ns(work) - expected).abs() < 1e-6);
    let random = model.read_ns(MediaRead {
        random: 1,
        sequential: 0,
    });
    let sequential = model.read_ns(MediaRead {
        random: 0,
        sequential: 1,
    });
    assert!((random - 205.0).abs() < 1e-6, "{random}");
    assert!((sequential - 149.0).abs() < 1e-6, "{sequential}");
    let cached = model.read_ns(MediaRead::default());
    assert_eq!(cached, 0.0);
}

#[test]
fn the_model_charges_a_stream_of_persists_at_the_write_bandwidth() {
    let dir = tempdir();
    let region = cached_region(&dir, "charged", ModelChoice::Optane);
    let data = vec![5u8; 4096];
    let start = Instant::now();
    for k in 0..256 {
        region.copy_persist(k * 4096, &data).expect("persist");
    }
    let elapsed = start.elapsed().as_secs_f64();
    // 1 MiB at 2.3 GB/s on one module is 456 us; the write queue lets the
    // first 16 lines through at DRAM speed.
    let floor = ((1 << 20) - 16 * 256) as f64 / 2.3e9;
    assert!(elapsed >= floor, "{elapsed} s < {floor} s");
}

#[test]
fn one_drain_for_many_writes_pays_the_same_bandwidth() {
    // The module starts on lines as they are issued, so a thread that
    // drains once for many writes waits for the same bandwidth, no more.
    let dir = tempdir();
    let region = cached_region(&dir, "batched", ModelChoice::Optane);
    let data = vec![6u8; 4096];
    let start = Instant::now();
    for k in 0..256 {
        region.copy_nodrain(k * 4096, &data).expect("copy");
    }
    region.drain();
    let elapsed = start.elapsed().as_secs_f64();
    let floor = ((1 << 20) - 16 * 256) as f64 / 2.3e9;
    assert!(elapsed >= floor, "{elapsed} s < {floor} s");
}

/// One operation of the persistence comparison.
fn apply(region: &PmemRegion, rng: &mut fastrand::Rng) {
    let offset = rng.u64(..1 << 20) as usize;
    let len = 1 + rng.u64(..6000) as usize;
    let byte = rng.u64(..) as u8;
    let data: Vec<u8> = (0..len).map(|i| byte.wrapping_add(i as u8)).collect();
    match rng.u64(..5) {
        0 => region.copy_persist(offset, &data).expect("persist"),
        1 => {
            region.copy_nodrain(offset, &data).expect("copy");
            region.drain();
        }
        2 => {
            region.memset_nodrain(offset, byte, len).expect("memset");
            region.drain();
        }
        3 => {
            region.write(offset, &data).expect("write");
            region.persist(offset, len).expect("persist");
        }
        _ => {
            let word = offset / 8 * 8;
            region.store_u64(word, rng.u64(..)).expect("store");
            region.persist(word, 8).expect("persist");
            let mut back = [0u8; 8];
            region.read(word, &mut back).expect("read");
        }
    }
}

#[test]
fn the_model_never_changes_what_is_persisted() {
    let dir = tempdir();
    let off = cached_region(&dir, "off", ModelChoice::Off);
    let on = cached_region(&dir, "on", ModelChoice::Optane);
    let (mut a, mut b) = (fastrand::Rng::with_seed(7), fastrand::Rng::with_seed(7));
    for _ in 0..300 {
        apply(&off, &mut a);
        apply(&on, &mut b);
    }
    let issued = |s: FlushStats| (s.requests, s.media_lines, s.fences, s.read_modify_writes);
    assert_eq!(issued(off.stats()), issued(on.stats()));
    drop((off, on));
    let off = std::fs::read(dir.path().join("off")).expect("read off");
    let on = std::fs::read(dir.path().join("on")).expect("read on");
    assert_eq!(off.len(), on.len());
    assert!(off == on, "the model changed the persisted bytes");
}

proptest! {
    /// Every request either opens a media line or is absorbed, and only a
    /// written line can need a read-modify-write.
    #[test]
    fn requests_are_media_lines_or_absorbed(
        ops in proptest::collection::vec((0usize..(1 << 16), 1usize..2048, any::<bool>()), 1..60)
    ) {
        let dir = tempdir();
        let region = cached_region(&dir, "prop", ModelChoice::Off);
        for (offset, len, drain) in ops {
            region.copy_nodrain(offset, &vec![1u8; len]).expect("copy");
            if drain {
                region.drain();
            }
        }
        let stats = region.stats();
        prop_assert_eq!(stats.requests, stats.media_lines + stats.absorbed);
        prop_assert!(stats.read_modify_writes <= stats.media_lines);
        prop_assert!(stats.sequential_lines < stats.media_lines.max(1));
    }
}
