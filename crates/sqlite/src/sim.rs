//! [`SimVfs`]: a VFS whose files are simulated media, for crash tests.
//!
//! Files are kept by name in memory: PM modes put each on a
//! [`PmDevice`] over [`SimPmem`], `file` mode on a [`SimFile`], `wbuf`
//! mode on a [`SimFile`] behind a write buffer on [`SimPmem`] (two images
//! per file, the buffer's under the name plus [`WBUF_IMAGE_SUFFIX`]). Every
//! mutating operation the VFS performs (write, truncate, sync, delete) is
//! a numbered *event*; a hook runs just before each one and can take the
//! images a crash at that instant could leave ([`CrashPoint::images`]).
//! [`SimVfs::from_images`] opens such images, as recovery after the crash
//! would see them.
//!
//! Locks and the WAL index are real files in a private temporary
//! directory, so they behave exactly as on the real VFS.
//!
//! What SQLite writes also depends on its PRNG (the nonce that seeds a
//! rollback journal's checksums, the WAL salts), which is process-wide and
//! seeded from `/dev/urandom`. A crash test that must replay holds a
//! [`SeededPrng`] for its whole run.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use ferrite_io::{Device, DeviceInfo, PmDevice, SimFile};
use ferrite_pmem::{FlushStats, SimPmem};
use ferrite_wbuf::{WbufConfig, WriteBuffer};

use crate::error::{Error, Result};
use crate::media::{Media, Opened, Shared};
use crate::mode::{Mode, VfsOptions};
use crate::vfs::{self, Host, Registration};

/// SQLite's process-wide PRNG held at a fixed seed, so that a run under
/// this guard draws the same random bytes (journal nonces, WAL salts) in
/// any process, whatever ran before it. The guard is exclusive: a second
/// one waits until the first is dropped, which serialises the runs that
/// must replay. Code that uses SQLite without a guard while one is held
/// (another test in the same process, say) still draws from the shared
/// PRNG and changes what the guarded run sees. Dropping the guard restores
/// SQLite's default seeding.
#[derive(Debug)]
#[must_use = "the PRNG is seeded only while the guard lives"]
pub struct SeededPrng {
    _exclusive: MutexGuard<'static, ()>,
}

impl SeededPrng {
    /// Waits for any other guard, then seeds and restarts SQLite's PRNG
    /// from `seed` (only its low 32 bits matter to SQLite).
    pub fn new(seed: u64) -> SeededPrng {
        static EXCLUSIVE: Mutex<()> = Mutex::new(());
        let exclusive = EXCLUSIVE.lock().unwrap_or_else(PoisonError::into_inner);
        // SQLite reads a zero seed as "use xRandomness": map it to another.
        let seed = (seed as u32 ^ (seed >> 32) as u32).max(1);
        vfs::seed_linked_prng(seed as i32);
        SeededPrng {
            _exclusive: exclusive,
        }
    }
}

impl Drop for SeededPrng {
    fn drop(&mut self) {
        vfs::seed_linked_prng(0);
    }
}

/// The bytes of every file, by name: what a crash left on the media.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SimImages {
    /// File name to media image (for PM files, the whole device medium).
    pub files: BTreeMap<String, Vec<u8>>,
}

/// In [`SimImages`] of `ferrite-wbuf`, the key of a file's buffer: the
/// file's name with this added.
pub const WBUF_IMAGE_SUFFIX: &str = "#wbuf";

/// PM bytes of each simulated write buffer: small, so that destaging,
/// reclaim and writing through happen within a short test.
const SIM_WBUF_BYTES: usize = 96 << 10;

#[derive(Clone, Debug)]
enum SimDevice {
    Pm(Arc<PmDevice<SimPmem>>),
    Disk(Arc<SimFile>),
    /// A simulated file behind a write buffer on simulated PM, destaged
    /// only when the buffer fills, so every event is reproducible.
    Wbuf(Arc<WriteBuffer<SimPmem>>, Arc<SimFile>),
}

