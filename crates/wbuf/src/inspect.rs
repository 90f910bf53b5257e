//! What a buffer's PM file holds, read from its superblock without mapping
//! or recovering it: enough for an owner to tell whether a file still has
//! writes staged in a buffer it is not about to open.

use std::fs::File;
use std::io::{ErrorKind, Read};
use std::path::Path;

use crate::layout::{decode_superblock, Mark, Superblock, MARK_OFFSET};

/// The state of a PM file as a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BufferState {
    /// No such file.
    Missing,
    /// A file with no buffer created in it yet: nothing was ever staged.
    Empty,
    /// A buffer whose last close destaged everything: its file is whole.
    Clean,
    /// A buffer not closed clean (it may hold writes its file lacks), or
    /// bytes that are not a valid buffer (which cannot be ruled out).
    Unclean,
}

/// Reads the superblock of the PM file `pm_path`.
pub fn inspect(pm_path: &Path) -> std::io::Result<BufferState> {
    let file = match File::open(pm_path) {
        Ok(file) => file,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(BufferState::Missing),
        Err(e) => return Err(e),
    };
    let len = file.metadata()?.len();
    let mut head = Vec::with_capacity(MARK_OFFSET + 8);
    file.take((MARK_OFFSET + 8) as u64).read_to_end(&mut head)?;
    if head.iter().all(|&b| b == 0) {
        return Ok(BufferState::Empty);
    }
    match decode_superblock(&head, len) {
        Ok(Superblock::Absent) => Ok(BufferState::Empty),
        Ok(Superblock::Valid(_)) => {
            let mut word = [0u8; 8];
            match head.get(MARK_OFFSET..MARK_OFFSET + 8) {
                Some(bytes) => word.copy_from_slice(bytes),
                None => return Ok(BufferState::Unclean),
            }
            if Mark::decode(u64::from_le_bytes(word)).clean {
                Ok(BufferState::Clean)
            } else {
                Ok(BufferState::Unclean)
            }
        }
        Err(_) => Ok(BufferState::Unclean),
    }
}
