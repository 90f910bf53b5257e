//! The media model: what Optane-class media would cost, charged on emulated
//! PM by spinning.
//!
//! Emulated PM is DRAM behind a file mapping, so flushes, fences and stores
//! cost what they cost on DRAM, and every byte is written at DRAM speed.
//! Hardware-counter emulators need bare metal; this model lives in the PM
//! layer instead and charges, as Quartz does for a flush, by spinning on the
//! clock when a thread drains:
//!
//! - **Writes.** The media accounting (`stats.rs`) turns flushed and
//!   streamed cache lines into 256-byte media lines through the DIMM's
//!   write-combining buffer. The media lines a thread opens occupy the DIMM
//!   for `256 B / dimm_write_gbps` each, and each read-modify-write of a
//!   partial line for `256 B / dimm_read_gbps` more, back to back from when
//!   the first of them since the thread's previous drain was issued (the
//!   drain reserves them): every emulated DIMM has a busy-until clock
//!   (modules interleaved every `interleave_bytes`), so threads writing to
//!   one DIMM share its bandwidth, and the DIMM works while the thread goes
//!   on. At a drain the
//!   thread waits until its lines' reservations are within the write queue
//!   (`write_queue_lines`): a lone small persist returns at DRAM speed, as
//!   stores are durable once in the memory controller's queue (ADR), while
//!   a stream of them runs at the DIMM's write bandwidth, whether it drains
//!   after every write or once for many.
//! - **Reads** made through the PM API (`read`, `load_u64`; not the bytes
//!   read in place through `read_ptr`): the first 256-byte line of a read
//!   costs the random or sequential load latency (sequential when it follows
//!   the thread's previous read; the line read last is in the DIMM's read
//!   buffer and free), each further line its share of the DIMM's read
//!   bandwidth; DRAM's own cost for the same, measured once at start-up, is
//!   subtracted, since the copy itself already paid it.
//!
//! The model never changes what is stored or when it is persisted: it only
//! delays the thread after the fact. It is refused on real PM (DAX with
//! `MAP_SYNC`), where the media's costs are real.
//!
//! Selected by `FERRITE_PMEM_MODEL=optane` (or [`select`]); the parameters
//! ([`MediaParams`]) are overridable by `FERRITE_PMEM_MODEL_<FIELD>`
//! variables, e.g. `FERRITE_PMEM_MODEL_DIMMS=6`.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};

use crate::cpu::FlushInstruction;
use crate::error::{Error, Result};
use crate::medium::MapMode;
use crate::stats::{MediaRead, MediaWork, MEDIA_LINE};

/// The environment variable that selects the model: `off` or `optane`.
pub const ENV_MODEL: &str = "FERRITE_PMEM_MODEL";

/// Which media model a region runs under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModelChoice {
    /// DRAM costs only (the default).
    Off,
    /// Optane DC PMM (first generation) costs, [`MediaParams::optane`].
    Optane,
}

impl ModelChoice {
    /// Parses `off` / `none` / empty or `optane`.
    pub fn parse(text: &str) -> Result<ModelChoice> {
        match text.trim().to_ascii_lowercase().as_str() {
            "" | "off" | "none" => Ok(ModelChoice::Off),
            "optane" => Ok(ModelChoice::Optane),
            other => Err(Error::Config {
                reason: format!("{ENV_MODEL}={other}: expected off or optane"),
            }),
        }
    }

    /// `off` or `optane`.
    pub fn name(self) -> &'static str {
        match self {
            ModelChoice::Off => "off",
            ModelChoice::Optane => "optane",
        }
    }
}