impl SimDevice {
    fn new(
        mode: Mode,
        name: &str,
        image: Option<Vec<u8>>,
        pm_image: Option<Vec<u8>>,
    ) -> Result<SimDevice> {
        if mode == Mode::Wbuf {
            let file = Arc::new(SimFile::from_image(name, image.unwrap_or_default()));
            let pm = pm_image.map_or_else(|| SimPmem::new(SIM_WBUF_BYTES), SimPmem::from_image);
            let config = WbufConfig {
                block_bytes: 4096,
                capacity_bytes: SIM_WBUF_BYTES,
                background: false,
                max_age: None,
                direct_destage: false,
                ..WbufConfig::default()
            };
            let backing: Arc<dyn Device> = file.clone();
            let buffer = WriteBuffer::with_medium(
                pm,
                format!("{name}{WBUF_IMAGE_SUFFIX}"),
                backing,
                config,
            )?;
            return Ok(SimDevice::Wbuf(Arc::new(buffer), file));
        }
        Ok(match mode.policy() {
            Some(policy) => {
                let medium = image.map_or_else(|| SimPmem::new(0), SimPmem::from_image);
                SimDevice::Pm(Arc::new(PmDevice::new(medium, name, policy)?))
            }
            None => SimDevice::Disk(Arc::new(SimFile::from_image(
                name,
                image.unwrap_or_default(),
            ))),
        })
    }

    fn device(&self) -> Arc<dyn Device> {
        match self {
            SimDevice::Pm(d) => d.clone(),
            SimDevice::Disk(d) => d.clone(),
            SimDevice::Wbuf(b, _) => b.clone(),
        }
    }

    fn is_empty(&self) -> bool {
        self.device().is_empty()
    }

    /// The file's image and, for a buffered file, the buffer's.
    fn crash_images(&self, seed: u64) -> (Vec<u8>, Option<Vec<u8>>) {
        match self {
            SimDevice::Pm(d) => (d.medium().crash_image(seed), None),
            SimDevice::Disk(d) => (d.crash_image(seed), None),
            SimDevice::Wbuf(b, f) => (
                f.crash_image(seed),
                Some(b.medium().crash_image(seed ^ 0x5EED)),
            ),
        }
    }
}

/// Runs before every event; see [`SimVfs::set_crash_hook`].
type Hook = Box<dyn FnMut(&CrashPoint<'_>) + Send>;

/// The simulated media of one [`SimVfs`].
pub(crate) struct SimMedia {
    mode: Mode,
    dir: tempfile::TempDir,
    files: Mutex<BTreeMap<String, SimDevice>>,
    events: AtomicU64,
    hook: Mutex<Option<Hook>>,
    /// FNV-1a over every write's file, offset and bytes, in order.
    written: Mutex<u64>,
}

/// FNV-1a, 64-bit: folds `bytes` into `hash`.
fn fnv1a(hash: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(hash, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01B3)
    })
}

impl fmt::Debug for SimMedia {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimMedia")
            .field("mode", &self.mode)
            .field("dir", &self.dir.path())
            .field("events", &self.events.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// A mutating operation of the VFS on a simulated file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    /// `write_at` of `len` bytes at `offset`.
    Write {
        /// Device offset.
        offset: u64,
        /// Bytes written.
        len: usize,
    },
    /// `append` of `len` bytes.
    Append {
        /// Bytes appended.
        len: usize,
    },
    /// `sync`.
    Sync,
    /// `set_len` to `len`.
    SetLen {
        /// The new length.
        len: u64,
    },
    /// Deleting the file.
    Delete,
}

/// The instant just before an event, handed to the crash hook.
#[derive(Debug)]
pub struct CrashPoint<'a> {
    /// Events before this one (the first event is number 0).
    pub event: u64,
    /// The file the event is about to change.
    pub file: &'a str,
    /// What the event is about to do.
    pub operation: Operation,
    media: &'a SimMedia,
}

impl CrashPoint<'_> {
    /// What the media could hold if the machine crashed now, chosen by
    /// `seed` (each file gets its own stream from it).
    pub fn images(&self, seed: u64) -> SimImages {
        self.media.images(seed)
    }
}

impl SimMedia {
    fn files(&self) -> MutexGuard<'_, BTreeMap<String, SimDevice>> {
        self.files.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn images(&self, seed: u64) -> SimImages {
        let files = self.files();
        let mut images = SimImages::default();
        for (index, (name, device)) in files.iter().enumerate() {
            let file_seed = seed.wrapping_mul(0x9E37_79B9).wrapping_add(index as u64);
            let (image, buffer) = device.crash_images(file_seed);
            images.files.insert(name.clone(), image);
            if let Some(buffer) = buffer {
                images
                    .files
                    .insert(format!("{name}{WBUF_IMAGE_SUFFIX}"), buffer);
            }
        }
        images
    }

