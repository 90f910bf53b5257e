//! COMMAND and its subcommands: what the table says about each command,
//! in Redis 7.0's reply shapes (COMMAND INFO's ten elements, COMMAND
//! DOCS's map), and the key positions of a command line (GETKEYS), which
//! come from the same [`Keys`] the log rewrite reads, so the two agree.

use std::borrow::Cow;

use super::table::key_flags::{self as kf, VARIABLE_FLAGS};
use super::table::*;
use super::{acl, all_commands, errors, facts, lookup, upper, CmdError, CmdResult, Ctx};
use crate::keyspace::glob::glob_match;
use crate::resp::{Args, ReplyBuf};

/// A command or subcommand: its container (for a subcommand) and spec.
pub(super) type Found = (Option<&'static CommandSpec>, &'static CommandSpec);

/// Finds a command by its full name: `get`, or `config|get` for a
/// subcommand; `None` for anything deeper or unknown. (Specs are found by
/// name, never compared by address: the tables are constants, whose
/// copies Rust does not promise to keep at one address.)
pub(super) fn lookup_full(name: &[u8]) -> Option<Found> {
    let mut parts = name.split(|&b| b == b'|');
    let top = lookup(parts.next()?)?;
    match (parts.next(), parts.next()) {
        (None, _) => Some((None, top)),
        (Some(sub), None) => top.subcommand(sub).map(|s| (Some(top), s)),
        (Some(_), Some(_)) => None,
    }
}

/// `config|get` for a subcommand of `container`, else the name.
fn full_name(container: Option<&CommandSpec>, spec: &CommandSpec) -> String {
    super::full_name(container, spec)
}

/// The flags of each key specification: the table's own, else Redis's
/// facts for the name, else what the command's flags imply.
fn spec_key_flags(full: &str, spec: &CommandSpec) -> Cow<'static, [u16]> {
    if !spec.key_flags.is_empty() {
        return Cow::Borrowed(spec.key_flags);
    }
    if let Some((_, flags)) = facts::of(full) {
        if !flags.is_empty() {
            return Cow::Borrowed(flags);
        }
    }
    if matches!(spec.keys, Keys::None) {
        return Cow::Borrowed(&[]);
    }
    let derived = if spec.has(WRITE) {
        kf::RW | kf::UPDATE
    } else {
        kf::RO | kf::ACCESS
    };
    Cow::Owned(vec![derived])
}

/// The flags of the `nth` key COMMAND GETKEYSANDFLAGS reports at argument
/// `pos`: the `nth` specification's (the last repeating), resolved where
/// Redis resolves variable flags from the arguments.
fn flags_of_key(full: &str, specs: &[u16], args: &Args<'_>, nth: usize, pos: usize) -> u16 {
    let Some(&last) = specs.last() else {
        return 0;
    };
    let flags = specs.get(nth).copied().unwrap_or(last);
    let after_store = pos > 0 && args.get(pos - 1).eq_ignore_ascii_case(b"STORE");
    match full {
        // SET reads the old value only with GET.
        "set" if flags & VARIABLE_FLAGS != 0 => {
            let get = args.iter().skip(3).any(|a| a.eq_ignore_ascii_case(b"GET"));
            if get {
                kf::RW | kf::ACCESS | kf::UPDATE
            } else {
                kf::OW | kf::UPDATE
            }
        }
        // BITFIELD only reads when every operation is a GET (OVERFLOW
        // aside); anything else, a syntax error included, counts as a
        // write, as Redis decides.
        "bitfield" if flags & VARIABLE_FLAGS != 0 => {
            if bitfield_reads_only(args) {
                kf::RO | kf::ACCESS
            } else {
                kf::RW | kf::ACCESS | kf::UPDATE
            }
        }
        // SORT's STORE destination is the third specification.
        "sort" if nth > 0 && after_store => specs.get(2).copied().unwrap_or(flags),
        _ => flags & !VARIABLE_FLAGS,
    }
}