/// The model's parameters, each with its source.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MediaParams {
    /// Emulated modules, interleaved every `interleave_bytes`. Default 1:
    /// the single-module figures of Izraelevitz et al. 2019 ("Basic
    /// Performance Measurements of the Intel Optane DC PMM", "Optane-NI").
    pub dimms: u32,
    /// Interleaving granularity across modules: 4 KiB (Izraelevitz et al.
    /// 2019, §2: the platform interleaves modules every 4 KiB).
    pub interleave_bytes: u64,
    /// Write bandwidth of one module, GB/s: 2.3 (Izraelevitz et al. 2019,
    /// abstract: "max write bandwidth 2.3 GB/s" for a single module).
    pub dimm_write_gbps: f64,
    /// Read bandwidth of one module, GB/s: 6.6 (same source); also the rate
    /// at which a read-modify-write reads its partial line.
    pub dimm_read_gbps: f64,
    /// Idle latency of a random load, ns: 305 (Izraelevitz et al. 2019 §3.2;
    /// Yang et al., FAST'20, "An Empirical Guide to the Behavior and Use of
    /// Scalable Persistent Memory", Fig. 2).
    pub read_random_ns: f64,
    /// Idle latency of a sequential load, ns: 169 (same sources; adjacent
    /// requests merge into one 256-byte media access).
    pub read_seq_ns: f64,
    /// Media lines a module may owe before a drain waits: 16 (4 KiB). An
    /// assumption standing for the memory controller's write-pending queue
    /// and the module's buffer, which FAST'20 §2 describes but does not size
    /// in lines; it sets how long a burst runs at DRAM speed.
    pub write_queue_lines: u64,
    /// Extra latency of a drain over DRAM's, ns: 0. Stores are durable once
    /// in the memory controller's queue, so a persist's latency is close to
    /// DRAM's (FAST'20 §3.1, Fig. 2: write latencies of DRAM and Optane are
    /// within tens of nanoseconds); a knob for other media.
    pub drain_extra_ns: f64,
    /// Whether a line written back with `clwb` stays in the cache, so that
    /// reading it back through the API is a cache hit the model does not
    /// charge: true, as the instruction is defined (Intel's Software
    /// Developer's Manual, vol. 2, CLWB: the line "may be retained in the
    /// cache hierarchy in non-modified state"; FAST'20 §5.2 uses it for
    /// that reason). `clflushopt` and `clflush` always invalidate the line
    /// and non-temporal stores bypass the cache, so reads after them miss
    /// to the media. Some first-generation parts evict the line on `clwb`
    /// too: `FERRITE_PMEM_MODEL_CLWB_KEEPS_LINES=0` models those, on which
    /// `clwb` and `clflushopt` cost the same.
    pub clwb_keeps_lines: bool,
}

impl MediaParams {
    /// First-generation Optane DC PMM, by the sources on each field.
    pub fn optane() -> MediaParams {
        MediaParams {
            dimms: 1,
            interleave_bytes: 4096,
            dimm_write_gbps: 2.3,
            dimm_read_gbps: 6.6,
            read_random_ns: 305.0,
            read_seq_ns: 169.0,
            write_queue_lines: 16,
            drain_extra_ns: 0.0,
            clwb_keeps_lines: true,
        }
    }

    /// [`MediaParams::optane`] with `FERRITE_PMEM_MODEL_<FIELD>` overrides
    /// (field names upper-cased), e.g. `FERRITE_PMEM_MODEL_DIMMS=6`.
    pub fn from_env() -> Result<MediaParams> {
        let mut params = MediaParams::optane();
        params.override_with(|name| std::env::var(format!("{ENV_MODEL}_{name}")).ok())?;
        Ok(params)
    }

    /// Applies overrides looked up by upper-case field name.
    pub fn override_with(&mut self, lookup: impl Fn(&str) -> Option<String>) -> Result<()> {
        fn number(name: &str, text: &str) -> Result<f64> {
            match text.trim().parse::<f64>() {
                Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
                _ => Err(Error::Config {
                    reason: format!("{ENV_MODEL}_{name}={text}: expected a non-negative number"),
                }),
            }
        }
        let get = |name: &str| lookup(name).map(|text| number(name, &text)).transpose();
        if let Some(v) = get("DIMMS")? {
            self.dimms = (v as u32).max(1);
        }
        if let Some(v) = get("INTERLEAVE_BYTES")? {
            self.interleave_bytes = (v as u64).max(MEDIA_LINE as u64);
        }
        for (name, field) in [
            ("DIMM_WRITE_GBPS", &mut self.dimm_write_gbps),
            ("DIMM_READ_GBPS", &mut self.dimm_read_gbps),
        ] {
            if let Some(v) = get(name)? {
                *field = v.max(1e-3);
            }
        }
        for (name, field) in [
            ("READ_RANDOM_NS", &mut self.read_random_ns),
            ("READ_SEQ_NS", &mut self.read_seq_ns),
            ("DRAIN_EXTRA_NS", &mut self.drain_extra_ns),
        ] {
            if let Some(v) = get(name)? {
                *field = v;
            }
        }
        if let Some(v) = get("WRITE_QUEUE_LINES")? {
            self.write_queue_lines = v as u64;
        }
        if let Some(v) = get("CLWB_KEEPS_LINES")? {
            self.clwb_keeps_lines = v != 0.0;
        }
        Ok(())
    }

