//! Redis Cluster (`docs/cluster.md`): hash slots, the node table and its
//! `nodes.conf`, routing of commands to the node that serves their keys,
//! and the cluster bus on which the nodes keep the table in agreement.

pub mod bus;
pub mod conf;
pub mod failover;
pub mod handler;
pub mod manual;
pub mod migration;
pub mod msg;
pub mod node;
pub mod route;
pub mod saver;
pub mod settings;
pub mod slot;
pub mod state;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::rewrite::fs::{RealFs, RewriteFs};
pub use node::{flags, Node, NodeId};
pub use settings::Settings;
pub use slot::{key_slot, SLOTS};
pub use state::ClusterState;

/// What the event loop and the bus thread share: the node table behind a
/// mutex that neither holds across I/O, the settings the bus reads, and
/// the requests to the thread that writes `nodes.conf` (`saver.rs`).
#[derive(Debug)]
pub struct Shared {
    state: Mutex<ClusterState>,
    fs: Arc<dyn RewriteFs>,
    path: PathBuf,
    /// Saves asked of the saver thread, and how far it got.
    pub saves: saver::SaveQueue,
    /// `cluster-node-timeout`, `cluster-require-full-coverage`, kept
    /// current by the event loop for the bus thread.
    pub node_timeout_ms: AtomicI64,
    pub full_coverage: AtomicBool,
    /// Ask the bus thread to stop.
    pub stop: AtomicBool,
    /// Wakes the event loop when other nodes' messages wait in
    /// `publish_in`, and the bus thread when this node's wait in
    /// `publish_out`.
    pub loop_waker: Mutex<Option<Arc<mio::Waker>>>,
    pub bus_waker: Mutex<Option<Arc<mio::Waker>>>,
    /// Set with `publish_in` filled, so the event loop looks only then.
    pub publish_pending: AtomicBool,
    /// The bus links as the bus thread last listed them (CLUSTER LINKS).
    pub links: Mutex<Vec<bus::LinkInfo>>,
}

/// Starts cluster mode when `cluster-enabled yes`: opens the node table
/// (`nodes.conf` under `dir`) and starts the bus thread.
pub fn start(state: &mut crate::state::State, waker: Arc<mio::Waker>) -> Result<(), String> {
    let settings = state.config.cluster.clone();
    if !settings.enabled {
        return Ok(());
    }
    let port = if settings.announce_port != 0 {
        settings.announce_port
    } else {
        state.port
    };
    let shared = Shared::open_real(&state.config.dir, &settings, port)?;
    // GETKEYSINSLOT and COUNTKEYSINSLOT read the per-slot key index;
    // building it now keeps the first of them from paying for it.
    state.keyspace.enable_slot_index();
    {
        let mut table = shared.lock();
        let me = table.me_mut();
        if settings.announce_bus_port != 0 {
            me.cport = settings.announce_bus_port;
        }
        if !settings.announce_ip.is_empty() {
            me.ip = settings.announce_ip.clone();
        }
        me.hostname = settings.announce_hostname.clone();
        if settings.replica_no_failover {
            me.flags |= flags::NOFAILOVER;
        }
    }
    *shared
        .loop_waker
        .lock()
        .unwrap_or_else(PoisonError::into_inner) = Some(waker);
    let cport = settings.bus_port(state.port);
    saver::spawn(Arc::clone(&shared))
        .map_err(|e| format!("can't start the cluster config writer: {e}"))?;
    bus::spawn(Arc::clone(&shared), &state.config.bind, cport)
        .map_err(|e| format!("can't listen on the cluster bus port {cport}: {e}"))?;
    state.cluster = Some(shared);
    Ok(())
}

