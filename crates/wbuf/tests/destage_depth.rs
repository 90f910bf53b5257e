//! Destaging with several writes in flight, written from PM in place: the
//! file must equal the history whatever the depth, whether the PM is a
//! tmpfs mapping (runs go to the disk straight from the slots) or a mapped
//! disk file, and a short image inside a run must reach the file padded
//! with zeros, never with a slot's stale bytes.

use std::path::{Path, PathBuf};

use ferrite_io::Device;
use ferrite_wbuf::{WbufConfig, WriteBuffer};

const BLOCK: usize = 16 << 10;

/// Directories to hold the PM file: the test's own temporary directory on
/// the disk, and one on tmpfs where the machine has it.
fn pm_dirs() -> Vec<tempfile::TempDir> {
    let mut dirs = vec![tempfile::tempdir().expect("tempdir")];
    if Path::new("/dev/shm").is_dir() {
        dirs.push(tempfile::tempdir_in("/dev/shm").expect("tempdir on /dev/shm"));
    }
    dirs
}

fn config(depth: usize) -> WbufConfig {
    WbufConfig {
        capacity_bytes: 2 << 20,
        destage_io_bytes: 4 * BLOCK,
        destage_depth: depth,
        ..WbufConfig::default()
    }
}

fn write(buffer: &impl Device, model: &mut Vec<u8>, at: usize, data: &[u8]) {
    buffer.write_at(at as u64, data).expect("write");
    if model.len() < at + data.len() {
        model.resize(at + data.len(), 0);
    }
    model[at..at + data.len()].copy_from_slice(data);
}

fn file_bytes(path: &PathBuf) -> Vec<u8> {
    std::fs::read(path).expect("read the backing file")
}

#[test]
fn every_depth_leaves_the_history_in_the_file() {
    for pm_dir in pm_dirs() {
        for depth in [1, 3, 8] {
            let disk = tempfile::tempdir().expect("tempdir");
            let file = disk.path().join("data");
            let pm = pm_dir.path().join(format!("depth{depth}.pm"));
            let buffer = WriteBuffer::open(&pm, &file, config(depth)).expect("open");
            let mut model = Vec::new();
            let mut rng = fastrand::Rng::with_seed(depth as u64);
            // Three times the buffer in whole blocks, in a shuffled order
            // with gaps, so rounds hold many runs of different lengths.
            for _ in 0..3 * (2 << 20) / BLOCK {
                let lbn = rng.usize(..400);
                let data = vec![rng.u8(..); BLOCK];
                write(&buffer, &mut model, lbn * BLOCK, &data);
            }
            for _ in 0..100 {
                let len = 1 + rng.usize(..3 * BLOCK);
                let at = rng.usize(..model.len() + BLOCK);
                let data: Vec<u8> = (0..len).map(|_| rng.u8(..)).collect();
                write(&buffer, &mut model, at, &data);
            }
            buffer.flush().expect("flush");
            assert_eq!(file_bytes(&file), model, "depth {depth}");
            let mut back = vec![0u8; model.len()];
            assert_eq!(buffer.read_at(0, &mut back).expect("read"), model.len());
            assert_eq!(back, model, "depth {depth}");
            buffer.close().expect("close");
            assert_eq!(file_bytes(&file), model, "depth {depth} after close");
        }
    }
}

#[test]
fn a_short_image_inside_a_run_is_padded_with_zeros() {
    for pm_dir in pm_dirs() {
        let disk = tempfile::tempdir().expect("tempdir");
        let file = disk.path().join("data");
        let pm = pm_dir.path().join("short.pm");
        let buffer = WriteBuffer::open(&pm, &file, config(4)).expect("open");
        // Every slot's data holds 0xFF bytes once...
        let slots = buffer.geometry().slots as usize;
        for lbn in 0..slots {
            buffer
                .write_at((lbn * BLOCK) as u64, &vec![0xFF; BLOCK])
                .expect("fill");
        }
        buffer.flush().expect("flush");
        // ...then the file is emptied, which frees every slot as it is.
        buffer.set_len(0).expect("truncate");
        // A 100-byte image of block 0 (the file's end), then a whole block
        // 1: one run whose first image is shorter than its block.
        buffer.write_at(0, &[7u8; 100]).expect("short write");
        buffer
            .write_at(BLOCK as u64, &vec![9u8; BLOCK])
            .expect("block write");
        buffer.flush().expect("flush");
        let mut expected = vec![7u8; 100];
        expected.resize(BLOCK, 0);
        expected.extend(std::iter::repeat_n(9u8, BLOCK));
        assert_eq!(file_bytes(&file), expected);
        let mut back = vec![0u8; 2 * BLOCK];
        buffer.read_at(0, &mut back).expect("read");
        assert_eq!(back, expected);
        buffer.close().expect("close");
    }
}
