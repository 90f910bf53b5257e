//! The file-system operations of the rewrite, behind a small trait: the
//! real one ([`RealFs`]) and a simulated one ([`SimFs`]) that injects a
//! fault at any chosen operation and produces the images a crash can
//! leave, for the crash tests.
//!
//! The rewrite only ever creates a file, writes it front to back, syncs it,
//! renames it, removes it, and syncs the directory; reading is whole-file
//! streaming. That is all the trait offers.

use std::collections::HashMap;
use std::fmt;
use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::pace::Pacer;

/// A file being written.
pub trait FsWriter: Write + Send {
    /// Makes what was written durable (fdatasync).
    fn sync(&mut self) -> io::Result<()>;

    /// Paces the writes that go to the device from now on with `pacer`
    /// (only a writer past the page cache has such writes; the others
    /// ignore it).
    fn pace(&mut self, _pacer: Arc<Pacer>) {}
}

/// The file-system operations the rewrite and the manifest use.
pub trait RewriteFs: Send + Sync + fmt::Debug {
    /// Creates `path` (truncating an existing file) for writing.
    fn create(&self, path: &Path) -> io::Result<Box<dyn FsWriter>>;
    /// Creates `path` (truncating an existing file) for a large file
    /// written once front to back and synced, a base part: the real file
    /// system writes it past the page cache where it can.
    fn create_streamed(&self, path: &Path) -> io::Result<Box<dyn FsWriter>> {
        self.create(path)
    }
    /// Opens the existing `path` for appending.
    fn append(&self, path: &Path) -> io::Result<Box<dyn FsWriter>>;
    /// Opens `path` for reading.
    fn open(&self, path: &Path) -> io::Result<Box<dyn Read + Send>>;
    /// Renames `from` to `to`, replacing `to` atomically.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Removes `path`.
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// Makes the names in directory `dir` durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// The names of the files in `dir`.
    fn list(&self, dir: &Path) -> io::Result<Vec<String>>;
    /// The length of `path`, or `None` if it does not exist.
    fn len(&self, path: &Path) -> io::Result<Option<u64>>;

    /// Reads all of `path`.
    fn read_all(&self, path: &Path) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        self.open(path)?.read_to_end(&mut out)?;
        Ok(out)
    }
}

/// The operating system's file system.
#[derive(Clone, Copy, Debug, Default)]
pub struct RealFs;

#[derive(Debug)]
struct RealWriter(io::BufWriter<Chunked>);

/// The most bytes one `write` system call hands the kernel's page cache.
/// Base parts bypass the page cache where the file system allows
/// ([`super::direct`]); this bounds every other write of the rewrite, and
/// the base parts' where `O_DIRECT` is refused.
///
/// The rewrite threads run in `SCHED_IDLE`, so a waking event loop or
/// client should take their core at once; but on a kernel without full
/// preemption (`preempt=none`, the default of many server kernels) a
/// thread inside `write` keeps the core until the kernel has copied its
/// buffer into the page cache, so the length of one write bounds how long
/// a client may wait. 32 KiB keeps that wait short (a 1 MiB write kept the
/// loop waiting several times longer) without making the rewrite much
/// slower (16 KiB did); the figures are in `docs/results/rewrite-io.md`.
pub(super) const WRITE_CHUNK_BYTES: usize = 32 << 10;

/// A file written at most [`WRITE_CHUNK_BYTES`] per system call.
#[derive(Debug)]
struct Chunked(File);

