//! CPU affinity, as Redis's `server_cpulist` and `aof_rewrite_cpulist`
//! configure it.
//!
//! A list is Redis's syntax: comma-separated items, each a CPU (`3`), a
//! range (`0-7`) or a range with a stride (`0-7:2` = 0, 2, 4, 6). An empty
//! list leaves the affinity alone.
//!
//! `server_cpulist` pins the event loop when it starts. Threads started
//! from the loop later would inherit that set, so the rewrite's threads
//! set their own: `aof_rewrite_cpulist`, or else the set the process
//! started with ([`original`]). The log's threads start before the loop
//! pins itself.

use std::sync::OnceLock;

use rustix::thread::CpuSet;

/// Parses a Redis CPU list; `Ok(None)` for an empty one.
pub fn parse(text: &str) -> Result<Option<Vec<usize>>, String> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    let number = |s: &str| -> Result<usize, String> {
        s.parse::<usize>()
            .ok()
            .filter(|&n| n < CpuSet::MAX_CPU)
            .ok_or_else(|| format!("bad CPU {s:?} (0 to {})", CpuSet::MAX_CPU - 1))
    };
    let mut cpus = Vec::new();
    for item in text.split(',') {
        let (range, stride) = match item.split_once(':') {
            Some((range, stride)) => (range, number(stride)?),
            None => (item, 1),
        };
        let (first, last) = match range.split_once('-') {
            Some((a, b)) => (number(a)?, number(b)?),
            None => {
                let cpu = number(range)?;
                (cpu, cpu)
            }
        };
        if stride == 0 || first > last {
            return Err(format!("bad CPU range {item:?}"));
        }
        cpus.extend((first..=last).step_by(stride));
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(Some(cpus))
}

/// The CPU set the process started with, read on first use (call it
/// before pinning anything).
pub fn original() -> Option<&'static CpuSet> {
    static ORIGINAL: OnceLock<Option<CpuSet>> = OnceLock::new();
    ORIGINAL
        .get_or_init(|| rustix::thread::sched_getaffinity(None).ok())
        .as_ref()
}

/// Pins the calling thread to `cpus`.
pub fn pin_current_thread(cpus: &[usize]) -> std::io::Result<()> {
    let mut set = CpuSet::new();
    for &cpu in cpus {
        set.set(cpu);
    }
    set_current_thread(&set)
}

fn set_current_thread(set: &CpuSet) -> std::io::Result<()> {
    rustix::thread::sched_setaffinity(None, set).map_err(std::io::Error::from)
}

/// Gives the calling thread `cpus` if given, else the process's original
/// set; logs rather than fails (affinity is a placement hint).
pub fn place_current_thread(cpus: Option<&[usize]>, what: &str) {
    let result = match cpus {
        Some(cpus) => pin_current_thread(cpus),
        None => original().map_or(Ok(()), set_current_thread),
    };
    if let Err(e) = result {
        tracing::warn!("cannot set the CPU affinity of the {what}: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_cpu_lists_parse() {
        assert_eq!(parse(""), Ok(None));
        assert_eq!(parse("3"), Ok(Some(vec![3])));
        assert_eq!(parse("0-3"), Ok(Some(vec![0, 1, 2, 3])));
        assert_eq!(parse("0-7:2"), Ok(Some(vec![0, 2, 4, 6])));
        assert_eq!(parse("5,1-2,1"), Ok(Some(vec![1, 2, 5])));
        for bad in ["x", "1-", "-1", "3-1", "0-4:0", "1,,2", "0-3:x", "99999"] {
            assert!(parse(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn a_thread_is_pinned_and_placed_back() {
        let original = original().copied();
        let (pinned, placed) = std::thread::spawn(move || {
            let first = (0..CpuSet::MAX_CPU)
                .find(|&c| original.is_some_and(|s| s.is_set(c)))
                .unwrap_or(0);
            pin_current_thread(&[first]).unwrap();
            let pinned = rustix::thread::sched_getaffinity(None).unwrap();
            place_current_thread(None, "test thread");
            let placed = rustix::thread::sched_getaffinity(None).unwrap();
            (
                (pinned.count(), pinned.is_set(first)),
                placed == original.unwrap(),
            )
        })
        .join()
        .unwrap();
        assert_eq!(pinned, (1, true));
        assert!(placed, "the original set is restored");
    }
}