/// Whether a BITFIELD command line has only GET (and OVERFLOW) operations.
fn bitfield_reads_only(args: &Args<'_>) -> bool {
    let mut i = 2;
    while i < args.len() {
        let left = args.len() - i - 1;
        let word = args.get(i);
        if word.eq_ignore_ascii_case(b"GET") && left >= 2 {
            i += 3;
        } else if word.eq_ignore_ascii_case(b"OVERFLOW") && left >= 1 {
            i += 2;
        } else {
            return false;
        }
    }
    true
}

fn flag_names(spec: &CommandSpec) -> Vec<&'static str> {
    let mut names: Vec<&str> = super::flags::NAMES
        .iter()
        .filter(|(b, _)| spec.flags & b != 0)
        .map(|(_, n)| *n)
        .collect();
    if matches!(spec.keys, Keys::Find(_)) {
        names.push("movablekeys");
    }
    names
}

fn key_flag_names(bits: u16) -> Vec<&'static str> {
    kf::NAMES
        .iter()
        .filter(|(b, _)| bits & b != 0)
        .map(|(_, n)| *n)
        .collect()
}

/// One key specification: `flags`, `begin_search`, `find_keys`. Range keys
/// split across specifications as Redis splits them: each but the last
/// names one key, the last runs to the range's end.
fn key_spec(
    r: &mut ReplyBuf,
    (keys, search): (Keys, Option<&KeySearch>),
    flags: u16,
    nth: usize,
    count: usize,
) {
    r.map(3);
    r.bulk(b"flags");
    let names = key_flag_names(flags);
    r.set(names.len());
    for n in names {
        r.simple(n);
    }
    if let Some(search) = search {
        movable_search(r, search);
        return;
    }
    let Keys::Range(first, last, step) = keys else {
        for part in ["begin_search", "find_keys"] {
            r.bulk(part.as_bytes());
            r.map(2);
            r.bulk(b"type");
            r.bulk(b"unknown");
            r.bulk(b"spec");
            r.map(0);
        }
        return;
    };
    let index = i64::from(first) + i64::from(step) * nth as i64;
    let lastkey = if nth + 1 < count {
        0
    } else if last < 0 {
        i64::from(last)
    } else {
        i64::from(last) - index
    };
    r.bulk(b"begin_search");
    r.map(2);
    r.bulk(b"type");
    r.bulk(b"index");
    r.bulk(b"spec");
    r.map(1);
    r.bulk(b"index");
    r.int(index);
    r.bulk(b"find_keys");
    r.map(2);
    r.bulk(b"type");
    r.bulk(b"range");
    r.bulk(b"spec");
    r.map(3);
    r.bulk(b"lastkey");
    r.int(lastkey);
    r.bulk(b"keystep");
    r.int(i64::from(step));
    r.bulk(b"limit");
    r.int(0);
}

/// `begin_search` and `find_keys` of a movable key specification.
fn movable_search(r: &mut ReplyBuf, (begin, find): &KeySearch) {
    let unknown = |r: &mut ReplyBuf| {
        r.bulk(b"type");
        r.bulk(b"unknown");
        r.bulk(b"spec");
        r.map(0);
    };
    r.bulk(b"begin_search");
    r.map(2);
    match *begin {
        BeginSearch::Index(at) => {
            r.bulk(b"type");
            r.bulk(b"index");
            r.bulk(b"spec");
            r.map(1);
            r.bulk(b"index");
            r.int(i64::from(at));
        }
        BeginSearch::Keyword(word, from) => {
            r.bulk(b"type");
            r.bulk(b"keyword");
            r.bulk(b"spec");
            r.map(2);
            r.bulk(b"keyword");
            r.bulk(word.as_bytes());
            r.bulk(b"startfrom");
            r.int(i64::from(from));
        }
        BeginSearch::Unknown => unknown(r),
    }
    r.bulk(b"find_keys");
    r.map(2);
    let (kind, names, values) = match *find {
        FindKeys::Range(a, b, c) => ("range", ["lastkey", "keystep", "limit"], [a, b, c]),
        FindKeys::Keynum(a, b, c) => ("keynum", ["keynumidx", "firstkey", "keystep"], [a, b, c]),
        FindKeys::Unknown => return unknown(r),
    };
    r.bulk(b"type");
    r.bulk(kind.as_bytes());
    r.bulk(b"spec");
    r.map(3);
    for (name, value) in names.iter().zip(values) {
        r.bulk(name.as_bytes());
        r.int(i64::from(value));
    }
}