    /// The fields as (name, value) pairs, for reports.
    pub fn fields(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("dimms", f64::from(self.dimms)),
            ("interleave_bytes", self.interleave_bytes as f64),
            ("dimm_write_gbps", self.dimm_write_gbps),
            ("dimm_read_gbps", self.dimm_read_gbps),
            ("read_random_ns", self.read_random_ns),
            ("read_seq_ns", self.read_seq_ns),
            ("write_queue_lines", self.write_queue_lines as f64),
            ("drain_extra_ns", self.drain_extra_ns),
            (
                "clwb_keeps_lines",
                f64::from(u8::from(self.clwb_keeps_lines)),
            ),
        ]
    }
}

/// DRAM's costs for what the model charges, measured at start-up.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DramCosts {
    /// A dependent load from a random line of a large buffer, ns.
    pub random_ns: f64,
    /// A dependent load from the next 256-byte line, ns.
    pub seq_ns: f64,
    /// Copying one 256-byte line as part of a large copy, ns.
    pub line_copy_ns: f64,
}

impl DramCosts {
    /// Measures DRAM on this machine (about 30 ms).
    pub fn measure() -> DramCosts {
        crate::model_dram::measure()
    }
}

/// The host's own cost of the persist instructions, measured at start-up
/// on DRAM: what a thread already spent issuing a drain's flushes and
/// fence, which the model counts toward the media's time for them rather
/// than charging on top (see [`MediaModel`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct HostCosts {
    /// One cache line stored and written back with `clwb`, ns.
    pub clwb_line_ns: f64,
    /// Likewise with `clflushopt`.
    pub clflushopt_line_ns: f64,
    /// Likewise with `clflush`.
    pub clflush_line_ns: f64,
    /// One `sfence` after a flushed line, ns.
    pub fence_ns: f64,
}

impl HostCosts {
    /// Measures this machine's persist instructions (about 20 ms);
    /// instructions the CPU lacks cost 0.
    pub fn measure() -> HostCosts {
        crate::model_dram::measure_host()
    }

    /// The host's cost of writing back one line with `flush`.
    pub fn line_ns(&self, flush: FlushInstruction) -> f64 {
        match flush {
            FlushInstruction::Clwb => self.clwb_line_ns,
            FlushInstruction::Clflushopt => self.clflushopt_line_ns,
            FlushInstruction::Clflush => self.clflush_line_ns,
            FlushInstruction::Msync | FlushInstruction::None => 0.0,
        }
    }
}

/// An emulated set of modules: parameters, DRAM's costs, and a busy-until
/// clock per module.
///
/// **What the host already paid.** A drain's lines occupy the module from
/// when the thread issued them, not from when the model learns of them
/// (after the flushes): a reservation starts the host's measured cost of
/// those flushes earlier ([`HostCosts`]), and a drain waits that much less
/// for the fence that follows it. So an isolated persist costs what the
/// media would take, or what the host took if that is more, not the sum of
/// the two: the charge is the media's time minus the host's, floored at
/// zero.
///
/// **Flush instructions** (Intel's Software Developer's Manual, vol. 2,
/// CLFLUSH, CLFLUSHOPT and CLWB): `clflush` is ordered with every other
/// `clflush`, so each line waits for the one before it to be written back;
/// `clflushopt` and `clwb` are weakly ordered and overlap until the next
/// fence. The model therefore lets the write queue absorb
/// a burst only for `clflushopt` and `clwb`: a drain of `clflush`ed lines
/// waits until the module has written all of them. `clflushopt` also
/// invalidates the line, so a later read of it misses to the media, while
/// `clwb` keeps it cached ([`MediaParams::clwb_keeps_lines`]): each thread
/// remembers the range it last wrote back with a cache-keeping `clwb`, and
/// a read inside that range is a hit the model does not charge; every other
/// read made through the API is charged as a miss to the media.
#[derive(Debug)]
pub struct MediaModel {
    params: MediaParams,
    dram: DramCosts,
    host: HostCosts,
    line_write_ns: f64,
    line_read_ns: f64,
    clock: crate::model_clock::Clock,
    busy_until: Box<[AtomicU64]>,
    /// Reads charged as misses to the media (cache hits are not).
    read_misses: AtomicU64,
}

impl MediaModel {
    /// A model with `params`, charging on top of `dram`.
    pub fn new(params: MediaParams, dram: DramCosts) -> MediaModel {
        let line = MEDIA_LINE as f64;
        MediaModel {
            params,
            dram,
            host: HostCosts::default(),
            line_write_ns: line / params.dimm_write_gbps,
            line_read_ns: line / params.dimm_read_gbps,
            clock: crate::model_clock::Clock::new(),
            busy_until: (0..params.dimms.max(1))
                .map(|_| AtomicU64::new(0))
                .collect(),
            read_misses: AtomicU64::new(0),
        }
    }

