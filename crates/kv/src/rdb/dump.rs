//! `dump.rdb`: the persistence of a server with `appendonly no`
//! (`docs/rdb.md`, "dump.rdb").
//!
//! A save writes `temp-<pid>.rdb` front to back, syncs it, renames it over
//! the file's name and syncs the directory: the rename is the switch, so a
//! crash leaves the old file or the new one, each whole. Loading reads the
//! whole file and decodes it with the replica's decoder.

use std::io::{self, Write};
use std::path::Path;

use super::file::{decode, Entry};
use super::produce::{encode, Controls, History, Sink, Snapshot};
use super::Reader;
use crate::keyspace::Keyspace;
use crate::rewrite::fs::{FsWriter, RewriteFs};

const OPCODE_AUX: u8 = 0xfa;

/// A sink writing into a file being saved.
struct FileSink<'a>(&'a mut dyn FsWriter);

impl Sink for FileSink<'_> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.0.write_all(bytes)
    }
}

/// The temporary name a save of this process writes first.
pub fn temp_name() -> String {
    format!("temp-{}.rdb", std::process::id())
}

/// Saves `snapshot` as `dir/name` through a temporary file (see the
/// module's note); returns the keys written. On failure the temporary file
/// is removed and `dir/name` is as it was.
pub fn save(
    fs: &dyn RewriteFs,
    dir: &Path,
    name: &str,
    snapshot: Snapshot,
    controls: &Controls,
) -> Result<u64, String> {
    let temp = dir.join(temp_name());
    let target = dir.join(name);
    let written = (|| -> io::Result<u64> {
        let mut writer = fs.create(&temp)?;
        let keys = encode(snapshot, true, controls, &mut FileSink(&mut *writer))?;
        writer.flush()?;
        writer.sync()?;
        drop(writer);
        fs.rename(&temp, &target)?;
        fs.sync_dir(dir)?;
        Ok(keys)
    })();
    written.map_err(|e| {
        let _ = fs.remove(&temp);
        format!("writing {}: {e}", target.display())
    })
}

/// What loading a file found.
#[derive(Debug, Default)]
pub struct Loaded {
    pub keys_loaded: u64,
    pub keys_expired: u64,
    /// The keys counted as expired (database, key), for the caller to
    /// delete and propagate.
    pub expired: Vec<(usize, Vec<u8>)>,
    /// The replication history its auxiliary fields name.
    pub history: Option<History>,
    /// Function libraries' code, to load after the keys.
    pub libraries: Vec<Vec<u8>>,
}

/// Loads `dir/name` into `keyspace` when it exists (`Ok(None)` when it
/// does not). Keys expired at `now_ms` are counted as expired when
/// `count_expired` (a master) and listed in [`Loaded::expired`]: the
/// server deletes them and puts their DELs into the replication stream
/// before it serves, so replicas that continue from the file's history
/// delete them too, as Redis's master does with the keys it finds expired
/// when it loads. A replica keeps them for its master's DELs.
pub fn load(
    fs: &dyn RewriteFs,
    dir: &Path,
    name: &str,
    keyspace: &mut Keyspace,
    count_expired: bool,
    now_ms: i64,
) -> Result<Option<Loaded>, String> {
    let path = dir.join(name);
    if fs
        .len(&path)
        .map_err(|e| format!("{}: {e}", path.display()))?
        .is_none()
    {
        return Ok(None);
    }
    let bytes = fs
        .read_all(&path)
        .map_err(|e| format!("reading {}: {e}", path.display()))?;
    let mut loaded = load_bytes(&bytes, keyspace, count_expired, now_ms)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    loaded.history = history_of(&leading_aux(&bytes));
    Ok(Some(loaded))
}

/// Loads an RDB payload's keys into `keyspace` and collects its function
/// libraries (a file at start-up, a full sync's payload on a replica);
/// expired keys are counted as in [`load`].
pub fn load_bytes(
    bytes: &[u8],
    keyspace: &mut Keyspace,
    count_expired: bool,
    now_ms: i64,
) -> Result<Loaded, String> {
    let mut loaded = Loaded::default();
    let databases = keyspace.databases();
    decode(bytes, databases, |entry| match entry {
        Entry::Key {
            db,
            key,
            value,
            expire_ms,
        } => {
            keyspace.set(db, &key, value, false);
            if let Some(at) = expire_ms {
                keyspace.set_expire(db, &key, at);
            }
            // The key stays loaded until the caller deletes it.
            if count_expired && expire_ms.is_some_and(|at| at <= now_ms) {
                loaded.keys_expired += 1;
                loaded.expired.push((db, key));
            } else {
                loaded.keys_loaded += 1;
            }
        }
        Entry::Library(code) => loaded.libraries.push(code),
    })
    .map_err(|e| e.to_string())?;
    Ok(loaded)
}

/// The auxiliary fields at the head of an RDB file (Redis writes them all
/// before anything else); stops at the first other opcode or bad field.
pub fn leading_aux(bytes: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    if bytes.len() < 9 {
        return out;
    }
    let mut r = Reader { data: bytes, at: 9 };
    while r.data.get(r.at) == Some(&OPCODE_AUX) {
        r.at += 1;
        let (Some(name), Some(value)) = (r.string(), r.string()) else {
            break;
        };
        out.push((name, value));
    }
    out
}

/// The history named by `repl-id` and `repl-offset` (and
/// `repl-stream-db`), when both are there and well formed.
fn history_of(aux: &[(Vec<u8>, Vec<u8>)]) -> Option<History> {
    let field = |name: &[u8]| {
        aux.iter()
            .find(|(n, _)| n.as_slice() == name)
            .and_then(|(_, v)| std::str::from_utf8(v).ok())
    };
    let replid = field(b"repl-id")?;
    if replid.len() != 40 || !replid.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let offset = field(b"repl-offset")?.parse().ok()?;
    let stream_db = field(b"repl-stream-db")
        .and_then(|d| d.parse().ok())
        .unwrap_or(0);
    Some(History {
        replid: replid.to_string(),
        offset,
        stream_db,
    })
}
