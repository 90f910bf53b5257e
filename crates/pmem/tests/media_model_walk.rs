//! The media model still charges after it has run for a while, on the
//! validation's access pattern (a walk over a large region, an idle module
//! before each op). Its clock had been bounded by a deadline on the OS
//! clock counted from the model's start; the two clocks drift apart by
//! microseconds per second, so a few seconds into a run every wait ended
//! at once and the model charged nothing (the bench's `clflush` persists
//! took what they took without it).

use std::time::{Duration, Instant};

use ferrite_pmem::model::ModelChoice;
use ferrite_pmem::{
    Dispatch, FlushInstruction, MapMode, MapOptions, MediaRead, PmemMedium, PmemRegion,
};

const REGION: usize = 16 << 20;
const OP: usize = 4096;

fn region(dir: &tempfile::TempDir, flush: FlushInstruction) -> PmemRegion {
    let mut options = MapOptions::new(REGION);
    let dispatch = Dispatch::for_mode(MapMode::Emulated)
        .with_nt_threshold(usize::MAX)
        .with_flush(flush)
        .expect("every x86_64 CPU has clflush and clflushopt or falls back");
    options.dispatch = Some(dispatch);
    options.populate = true;
    let path = dir.path().join(flush.to_string());
    PmemRegion::map_with_model(path, options, ModelChoice::Optane).expect("map")
}

fn spin(gap: Duration) {
    let start = Instant::now();
    while start.elapsed() < gap {
        std::hint::spin_loop();
    }
}

#[test]
fn an_aged_model_charges_clflush_persists_and_missed_reads() {
    // Memory-backed when the machine has /dev/shm, as the bench's pools:
    // a disk-backed mapping's own persist cost would meet the floor below
    // without the model.
    let dir = tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .expect("tempdir");
    let region = region(&dir, FlushInstruction::Clflush);
    let model = ferrite_pmem::model::active().expect("the model was made for the region");
    // Age the model: with the old deadline a drift of a few ppm over this
    // already exceeded the 1.6 us a 4 KiB clflush persist is charged.
    std::thread::sleep(Duration::from_secs(2));
    let (params, host) = (model.params(), model.host());
    let line_ns = 256.0 / params.dimm_write_gbps;
    // The lines' write time, less the fence the model credits and the
    // host's measured cost of issuing the flushes (the reservation starts
    // when they were issued).
    let issue_credit = (OP / 64) as f64 * host.line_ns(FlushInstruction::Clflush);
    let persist_floor = (OP / 256) as f64 * line_ns - host.fence_ns - issue_credit - 1.0;
    // A 4 KiB read of lines clflush invalidated: a random first line and
    // fifteen more, beyond DRAM's own cost.
    let read_floor = model.read_ns(MediaRead {
        random: 1,
        sequential: (OP / 256) as u64 - 1,
    }) - 1.0;
    let data = vec![0x3Cu8; OP];
    let mut back = vec![0u8; OP];
    let gap = Duration::from_nanos((2.0 * (OP / 256) as f64 * line_ns) as u64 + 1000);
    let (mut persists, mut reads) = (Vec::new(), Vec::new());
    for op in 0..200 {
        let at = (op * 3 * OP) % (REGION - OP);
        spin(gap);
        let start = Instant::now();
        region.copy_persist(at, &data).expect("persist");
        let persisted = Instant::now();
        region.read(at, &mut back).expect("read");
        reads.push((persisted.elapsed()).as_nanos() as f64);
        persists.push((persisted - start).as_nanos() as f64);
        assert_eq!(back, data, "the model never changes what is stored");
    }
    // Every op waits at least the floors: the model only adds time.
    let least = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
    assert!(
        least(&persists) >= persist_floor,
        "a clflush persist took {} ns, under the {persist_floor} ns charge",
        least(&persists)
    );
    assert!(
        least(&reads) >= read_floor,
        "a missed 4 KiB read took {} ns, under the {read_floor} ns charge",
        least(&reads)
    );
}
