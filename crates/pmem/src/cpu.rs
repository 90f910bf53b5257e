//! CPU dispatch: which flush instruction, which SIMD width and which
//! non-temporal threshold the persist primitives use.
//!
//! The choice is made once, from CPUID and the platform's persistence domain,
//! and can be overridden for experiments through environment variables or
//! per region through [`crate::MapOptions::dispatch`].

use std::fmt;
use std::str::FromStr;
use std::sync::OnceLock;

use crate::error::{Error, Result};

/// Environment variable that forces a flush instruction
/// (`clwb`, `clflushopt`, `clflush`, `msync` or `none`).
pub const ENV_FLUSH: &str = "FERRITE_PMEM_FLUSH";
/// Environment variable that sets the non-temporal threshold in bytes
/// (`always` = 0, `never`, or a number of bytes).
pub const ENV_NT_THRESHOLD: &str = "FERRITE_PMEM_NT_THRESHOLD";
/// Environment variable that caps the SIMD width used for non-temporal copies
/// (`avx512`, `avx`, `sse2`).
pub const ENV_SIMD: &str = "FERRITE_PMEM_SIMD";
/// Environment variable that sets the size from which `copy_persist` splits
/// a copy with a helper thread (`never`, or a number of bytes).
pub const ENV_SPLIT_MIN: &str = "FERRITE_PMEM_SPLIT_MIN";

/// `copy_persist` of at least this many bytes is split between its caller
/// and a helper thread (`split.rs`): for small copies the hand-over
/// costs more than the second core saves, for large ones the second
/// core's store bandwidth wins (the sweep: `docs/results/pmem-persist.md`,
/// "Why 512 KiB"; override with `FERRITE_PMEM_SPLIT_MIN` where a machine's
/// sweep differs).
pub const SPLIT_MIN_DEFAULT: usize = 512 << 10;

/// Copies of at least this many bytes use non-temporal stores on real PM.
///
/// On Optane-class media a cached store to a line that is not in the cache
/// first reads the line from the media (read-for-ownership), so streaming
/// stores win from a few lines on; 256 B is one media line, and the figure
/// libpmem tuned on that hardware. We have no real PM to re-measure it.
pub const NT_THRESHOLD_DEFAULT: usize = 256;

/// Copies of at least this many bytes use non-temporal stores on emulated PM,
/// on CPUs other than AMD's, and on simulated PM everywhere (so a crash
/// seed replays the same stores on every machine).
///
/// Measured, not guessed: `ferrite-bench pmem` sweeps 64 B..4 KiB with both
/// paths (figure `nt_threshold_sweep_ops_per_s`). On DRAM behind tmpfs
/// on the Intel machine the project was first developed on, cached stores
/// and clwb won for copies of a few lines and streaming from this size on
/// (`docs/results/pmem-persist.md`, "Machine"); re-run the sweep on other
/// hardware and override with `FERRITE_PMEM_NT_THRESHOLD` if it differs.
pub const NT_THRESHOLD_EMULATED: usize = 768;

/// The emulated-PM threshold on AMD CPUs: every whole line streams.
///
/// On AMD Zen CPUs streaming beat cached stores + clwb at every size of
/// the sweep, 64 B included (`docs/results/pmem-persist.md`).
pub const NT_THRESHOLD_EMULATED_AMD: usize = 64;

/// Size of a CPU cache line, the unit of every flush.
pub const CACHE_LINE: usize = 64;

/// How a cache line is written back to the persistence domain.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FlushInstruction {
    /// `clwb`: writes the line back and may keep it cached. Weakly ordered:
    /// durable only after a later fence on the same thread.
    Clwb,
    /// `clflushopt`: writes back and invalidates. Weakly ordered like `clwb`.
    Clflushopt,
    /// `clflush`: writes back and invalidates; ordered with other stores and
    /// flushes, so no fence is needed after it.
    Clflush,
    /// `msync(MS_SYNC)` of the touched pages: the portable fallback off
    /// x86_64, and the "memcpy + msync" baseline on it.
    Msync,
    /// No flush at all: correct only where CPU caches are inside the
    /// persistence domain (eADR), or for experiments.
    None,
}

impl FlushInstruction {
    /// Every variant, strongest-first, for experiments that try each.
    pub const ALL: [FlushInstruction; 5] = [
        FlushInstruction::Clwb,
        FlushInstruction::Clflushopt,
        FlushInstruction::Clflush,
        FlushInstruction::Msync,
        FlushInstruction::None,
    ];