/// COMMAND INFO's ten elements for one command or subcommand.
fn command_info(r: &mut ReplyBuf, container: Option<&CommandSpec>, spec: &CommandSpec) {
    let full = full_name(container, spec);
    r.array(10);
    r.bulk(full.as_bytes());
    r.int(i64::from(spec.arity));
    let names = flag_names(spec);
    r.set(names.len());
    for n in names {
        r.simple(n);
    }
    let (first, last, step) = spec.legacy_keys();
    r.int(i64::from(first));
    r.int(i64::from(last));
    r.int(i64::from(step));
    let categories: Vec<&str> = acl::names(acl::of(spec)).collect();
    r.set(categories.len());
    for c in categories {
        r.simple(&format!("@{c}"));
    }
    r.set(spec.tips.len());
    for tip in spec.tips {
        r.bulk(tip.as_bytes());
    }
    let specs = spec_key_flags(&full, spec);
    r.array(specs.len());
    for (nth, &flags) in specs.iter().enumerate() {
        let search = match spec.keys {
            Keys::Find(_) => spec.key_searches.get(nth),
            _ => None,
        };
        key_spec(r, (spec.keys, search), flags, nth, specs.len());
    }
    r.array(spec.subcommands.len());
    for sub in spec.subcommands {
        command_info(r, Some(spec), sub);
    }
}

/// COMMAND DOCS's map for one command: summary, since, group, complexity
/// (what Ferrite states of them), and its subcommands'.
fn command_docs(r: &mut ReplyBuf, container: Option<&CommandSpec>, spec: &CommandSpec) {
    let full = full_name(container, spec);
    let since = if spec.since.is_empty() {
        facts::of(&full).map_or("", |f| f.0)
    } else {
        spec.since
    };
    let fields: Vec<(&str, &str)> = [
        ("summary", spec.summary),
        ("since", since),
        ("group", spec.group),
        ("complexity", spec.complexity),
    ]
    .into_iter()
    .filter(|(_, v)| !v.is_empty())
    .collect();
    let subs = !spec.subcommands.is_empty();
    r.map(fields.len() + usize::from(subs));
    for (k, v) in fields {
        r.bulk(k.as_bytes());
        r.bulk(v.as_bytes());
    }
    if subs {
        r.bulk(b"subcommands");
        r.map(spec.subcommands.len());
        for sub in spec.subcommands {
            r.bulk(full_name(Some(spec), sub).as_bytes());
            command_docs(r, Some(spec), sub);
        }
    }
}

fn command(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    let r = &mut *ctx.reply;
    r.array(super::command_count());
    for spec in all_commands() {
        command_info(r, None, spec);
    }
    Ok(())
}

fn count(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    ctx.reply.int(super::command_count() as i64);
    Ok(())
}

/// Every command and subcommand with its full name.
fn every_name() -> Vec<(String, &'static CommandSpec)> {
    let mut out = Vec::new();
    for spec in all_commands() {
        out.push((spec.name.to_string(), spec));
        for sub in spec.subcommands {
            out.push((full_name(Some(spec), sub), sub));
        }
    }
    out
}

fn list(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let names = every_name();
    let chosen: Vec<&String> = match args.len() {
        2 => names.iter().map(|(n, _)| n).collect(),
        5 if upper(args, 2) == b"FILTERBY" => {
            let value = args.get(4);
            match upper(args, 3).as_slice() {
                // No modules are ever loaded.
                b"MODULE" => Vec::new(),
                b"ACLCAT" => {
                    let wanted = String::from_utf8_lossy(value).to_ascii_lowercase();
                    names
                        .iter()
                        .filter(|(_, s)| acl::names(acl::of(s)).any(|c| c == wanted))
                        .map(|(n, _)| n)
                        .collect()
                }
                b"PATTERN" => {
                    let pattern = value.to_ascii_lowercase();
                    names
                        .iter()
                        .filter(|(n, _)| glob_match(&pattern, n.as_bytes()))
                        .map(|(n, _)| n)
                        .collect()
                }
                _ => return Err(Cow::Borrowed(errors::SYNTAX)),
            }
        }
        _ => return Err(Cow::Borrowed(errors::SYNTAX)),
    };
    ctx.reply.array(chosen.len());
    for name in chosen {
        ctx.reply.bulk(name.as_bytes());
    }
    Ok(())
}

