//! INFO sections. Field names follow Redis where the meaning is the same,
//! so monitoring that reads Redis's INFO reads Ferrite's; Ferrite's own
//! fields are prefixed `ferrite_`.

use std::fmt::Write as _;

use crate::state::State;

/// `# Server`.
pub fn server(state: &State, out: &mut String) {
    let uptime = state.started.elapsed().as_secs();
    let _ = write!(
        out,
        "redis_version:{}\r\nferrite_version:{}\r\nredis_mode:standalone\r\nos:{} {}\r\narch_bits:64\r\nmultiplexing_api:epoll\r\nprocess_id:{}\r\ntcp_port:{}\r\nuptime_in_seconds:{uptime}\r\nuptime_in_days:{}\r\nhz:{}\r\nexecutable:ferrite\r\nconfig_file:\r\ncommands_known:{}\r\n",
        crate::commands::REDIS_VERSION,
        env!("CARGO_PKG_VERSION"),
        std::env::consts::OS,
        std::env::consts::ARCH,
        std::process::id(),
        state.port,
        uptime / 86400,
        state.config.hz,
        crate::commands::command_count(),
    );
}

/// `# Clients`.
pub fn clients(state: &State, out: &mut String) {
    let _ = write!(
        out,
        "connected_clients:{}\r\nmaxclients:{}\r\nblocked_clients:{}\r\n",
        state.clients.len(),
        state.config.maxclients,
        state.blocking.count()
    );
    crate::server::pubsub::info_clients(state, out);
}

/// `# Memory`. `used_memory` is the resident set size: Ferrite uses the
/// system allocator and does not count allocations itself.
pub fn memory(state: &State, out: &mut String) {
    let _ = write!(
        out,
        "used_memory:{0}\r\nused_memory_human:{1:.2}M\r\nused_memory_rss:{0}\r\nmaxmemory:{2}\r\nmaxmemory_human:{3:.2}M\r\nmaxmemory_policy:{4}\r\nmem_allocator:libc\r\n",
        state.used_memory_bytes,
        state.used_memory_bytes as f64 / (1024.0 * 1024.0),
        state.config.maxmemory_bytes,
        state.config.maxmemory_bytes as f64 / (1024.0 * 1024.0),
        state.config.maxmemory_policy.name(),
    );
}

/// `# Persistence`.
pub fn persistence(state: &State, out: &mut String) {
    let log = &state.log;
    let status = if state.log_failure.is_some() {
        "err"
    } else {
        "ok"
    };
    let _ = write!(
        out,
        "loading:0\r\nasync_loading:0\r\nrdb_changes_since_last_save:0\r\nrdb_bgsave_in_progress:0\r\nrdb_last_save_time:{}\r\nrdb_last_bgsave_status:ok\r\naof_enabled:{}\r\naof_rewrite_in_progress:{}\r\naof_rewrite_scheduled:{}\r\naof_last_rewrite_time_sec:{}\r\naof_current_rewrite_time_sec:{}\r\naof_last_bgrewrite_status:{}\r\naof_rewrites:{}\r\naof_last_write_status:{status}\r\naof_current_size:{}\r\naof_base_size:{}\r\naof_pending_rewrite:0\r\naof_buffer_length:0\r\naof_pending_bio_fsync:0\r\naof_delayed_fsync:{}\r\n",
        state.start_unix_s,
        u8::from(log.enabled),
        u8::from(state.rewrite.running_since.is_some()),
        u8::from(state.rewrite.scheduled),
        state.rewrite.last_duration_s,
        state
            .rewrite
            .running_since
            .map_or(-1, |t| t.elapsed().as_secs() as i64),
        if state.rewrite.last_ok { "ok" } else { "err" },
        state.rewrite.completed,
        state.rewrite.base_bytes + log.current_size,
        if state.rewrite.completed > 0 || state.rewrite.parts > 0 {
            state.rewrite.base_bytes
        } else {
            log.base_size
        },
        log.delayed_fsync,
    );
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

/// `# Stats`.
pub fn stats(state: &State, out: &mut String) {
    let s = &state.stats;
    let ks = &state.keyspace;
    let _ = write!(
        out,
        "total_connections_received:{}\r\ntotal_commands_processed:{}\r\ntotal_net_input_bytes:{}\r\ntotal_net_output_bytes:{}\r\nrejected_connections:{}\r\nexpired_keys:{}\r\nevicted_keys:{}\r\nkeyspace_hits:{}\r\nkeyspace_misses:{}\r\nferrite_event_loop_moves:{}\r\n",
        s.connections_received,
        s.commands_processed,
        s.net_input_bytes,
        s.net_output_bytes,
        s.rejected_connections,
        ks.expired_total,
        s.evicted_keys,
        ks.hits,
        ks.misses,
        s.event_loop_moves,
    );
    crate::server::pubsub::info_stats(state, out);
}

/// `# Replication`: Ferrite is always a standalone master.
pub fn replication(_state: &State, out: &mut String) {
    out.push_str("role:master\r\nconnected_slaves:0\r\n");
}

/// `# Keyspace`.
pub fn keyspace(state: &State, out: &mut String) {
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
