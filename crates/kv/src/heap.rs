//! The server's heap: glibc's malloc with one arena and transparent huge
//! pages, set through `GLIBC_TUNABLES` by re-executing the process once at
//! start (glibc reads its tunables only when a program starts).
//!
//! Why (docs/kv.md, "The heap"):
//! - **One arena.** Base parts are decoded by loader threads, so with
//!   glibc's per-thread arenas every loaded value lives in a loader's
//!   arena. The event loop allocates in the main arena, so each overwrite
//!   of a loaded key freed memory the loop never reuses: after a restart
//!   that replayed a log of overwrites, the heap held the dataset twice
//!   (1M x 1 KiB: 1988 MiB resident against 1097 with one arena).
//! - **Huge pages.** Values are separate allocations spread over the heap;
//!   a rewrite worker or a replay reading them in hash order missed the TLB
//!   on nearly every one. Ferrite does not fork, so unlike Redis it has no
//!   copy-on-write of 2 MiB pages to fear.
//!
//! An operator who sets `glibc.malloc.arena_max` or `glibc.malloc.hugetlb`
//! in `GLIBC_TUNABLES` keeps exactly that environment.
//!
//! **glibc 2.36 takes `hugetlb=1` only some of the time.** It reads the
//! kernel's THP mode (23 bytes, `always [madvise] never\n`) into a 24-byte
//! stack buffer and compares it with `strcmp` without terminating it, so
//! the mode matches only when the byte after it happens to be zero (later
//! glibc terminates the buffer). That byte is stack garbage that moves with
//! address-space randomisation: 2 to 4 starts in 5 here got no huge pages
//! and no `madvise` at all. So when the kernel's mode is `madvise`, the
//! re-executed process checks that its heap is advised and, if not,
//! re-executes again, up to [`MAX_EXECS`] times in all.

use std::ffi::OsString;
use std::sync::atomic::{AtomicBool, Ordering};

use ferrite_host::HUGE_PAGE;

/// Whether [`tune`] set this process's heap up in huge pages (then
/// [`LoadPages`] applies).
static HUGE_HEAP: AtomicBool = AtomicBool::new(false);

/// What Ferrite adds to `GLIBC_TUNABLES`.
pub const TUNABLES: &str = "glibc.malloc.arena_max=1:glibc.malloc.hugetlb=1";
/// Set in the re-executed process, so it knows the tunables are its own:
/// how many times the process has been re-executed with them.
const MARKER: &str = "FERRITE_MALLOC_TUNED";
/// Re-executions allowed for glibc to take the huge-page tunable (see the
/// module's notes): at the 2-in-5 chance of failure seen here, all fail
/// about once in 2 million starts; each costs a few milliseconds.
pub const MAX_EXECS: u32 = 16;
const KEYS: [&str; 2] = ["glibc.malloc.arena_max", "glibc.malloc.hugetlb"];

/// How the heap of this process is set up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Heap {
    /// Ferrite's tunables are in effect (this process was re-executed).
    Tuned {
        /// `GLIBC_TUNABLES` as the process has it.
        tunables: String,
        /// How many executions it took, 1 when the first had its heap
        /// advised (or the kernel's mode is not `madvise`).
        execs: u32,
        /// Whether the heap is advised for huge pages: false only if the
        /// kernel's mode is `madvise` and glibc never took the tunable.
        huge_heap: bool,
    },
    /// The environment already named one of the keys; left as it was.
    Operator(String),
    /// Not glibc on Linux: nothing to tune.
    Untouched,
    /// The re-execution failed; the process goes on with glibc's defaults.
    Failed(String),
}

impl Heap {
    /// Logs [`Heap::describe`]: a warning if the re-execution failed.
    pub fn log(&self) {
        match self {
            Heap::Failed(_)
            | Heap::Tuned {
                huge_heap: false, ..
            } => tracing::warn!("{}", self.describe()),
            _ => tracing::info!("{}", self.describe()),
        }
    }

    /// One line for the start-up log.
    pub fn describe(&self) -> String {
        match self {
            Heap::Tuned {
                tunables,
                execs,
                huge_heap: true,
            } => format!(
                "heap: glibc malloc with one arena and transparent huge pages \
                 (GLIBC_TUNABLES={tunables}; huge pages {}; taken at execution {execs})",
                thp_mode()
            ),
            Heap::Tuned {
                tunables,
                execs,
                huge_heap: false,
            } => format!(
                "heap: glibc malloc with one arena, but without huge pages: glibc did not \
                 take glibc.malloc.hugetlb=1 in {execs} executions (GLIBC_TUNABLES={tunables}; \
                 a glibc 2.36 bug reads the kernel's mode unterminated); rewrites and \
                 restarts will be slower"
            ),
            Heap::Operator(t) => {
                format!("heap: GLIBC_TUNABLES={t} set by the environment, left as it is")
            }
            Heap::Untouched => "heap: the platform's allocator, untuned".into(),
            Heap::Failed(e) => format!(
                "heap: could not re-execute with {TUNABLES} ({e}); running with glibc's \
                 defaults (several arenas, no huge pages)"
            ),
        }
    }
}

