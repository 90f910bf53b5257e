//! The write buffer as a device: against a model, absorption, write-through,
//! poisoning, a clean reopen.

use std::sync::Arc;
use std::time::Duration;

use ferrite_io::{Device, Error, SimFile};
use ferrite_pmem::SimPmem;
use ferrite_wbuf::{WbufConfig, WriteBuffer};

const BLOCK: usize = 1024;

fn config(slots: usize) -> WbufConfig {
    WbufConfig {
        block_bytes: BLOCK as u32,
        capacity_bytes: 3 * 4096 + slots * (BLOCK + 64),
        destage_io_bytes: 8 * BLOCK,
        ..WbufConfig::default()
    }
}

fn open(pm: Vec<u8>, file: &Arc<SimFile>, config: WbufConfig) -> WriteBuffer<SimPmem> {
    WriteBuffer::with_medium(SimPmem::from_image(pm), "pm", file.clone(), config).expect("open")
}

#[test]
fn reads_match_a_model_and_each_flush_leaves_a_prefix_in_the_file() {
    let file = Arc::new(SimFile::new("ssd"));
    let config = WbufConfig {
        background: false,
        ..config(12)
    };
    let buffer = open(vec![0; config.capacity_bytes], &file, config.clone());
    let mut model: Vec<u8> = Vec::new();
    let mut rng = fastrand::Rng::with_seed(7);
    for i in 0..400 {
        let len = 1 + rng.u64(..3 * BLOCK as u64) as usize;
        let offset = rng.u64(..20 * BLOCK as u64) as usize;
        let data: Vec<u8> = (0..len).map(|_| rng.u64(..) as u8).collect();
        buffer.write_at(offset as u64, &data).expect("write");
        if model.len() < offset + len {
            model.resize(offset + len, 0);
        }
        model[offset..offset + len].copy_from_slice(&data);
        assert_eq!(buffer.len(), model.len() as u64);
        if i % 37 == 0 {
            buffer.flush().expect("flush");
            // The synced file is exactly the history so far.
            assert_eq!(file.durable_image(), model, "after flush {i}");
        }
        let at = rng.u64(..(model.len().max(1)) as u64) as usize;
        let mut back = vec![0u8; 1 + rng.u64(..2 * BLOCK as u64) as usize];
        let n = buffer.read_at(at as u64, &mut back).expect("read");
        assert_eq!(&back[..n], &model[at..(at + back.len()).min(model.len())]);
    }
    buffer.flush().expect("flush");
    let pm = buffer.medium().volatile_image();
    buffer.close().expect("close");
    assert_eq!(file.durable_image(), model);
    // Everything was destaged: the next open replays nothing.
    let again = open(pm, &file, config);
    assert_eq!(again.stats().ssd_bytes, 0);
    let mut all = vec![0u8; model.len()];
    again.read_at(0, &mut all).expect("read");
    assert_eq!(all, model);
}

#[test]
fn overwrites_before_destage_are_absorbed() {
    let file = Arc::new(SimFile::new("ssd"));
    let buffer = open(vec![0; config(16).capacity_bytes], &file, config(16));
    for i in 0..10u8 {
        buffer.write_at(0, &[i; BLOCK]).expect("write");
    }
    buffer.flush().expect("flush");
    let stats = buffer.stats();
    assert_eq!(stats.user_bytes, 10 * BLOCK as u64);
    assert_eq!(stats.ssd_bytes, BLOCK as u64);
    assert_eq!(stats.absorbed_bytes, 9 * BLOCK as u64);
    assert_eq!(stats.write_hits_uncommitted, 9);
    assert!(stats.ssd_bytes_per_user_byte() <= 0.1 + 1e-9);
    assert_eq!(file.durable_image(), vec![9u8; BLOCK]);
}

