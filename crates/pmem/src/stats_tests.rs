use super::*;

#[test]
fn sink_combines_requests_into_media_lines() {
    let sink = StatsSink::new();
    // Two flushes inside one 256-byte media line, then the next line:
    // the first line closes with two of its four cache lines (a
    // read-modify-write) and the next one follows it (sequential).
    sink.record_stores(0, 64, StoreCounts::cached(1, 64));
    sink.record_stores(128, 64, StoreCounts::cached(1, 64));
    sink.record_stores(256, 8, StoreCounts::cached(1, 8));
    sink.record_fence();
    // Back to line 0: a new media write; the fence did not close it.
    sink.record_stores(0, 64, StoreCounts::cached(1, 64));
    sink.record_fence();
    // A rewrite of the open line is absorbed; a jump away closes it.
    sink.record_stores(0, 64, StoreCounts::cached(1, 64));
    sink.record_stores(4096, 64, StoreCounts::cached(1, 64));
    sink.record_fence();
    let stats = sink.snapshot();
    assert_eq!(stats.requests, 6);
    assert_eq!(stats.media_lines, 4);
    assert_eq!(stats.absorbed, 2);
    assert_eq!(stats.read_modify_writes, 3);
    assert_eq!(stats.sequential_lines, 1);
    assert_eq!(stats.fences, 3);
    assert_eq!(stats.lines_flushed, 6);
    assert_eq!(stats.bytes_cached, 328);
}

#[test]
fn long_ranges_count_whole_lines_in_one_step() {
    let sink = StatsSink::new();
    // 1 MiB streamed from a cache line inside a media line: the first
    // media line is partial, the rest whole and sequential.
    let counts = StoreCounts {
        lines_flushed: 0,
        bytes_nt: 1 << 20,
        bytes_cached: 0,
    };
    sink.record_stores(64, 1 << 20, counts);
    sink.record_stores(1 << 21, 64, StoreCounts::cached(1, 64));
    let stats = sink.snapshot();
    assert_eq!(stats.requests, (1 << 20) / 64 + 1);
    assert_eq!(stats.media_lines, 4097 + 1);
    assert_eq!(stats.sequential_lines, 4096);
    // The first line (three of four) and the last (one of four).
    assert_eq!(stats.read_modify_writes, 2);
    assert_eq!(stats.requests, stats.media_lines + stats.absorbed);
}

#[test]
fn slots_from_several_threads_add_up() {
    let sink = StatsSink::new();
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                for _ in 0..1000 {
                    sink.record_stores(0, 64, StoreCounts::cached(1, 64));
                    sink.record_fence();
                }
            });
        }
    });
    let stats = sink.snapshot();
    assert_eq!(stats.fences, 4000);
    assert_eq!(stats.lines_flushed, 4000);
    assert_eq!(stats.requests, 4000);
    // Each thread rewrites one spot: at most one media line each (a
    // thread that takes over an exited thread's slot inherits its open
    // line), the rest absorbed.
    assert!((1..=4).contains(&stats.media_lines), "{stats}");
    assert_eq!(stats.absorbed + stats.media_lines, 4000);
    let before = global();
    drop(sink);
    // Dropping moves the counts to the retired total, not away.
    assert!(global().fences >= before.fences);
}

#[test]
fn exited_threads_free_their_slots() {
    let sink = StatsSink::new();
    // More threads over time than there are slots: each must find one,
    // because exited threads give theirs back.
    for _ in 0..(SLOTS * 2) {
        std::thread::scope(|scope| {
            scope.spawn(|| {
                sink.record_fence();
                assert_ne!(SLOT.with(Cell::get), SHARED_SLOT);
            });
        });
    }
    assert_eq!(sink.snapshot().fences, (SLOTS * 2) as u64);
}
