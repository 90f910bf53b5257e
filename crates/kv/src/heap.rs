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

use std::ffi::OsString;

/// What Ferrite adds to `GLIBC_TUNABLES`.
pub const TUNABLES: &str = "glibc.malloc.arena_max=1:glibc.malloc.hugetlb=1";
/// Set in the re-executed process, so it knows the tunables are its own.
const MARKER: &str = "FERRITE_MALLOC_TUNED";
const KEYS: [&str; 2] = ["glibc.malloc.arena_max", "glibc.malloc.hugetlb"];

/// How the heap of this process is set up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Heap {
    /// Ferrite's tunables are in effect (this process was re-executed).
    Tuned(String),
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
            Heap::Failed(_) => tracing::warn!("{}", self.describe()),
            _ => tracing::info!("{}", self.describe()),
        }
    }

    /// One line for the start-up log.
    pub fn describe(&self) -> String {
        match self {
            Heap::Tuned(t) => format!(
                "heap: glibc malloc with one arena and transparent huge pages \
                 (GLIBC_TUNABLES={t}; huge pages {})",
                thp_mode()
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
    if std::env::var_os(MARKER).is_some() {
        // Not for this process's children (still one thread here).
        std::env::remove_var(MARKER);
        name_after_executable();
        // Re-executed already: never again, even if the tunables were
        // dropped on the way (glibc filters them for set-user-ID programs).
        return match current {
            Some(t) if tunables_for(Some(&t)).is_none() => Heap::Tuned(t),
            _ => Heap::Failed("GLIBC_TUNABLES did not reach the new image".into()),
        };
    }
    let Some(wanted) = tunables_for(current.as_deref()) else {
        return Heap::Operator(current.unwrap_or_default());
    };
    Heap::Failed(reexec(&wanted).to_string())
}

/// Replaces this process's image with itself under `tunables`; returns
/// only the error.
fn reexec(tunables: &str) -> std::io::Error {
    use std::os::unix::process::CommandExt;
    let mut args = std::env::args_os();
    let arg0 = args.next().unwrap_or_else(|| OsString::from("ferrite"));
    // The running image, even if its file was replaced since it started.
    std::process::Command::new("/proc/self/exe")
        .arg0(arg0)
        .args(args)
        .env("GLIBC_TUNABLES", tunables)
        .env(MARKER, "1")
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
}
