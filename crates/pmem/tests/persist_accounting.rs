//! `PmemRegion::copy_persist` has its own fast path (the aligned streaming
//! copy inlined, the accounting done in one step); it must leave the same
//! bytes and the same counters as its definition, `copy_nodrain` followed by
//! `drain`, after any sequence of primitives and with any dispatch. Copies
//! large enough to be split with the helper thread leave the same bytes and
//! counters too, save one more fence for each half the helper fenced.

use ferrite_pmem::{Dispatch, FlushInstruction, MapOptions, PmemMedium, PmemRegion, Simd};
use proptest::prelude::*;

const LEN: usize = 64 * 1024;

#[derive(Clone, Debug)]
enum Op {
    Persist { offset: usize, len: usize },
    NoDrain { offset: usize, len: usize },
    Flush { offset: usize, len: usize },
    Drain,
}

/// Offsets and lengths that favour whole cache lines (the fast path) but
/// also hit every head and tail shape.
fn span() -> impl Strategy<Value = (usize, usize)> {
    let aligned = (0..LEN / 64 - 64, 0usize..64).prop_map(|(line, lines)| (line * 64, lines * 64));
    let any_span = (0..LEN - 5000, 0usize..5000);
    prop_oneof![aligned, any_span]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => span().prop_map(|(offset, len)| Op::Persist { offset, len }),
        2 => span().prop_map(|(offset, len)| Op::NoDrain { offset, len }),
        1 => span().prop_map(|(offset, len)| Op::Flush { offset, len }),
        1 => Just(Op::Drain),
    ]
}

fn dispatches() -> Vec<Dispatch> {
    let base = Dispatch::detect();
    let mut all = Vec::new();
    for threshold in [0, 64, 256, usize::MAX] {
        for flush in FlushInstruction::ALL {
            if flush == FlushInstruction::Msync {
                continue;
            }
            if let Ok(d) = base.with_flush(flush) {
                all.push(d.with_nt_threshold(threshold));
            }
        }
    }
    for simd in [Simd::Sse2, Simd::Avx, Simd::Avx512] {
        if let Ok(d) = base.with_simd(simd) {
            all.push(d.with_nt_threshold(0));
        }
    }
    // Split from a few lines up, streaming and cached.
    for threshold in [0, usize::MAX] {
        for split_min in [0, 256, 4096] {
            all.push(base.with_nt_threshold(threshold).with_split_min(split_min));
        }
    }
    all
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn copy_persist_equals_copy_nodrain_then_drain(
        ops in proptest::collection::vec(op(), 1..40),
        which in any::<prop::sample::Index>(),
    ) {
        let all = dispatches();
        let dispatch = all[which.index(all.len())];
        let dir = tempfile::tempdir().expect("tempdir");
        let open = |name: &str| {
            let mut options = MapOptions::new(LEN);
            options.dispatch = Some(dispatch);
            PmemRegion::map_with(dir.path().join(name), options).expect("map")
        };
        let (fast, reference) = (open("fast"), open("reference"));
        let data: Vec<u8> = (0..LEN as u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
        for op in &ops {
            match *op {
                Op::Persist { offset, len } => {
                    fast.copy_persist(offset, &data[offset..offset + len]).expect("persist");
                    reference.copy_nodrain(offset, &data[offset..offset + len]).expect("copy");
                    reference.drain();
                }
                Op::NoDrain { offset, len } => {
                    let src = &data[LEN - offset - len..LEN - offset];
                    fast.copy_nodrain(offset, src).expect("copy");
                    reference.copy_nodrain(offset, src).expect("copy");
                }
                Op::Flush { offset, len } => {
                    fast.flush(offset, len).expect("flush");
                    reference.flush(offset, len).expect("flush");
                }
                Op::Drain => {
                    fast.drain();
                    reference.drain();
                }
            }
        }
        fast.drain();
        reference.drain();
        let (mut got, want) = (fast.stats(), reference.stats());
        let persists = ops.iter().filter(|op| matches!(op, Op::Persist { .. })).count() as u64;
        let helper_fences = got.fences - want.fences;
        prop_assert!(
            helper_fences <= persists && (helper_fences == 0 || dispatch.split_min < LEN),
            "{}: {} fences more than the reference", dispatch, helper_fences
        );
        got.fences = want.fences;
        prop_assert_eq!(got, want, "{}", dispatch);
        let (mut a, mut b) = (vec![0u8; LEN], vec![0u8; LEN]);
        fast.read(0, &mut a).expect("read");
        reference.read(0, &mut b).expect("read");
        prop_assert!(a == b, "{}: contents differ", dispatch);
    }
}

/// Threads persisting split copies into disjoint ranges of one region at
/// once (one helper serves them all, or none if it is taken) each find
/// exactly their own bytes.
#[test]
fn concurrent_split_persists_keep_every_byte() {
    const THREADS: usize = 4;
    const SHARE: usize = 256 * 1024;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut options = MapOptions::new(THREADS * SHARE);
    options.dispatch = Some(Dispatch::detect().with_split_min(4096));
    let region = PmemRegion::map_with(dir.path().join("pool"), options).expect("map");
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let region = &region;
            s.spawn(move || {
                let base = t * SHARE;
                for round in 0..200usize {
                    // Every shape: unaligned starts and ends, up to the share.
                    let offset = (round * 4099) % 977;
                    let len = SHARE - offset - (round * 131) % 1024;
                    let fill = (t * 31 + round) as u8;
                    let data = vec![fill; len];
                    region.copy_persist(base + offset, &data).expect("persist");
                    let mut back = vec![0u8; len];
                    region.read(base + offset, &mut back).expect("read");
                    assert!(back == data, "thread {t} round {round}: bytes differ");
                }
            });
        }
    });
}
