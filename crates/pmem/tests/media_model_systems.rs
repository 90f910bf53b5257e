//! The media model charges paper 000's two ways of persisting the same
//! pages alike: SQLite/MM's (cached copy, flush and fence per write) and
//! SQLite/PMM's (`copy_nodrain` per write, one drain at sync). Both write
//! the same media lines and both wait for the module to write them, less
//! its write queue: one drain for many pages does not escape the module's
//! time, it only saves fences.

use std::time::{Duration, Instant};

use ferrite_pmem::model::ModelChoice;
use ferrite_pmem::{Dispatch, MapMode, MapOptions, PmemMedium, PmemRegion};

const PAGE: usize = 4096;
const PAGES: usize = 16;

fn region(dir: &tempfile::TempDir, name: &str, nt_threshold: usize) -> PmemRegion {
    let mut options = MapOptions::new(16 << 20);
    options.dispatch = Some(Dispatch::for_mode(MapMode::Emulated).with_nt_threshold(nt_threshold));
    options.populate = true;
    PmemRegion::map_with_model(dir.path().join(name), options, ModelChoice::Optane).expect("map")
}

/// Writes `PAGES` pages at `base`, as the VFS mode `mmap` does (`true`) or
/// as `pmem` does; returns the time taken.
fn burst(region: &PmemRegion, base: usize, mmap: bool) -> Duration {
    let page = [0x6Bu8; PAGE];
    let start = Instant::now();
    for i in 0..PAGES {
        let at = base + i * PAGE;
        if mmap {
            region.write(at, &page).expect("write");
            region.persist(at, PAGE).expect("persist");
        } else {
            region.copy_nodrain(at, &page).expect("copy");
        }
    }
    if !mmap {
        region.drain();
    }
    start.elapsed()
}

fn idle(gap: Duration) {
    let start = Instant::now();
    while start.elapsed() < gap {
        std::hint::spin_loop();
    }
}

#[test]
fn both_ways_write_the_same_lines_and_wait_for_the_module() {
    let dir = tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .expect("tempdir");
    // Streaming stores for the PMM way (as for its 4 KiB pages), cached
    // copies and flushes for the MM way.
    let pmm = region(&dir, "pmm", PAGE);
    let mm = region(&dir, "mm", usize::MAX);
    let model = ferrite_pmem::model::active().expect("the model was made for the regions");
    let (params, host) = (model.params(), model.host());
    let line_ns = 256.0 / params.dimm_write_gbps;
    let lines = (PAGES * PAGE / 256) as f64;
    // The module writes every line; the write queue's lines and the last
    // fence's host cost may remain when the burst returns, and the first
    // write's reservation starts when its lines were issued (back-dated by
    // the host's measured cost of flushing them).
    let issue_credit = (PAGE / 64) as f64 * host.line_ns(mm.dispatch().flush);
    let floor =
        (lines - params.write_queue_lines as f64) * line_ns - host.fence_ns - issue_credit - 1.0;
    let gap = Duration::from_nanos((2.0 * lines * line_ns) as u64 + 1000);
    for round in 0..4 {
        let base = round * PAGES * PAGE;
        for (region, mmap) in [(&mm, true), (&pmm, false)] {
            idle(gap);
            let before = region.stats();
            let took = burst(region, base, mmap).as_nanos() as f64;
            let done = region.stats() - before;
            assert_eq!(done.media_lines, lines as u64, "mmap {mmap}: {done:?}");
            assert!(
                took >= floor,
                "mmap {mmap}, round {round}: {took} ns < the module's {floor} ns"
            );
            let fences = if mmap { PAGES as u64 } else { 1 };
            assert_eq!(done.fences, fences, "mmap {mmap}: {done:?}");
        }
    }
}
