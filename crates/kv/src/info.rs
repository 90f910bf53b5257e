//! INFO as Redis 7.0 writes it: the same sections, in the same order, with
//! Redis's field names, so monitoring and test suites written for Redis
//! read Ferrite's. Fields about features Ferrite lacks (replication, RDB,
//! defragmentation...) report those features idle. Ferrite's own fields are
//! prefixed `ferrite_` and sit in the section they belong to.

use std::fmt::Write as _;
use std::sync::OnceLock;

use crate::server::repl::Loading;
use crate::state::State;

/// Writes one section's fields.
type SectionWriter = fn(&State, &mut String);

/// Every section in output order: name, title, in the default set.
const SECTIONS: [(&str, &str, bool, SectionWriter); 14] = [
    ("server", "Server", true, server),
    ("clients", "Clients", true, clients),
    ("memory", "Memory", true, memory),
    ("persistence", "Persistence", true, persistence),
    ("pmem", "Pmem", false, pmem),
    ("stats", "Stats", true, stats),
    ("replication", "Replication", true, replication),
    ("cpu", "CPU", true, cpu),
    ("modules", "Modules", true, |_, _| {}),
    ("commandstats", "Commandstats", false, commandstats),
    ("errorstats", "Errorstats", true, errorstats),
    ("latencystats", "Latencystats", false, latencystats),
    ("cluster", "Cluster", true, |state, out| {
        let enabled = u8::from(state.cluster.is_some());
        out.push_str(&format!("cluster_enabled:{enabled}\r\n"))
    }),
    ("keyspace", "Keyspace", true, keyspace),
];

/// The INFO text for the requested sections (lower case): none or
/// `default` for the default set, `all` or `everything` for every section.
pub fn text(state: &State, wanted: &[String]) -> String {
    let default = wanted.is_empty() || wanted.iter().any(|w| w == "default");
    let all = wanted.iter().any(|w| w == "all" || w == "everything");
    let mut out = String::new();
    for (name, title, in_default, write) in SECTIONS {
        if all || (default && in_default) || wanted.iter().any(|w| w == name) {
            if !out.is_empty() {
                out.push_str("\r\n");
            }
            let _ = write!(out, "# {title}\r\n");
            write(state, &mut out);
        }
    }
    out
}

/// Bytes as Redis's INFO shows them for people (`967.21K`, `1.50M`).
pub fn human_bytes(n: u64) -> String {
    let n = n as f64;
    let units = [
        ("K", 1u64 << 10),
        ("M", 1 << 20),
        ("G", 1 << 30),
        ("T", 1 << 40),
        ("P", 1 << 50),
    ];
    if n < 1024.0 {
        return format!("{n}B");
    }
    let mut shown = format!("{:.2}P", n / (1u64 << 50) as f64);
    for (unit, scale) in units {
        if n < (scale as f64) * 1024.0 {
            shown = format!("{:.2}{unit}", n / scale as f64);
            break;
        }
    }
    shown
}

/// A random 40-hex-digit id, fixed for the process (`run_id`,
/// `master_replid`).
fn process_id_hex(which: u64) -> String {
    static SEED: OnceLock<u64> = OnceLock::new();
    let seed = *SEED
        .get_or_init(|| crate::state::unix_ms() as u64 ^ (u64::from(std::process::id()) << 40));
    let mut rng = fastrand::Rng::with_seed(seed ^ which);
    (0..5)
        .map(|_| format!("{:08x}", rng.u64(..) as u32))
        .collect()
}

fn os_text() -> String {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let sysname = match std::env::consts::OS {
        "linux" => "Linux",
        other => other,
    };
    format!("{sysname} {} {}", release.trim(), std::env::consts::ARCH)
}

fn server(state: &State, out: &mut String) {
    let uptime = state.started.elapsed().as_secs();
    let now_us = crate::state::unix_ms() * 1000;
    let executable = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let config_file = state
        .config
        .file
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let _ = write!(
        out,
        "redis_version:{}\r\nredis_git_sha1:00000000\r\nredis_git_dirty:0\r\nredis_build_id:0\r\nredis_mode:standalone\r\nos:{}\r\narch_bits:64\r\nmonotonic_clock:POSIX clock_gettime\r\nmultiplexing_api:epoll\r\natomicvar_api:c11-builtin\r\ngcc_version:0.0.0\r\nprocess_id:{}\r\nprocess_supervised:no\r\nrun_id:{}\r\ntcp_port:{}\r\nserver_time_usec:{now_us}\r\nuptime_in_seconds:{uptime}\r\nuptime_in_days:{}\r\nhz:{}\r\nconfigured_hz:{}\r\nlru_clock:{}\r\nexecutable:{executable}\r\nconfig_file:{config_file}\r\nio_threads_active:0\r\nferrite_version:{}\r\n",
        crate::commands::REDIS_VERSION,
        os_text(),
        std::process::id(),
        process_id_hex(1),
        state.port,
        uptime / 86400,
        state.config.hz_effective(),
        state.config.hz,
        (now_us / 1_000_000) & ((1 << 24) - 1),
        env!("CARGO_PKG_VERSION"),
    );
}

