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
        let first = line.split_whitespace().next().unwrap_or("");
        let is_range =
            first.contains('-') && first.chars().all(|c| c == '-' || c.is_ascii_hexdigit());
        if is_range {
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
}