/// The event loop's share of the timed work: keeps the settings the bus
/// reads current and the cluster's state fresh.
pub fn tick(state: &mut crate::state::State) {
    let Some(shared) = state.cluster.clone() else {
        return;
    };
    let settings = &state.config.cluster;
    shared
        .node_timeout_ms
        .store(settings.node_timeout_ms, Ordering::Relaxed);
    shared
        .full_coverage
        .store(settings.require_full_coverage, Ordering::Relaxed);
    let mut table = shared.lock();
    // A manual failover's primary pauses its writers before it records
    // the offset the replica must reach; the loop runs no command
    // between the two, so that offset is final.
    let pause = table.manual.replica.is_some();
    state.blocking.cluster_pause = pause;
    table.my_offset = state.repl.offset;
    table.migration.barrier = settings.migration_barrier;
    table.migration.allowed = settings.allow_replica_migration;
    table.manual.paused = pause;
    sync_myself(&mut table, state);
    match table.role_change.take() {
        Some(failover::RoleChange::Promote) if state.repl.promote() => {
            tracing::info!("cluster failover: this replica is now a primary");
        }
        Some(failover::RoleChange::Follow(ip, port)) => {
            tracing::info!("cluster: following the new primary {ip}:{port}");
            state
                .blocking
                .unblock_all_for_role_change(&mut state.keyspace);
            state.repl.master = Some(crate::server::repl::Master::new(ip, port));
            state.repl.changed = true;
        }
        Some(failover::RoleChange::Promote) | None => {}
    }
    table.update_state(
        now_ms(),
        settings.require_full_coverage,
        settings.node_timeout_ms,
    );
}

/// Brings this node's announced address in the table up to date with
/// the settings (CONFIG SET changes them at run time; Redis applies
/// them at once, so the CLUSTER commands call this before they answer).
pub fn sync_myself(table: &mut ClusterState, state: &crate::state::State) {
    let settings = &state.config.cluster;
    let port = if settings.announce_port != 0 {
        settings.announce_port
    } else {
        state.port
    };
    let cport = if settings.announce_bus_port != 0 {
        settings.announce_bus_port
    } else {
        settings.bus_port(state.port)
    };
    let me = table.me_mut();
    if me.port != port || me.cport != cport || me.hostname != settings.announce_hostname {
        me.port = port;
        me.cport = cport;
        me.hostname = settings.announce_hostname.clone();
        table.dirty = true;
    }
    if !settings.announce_ip.is_empty() && table.me().ip != settings.announce_ip {
        table.me_mut().ip = settings.announce_ip.clone();
        table.dirty = true;
    }
}

/// Hands a message published on this node to the bus for the other
/// nodes (all of them, or this shard's for a sharded one).
pub fn publish(shared: &Shared, channel: &[u8], message: &[u8], shard: bool) {
    shared
        .lock()
        .publish_out
        .push((channel.to_vec(), message.to_vec(), shard));
    shared.wake_bus();
}

/// DEBUG CLUSTERLINK KILL: asks the bus to close the link to `id`, from
/// it, or both, before it sends anything else. The links CLUSTER LINKS
/// lists lose them at once, as Redis's do: the list is otherwise the bus's
/// last (refreshed on its next tick), and a client that waits for the
/// link to come back must not see the killed one still listed.
pub fn kill_link(shared: &Shared, id: NodeId, to: bool, from: bool) {
    let mut state = shared.lock();
    state.link_kills.push((id, to, from));
    shared
        .links
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .retain(|l| !(l.node == id && ((to && !l.inbound) || (from && l.inbound))));
    drop(state);
    shared.wake_bus();
}

/// Delivers to this node's subscribers what other nodes published; the
/// event loop calls it each turn, and it costs one atomic load when
/// nothing waits.
pub fn deliver_published(state: &mut crate::state::State) {
    let Some(shared) = state.cluster.clone() else {
        return;
    };
    if !shared.publish_pending.swap(false, Ordering::AcqRel) {
        return;
    }
    let messages = std::mem::take(&mut shared.lock().publish_in);
    for (channel, message, shard) in messages {
        let kind = if shard {
            crate::server::pubsub::Kind::Shard
        } else {
            crate::server::pubsub::Kind::Plain
        };
        crate::server::pubsub::publish(&mut state.pubsub, &state.clients, &channel, &message, kind);
    }
}

