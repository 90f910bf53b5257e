//! Project standards that clippy does not check (TigerBeetle's `tidy`):
//! short files, `unsafe` only where it is allowed and always explained, no
//! printing from libraries, no `unwrap()` in library code.

use std::path::{Path, PathBuf};

/// Crates allowed to contain `unsafe` (persistent memory, the host
/// mechanisms that are not PM, SQLite's FFI, and the global allocator's
/// counting wrapper).
const UNSAFE_CRATES: [&str; 4] = ["pmem", "host", "sqlite", "alloc"];
/// Longest a source file may be.
const FILE_LINES_MAX: usize = 800;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("crates/ferrite sits two levels below the root")
        .to_path_buf()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n == "target") {
                continue;
            }
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `(crate name, path, text)` of every Rust file under `crates/`.
fn sources() -> Vec<(String, PathBuf, String)> {
    let crates = workspace_root().join("crates");
    let mut files = Vec::new();
    rust_files(&crates, &mut files);
    files
        .into_iter()
        // This file names the patterns it looks for.
        .filter(|path| !path.ends_with("ferrite/tests/tidy.rs"))
        .map(|path| {
            let rel = path
                .strip_prefix(&crates)
                .expect("under crates/")
                .to_path_buf();
            let krate = rel
                .iter()
                .next()
                .expect("crate dir")
                .to_string_lossy()
                .into_owned();
            let text = std::fs::read_to_string(&path).expect("source is UTF-8");
            (krate, rel, text)
        })
        .collect()
}

/// Whether a file is test, bench or example code (or a binary's entry).
fn is_test_code(rel: &Path) -> bool {
    rel.iter()
        .any(|c| c == "tests" || c == "benches" || c == "examples")
}

/// The part of a source file before its `#[cfg(test)]` module.
fn non_test_part(text: &str) -> &str {
    text.find("#[cfg(test)]").map_or(text, |at| &text[..at])
}

#[test]
fn files_are_short() {
    let long: Vec<String> = sources()
        .iter()
        .filter(|(_, _, text)| text.lines().count() > FILE_LINES_MAX)
        .map(|(_, rel, text)| format!("{} ({} lines)", rel.display(), text.lines().count()))
        .collect();
    assert!(
        long.is_empty(),
        "files over {FILE_LINES_MAX} lines: {long:?}"
    );
}

#[test]
fn unsafe_only_where_allowed_and_explained() {
    for (krate, rel, text) in sources() {
        let has_unsafe = text.lines().any(|l| {
            let code = l.split("//").next().unwrap_or("");
            code.contains("unsafe {") || code.contains("unsafe fn") || code.contains("unsafe impl")
        });
        if !has_unsafe {
            continue;
        }
        assert!(
            UNSAFE_CRATES.contains(&krate.as_str()),
            "{}: unsafe outside {UNSAFE_CRATES:?}",
            rel.display()
        );
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if !(code.contains("unsafe {") || code.contains("unsafe impl")) {
                continue;
            }
            // The explanation is on one of the few lines above (possibly
            // above an attribute or a `let` that spans lines).
            let explained = lines[i.saturating_sub(6)..=i]
                .iter()
                .any(|l| l.contains("SAFETY:"));
            assert!(
                explained,
                "{}:{}: unsafe without a SAFETY comment",
                rel.display(),
                i + 1
            );
        }
    }
}

#[test]
fn libraries_do_not_print_or_unwrap() {
    for (krate, rel, text) in sources() {
        if is_test_code(&rel) || krate == "bench" {
            continue;
        }
        let is_binary_entry = rel.ends_with("main.rs");
        for (i, line) in non_test_part(&text).lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            assert!(
                !code.contains(".unwrap()"),
                "{}:{}: unwrap() in library code; return an error instead",
                rel.display(),
                i + 1
            );
            if !is_binary_entry {
                assert!(
                    !code.contains("println!") && !code.contains("eprintln!"),
                    "{}:{}: libraries report through tracing, not print",
                    rel.display(),
                    i + 1
                );
            }
        }
    }
}