    /// Counts an event, running the hook first.
    fn event(&self, file: &str, operation: Operation) {
        let event = self.events.fetch_add(1, Ordering::SeqCst);
        let mut hook = self.hook.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(hook) = hook.as_mut() {
            hook(&CrashPoint {
                event,
                file,
                operation,
                media: self,
            });
        }
    }

    /// Folds a write into the digest of everything written.
    fn record(&self, file: &str, offset: u64, data: &[u8]) {
        let mut digest = self.written.lock().unwrap_or_else(PoisonError::into_inner);
        *digest = fnv1a(
            fnv1a(fnv1a(*digest, file.as_bytes()), &offset.to_le_bytes()),
            data,
        );
    }

    fn lock_path(&self, name: &str) -> PathBuf {
        let flat: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        self.dir.path().join(flat)
    }
}

/// A simulated device that reports its mutating operations as events.
#[derive(Debug)]
struct Tracked {
    name: String,
    inner: Arc<dyn Device>,
    media: Arc<SimMedia>,
}

impl Device for Tracked {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> ferrite_io::Result<usize> {
        self.inner.read_at(offset, buf)
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> ferrite_io::Result<()> {
        let len = data.len();
        self.media
            .event(&self.name, Operation::Write { offset, len });
        self.media.record(&self.name, offset, data);
        self.inner.write_at(offset, data)
    }
    fn append(&self, data: &[u8]) -> ferrite_io::Result<u64> {
        let len = data.len();
        self.media.event(&self.name, Operation::Append { len });
        self.media.record(&self.name, u64::MAX, data);
        self.inner.append(data)
    }
    fn sync(&self) -> ferrite_io::Result<()> {
        self.media.event(&self.name, Operation::Sync);
        self.inner.sync()
    }
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn read_ptr(&self, offset: u64, len: usize) -> Option<*const u8> {
        self.inner.read_ptr(offset, len)
    }
    fn set_len(&self, len: u64) -> ferrite_io::Result<()> {
        self.media.event(&self.name, Operation::SetLen { len });
        self.inner.set_len(len)
    }
    fn info(&self) -> DeviceInfo {
        self.inner.info()
    }
    fn path(&self) -> &Path {
        self.inner.path()
    }
    fn flush_stats(&self) -> Option<FlushStats> {
        self.inner.flush_stats()
    }
    fn poisoned(&self) -> Option<String> {
        self.inner.poisoned()
    }
}

/// The [`Media`] face of [`SimMedia`]; weak, so an unregistered VFS (which
/// stays allocated) does not keep the media alive.
#[derive(Debug)]
struct SimHandle(Weak<SimMedia>);

impl SimHandle {
    fn media(&self, path: &str) -> Result<Arc<SimMedia>> {
        self.0
            .upgrade()
            .ok_or_else(|| Error::NotFound { path: path.into() })
    }
}

impl Media for SimHandle {
    fn open(&self, path: &str, create: bool) -> Result<Opened> {
        let media = &self.media(path)?;
        let device = {
            let mut files = media.files();
            match files.get(path) {
                Some(device) => device.clone(),
                None if create => {
                    let device = SimDevice::new(media.mode, path, None, None)?;
                    files.insert(path.to_owned(), device.clone());
                    device
                }
                None => return Err(Error::NotFound { path: path.into() }),
            }
        };
        let lock_path = media.lock_path(path);
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(&lock_path)
            .map_err(|e| Error::io("create", &lock_path, e))?;
        let tracked = Tracked {
            name: path.to_owned(),
            inner: device.device(),
            media: media.clone(),
        };
        Ok(Opened {
            shared: Arc::new(Shared::new(Box::new(tracked))),
            lock_path,
            size_file: None,
        })
    }

