//! The directives Ferrite acts on, bound to typed fields of [`Config`]:
//! [`store`] fills a field from a value [`super::parse`] checked, [`show`]
//! writes it back as CONFIG GET shows it. The table marks these
//! directives [`super::table::Effect::Acts`]; a unit test checks the two
//! agree.

use std::path::PathBuf;

use super::{AppendFsync, Config, LogDevice, MaxmemoryPolicy, ProtectedAction};

fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.to_string()
}

fn number<T: std::str::FromStr + Default>(text: &str) -> T {
    // The text was checked against the directive's bounds, which fit `T`.
    text.parse().unwrap_or_default()
}

/// Sets the field of directive `name` from its checked text; `false` when
/// `name` has no field (the value is kept as text).
pub(super) fn store(config: &mut Config, name: &str, text: &str) -> bool {
    let yes = text == "yes";
    match name {
        "port" => config.port = number(text),
        "bind" => {
            config.bind = text
                .split(' ')
                .filter(|a| !a.is_empty())
                .map(String::from)
                .collect()
        }
        "protected-mode" => config.protected_mode = yes,
        "maxclients" => config.maxclients = number(text),
        "timeout" => config.timeout_s = number(text),
        "requirepass" => config.requirepass = (!text.is_empty()).then(|| text.to_string()),
        "client-query-buffer-limit" => config.client_query_buffer_limit_bytes = number(text),
        "proto-max-bulk-len" => config.proto_max_bulk_len_bytes = number(text),
        "databases" => config.databases = number(text),
        "hz" => config.hz = number(text),
        "busy-reply-threshold" => config.busy_reply_threshold_ms = number(text),
        "enable-debug-command" => config.enable_debug_command = ProtectedAction::parse(text),
        "enable-module-command" => config.enable_module_command = ProtectedAction::parse(text),
        "enable-protected-configs" => {
            config.enable_protected_configs = ProtectedAction::parse(text)
        }
        "latency-tracking" => config.latency_tracking = yes,
        "latency-tracking-info-percentiles" => {
            config.latency_percentiles = text
                .split(' ')
                .filter_map(|p| p.parse::<f64>().ok())
                .collect()
        }
        "maxmemory" => config.maxmemory_bytes = number(text),
        "maxmemory-clients" => {
            // Checked as bytes or `N%` (a percentage of maxmemory).
            config.maxmemory_clients = match text.strip_suffix('%') {
                Some(percent) => -number::<i64>(percent),
                None => number(text),
            }
        }
        "server_cpulist" => config.server_cpulist = text.to_string(),
        "aof_rewrite_cpulist" => config.aof_rewrite_cpulist = text.to_string(),
        "dir" => config.dir = PathBuf::from(text),
        "appendonly" => config.appendonly = yes,
        "appendfsync" => {
            config.appendfsync = AppendFsync::parse(text).unwrap_or(AppendFsync::EverySec)
        }
        "appendfilename" => config.appendfilename = text.to_string(),
        "save" => config.save = text.to_string(),
        "dbfilename" => config.dbfilename = text.to_string(),
        "aof-load-truncated" => config.aof_load_truncated = yes,
        "auto-aof-rewrite-percentage" => config.auto_aof_rewrite_percentage = number(text),
        "auto-aof-rewrite-min-size" => config.auto_aof_rewrite_min_size_bytes = number(text),
        "log-device" => config.log_device = LogDevice::parse(text).unwrap_or(LogDevice::Auto),
        "log-wbuf-dir" => config.log_wbuf_dir = text.to_string(),
        "log-wbuf-size" => config.log_wbuf_size_bytes = number(text),
        "aof-rewrite-threads" => config.aof_rewrite_threads = number(text),
        "aof-rewrite-io-share" => config.aof_rewrite_io_share_percent = number(text),
        "aof-rewrite-cpu-share" => config.aof_rewrite_cpu_share_percent = number(text),
        "aof-rewrite-lend-loop-core" => config.aof_rewrite_lend_loop_core = yes,
        "rdb-key-save-delay" => config.rdb_key_save_delay = number(text),
        "event-loop-unstack" => config.event_loop_unstack = yes,
        "oom-score-adj" => config.oom_score_adj = crate::oom::OomMode::parse(text),
        "oom-score-adj-values" => {
            let mut values = text.split(' ').filter_map(|v| v.parse().ok());
            config.oom_score_adj_values = std::array::from_fn(|_| values.next().unwrap_or(0));
        }
        "client-output-buffer-limit" => {
            config.client_output_buffer_limits = super::obuf::OutputLimits::parse(text)
        }
        "shutdown-on-sigint" => config.shutdown_on_sigint = text.to_string(),
        "shutdown-on-sigterm" => config.shutdown_on_sigterm = text.to_string(),
        "aof-release-log-cache" => config.aof_release_log_cache = yes,
        "aof-everysec-sync-bytes" => config.aof_everysec_sync_bytes = number(text),
        "maxmemory-dram" => config.maxmemory_dram_bytes = number(text),
        "pm-tier-path" => config.pm_tier_path = text.to_string(),
        "pm-tier-size" => config.pm_tier_size_bytes = number(text),
        "maxmemory-policy" => {
            config.maxmemory_policy =
                MaxmemoryPolicy::parse(text).unwrap_or(MaxmemoryPolicy::NoEviction)
        }
        "maxmemory-samples" => config.maxmemory_samples = number(text),
        "lfu-log-factor" => config.lfu_log_factor = number(text),
        "lfu-decay-time" => config.lfu_decay_time_minutes = number(text),
        "slowlog-log-slower-than" => config.slowlog_log_slower_than_us = number(text),
        "slowlog-max-len" => config.slowlog_max_len = number(text),
        "latency-monitor-threshold" => config.latency_monitor_threshold_ms = number(text),
        "notify-keyspace-events" => {
            config.notify_keyspace_events = crate::keyspace::events::parse(text).unwrap_or(0)
        }
        "acllog-max-len" => config.acllog_max_len = number(text),
        "aclfile" => config.aclfile = text.to_string(),
        "acl-pubsub-default" => config.acl_pubsub_all = text.eq_ignore_ascii_case("allchannels"),
        "replicaof" => config.replicaof = text.to_string(),
        "unixsocket" => config.unixsocket = text.to_string(),
        "bind-source-addr" => config.bind_source_addr = text.to_string(),
        "repl-diskless-load" => config.repl_diskless_load = text.to_ascii_lowercase(),
        // Stored as CONFIG GET shows it: octal digits.
        "unixsocketperm" => config.unixsocketperm = u32::from_str_radix(text, 8).unwrap_or(0),
        "masterauth" => config.masterauth = (!text.is_empty()).then(|| text.to_string()),
        "masteruser" => config.masteruser = (!text.is_empty()).then(|| text.to_string()),
        "replica-read-only" => config.replica_read_only = yes,
        "lazyfree-lazy-user-del" => config.lazyfree_lazy_user_del = yes,
        "lazyfree-lazy-user-flush" => config.lazyfree_lazy_user_flush = yes,
        "replica-serve-stale-data" => config.replica_serve_stale_data = yes,
        "repl-ping-replica-period" => config.repl_ping_replica_period_s = number(text),
        "repl-timeout" => config.repl_timeout_s = number(text),
        "repl-backlog-ttl" => config.repl_backlog_ttl_s = number(text),
        "stream-node-max-entries" => config.stream_node_max_entries = number(text),
        "stream-node-max-bytes" => config.stream_node_max_bytes = number(text),
        "replica-announce-ip" => {
            config.replica_announce_ip = (!text.is_empty()).then(|| text.to_string())
        }
        "replica-announce-port" => config.replica_announce_port = number(text),
        "repl-backlog-size" => config.repl_backlog_size_bytes = number(text),
        "repl-diskless-sync" => config.repl_diskless_sync = yes,
        "repl-diskless-sync-delay" => config.repl_diskless_sync_delay_s = number(text),
        "repl-diskless-sync-max-replicas" => config.repl_diskless_sync_max_replicas = number(text),
        "min-replicas-to-write" => config.min_replicas_to_write = number(text),
        "min-replicas-max-lag" => config.min_replicas_max_lag_s = number(text),
        _ => {
            return crate::tls::store(&mut config.tls, name, text)
                || crate::cluster::settings::store(&mut config.cluster, name, text)
        }
    }
    true
}

