//! `nodes.conf`, replaced atomically (`docs/cluster.md`): the new table
//! is written to a temporary file in the same directory, synced, renamed
//! over the old one, and the directory synced. A crash at any point
//! leaves either the old file or the new one, never a mixture.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::rewrite::fs::RewriteFs;

/// The temporary name the next table is written under, before its rename.
fn temp_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!("{name}.tmp-{}", std::process::id()))
}

/// The directory `path` is in (`.` for a bare name).
fn dir_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Replaces the file at `path` with `text`, durably and atomically.
pub fn save(fs: &dyn RewriteFs, path: &Path, text: &str) -> io::Result<()> {
    let temp = temp_path(path);
    let mut writer = fs.create(&temp)?;
    writer.write_all(text.as_bytes())?;
    writer.flush()?;
    // The contents must be durable before the name points at them, or a
    // power failure after the rename could leave an empty file.
    writer.sync()?;
    drop(writer);
    fs.rename(&temp, path)?;
    fs.sync_dir(&dir_of(path))
}

/// The file's text, `None` when it does not exist or is empty (a new
/// node). Removes temporary files an interrupted [`save`] left behind.
pub fn load(fs: &dyn RewriteFs, path: &Path) -> io::Result<Option<String>> {
    let dir = dir_of(path);
    if let Some(name) = path.file_name().map(|n| n.to_string_lossy().into_owned()) {
        let prefix = format!("{name}.tmp-");
        for stray in fs
            .list(&dir)?
            .into_iter()
            .filter(|f| f.starts_with(&prefix))
        {
            fs.remove(&dir.join(stray))?;
        }
    }
    match fs.len(path)? {
        None | Some(0) => Ok(None),
        Some(_) => {
            let bytes = fs.read_all(path)?;
            String::from_utf8(bytes).map(Some).map_err(|_| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{} is not UTF-8 text", path.display()),
                )
            })
        }
    }
}