fn info(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let r = &mut *ctx.reply;
    if args.len() == 2 {
        r.array(super::command_count());
        for spec in all_commands() {
            command_info(r, None, spec);
        }
        return Ok(());
    }
    r.array(args.len() - 2);
    for name in args.iter().skip(2) {
        match lookup_full(name) {
            Some((container, spec)) => command_info(r, container, spec),
            None => r.null_array(),
        }
    }
    Ok(())
}

fn docs(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let r = &mut *ctx.reply;
    if args.len() == 2 {
        r.map(super::command_count());
        for spec in all_commands() {
            r.bulk(spec.name.as_bytes());
            command_docs(r, None, spec);
        }
        return Ok(());
    }
    let found: Vec<Found> = args.iter().skip(2).filter_map(lookup_full).collect();
    r.map(found.len());
    for (container, spec) in found {
        r.bulk(full_name(container, spec).as_bytes());
        command_docs(r, container, spec);
    }
    Ok(())
}

/// The command COMMAND GETKEYS names: its spec (a subcommand when it is a
/// container's) and full name, or the error reply.
fn named_command(sub: &Args<'_>) -> Result<(&'static CommandSpec, String), CmdError> {
    let invalid = || Cow::Borrowed("ERR Invalid command specified");
    let top = lookup(sub.get(0)).ok_or_else(invalid)?;
    let (container, spec) = if top.subcommands.is_empty() || sub.len() < 2 {
        (None, top)
    } else {
        (Some(top), top.subcommand(sub.get(1)).ok_or_else(invalid)?)
    };
    let full = full_name(container, spec);
    // Key specifications that all name something other than keys
    // (SPUBLISH's shard channel) count as none, as in Redis.
    let only_not_keys = {
        let specs = spec_key_flags(&full, spec);
        !specs.is_empty() && specs.iter().all(|f| f & kf::NOT_KEY != 0)
    };
    if matches!(spec.keys, Keys::None) || only_not_keys {
        return Err(Cow::Borrowed("ERR The command has no key arguments"));
    }
    if !spec.arity_ok(sub.len()) {
        return Err(Cow::Borrowed(
            "ERR Invalid number of arguments specified for command",
        ));
    }
    Ok((spec, full))
}

/// The positions of the keys in `args` (a whole command line), as the
/// rewrite and COMMAND GETKEYS find them.
pub fn key_positions(spec: &CommandSpec, args: &Args<'_>) -> Vec<usize> {
    let mut positions = Vec::new();
    spec.keys.positions(args, &mut positions);
    positions.retain(|&p| p < args.len());
    positions
}

/// The keys of command line `args` (of `spec`, a subcommand of
/// `container` or a command), each with the flags of the key
/// specification it comes from, resolved as COMMAND GETKEYSANDFLAGS
/// resolves them; keys whose specifications name something other than
/// keys (`not_key`) are left out, as Redis's ACL checks leave them out.
pub(super) fn keys_and_flags(
    container: Option<&CommandSpec>,
    spec: &CommandSpec,
    args: &Args<'_>,
) -> Vec<(usize, u16)> {
    let full = full_name(container, spec);
    let specs = spec_key_flags(&full, spec);
    key_positions(spec, args)
        .into_iter()
        .enumerate()
        .map(|(nth, pos)| (pos, flags_of_key(&full, &specs, args, nth, pos)))
        .filter(|(_, flags)| flags & kf::NOT_KEY == 0)
        .collect()
}

