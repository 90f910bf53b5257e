//! Start-up from Redis's append-only file, in its RESP form: a Redis 6
//! `appendonly.aof` in the data directory, or a Redis 7 `appendonlydir`
//! whose manifest names a `.base.aof` and `.incr.aof` files. An RDB base (or
//! RDB preamble, which starts with `REDIS`) is refused with what to do in
//! Redis instead.
//!
//! The import runs once, at the first start: the commands are replayed into
//! the keyspace, written as base parts of generation 1 with an empty
//! incremental log, and only then does a manifest name them (one durable
//! rename). A crash before that leaves the Redis files as they were and the
//! next start imports again (the parts are orphans); after it, the Redis 6
//! file is set aside as `NAME.redis-imported` (never deleted), and a Redis 7
//! directory is left alone, since a manifest now takes precedence.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::dir::AofDir;
use super::manifest::{IncrEntry, IncrKind, Manifest};
use super::pace::Pacer;
use super::worker::{write_parts, Progress};
use crate::aof::replay_resp;
use crate::error::{Error, Result};
use crate::state::{unix_ms, State};

/// The directory Redis 7 keeps its AOF files in (`appenddirname`).
pub const REDIS_DIR_NAME: &str = "appendonlydir";
/// What a Redis 6 file is renamed to once imported.
pub const IMPORTED_SUFFIX: &str = ".redis-imported";
/// The first bytes of every Ferrite wal file.
const WAL_MAGIC: &[u8] = b"FRTWAL";

/// Redis's files to import, in replay order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RedisAof {
    /// A Redis 6 (or Redis 7 without a directory) single file, `NAME`.
    Single(PathBuf),
    /// A Redis 7 directory: base then incremental files, from its manifest.
    Dir(Vec<PathBuf>),
}

impl RedisAof {
    /// The files in replay order.
    pub fn files(&self) -> &[PathBuf] {
        match self {
            RedisAof::Single(path) => std::slice::from_ref(path),
            RedisAof::Dir(files) => files,
        }
    }
}

fn read_head(path: &Path) -> Result<Option<Vec<u8>>> {
    use std::io::Read;
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(Error::Io {
                op: "open",
                path: path.to_path_buf(),
                source,
            })
        }
    };
    let mut head = Vec::with_capacity(8);
    file.take(8)
        .read_to_end(&mut head)
        .map_err(|source| Error::Io {
            op: "read",
            path: path.to_path_buf(),
            source,
        })?;
    Ok(Some(head))
}

/// Whether `path` holds a Redis AOF in RESP form; an error if it holds RDB.
fn is_redis_resp(path: &Path) -> Result<bool> {
    match read_head(path)? {
        Some(head) if head.starts_with(b"REDIS") => Err(Error::RdbAof {
            path: path.to_path_buf(),
        }),
        Some(head) => Ok(head.first() == Some(&b'*') && !head.starts_with(WAL_MAGIC)),
        None => Ok(false),
    }
}

/// Parses a Redis 7 manifest (`file NAME seq N type b|h|i` per line, keys
/// in any order); returns the base and the incremental files in order.
fn parse_redis_manifest(text: &str, manifest: &Path) -> Result<Vec<String>> {
    let bad = |reason: String| Error::ForeignAof {
        path: manifest.to_path_buf(),
        reason,
    };
    let mut base = None;
    let mut incrs = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let words: Vec<&str> = line.split_whitespace().collect();
        let field = |key: &str| {
            words
                .chunks(2)
                .find(|pair| pair[0] == key)
                .and_then(|pair| pair.get(1).copied())
        };
        let (Some(file), Some(kind)) = (field("file"), field("type")) else {
            return Err(bad(format!("line `{line}` has no file or type")));
        };
        if file.contains('/') {
            return Err(bad(format!("file name `{file}` has a path")));
        }
        match kind {
            "b" => base = Some(file.to_string()),
            "i" => incrs.push(file.to_string()),
            // History files are already covered by the base.
            "h" => {}
            other => return Err(bad(format!("unknown file type `{other}`"))),
        }
    }
    Ok(base.into_iter().chain(incrs).collect())
}

