//! Where `O_DIRECT` destage writes read their bytes (`DestageSource`): on
//! emulated PM the default copies runs into a DRAM buffer, `InPlace` reads
//! them from the PM slots, `Copy` always copies; whichever, the file ends
//! up holding exactly the history written, across several rounds and
//! reclaim.

use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use ferrite_io::Device;
use ferrite_wbuf::{DestageSource, WbufConfig, WriteBuffer};

/// Whether the directory's file system takes `O_DIRECT` (tmpfs does not:
/// there the buffer destages through the page cache, never in place).
fn takes_direct(dir: &Path) -> bool {
    let probe = dir.join("probe");
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_DIRECT)
        .open(&probe)
        .is_ok()
}

/// Writes three buffers' worth of 16 KiB blocks, each with its own bytes,
/// then overwrites a scattered tenth of them; returns what the file must
/// hold.
fn write_history(buffer: &impl Device, bytes: usize) -> Vec<u8> {
    let block = 16 << 10;
    let mut model = vec![0u8; bytes];
    for (i, chunk) in model.chunks_mut(block).enumerate() {
        for (j, b) in chunk.iter_mut().enumerate() {
            *b = (i.wrapping_mul(31) ^ (j / 64)) as u8;
        }
    }
    for (i, chunk) in model.chunks(block).enumerate() {
        buffer.write_at((i * block) as u64, chunk).expect("write");
    }
    let mut rng = fastrand::Rng::with_seed(17);
    for _ in 0..bytes / block / 10 {
        let i = rng.usize(..bytes / block);
        let data = vec![rng.u8(..); block];
        buffer
            .write_at((i * block) as u64, &data)
            .expect("overwrite");
        model[i * block..(i + 1) * block].copy_from_slice(&data);
    }
    model
}

fn run(source: DestageSource) -> bool {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let (pm, file) = (dir.path().join("buffer.pm"), dir.path().join("data"));
    let capacity = 4 << 20;
    let config = WbufConfig {
        capacity_bytes: capacity,
        destage_io_bytes: 256 << 10,
        destage_source: source,
        ..WbufConfig::default()
    };
    let buffer = WriteBuffer::open(&pm, &file, config).expect("open");
    let in_place = buffer.destages_in_place();
    let model = write_history(&buffer, 3 * capacity);
    buffer.flush().expect("flush");
    let stats = buffer.stats();
    assert!(stats.rounds >= 2, "{stats:?}");
    assert_eq!(std::fs::read(&file).expect("read file"), model);
    let mut back = vec![0u8; model.len()];
    buffer.read_at(0, &mut back).expect("read");
    assert_eq!(back, model);
    buffer.close().expect("close");
    in_place
}

#[test]
fn emulated_pm_copies_by_default_and_the_file_holds_the_history() {
    // A PM file on a disk file system is an emulated (non-DAX) mapping.
    assert!(!run(DestageSource::Auto));
}

#[test]
fn copy_never_reads_in_place() {
    assert!(!run(DestageSource::Copy));
}

#[test]
fn in_place_reads_the_slots_where_direct_io_is_available() {
    let direct = takes_direct(Path::new(env!("CARGO_TARGET_TMPDIR")));
    assert_eq!(run(DestageSource::InPlace), direct);
}