fn clients(state: &State, out: &mut String) {
    let max_in = state.clients.values().map(|c| c.qbuf).max().unwrap_or(0);
    let max_out = state.clients.values().map(|c| c.obl).max().unwrap_or(0);
    let _ = write!(
        out,
        "connected_clients:{}\r\ncluster_connections:0\r\nmaxclients:{}\r\nclient_recent_max_input_buffer:{max_in}\r\nclient_recent_max_output_buffer:{max_out}\r\nblocked_clients:{}\r\n",
        state.clients.len(),
        state.config.maxclients,
        state.blocking.count()
    );
    crate::server::pubsub::info_clients(state, out);
}

fn total_system_memory() -> u64 {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// `# Memory`, Redis 7.0's fields in its order. `used_memory` is the
/// installed probe's counter (docs/memory.md); the Lua and function
/// figures are zero, as Ferrite's scripting memory is not counted apart.
fn memory(state: &State, out: &mut String) {
    let f = crate::memory::Figures::of(state);
    let system = total_system_memory();
    let maxmemory = state.config.maxmemory_bytes;
    let (used, rss, peak, a) = (f.used, f.rss, f.peak, f.allocator);
    let _ = write!(
        out,
        "used_memory:{used}\r\nused_memory_human:{}\r\nused_memory_rss:{rss}\r\nused_memory_rss_human:{}\r\nused_memory_peak:{peak}\r\nused_memory_peak_human:{}\r\nused_memory_peak_perc:{:.2}%\r\nused_memory_overhead:{}\r\nused_memory_startup:{}\r\nused_memory_dataset:{}\r\nused_memory_dataset_perc:{:.2}%\r\nallocator_allocated:{}\r\nallocator_active:{}\r\nallocator_resident:{}\r\ntotal_system_memory:{system}\r\ntotal_system_memory_human:{}\r\n",
        human_bytes(used),
        human_bytes(rss),
        human_bytes(peak),
        f.peak_perc(),
        f.overhead,
        f.startup,
        f.dataset(),
        f.dataset_perc(),
        a.allocated,
        a.active,
        a.resident,
        human_bytes(system),
    );
    // The EVAL interpreter (functions run in their own state, not counted).
    let (scripts, lua) = crate::commands::script_cache_figures();
    let _ = write!(
        out,
        "used_memory_lua:{lua}\r\nused_memory_vm_eval:{lua}\r\nused_memory_lua_human:{}\r\nused_memory_scripts_eval:0\r\nnumber_of_cached_scripts:{scripts}\r\nnumber_of_functions:{}\r\nnumber_of_libraries:{}\r\nused_memory_vm_functions:0\r\nused_memory_vm_total:{lua}\r\nused_memory_vm_total_human:{}\r\nused_memory_functions:0\r\nused_memory_scripts:0\r\nused_memory_scripts_human:0B\r\nmaxmemory:{maxmemory}\r\nmaxmemory_human:{}\r\nmaxmemory_policy:{}\r\n",
        human_bytes(lua as u64),
        state.functions.function_count(),
        state.functions.len(),
        human_bytes(lua as u64),
        human_bytes(maxmemory),
        state.config.maxmemory_policy.name(),
    );
    let ratio = crate::memory::ratio;
    let diff = |x: u64, y: u64| x as i64 - y as i64;
    let _ = write!(
        out,
        "allocator_frag_ratio:{:.2}\r\nallocator_frag_bytes:{}\r\nallocator_rss_ratio:{:.2}\r\nallocator_rss_bytes:{}\r\nrss_overhead_ratio:{:.2}\r\nrss_overhead_bytes:{}\r\nmem_fragmentation_ratio:{:.2}\r\nmem_fragmentation_bytes:{}\r\nmem_not_counted_for_evict:{}\r\nmem_replication_backlog:{}\r\nmem_total_replication_buffers:{}\r\nmem_clients_slaves:{}\r\nmem_clients_normal:{}\r\nmem_cluster_links:0\r\nmem_aof_buffer:0\r\nmem_allocator:{}\r\nactive_defrag_running:0\r\nlazyfree_pending_objects:{}\r\nlazyfreed_objects:{}\r\n",
        ratio(a.active, a.allocated),
        diff(a.active, a.allocated),
        ratio(a.resident, a.active),
        diff(a.resident, a.active),
        ratio(rss, a.resident),
        diff(rss, a.resident),
        ratio(rss, used),
        diff(rss, used),
        f.clients_slaves,
        f.repl_backlog,
        // The backlog is the replication buffer every replica shares (it
        // keeps the stream a full sync still owes, `server/repl.rs`), as
        // Redis's shared buffer; replies not yet sent are per replica
        // (`mem_clients_slaves`), as Redis's suite reads the two.
        f.repl_backlog,
        f.clients_slaves,
        f.clients_normal,
        crate::memory::allocator_name(),
        state.lazyfree.pending(),
        state.lazyfree.freed(),
    );
    if state.tier.is_some() {
        crate::tier::info(state, out);
    }
}

fn persistence(state: &State, out: &mut String) {
    let log = &state.log;
    let rewrite = &state.rewrite;
    let status = if state.log_failure.is_some() {
        "err"
    } else {
        "ok"
    };
    let _ = write!(
        out,
        "loading:{}\r\nasync_loading:{}\r\ncurrent_cow_peak:0\r\ncurrent_cow_size:0\r\ncurrent_cow_size_age:0\r\ncurrent_fork_perc:0.00\r\n{}",
        u8::from(matches!(state.repl.loading, Loading::Blocking { .. })),
        u8::from(matches!(state.repl.loading, Loading::Async { .. })),
        crate::rdb::persist::info_fields(state),
    );
    let _ = write!(
        out,
        "aof_enabled:{}\r\naof_rewrite_in_progress:{}\r\naof_rewrite_scheduled:{}\r\naof_last_rewrite_time_sec:{}\r\naof_current_rewrite_time_sec:{}\r\naof_last_bgrewrite_status:{}\r\naof_rewrites:{}\r\naof_rewrites_consecutive_failures:{}\r\naof_last_write_status:{status}\r\naof_last_cow_size:0\r\nmodule_fork_in_progress:0\r\nmodule_fork_last_cow_size:0\r\naof_current_size:{}\r\naof_base_size:{}\r\naof_pending_rewrite:0\r\naof_buffer_length:0\r\naof_pending_bio_fsync:0\r\naof_delayed_fsync:{}\r\n",
        u8::from(log.enabled),
        u8::from(rewrite.running_since.is_some()),
        u8::from(rewrite.scheduled),
        rewrite.last_duration_s,
        rewrite.running_since.map_or(-1, |t| t.elapsed().as_secs() as i64),
        if rewrite.last_ok { "ok" } else { "err" },
        rewrite.completed,
        rewrite.failures_in_row,
        rewrite.base_bytes + log.current_size,
        if rewrite.completed > 0 || rewrite.parts > 0 { rewrite.base_bytes } else { log.base_size },
        log.delayed_fsync,
    );
    loading_progress(state, out);
    ferrite_log(state, out);
    ferrite_rewrite(state, out);
}

/// Redis's progress fields while a full sync loads from the socket: the
/// bytes of the payload received so far (its total is 0 for the
/// EOF-marker form, whose length is unknown until it ends).
fn loading_progress(state: &State, out: &mut String) {
    let since_s = match state.repl.loading {
        Loading::Off => return,
        Loading::Blocking { since_s, .. } | Loading::Async { since_s } => since_s,
    };
    let (total, loaded) = state.repl.master.as_ref().map_or((0, 0), |m| m.transfer);
    let perc = if total == 0 {
        0.0
    } else {
        loaded as f64 * 100.0 / total as f64
    };
    let elapsed_s = (crate::state::unix_ms() / 1000 - since_s).max(0) as u64;
    let eta = if loaded == 0 || total == 0 {
        1
    } else {
        (total.saturating_sub(loaded) * elapsed_s.max(1)) / loaded
    };
    let _ = write!(
        out,
        "loading_start_time:{since_s}\r\nloading_total_bytes:{total}\r\nloading_rdb_used_mem:0\r\nloading_loaded_bytes:{loaded}\r\nloading_loaded_perc:{perc:.2}\r\nloading_eta_seconds:{eta}\r\n",
    );
}

fn ferrite_log(state: &State, out: &mut String) {
    let log = &state.log;
    let _ = write!(
        out,
        "ferrite_appendfsync:{}\r\nferrite_log_device:{}\r\nferrite_log_pmem:{}\r\nferrite_log_appends:{}\r\nferrite_log_commits:{}\r\nferrite_log_syncs:{}\r\nferrite_log_mean_batch:{:.2}\r\nferrite_log_wait_us_total:{}\r\nferrite_log_commit_wait_us_total:{}\r\nferrite_log_durable_lsn:{}\r\nferrite_log_postponed_writes:{}\r\nferrite_log_flushes_per_write:{:.2}\r\nferrite_loaded_commands:{}\r\nferrite_load_ms:{}\r\nferrite_truncated_bytes:{}\r\nferrite_log_failure:{}\r\n",
        state.config.appendfsync.name(),
        log.device,
        if log.pmem_mode.is_empty() { "none" } else { &log.pmem_mode },
        log.appends,
        log.commits,
        log.syncs,
        log.mean_batch,
        log.wait_us_total,
        log.commit_wait_us_total,
        log.durable_lsn,
        log.postponed_writes,
        log.flushes_per_write,
        log.loaded_commands,
        log.load_ms,
        log.truncated_bytes,
        state.log_failure.as_deref().unwrap_or(""),
    );
    // A log behind a write buffer: its counters, as dm-writecache names
    // them, each prefixed `wbuf_`.
    if log.device == "wbuf" {
        for (name, value) in &log.device_counters {
            let _ = write!(out, "wbuf_{name}:{value}\r\n");
        }
    }
}

/// Ferrite's own section (not in the default set, as Redis has no such
/// section): what the log's appends cost persistent-memory media, by the
/// flush accounting of the current log file (`docs/pmem.md`). On a log
/// that is not on PM every count is zero.
fn pmem(state: &State, out: &mut String) {
    let log = &state.log;
    let flush = log.flush.unwrap_or_default();
    let model = ferrite_pmem::model::selected();
    let _ = write!(
        out,
        "pmem_log:{}\r\npmem_model:{}\r\npmem_user_bytes:{}\r\npmem_lines_flushed:{}\r\npmem_fences:{}\r\npmem_bytes_nt:{}\r\npmem_requests:{}\r\npmem_media_lines:{}\r\npmem_media_bytes:{}\r\npmem_read_modify_writes:{}\r\npmem_absorbed:{}\r\npmem_media_bytes_per_user_byte:{:.4}\r\n",
        if log.flush.is_some() { &log.pmem_mode } else { "none" },
        model.name(),
        log.payload_bytes,
        flush.lines_flushed,
        flush.fences,
        flush.bytes_nt,
        flush.requests,
        flush.media_lines,
        flush.media_bytes(),
        flush.read_modify_writes,
        flush.absorbed,
        flush.media_bytes_per_user_byte(log.payload_bytes),
    );
}

fn ferrite_rewrite(state: &State, out: &mut String) {
    let rewrite = &state.rewrite;
    let _ = write!(
        out,
        "ferrite_rewrite_threads:{}\r\nferrite_rewrite_parts:{}\r\nferrite_rewrite_last_ms:{}\r\nferrite_rewrite_cow_peak_bytes:{}\r\nferrite_rewrite_cow_segments:{}\r\nferrite_rewrite_superseded_keys:{}\r\nferrite_rewrite_pieces:{}\r\nferrite_rewrite_captured_early:{}\r\nferrite_load_to_serve_ms:{}\r\n",
        rewrite.threads,
        rewrite.parts,
        rewrite.last_duration_ms,
        rewrite.cow_peak_bytes,
        rewrite.cow_copies,
        rewrite.superseded_keys,
        rewrite.pieces,
        rewrite.captured_early,
        rewrite.load_to_serve_ms,
    );
}

fn stats(state: &State, out: &mut String) {
    let s = &state.stats;
    let ks = &state.keyspace;
    let _ = write!(
        out,
        "total_connections_received:{}\r\ntotal_commands_processed:{}\r\ninstantaneous_ops_per_sec:{}\r\ntotal_net_input_bytes:{}\r\ntotal_net_output_bytes:{}\r\ntotal_net_repl_input_bytes:0\r\ntotal_net_repl_output_bytes:0\r\ninstantaneous_input_kbps:{:.2}\r\ninstantaneous_output_kbps:{:.2}\r\ninstantaneous_input_repl_kbps:0.00\r\ninstantaneous_output_repl_kbps:0.00\r\nrejected_connections:{}\r\nsync_full:{}\r\nsync_partial_ok:{}\r\nsync_partial_err:{}\r\nexpired_keys:{}\r\nexpired_stale_perc:0.00\r\nexpired_time_cap_reached_count:0\r\nexpire_cycle_cpu_milliseconds:0\r\nevicted_keys:{}\r\nevicted_clients:{}\r\ntotal_eviction_exceeded_time:0\r\ncurrent_eviction_exceeded_time:0\r\nkeyspace_hits:{}\r\nkeyspace_misses:{}\r\n",
        s.connections_received,
        s.commands_processed,
        state.instantaneous.ops.per_second() as u64,
        s.net_input_bytes,
        s.net_output_bytes,
        state.instantaneous.input_bytes.per_second() / 1024.0,
        state.instantaneous.output_bytes.per_second() / 1024.0,
        s.rejected_connections,
        state.repl.sync_full,
        state.repl.sync_partial_ok,
        state.repl.sync_partial_err,
        ks.expired_total,
        s.evicted_keys,
        s.evicted_clients,
        ks.hits,
        ks.misses,
    );
    let _ = write!(
        out,
        "latest_fork_usec:0\r\ntotal_forks:0\r\nmigrate_cached_sockets:0\r\nslave_expires_tracked_keys:0\r\nactive_defrag_hits:0\r\nactive_defrag_misses:0\r\nactive_defrag_key_hits:0\r\nactive_defrag_key_misses:0\r\ntotal_active_defrag_time:0\r\ncurrent_active_defrag_time:0\r\nunexpected_error_replies:0\r\ntotal_error_replies:{}\r\ndump_payload_sanitizations:0\r\ntotal_reads_processed:0\r\ntotal_writes_processed:0\r\nio_threaded_reads_processed:0\r\nio_threaded_writes_processed:0\r\nreply_buffer_shrinks:0\r\nreply_buffer_expands:0\r\nferrite_event_loop_moves:{}\r\n",
        s.commands.error_replies,
        s.event_loop_moves,
    );
    crate::server::pubsub::info_stats(state, out);
}

/// `# Replication` (`server/repl.rs`).
fn replication(state: &State, out: &mut String) {
    crate::server::repl::info(state, out);
}

/// User and system CPU seconds of `/proc/<path>/stat` (fields 14 and 15,
/// in clock ticks of 1/100 s as Linux reports them to user space).
fn cpu_seconds(path: &str) -> (f64, f64) {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    // The command name may hold spaces: fields count from after its ')'.
    let rest = text.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |at: usize| {
        fields
            .get(at)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0) as f64
            / 100.0
    };
    (ticks(11), ticks(12))
}