/// The Redis AOF in `dir`, if any: a RESP file named `name` (not a Ferrite
/// wal), or a Redis 7 `appendonlydir` with a manifest `name.manifest`.
pub fn find_redis_aof(dir: &Path, name: &str) -> Result<Option<RedisAof>> {
    let single = dir.join(name);
    if is_redis_resp(&single)? {
        return Ok(Some(RedisAof::Single(single)));
    }
    let redis_dir = dir.join(REDIS_DIR_NAME);
    let manifest = redis_dir.join(format!("{name}.manifest"));
    let text = match std::fs::read_to_string(&manifest) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(Error::Io {
                op: "read",
                path: manifest,
                source,
            })
        }
    };
    let mut files = Vec::new();
    for file in parse_redis_manifest(&text, &manifest)? {
        let path = redis_dir.join(&file);
        if file.ends_with(".rdb") {
            return Err(Error::RdbAof { path });
        }
        match read_head(&path)? {
            None => {
                return Err(Error::ForeignAof {
                    path: manifest,
                    reason: format!("names {file}, which does not exist"),
                })
            }
            Some(head) if head.starts_with(b"REDIS") => return Err(Error::RdbAof { path }),
            Some(_) => files.push(path),
        }
    }
    Ok(Some(RedisAof::Dir(files)))
}

/// Replays `source` into `state` (whose keyspace is empty) and writes it as
/// generation 1 of `dir` with an empty incremental log on `kind`; returns
/// the manifest, already durable.
pub fn import(
    state: &mut State,
    dir: &AofDir,
    source: &RedisAof,
    kind: IncrKind,
    threads: usize,
) -> Result<Manifest> {
    let mut commands = 0;
    for path in source.files() {
        let bytes = std::fs::read(path).map_err(|source| Error::Io {
            op: "read",
            path: path.clone(),
            source,
        })?;
        if !bytes.is_empty() {
            commands += replay_resp(state, &bytes, path)?;
        }
    }
    let generation = 1;
    let snapshots = state.keyspace.snapshot(threads);
    let bases = write_parts(
        dir,
        generation,
        snapshots,
        unix_ms(),
        &Arc::new(Progress::default()),
        // Nothing else runs while a start-up imports: full speed.
        Pacer::unpaced(),
    )?;
    let incr = dir.create_incr(generation, kind)?;
    let manifest = Manifest {
        generation,
        bases,
        incrs: vec![IncrEntry { file: incr, kind }],
    };
    dir.write_manifest(&manifest)?;
    tracing::info!(
        "imported {commands} commands from the Redis append-only file {} into {} base parts",
        source
            .files()
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
        manifest.bases.len()
    );
    set_aside_redis_file(dir)?;
    Ok(manifest)
}

/// Renames an imported Redis 6 file `NAME` to `NAME.redis-imported`, so that
/// nothing mistakes it for a log and the orphan clean-up never deletes it.
/// Called after the import's manifest is durable, and at every start with
/// a manifest (a crash may have come between the two).
pub fn set_aside_redis_file(dir: &AofDir) -> Result<()> {
    let path = dir.path(&dir.name);
    match is_redis_resp(&path) {
        Ok(true) | Err(Error::RdbAof { .. }) => {}
        Ok(false) => return Ok(()),
        Err(e) => return Err(e),
    }
    let aside = dir.path(&format!("{}{IMPORTED_SUFFIX}", dir.name));
    dir.fs.rename(&path, &aside).map_err(|source| Error::Io {
        op: "rename",
        path: path.clone(),
        source,
    })?;
    dir.fs.sync_dir(&dir.dir).map_err(|source| Error::Io {
        op: "fsync directory",
        path: dir.dir.clone(),
        source,
    })?;
    tracing::info!(
        "the imported Redis file is now {} (Ferrite no longer reads it)",
        aside.display()
    );
    Ok(())
}