/// The text of directive `name`'s field, `None` when it has none.
pub(super) fn show(config: &Config, name: &str) -> Option<String> {
    Some(match name {
        "port" => config.port.to_string(),
        "bind" => config.bind.join(" "),
        "protected-mode" => yes_no(config.protected_mode),
        "maxclients" => config.maxclients.to_string(),
        "timeout" => config.timeout_s.to_string(),
        "requirepass" => config.requirepass.clone().unwrap_or_default(),
        "client-query-buffer-limit" => config.client_query_buffer_limit_bytes.to_string(),
        "proto-max-bulk-len" => config.proto_max_bulk_len_bytes.to_string(),
        "databases" => config.databases.to_string(),
        "hz" => config.hz.to_string(),
        "busy-reply-threshold" => config.busy_reply_threshold_ms.to_string(),
        "enable-debug-command" => config.enable_debug_command.name().to_string(),
        "enable-module-command" => config.enable_module_command.name().to_string(),
        "enable-protected-configs" => config.enable_protected_configs.name().to_string(),
        "latency-tracking" => yes_no(config.latency_tracking),
        "latency-tracking-info-percentiles" => config
            .latency_percentiles
            .iter()
            .map(|p| super::parse::format_percentile(*p))
            .collect::<Vec<_>>()
            .join(" "),
        "maxmemory" => config.maxmemory_bytes.to_string(),
        "maxmemory-clients" if config.maxmemory_clients < 0 => {
            format!("{}%", config.maxmemory_clients.unsigned_abs())
        }
        "maxmemory-clients" => config.maxmemory_clients.to_string(),
        "server_cpulist" => config.server_cpulist.clone(),
        "aof_rewrite_cpulist" => config.aof_rewrite_cpulist.clone(),
        "dir" => config.dir.display().to_string(),
        "appendonly" => yes_no(config.appendonly),
        "appendfsync" => config.appendfsync.name().to_string(),
        "appendfilename" => config.appendfilename.clone(),
        "save" => config.save.clone(),
        "dbfilename" => config.dbfilename.clone(),
        "aof-load-truncated" => yes_no(config.aof_load_truncated),
        "auto-aof-rewrite-percentage" => config.auto_aof_rewrite_percentage.to_string(),
        "auto-aof-rewrite-min-size" => config.auto_aof_rewrite_min_size_bytes.to_string(),
        "log-device" => config.log_device.name().to_string(),
        "log-wbuf-dir" => config.log_wbuf_dir.clone(),
        "log-wbuf-size" => config.log_wbuf_size_bytes.to_string(),
        "aof-rewrite-threads" => config.aof_rewrite_threads.to_string(),
        "aof-rewrite-io-share" => config.aof_rewrite_io_share_percent.to_string(),
        "aof-rewrite-cpu-share" => config.aof_rewrite_cpu_share_percent.to_string(),
        "aof-rewrite-lend-loop-core" => yes_no(config.aof_rewrite_lend_loop_core),
        "rdb-key-save-delay" => config.rdb_key_save_delay.to_string(),
        "event-loop-unstack" => yes_no(config.event_loop_unstack),
        "client-output-buffer-limit" => config.client_output_buffer_limits.show(),
        "oom-score-adj" => config.oom_score_adj.name().to_string(),
        "oom-score-adj-values" => config.oom_score_adj_values.map(|v| v.to_string()).join(" "),
        "shutdown-on-sigint" => config.shutdown_on_sigint.clone(),
        "shutdown-on-sigterm" => config.shutdown_on_sigterm.clone(),
        "aof-release-log-cache" => yes_no(config.aof_release_log_cache),
        "aof-everysec-sync-bytes" => config.aof_everysec_sync_bytes.to_string(),
        "maxmemory-dram" => config.maxmemory_dram_bytes.to_string(),
        "pm-tier-path" => config.pm_tier_path.clone(),
        "pm-tier-size" => config.pm_tier_size_bytes.to_string(),
        "maxmemory-policy" => config.maxmemory_policy.name().to_string(),
        "maxmemory-samples" => config.maxmemory_samples.to_string(),
        "lfu-log-factor" => config.lfu_log_factor.to_string(),
        "lfu-decay-time" => config.lfu_decay_time_minutes.to_string(),
        "slowlog-log-slower-than" => config.slowlog_log_slower_than_us.to_string(),
        "slowlog-max-len" => config.slowlog_max_len.to_string(),
        "latency-monitor-threshold" => config.latency_monitor_threshold_ms.to_string(),
        "notify-keyspace-events" => crate::keyspace::events::format(config.notify_keyspace_events),
        "acllog-max-len" => config.acllog_max_len.to_string(),
        "aclfile" => config.aclfile.clone(),
        "acl-pubsub-default" => if config.acl_pubsub_all {
            "allchannels"
        } else {
            "resetchannels"
        }
        .to_string(),
        "replicaof" => config.replicaof.clone(),
        "unixsocket" => config.unixsocket.clone(),
        "bind-source-addr" => config.bind_source_addr.clone(),
        "repl-diskless-load" => config.repl_diskless_load.clone(),
        "unixsocketperm" => format!("{:o}", config.unixsocketperm),
        "masterauth" => config.masterauth.clone().unwrap_or_default(),
        "masteruser" => config.masteruser.clone().unwrap_or_default(),
        "replica-read-only" => yes_no(config.replica_read_only),
        "lazyfree-lazy-user-del" => yes_no(config.lazyfree_lazy_user_del),
        "lazyfree-lazy-user-flush" => yes_no(config.lazyfree_lazy_user_flush),
        "replica-serve-stale-data" => yes_no(config.replica_serve_stale_data),
        "repl-ping-replica-period" => config.repl_ping_replica_period_s.to_string(),
        "repl-timeout" => config.repl_timeout_s.to_string(),
        "repl-backlog-ttl" => config.repl_backlog_ttl_s.to_string(),
        "stream-node-max-entries" => config.stream_node_max_entries.to_string(),
        "stream-node-max-bytes" => config.stream_node_max_bytes.to_string(),
        "replica-announce-ip" => config.replica_announce_ip.clone().unwrap_or_default(),
        "replica-announce-port" => config.replica_announce_port.to_string(),
        "repl-backlog-size" => config.repl_backlog_size_bytes.to_string(),
        "repl-diskless-sync" => yes_no(config.repl_diskless_sync),
        "repl-diskless-sync-delay" => config.repl_diskless_sync_delay_s.to_string(),
        "repl-diskless-sync-max-replicas" => config.repl_diskless_sync_max_replicas.to_string(),
        "min-replicas-to-write" => config.min_replicas_to_write.to_string(),
        "min-replicas-max-lag" => config.min_replicas_max_lag_s.to_string(),
        _ => {
            return crate::tls::show(&config.tls, name)
                .or_else(|| crate::cluster::settings::show(&config.cluster, name))
        }
    })
}
