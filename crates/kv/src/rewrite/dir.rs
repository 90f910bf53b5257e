//! The data directory as a state machine: which files exist, which the
//! manifest names, and the order in which a rewrite changes them so that a
//! crash at any point leaves a directory that loads exactly (the table of
//! states is in `docs/kv.md`).
//!
//! A rewrite of generation `g + 1` from a manifest `M` of generation `g`:
//!
//! 1. [`AofDir::start`]: create the empty incremental log `NAME.g+1.incr`
//!    (`NAME.g+1.incr.pm` on persistent memory),
//!    sync it and the directory, then replace the manifest with `M1` = `M`
//!    plus that log. Only then does the server switch its log to it, so
//!    every command in it is named by a durable manifest.
//! 2. Workers write `NAME.g+1.base.i`, sync each, then sync the directory
//!    (`worker::write_parts`). No manifest names them yet.
//! 3. [`AofDir::finish`]: replace the manifest with `M2` = the new parts
//!    plus the new log. The rewrite is done once `M2` is durable.
//! 4. [`AofDir::remove_replaced`], after the rewrite is reported done:
//!    remove the files `M1` named that `M2` does not, then sync the
//!    directory. No durable manifest names them any more, so a crash or a
//!    failure here only leaves orphans.
//!
//! Replacing the manifest is always: write `NAME.manifest.tmp`, sync it,
//! rename it over `NAME.manifest`, sync the directory. Files with the
//! directory's prefix that the manifest does not name (temp files, parts
//! of an unfinished rewrite, logs of a superseded manifest) are orphans,
//! removed by [`AofDir::remove_orphans`] at start-up.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::fs::RewriteFs;
use super::manifest::{BaseEntry, IncrEntry, IncrKind, Manifest};
use crate::error::{Error, Result};

/// A data directory's AOF files, reached through a [`RewriteFs`].
#[derive(Clone, Debug)]
pub struct AofDir {
    /// The file system.
    pub fs: Arc<dyn RewriteFs>,
    /// The data directory.
    pub dir: PathBuf,
    /// `appendfilename`: every file of the AOF starts with it.
    pub name: String,
    /// Where the buffers of logs on write buffers live (`log-wbuf-dir`;
    /// the data directory unless [`AofDir::with_wbuf_dir`] says otherwise).
    pub wbuf_dir: PathBuf,
}

/// What start-up finds in a data directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Layout {
    /// No log and no manifest: a new server.
    Empty,
    /// A single log from before manifests (`NAME` or `NAME.pm`).
    Legacy(IncrEntry),
    /// A manifest (every file it names exists).
    Manifest(Manifest),
}

impl AofDir {
    /// The AOF files named `name*` in `dir`.
    pub fn new(fs: Arc<dyn RewriteFs>, dir: &Path, name: &str) -> AofDir {
        AofDir {
            fs,
            dir: dir.to_path_buf(),
            name: name.to_string(),
            wbuf_dir: dir.to_path_buf(),
        }
    }

    /// The same directory with the logs' write buffers in `wbuf_dir`.
    pub fn with_wbuf_dir(mut self, wbuf_dir: PathBuf) -> AofDir {
        self.wbuf_dir = wbuf_dir;
        self
    }

    /// The buffer file of the write-buffer log `file`.
    pub fn wbuf_path(&self, file: &str) -> PathBuf {
        crate::aof::wbuf_path(&self.wbuf_dir, Path::new(file))
    }

