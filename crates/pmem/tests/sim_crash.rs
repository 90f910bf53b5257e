//! Property tests of the simulated PM's crash images: after any sequence of
//! stores, flushes and fences and a crash, every persisted range holds its
//! data, and every other 8-byte word holds one of the values it held (its
//! old one, or one stored since), never a mix of two.

use std::collections::HashSet;

use ferrite_pmem::{PmemMedium, SimPmem};
use proptest::prelude::*;

const LEN: usize = 1024;

#[derive(Clone, Debug)]
enum Op {
    /// Cached stores, not flushed.
    Write {
        offset: usize,
        data: Vec<u8>,
    },
    /// Stores persisted by the next fence.
    CopyNoDrain {
        offset: usize,
        data: Vec<u8>,
    },
    /// An aligned 8-byte failure-atomic store.
    StoreU64 {
        word: usize,
        value: u64,
    },
    Flush {
        offset: usize,
        len: usize,
    },
    Drain,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..LEN - 1).prop_flat_map(|offset| {
            proptest::collection::vec(any::<u8>(), 1..(LEN - offset).min(200))
                .prop_map(move |data| Op::Write { offset, data })
        }),
        (0..LEN - 1).prop_flat_map(|offset| {
            proptest::collection::vec(any::<u8>(), 1..(LEN - offset).min(300))
                .prop_map(move |data| Op::CopyNoDrain { offset, data })
        }),
        (0..LEN / 8, any::<u64>()).prop_map(|(word, value)| Op::StoreU64 { word, value }),
        (0..LEN - 1, 1..256usize).prop_map(|(offset, len)| Op::Flush {
            offset,
            len: len.min(LEN - offset)
        }),
        Just(Op::Drain),
    ]
}

/// What the test knows: the value of every word at its last guaranteed
/// persist, and every value each word has held since.
struct Tracker {
    /// Word values as of the last point each word was certainly persisted.
    durable: Vec<u64>,
    /// Values each word held since then (the current one included).
    history: Vec<HashSet<u64>>,
    /// Words whose current value is certainly persisted.
    persisted_now: Vec<bool>,
}

fn word_at(bytes: &[u8], word: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&bytes[word * 8..word * 8 + 8]);
    u64::from_le_bytes(w)
}

impl Tracker {
    fn new() -> Tracker {
        Tracker {
            durable: vec![0; LEN / 8],
            history: (0..LEN / 8).map(|_| HashSet::from([0])).collect(),
            persisted_now: vec![true; LEN / 8],
        }
    }

    fn after_store(&mut self, pm: &SimPmem, offset: usize, len: usize) {
        let volatile = pm.volatile_image();
        for word in offset / 8..(offset + len).div_ceil(8) {
            self.history[word].insert(word_at(&volatile, word));
            self.persisted_now[word] = false;
        }
    }

    /// After a drain, words whose lines were flushed or streamed before it
    /// and untouched since are certainly persisted: learn that from the
    /// simulator's persisted image, and check it against the history.
    fn after_drain(&mut self, pm: &SimPmem) {
        let persisted = pm.persisted_image();
        let volatile = pm.volatile_image();
        for word in 0..LEN / 8 {
            let p = word_at(&persisted, word);
            assert!(
                self.history[word].contains(&p),
                "persisted word {word} = {p:#x} never stored"
            );
            if p == word_at(&volatile, word) {
                self.durable[word] = p;
                self.persisted_now[word] = true;
                self.history[word] = HashSet::from([p]);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn crash_images_never_invent_or_lose(ops in proptest::collection::vec(op(), 1..60), seed in any::<u64>()) {
        let pm = SimPmem::new(LEN);
        let mut tracker = Tracker::new();
        // Ranges made persistent by copy_nodrain + drain on this thread must
        // hold exactly their data after any crash.
        let mut guaranteed: Vec<(usize, Vec<u8>)> = Vec::new();
        let mut pending: Vec<(usize, Vec<u8>)> = Vec::new();
        for op in &ops {
            match op {
                Op::Write { offset, data } => {
                    pm.write(*offset, data).expect("in bounds");
                    tracker.after_store(&pm, *offset, data.len());
                    forget_overlaps(&mut guaranteed, &mut pending, *offset, data.len());
                }
                Op::CopyNoDrain { offset, data } => {
                    pm.copy_nodrain(*offset, data).expect("in bounds");
                    tracker.after_store(&pm, *offset, data.len());
                    forget_overlaps(&mut guaranteed, &mut pending, *offset, data.len());
                    pending.push((*offset, data.clone()));
                }
                Op::StoreU64 { word, value } => {
                    pm.store_u64(word * 8, *value).expect("aligned");
                    tracker.after_store(&pm, word * 8, 8);
                    forget_overlaps(&mut guaranteed, &mut pending, word * 8, 8);
                }
                Op::Flush { offset, len } => pm.flush(*offset, *len).expect("in bounds"),
                Op::Drain => {
                    pm.drain();
                    tracker.after_drain(&pm);
                    guaranteed.append(&mut pending);
                }
            }
        }
        for k in 0..4u64 {
            let image = pm.crash_image(seed.wrapping_add(k));
            prop_assert_eq!(image.len(), LEN);
            for (offset, data) in &guaranteed {
                prop_assert_eq!(&image[*offset..*offset + data.len()], &data[..], "persisted range at {} lost", offset);
            }
            for word in 0..LEN / 8 {
                let value = word_at(&image, word);
                if tracker.persisted_now[word] {
                    prop_assert_eq!(value, tracker.durable[word], "persisted word {} changed", word);
                } else {
                    prop_assert!(tracker.history[word].contains(&value), "word {} = {:#x} is a value it never held", word, value);
                }
            }
        }
        // The image reopens as a region whose volatile and persisted views agree.
        let reopened = SimPmem::from_image(pm.crash_image(seed));
        prop_assert_eq!(reopened.unpersisted_lines(), 0);
    }
}

/// A later store over a guaranteed range replaces the guarantee with the
/// weaker per-word one.
fn forget_overlaps(
    guaranteed: &mut Vec<(usize, Vec<u8>)>,
    pending: &mut Vec<(usize, Vec<u8>)>,
    offset: usize,
    len: usize,
) {
    let overlaps = |(o, d): &(usize, Vec<u8>)| *o < offset + len && offset < o + d.len();
    guaranteed.retain(|r| !overlaps(r));
    pending.retain(|r| !overlaps(r));
}

#[test]
fn torn_multi_word_store_tears_only_at_word_boundaries() {
    // A 64-byte store never flushed: across many crashes some words land and
    // some do not, but each word is all-old or all-new.
    let mut saw_tear = false;
    for seed in 0..200 {
        let pm = SimPmem::new(128);
        pm.write(0, &[0xAB; 64]).expect("in bounds");
        let image = pm.crash_image(seed);
        let words: Vec<u64> = (0..8).map(|w| word_at(&image, w)).collect();
        for w in &words {
            assert!(
                *w == 0 || *w == u64::from_le_bytes([0xAB; 8]),
                "torn word {w:#x}"
            );
        }
        saw_tear |= words.contains(&0) && words.iter().any(|w| *w != 0);
    }
    assert!(saw_tear, "the simulator never tore a multi-word store");
}
