//! Script flags, as a `#!lua flags=...` shebang (EVAL) or
//! `redis.register_function`'s `flags` (functions) declare them, and what
//! they allow when the script starts (Redis's `scriptPrepareForRun`).

use crate::commands::Ctx;

/// No shebang: the script keeps the behaviour from before 7.0.
pub const COMPAT: u32 = 1;
/// `no-writes`: write commands fail; implies `allow-oom`.
pub const NO_WRITES: u32 = 1 << 1;
/// `allow-oom`: runs, and writes, over `maxmemory`.
pub const ALLOW_OOM: u32 = 1 << 2;
/// `allow-stale`: runs on a stale replica (link down, `replica-serve-stale-data no`).
pub const ALLOW_STALE: u32 = 1 << 3;
/// `no-cluster`: refused in cluster mode (Ferrite is never clustered).
pub const NO_CLUSTER: u32 = 1 << 4;
/// `allow-cross-slot-keys` (no effect outside a cluster).
pub const ALLOW_CROSS_SLOT: u32 = 1 << 5;

/// Each flag's name, in the order FUNCTION LIST shows them.
pub const NAMES: &[(u32, &str)] = &[
    (NO_WRITES, "no-writes"),
    (ALLOW_OOM, "allow-oom"),
    (ALLOW_STALE, "allow-stale"),
    (NO_CLUSTER, "no-cluster"),
    (ALLOW_CROSS_SLOT, "allow-cross-slot-keys"),
];

/// The flag called `name`.
pub fn by_name(name: &[u8]) -> Option<u32> {
    NAMES
        .iter()
        .find(|(_, n)| n.as_bytes() == name)
        .map(|&(flag, _)| flag)
}

/// Reads the shebang line of an EVAL body: its flags (or [`COMPAT`]
/// without one) and the length of the line, line feed excluded. `Err` is
/// the error text without its `ERR` code.
pub fn shebang(body: &[u8]) -> Result<(u32, usize), String> {
    if !body.starts_with(b"#!") {
        return Ok((COMPAT, 0));
    }
    let Some(len) = body.iter().position(|&b| b == b'\n') else {
        return Err("Invalid script shebang".into());
    };
    let parts = split_args(&body[..len]).unwrap_or_default();
    let mut parts = parts.iter().map(Vec::as_slice);
    let Some(engine) = parts.next() else {
        return Err("Invalid engine in script shebang".into());
    };
    if engine != b"#!lua" {
        return Err(format!(
            "Unexpected engine in script shebang: {}",
            String::from_utf8_lossy(engine)
        ));
    }
    let mut flags = 0;
    for part in parts {
        let Some(list) = part.strip_prefix(b"flags=") else {
            return Err(format!(
                "Unknown lua shebang option: {}",
                String::from_utf8_lossy(part)
            ));
        };
        if list.is_empty() {
            continue;
        }
        for name in list.split(|&b| b == b',') {
            flags |= by_name(name).ok_or_else(|| {
                format!(
                    "Unexpected flag in script shebang: {}",
                    String::from_utf8_lossy(name)
                )
            })?;
        }
    }
    Ok((flags, len))
}

/// Whether a script with `flags`, started by a `_RO` command or not, may
/// run now; `Err` is the refusal's text.
pub fn check_start(ctx: &Ctx<'_>, flags: u32, ro_command: bool) -> Result<(), String> {
    use crate::commands::replication::{running_stale, MASTERDOWN};
    if flags & COMPAT != 0 {
        // A script without a shebang may not start on a stale replica
        // (with flags, `allow-stale` decides).
        return match running_stale(ctx) && !ctx.session.is_master {
            true => Err(MASTERDOWN.into()),
            false => Ok(()),
        };
    }
    if flags & ALLOW_STALE == 0 && running_stale(ctx) && !ctx.session.is_master {
        return Err("MASTERDOWN Link with MASTER is down, replica-serve-stale-data is set to 'no' and 'allow-stale' flag is not set on the script.".into());
    }
    if flags & NO_WRITES != 0 {
        return Ok(());
    }
    let (repl, config) = (&ctx.state.repl, &ctx.state.config);
    if repl.is_replica() && config.replica_read_only && !ctx.session.is_master {
        return Err("READONLY Can not run script with write flag on readonly replica".into());
    }
    if let Some(why) = &ctx.state.log_failure {
        return Err(format!(
            "MISCONF Errors writing to the AOF file: {why}. Writable scripts are blocked. Use 'no-writes' flag for read only scripts."
        ));
    }
    if ro_command {
        return Err("ERR Can not execute a script with write flag using *_ro command.".into());
    }
    if crate::commands::replication::too_few_good_replicas(ctx) {
        return Err(crate::commands::replication::NOREPLICAS.into());
    }
    if flags & ALLOW_OOM == 0 && ctx.state.over_maxmemory() {
        return Err("OOM allow-oom flag is not set on the script, can not run it when used memory > 'maxmemory'".into());
    }
    Ok(())
}

/// Whether a script with `flags` may not write: a `_RO` command, or
/// `no-writes` declared.
pub fn read_only(flags: u32, ro_command: bool) -> bool {
    ro_command || (flags & COMPAT == 0 && flags & NO_WRITES != 0)
}

/// A command's flags once a script declared `script_flags` (Redis's
/// `scriptFlagsToCmdFlags`): `write` unless `no-writes`, `denyoom` unless
/// `allow-oom` or `no-writes`, `stale` with `allow-stale`, and never
/// `may-replicate` (the flags say whether it writes).
pub fn command_flags(cmd_flags: u32, script_flags: u32) -> u32 {
    use crate::commands::flags::{DENYOOM, MAY_REPLICATE, STALE, WRITE};
    let mut out = cmd_flags & !(STALE | DENYOOM | WRITE | MAY_REPLICATE);
    if script_flags & (ALLOW_OOM | NO_WRITES) == 0 {
        out |= DENYOOM;
    }
    if script_flags & NO_WRITES == 0 {
        out |= WRITE;
    }
    if script_flags & ALLOW_STALE != 0 {
        out |= STALE;
    }
    out
}

/// Splits a header line into words as Redis's `sdssplitargs` does:
/// blanks separate words, and a word may have double-quoted (with `\`
/// escapes) or single-quoted parts. `None` for unbalanced quotes or a
/// closing quote not followed by a blank.
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut words = Vec::new();
    let mut i = 0;
    loop {
        while line.get(i).is_some_and(|b| b.is_ascii_whitespace()) {
            i += 1;
        }
        if i >= line.len() {
            return Some(words);
        }
        let mut word = Vec::new();
        let mut quote: Option<u8> = None;
        loop {
            let Some(&b) = line.get(i) else {
                if quote.is_some() {
                    return None;
                }
                break;
            };
            match quote {
                Some(q) if b == q => {
                    let next = line.get(i + 1);
                    if next.is_some_and(|n| !n.is_ascii_whitespace()) {
                        return None;
                    }
                    i += 1;
                    break;
                }
                Some(b'"') if b == b'\\' && i + 1 < line.len() => {
                    i += 1;
                    word.push(match line[i] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        other => other,
                    });
                }
                Some(_) => word.push(b),
                None if b.is_ascii_whitespace() => break,
                None if b == b'"' || b == b'\'' => quote = Some(b),
                None => word.push(b),
            }
            i += 1;
        }
        words.push(word);
    }
}