    /// Path of file `file` in the directory.
    pub fn path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }

    /// The manifest's file name.
    pub fn manifest_name(&self) -> String {
        format!("{}.manifest", self.name)
    }

    /// File name of base part `index` of generation `generation`.
    pub fn base_name(&self, generation: u64, index: usize) -> String {
        format!("{}.{generation}.base.{index}", self.name)
    }

    /// File name of the incremental log of generation `generation` on a
    /// `kind` device: `.pm` at the end on persistent memory, as the legacy
    /// log has, so that a listing shows which files are PM mappings;
    /// `.wbuf` behind a write buffer (whose buffer adds `.pm` to that).
    pub fn incr_name(&self, generation: u64, kind: IncrKind) -> String {
        match kind {
            IncrKind::File => format!("{}.{generation}.incr", self.name),
            IncrKind::Pm => format!("{}.{generation}.incr.pm", self.name),
            IncrKind::Wbuf => format!("{}.{generation}.incr.wbuf", self.name),
        }
    }

    /// The legacy single-log file name for a device kind.
    pub fn legacy_name(&self, kind: IncrKind) -> String {
        match kind {
            IncrKind::File => self.name.clone(),
            IncrKind::Pm => format!("{}.pm", self.name),
            IncrKind::Wbuf => format!("{}.wbuf", self.name),
        }
    }

    fn io_err<'a>(
        &'a self,
        op: &'static str,
        file: &'a str,
    ) -> impl FnOnce(std::io::Error) -> Error + 'a {
        move |source| Error::Io {
            op,
            path: self.path(file),
            source,
        }
    }

    fn exists_non_empty(&self, file: &str) -> Result<bool> {
        let len = self
            .fs
            .len(&self.path(file))
            .map_err(self.io_err("stat", file))?;
        Ok(len.is_some_and(|l| l > 0))
    }

    /// Reads the manifest, if there is one, and checks that every file it
    /// names exists.
    pub fn read_manifest(&self) -> Result<Option<Manifest>> {
        let name = self.manifest_name();
        let path = self.path(&name);
        if self
            .fs
            .len(&path)
            .map_err(self.io_err("stat", &name))?
            .is_none()
        {
            return Ok(None);
        }
        let bytes = self
            .fs
            .read_all(&path)
            .map_err(self.io_err("read", &name))?;
        let manifest = Manifest::decode(&bytes).map_err(|e| Error::BadManifest {
            path: path.clone(),
            offset: e.offset,
            reason: e.reason,
        })?;
        for file in manifest.files() {
            if self
                .fs
                .len(&self.path(file))
                .map_err(self.io_err("stat", file))?
                .is_none()
            {
                return Err(Error::MissingFile {
                    manifest: path,
                    file: file.to_string(),
                });
            }
        }
        Ok(Some(manifest))
    }

    /// What the directory holds.
    pub fn layout(&self) -> Result<Layout> {
        if let Some(manifest) = self.read_manifest()? {
            return Ok(Layout::Manifest(manifest));
        }
        // A write buffer's log counts as soon as its file exists: its
        // records may all still be in the buffer.
        let wbuf_name = self.legacy_name(IncrKind::Wbuf);
        let wbuf = self
            .fs
            .len(&self.path(&wbuf_name))
            .map_err(self.io_err("stat", &wbuf_name))?
            .is_some();
        let mut found = Vec::new();
        for (present, kind) in [
            (
                self.exists_non_empty(&self.legacy_name(IncrKind::File))?,
                IncrKind::File,
            ),
            (
                self.exists_non_empty(&self.legacy_name(IncrKind::Pm))?,
                IncrKind::Pm,
            ),
            (wbuf, IncrKind::Wbuf),
        ] {
            if present {
                found.push(IncrEntry {
                    file: self.legacy_name(kind),
                    kind,
                });
            }
        }
        match found.as_slice() {
            [] => Ok(Layout::Empty),
            [one] => Ok(Layout::Legacy(one.clone())),
            [a, b, ..] => Err(Error::Config {
                origin: self.dir.display().to_string(),
                reason: format!(
                    "both {} and {} exist; move the one you do not want away",
                    a.file, b.file
                ),
            }),
        }
    }

    /// Replaces the manifest atomically: temp file, sync, rename, sync of
    /// the directory. When this returns `Ok`, `manifest` is durable.
    pub fn write_manifest(&self, manifest: &Manifest) -> Result<()> {
        let tmp = format!("{}.tmp", self.manifest_name());
        let final_name = self.manifest_name();
        let mut out = self
            .fs
            .create(&self.path(&tmp))
            .map_err(self.io_err("create", &tmp))?;
        out.write_all(&manifest.encode())
            .map_err(self.io_err("write", &tmp))?;
        out.sync().map_err(self.io_err("fsync", &tmp))?;
        drop(out);
        self.fs
            .rename(&self.path(&tmp), &self.path(&final_name))
            .map_err(self.io_err("rename", &tmp))?;
        self.fs
            .sync_dir(&self.dir)
            .map_err(self.io_err("fsync directory", &final_name))
    }

    /// Whether `file` is one of this AOF's files (so ours to clean).
    fn is_ours(&self, file: &str) -> bool {
        let Some(rest) = file.strip_prefix(&self.name) else {
            return false;
        };
        if [".pm", ".manifest.tmp", ".wbuf", ".wbuf.pm"].contains(&rest) || rest.is_empty() {
            return true;
        }
        // NAME.<generation>.incr[.pm], NAME.<generation>.incr.wbuf[.pm]
        // (a write buffer's log and its buffer) and
        // NAME.<generation>.base.<index>
        let mut words = rest.strip_prefix('.').unwrap_or("-").split('.');
        let generation = words.next().is_some_and(|g| g.parse::<u64>().is_ok());
        match (
            generation,
            words.next(),
            words.next(),
            words.next(),
            words.next(),
        ) {
            (true, Some("incr"), None | Some("pm"), None, None) => true,
            (true, Some("incr"), Some("wbuf"), None | Some("pm"), None) => true,
            (true, Some("base"), Some(i), None, None) => i.parse::<u32>().is_ok(),
            _ => false,
        }
    }

    /// Removes this AOF's files that `manifest` does not name (with no
    /// manifest, everything but the legacy logs). Returns what it removed.
    pub fn remove_orphans(&self, manifest: Option<&Manifest>) -> Result<Vec<String>> {
        let listed = self.fs.list(&self.dir).map_err(|source| Error::Io {
            op: "list",
            path: self.dir.clone(),
            source,
        })?;
        let named = |f: &str| match manifest {
            Some(m) => m.files().any(|n| n == f),
            None => [IncrKind::File, IncrKind::Pm, IncrKind::Wbuf]
                .iter()
                .any(|&kind| f == self.legacy_name(kind)),
        };
        // A write buffer's buffer stays with its log (when both are here).
        let keep = |f: &str| {
            named(f)
                || f.strip_suffix(".pm")
                    .is_some_and(|log| log.ends_with(".wbuf") && named(log))
        };
        let mut removed = Vec::new();
        for file in listed {
            if self.is_ours(&file) && !keep(&file) {
                self.fs
                    .remove(&self.path(&file))
                    .map_err(self.io_err("remove", &file))?;
                removed.push(file);
            }
        }
        if !removed.is_empty() {
            self.fs
                .sync_dir(&self.dir)
                .map_err(self.io_err("fsync directory", &self.name))?;
            tracing::info!("removed files no manifest names: {}", removed.join(", "));
        }
        Ok(removed)
    }

    /// Step 1 of a rewrite: the next generation's empty incremental log,
    /// durable, and a durable manifest naming it after `current`'s files.
    /// The caller switches its log to the returned manifest's last
    /// incremental log only after this returned `Ok`.
    pub fn start(&self, current: &Manifest, kind: IncrKind) -> Result<Manifest> {
        let generation = current.generation + 1;
        let incr = self.create_incr(generation, kind)?;
        let mut next = current.clone();
        next.generation = generation;
        next.incrs.push(IncrEntry { file: incr, kind });
        self.write_manifest(&next)?;
        Ok(next)
    }

    /// Creates the empty incremental log of `generation`, durable with its
    /// directory entry; returns its name.
    pub fn create_incr(&self, generation: u64, kind: IncrKind) -> Result<String> {
        let incr = self.incr_name(generation, kind);
        if kind == IncrKind::Wbuf {
            // The buffer exists before its log does, so that a log whose
            // buffer is missing is known to have lost it (`aof::wbuf_log`).
            self.create_wbuf(&incr)?;
        }
        let mut out = self
            .fs
            .create(&self.path(&incr))
            .map_err(self.io_err("create", &incr))?;
        out.sync().map_err(self.io_err("fsync", &incr))?;
        drop(out);
        self.fs
            .sync_dir(&self.dir)
            .map_err(self.io_err("fsync directory", &incr))?;
        Ok(incr)
    }

    /// Step 3: the manifest naming `bases` and `started`'s last log becomes
    /// durable. The files only `started` named stay until
    /// [`AofDir::remove_replaced`].
    pub fn finish(&self, started: &Manifest, bases: Vec<BaseEntry>) -> Result<Manifest> {
        let last = started
            .incrs
            .last()
            .cloned()
            .ok_or_else(|| Error::Rewrite {
                reason: "the started manifest names no incremental log".into(),
            })?;
        let done = Manifest {
            generation: started.generation,
            bases,
            incrs: vec![last],
        };
        self.write_manifest(&done)?;
        Ok(done)
    }

    /// Creates the empty buffer of the write-buffer log `file`, durable
    /// with its directory entry.
    fn create_wbuf(&self, file: &str) -> Result<()> {
        let buffer = self.wbuf_path(file);
        let io = |op: &'static str, path: &Path| {
            let path = path.to_path_buf();
            move |source| Error::Io { op, path, source }
        };
        let mut out = self.fs.create(&buffer).map_err(io("create", &buffer))?;
        out.sync().map_err(io("fsync", &buffer))?;
        drop(out);
        self.fs
            .sync_dir(&self.wbuf_dir)
            .map_err(io("fsync directory", &self.wbuf_dir))
    }

    /// Removes the buffer of the write-buffer log `file` (no longer named
    /// by a durable manifest), if it exists.
    fn remove_wbuf(&self, file: &str) -> Result<()> {
        let buffer = self.wbuf_path(file);
        let io = |op: &'static str| {
            let path = buffer.clone();
            move |source| Error::Io { op, path, source }
        };
        if self.fs.len(&buffer).map_err(io("stat"))?.is_some() {
            self.fs.remove(&buffer).map_err(io("remove"))?;
        }
        Ok(())
    }

    /// Step 4, once `done` is durable: removes the files `started` named
    /// that `done` does not, then syncs the directory. Returns their names.
    /// Later generations never reuse these names, so this may run while
    /// the next rewrite starts.
    pub fn remove_replaced(&self, started: &Manifest, done: &Manifest) -> Result<Vec<String>> {
        let old: Vec<String> = started
            .files()
            .filter(|f| !done.files().any(|n| n == *f))
            .map(str::to_string)
            .collect();
        for file in &old {
            self.fs
                .remove(&self.path(file))
                .map_err(self.io_err("remove", file))?;
            if started
                .incrs
                .iter()
                .any(|i| i.file == *file && i.kind == IncrKind::Wbuf)
            {
                self.remove_wbuf(file)?;
            }
        }
        if !old.is_empty() {
            self.fs
                .sync_dir(&self.dir)
                .map_err(self.io_err("fsync directory", &self.name))?;
        }
        Ok(old)
    }

    /// Removes the parts of a failed rewrite (best effort: what remains is
    /// an orphan, removed at the next start).
    pub fn abandon(&self, generation: u64, parts: usize) {
        for i in 0..parts {
            let _ = self.fs.remove(&self.path(&self.base_name(generation, i)));
        }
    }
}
