//! The server: one event loop over mio, as Redis has one, with the log's
//! durability work on a separate syncer thread (group commit).
//!
//! Each loop iteration reads from ready clients and runs every complete
//! command they sent (pipelining), appends what the commands logged, then
//! before sleeping writes the iteration's records to the log in one append
//! and sends every reply whose records the log has acknowledged. With
//! `appendfsync always` a reply waits until its record is durable; the
//! syncer thread wakes the loop through a [`mio::Waker`] when a sync ends.

mod accept;
mod listen;
pub use listen::{bind_listeners, connect_from, plan, Planned};
mod aof_switch;
use accept::{bind_unix_listener, local_addrs, register_listeners};
pub(crate) mod blocking;
mod busy;
mod client_evict;
mod cluster_blocked;
mod conn;
mod cron;
mod diskless_load;
pub(crate) mod failover;
mod master_link;
pub mod notify;
mod obuf;
pub mod pubsub;
mod rdb_file;
mod rdb_save;
mod reload;
pub mod repl;
mod replica_rogue;
mod replicas;
pub mod shutdown;
mod stream;
mod timeout;
mod tls;
pub mod tracking;

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::net::{TcpListener, UnixListener};
use mio::{Events, Interest, Poll, Token, Waker};

use crate::aof::{open_log_on, CommandLog};
use crate::commands::{execute, unwatch_all, Ctx, Propagation};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::rewrite::driver::Wake;
use crate::rewrite::open_dir::{open_data_dir, Access};
use crate::state::{unix_ms, State};
use conn::{Conn, ReadOutcome, READ_CHUNK_BYTES};

const WAKER: Token = Token(usize::MAX - 1);
/// Tokens below this are listeners; connection `i` is `CONN_BASE + i`.
const CONN_BASE: usize = 1024;
/// The token of the `unixsocket` listener (above the TLS listeners').
const UNIX_LISTENER: usize = 1000;
/// Readiness events handled per poll.
const EVENTS_CAPACITY: usize = 1024;
/// Segments active expiry visits per timer tick.
const ACTIVE_EXPIRE_SEGMENTS_PER_TICK: usize = 256;

/// Stops a running server from another thread.
#[derive(Clone, Debug)]
pub struct ShutdownHandle {
    flag: Arc<AtomicBool>,
    waker: Arc<Waker>,
}

impl ShutdownHandle {
    /// Asks the server to flush its log and stop.
    pub fn shutdown(&self) {
        self.flag.store(true, Ordering::SeqCst);
        let _ = self.waker.wake();
    }
}

/// A bound server, ready to [`Server::run`].
#[derive(Debug)]
pub struct Server {
    poll: Poll,
    listeners: Vec<TcpListener>,
    /// The `tls-port` listeners (tokens from `tls::LISTENER_BASE`).
    tls_listeners: Vec<TcpListener>,
    /// The `unixsocket` listener and its path (removed at shutdown).
    unix_listener: Option<(UnixListener, String)>,
    waker: Arc<Waker>,
    conns: Vec<Option<Conn>>,
    /// Connection index by client id, to deliver Pub/Sub messages.
    ids: HashMap<u64, usize>,
    free: Vec<usize>,
    /// Connections with replies to send (or to check against the log).
    ready: Vec<usize>,
    /// Connections that stopped reading at their fair share with bytes
    /// possibly left in the socket; read again before the next sleep.
    reread: Vec<usize>,
    state: State,
    log: Box<dyn CommandLog>,
    /// The manifest and the running rewrite (none when `appendonly no` or
    /// on an injected device).
    rewriter: Option<crate::rewrite::driver::Rewriter>,
    prop: Propagation,
    /// The link to the master, on a replica (`master_link.rs`).
    link: Option<master_link::MasterLink>,
    /// The link failed while its input was handled: drop it after.
    link_dropping: bool,
    /// When the link last tried to connect.
    last_connect: Option<Instant>,
    /// When the stream last got a PING for the replicas.
    last_replica_ping: Instant,
    next_client_id: u64,
    stop: Arc<AtomicBool>,
    scratch: Vec<u8>,
    /// Client eviction chose the connection whose command was about to
    /// run: close it once its turn ends (`client_evict.rs`).
    evicted_current: bool,
    last_tick: Instant,
    unstack: crate::cpus::Unstack,
}

