//! The Device contract, checked on every backend: the real ones (file,
//! mmap, pmem, pmem-sync on emulated PM) and the simulated ones (simulated
//! PM under each policy, and the simulated disk file), plus crash behaviour
//! of the simulated media.

use std::sync::Arc;

use ferrite_io::{Device, Error, FileDevice, PmDevice, PmPolicy, PmemDevice, SimFile, SyncScope};
use ferrite_pmem::SimPmem;

const POLICIES: [PmPolicy; 3] = [
    PmPolicy::FlushEveryWrite,
    PmPolicy::DrainEveryWrite,
    PmPolicy::DrainOnSync,
];

/// Opens a device of one backend at a path.
type MakeDevice = Box<dyn Fn(&std::path::Path) -> Arc<dyn Device>>;

/// A way to make fresh devices of one backend, and to reopen what a
/// device left behind (after a clean close, or after a crash for the
/// simulated media).
struct Backend {
    name: String,
    dir: tempfile::TempDir,
    make: MakeDevice,
}

fn backends() -> Vec<Backend> {
    let mut all = vec![Backend {
        name: "file".into(),
        dir: tempdir(),
        make: Box::new(|p| Arc::new(FileDevice::open(p).expect("open file device"))),
    }];
    for policy in POLICIES {
        all.push(Backend {
            name: format!("pmem-{policy:?}"),
            dir: tempdir(),
            make: Box::new(move |p| Arc::new(PmemDevice::open(p, policy).expect("open pm device"))),
        });
        all.push(Backend {
            name: format!("simpmem-{policy:?}"),
            dir: tempdir(),
            make: Box::new(move |p| {
                Arc::new(PmDevice::new(SimPmem::new(0), p, policy).expect("sim pm device"))
            }),
        });
    }
    all.push(Backend {
        name: "simfile".into(),
        dir: tempdir(),
        make: Box::new(|p| Arc::new(SimFile::new(p))),
    });
    all
}

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

fn each_backend(test: impl Fn(&str, Arc<dyn Device>)) {
    for (i, backend) in backends().into_iter().enumerate() {
        let device = (backend.make)(&backend.dir.path().join(format!("dev{i}")));
        test(&backend.name, device);
    }
}

fn read_all(device: &dyn Device) -> Vec<u8> {
    let mut buf = vec![0u8; device.len() as usize];
    let n = device.read_at(0, &mut buf).expect("read");
    assert_eq!(n, buf.len());
    buf
}

#[test]
fn new_device_is_empty() {
    each_backend(|name, device| {
        assert_eq!(device.len(), 0, "{name}");
        assert!(device.is_empty(), "{name}");
        let mut buf = [1u8; 8];
        assert_eq!(device.read_at(0, &mut buf).expect("read"), 0, "{name}");
        assert_eq!(device.poisoned(), None, "{name}");
    });
}

#[test]
fn writes_read_back_and_short_reads_stop_at_the_end() {
    each_backend(|name, device| {
        device.write_at(0, b"hello world").expect("write");
        device.write_at(6, b"WORLD").expect("overwrite");
        let mut buf = [0u8; 32];
        assert_eq!(device.read_at(0, &mut buf).expect("read"), 11, "{name}");
        assert_eq!(&buf[..11], b"hello WORLD", "{name}");
        assert_eq!(device.read_at(8, &mut buf).expect("read"), 3, "{name}");
        assert_eq!(device.read_at(11, &mut buf).expect("read"), 0, "{name}");
        assert_eq!(
            device.read_at(1 << 40, &mut buf).expect("read"),
            0,
            "{name}"
        );
    });
}

#[test]
fn gaps_and_extensions_read_as_zero() {
    each_backend(|name, device| {
        device.write_at(100, &[7u8; 10]).expect("write past end");
        assert_eq!(device.len(), 110, "{name}");
        let all = read_all(&*device);
        assert!(all[..100].iter().all(|&b| b == 0), "{name}: gap not zero");
        // Shrinking and growing again must not resurrect old bytes.
        device.set_len(50).expect("shrink");
        assert_eq!(device.len(), 50, "{name}");
        device.set_len(120).expect("grow");
        let all = read_all(&*device);
        assert!(
            all.iter().all(|&b| b == 0),
            "{name}: stale bytes after set_len"
        );
        device.write_at(200, &[1]).expect("write");
        assert!(
            read_all(&*device)[120..200].iter().all(|&b| b == 0),
            "{name}"
        );
    });
}