#[test]
fn a_full_buffer_writes_through_and_stays_correct() {
    let file = Arc::new(SimFile::new("ssd"));
    let config = WbufConfig {
        // No destage thread: nothing drains the buffer behind the
        // writer's back, so it fills (with a thread woken at 100% dirty,
        // a fast round could free slots before the next write looked).
        high_watermark: 1.0,
        low_watermark: 1.0,
        max_age: None,
        full_wait: Duration::ZERO,
        background: false,
        ..config(6)
    };
    let buffer = open(vec![0; config.capacity_bytes], &file, config);
    let slots = buffer.geometry().slots as usize;
    for b in 0..2 * slots {
        buffer
            .write_at((b * BLOCK) as u64, &[b as u8 + 1; BLOCK])
            .expect("write");
    }
    let stats = buffer.stats();
    assert!(stats.bypassed > 0 && stats.waits > 0, "{stats:?}");
    // A write larger than half the buffer goes through as a whole.
    buffer
        .write_at(0, &vec![0xEE; slots * BLOCK])
        .expect("large write");
    let mut back = vec![0u8; 2 * slots * BLOCK];
    buffer.read_at(0, &mut back).expect("read");
    for b in 0..2 * slots {
        let expected = if b < slots { 0xEE } else { b as u8 + 1 };
        assert!(
            back[b * BLOCK..(b + 1) * BLOCK]
                .iter()
                .all(|&x| x == expected),
            "block {b}"
        );
    }
}

#[test]
fn a_failed_file_sync_poisons_writes_but_keeps_reads_and_data() {
    let file = Arc::new(SimFile::new("ssd"));
    let config = WbufConfig {
        background: false,
        ..config(8)
    };
    let buffer = open(vec![0; config.capacity_bytes], &file, config.clone());
    buffer.write_at(0, b"kept in PM").expect("write");
    file.fail_next_syncs(1);
    assert!(matches!(
        buffer.flush(),
        Err(Error::Poisoned { .. }) | Err(Error::Io { .. })
    ));
    let refused = buffer.write_at(0, b"x").expect_err("poisoned");
    assert!(matches!(refused, Error::Poisoned { .. }), "{refused}");
    assert!(refused.to_string().contains("fdatasync"), "{refused}");
    assert!(buffer.poisoned().is_some());
    let mut back = [0u8; 10];
    buffer.read_at(0, &mut back).expect("reads still work");
    assert_eq!(&back, b"kept in PM");
    // The data stays staged: a fresh open (after a restart) replays it.
    let pm = buffer.medium().volatile_image();
    drop(buffer);
    let restarted = Arc::new(SimFile::new("ssd"));
    let again = open(pm, &restarted, config);
    assert_eq!(&restarted.durable_image()[..10], b"kept in PM");
    drop(again);
}

#[test]
fn concurrent_writers_on_shared_blocks_lose_nothing() {
    let file = Arc::new(SimFile::new("ssd"));
    let config = WbufConfig {
        max_age: Some(Duration::from_millis(1)),
        ..config(8)
    };
    let buffer = open(vec![0; config.capacity_bytes], &file, config);
    // Eight threads each own every eighth 128-byte cell of the same blocks,
    // so every write is a read-modify-write of a block others write too.
    std::thread::scope(|s| {
        for t in 0..8u8 {
            let buffer = &buffer;
            s.spawn(move || {
                for round in 0..20u8 {
                    for cell in 0..16usize {
                        let at = (cell * 8 + t as usize) * 128;
                        buffer
                            .write_at(at as u64, &[t * 32 + round; 128])
                            .expect("write");
                    }
                }
            });
        }
    });
    let mut back = vec![0u8; 16 * 8 * 128];
    buffer.read_at(0, &mut back).expect("read");
    for (i, chunk) in back.chunks(128).enumerate() {
        let t = (i % 8) as u8;
        assert!(chunk.iter().all(|&x| x == t * 32 + 19), "cell {i}");
    }
    buffer.flush().expect("flush");
    assert_eq!(file.durable_image(), back);
}
