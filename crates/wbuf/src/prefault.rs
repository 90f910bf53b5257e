//! Faulting the slots' pages in ahead of the writers. The first store to a
//! page of a freshly mapped region takes a page fault to map it (the file's
//! space is allocated at creation, not its page tables), which a writer
//! would pay on its acknowledgement path for the first pass over the
//! buffer. A helper
//! thread walks the data area once at open, in the order writers take free
//! slots, with the kernel's populate-write advice, which changes no byte,
//! so writers may store to the same pages meanwhile.

use std::sync::Arc;
use std::thread::JoinHandle;

use ferrite_pmem::PmemMedium;

use crate::buffer::{lock, Inner};

/// Bytes faulted in per step; between steps the thread checks for
/// shutdown.
const STEP: usize = 4 << 20;

/// Starts the helper, where the medium has pages to fault in.
pub(crate) fn start<M: PmemMedium + 'static>(inner: &Arc<Inner<M>>) -> Option<JoinHandle<()>> {
    if !inner.pm.populates() {
        return None;
    }
    let worker = Arc::clone(inner);
    std::thread::Builder::new()
        .name("wbuf-prefault".into())
        .spawn(move || run(&worker))
        .ok()
}

fn run<M: PmemMedium>(inner: &Inner<M>) {
    let start = inner.geometry.data_offset as usize;
    let end = inner.geometry.region_len() as usize;
    let mut at = start;
    while at < end {
        if lock(&inner.state).shutdown {
            return;
        }
        let n = STEP.min(end - at);
        match inner.pm.prefault(at, n) {
            Ok(true) => {}
            // No populate-write advice here: writers fault pages as they go.
            Ok(false) => return,
            Err(e) => {
                tracing::debug!("prefaulting the write buffer stopped: {e}");
                return;
            }
        }
        at += n;
    }
}