/// Copies a connection's buffer sizes, the time and its last command
/// into what CLIENT LIST shows of it.
fn note_buffers(state: &mut State, conn: &Conn) {
    let now = state.keyspace.now_ms;
    if let Some(info) = state.clients.get_mut(&conn.session.id) {
        info.last_ms = now;
        info.multi = conn.session.multi.as_ref().map(Vec::len);
        if info.cmd != conn.session.last_cmd {
            info.cmd.clone_from(&conn.session.last_cmd);
        }
        info.qbuf = conn.inbuf.len();
        info.qbuf_free = conn.inbuf.capacity() - conn.inbuf.len();
        info.obl = conn.reply.buf.len().saturating_sub(conn.out_sent);
        info.omem = conn.reply.buf.capacity();
        info.multi_mem = crate::client_memory::multi_bytes(&conn.session);
    }
}

fn io_err(op: &'static str, what: String) -> impl FnOnce(io::Error) -> Error {
    move |source| Error::Io {
        op,
        path: what.into(),
        source,
    }
}

impl Server {
    /// Opens the log (replaying it), then binds the configured addresses.
    pub fn bind(config: Config) -> Result<Server> {
        Server::bind_with(config, None)
    }

    /// [`Server::bind`] with the log on `device` instead of the one the
    /// configuration names (crash and failure tests use simulated devices).
    pub fn bind_with(
        config: Config,
        device: Option<Arc<dyn ferrite_io::Device>>,
    ) -> Result<Server> {
        let poll = Poll::new().map_err(io_err("create poll", "epoll".into()))?;
        let waker = Arc::new(
            Waker::new(poll.registry(), WAKER).map_err(io_err("create waker", "eventfd".into()))?,
        );
        // Commands replayed from the log below were logged by their
        // renamed names, and run on this thread.
        crate::commands::rename::install(&config.renamed_commands).map_err(|reason| {
            Error::Config {
                origin: "rename-command".into(),
                reason,
            }
        })?;
        let mut state = State::new(config);
        let startup = crate::memory::probe().map_or(0, |probe| (probe.allocated)());
        state.tier = crate::tier::Tier::open(&state.config, startup)?;
        state.acl = crate::users::Acl::at_startup(&state.config).map_err(|reason| {
            crate::Error::Config {
                origin: "ACL".into(),
                reason,
            }
        })?;
        rdb_save::set_waker(&mut state, Arc::clone(&waker));
        let injected = device.is_some();
        let notify_waker = Arc::clone(&waker);
        let wake = Wake::new(move || {
            let _ = notify_waker.wake();
        });
        let (opened, rewriter) = match device {
            Some(device) => (open_log_on(&mut state, device, wake.boxed())?, None),
            None => open_data_dir(&mut state, Access::Serve(wake))?.into_serving()?,
        };
        if !injected && !state.config.appendonly {
            rdb_save::load_at_startup(&mut state)?;
        }
        crate::tier::check_index(&state)?;
        let mut listeners = Vec::new();
        let mut tls_listeners = Vec::new();
        if crate::tls::wanted(&state.config.tls) {
            let context = crate::tls::build(&state.config.tls).map_err(|reason| Error::Config {
                origin: "TLS".into(),
                reason,
            })?;
            state.config.tls.context = Some(context);
            for listener in bind_listeners(&state.config.bind, state.config.tls.port)? {
                tls_listeners.push(TcpListener::from_std(listener));
            }
            tls::register_listeners(&poll, &mut tls_listeners)?;
        }
        // As Redis: `port 0` beside a `tls-port` listens on TLS only
        // (alone, it picks a free port, which tests rely on).
        if state.config.port != 0 || tls_listeners.is_empty() {
            for listener in bind_listeners(&state.config.bind, state.config.port)? {
                listeners.push(TcpListener::from_std(listener));
            }
        }
        register_listeners(&poll, &mut listeners)?;
        state.bound = local_addrs(&listeners);
        state.tls_bound = local_addrs(&tls_listeners);
        let unix_listener = bind_unix_listener(&poll, &state.config)?;
        state.port = listeners
            .first()
            .and_then(|l| l.local_addr().ok())
            .map_or(state.config.port, |a| a.port());
        let stop = Arc::new(AtomicBool::new(false));
        crate::cluster::start(&mut state, Arc::clone(&waker)).map_err(|reason| Error::Config {
            origin: "cluster".into(),
            reason,
        })?;
        let backlog_bytes = state.config.repl_backlog_size_bytes as usize;
        let as_master = state.config.replicaof.is_empty();
        state.repl.restore_from_log(backlog_bytes, as_master);
        rdb_save::expire_loaded(&mut state);
        master_link::start_as_replica(&mut state);
        // Measured before the first timer tick, so `maxmemory` holds from
        // the first command.
        state.refresh_used_memory();
        crate::oom::apply_at_start(&mut state);
        Ok(Server {
            poll,
            listeners,
            tls_listeners,
            unix_listener,
            waker,
            conns: Vec::new(),
            ids: HashMap::new(),
            free: Vec::new(),
            ready: Vec::new(),
            reread: Vec::new(),
            state,
            log: opened.log,
            rewriter,
            prop: Propagation::default(),
            link: None,
            link_dropping: false,
            last_connect: None,
            last_replica_ping: Instant::now(),
            next_client_id: 1,
            stop,
            scratch: vec![0; READ_CHUNK_BYTES],
            evicted_current: false,
            last_tick: Instant::now(),
            unstack: crate::cpus::Unstack::default(),
        })
    }

