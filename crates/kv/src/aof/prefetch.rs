//! Reading incremental logs ahead at start-up.
//!
//! The log releases what a sync made durable from the page cache
//! (`aof-release-log-cache`), so a restart finds its incremental logs on
//! the device, not in memory, and replaying them one record at a time
//! would wait for each read. While the base parts load, a thread asks the
//! kernel to read the logs ahead (`posix_fadvise(WILLNEED)`, a stretch at
//! a time, in load order), so the device works through them while the
//! parts are decoded and the replay finds them in memory. Advice only: a
//! failure changes nothing but the time the replay takes.

use std::fs::File;
use std::num::NonZeroU64;
use std::path::PathBuf;

use rustix::fs::Advice;

/// How much one piece of advice covers.
const PREFETCH_STEP_BYTES: u64 = 64 << 20;

/// Starts reading `logs` ahead, in order, on a thread of its own that ends
/// when it has asked for all of them; returns at once.
pub fn prefetch_logs(logs: Vec<PathBuf>) {
    if logs.is_empty() {
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("log-prefetch".into())
        .spawn(move || logs.iter().for_each(prefetch));
    if let Err(e) = spawned {
        tracing::debug!("log prefetch thread not started: {e}");
    }
}

fn prefetch(path: &PathBuf) {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) => {
            tracing::debug!(path = %path.display(), "log prefetch: {e}");
            return;
        }
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let mut offset = 0;
    while offset < len {
        let step = PREFETCH_STEP_BYTES.min(len - offset);
        let advised = NonZeroU64::new(step)
            .map(|step| rustix::fs::fadvise(&file, offset, Some(step), Advice::WillNeed));
        if let Some(Err(e)) = advised {
            tracing::debug!(path = %path.display(), "log prefetch: {e}");
            return;
        }
        offset += step;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefetching_reads_nothing_wrong_and_survives_missing_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let empty = dir.path().join("empty.incr");
        let small = dir.path().join("small.incr");
        std::fs::write(&empty, b"").expect("write");
        let bytes: Vec<u8> = (0..100_000u32).map(|i| (i % 253) as u8).collect();
        std::fs::write(&small, &bytes).expect("write");
        // Synchronously, on this thread: a missing file, an empty one and
        // one shorter than a step each return.
        for path in [
            dir.path().join("missing.incr"),
            empty.clone(),
            small.clone(),
        ] {
            prefetch(&path);
        }
        assert_eq!(std::fs::read(&small).expect("read"), bytes);
        assert!(std::fs::read(&empty).expect("read").is_empty());
        // And on its own thread, which returns at once.
        prefetch_logs(vec![small.clone(), dir.path().join("missing.incr")]);
        prefetch_logs(Vec::new());
        assert_eq!(std::fs::read(&small).expect("read"), bytes);
    }
}