fn getkeys_impl(ctx: &mut Ctx<'_>, args: &Args<'_>, with_flags: bool) -> CmdResult {
    let sub = args.tail(2);
    let (spec, full) = named_command(&sub)?;
    let positions = key_positions(spec, &sub);
    if positions.is_empty() && !spec.has(NO_MANDATORY_KEYS) && !matches!(spec.keys, Keys::Find(_)) {
        return Err(Cow::Borrowed("ERR Invalid arguments specified for command"));
    }
    let specs = spec_key_flags(&full, spec);
    let r = &mut *ctx.reply;
    r.array(positions.len());
    for (nth, pos) in positions.into_iter().enumerate() {
        if !with_flags {
            r.bulk(sub.get(pos));
            continue;
        }
        r.array(2);
        r.bulk(sub.get(pos));
        let names = key_flag_names(flags_of_key(&full, &specs, &sub, nth, pos));
        r.set(names.len());
        for n in names {
            r.simple(n);
        }
    }
    Ok(())
}

fn getkeys(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    getkeys_impl(ctx, args, false)
}

fn getkeysandflags(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    getkeys_impl(ctx, args, true)
}

/// Replies with a HELP text: the header line Redis's HELP replies start
/// with, `lines`, then HELP's own entry.
pub(super) fn help_reply(r: &mut ReplyBuf, command: &str, lines: &[&str]) {
    r.array(lines.len() + 3);
    r.simple(&format!(
        "{command} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    ));
    for line in lines {
        r.simple(line);
    }
    r.simple("HELP");
    r.simple("    Prints this help.");
}

fn help(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> CmdResult {
    help_reply(
        ctx.reply,
        "COMMAND",
        &[
            "(no subcommand)",
            "    Describes every command.",
            "COUNT",
            "    Counts the commands.",
            "LIST [FILTERBY (MODULE <module-name>|ACLCAT <category>|PATTERN <pattern>)]",
            "    Names the commands and subcommands, all or those matching the filter.",
            "INFO [<command-name> ...]",
            "    Describes the named commands (all without names).",
            "DOCS [<command-name> ...]",
            "    Documents the named commands (all without names).",
            "GETKEYS <full-command>",
            "    Lists the keys of a full command line.",
            "GETKEYSANDFLAGS <full-command>",
            "    Lists the keys of a full command line with their flags.",
        ],
    );
    Ok(())
}

/// The commands this file implements, one per line so it reads as a table.
#[rustfmt::skip]
pub(super) static COMMANDS: &[CommandSpec] = &[
    cmd!("command", -1, LOADING | STALE, K0, "server", "Describes every command.", command).with_tips(&["nondeterministic_output_order"])
        .with_subcommands(COMMAND).with_acl(acl::bit("connection")),
];

/// COMMAND's subcommands.
#[rustfmt::skip]
static COMMAND: &[CommandSpec] = &[
    cmd!("count", 2, LOADING | STALE, K0, "server", "Counts the commands.", count).with_acl(acl::CONNECTION),
    cmd!("list", -2, LOADING | STALE, K0, "server", "Names the commands, optionally filtered.", list).with_tips(&["nondeterministic_output_order"]).with_acl(acl::CONNECTION),
    cmd!("info", -2, LOADING | STALE, K0, "server", "Describes commands.", info).with_tips(&["nondeterministic_output_order"]).with_acl(acl::CONNECTION),
    cmd!("docs", -2, LOADING | STALE, K0, "server", "Documents commands.", docs).with_tips(&["nondeterministic_output_order"]).with_acl(acl::CONNECTION),
    cmd!("getkeys", -4, LOADING | STALE, K0, "server", "Extracts the keys of a command line.", getkeys).with_acl(acl::CONNECTION),
    cmd!("getkeysandflags", -4, LOADING | STALE, K0, "server", "Extracts the keys of a command line with their flags.", getkeysandflags).with_acl(acl::CONNECTION),
    cmd!("help", 2, LOADING | STALE, K0, "server", "Explains COMMAND's subcommands.", help).with_acl(acl::CONNECTION),
];
