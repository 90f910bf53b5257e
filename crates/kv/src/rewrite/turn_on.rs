//! The data directory's side of `CONFIG SET appendonly yes` at run time
//! (`docs/aof-runtime.md` has the steps and the crash argument).
//!
//! The new incremental log is created here but named by no manifest: only
//! the first rewrite's manifest, written once its base parts are durable,
//! names it, together with them. Until then the directory's old manifest
//! (or legacy log) still describes the dataset it described, and the new
//! files are orphans that the next start removes.

use super::dir::{AofDir, Layout};
use super::manifest::{IncrEntry, IncrKind, Manifest};
use crate::error::Result;

/// A log being turned on: what the directory held, and the manifest the
/// first rewrite starts from.
#[derive(Clone, Debug)]
pub struct TurnOn {
    /// The dataset the directory described before (its manifest, or its
    /// legacy log as a manifest without base parts); `None` for an empty
    /// directory. Its files go once the first rewrite's manifest is
    /// durable.
    pub replaced: Option<Manifest>,
    /// Generation `g+1`, no base parts, the new incremental log. Never
    /// written to disk: the first rewrite's manifest adds its parts.
    pub started: Manifest,
}

impl TurnOn {
    /// The new incremental log.
    pub fn incr(&self) -> Option<&IncrEntry> {
        self.started.incrs.last()
    }
}

/// Steps 1 and 2: reads what the directory holds, removes the files no
/// manifest names (an earlier turn-on that was stopped or crashed), and
/// creates the next generation's empty incremental log on a `kind`
/// device (or, with `None`, the kind of the directory's current log, else
/// a file), durable with its directory entry.
pub fn begin(dir: &AofDir, kind: Option<IncrKind>) -> Result<TurnOn> {
    let replaced = match dir.layout()? {
        Layout::Empty => None,
        Layout::Legacy(entry) => Some(Manifest {
            generation: 0,
            bases: vec![],
            incrs: vec![entry],
        }),
        Layout::Manifest(m) => Some(m),
    };
    dir.remove_orphans(replaced.as_ref())?;
    let current_kind = replaced
        .as_ref()
        .and_then(|m| m.incrs.last())
        .map(|i| i.kind);
    let kind = kind.or(current_kind).unwrap_or(IncrKind::File);
    let generation = replaced.as_ref().map_or(0, |m| m.generation) + 1;
    let file = dir.create_incr(generation, kind)?;
    Ok(TurnOn {
        replaced,
        started: Manifest {
            generation,
            bases: vec![],
            incrs: vec![IncrEntry { file, kind }],
        },
    })
}

/// Undoes [`begin`] (the first rewrite was stopped, or the log could not
/// be opened): removes every file of ours the old dataset does not name,
/// which leaves the directory as it was.
pub fn abandon(dir: &AofDir, turn_on: &TurnOn) -> Result<Vec<String>> {
    dir.remove_orphans(turn_on.replaced.as_ref())
}

/// Step 5's last part, once `done` (the first rewrite's manifest) is
/// durable: removes the files of the old dataset that `done` does not
/// name. A crash before leaves them as orphans of `done`, which the next
/// start removes.
pub fn finish(dir: &AofDir, turn_on: &TurnOn, done: &Manifest) -> Result<Vec<String>> {
    match &turn_on.replaced {
        Some(old) => dir.remove_replaced(old, done),
        None => Ok(vec![]),
    }
}
