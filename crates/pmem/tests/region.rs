//! PmemRegion on a real mapping (emulated PM on the test machine's file
//! system): mapping, growth in place, persistence across reopen, bounds,
//! every dispatch choice, and the accounting of each primitive.

use std::sync::atomic::{AtomicBool, Ordering};

use ferrite_pmem::{
    Dispatch, Error, FlushInstruction, FlushStats, MapMode, MapOptions, PmemMedium, PmemRegion,
    Simd, CACHE_LINE,
};

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

#[test]
fn maps_reports_mode_and_survives_reopen() {
    let dir = tempdir();
    let path = dir.path().join("pool");
    {
        let region = PmemRegion::map(&path, 10_000).expect("map");
        // No DAX here: the mapping must say it is emulated.
        assert_eq!(region.mode(), MapMode::Emulated);
        assert!(region.mode().durability().contains("NOT a power failure"));
        assert!(region.len() >= 10_000 && region.len().is_multiple_of(4096));
        region.copy_persist(5000, b"still here").expect("persist");
        region.store_u64(8, 0xDEAD_BEEF).expect("store");
        region.persist(8, 8).expect("persist word");
    }
    let region = PmemRegion::map(&path, 10).expect("reopen");
    assert!(region.len() >= 10_000, "an existing file is mapped whole");
    let mut back = [0u8; 10];
    region.read(5000, &mut back).expect("read");
    assert_eq!(&back, b"still here");
    assert_eq!(region.load_u64(8).expect("load"), 0xDEAD_BEEF);
}

#[test]
fn out_of_bounds_and_unaligned_accesses_are_errors() {
    let dir = tempdir();
    let region = PmemRegion::map(dir.path().join("pool"), 4096).expect("map");
    let len = region.len();
    assert!(matches!(
        region.copy_nodrain(len - 2, b"abc"),
        Err(Error::OutOfBounds { .. })
    ));
    assert!(matches!(
        region.read(usize::MAX, &mut [0u8; 2]),
        Err(Error::OutOfBounds { .. })
    ));
    assert!(matches!(
        region.flush(len, 1),
        Err(Error::OutOfBounds { .. })
    ));
    assert!(matches!(
        region.store_u64(4, 1),
        Err(Error::Unaligned { offset: 4 })
    ));
    assert!(matches!(
        region.load_u64(len),
        Err(Error::OutOfBounds { .. })
    ));
    assert!(region.copy_nodrain(len - 3, b"abc").is_ok());
}

#[test]
fn grows_in_place_while_other_threads_read() {
    let dir = tempdir();
    let mut options = MapOptions::new(4096);
    options.max_len = 64 << 20;
    let region = PmemRegion::map_with(dir.path().join("pool"), options).expect("map");
    region.copy_persist(0, &[9u8; 4096]).expect("persist");
    let base = region.base_ptr();
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let mut buf = [0u8; 4096];
            while !stop.load(Ordering::Relaxed) {
                region.read(0, &mut buf).expect("read while growing");
                assert!(buf.iter().all(|&b| b == 9));
            }
        });
        for step in 1..=32 {
            region.grow(step * (1 << 20)).expect("grow");
            let at = step * (1 << 20) - 8;
            region
                .copy_persist(at, &[step as u8; 8])
                .expect("write at new end");
        }
        stop.store(true, Ordering::Relaxed);
    });
    assert_eq!(region.base_ptr(), base, "growth must not move the mapping");
    assert!(matches!(
        region.grow(128 << 20),
        Err(Error::ReservationExceeded { .. })
    ));
    let mut word = [0u8; 8];
    region.read((1 << 20) - 8, &mut word).expect("read");
    assert_eq!(word, [1u8; 8]);
}