/// What `GLIBC_TUNABLES` should become, or `None` to leave it: when the
/// operator named one of Ferrite's keys already.
pub fn tunables_for(current: Option<&str>) -> Option<String> {
    match current.filter(|c| !c.is_empty()) {
        None => Some(TUNABLES.to_string()),
        Some(c) => {
            let named = c
                .split(':')
                .filter_map(|item| item.split('=').next())
                .any(|key| KEYS.contains(&key));
            (!named).then(|| format!("{c}:{TUNABLES}"))
        }
    }
}

/// Call first in a process that will hold a dataset, before it starts any
/// thread: re-executes the process (same PID, same arguments) with
/// Ferrite's tunables unless they are in effect or the operator chose
/// otherwise. Returns only if it did not re-execute.
pub fn tune() -> Heap {
    if !cfg!(all(target_os = "linux", target_env = "gnu")) {
        return Heap::Untouched;
    }
    let current = std::env::var("GLIBC_TUNABLES").ok();
    if let Some(marker) = std::env::var_os(MARKER) {
        let execs: u32 = marker.to_str().and_then(|m| m.parse().ok()).unwrap_or(1);
        // Re-executed already: never again after this, even if the
        // tunables were dropped on the way (glibc filters them for
        // set-user-ID programs).
        let Some(tunables) = current.filter(|t| tunables_for(Some(t)).is_none()) else {
            std::env::remove_var(MARKER);
            name_after_executable();
            return Heap::Failed("GLIBC_TUNABLES did not reach the new image".into());
        };
        let huge_heap = thp_mode() != "madvise" || !tunables.contains(HUGETLB_ON) || {
            let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap_or_default();
            heap_advised(&smaps).unwrap_or(true)
        };
        if !huge_heap && execs < MAX_EXECS {
            // The same tunables again, for another draw of glibc's byte.
            let error = reexec(&tunables, execs + 1);
            tracing::warn!("heap: could not re-execute again ({error})");
        }
        // Not for this process's children (still one thread here).
        std::env::remove_var(MARKER);
        name_after_executable();
        HUGE_HEAP.store(
            huge_heap && tunables.contains(HUGETLB_ON),
            Ordering::Relaxed,
        );
        return Heap::Tuned {
            tunables,
            execs,
            huge_heap,
        };
    }
    let Some(wanted) = tunables_for(current.as_deref()) else {
        return Heap::Operator(current.unwrap_or_default());
    };
    Heap::Failed(reexec(&wanted, 1).to_string())
}

/// The tunable that asks glibc for huge pages, as Ferrite sets it.
const HUGETLB_ON: &str = "glibc.malloc.hugetlb=1";

/// Whether the heap (`[heap]`, what glibc's main arena grows with `brk`)
/// in `smaps` (the text of `/proc/PID/smaps`) is advised for huge pages:
/// glibc with `hugetlb=1` advises its first growth, which the runtime has
/// made before `main`. `None` if there is no heap mapping.
pub fn heap_advised(smaps: &str) -> Option<bool> {
    let mut in_heap = false;
    let mut seen = false;
    for line in smaps.lines() {
        if mapping_range(line).is_some() {
            // A mapping's first line: its range, then its name if any.
            in_heap = line.trim_end().ends_with("[heap]");
            seen |= in_heap;
        } else if let Some(flags) = line.strip_prefix("VmFlags:") {
            if in_heap && flags.split_whitespace().any(|f| f == "hg") {
                return Some(true);
            }
        }
    }
    seen.then_some(false)
}

/// Replaces this process's image with itself under `tunables`, marked as
/// execution `execs`; returns only the error.
fn reexec(tunables: &str, execs: u32) -> std::io::Error {
    use std::os::unix::process::CommandExt;
    let mut args = std::env::args_os();
    let arg0 = args.next().unwrap_or_else(|| OsString::from("ferrite"));
    // The running image, even if its file was replaced since it started.
    std::process::Command::new("/proc/self/exe")
        .arg0(arg0)
        .args(args)
        .env("GLIBC_TUNABLES", tunables)
        .env(MARKER, execs.to_string())
        .exec()
}

