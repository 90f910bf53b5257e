//! `oom-score-adj`: the server's standing with the kernel's OOM killer, as
//! Redis sets it (`/proc/self/oom_score_adj`).
//!
//! `oom-score-adj-values` holds three scores, for a master, a replica and
//! a background child (Ferrite starts no child; the third is kept for
//! CONFIG GET). The class is the server's role now: REPLICAOF re-applies
//! the score at once, as Redis does when it sets or clears its master,
//! and the timer catches the other role changes (failover, cluster). With `relative` (or `yes`) the score written is the
//! process's score when Ferrite first changed it plus the class's value;
//! with `absolute`, the value itself; both clamped to the kernel's
//! -1000..=1000. Turning it off writes the original score back. A score
//! the kernel refuses (lowering it needs `CAP_SYS_RESOURCE`) fails the
//! CONFIG SET that asked for it, and nothing changes.

use std::path::Path;

/// How the score is set (`oom-score-adj`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OomMode {
    /// Left as the process found it.
    #[default]
    Off,
    /// The original score plus the class's value (`yes`, `relative`).
    Relative,
    /// The class's value.
    Absolute,
}

impl OomMode {
    /// The name CONFIG GET shows (`relative` reads `yes`, as in Redis).
    pub fn name(self) -> &'static str {
        match self {
            OomMode::Off => "no",
            OomMode::Relative => "yes",
            OomMode::Absolute => "absolute",
        }
    }

    /// From the directive's text (validated by the settings table).
    pub fn parse(text: &str) -> OomMode {
        match text {
            "yes" | "relative" => OomMode::Relative,
            "absolute" => OomMode::Absolute,
            _ => OomMode::Off,
        }
    }
}

/// The process's score as Ferrite found it, once it changed it.
#[derive(Debug, Default)]
pub struct OomScore {
    original: Option<i64>,
    /// The mode and value last asked for (applied or refused), so the
    /// timer asks again only when the role changes them.
    asked: Option<(OomMode, i64)>,
}

const PROC_FILE: &str = "/proc/self/oom_score_adj";

impl OomScore {
    /// Sets the score for `mode` and `value` (the class's value), or puts
    /// the original back when `mode` is off.
    pub fn apply(&mut self, mode: OomMode, value: i64) -> std::io::Result<()> {
        self.asked = Some((mode, value));
        self.apply_at(Path::new(PROC_FILE), mode, value)
    }

    fn apply_at(&mut self, file: &Path, mode: OomMode, value: i64) -> std::io::Result<()> {
        if mode == OomMode::Off {
            if let Some(original) = self.original {
                write_score(file, original)?;
                self.original = None;
            }
            return Ok(());
        }
        let original = match self.original {
            Some(score) => score,
            None => read_score(file)?,
        };
        let score = match mode {
            OomMode::Absolute => value,
            _ => original + value,
        };
        write_score(file, score.clamp(-1000, 1000))?;
        self.original = Some(original);
        Ok(())
    }
}

/// The value of `oom-score-adj-values` for a server in the given role:
/// the first for a master, the second for a replica.
pub fn role_value(config: &crate::config::Config, is_replica: bool) -> i64 {
    config.oom_score_adj_values[usize::from(is_replica)]
}

/// Sets the score a config file asked for, as Redis does when it starts;
/// a refusal is logged, not fatal.
pub fn apply_at_start(state: &mut crate::state::State) {
    let mode = state.config.oom_score_adj;
    let value = role_value(&state.config, state.repl.is_replica());
    if mode != OomMode::Off {
        if let Err(e) = state.oom.apply(mode, value) {
            tracing::warn!("cannot set the OOM score: {e}");
        }
    }
}

/// Re-applies the score when the server's role changed its class
/// (REPLICAOF, a failover, a cluster role change); a refusal is logged
/// once, not retried until the role or the settings change again.
pub fn follow_role(state: &mut crate::state::State) {
    let mode = state.config.oom_score_adj;
    let value = role_value(&state.config, state.repl.is_replica());
    if mode == OomMode::Off || state.oom.asked == Some((mode, value)) {
        return;
    }
    if let Err(e) = state.oom.apply(mode, value) {
        tracing::warn!("cannot set the OOM score: {e}");
    }
}

fn read_score(file: &Path) -> std::io::Result<i64> {
    let text = std::fs::read_to_string(file)?;
    text.trim()
        .parse()
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "not a number"))
}

fn write_score(file: &Path, score: i64) -> std::io::Result<()> {
    std::fs::write(file, format!("{score}\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_absolute_and_off_write_what_redis_writes() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("oom_score_adj");
        std::fs::write(&file, "22\n").unwrap();
        let mut oom = OomScore::default();
        oom.apply_at(&file, OomMode::Relative, 9).unwrap();
        assert_eq!(read_score(&file).unwrap(), 31);
        // The base stays the original, not the score written.
        oom.apply_at(&file, OomMode::Relative, 15).unwrap();
        assert_eq!(read_score(&file).unwrap(), 37);
        oom.apply_at(&file, OomMode::Absolute, 9).unwrap();
        assert_eq!(read_score(&file).unwrap(), 9);
        oom.apply_at(&file, OomMode::Absolute, 5000).unwrap();
        assert_eq!(read_score(&file).unwrap(), 1000, "clamped");
        oom.apply_at(&file, OomMode::Off, 0).unwrap();
        assert_eq!(read_score(&file).unwrap(), 22, "restored");
        // Off again: the file is left alone.
        std::fs::write(&file, "40\n").unwrap();
        oom.apply_at(&file, OomMode::Off, 0).unwrap();
        assert_eq!(read_score(&file).unwrap(), 40);
    }

    #[test]
    fn an_unreadable_score_is_an_error_and_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut oom = OomScore::default();
        let missing = dir.path().join("none");
        assert!(oom.apply_at(&missing, OomMode::Relative, 1).is_err());
        assert!(oom.original.is_none());
    }
}
