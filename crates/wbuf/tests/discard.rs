//! `WriteBuffer::discard`: closing a buffer whose file is being deleted
//! neither destages nor marks the buffer clean.

use std::sync::Arc;

use ferrite_io::{Device, SimFile};
use ferrite_pmem::SimPmem;
use ferrite_wbuf::{WbufConfig, WriteBuffer};

fn config() -> WbufConfig {
    WbufConfig {
        block_bytes: 1024,
        capacity_bytes: 64 << 10,
        background: false,
        ..WbufConfig::default()
    }
}

#[test]
fn a_discarded_buffer_closes_without_destaging() {
    let file = Arc::new(SimFile::new("ssd"));
    let pm = SimPmem::new(config().capacity_bytes);
    let buffer = WriteBuffer::with_medium(pm, "pm", file.clone(), config()).expect("open");
    buffer.write_at(0, &[7u8; 3000]).expect("write");
    buffer.discard();
    let image = buffer.medium().volatile_image();
    buffer.close().expect("close");
    assert!(file.durable_image().is_empty(), "nothing destaged");
    assert_eq!(file.len(), 0, "nothing written to the file at all");

    // Not marked clean either: a buffer reopened on that PM (as after a
    // failed unlink) still recovers the write into the file.
    let again = WriteBuffer::with_medium(SimPmem::from_image(image), "pm", file.clone(), config())
        .expect("reopen");
    let mut back = [0u8; 3000];
    assert_eq!(again.read_at(0, &mut back).expect("read"), 3000);
    assert_eq!(back, [7u8; 3000]);
    drop(again);
    assert_eq!(file.durable_image(), vec![7u8; 3000]);
}

#[test]
fn a_buffer_closed_normally_destages() {
    let file = Arc::new(SimFile::new("ssd"));
    let pm = SimPmem::new(config().capacity_bytes);
    let buffer = WriteBuffer::with_medium(pm, "pm", file.clone(), config()).expect("open");
    buffer.write_at(0, &[9u8; 2000]).expect("write");
    buffer.close().expect("close");
    assert_eq!(file.durable_image(), vec![9u8; 2000]);
}