    /// This model with the host's persist costs `host` credited (none by
    /// default).
    pub fn with_host(mut self, host: HostCosts) -> MediaModel {
        self.host = host;
        self
    }

    /// The host's persist costs it credits.
    pub fn host(&self) -> HostCosts {
        self.host
    }

    /// Whether lines written back with `flush` stay cached, so that a read
    /// of them afterwards hits ([`MediaParams::clwb_keeps_lines`]).
    pub fn keeps_lines(&self, flush: FlushInstruction) -> bool {
        flush == FlushInstruction::Clwb && self.params.clwb_keeps_lines
    }

    /// The parameters.
    pub fn params(&self) -> MediaParams {
        self.params
    }

    /// DRAM's costs it subtracts.
    pub fn dram(&self) -> DramCosts {
        self.dram
    }

    fn now_ns(&self) -> u64 {
        self.clock.now_ns()
    }

    /// Nanoseconds of module time `work` takes.
    pub fn write_ns(&self, work: MediaWork) -> f64 {
        work.lines as f64 * self.line_write_ns + work.read_modify_writes as f64 * self.line_read_ns
    }

    /// When `flushed` lines written back with `flush` just now were
    /// issued: the host's measured cost of them earlier.
    pub(crate) fn issue_time(&self, flushed: u64, flush: FlushInstruction) -> u64 {
        let issued = (flushed as f64 * self.host.line_ns(flush)) as u64;
        self.now_ns().saturating_sub(issued)
    }

    /// Reserves the module's time for `work`, whose requests began to be
    /// issued at `start` (ns since the model's epoch; `None`: they are
    /// `flushed` lines written back with `flush` just now), back to back
    /// after the module's earlier work: the module works while the thread
    /// goes on. Returns when the reservation ends (0 for no work) and the
    /// time it read, if it read one (0 otherwise), for the drain to reuse.
    pub(crate) fn reserve(
        &self,
        work: MediaWork,
        start: Option<u64>,
        flushed: u64,
        flush: FlushInstruction,
    ) -> (u64, u64) {
        let cost = self.write_ns(work);
        if cost <= 0.0 {
            return (0, 0);
        }
        let (begin, read) = match start {
            Some(start) => (start, 0),
            None => {
                let read = self.now_ns();
                let issued = (flushed as f64 * self.host.line_ns(flush)) as u64;
                (read.saturating_sub(issued), read)
            }
        };
        let dimm = (work.last_line * MEDIA_LINE as u64 / self.params.interleave_bytes) as usize
            % self.busy_until.len();
        let clock = &self.busy_until[dimm];
        let mut busy = clock.load(Relaxed);
        loop {
            let end = busy.max(begin) + cost as u64;
            match clock.compare_exchange_weak(busy, end, Relaxed, Relaxed) {
                Ok(_) => return (end, read),
                Err(seen) => busy = seen,
            }
        }
    }

    /// A drain: spins until the thread's reservations ending at `end` fit
    /// in the write queue (`serial`: until they are written), less the
    /// fence the caller issues next, plus the drain's extra latency.
    /// `read` is a time the caller read just before (0 for none).
    pub(crate) fn wait_for(&self, end: u64, serial: bool, read: u64) {
        let queue = if serial {
            0.0
        } else {
            self.params.write_queue_lines as f64 * self.line_write_ns
        };
        let slack = (queue + self.host.fence_ns) as u64;
        let target = end.saturating_sub(slack);
        let extra = self.params.drain_extra_ns;
        if (target == 0 || target <= read) && extra <= 0.0 {
            return;
        }
        let now = self.now_ns();
        if target <= now && extra <= 0.0 {
            return;
        }
        let until = target.max(now) as f64 + extra;
        self.clock.spin_until(until as u64);
    }

    /// Nanoseconds a read of `read`'s lines costs beyond DRAM's.
    pub fn read_ns(&self, read: MediaRead) -> f64 {
        let first = if read.random > 0 {
            (self.params.read_random_ns - self.dram.random_ns).max(0.0)
        } else if read.sequential > 0 {
            (self.params.read_seq_ns - self.dram.seq_ns).max(0.0)
        } else {
            0.0
        };
        // Lines after the first stream at the module's read bandwidth.
        let more = (read.random + read.sequential).saturating_sub(1) as f64;
        first + more * (self.line_read_ns - self.dram.line_copy_ns).max(0.0)
    }