    /// The lower-case name used in configuration and reports.
    pub fn name(self) -> &'static str {
        match self {
            FlushInstruction::Clwb => "clwb",
            FlushInstruction::Clflushopt => "clflushopt",
            FlushInstruction::Clflush => "clflush",
            FlushInstruction::Msync => "msync",
            FlushInstruction::None => "none",
        }
    }

    /// Whether this CPU (or platform) can execute the instruction.
    pub fn is_supported(self) -> bool {
        let features = CpuFeatures::get();
        match self {
            FlushInstruction::Clwb => features.clwb,
            FlushInstruction::Clflushopt => features.clflushopt,
            FlushInstruction::Clflush => features.clflush,
            FlushInstruction::Msync | FlushInstruction::None => true,
        }
    }

    /// Whether a fence is needed after the flush to order it (true for the
    /// weakly ordered instructions).
    pub fn needs_fence(self) -> bool {
        matches!(self, FlushInstruction::Clwb | FlushInstruction::Clflushopt)
    }
}

impl fmt::Display for FlushInstruction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for FlushInstruction {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        FlushInstruction::ALL
            .into_iter()
            .find(|kind| kind.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| Error::Config {
                reason: format!(
                    "unknown flush instruction {s:?}; expected clwb, clflushopt, clflush, msync or none"
                ),
            })
    }
}

/// Width of the vector registers used for non-temporal copies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Simd {
    /// 16-byte SSE2 stores (baseline on x86_64).
    Sse2,
    /// 32-byte AVX stores.
    Avx,
    /// 64-byte AVX-512 stores: one store per cache line.
    Avx512,
}

impl Simd {
    /// The lower-case name used in configuration and reports.
    pub fn name(self) -> &'static str {
        match self {
            Simd::Sse2 => "sse2",
            Simd::Avx => "avx",
            Simd::Avx512 => "avx512",
        }
    }
}

impl FromStr for Simd {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        [Simd::Sse2, Simd::Avx, Simd::Avx512]
            .into_iter()
            .find(|simd| simd.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| Error::Config {
                reason: format!("unknown SIMD width {s:?}; expected sse2, avx or avx512"),
            })
    }
}

/// What CPUID (and sysfs) said about this machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuFeatures {
    /// `clflush` is available.
    pub clflush: bool,
    /// `clflushopt` is available.
    pub clflushopt: bool,
    /// `clwb` is available.
    pub clwb: bool,
    /// AVX (256-bit) stores are available and enabled by the OS.
    pub avx: bool,
    /// AVX-512F is available and enabled by the OS.
    pub avx512f: bool,
    /// An NVDIMM region reports `cpu_cache` as its persistence domain (eADR).
    pub eadr: bool,
    /// The CPU's maker (CPUID leaf 0), which some measured defaults follow.
    pub vendor: Vendor,
}

/// Who made the CPU, as far as the measured defaults care.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Vendor {
    /// `GenuineIntel`.
    Intel,
    /// `AuthenticAMD` or `HygonGenuine` (Zen cores).
    Amd,
    /// Anything else, or not x86_64.
    Other,
}

impl Vendor {
    /// The vendor named by the 12-byte CPUID vendor string.
    pub fn from_cpuid_name(name: &[u8]) -> Vendor {
        match name {
            b"GenuineIntel" => Vendor::Intel,
            b"AuthenticAMD" | b"HygonGenuine" => Vendor::Amd,
            _ => Vendor::Other,
        }
    }
}

impl CpuFeatures {
    /// The features of this machine, detected once.
    pub fn get() -> CpuFeatures {
        static FEATURES: OnceLock<CpuFeatures> = OnceLock::new();
        *FEATURES.get_or_init(CpuFeatures::detect)
    }

