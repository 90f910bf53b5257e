//! The media model's treatment of the flush instructions and of the host's
//! own persist costs: `clflush` lines are written one after another (no
//! write-queue overlap), and the host's measured costs are sane.

use std::time::Instant;

use ferrite_pmem::model::ModelChoice;
use ferrite_pmem::{
    Dispatch, FlushInstruction, HostCosts, MapMode, MapOptions, PmemMedium, PmemRegion,
};

fn region(dir: &tempfile::TempDir, flush: FlushInstruction) -> Option<PmemRegion> {
    let mut options = MapOptions::new(4 << 20);
    let dispatch = Dispatch::for_mode(MapMode::Emulated)
        .with_nt_threshold(usize::MAX)
        .with_flush(flush)
        .ok()?;
    options.dispatch = Some(dispatch);
    let path = dir.path().join(flush.to_string());
    Some(PmemRegion::map_with_model(path, options, ModelChoice::Optane).expect("map"))
}

#[test]
fn a_lone_clflush_persist_waits_for_every_line_to_be_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let region = region(&dir, FlushInstruction::Clflush).expect("every x86_64 CPU has clflush");
    let model = ferrite_pmem::model::active().expect("the model was made for the region");
    let (params, host) = (model.params(), model.host());
    let data = vec![7u8; 4096];
    // Let the module go idle, then persist 16 media lines at once: clflush
    // lines do not overlap in the write queue, so the persist lasts at least
    // their write time, less the fence the model credits.
    let line_ns = 256.0 / params.dimm_write_gbps;
    let floor_ns = 16.0 * line_ns - host.fence_ns - 1.0;
    for round in 0..4 {
        let idle = Instant::now();
        while idle.elapsed().as_micros() < 50 {
            std::hint::spin_loop();
        }
        let start = Instant::now();
        region.copy_persist(round * 8192, &data).expect("persist");
        let took = start.elapsed().as_nanos() as f64;
        assert!(took >= floor_ns, "round {round}: {took} ns < {floor_ns} ns");
    }
}

#[test]
fn host_costs_are_measured_and_finite() {
    let host = HostCosts::measure();
    for (name, value) in [
        ("clwb", host.clwb_line_ns),
        ("clflushopt", host.clflushopt_line_ns),
        ("clflush", host.clflush_line_ns),
        ("fence", host.fence_ns),
    ] {
        assert!(value.is_finite() && value >= 0.0, "{name}: {value}");
    }
    // A fence after a flushed line waits for the write-back: never free.
    assert!(host.fence_ns > 0.0, "{host:?}");
    assert_eq!(host.line_ns(FlushInstruction::Msync), 0.0);
    assert_eq!(host.line_ns(FlushInstruction::Clwb), host.clwb_line_ns);
}
