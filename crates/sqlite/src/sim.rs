//! [`SimVfs`]: a VFS whose files are simulated media, for crash tests.
//!
//! Files are kept by name in memory: PM modes put each on a
//! [`PmDevice`] over [`SimPmem`], `file` mode on a [`SimFile`]. Every
//! mutating operation the VFS performs (write, truncate, sync, delete) is
//! a numbered *event*; a hook runs just before each one and can take the
//! images a crash at that instant could leave ([`CrashPoint::images`]).
//! [`SimVfs::from_images`] opens such images, as recovery after the crash
//! would see them.
//!
//! Locks and the WAL index are real files in a private temporary
//! directory, so they behave exactly as on the real VFS.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use ferrite_io::{Device, DeviceInfo, PmDevice, SimFile};
use ferrite_pmem::{FlushStats, SimPmem};

use crate::error::{Error, Result};
use crate::media::{Media, Opened, Shared};
use crate::mode::{Mode, VfsOptions};
use crate::vfs::{self, Host, Registration};

/// The bytes of every file, by name: what a crash left on the media.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SimImages {
    /// File name to media image (for PM files, the whole device medium).
    pub files: BTreeMap<String, Vec<u8>>,
}

#[derive(Clone, Debug)]
enum SimDevice {
    Pm(Arc<PmDevice<SimPmem>>),
    Disk(Arc<SimFile>),
}

impl SimDevice {
    fn new(mode: Mode, name: &str, image: Option<Vec<u8>>) -> Result<SimDevice> {
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
        }
    }

    fn crash_image(&self, seed: u64) -> Vec<u8> {
        match self {
            SimDevice::Pm(d) => d.medium().crash_image(seed),
            SimDevice::Disk(d) => d.crash_image(seed),
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

/// The instant just before an event, handed to the crash hook.
#[derive(Debug)]
pub struct CrashPoint<'a> {
    /// Events before this one (the first event is number 0).
    pub event: u64,
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
            images
                .files
                .insert(name.clone(), device.crash_image(file_seed));
        }
        images
    }

    /// Counts an event, running the hook first.
    fn event(&self) {
        let event = self.events.fetch_add(1, Ordering::SeqCst);
        let mut hook = self.hook.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(hook) = hook.as_mut() {
            hook(&CrashPoint { event, media: self });
        }
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
    inner: Arc<dyn Device>,
    media: Arc<SimMedia>,
}

impl Device for Tracked {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> ferrite_io::Result<usize> {
        self.inner.read_at(offset, buf)
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> ferrite_io::Result<()> {
        self.media.event();
        self.inner.write_at(offset, data)
    }
    fn append(&self, data: &[u8]) -> ferrite_io::Result<u64> {
        self.media.event();
        self.inner.append(data)
    }
    fn sync(&self) -> ferrite_io::Result<()> {
        self.media.event();
        self.inner.sync()
    }
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn read_ptr(&self, offset: u64, len: usize) -> Option<*const u8> {
        self.inner.read_ptr(offset, len)
    }
    fn set_len(&self, len: u64) -> ferrite_io::Result<()> {
        self.media.event();
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
                    let device = SimDevice::new(media.mode, path, None)?;
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
        media.event();
        let removed = media.files().remove(path);
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
            Some(SimDevice::Pm(d)) => !d.is_empty(),
            Some(SimDevice::Disk(d)) => !d.is_empty(),
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
        for (name, image) in images.files {
            let device = SimDevice::new(options.mode, &name, Some(image))?;
            files.insert(name, device);
        }
        let dir = tempfile::tempdir().map_err(|e| Error::io("mkdtemp", std::env::temp_dir(), e))?;
        let media = Arc::new(SimMedia {
            mode: options.mode,
            dir,
            files: Mutex::new(files),
            events: AtomicU64::new(0),
            hook: Mutex::new(None),
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