    #[cfg(target_arch = "x86_64")]
    fn detect() -> CpuFeatures {
        use std::arch::x86_64::__cpuid_count;
        let leaf0 = __cpuid_count(0, 0);
        let leaf1 = __cpuid_count(1, 0);
        let leaf7 = __cpuid_count(7, 0);
        let mut name = [0u8; 12];
        for (chunk, register) in name.chunks_mut(4).zip([leaf0.ebx, leaf0.edx, leaf0.ecx]) {
            chunk.copy_from_slice(&register.to_le_bytes());
        }
        CpuFeatures {
            clflush: leaf1.edx & (1 << 19) != 0,
            clflushopt: leaf7.ebx & (1 << 23) != 0,
            clwb: leaf7.ebx & (1 << 24) != 0,
            avx: std::arch::is_x86_feature_detected!("avx"),
            avx512f: std::arch::is_x86_feature_detected!("avx512f"),
            eadr: detect_eadr(),
            vendor: Vendor::from_cpuid_name(&name),
        }
    }

    #[cfg(not(target_arch = "x86_64"))]
    fn detect() -> CpuFeatures {
        CpuFeatures {
            clflush: false,
            clflushopt: false,
            clwb: false,
            avx: false,
            avx512f: false,
            eadr: detect_eadr(),
            vendor: Vendor::Other,
        }
    }
}

/// True when every NVDIMM region the kernel knows reports its persistence
/// domain as `cpu_cache` (eADR: caches are flushed on power failure).
fn detect_eadr() -> bool {
    let Ok(entries) = std::fs::read_dir("/sys/bus/nd/devices") else {
        return false;
    };
    let mut regions = 0;
    let mut cpu_cache = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name.to_string_lossy().starts_with("region") {
            continue;
        }
        regions += 1;
        let domain =
            std::fs::read_to_string(entry.path().join("persistence_domain")).unwrap_or_default();
        if domain.trim() == "cpu_cache" {
            cpu_cache += 1;
        }
    }
    regions > 0 && regions == cpu_cache
}

/// The choices the persist primitives make, fixed per region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dispatch {
    /// Instruction used to write cache lines back.
    pub flush: FlushInstruction,
    /// Copies and sets of at least this many bytes use non-temporal stores;
    /// `usize::MAX` disables them.
    pub nt_threshold: usize,
    /// Vector width of the non-temporal path.
    pub simd: Simd,
    /// `copy_persist` of at least this many bytes is split with a helper
    /// thread; `usize::MAX` keeps every copy on its caller.
    pub split_min: usize,
}

impl Dispatch {
    /// The best choice for this machine, ignoring the environment.
    ///
    /// clwb > clflushopt > clflush, the widest SIMD the CPU has, and the
    /// measured non-temporal threshold. Off x86_64: msync and no
    /// non-temporal stores.
    pub fn detect() -> Dispatch {
        let features = CpuFeatures::get();
        let flush = if !cfg!(target_arch = "x86_64") {
            FlushInstruction::Msync
        } else if features.clwb {
            FlushInstruction::Clwb
        } else if features.clflushopt {
            FlushInstruction::Clflushopt
        } else {
            FlushInstruction::Clflush
        };
        let simd = if features.avx512f {
            Simd::Avx512
        } else if features.avx {
            Simd::Avx
        } else {
            Simd::Sse2
        };
        let nt_threshold = if cfg!(target_arch = "x86_64") {
            NT_THRESHOLD_DEFAULT
        } else {
            usize::MAX
        };
        Dispatch {
            flush,
            nt_threshold,
            simd,
            split_min: if cfg!(target_arch = "x86_64") {
                SPLIT_MIN_DEFAULT
            } else {
                usize::MAX
            },
        }
    }

    /// [`Dispatch::detect`] with the `FERRITE_PMEM_*` environment overrides
    /// applied. An override the CPU cannot honour is an error.
    pub fn from_env() -> Result<Dispatch> {
        Dispatch::from_lookup(|name| std::env::var(name).ok())
    }