/// Unix time in milliseconds.
pub fn now_ms() -> i64 {
    crate::state::unix_ms()
}

impl Shared {
    /// Opens the node table: reads `nodes.conf` under `dir`, or starts a
    /// new node with a random ID and writes the file at once.
    pub fn open(
        dir: &Path,
        settings: &Settings,
        port: u16,
        fs: Arc<dyn RewriteFs>,
    ) -> Result<Arc<Shared>, String> {
        let path = dir.join(&settings.config_file);
        let cport = settings.bus_port(port);
        let text = conf::load(fs.as_ref(), &path)
            .map_err(|e| format!("can't read {}: {e}", path.display()))?;
        let state = match text {
            Some(text) => state::parse_config(&text, port, cport)
                .map_err(|e| format!("unrecoverable error in {}: {e}", path.display()))?,
            None => {
                let mut rng = fastrand::Rng::new();
                ClusterState::new(NodeId::random(&mut rng), port, cport, now_ms())
            }
        };
        let shared = Arc::new(Shared {
            state: Mutex::new(state),
            fs,
            path,
            saves: saver::SaveQueue::default(),
            node_timeout_ms: AtomicI64::new(settings.node_timeout_ms),
            full_coverage: AtomicBool::new(settings.require_full_coverage),
            stop: AtomicBool::new(false),
            links: Mutex::new(Vec::new()),
            loop_waker: Mutex::new(None),
            bus_waker: Mutex::new(None),
            publish_pending: AtomicBool::new(false),
        });
        // The first save is made here, before any thread shares the
        // table: a node that cannot write its file does not start.
        shared
            .write_table()
            .map_err(|e| format!("can't write {}: {e}", shared.path.display()))?;
        Ok(shared)
    }

    /// Opens with the real file system.
    pub fn open_real(dir: &Path, settings: &Settings, port: u16) -> Result<Arc<Shared>, String> {
        Shared::open(dir, settings, port, Arc::new(RealFs))
    }

    /// The node table, locked. Held only for in-memory work.
    pub fn lock(&self) -> MutexGuard<'_, ClusterState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Asks the saver for a save if the table changed since the text of
    /// the last one was taken; never waits (the bus thread's way).
    pub fn request_save_if_dirty(&self) -> Option<u64> {
        if self.lock().dirty {
            Some(self.saves.request())
        } else {
            None
        }
    }

    /// Returns once every change made to the table before the call is in
    /// `nodes.conf` (or its save failed): the event loop's way, as Redis
    /// writes the file before it replies to the command that changed it.
    /// When the table is not dirty, a save already took its text: waiting
    /// for the newest generation asked for covers it.
    pub fn save_if_dirty(&self) -> Result<(), String> {
        let generation = match self.request_save_if_dirty() {
            Some(generation) => generation,
            None => self.saves.newest(),
        };
        self.saves.wait(generation)
    }

    /// Writes `nodes.conf` now, changed or not (CLUSTER SAVECONFIG).
    pub fn save_now(&self) -> Result<(), String> {
        self.lock().dirty = true;
        self.save_if_dirty()
    }

    /// Writes the table as it is now: its text is taken under the lock,
    /// written outside it. Called by the saver thread, and once at open.
    fn write_table(&self) -> std::io::Result<()> {
        let text = {
            let mut state = self.lock();
            state.dirty = false;
            state.config_text()
        };
        conf::save(self.fs.as_ref(), &self.path, &text)
    }

    /// Wakes the bus thread (a save it waits for is done, a message to send).
    pub fn wake_bus(&self) {
        if let Some(waker) = self
            .bus_waker
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
        {
            let _ = waker.wake();
        }
    }
}
