//! The poison flag every backend carries: set by the first failed sync,
//! checked by every later write.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

use crate::error::{Error, Result};

/// Remembers the first durability failure of a device.
#[derive(Debug, Default)]
pub(crate) struct Poison {
    set: AtomicBool,
    cause: Mutex<Option<String>>,
}

impl Poison {
    /// Fails with [`Error::Poisoned`] once a failure was recorded.
    #[inline]
    pub(crate) fn check(&self, path: &Path) -> Result<()> {
        if !self.set.load(Ordering::Acquire) {
            return Ok(());
        }
        Err(Error::Poisoned {
            path: path.to_path_buf(),
            cause: self.cause().unwrap_or_default(),
        })
    }

    /// Records `error` as the cause (the first one wins) and returns it.
    pub(crate) fn poison(&self, error: Error) -> Error {
        let mut cause = self.cause.lock().unwrap_or_else(PoisonError::into_inner);
        if cause.is_none() {
            *cause = Some(error.to_string());
            tracing::error!("device poisoned: {error}");
        }
        self.set.store(true, Ordering::Release);
        error
    }

    /// The recorded cause, if any.
    pub(crate) fn cause(&self) -> Option<String> {
        self.cause
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}
