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
        }
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
    /// log has, so that a listing shows which files are PM mappings.
    pub fn incr_name(&self, generation: u64, kind: IncrKind) -> String {
        match kind {
            IncrKind::File => format!("{}.{generation}.incr", self.name),
            IncrKind::Pm => format!("{}.{generation}.incr.pm", self.name),
        }
    }

    /// The legacy single-log file name for a device kind.
    pub fn legacy_name(&self, kind: IncrKind) -> String {
        match kind {
            IncrKind::File => self.name.clone(),
            IncrKind::Pm => format!("{}.pm", self.name),
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
        let file = self.exists_non_empty(&self.legacy_name(IncrKind::File))?;
        let pm = self.exists_non_empty(&self.legacy_name(IncrKind::Pm))?;
        Ok(match (file, pm) {
            (true, true) => {
                return Err(Error::Config {
                    origin: self.dir.display().to_string(),
                    reason: format!(
                        "both {0} and {0}.pm exist; move the one you do not want away",
                        self.name
                    ),
                })
            }
            (true, false) => Layout::Legacy(IncrEntry {
                file: self.legacy_name(IncrKind::File),
                kind: IncrKind::File,
            }),
            (false, true) => Layout::Legacy(IncrEntry {
                file: self.legacy_name(IncrKind::Pm),
                kind: IncrKind::Pm,
            }),
            (false, false) => Layout::Empty,
        })
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
        if rest.is_empty() || rest == ".pm" || rest == ".manifest.tmp" {
            return true;
        }
        // NAME.<generation>.incr[.pm] and NAME.<generation>.base.<index>
        let mut words = rest.strip_prefix('.').unwrap_or("-").split('.');
        let generation = words.next().is_some_and(|g| g.parse::<u64>().is_ok());
        match (generation, words.next(), words.next(), words.next()) {
            (true, Some("incr"), None | Some("pm"), None) => true,
            (true, Some("base"), Some(i), None) => i.parse::<u32>().is_ok(),
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
        let keep = |f: &str| match manifest {
            Some(m) => m.files().any(|n| n == f),
            None => f == self.legacy_name(IncrKind::File) || f == self.legacy_name(IncrKind::Pm),
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