    /// [`Dispatch::detect`] with overrides read through `lookup` (called with
    /// the `FERRITE_PMEM_*` variable names), so tests need not touch the
    /// process environment.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Dispatch> {
        let mut dispatch = Dispatch::detect();
        if let Some(value) = lookup(ENV_FLUSH) {
            dispatch = dispatch.with_flush(value.parse()?)?;
        }
        if let Some(value) = lookup(ENV_NT_THRESHOLD) {
            dispatch.nt_threshold = parse_nt_threshold(&value)?;
        }
        if let Some(value) = lookup(ENV_SIMD) {
            dispatch = dispatch.with_simd(value.parse()?)?;
        }
        if let Some(value) = lookup(ENV_SPLIT_MIN) {
            dispatch.split_min = parse_split_min(&value)?;
        }
        Ok(dispatch)
    }

    /// The process-wide default: [`Dispatch::from_env`], or
    /// [`Dispatch::detect`] with a warning if the environment asks for
    /// something this CPU cannot do. Computed once.
    pub fn global() -> Dispatch {
        static GLOBAL: OnceLock<Dispatch> = OnceLock::new();
        *GLOBAL.get_or_init(|| match Dispatch::from_env() {
            Ok(dispatch) => dispatch,
            Err(err) => {
                tracing::warn!("ignoring PM dispatch override: {err}");
                Dispatch::detect()
            }
        })
    }

    /// The default for a region of the given kind: [`Dispatch::global`], with
    /// the non-temporal threshold measured for that medium unless the
    /// environment set one.
    pub fn for_mode(mode: crate::MapMode) -> Dispatch {
        let mut dispatch = Dispatch::global();
        let overridden = std::env::var_os(ENV_NT_THRESHOLD).is_some();
        if !overridden && dispatch.nt_threshold != usize::MAX {
            dispatch.nt_threshold = match mode {
                crate::MapMode::RealPm => NT_THRESHOLD_DEFAULT,
                crate::MapMode::Emulated if CpuFeatures::get().vendor == Vendor::Amd => {
                    NT_THRESHOLD_EMULATED_AMD
                }
                crate::MapMode::Emulated | crate::MapMode::Simulated => NT_THRESHOLD_EMULATED,
            };
        }
        dispatch
    }

    /// This dispatch with another flush instruction, if the CPU has it.
    pub fn with_flush(mut self, flush: FlushInstruction) -> Result<Dispatch> {
        if !flush.is_supported() {
            return Err(Error::Config {
                reason: format!("this CPU does not support the {flush} instruction"),
            });
        }
        if flush == FlushInstruction::Msync {
            // msync writes back whole pages; streaming stores would bypass
            // nothing it needs, so keep the baseline a plain memcpy.
            self.nt_threshold = usize::MAX;
        }
        self.flush = flush;
        Ok(self)
    }

    /// This dispatch with another non-temporal threshold.
    pub fn with_nt_threshold(mut self, nt_threshold: usize) -> Dispatch {
        self.nt_threshold = nt_threshold;
        self
    }

    /// This dispatch with another split size (`usize::MAX`: never split).
    pub fn with_split_min(mut self, split_min: usize) -> Dispatch {
        self.split_min = split_min;
        self
    }

    /// This dispatch with another SIMD width, if the CPU has it.
    pub fn with_simd(mut self, simd: Simd) -> Result<Dispatch> {
        let features = CpuFeatures::get();
        let supported = match simd {
            Simd::Sse2 => cfg!(target_arch = "x86_64"),
            Simd::Avx => features.avx,
            Simd::Avx512 => features.avx512f,
        };
        if !supported {
            return Err(Error::Config {
                reason: format!("this CPU does not support {} stores", simd.name()),
            });
        }
        self.simd = simd;
        Ok(self)
    }

    /// Whether a copy of `len` bytes takes the non-temporal path.
    #[inline]
    pub fn uses_nt(&self, len: usize) -> bool {
        len >= self.nt_threshold
    }
}

impl fmt::Display for Dispatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "flush={} simd={} nt_threshold=",
            self.flush,
            self.simd.name()
        )?;
        if self.nt_threshold == usize::MAX {
            f.write_str("never")?;
        } else {
            write!(f, "{}", self.nt_threshold)?;
        }
        f.write_str(" split_min=")?;
        if self.split_min == usize::MAX {
            f.write_str("never")
        } else {
            write!(f, "{}", self.split_min)
        }
    }
}

/// Parses `always`, `never` or a byte count.
pub fn parse_nt_threshold(value: &str) -> Result<usize> {
    match value.trim() {
        "always" => Ok(0),
        _ => parse_bytes_or_never(value, "non-temporal threshold", "always, never"),
    }
}

/// Parses `never` or a byte count.
pub fn parse_split_min(value: &str) -> Result<usize> {
    parse_bytes_or_never(value, "split size", "never")
}

