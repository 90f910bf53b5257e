//! jemalloc's figures in a process of their own. A refresh of the
//! statistics merges the arenas one after another, so while other
//! threads allocate (the library's other tests, run alongside) the
//! figures of one refresh need not be ordered; here nothing else runs,
//! and `allocated <= active <= resident` must hold.

#[test]
fn stats_and_name() {
    assert!(ferrite_alloc::name().starts_with("jemalloc-5."));
    let stats = ferrite_alloc::stats().expect("jemalloc statistics");
    assert!(
        stats.resident >= stats.active && stats.active >= stats.allocated,
        "{stats:?}"
    );
    assert!(ferrite_alloc::malloc_stats().contains("jemalloc"));
    assert!(ferrite_alloc::purge());
}