#[test]
fn large_writes_grow_the_device() {
    each_backend(|name, device| {
        let data: Vec<u8> = (0..5_000_000u32).map(|i| (i % 251) as u8).collect();
        device.write_at(3, &data).expect("large write");
        device.sync().expect("sync");
        let mut back = vec![0u8; data.len()];
        assert_eq!(
            device.read_at(3, &mut back).expect("read"),
            data.len(),
            "{name}"
        );
        assert!(back == data, "{name}: large write corrupted");
    });
}

#[test]
fn concurrent_appends_get_disjoint_ranges() {
    each_backend(|name, device| {
        let threads = 4;
        let per_thread = 100;
        let offsets: Vec<Vec<(u64, u8)>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let device = Arc::clone(&device);
                    scope.spawn(move || {
                        (0..per_thread)
                            .map(|i| {
                                let tag = (t * per_thread + i) as u8;
                                let record = [tag; 24];
                                (device.append(&record).expect("append"), tag)
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("thread"))
                .collect()
        });
        assert_eq!(device.len(), (threads * per_thread * 24) as u64, "{name}");
        let all = read_all(&*device);
        for (offset, tag) in offsets.into_iter().flatten() {
            let at = offset as usize;
            assert!(
                all[at..at + 24].iter().all(|&b| b == tag),
                "{name}: append at {offset} overwritten"
            );
        }
    });
}

#[test]
fn synced_data_survives_reopen() {
    for (i, backend) in backends().into_iter().enumerate() {
        if backend.name.starts_with("sim") {
            continue; // Simulated media are checked by the crash tests below.
        }
        let path = backend.dir.path().join(format!("reopen{i}"));
        {
            let device = (backend.make)(&path);
            device.write_at(0, b"durable bytes").expect("write");
            device.append(b"+tail").expect("append");
            device.sync().expect("sync");
        }
        let device = (backend.make)(&path);
        assert_eq!(
            read_all(&*device),
            b"durable bytes+tail",
            "{}",
            backend.name
        );
    }
}

#[test]
fn info_describes_the_durability_promise() {
    let dir = tempdir();
    let file = FileDevice::open(dir.path().join("f")).expect("open");
    assert!(!file.info().durable_on_write);
    assert_eq!(file.flush_stats(), None);
    for policy in POLICIES {
        let device =
            PmemDevice::open(dir.path().join(format!("{policy:?}")), policy).expect("open");
        let info = device.info();
        assert_eq!(info.durable_on_write, policy != PmPolicy::DrainOnSync);
        assert_eq!(
            info.sync_scope == SyncScope::CallingThread,
            policy == PmPolicy::DrainOnSync
        );
        assert_eq!(info.pmem_mode, Some(ferrite_pmem::MapMode::Emulated));
        let before = device.flush_stats().expect("pm has stats");
        device.write_at(0, &[1u8; 4096]).expect("write");
        device.sync().expect("sync");
        let after = device.flush_stats().expect("pm has stats");
        assert!((after - before).fences >= 1, "{policy:?} issued no fence");
    }
}

#[test]
fn failed_sync_poisons_writes_but_not_reads() {
    let device = SimFile::new("poison-me");
    device.write_at(0, b"acknowledged").expect("write");
    device.sync().expect("first sync");
    device.write_at(0, b"maybe-lost!!").expect("write");
    device.fail_next_syncs(1);
    let err = device.sync().expect_err("sync must fail");
    assert!(err.to_string().contains("fdatasync"), "{err}");
    for result in [
        device.write_at(0, b"x"),
        device.sync(),
        device.set_len(0),
        device.append(b"y").map(|_| ()),
    ] {
        assert!(matches!(result, Err(Error::Poisoned { .. })), "{result:?}");
    }
    let mut buf = [0u8; 12];
    assert_eq!(device.read_at(0, &mut buf).expect("reads go on"), 12);
    assert!(device.poisoned().expect("cause").contains("fdatasync"));
    // The last synced state is what the disk certainly holds.
    assert_eq!(device.durable_image(), b"acknowledged");
}

#[test]
fn full_media_is_an_error_not_a_panic() {
    let file = SimFile::new("full");
    file.set_space_limit(Some(1000));
    file.write_at(0, &[1u8; 1000]).expect("fits");
    let err = file.write_at(990, &[2u8; 20]).expect_err("past the limit");
    assert!(err.is_no_space(), "{err}");
    assert_eq!(file.poisoned(), None, "a refused write does not poison");
    file.sync().expect("still syncs");

    let pm = SimPmem::new(0);
    pm.set_grow_limit(Some(ferrite_io::PM_INITIAL_CAPACITY));
    let device = PmDevice::new(pm, "full-pm", PmPolicy::DrainEveryWrite).expect("device");
    device.write_at(0, &[3u8; 100]).expect("fits");
    let err = device
        .write_at(0, &vec![4u8; ferrite_io::PM_INITIAL_CAPACITY])
        .expect_err("past capacity");
    assert!(err.is_no_space(), "{err}");
    let mut back = [0u8; 100];
    device.read_at(0, &mut back).expect("read");
    assert_eq!(back, [3u8; 100]);

    // A real file system's ENOSPC: /dev/full refuses every write.
    if let Ok(full) = FileDevice::open_existing("/dev/full") {
        let err = full.write_at(0, b"no room").expect_err("ENOSPC");
        assert!(err.is_no_space(), "{err}");
    }
}

#[test]
fn garbage_pm_header_is_a_clear_error() {
    let pm = SimPmem::new(8192);
    use ferrite_pmem::PmemMedium;
    pm.write(0, b"NOTFERRITE").expect("write");
    let err = PmDevice::new(pm, "garbage", PmPolicy::DrainEveryWrite).expect_err("garbage");
    assert!(err.to_string().contains("bad magic"), "{err}");

    let dir = tempdir();
    let path = dir.path().join("pm");
    drop(PmemDevice::open(&path, PmPolicy::DrainEveryWrite).expect("create"));
    let mut bytes = std::fs::read(&path).expect("read");
    bytes[9] ^= 0xFF; // version byte, covered by the checksum
    std::fs::write(&path, bytes).expect("write");
    let err = PmemDevice::open(&path, PmPolicy::DrainEveryWrite).expect_err("corrupt");
    assert!(err.to_string().contains("checksum"), "{err}");
}

/// One random operation of the crash property tests.
#[derive(Clone, Copy, Debug)]
enum Op {
    Write { offset: u64, len: usize, byte: u8 },
    Append { len: usize, byte: u8 },
    SetLen(u64),
    Sync,
}

fn random_ops(seed: u64, count: usize) -> Vec<Op> {
    let mut rng = fastrand::Rng::with_seed(seed);
    (0..count)
        .map(|_| match rng.u64(..10) {
            0..=3 => Op::Write {
                offset: rng.u64(..6000),
                len: 1 + rng.u64(..1500) as usize,
                byte: 1 + rng.u64(..255) as u8,
            },
            4..=5 => Op::Append {
                len: 1 + rng.u64(..700) as usize,
                byte: 1 + rng.u64(..255) as u8,
            },
            6 => Op::SetLen(rng.u64(..8000)),
            _ => Op::Sync,
        })
        .collect()
}

/// What a byte may hold after a crash: its value at the last sync, or any
/// value stored at it since (zero included, for lengths that moved).
#[derive(Clone, Debug)]
struct Model {
    current: Vec<u8>,
    synced: Vec<u8>,
    since_sync: Vec<Vec<u8>>,
    /// Lengths made durable since the last sync (by it, or by set_len).
    durable_lens: Vec<usize>,
}

impl Model {
    fn new() -> Model {
        Model {
            current: Vec::new(),
            synced: Vec::new(),
            since_sync: Vec::new(),
            durable_lens: vec![0],
        }
    }

    fn store(&mut self, offset: usize, data_len: usize, byte: u8) {
        let end = offset + data_len;
        self.resize(end.max(self.current.len()));
        for p in offset..end {
            self.current[p] = byte;
            self.since_sync[p].push(byte);
        }
    }

    fn resize(&mut self, len: usize) {
        for p in len.min(self.current.len())..len.max(self.current.len()) {
            if p >= self.since_sync.len() {
                self.since_sync.resize(p + 1, Vec::new());
            }
            self.since_sync[p].push(0);
        }
        self.current.resize(len, 0);
    }

    fn apply(&mut self, op: Op, device: &dyn Device) {
        match op {
            Op::Write { offset, len, byte } => {
                device.write_at(offset, &vec![byte; len]).expect("write");
                self.store(offset as usize, len, byte);
            }
            Op::Append { len, byte } => {
                let at = device.append(&vec![byte; len]).expect("append");
                assert_eq!(at as usize, self.current.len());
                self.store(at as usize, len, byte);
            }
            Op::SetLen(len) => {
                device.set_len(len).expect("set_len");
                self.resize(len as usize);
                self.durable_lens.push(len as usize);
            }
            Op::Sync => {
                device.sync().expect("sync");
                self.synced = self.current.clone();
                self.since_sync = vec![Vec::new(); self.current.len()];
                self.durable_lens = vec![self.current.len()];
            }
        }
    }

    /// Every byte of `image` is its synced value or one stored since.
    fn check_possible(&self, image: &[u8], context: &str) {
        for (p, &b) in image.iter().enumerate() {
            let synced = self.synced.get(p).copied();
            let ok = synced == Some(b)
                || b == 0
                || self.since_sync.get(p).is_some_and(|v| v.contains(&b));
            assert!(
                ok,
                "{context}: byte {p} = {b} was never there (synced {synced:?})"
            );
        }
        // Everything synced and untouched since must be intact, up to the
        // shorter of the synced and current lengths.
        let keep = self.synced.len().min(self.current.len()).min(image.len());
        for (p, (&got, &synced)) in image.iter().zip(&self.synced).take(keep).enumerate() {
            if self.since_sync.get(p).is_none_or(|v| v.is_empty()) {
                assert_eq!(got, synced, "{context}: synced byte {p} lost");
            }
        }
    }
}

fn crash_iterations() -> u64 {
    std::env::var("FERRITE_CRASH_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40)
}

#[test]
fn simulated_file_crash_keeps_synced_data() {
    for seed in 0..crash_iterations() {
        let device = SimFile::new("crash");
        let mut model = Model::new();
        let ops = random_ops(seed, 40);
        let crash_at =
            fastrand::Rng::with_seed(seed ^ 0xC0FFEE).u64(..(ops.len() as u64).max(1)) as usize;
        for op in &ops[..crash_at] {
            model.apply(*op, &device);
        }
        let image = device.crash_image(seed);
        let context = format!("seed {seed}, crash after {crash_at} ops");
        model.check_possible(&image, &context);
        // A crash image reopens as a working file.
        let reopened = SimFile::from_image("crash", image.clone());
        reopened.append(b"after").expect("append after crash");
        reopened.sync().expect("sync after crash");
    }
}

#[test]
fn simulated_pm_crash_keeps_what_each_policy_promises() {
    for policy in POLICIES {
        for seed in 0..crash_iterations() {
            let device = PmDevice::new(SimPmem::new(0), "crash-pm", policy).expect("device");
            let mut model = Model::new();
            let ops = random_ops(seed, 40);
            let crash_at =
                fastrand::Rng::with_seed(seed ^ 0xBEEF).u64(..(ops.len() as u64).max(1)) as usize;
            for op in &ops[..crash_at] {
                model.apply(*op, &device);
            }
            let image = device.medium().crash_image(seed);
            let context = format!("{policy:?} seed {seed}, crash after {crash_at} ops");
            let reopened = PmDevice::new(SimPmem::from_image(image), "crash-pm", policy)
                .unwrap_or_else(|e| panic!("{context}: reopen failed: {e}"));
            let contents = read_all(&reopened);
            if policy == PmPolicy::DrainOnSync {
                // The length is durable at sync and at set_len, nowhere else.
                assert!(
                    model.durable_lens.contains(&contents.len()),
                    "{context}: length {} was never made durable ({:?})",
                    contents.len(),
                    model.durable_lens
                );
                model.check_possible(&contents, &context);
            } else {
                // Durable on return: the crash loses nothing that returned.
                assert_eq!(contents.len(), model.current.len(), "{context}: length");
                assert!(contents == model.current, "{context}: contents differ");
            }
            reopened.append(b"after").expect("append after crash");
        }
    }
}

#[test]
fn releasing_the_cache_changes_nothing_a_read_sees() {
    each_backend(|name, device| {
        let bytes: Vec<u8> = (0..3 * 4096 + 1000).map(|i| (i % 251) as u8).collect();
        device.write_at(0, &bytes).expect("write");
        device.sync().expect("sync");
        // Aligned, unaligned, empty, past the end, all of it.
        for (offset, len) in [
            (0, 4096),
            (100, 5000),
            (4096, 0),
            (3 * 4096, 1 << 20),
            (0, u64::MAX),
        ] {
            device.release_cache(offset, len);
            assert_eq!(read_all(&*device), bytes, "{name}: after ({offset}, {len})");
        }
        // The partial last page still takes appends.
        device.append(b"after").expect("append");
        device.sync().expect("sync");
        device.release_cache(0, device.len());
        let all = read_all(&*device);
        assert_eq!(&all[..bytes.len()], &bytes[..], "{name}");
        assert_eq!(&all[bytes.len()..], b"after", "{name}");
    });
}