#[test]
fn every_dispatch_copies_exactly_and_counts() {
    let dir = tempdir();
    let base = Dispatch::detect();
    let mut dispatches = Vec::new();
    for flush in FlushInstruction::ALL {
        if let Ok(d) = base.with_flush(flush) {
            dispatches.push(d.with_nt_threshold(256));
        }
    }
    for simd in [Simd::Sse2, Simd::Avx, Simd::Avx512] {
        if let Ok(d) = base.with_simd(simd) {
            dispatches.push(d.with_nt_threshold(0));
        }
    }
    let data: Vec<u8> = (0..70_000u32).map(|i| (i * 13) as u8).collect();
    for (i, dispatch) in dispatches.into_iter().enumerate() {
        let mut options = MapOptions::new(1 << 20);
        options.dispatch = Some(dispatch);
        let region = PmemRegion::map_with(dir.path().join(format!("p{i}")), options).expect("map");
        assert_eq!(region.dispatch(), dispatch);
        for (offset, len) in [(0usize, 64usize), (3, 200), (4096, 4096), (77, 70_000)] {
            let before = region.stats();
            region.copy_persist(offset, &data[..len]).expect("copy");
            let delta = region.stats() - before;
            // A persist counts exactly what its two halves count (but for
            // what the combining buffer does: the second copy finds the
            // first one's last media line still open).
            let before = region.stats();
            region.copy_nodrain(offset, &data[..len]).expect("copy");
            region.drain();
            let halves = region.stats() - before;
            let issued = |s: FlushStats| {
                (
                    s.lines_flushed,
                    s.fences,
                    s.bytes_nt,
                    s.bytes_cached,
                    s.msyncs,
                    s.requests,
                )
            };
            assert_eq!(issued(halves), issued(delta), "{dispatch} {offset}+{len}");
            let mut back = vec![0u8; len];
            region.read(offset, &mut back).expect("read");
            assert_eq!(back, &data[..len], "{dispatch} at {offset}+{len}");
            assert_eq!(
                delta.bytes_nt + delta.bytes_cached,
                len as u64,
                "{dispatch}"
            );
            assert_eq!(delta.fences, 1, "{dispatch}");
            let lines = (offset + len).div_ceil(CACHE_LINE) - offset / CACHE_LINE;
            match dispatch.flush {
                FlushInstruction::Msync => assert_eq!(delta.msyncs, 1),
                FlushInstruction::None => assert_eq!(delta.lines_flushed, 0),
                _ if dispatch.uses_nt(len) => {
                    assert!(delta.bytes_nt > 0, "{dispatch}: large copy must stream");
                    assert!(
                        delta.lines_flushed <= 2,
                        "{dispatch}: only head and tail flush"
                    );
                }
                _ => assert_eq!(delta.lines_flushed as usize, lines, "{dispatch}"),
            }
            if dispatch.flush != FlushInstruction::Msync {
                // Media lines: the 256-byte lines of the range, once each,
                // but for the first when the previous copy left it open in
                // the combining buffer.
                let media = (offset + len).div_ceil(256) - offset / 256;
                if dispatch.flush != FlushInstruction::None || dispatch.uses_nt(len) {
                    let written = delta.media_lines as usize;
                    assert!(
                        written == media || written + 1 == media,
                        "{dispatch} {offset}+{len}: {written} media lines"
                    );
                    assert_eq!(delta.media_lines + delta.absorbed, delta.requests);
                }
            }
        }
        region.memset_nodrain(10, 0x77, 5000).expect("memset");
        region.drain();
        let mut back = vec![0u8; 5000];
        region.read(10, &mut back).expect("read");
        assert!(back.iter().all(|&b| b == 0x77), "{dispatch}: memset");
    }
}

#[test]
fn global_stats_include_every_region() {
    let dir = tempdir();
    let before = ferrite_pmem::stats::global();
    {
        let region = PmemRegion::map(dir.path().join("g"), 4096).expect("map");
        region.copy_persist(0, &[1u8; 64]).expect("persist");
    }
    let after = ferrite_pmem::stats::global();
    assert!(after.fences > before.fences);
    assert!(after.bytes_stored() >= before.bytes_stored() + 64);
}

#[test]
fn unsupported_flush_override_is_refused() {
    let features = ferrite_pmem::CpuFeatures::get();
    let base = Dispatch::detect();
    assert_eq!(
        base.with_flush(FlushInstruction::Clwb).is_ok(),
        features.clwb
    );
    assert_eq!(
        base.with_flush(FlushInstruction::Clflushopt).is_ok(),
        features.clflushopt
    );
}
