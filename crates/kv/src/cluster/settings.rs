//! The `cluster-*` directives Ferrite acts on, as typed fields of
//! [`crate::config::Config`] (`config.cluster`): [`store`] fills a field
//! from text the settings table checked, [`show`] writes it back.

/// What the `cluster-*` directives set.
#[derive(Clone, Debug, Default)]
pub struct Settings {
    /// Run as a cluster node (`cluster-enabled`).
    pub enabled: bool,
    /// The node table's file, relative to `dir` (`cluster-config-file`).
    pub config_file: String,
    /// Milliseconds without a PONG before a node is suspected failing
    /// (`cluster-node-timeout`).
    pub node_timeout_ms: i64,
    /// The bus port, 0 for the client port + 10000 (`cluster-port`).
    pub port: u16,
    /// The address announced to other nodes (`cluster-announce-ip`).
    pub announce_ip: String,
    /// The host name announced (`cluster-announce-hostname`).
    pub announce_hostname: String,
    /// The client port announced, 0 for the real one
    /// (`cluster-announce-port`).
    pub announce_port: u16,
    /// The bus port announced, 0 for the real one
    /// (`cluster-announce-bus-port`).
    pub announce_bus_port: u16,
    /// What redirections and `CLUSTER SLOTS` name a node by
    /// (`cluster-preferred-endpoint-type`: `ip`, `hostname`,
    /// `unknown-endpoint`).
    pub preferred_endpoint: String,
    /// Stop serving when a slot has no working owner
    /// (`cluster-require-full-coverage`).
    pub require_full_coverage: bool,
    /// Serve reads while the cluster is down
    /// (`cluster-allow-reads-when-down`).
    pub allow_reads_when_down: bool,
    /// Serve sharded Pub/Sub while the cluster is down
    /// (`cluster-allow-pubsubshard-when-down`).
    pub allow_pubsubshard_when_down: bool,
    /// A replica never fails over on its own (`cluster-replica-no-failover`).
    pub replica_no_failover: bool,
    /// Working replicas a primary keeps before one of them may migrate to
    /// an orphaned primary (`cluster-migration-barrier`).
    pub migration_barrier: i64,
    /// Replicas may migrate, and a primary left without slots follows
    /// their new owner (`cluster-allow-replica-migration`).
    pub allow_replica_migration: bool,
}

impl Settings {
    /// The bus port for client port `port`.
    pub fn bus_port(&self, port: u16) -> u16 {
        if self.port != 0 {
            self.port
        } else {
            port.wrapping_add(10000)
        }
    }
}

fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.to_string()
}

/// Sets the field of directive `name` from its checked text; `false` when
/// `name` is not one of these.
pub fn store(settings: &mut Settings, name: &str, text: &str) -> bool {
    let yes = text == "yes";
    let number = |t: &str| t.parse().unwrap_or_default();
    match name {
        "cluster-enabled" => settings.enabled = yes,
        "cluster-config-file" => settings.config_file = text.to_string(),
        "cluster-node-timeout" => settings.node_timeout_ms = number(text),
        "cluster-port" => settings.port = number(text) as u16,
        "cluster-announce-ip" => settings.announce_ip = text.to_string(),
        "cluster-announce-hostname" => settings.announce_hostname = text.to_string(),
        "cluster-announce-port" => settings.announce_port = number(text) as u16,
        "cluster-announce-bus-port" => settings.announce_bus_port = number(text) as u16,
        "cluster-preferred-endpoint-type" => settings.preferred_endpoint = text.to_string(),
        "cluster-require-full-coverage" => settings.require_full_coverage = yes,
        "cluster-allow-reads-when-down" => settings.allow_reads_when_down = yes,
        "cluster-allow-pubsubshard-when-down" => settings.allow_pubsubshard_when_down = yes,
        "cluster-replica-no-failover" => settings.replica_no_failover = yes,
        "cluster-migration-barrier" => settings.migration_barrier = number(text),
        "cluster-allow-replica-migration" => settings.allow_replica_migration = yes,
        _ => return false,
    }
    true
}

/// The text of directive `name`, `None` when it is not one of these.
pub fn show(settings: &Settings, name: &str) -> Option<String> {
    Some(match name {
        "cluster-enabled" => yes_no(settings.enabled),
        "cluster-config-file" => settings.config_file.clone(),
        "cluster-node-timeout" => settings.node_timeout_ms.to_string(),
        "cluster-port" => settings.port.to_string(),
        "cluster-announce-ip" => settings.announce_ip.clone(),
        "cluster-announce-hostname" => settings.announce_hostname.clone(),
        "cluster-announce-port" => settings.announce_port.to_string(),
        "cluster-announce-bus-port" => settings.announce_bus_port.to_string(),
        "cluster-preferred-endpoint-type" => settings.preferred_endpoint.clone(),
        "cluster-require-full-coverage" => yes_no(settings.require_full_coverage),
        "cluster-allow-reads-when-down" => yes_no(settings.allow_reads_when_down),
        "cluster-allow-pubsubshard-when-down" => yes_no(settings.allow_pubsubshard_when_down),
        "cluster-replica-no-failover" => yes_no(settings.replica_no_failover),
        "cluster-migration-barrier" => settings.migration_barrier.to_string(),
        "cluster-allow-replica-migration" => yes_no(settings.allow_replica_migration),
        _ => return None,
    })
}
