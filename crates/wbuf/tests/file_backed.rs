//! The buffer on a mapped PM file in front of a real file: destage (with
//! `O_DIRECT` where the file system takes it), reads after destage, and a
//! reopen.

use ferrite_io::Device;
use ferrite_wbuf::{WbufConfig, WriteBuffer};

#[test]
fn destaged_bytes_are_in_the_file_and_read_back_after_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (pm, file) = (dir.path().join("buffer.pm"), dir.path().join("data"));
    let config = WbufConfig {
        capacity_bytes: 4 << 20,
        ..WbufConfig::default()
    };
    let mut model = vec![0u8; 0];
    let mut rng = fastrand::Rng::with_seed(3);
    {
        let buffer = WriteBuffer::open(&pm, &file, config.clone()).expect("open");
        // Sequential whole blocks (merged runs), then unaligned overwrites
        // and a short last block.
        for i in 0..400usize {
            let data = vec![(i % 251) as u8; 16 << 10];
            buffer
                .write_at((i * data.len()) as u64, &data)
                .expect("write");
            model.extend_from_slice(&data);
        }
        for _ in 0..200 {
            let len = 1 + rng.u64(..40_000) as usize;
            let at = rng.u64(..(model.len().max(1)) as u64 + 1000) as usize;
            let data: Vec<u8> = (0..len).map(|_| rng.u64(..) as u8).collect();
            buffer.write_at(at as u64, &data).expect("write");
            if model.len() < at + len {
                model.resize(at + len, 0);
            }
            model[at..at + len].copy_from_slice(&data);
        }
        buffer.flush().expect("flush");
        assert_eq!(std::fs::read(&file).expect("read file"), model);
        let mut back = vec![0u8; model.len()];
        assert_eq!(buffer.read_at(0, &mut back).expect("read"), model.len());
        assert_eq!(back, model);
        buffer.close().expect("close");
    }
    let again = WriteBuffer::open(&pm, &file, config).expect("reopen");
    assert_eq!(again.len(), model.len() as u64);
    let mut back = vec![0u8; model.len()];
    again.read_at(0, &mut back).expect("read");
    assert_eq!(back, model);
}