    /// The first address the server listens on.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listeners.first().and_then(|l| l.local_addr().ok())
    }

    /// The first address the server listens on for TLS connections.
    pub fn tls_local_addr(&self) -> Option<SocketAddr> {
        self.tls_listeners.first().and_then(|l| l.local_addr().ok())
    }

    /// A handle to stop the server from elsewhere.
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        ShutdownHandle {
            flag: Arc::clone(&self.stop),
            waker: Arc::clone(&self.waker),
        }
    }

    /// Shuts down on SIGTERM and SIGINT, at the next timer tick and with
    /// the flags `shutdown-on-sigterm`/`shutdown-on-sigint` name.
    pub fn stop_on_signals(&self) -> Result<()> {
        let waker = Arc::clone(&self.waker);
        shutdown::listen(&self.state.shutdown, move || {
            let _ = waker.wake();
        })
        .map_err(io_err("register signal handler", "SIGTERM, SIGINT".into()))
    }

    /// Serves until SHUTDOWN, a signal or a [`ShutdownHandle`]; then
    /// flushes and syncs the log.
    pub fn run(mut self) -> Result<()> {
        let mut events = Events::with_capacity(EVENTS_CAPACITY);
        // Read the process's set before the loop narrows its own (by
        // `server_cpulist` or by `Unstack`'s moves): threads it starts
        // later take that set.
        crate::cpus::original();
        if let Some(cpus) = self.state.config.cpulist("server_cpulist") {
            match crate::cpus::pin_current_thread(&cpus) {
                Ok(()) => tracing::info!("event loop pinned to CPUs {cpus:?}"),
                Err(e) => tracing::warn!("cannot pin the event loop to CPUs {cpus:?}: {e}"),
            }
        }
        self.unstack = crate::cpus::Unstack::for_current_thread();
        // Checked when the server was bound, so this cannot fail.
        let _ = crate::commands::rename::install(&self.state.config.renamed_commands);
        crate::rewrite::seat::register_loop();
        // The wording is redis-server's: Redis's test harness waits for it.
        tracing::info!("Ready to accept connections tcp (port {})", self.state.port);
        if let Some((_, path)) = &self.unix_listener {
            tracing::info!("The server is now ready to accept connections at {path}");
        }
        while !self.stop.load(Ordering::SeqCst) && !self.state.shutdown_requested {
            // Read each turn: CONFIG SET hz changes it at run time.
            let tick = Duration::from_millis(1000 / u64::from(self.state.config.hz_effective()));
            let timeout = if self.reread.is_empty() {
                self.sleep_limit(tick.saturating_sub(self.last_tick.elapsed()))
            } else {
                Duration::ZERO
            };
            if let Err(e) = self.poll.poll(&mut events, Some(timeout)) {
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(io_err("poll", "epoll".into())(e));
                }
            }
            self.state.keyspace.now_ms = unix_ms();
            for event in events.iter() {
                match event.token() {
                    WAKER => {}
                    Token(UNIX_LISTENER) => self.accept(None),
                    Token(t) if t < CONN_BASE => self.accept(Some(t)),
                    Token(t) => {
                        self.on_conn_event(t - CONN_BASE, event.is_readable(), event.is_writable())
                    }
                }
            }
            for index in std::mem::take(&mut self.reread) {
                self.read_and_run(index);
            }
            crate::cluster::deliver_published(&mut self.state);
            self.blocking_tick();
            self.state.note_peak_memory();
            self.count_replica_output();
            if let Some(new) = self.state.new_listeners.take() {
                self.replace_listeners(new);
            }
            if let Some(new) = self.state.new_tls_listeners.take() {
                self.replace_tls_listeners(new);
            }
            if self.last_tick.elapsed() >= tick {
                self.last_tick = Instant::now();
                self.timer();
            } else {
                self.rewrite_step();
            }
            self.rdb_step();
            if self.state.config.event_loop_unstack
                && !crate::rewrite::seat::is_lent()
                && self.unstack.check(Instant::now())
            {
                self.state.stats.event_loop_moves += 1;
            }
            self.before_sleep();
        }
        if let Some(cluster) = &self.state.cluster {
            cluster.stop.store(true, Ordering::SeqCst);
        }
        self.rdb_at_exit();
        tracing::info!("shutting down: flushing the log");
        if let Some(rewriter) = &mut self.rewriter {
            rewriter.wait(&mut self.state);
        }
        // The offset moved past the last logged record by the stream's
        // pings and reads: a restart resumes from exactly here.
        if let Some(record) = self.state.repl.mark_record() {
            self.log.append(&record);
        }
        self.log.close()?;
        if let Some((_, path)) = &self.unix_listener {
            tracing::info!("Removing the unix socket file.");
            if let Err(e) = std::fs::remove_file(path) {
                tracing::warn!("Error removing the unix socket file: {e}");
            }
        }
        // The wording is redis-server's: Redis's tests wait for it.
        tracing::warn!("Ferrite is now ready to exit, bye bye...");
        Ok(())
    }

    fn on_conn_event(&mut self, index: usize, readable: bool, writable: bool) {
        if writable {
            if self.is_link(index) {
                self.link_writable(index);
            }
            self.mark_ready(index);
        }
        if readable {
            self.read_and_run(index);
        }
    }

    fn mark_ready(&mut self, index: usize) {
        if let Some(conn) = self.conns.get_mut(index).and_then(Option::as_mut) {
            if !conn.queued {
                conn.queued = true;
                self.ready.push(index);
            }
        }
    }

    fn read_and_run(&mut self, index: usize) {
        let Some(mut conn) = self.conns.get_mut(index).and_then(Option::take) else {
            return;
        };
        // The master's stream is exempt, as in Redis: one command longer
        // than this replica's limit must still replicate.
        let limit = if self.is_link(index) {
            usize::MAX
        } else {
            self.state.config.client_query_buffer_limit_bytes
        };
        let outcome = conn.read(
            &mut self.scratch,
            limit,
            &mut self.state.stats.net_input_bytes,
        );
        match outcome {
            ReadOutcome::Closed => return self.close_after_replies(conn, index),
            ReadOutcome::TooBig => {
                tracing::warn!(
                    "closing client {}: query buffer over client-query-buffer-limit",
                    conn.session.id
                );
                return self.close(conn, index);
            }
            ReadOutcome::Data => {}
            ReadOutcome::More => self.reread.push(index),
        }
        // What it read counts before its first command runs.
        self.count_client(&mut conn, index);
        if self.is_link(index) {
            self.link_input(&mut conn, index);
        } else if self.is_replica_conn(index) || self.is_pending_replica(index) {
            self.replica_input(&mut conn);
            if conn.closing {
                // A replica that sent a command goes at once (`replica_rogue.rs`).
                return self.close(conn, index);
            }
        } else {
            self.run_commands(&mut conn, index);
            if std::mem::take(&mut self.evicted_current) {
                self.close(conn, index);
                return self.close_killed();
            }
        }
        if conn.session.sync_requested
            && !self.is_replica_conn(index)
            && !self.is_pending_replica(index)
        {
            self.attach_replica(index, &mut conn);
        }
        note_buffers(&mut self.state, &conn);
        self.count_client(&mut conn, index);
        let has_output = !conn.reply.buf.is_empty() || conn.closing || tls::wants_write(&conn);
        self.conns[index] = Some(conn);
        if has_output {
            self.mark_ready(index);
        }
        if std::mem::take(&mut self.link_dropping) {
            self.drop_link();
        }
        self.close_killed();
    }

    /// Closes the connections CLIENT KILL named.
    fn close_killed(&mut self) {
        for id in std::mem::take(&mut self.state.killed_clients) {
            let found = self
                .conns
                .iter()
                .position(|c| c.as_ref().is_some_and(|c| c.session.id == id));
            if let Some(index) = found {
                if let Some(conn) = self.conns[index].take() {
                    self.close(conn, index);
                }
            }
        }
    }

    /// Runs every complete command in the connection's buffer.
    fn run_commands(&mut self, conn: &mut Conn, index: usize) {
        let mut at = 0;
        while at < conn.inbuf.len()
            && !conn.closing
            && !conn.session.sync_requested
            && !self.state.blocking.is_blocked(conn.session.id)
        {
            let limits = conn.limits(self.state.config.proto_max_bulk_len_bytes);
            match conn.parser.parse(&conn.inbuf[at..], &limits) {
                Ok(Some(consumed)) => {
                    // As Redis, clients over maxmemory-clients go before
                    // any command runs (this one's client too).
                    if self.evict_clients(Some(conn)) {
                        break;
                    }
                    let args = conn.parser.args(&conn.inbuf[at..]);
                    conn.session.query_buffer = (
                        conn.inbuf.len() - at,
                        conn.inbuf.capacity() - conn.inbuf.len(),
                    );
                    // What a script running past busy-reply-threshold may
                    // use to serve other clients (`busy.rs`).
                    let mut busy = busy::BusyLoop {
                        poll: &mut self.poll,
                        listeners: &self.listeners,
                        tls_listeners: &self.tls_listeners,
                        unix_listener: self.unix_listener.as_ref().map(|(l, _)| l),
                        conns: &mut self.conns,
                        ids: &mut self.ids,
                        free: &mut self.free,
                        next_client_id: &mut self.next_client_id,
                        ready: &mut self.ready,
                        reread: &mut self.reread,
                        scratch: &mut self.scratch,
                        log: &*self.log,
                        held: Vec::new(),
                        swept: false,
                    };
                    let mut ctx = Ctx {
                        state: &mut self.state,
                        session: &mut conn.session,
                        reply: &mut conn.reply,
                        prop: &mut self.prop,
                        busy: Some(&mut busy),
                    };
                    execute(&mut ctx, &args);
                    if std::mem::take(&mut conn.session.postponed) {
                        // CLIENT PAUSE: the command runs from the start later.
                        self.postpone(conn.session.id, index);
                        break;
                    }
                    if self.state.save_requested {
                        self.save(&mut conn.reply);
                    }
                    at += consumed;
                    if let Some(ticket) = self.log_command() {
                        conn.wait_ticket = ticket;
                    }
                    let block = conn.session.block.take();
                    let (id, db) = (conn.session.id, conn.session.db);
                    self.after_command(id, db, index, block, &args);
                    if let Some(change) = self.state.appendonly_change.take() {
                        self.switch_appendonly(change, conn);
                    }
                    // A client CLIENT KILL named goes before the next
                    // command runs, as in Redis.
                    self.close_killed();
                    conn.closing |= conn.session.close_after_reply;
                    self.enforce_output_limit(conn);
                    // Its replies and queued commands count at once when
                    // client eviction may need them before its next
                    // command; otherwise once its turn ends, which is
                    // before any other client can see the figure.
                    if self.state.config.maxmemory_clients != 0 {
                        self.count_client(conn, index);
                    }
                    if self.state.reload_requested {
                        self.reload();
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    conn.reply.error(&format!("ERR {e}"));
                    conn.closing = true;
                }
            }
        }
        conn.inbuf.drain(..at);
        ferrite_io::buf::give_back(&mut conn.inbuf, at, conn::BUF_KEEP_BYTES);
        // A big argument on its way gets its whole room now, as Redis
        // makes it (the command being parsed starts at the buffer's start
        // once the commands before it are drained).
        if let Some(end) = conn.parser.big_arg_end() {
            if conn.inbuf.capacity() < end {
                conn.inbuf.reserve_exact(end - conn.inbuf.len());
            }
        }
    }

    /// Appends what the last command logged (and the deletions of keys that
    /// expired while it ran, first); returns the ticket to wait for.
    fn log_command(&mut self) -> Option<u64> {
        let mut ticket = None;
        if !self.state.keyspace.expired.is_empty() {
            let mut dels = Propagation::default();
            let expired = std::mem::take(&mut self.state.keyspace.expired);
            for (db, key) in &expired {
                dels.push(*db, &[b"DEL", key]);
            }
            ticket = Some(self.log.append(&dels));
            // Replicas get each expiry on its own, as Redis sends them.
            for (db, key) in &expired {
                let mut one = Propagation::default();
                one.push(*db, &[b"DEL", key]);
                self.feed_replicas(&one);
            }
        }
        // PUBLISH goes to the replicas only, never to the log: after the
        // record's commands, in the same record.
        let extra = std::mem::take(&mut self.state.repl.replicate_only);
        let log_only = std::mem::take(&mut self.state.repl.log_only);
        if self.prop.commands > 0 {
            ticket = Some(self.log.append(&self.prop));
            let mut prop = std::mem::take(&mut self.prop);
            if log_only {
                let mut to_replicas = Propagation::default();
                replicas::push_all(&mut to_replicas, &extra);
                if to_replicas.commands > 0 {
                    self.feed_replicas(&to_replicas);
                }
            } else if extra.is_empty() {
                self.feed_replicas(&prop);
            } else {
                let mut to_replicas = Propagation {
                    buf: prop.buf.clone(),
                    commands: prop.commands,
                    first_db: prop.first_db,
                    last_db: prop.last_db,
                    repl_mark: None,
                };
                replicas::push_all(&mut to_replicas, &extra);
                self.feed_replicas(&to_replicas);
            }
            prop.clear();
            self.prop = prop;
        } else if !extra.is_empty() {
            let mut to_replicas = Propagation::default();
            replicas::push_all(&mut to_replicas, &extra);
            self.feed_replicas(&to_replicas);
        }
        if let Some(lsn) = ticket {
            // A capture after this covers these records.
            self.state.keyspace.logged(lsn);
        }
        ticket
    }

    /// The peer shut its side: replies still owed to it (to commands
    /// that came with its last bytes, maybe still waiting for the log)
    /// go out first, then the connection closes, as Redis writes its
    /// replies before it reads the end of the stream.
    fn close_after_replies(&mut self, mut conn: Conn, index: usize) {
        let owed = conn.reply.buf.len() > conn.out_sent;
        if !owed || self.is_link(index) || self.is_replica_conn(index) {
            return self.close(conn, index);
        }
        conn.closing = true;
        self.conns[index] = Some(conn);
        self.mark_ready(index);
    }

    fn close(&mut self, mut conn: Conn, index: usize) {
        self.detach_replica(index);
        if self.is_link(index) {
            self.link_closed();
        }
        let _ = self.poll.registry().deregister(&mut conn.stream);
        unwatch_all(&mut self.state.keyspace, &mut conn.session);
        let id = conn.session.id;
        self.state.blocking.forget(&mut self.state.keyspace, id);
        self.state.repl.waiters.retain(|w| w.id != id);
        self.state.clients.remove(&id);
        self.state.client_memory.remove(id);
        self.state.pubsub.forget_client(id);
        self.ids.remove(&id);
        self.conns[index] = None;
        self.free.push(index);
    }

    /// Writes this iteration's records, then sends every reply the log has
    /// acknowledged.
    fn before_sleep(&mut self) {
        self.link_cron(false);
        self.request_acks();
        self.deliver_outbox();
        // Every command of this iteration goes to the log file now, as one
        // batch, so a rewrite's workers may leave out the keys they
        // superseded (the sync before their manifest covers the records),
        // and get the next segments, captured between commands.
        self.log.drain();
        self.state.keyspace.publish_superseded();
        self.state.keyspace.capture_step(false);
        self.log.flush();
        if self.state.log_failure.is_none() {
            if let Some(why) = self.log.failure() {
                self.state.log_failure = Some(why);
                self.log.info(&mut self.state.log);
            }
        }
        let acknowledged = self.log.acknowledged();
        let failed = self.state.log_failure.is_some();
        let ready = std::mem::take(&mut self.ready);
        for index in ready {
            self.flush_conn(index, acknowledged, failed);
        }
        self.evict_clients(None);
    }

    fn flush_conn(&mut self, index: usize, acknowledged: u64, failed: bool) {
        let Some(mut conn) = self.conns.get_mut(index).and_then(Option::take) else {
            return;
        };
        conn.queued = false;
        if conn.wait_ticket > acknowledged {
            if failed {
                // The log can no longer make these writes durable, so they
                // must not be acknowledged: drop the connection instead.
                return self.close(conn, index);
            }
            conn.waiting_since.get_or_insert_with(Instant::now);
            conn.queued = true;
            self.conns[index] = Some(conn);
            self.ready.push(index);
            return;
        }
        if let Some(since) = conn.waiting_since.take() {
            self.state.log.wait_us_total += since.elapsed().as_micros() as u64;
        }
        match conn.write_pending(&mut self.state.stats.net_output_bytes) {
            Ok(true) if conn.closing => self.close(conn, index),
            Ok(done) => {
                note_buffers(&mut self.state, &conn);
                self.count_client(&mut conn, index);
                if done == conn.want_write {
                    conn.want_write = !done;
                    let interest = if done {
                        Interest::READABLE
                    } else {
                        Interest::READABLE | Interest::WRITABLE
                    };
                    let token = conn.token;
                    let _ = self
                        .poll
                        .registry()
                        .reregister(&mut conn.stream, token, interest);
                }
                self.conns[index] = Some(conn);
            }
            Err(_) => self.close(conn, index),
        }
    }
}

/// Runs a server for `config` until it is stopped (the body of
/// `ferrite serve`).
pub fn serve(config: Config) -> Result<()> {
    let server = Server::bind(config)?;
    server.stop_on_signals()?;
    server.run()
}
