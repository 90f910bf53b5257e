//! Sequential streams start destaging below the high watermark: a buffer
//! written in order begins its rounds once the stream has dirtied a batch,
//! while the same blocks written scattered (or with stream writeback off)
//! wait for the watermark, the age limit or a flush. Either way the file
//! ends up equal to the history.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ferrite_io::{Device, SimFile};
use ferrite_pmem::SimPmem;
use ferrite_wbuf::{WbufConfig, WriteBuffer};

const BLOCK: usize = 4096;
const CAPACITY: usize = 4 << 20;
/// A quarter of the buffer: far below the 50% watermark.
const BLOCKS: usize = CAPACITY / BLOCK / 4;

fn config(streams: bool) -> WbufConfig {
    WbufConfig {
        block_bytes: BLOCK as u32,
        capacity_bytes: CAPACITY,
        max_age: None,
        destage_io_bytes: 4 * BLOCK,
        destage_depth: 2,
        stream_writeback_bytes: streams.then_some(16 * BLOCK),
        ..WbufConfig::default()
    }
}

/// Writes block `lbn` of `order` with a byte derived from its number;
/// returns the buffer and its file.
fn write_blocks(order: &[usize], streams: bool) -> (WriteBuffer<SimPmem>, Arc<SimFile>) {
    let file = Arc::new(SimFile::new("data"));
    let buffer =
        WriteBuffer::with_medium(SimPmem::new(CAPACITY), "pm", file.clone(), config(streams))
            .expect("open");
    for &lbn in order {
        let data = vec![(lbn % 251) as u8 + 1; BLOCK];
        buffer.write_at((lbn * BLOCK) as u64, &data).expect("write");
    }
    (buffer, file)
}

fn assert_history(file: &SimFile) {
    let image = file.durable_image();
    assert_eq!(image.len(), BLOCKS * BLOCK);
    for (lbn, block) in image.chunks(BLOCK).enumerate() {
        assert!(
            block.iter().all(|&b| b == (lbn % 251) as u8 + 1),
            "block {lbn}"
        );
    }
}

#[test]
fn a_sequential_stream_is_destaged_before_the_watermark() {
    let order: Vec<usize> = (0..BLOCKS).collect();
    let (buffer, file) = write_blocks(&order, true);
    // Nothing but the stream can start a round here (no age limit, far
    // below the watermark); wait for the destage thread to run one.
    let deadline = Instant::now() + Duration::from_secs(60);
    while buffer.stats().rounds == 0 {
        assert!(Instant::now() < deadline, "no round: {:?}", buffer.stats());
        std::thread::yield_now();
    }
    buffer.flush().expect("flush");
    assert_history(&file);
    buffer.close().expect("close");
}

#[test]
fn scattered_writes_and_disabled_streams_wait_for_a_flush() {
    // A shuffled order: no run of 16 consecutive blocks forms.
    let mut scattered: Vec<usize> = (0..BLOCKS).collect();
    fastrand::Rng::with_seed(7).shuffle(&mut scattered);
    let sequential: Vec<usize> = (0..BLOCKS).collect();
    for (order, streams) in [(&scattered, true), (&sequential, false)] {
        let (buffer, file) = write_blocks(order, streams);
        buffer.flush().expect("flush");
        // The flush's round is the only one.
        assert_eq!(buffer.stats().rounds, 1, "streams {streams}");
        assert_history(&file);
        buffer.close().expect("close");
    }
}
