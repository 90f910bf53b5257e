//! The manifest: a small text file naming the base parts and the
//! incremental logs of a data directory, in load order (drawn in
//! `docs/format.md`). It is only ever replaced whole, atomically
//! (`AofDir::write_manifest`), and ends with a CRC32C of everything before
//! it, so a torn or edited manifest is refused instead of half-believed.
//!
//! ```text
//! ferrite-aof-manifest 1
//! generation 3
//! base appendonly.aof.3.base.0 bytes 1048576 keys 9000
//! base appendonly.aof.3.base.1 bytes 1040012 keys 9013
//! incr appendonly.aof.3.incr file
//! crc32c 9a3b01fe
//! ```

use super::FormatError;

/// First line of every manifest.
pub const MANIFEST_MAGIC: &str = "ferrite-aof-manifest";
/// The version this code writes and reads.
pub const MANIFEST_VERSION: u32 = 1;
/// A manifest larger than this is refused before it is parsed.
pub const MANIFEST_BYTES_MAX: usize = 1 << 20;

/// A base part named by the manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BaseEntry {
    /// File name in the data directory.
    pub file: String,
    /// Its exact length.
    pub bytes: u64,
    /// Keys it holds.
    pub keys: u64,
}

/// Which device an incremental log lives on (how to open it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IncrKind {
    /// A RESP log on a file device.
    File,
    /// A RESP log on a persistent-memory device.
    Pm,
    /// A RESP log in a file behind a persistent-memory write buffer, whose
    /// buffer file [`crate::aof::wbuf_path`] names.
    Wbuf,
}

impl IncrKind {
    /// The manifest's word for it.
    pub fn name(self) -> &'static str {
        match self {
            IncrKind::File => "file",
            IncrKind::Pm => "pm",
            IncrKind::Wbuf => "wbuf",
        }
    }

    fn parse(word: &str) -> Option<IncrKind> {
        match word {
            "file" => Some(IncrKind::File),
            "pm" => Some(IncrKind::Pm),
            "wbuf" => Some(IncrKind::Wbuf),
            _ => None,
        }
    }
}

/// An incremental log named by the manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IncrEntry {
    /// File name in the data directory.
    pub file: String,
    /// Its device.
    pub kind: IncrKind,
}

/// What a data directory holds: load the bases (in any order, in
/// parallel), then replay the incremental logs in order; the last one is
/// the log the server appends to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Manifest {
    /// Rewrite generation; file names carry it.
    pub generation: u64,
    /// The base parts of the last completed rewrite.
    pub bases: Vec<BaseEntry>,
    /// Incremental logs, oldest first.
    pub incrs: Vec<IncrEntry>,
}

/// Whether `name` is a plain file name the manifest may carry: no path
/// separators, no spaces or control characters, not `.` or `..`.
pub fn valid_file_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 255
        && name != "."
        && name != ".."
        && name.bytes().all(|b| b.is_ascii_graphic() && b != b'/')
}

impl Manifest {
    /// The manifest's bytes.
    pub fn encode(&self) -> Vec<u8> {
        debug_assert!(self.files().all(valid_file_name));
        let mut s = format!(
            "{MANIFEST_MAGIC} {MANIFEST_VERSION}\ngeneration {}\n",
            self.generation
        );
        for b in &self.bases {
            s.push_str(&format!(
                "base {} bytes {} keys {}\n",
                b.file, b.bytes, b.keys
            ));
        }
        for i in &self.incrs {
            s.push_str(&format!("incr {} {}\n", i.file, i.kind.name()));
        }
        let crc = crc32c::crc32c(s.as_bytes());
        s.push_str(&format!("crc32c {crc:08x}\n"));
        s.into_bytes()
    }

    /// Every file the manifest names.
    pub fn files(&self) -> impl Iterator<Item = &str> {
        self.bases
            .iter()
            .map(|b| b.file.as_str())
            .chain(self.incrs.iter().map(|i| i.file.as_str()))
    }