    fn delete(&self, path: &str, _sync_dir: bool) -> Result<()> {
        let media = self.media(path)?;
        media.event(path, Operation::Delete);
        let removed = media.files().remove(path);
        if let Some(SimDevice::Wbuf(buffer, _)) = &removed {
            // As on the real media: a deleted file's blocks are not
            // destaged. File and buffer go in one step here.
            buffer.discard();
        }
        match removed {
            Some(_) => Ok(()),
            None => Err(Error::NotFound { path: path.into() }),
        }
    }

    fn exists(&self, path: &str) -> Result<bool> {
        let media = self.media(path)?;
        let files = media.files();
        Ok(match files.get(path) {
            // As on the real media: a file exists if it is not empty, and
            // a PM file's size is its logical length.
            Some(device) => !device.is_empty(),
            None => false,
        })
    }

    fn full_path(&self, path: &str) -> Result<String> {
        Ok(if path.starts_with('/') {
            path.to_owned()
        } else {
            format!("/{path}")
        })
    }
}

/// A VFS over simulated media, registered under a unique name; see the
/// module docs. Dropping it unregisters it; connections still open keep
/// their files, and opening new files through it fails.
#[derive(Debug)]
pub struct SimVfs {
    name: String,
    media: Arc<SimMedia>,
    registration: Option<Registration>,
}

impl SimVfs {
    /// A VFS of `options.mode` with no files.
    pub fn new(options: VfsOptions) -> Result<SimVfs> {
        SimVfs::from_images(options, SimImages::default())
    }

    /// A VFS whose files hold `images` (as left by a crash).
    pub fn from_images(options: VfsOptions, images: SimImages) -> Result<SimVfs> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let mut files = BTreeMap::new();
        let mut images = images.files;
        let buffered: Vec<String> = images
            .keys()
            .filter(|k| k.ends_with(WBUF_IMAGE_SUFFIX))
            .cloned()
            .collect();
        let mut buffers = BTreeMap::new();
        for key in buffered {
            if let Some(image) = images.remove(&key) {
                let name = key.trim_end_matches(WBUF_IMAGE_SUFFIX).to_owned();
                buffers.insert(name, image);
            }
        }
        // A buffer whose file is gone is stale (a crash between the two
        // steps of a delete) and is dropped, as on the real media.
        for (name, image) in images {
            let buffer = buffers.remove(&name);
            let device = SimDevice::new(options.mode, &name, Some(image), buffer)?;
            files.insert(name, device);
        }
        let dir = tempfile::tempdir().map_err(|e| Error::io("mkdtemp", std::env::temp_dir(), e))?;
        let media = Arc::new(SimMedia {
            mode: options.mode,
            dir,
            files: Mutex::new(files),
            events: AtomicU64::new(0),
            hook: Mutex::new(None),
            written: Mutex::new(0xCBF2_9CE4_8422_2325),
        });
        let name = format!(
            "ferrite-sim-{}-{}-{}",
            options.mode,
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let handle = Box::new(SimHandle(Arc::downgrade(&media)));
        let registration = vfs::register(Host::linked(), &name, options, handle)?;
        Ok(SimVfs {
            name,
            media,
            registration: Some(registration),
        })
    }

    /// The name to open databases with (`?vfs=` or rusqlite's `vfs`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Mutating operations so far.
    pub fn events(&self) -> u64 {
        self.media.events.load(Ordering::SeqCst)
    }

    /// A digest (FNV-1a) of every write so far: its file, offset and
    /// bytes, in order. Two runs that wrote the same bytes agree on it;
    /// SQLite's random journal nonces and WAL salts are in those bytes.
    pub fn written_digest(&self) -> u64 {
        *self
            .media
            .written
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `hook` just before every later event (replacing an earlier
    /// hook). The hook must not use this VFS.
    pub fn set_crash_hook(&self, hook: impl FnMut(&CrashPoint<'_>) + Send + 'static) {
        *self
            .media
            .hook
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(Box::new(hook));
    }

    /// Removes the crash hook.
    pub fn clear_crash_hook(&self) {
        *self
            .media
            .hook
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = None;
    }

    /// What a crash now could leave, chosen by `seed`.
    pub fn images(&self, seed: u64) -> SimImages {
        self.media.images(seed)
    }
}

impl Drop for SimVfs {
    fn drop(&mut self) {
        if let Some(registration) = self.registration.take() {
            registration.unregister();
        }
    }
}