fn cpu(_state: &State, out: &mut String) {
    let (user, sys) = cpu_seconds("/proc/self/stat");
    let (thread_user, thread_sys) = cpu_seconds("/proc/thread-self/stat");
    let _ = write!(
        out,
        "used_cpu_sys:{sys:.6}\r\nused_cpu_user:{user:.6}\r\nused_cpu_sys_children:0.000000\r\nused_cpu_user_children:0.000000\r\nused_cpu_sys_main_thread:{thread_sys:.6}\r\nused_cpu_user_main_thread:{thread_user:.6}\r\n"
    );
}

fn commandstats(state: &State, out: &mut String) {
    for (name, s) in state.stats.commands.sorted() {
        if s.calls == 0 && s.rejected_calls == 0 && s.failed_calls == 0 {
            continue;
        }
        let per_call = if s.calls == 0 {
            0.0
        } else {
            s.usec as f64 / s.calls as f64
        };
        let _ = write!(
            out,
            "cmdstat_{name}:calls={},usec={},usec_per_call={per_call:.2},rejected_calls={},failed_calls={}\r\n",
            s.calls, s.usec, s.rejected_calls, s.failed_calls
        );
    }
}

fn errorstats(state: &State, out: &mut String) {
    for (code, count) in &state.stats.commands.errors {
        let _ = write!(out, "errorstat_{code}:count={count}\r\n");
    }
}

fn latencystats(state: &State, out: &mut String) {
    let percentiles = &state.config.latency_percentiles;
    for (name, s) in state.stats.commands.sorted() {
        if s.latency.count() == 0 {
            continue;
        }
        let _ = write!(out, "latency_percentiles_usec_{name}:");
        for (at, p) in percentiles.iter().enumerate() {
            let us = s.latency.percentile_ns(*p) as f64 / 1000.0;
            let comma = if at + 1 < percentiles.len() { "," } else { "" };
            let _ = write!(
                out,
                "p{}={us:.3}{comma}",
                crate::config::format_percentile(*p)
            );
        }
        out.push_str("\r\n");
    }
}

fn keyspace(state: &State, out: &mut String) {
    let ks = &state.keyspace;
    for db in 0..ks.databases() {
        let d = ks.db(db);
        if !d.is_empty() {
            let _ = write!(
                out,
                "db{db}:keys={},expires={},avg_ttl=0\r\n",
                d.len(),
                d.expires_len()
            );
        }
    }
}