    /// Parses and checks a manifest.
    pub fn decode(bytes: &[u8]) -> Result<Manifest, FormatError> {
        let err = |offset: usize, reason: &str| FormatError {
            offset: offset as u64,
            reason: reason.to_string(),
        };
        if bytes.len() > MANIFEST_BYTES_MAX {
            return Err(err(0, "manifest larger than 1 MiB"));
        }
        let text = std::str::from_utf8(bytes).map_err(|e| err(e.valid_up_to(), "not UTF-8"))?;
        let body_end = text
            .trim_end_matches('\n')
            .rfind('\n')
            .map(|i| i + 1)
            .ok_or_else(|| err(0, "no checksum line (incomplete manifest)"))?;
        let crc_line = text[body_end..].trim_end_matches('\n');
        let crc = crc_line
            .strip_prefix("crc32c ")
            .and_then(|h| u32::from_str_radix(h, 16).ok())
            .ok_or_else(|| {
                err(
                    body_end,
                    "last line is not `crc32c <hex>` (incomplete manifest)",
                )
            })?;
        if crc != crc32c::crc32c(&bytes[..body_end]) || !text.ends_with('\n') {
            return Err(err(body_end, "checksum mismatch"));
        }
        let mut manifest = Manifest::default();
        let mut at = 0;
        for (n, line) in text[..body_end].lines().enumerate() {
            manifest
                .parse_line(n, line)
                .map_err(|reason| err(at, &reason))?;
            at += line.len() + 1;
        }
        if manifest.incrs.is_empty() {
            return Err(err(0, "names no incremental log"));
        }
        let mut names: Vec<&str> = manifest.files().collect();
        names.sort_unstable();
        if names.windows(2).any(|w| w[0] == w[1]) {
            return Err(err(0, "names a file twice"));
        }
        Ok(manifest)
    }

    fn parse_line(&mut self, n: usize, line: &str) -> Result<(), String> {
        let words: Vec<&str> = line.split(' ').collect();
        let number = |w: &str| w.parse::<u64>().map_err(|_| format!("bad number `{w}`"));
        let name = |w: &str| {
            if valid_file_name(w) {
                Ok(w.to_string())
            } else {
                Err(format!("bad file name `{w}`"))
            }
        };
        match (n, words.as_slice()) {
            (0, [magic, version]) if *magic == MANIFEST_MAGIC => {
                if *version != MANIFEST_VERSION.to_string() {
                    return Err(format!(
                        "manifest version {version}, this build reads {MANIFEST_VERSION}"
                    ));
                }
            }
            (0, _) => return Err("not a Ferrite manifest (bad first line)".into()),
            (1, ["generation", g]) => self.generation = number(g)?,
            (1, _) => return Err("second line must be `generation N`".into()),
            (_, ["base", file, "bytes", bytes, "keys", keys]) if self.incrs.is_empty() => {
                self.bases.push(BaseEntry {
                    file: name(file)?,
                    bytes: number(bytes)?,
                    keys: number(keys)?,
                })
            }
            (_, ["incr", file, kind]) => self.incrs.push(IncrEntry {
                file: name(file)?,
                kind: IncrKind::parse(kind).ok_or_else(|| format!("unknown log kind `{kind}`"))?,
            }),
            _ => return Err(format!("unexpected line `{line}`")),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_damage() {
        let m = Manifest {
            generation: 3,
            bases: vec![BaseEntry {
                file: "a.3.base.0".into(),
                bytes: 10,
                keys: 2,
            }],
            incrs: vec![IncrEntry {
                file: "a.3.incr".into(),
                kind: IncrKind::File,
            }],
        };
        let bytes = m.encode();
        assert_eq!(Manifest::decode(&bytes), Ok(m));
        for cut in 0..bytes.len() {
            assert!(Manifest::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
    }
}