/// `never` as `usize::MAX`, else a byte count; the error names `what` and
/// the words it takes besides a number.
fn parse_bytes_or_never(value: &str, what: &str, words: &str) -> Result<usize> {
    match value.trim() {
        "never" => Ok(usize::MAX),
        number => number.parse().map_err(|_| Error::Config {
            reason: format!("bad {what} {value:?}; expected {words} or a byte count"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for kind in FlushInstruction::ALL {
            assert_eq!(kind.name().parse::<FlushInstruction>().ok(), Some(kind));
        }
        assert!("clflush2".parse::<FlushInstruction>().is_err());
        assert_eq!(parse_nt_threshold("always").ok(), Some(0));
        assert_eq!(parse_nt_threshold("never").ok(), Some(usize::MAX));
        assert_eq!(parse_nt_threshold("4096").ok(), Some(4096));
        assert!(parse_nt_threshold("lots").is_err());
    }

    #[test]
    fn vendors_come_from_the_cpuid_name() {
        assert_eq!(Vendor::from_cpuid_name(b"GenuineIntel"), Vendor::Intel);
        assert_eq!(Vendor::from_cpuid_name(b"AuthenticAMD"), Vendor::Amd);
        assert_eq!(Vendor::from_cpuid_name(b"HygonGenuine"), Vendor::Amd);
        assert_eq!(Vendor::from_cpuid_name(b"KVMKVMKVM\0\0\0"), Vendor::Other);
    }

    #[test]
    fn thresholds_follow_the_medium_and_the_vendor() {
        if std::env::var_os(ENV_NT_THRESHOLD).is_some()
            || Dispatch::global().nt_threshold == usize::MAX
        {
            return; // the environment chose; nothing of ours to check
        }
        let emulated = Dispatch::for_mode(crate::MapMode::Emulated).nt_threshold;
        let expected = match CpuFeatures::get().vendor {
            Vendor::Amd => NT_THRESHOLD_EMULATED_AMD,
            Vendor::Intel | Vendor::Other => NT_THRESHOLD_EMULATED,
        };
        assert_eq!(emulated, expected);
        // Simulated PM is the same on every machine, so seeds replay.
        let simulated = Dispatch::for_mode(crate::MapMode::Simulated).nt_threshold;
        assert_eq!(simulated, NT_THRESHOLD_EMULATED);
        assert_eq!(
            Dispatch::for_mode(crate::MapMode::RealPm).nt_threshold,
            NT_THRESHOLD_DEFAULT
        );
    }

    #[test]
    fn detect_prefers_the_weakest_ordered_flush() {
        let features = CpuFeatures::get();
        let dispatch = Dispatch::detect();
        if cfg!(target_arch = "x86_64") {
            let expected = if features.clwb {
                FlushInstruction::Clwb
            } else if features.clflushopt {
                FlushInstruction::Clflushopt
            } else {
                FlushInstruction::Clflush
            };
            assert_eq!(dispatch.flush, expected);
        } else {
            assert_eq!(dispatch.flush, FlushInstruction::Msync);
        }
    }

    #[test]
    fn override_is_honoured_or_refused() {
        let dispatch = Dispatch::detect();
        for kind in FlushInstruction::ALL {
            match dispatch.with_flush(kind) {
                Ok(forced) => {
                    assert!(kind.is_supported());
                    assert_eq!(forced.flush, kind);
                }
                Err(err) => {
                    assert!(!kind.is_supported());
                    assert!(err.to_string().contains(kind.name()));
                }
            }
        }
        let msync = dispatch.with_flush(FlushInstruction::Msync);
        assert_eq!(msync.map(|d| d.nt_threshold).ok(), Some(usize::MAX));
    }

    #[test]
    fn environment_overrides_apply() {
        let vars = |name: &str| match name {
            ENV_FLUSH => Some("clflush".to_string()),
            ENV_NT_THRESHOLD => Some("never".to_string()),
            ENV_SIMD => Some("sse2".to_string()),
            _ => None,
        };
        if cfg!(target_arch = "x86_64") && FlushInstruction::Clflush.is_supported() {
            let dispatch = Dispatch::from_lookup(vars).expect("supported override");
            assert_eq!(dispatch.flush, FlushInstruction::Clflush);
            assert_eq!(dispatch.nt_threshold, usize::MAX);
            assert_eq!(dispatch.simd, Simd::Sse2);
        }
        let bad = Dispatch::from_lookup(|name| (name == ENV_FLUSH).then(|| "sfence".to_string()));
        assert!(bad.is_err());
        let none = Dispatch::from_lookup(|_| None).expect("no overrides");
        assert_eq!(none, Dispatch::detect());
    }
}