    /// Reads through the API the model has charged as misses to the media
    /// (reads of lines a thread kept cached with `clwb` are hits, not
    /// counted).
    pub fn read_misses(&self) -> u64 {
        self.read_misses.load(Relaxed)
    }

    /// Charges a read made through the API.
    pub(crate) fn charge_read(&self, read: MediaRead) {
        self.read_misses.fetch_add(1, Relaxed);
        let ns = self.read_ns(read);
        if ns >= 1.0 {
            self.clock.spin_until(self.now_ns() + ns as u64);
        }
    }
}

/// `ModelChoice` set by [`select`]: 0 unset (the environment decides).
static SELECTED: AtomicU8 = AtomicU8::new(0);

/// Selects the media model for regions mapped from now on, overriding
/// `FERRITE_PMEM_MODEL` (the benchmarks' `--model`).
pub fn select(choice: ModelChoice) {
    let code = match choice {
        ModelChoice::Off => 1,
        ModelChoice::Optane => 2,
    };
    SELECTED.store(code, Relaxed);
}

/// The process-wide choice: [`select`]'s, else `FERRITE_PMEM_MODEL`'s.
pub fn selected() -> ModelChoice {
    match SELECTED.load(Relaxed) {
        1 => ModelChoice::Off,
        2 => ModelChoice::Optane,
        _ => {
            static FROM_ENV: OnceLock<ModelChoice> = OnceLock::new();
            *FROM_ENV.get_or_init(|| {
                let text = std::env::var(ENV_MODEL).unwrap_or_default();
                ModelChoice::parse(&text).unwrap_or_else(|err| {
                    tracing::error!("{err}; the media model stays off");
                    ModelChoice::Off
                })
            })
        }
    }
}

/// Refuses a model on real PM: its costs would be charged on top of the
/// media's real ones, and a reader of the figures would take them for
/// measurements. Emulated and simulated PM may run under any model.
pub fn check_model_for_mode(choice: ModelChoice, mode: MapMode) -> Result<()> {
    if choice != ModelChoice::Off && mode == MapMode::RealPm {
        return Err(Error::Config {
            reason: format!(
                "{ENV_MODEL}={} is refused on real persistent memory (DAX with MAP_SYNC): \
                 the model emulates media costs that real PM already has",
                choice.name()
            ),
        });
    }
    Ok(())
}

/// The process-wide Optane model, made (and announced) on first use.
static OPTANE: OnceLock<std::result::Result<Arc<MediaModel>, String>> = OnceLock::new();

fn optane() -> Result<Arc<MediaModel>> {
    let made = OPTANE.get_or_init(|| {
        let params = MediaParams::from_env().map_err(|err| err.to_string())?;
        let model = MediaModel::new(params, DramCosts::measure()).with_host(HostCosts::measure());
        tracing::warn!(
            params = ?model.params(),
            dram = ?model.dram(),
            host = ?model.host(),
            "pmem media model 'optane' is on: drains and reads spin for emulated Optane media costs"
        );
        Ok(Arc::new(model))
    });
    made.clone().map_err(|reason| Error::Config { reason })
}

/// The model a region of `mode` runs under for `choice`, or the refusal.
pub(crate) fn for_region(choice: ModelChoice, mode: MapMode) -> Result<Option<Arc<MediaModel>>> {
    check_model_for_mode(choice, mode)?;
    match choice {
        ModelChoice::Off => Ok(None),
        ModelChoice::Optane => optane().map(Some),
    }
}

/// The Optane model, if one was made (by the process-wide choice or for a
/// region mapped with an explicit model).
pub fn active() -> Option<Arc<MediaModel>> {
    OPTANE.get().and_then(|made| made.as_ref().ok().cloned())
}

/// A description for reports of the process-wide choice: the parameters
/// and DRAM's measured costs, as (name, value) pairs; `None` with the
/// model off (regions mapped with an explicit model, as the validation's,
/// are the experiment's to report).
pub fn describe() -> Option<Vec<(&'static str, f64)>> {
    if selected() == ModelChoice::Off {
        return None;
    }
    let model = optane().ok()?;
    let (dram, host) = (model.dram(), model.host());
    let mut fields = model.params().fields();
    fields.extend([
        ("dram_random_ns", dram.random_ns),
        ("dram_seq_ns", dram.seq_ns),
        ("dram_line_copy_ns", dram.line_copy_ns),
        ("host_clwb_line_ns", host.clwb_line_ns),
        ("host_clflushopt_line_ns", host.clflushopt_line_ns),
        ("host_clflush_line_ns", host.clflush_line_ns),
        ("host_fence_ns", host.fence_ns),
    ]);
    Some(fields)
}