/// Executing `/proc/self/exe` named the process `exe` (what `ps`, `top`
/// and `pgrep` show): it gets its executable's name back.
fn name_after_executable() {
    let Ok(path) = std::env::current_exe() else {
        return;
    };
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return;
    };
    // The kernel keeps 15 bytes; a replaced executable reads "NAME (deleted)".
    let name: String = name
        .trim_end_matches(" (deleted)")
        .chars()
        .take(15)
        .collect();
    if let Ok(name) = std::ffi::CString::new(name) {
        let _ = rustix::thread::set_name(&name);
    }
}

/// The kernel's transparent huge page mode (`always`, `madvise`, `never`),
/// or `unknown`.
fn thp_mode() -> String {
    std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
        .ok()
        .and_then(|s| {
            let start = s.find('[')? + 1;
            let end = start + s[start..].find(']')?;
            Some(s[start..end].to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

/// Small pages while the dataset loads, huge pages after
/// ([`LoadPages::begin`]).
///
/// On a virtual machine whose balloon reports free 2 MiB blocks to the
/// host (a 2-vCPU Firecracker guest), a fresh huge page costs four to six times its 512
/// small pages to fault in (1 GiB: 1.6-2.9 s against 0.4-0.5 s), and a
/// restart faults in the whole dataset: at 1M x 1 KiB the server served
/// after 2.2-3.8 s with huge pages against 1.5-1.6 s without. Once
/// serving, the same dataset in small pages runs at 75-77k SET/s against
/// 106-114k in huge pages (the TLB, whose misses a nested VM pays dearly).
/// So the load runs with the process's huge pages turned off
/// (`PR_SET_THP_DISABLE`), and once the server serves, a thread folds the
/// heap into huge pages (`MADV_COLLAPSE`, Linux 6.1 and later) 2 MiB at
/// a time, paced to [`COLLAPSE_SHARE_PERCENT`] of a core.
#[derive(Debug)]
pub struct LoadPages {
    disabled: bool,
}

/// Share of one core the heap's collapse into huge pages may use.
pub const COLLAPSE_SHARE_PERCENT: u32 = 20;

impl LoadPages {
    /// Turns the process's transparent huge pages off until
    /// [`LoadPages::serve`] or the drop, if [`tune`] gave it a heap in
    /// huge pages (not where the operator chose the tunables, nor in a
    /// process that never called it).
    pub fn begin() -> LoadPages {
        let disabled = HUGE_HEAP.load(Ordering::Relaxed)
            && rustix::thread::disable_transparent_huge_pages(true).is_ok();
        LoadPages { disabled }
    }

    /// The dataset is loaded: huge pages again, and a thread folds the
    /// heap the load grew into them.
    pub fn serve(mut self) {
        if !std::mem::take(&mut self.disabled) {
            return;
        }
        if let Err(e) = rustix::thread::disable_transparent_huge_pages(false) {
            tracing::warn!("heap: could not turn huge pages back on after the load ({e})");
            return;
        }
        let spawned = std::thread::Builder::new()
            .name("heap-collapse".into())
            .spawn(collapse_heap);
        if let Err(e) = spawned {
            tracing::warn!("heap: no thread to fold the loaded heap into huge pages ({e})");
        }
    }
}

impl Drop for LoadPages {
    fn drop(&mut self) {
        if self.disabled {
            let _ = rustix::thread::disable_transparent_huge_pages(false);
        }
    }
}

/// The `[heap]` mappings of `maps` (the text of `/proc/PID/maps`), as
/// address ranges.
pub fn heap_ranges(maps: &str) -> Vec<(usize, usize)> {
    maps.lines()
        .filter(|l| l.trim_end().ends_with("[heap]"))
        .filter_map(mapping_range)
        .collect()
}

/// The address range a mapping's first line in `/proc/PID/maps` or
/// `smaps` starts with (`start-end`, hexadecimal); `None` for any other
/// line (an `smaps` field).
fn mapping_range(line: &str) -> Option<(usize, usize)> {
    let (start, end) = line.split_whitespace().next()?.split_once('-')?;
    Some((
        usize::from_str_radix(start, 16).ok()?,
        usize::from_str_radix(end, 16).ok()?,
    ))
}

/// Folds the heap into huge pages, 2 MiB at a time, resting between
/// steps so as to use at most [`COLLAPSE_SHARE_PERCENT`] of a core.
fn collapse_heap() {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let started = std::time::Instant::now();
    let (mut folded, mut busy) = (0usize, std::time::Duration::ZERO);
    for (start, end) in heap_ranges(&maps) {
        let mut at = start.next_multiple_of(HUGE_PAGE);
        while at + HUGE_PAGE <= end {
            let step = std::time::Instant::now();
            let result = ferrite_host::collapse_huge(at, HUGE_PAGE);
            let took = step.elapsed();
            busy += took;
            match result.as_ref().map_err(std::io::Error::raw_os_error) {
                Ok(()) => folded += HUGE_PAGE,
                Err(Some(libc::EINVAL)) => {
                    tracing::info!(
                        "heap: this kernel cannot fold the loaded heap into huge pages \
                         (MADV_COLLAPSE); khugepaged will in time"
                    );
                    return;
                }
                // The mapping shrank under the walk.
                Err(Some(libc::ENOMEM)) => break,
                // EAGAIN (a page busy) and the like: leave this step.
                Err(_) => {}
            }
            std::thread::sleep(took * (100 - COLLAPSE_SHARE_PERCENT) / COLLAPSE_SHARE_PERCENT);
            at += HUGE_PAGE;
        }
    }
    tracing::info!(
        "heap: folded {} MiB of the loaded heap into huge pages, {} ms of CPU over {} ms",
        folded >> 20,
        busy.as_millis(),
        started.elapsed().as_millis()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ferrites_tunables_are_added_unless_the_operator_named_one() {
        assert_eq!(tunables_for(None).as_deref(), Some(TUNABLES));
        assert_eq!(tunables_for(Some("")).as_deref(), Some(TUNABLES));
        assert_eq!(
            tunables_for(Some("glibc.malloc.tcache_count=0")),
            Some(format!("glibc.malloc.tcache_count=0:{TUNABLES}"))
        );
        assert_eq!(tunables_for(Some("glibc.malloc.arena_max=4")), None);
        assert_eq!(
            tunables_for(Some("glibc.malloc.check=0:glibc.malloc.hugetlb=0")),
            None
        );
        // A key that merely starts like one of ours is someone else's.
        assert!(tunables_for(Some("glibc.malloc.arena_max_x=1")).is_some());
    }

    const MAPPING: &str = "Size:               2048 kB\nAnonHugePages:         0 kB\n";

    fn smaps(heaps: &[&str]) -> String {
        let mut text =
            String::from("55d000000000-55d000001000 r--p 00000000 fe:01 1234   /usr/bin/ferrite\n");
        text.push_str(MAPPING);
        text.push_str("VmFlags: rd mr mw me hg\n");
        for (i, flags) in heaps.iter().enumerate() {
            text.push_str(&format!(
                "55d10{i}000000-55d10{i}200000 rw-p 00000000 00:00 0     [heap]\n"
            ));
            text.push_str(MAPPING);
            text.push_str(&format!("VmFlags: {flags}\n"));
        }
        text.push_str("7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0     [stack]\n");
        text.push_str(MAPPING);
        text.push_str("VmFlags: rd wr mr mw me gd ac hg\n");
        text
    }

    #[test]
    fn the_heap_is_advised_only_if_one_of_its_mappings_says_hg() {
        assert_eq!(heap_advised(&smaps(&["rd wr mr mw me ac"])), Some(false));
        assert_eq!(heap_advised(&smaps(&["rd wr mr mw me ac hg"])), Some(true));
        // glibc advises each growth: the heap splits into mappings.
        assert_eq!(
            heap_advised(&smaps(&["rd wr mr mw me ac", "rd wr mr mw me ac hg"])),
            Some(true)
        );
        // Other mappings' flags do not count, nor a flag that merely
        // contains the letters.
        assert_eq!(heap_advised(&smaps(&["rd wr mr mw me ac nh"])), Some(false));
        assert_eq!(heap_advised(&smaps(&[])), None);
        assert_eq!(heap_advised(""), None);
    }

    #[test]
    fn heap_ranges_are_the_heap_mappings_only() {
        let maps = "55d000000000-55d000001000 r--p 00000000 fe:01 1234 /usr/bin/ferrite\n\
                    55d100000000-55d100200000 rw-p 00000000 00:00 0    [heap]\n\
                    55d100200000-55d100400000 rw-p 00000000 00:00 0    [heap]\n\
                    7f0000000000-7f0000200000 rw-p 00000000 00:00 0 \n\
                    7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0    [stack]\n";
        assert_eq!(
            heap_ranges(maps),
            vec![
                (0x55d1_0000_0000, 0x55d1_0020_0000),
                (0x55d1_0020_0000, 0x55d1_0040_0000)
            ]
        );
        assert!(heap_ranges("garbage [heap]\n").is_empty());
    }
}