impl Write for Chunked {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = buf.len().min(WRITE_CHUNK_BYTES);
        self.0.write(&buf[..n])
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

impl Write for RealWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

impl FsWriter for RealWriter {
    fn sync(&mut self) -> io::Result<()> {
        self.0.flush()?;
        self.0.get_ref().0.sync_data()
    }
}

impl RewriteFs for RealFs {
    fn create(&self, path: &Path) -> io::Result<Box<dyn FsWriter>> {
        let file = File::create(path)?;
        Ok(Box::new(RealWriter(io::BufWriter::with_capacity(
            1 << 20,
            Chunked(file),
        ))))
    }
    #[cfg(target_os = "linux")]
    fn create_streamed(&self, path: &Path) -> io::Result<Box<dyn FsWriter>> {
        Ok(Box::new(super::direct::DirectWriter::create(path)?))
    }
    fn append(&self, path: &Path) -> io::Result<Box<dyn FsWriter>> {
        let file = std::fs::OpenOptions::new().append(true).open(path)?;
        Ok(Box::new(RealWriter(io::BufWriter::new(Chunked(file)))))
    }
    fn open(&self, path: &Path) -> io::Result<Box<dyn Read + Send>> {
        Ok(Box::new(io::BufReader::with_capacity(
            1 << 20,
            File::open(path)?,
        )))
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            if entry.file_type()?.is_file() {
                out.push(entry.file_name().to_string_lossy().into_owned());
            }
        }
        Ok(out)
    }
    fn len(&self, path: &Path) -> io::Result<Option<u64>> {
        match std::fs::metadata(path) {
            Ok(m) => Ok(Some(m.len())),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// A name-space operation not yet made durable by a directory sync.
#[derive(Clone, Debug)]
enum DirOp {
    Link(String, usize),
    Rename(String, String),
    Unlink(String),
}

#[derive(Clone, Debug, Default)]
struct Inode {
    data: Vec<u8>,
    synced: usize,
}

#[derive(Debug, Default)]
struct SimState {
    inodes: Vec<Inode>,
    names: HashMap<String, usize>,
    durable_names: HashMap<String, usize>,
    pending: Vec<DirOp>,
    ops: u64,
    fail_at: Option<u64>,
    failed: bool,
}

impl SimState {
    /// Counts one operation; fails it (and every later one: the process
    /// is considered dead) when it is the armed one.
    fn step(&mut self, what: &str) -> io::Result<()> {
        self.ops += 1;
        if self.failed || self.fail_at == Some(self.ops) {
            self.failed = true;
            return Err(io::Error::other(format!(
                "injected fault at operation {} ({what})",
                self.ops
            )));
        }
        Ok(())
    }

    fn apply(names: &mut HashMap<String, usize>, op: &DirOp) {
        match op {
            DirOp::Link(name, ino) => {
                names.insert(name.clone(), *ino);
            }
            DirOp::Rename(from, to) => {
                if let Some(ino) = names.remove(from) {
                    names.insert(to.clone(), ino);
                }
            }
            DirOp::Unlink(name) => {
                names.remove(name);
            }
        }
    }
}

/// A simulated single-directory file system with crash images and fault
/// injection. Paths are reduced to their file names. Cloning shares it.
#[derive(Clone, Debug, Default)]
pub struct SimFs {
    state: Arc<Mutex<SimState>>,
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn not_found(name: &str) -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, format!("{name}: no such file"))
}

impl SimFs {
    /// An empty file system.
    pub fn new() -> SimFs {
        SimFs::default()
    }

    fn lock(&self) -> MutexGuard<'_, SimState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Operations performed so far.
    pub fn ops(&self) -> u64 {
        self.lock().ops
    }

    /// Fails operation number `at` (counted from the start) and all after.
    pub fn fail_at(&self, at: Option<u64>) {
        let mut s = self.lock();
        s.fail_at = at;
        s.failed = false;
    }

    /// Whether the armed fault has fired.
    pub fn failed(&self) -> bool {
        self.lock().failed
    }

    /// A file system holding what a crash right now could leave: a random
    /// prefix of the name-space operations not yet synced, and for each
    /// file its synced bytes plus a random prefix of the rest.
    pub fn crash_image(&self, seed: u64) -> SimFs {
        let s = self.lock();
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut names = s.durable_names.clone();
        let keep = rng.u64(..(s.pending.len() as u64 + 1).max(1)) as usize;
        for op in &s.pending[..keep] {
            SimState::apply(&mut names, op);
        }
        let mut image = SimState::default();
        for (name, ino) in names {
            let inode = &s.inodes[ino];
            let extra = inode.data.len() - inode.synced;
            let len = inode.synced + rng.u64(..(extra as u64 + 1).max(1)) as usize;
            image.inodes.push(Inode {
                data: inode.data[..len].to_vec(),
                synced: len,
            });
            image.names.insert(name.clone(), image.inodes.len() - 1);
            image.durable_names.insert(name, image.inodes.len() - 1);
        }
        SimFs {
            state: Arc::new(Mutex::new(image)),
        }
    }

    /// Puts `data` at `name`, durably (test set-up).
    pub fn put(&self, name: &str, data: &[u8]) {
        let mut s = self.lock();
        s.inodes.push(Inode {
            data: data.to_vec(),
            synced: data.len(),
        });
        let ino = s.inodes.len() - 1;
        s.names.insert(name.to_string(), ino);
        s.durable_names.insert(name.to_string(), ino);
    }

    /// The current contents of `name`, if it exists.
    pub fn get(&self, name: &str) -> Option<Vec<u8>> {
        let s = self.lock();
        s.names.get(name).map(|&i| s.inodes[i].data.clone())
    }
}

#[derive(Debug)]
struct SimWriter {
    fs: SimFs,
    ino: usize,
}

impl Write for SimWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut s = self.fs.lock();
        s.step("write")?;
        s.inodes[self.ino].data.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl FsWriter for SimWriter {
    fn sync(&mut self) -> io::Result<()> {
        let mut s = self.fs.lock();
        s.step("fsync")?;
        let inode = &mut s.inodes[self.ino];
        inode.synced = inode.data.len();
        Ok(())
    }
}

impl RewriteFs for SimFs {
    fn create(&self, path: &Path) -> io::Result<Box<dyn FsWriter>> {
        let name = file_name(path);
        let mut s = self.lock();
        s.step("create")?;
        s.inodes.push(Inode::default());
        let ino = s.inodes.len() - 1;
        s.names.insert(name.clone(), ino);
        s.pending.push(DirOp::Link(name, ino));
        drop(s);
        Ok(Box::new(SimWriter {
            fs: self.clone(),
            ino,
        }))
    }
    fn append(&self, path: &Path) -> io::Result<Box<dyn FsWriter>> {
        let name = file_name(path);
        let ino = *self
            .lock()
            .names
            .get(&name)
            .ok_or_else(|| not_found(&name))?;
        Ok(Box::new(SimWriter {
            fs: self.clone(),
            ino,
        }))
    }
    fn open(&self, path: &Path) -> io::Result<Box<dyn Read + Send>> {
        let name = file_name(path);
        let s = self.lock();
        let ino = *s.names.get(&name).ok_or_else(|| not_found(&name))?;
        Ok(Box::new(io::Cursor::new(s.inodes[ino].data.clone())))
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let (from, to) = (file_name(from), file_name(to));
        let mut s = self.lock();
        s.step("rename")?;
        let ino = s.names.remove(&from).ok_or_else(|| not_found(&from))?;
        s.names.insert(to.clone(), ino);
        s.pending.push(DirOp::Rename(from, to));
        Ok(())
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        let name = file_name(path);
        let mut s = self.lock();
        s.step("remove")?;
        s.names.remove(&name).ok_or_else(|| not_found(&name))?;
        s.pending.push(DirOp::Unlink(name));
        Ok(())
    }
    fn sync_dir(&self, _dir: &Path) -> io::Result<()> {
        let mut s = self.lock();
        s.step("fsync directory")?;
        let pending = std::mem::take(&mut s.pending);
        for op in &pending {
            SimState::apply(&mut s.durable_names, op);
        }
        Ok(())
    }
    fn list(&self, _dir: &Path) -> io::Result<Vec<String>> {
        let mut names: Vec<String> = self.lock().names.keys().cloned().collect();
        names.sort();
        Ok(names)
    }
    fn len(&self, path: &Path) -> io::Result<Option<u64>> {
        let s = self.lock();
        Ok(s.names
            .get(&file_name(path))
            .map(|&i| s.inodes[i].data.len() as u64))
    }
}

/// A path inside `dir`.
pub fn in_dir(dir: &Path, name: &str) -> PathBuf {
    dir.join(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_larger_than_a_chunk_arrive_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("part");
        let data: Vec<u8> = (0..5 * WRITE_CHUNK_BYTES + 123)
            .map(|i| (i * 7 + i / 251) as u8)
            .collect();
        let mut w = RealFs.create(&path).unwrap();
        w.write_all(&data[..10]).unwrap();
        w.write_all(&data[10..]).unwrap();
        w.sync().unwrap();
        drop(w);
        assert_eq!(std::fs::read(&path).unwrap(), data);
        // A single write call takes at most one chunk.
        let mut c = Chunked(File::create(dir.path().join("c")).unwrap());
        assert_eq!(c.write(&data).unwrap(), WRITE_CHUNK_BYTES);
    }
}
