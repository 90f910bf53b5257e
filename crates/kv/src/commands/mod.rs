//! The command table and dispatch: arity and authentication checks,
//! MULTI queueing, refusals (MISCONF, OOM), then the command itself.
//!
//! Every command is a plain function over a [`Ctx`]. A write command also
//! says what to append to the log through [`Propagation`], in a
//! deterministic form (relative expiry as absolute `PXAT`, SPOP as SREM,
//! INCRBYFLOAT as SET), so that replaying the log rebuilds the same data.

mod accounting;
mod acl_check;
mod acl_cmd;
mod bits;
mod blocking;
mod client;
mod cluster;
mod cluster_topology;
pub(crate) use cluster_topology::endpoint_for;
mod config;
mod connection;
mod debug;
pub mod diagnostics;
mod digest;
mod dump;
mod facts;
mod failover;
mod functions;
mod geo;
mod hashes;
mod hll;
mod introspect;
mod keys;
mod lists;
mod lolwut;
mod memory;
mod migrate;
mod module;
mod object;
mod persistence;
pub mod rename;
mod replication;
mod scripting;
mod server;
// Pub/Sub, keyspace notifications, client-side caching, MONITOR.
mod notify;
mod pubsub;
mod sets;
mod sort;
mod streams;
mod strings;
mod table;
mod tracking;
mod transactions;
mod zsets;

use std::borrow::Cow;

use crate::keyspace::{segment_of, Keyspace, SEGMENTS_PER_DB};
use crate::resp::{Args, ReplyBuf};
use crate::state::State;
use crate::types::Bytes;

pub(crate) use acl_check::in_script as acl_script_check;
pub(crate) use acl_check::permitted as acl_permitted;
pub use blocking::{serve as serve_blocked, BlockKind, BlockRequest, Pause, PauseMode};
pub use cluster::bump_epoch as bump_config_epoch;
pub use connection::REDIS_VERSION;
pub use functions::functions_record;
pub(crate) use persistence::load_libraries;
pub use scripting::{
    busy_command, script_cache_figures, BusyOutcome, BusyView, Libraries, Reenter,
};
pub use table::{all as all_commands, count as command_count, lookup, Channels, CommandSpec, Keys};
pub use transactions::{flatten, unwatch_all};

pub(crate) use accounting::stats_name;
use accounting::{protected_refusal, record_call, reject};

/// A command's error reply, without the leading `-`.
pub type CmdError = Cow<'static, str>;
/// What command functions return: `Err` becomes an error reply.
pub type CmdResult = Result<(), CmdError>;

/// The error replies shared by many commands, worded as Redis words them.
pub mod errors {
    /// Operation on a key of another type.
    pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
    /// Bad option combination or unknown option.
    pub const SYNTAX: &str = "ERR syntax error";
    /// An argument that must be an integer is not.
    pub const NOT_INTEGER: &str = "ERR value is not an integer or out of range";
    /// An argument that must be a float is not.
    pub const NOT_FLOAT: &str = "ERR value is not a valid float";
    /// INCR and friends past `i64`.
    pub const OVERFLOW: &str = "ERR increment or decrement would overflow";
    /// RENAME and LSET on a missing key.
    pub const NO_SUCH_KEY: &str = "ERR no such key";
    /// A SCAN cursor that is not a number.
    pub const INVALID_CURSOR: &str = "ERR invalid cursor";
    /// Bad score range ends.
    pub const MIN_MAX_FLOAT: &str = "ERR min or max is not a float";
    /// A string that would exceed `proto-max-bulk-len`.
    pub const STRING_TOO_LONG: &str =
        "ERR string exceeds maximum allowed size (proto-max-bulk-len)";
    /// A positive number was required.
    pub const NOT_POSITIVE: &str = "ERR value is out of range, must be positive";
}

pub mod flags;

pub mod acl;

/// The log form of one client command: RESP commands, with `SELECT` added
/// where the database changes inside the record.
#[derive(Debug, Default)]
pub struct Propagation {
    /// RESP bytes of the commands.
    pub buf: Vec<u8>,
    /// How many commands `buf` holds.
    pub commands: usize,
    /// Database the first command runs in.
    pub first_db: Option<usize>,
    /// Database the last command ran in.
    pub last_db: usize,
    /// On a replica, the replication ID, offset and stream database the
    /// record leaves the dataset at, logged with it (`aof/repl_mark.rs`).
    pub repl_mark: Option<(String, i64, usize)>,
}

impl Propagation {
    /// Appends one command for database `db`.
    pub fn push(&mut self, db: usize, args: &[&[u8]]) {
        match self.first_db {
            None => self.first_db = Some(db),
            Some(_) if self.last_db != db => {
                let text = db.to_string();
                encode_command(&mut self.buf, &[b"SELECT", text.as_bytes()]);
                self.commands += 1;
            }
            Some(_) => {}
        }
        self.last_db = db;
        encode_command(&mut self.buf, args);
        self.commands += 1;
    }

    /// Appends the command exactly as the client sent it.
    pub fn push_args(&mut self, db: usize, args: &Args<'_>) {
        let parts: Vec<&[u8]> = args.iter().collect();
        self.push(db, &parts);
    }

    /// Forgets everything; a buffer one large record grew gives back its
    /// growth at the next smaller one.
    pub fn clear(&mut self) {
        let used = self.buf.len();
        self.buf.clear();
        ferrite_io::buf::give_back(&mut self.buf, used, crate::aof::SCRATCH_KEEP_BYTES);
        self.commands = 0;
        self.first_db = None;
        self.repl_mark = None;
    }
}

/// Encodes a command as a RESP multi-bulk array.
pub fn encode_command(out: &mut Vec<u8>, args: &[&[u8]]) {
    use crate::resp::reply::push_i64;
    out.push(b'*');
    push_i64(out, args.len() as i64);
    out.extend_from_slice(b"\r\n");
    for a in args {
        out.push(b'$');
        push_i64(out, a.len() as i64);
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// A queued MULTI command.
pub type QueuedCommand = Vec<Vec<u8>>;

/// What the connection-level commands keep per client.
#[derive(Debug, Default)]
pub struct Session {
    /// CLIENT ID.
    pub id: u64,
    /// Selected database.
    pub db: usize,
    /// CLIENT SETNAME.
    pub name: Option<Bytes>,
    /// Passed AUTH or HELLO AUTH. (A client that has not may still run
    /// commands while the `default` user is on and needs no password.)
    pub authenticated: bool,
    /// The user it runs as, when not `default`.
    pub user: Option<Vec<u8>>,
    /// Commands queued since MULTI, if in a transaction.
    pub multi: Option<Vec<QueuedCommand>>,
    /// CLIENT LIST's `multi-mem` while `multi` holds commands: their
    /// arguments' bytes and a pointer each, as Redis counts them.
    pub multi_bytes: u64,
    /// The memory figure and kind the event loop last gave the client
    /// memory ledger, so an unchanged figure costs no ledger update.
    pub mem_counted: Option<(u64, crate::client_memory::ClientKind)>,
    /// A command failed to queue: EXEC will abort.
    pub multi_error: bool,
    /// WATCHed keys with the version seen at WATCH time.
    pub watched: Vec<(usize, Bytes, u64)>,
    /// QUIT: close once the reply is written.
    pub close_after_reply: bool,
    /// SYNC: the server sends the dataset, then the stream of writes.
    pub sync_requested: bool,
    /// PSYNC's replication ID and offset (with `sync_requested`).
    pub psync: Option<(String, i64)>,
    /// `REPLCONF listening-port` and `ip-address`: where this client, a
    /// replica to be, says it listens.
    pub replica_port: u16,
    pub replica_ip: Option<String>,
    /// `REPLCONF capa eof`: the replica reads the EOF-marker form, so its
    /// full sync may wait for more replicas (`repl-diskless-sync-delay`).
    pub capa_eof: bool,
    /// ASKING: the next command may reach a slot being imported.
    pub asking: bool,
    /// READONLY: reads of the primary's slots are served by this replica.
    pub readonly: bool,
    /// The connection to this server's master: its stream applies with
    /// no replies and no refusals for read-only or stale replicas.
    pub is_master: bool,
    /// Replaying the log: no auth, no refusals, nothing logged.
    pub is_replay: bool,
    /// The last command run, as CLIENT LIST's `cmd` names it (`set`,
    /// `client|list`); `None` before the first.
    pub last_cmd: Option<Cow<'static, str>>,
    /// Left by a blocking command that found nothing to serve: the event
    /// loop blocks the client (`server/blocking.rs`).
    pub block: Option<BlockRequest>,
    /// Set while the event loop runs a blocked client's command again
    /// because this key became ready: the command looks only at it.
    pub serving: Option<Bytes>,
    /// EXEC is running this client's queue: blocking commands answer at
    /// once, as Redis's do inside MULTI.
    pub in_exec: bool,
    /// CLIENT PAUSE held the last command back: it did not run, and runs
    /// from the start once the pause ends.
    pub postponed: bool,
    /// Bytes of the query buffer from the running command on, and its
    /// spare capacity, as CLIENT LIST shows them for the caller.
    pub query_buffer: (usize, usize),
    /// Arguments of the running command that SLOWLOG (and MONITOR) show
    /// as `(redacted)`: passwords and other secrets ([`Ctx::redact`]).
    pub redacted: Vec<usize>,
    /// The error the running command returns was counted in errorstats
    /// already (a script passing on a command's error); read and cleared
    /// when the call is counted.
    pub error_counted: bool,
    /// The running command replied an error inside a reply it returned as
    /// a success (a script's error table): it counts as failed.
    pub failed_in_reply: bool,
}

/// Everything a command can touch.
#[derive(Debug)]
pub struct Ctx<'a> {
    /// Server-wide state: keyspace, configuration, statistics.
    pub state: &'a mut State,
    /// The calling client.
    pub session: &'a mut Session,
    /// Where the reply goes.
    pub reply: &'a mut ReplyBuf,
    /// What to log.
    pub prop: &'a mut Propagation,
    /// The event loop, for a script that runs past
    /// `busy-reply-threshold` to serve other clients (`None` where no
    /// client is served: log replay, commands a script calls).
    pub busy: Option<&'a mut dyn Reenter>,
}

impl Ctx<'_> {
    /// The keyspace.
    pub fn ks(&mut self) -> &mut Keyspace {
        &mut self.state.keyspace
    }

    /// The client's database.
    pub fn db(&self) -> usize {
        self.session.db
    }

    /// Logs the command as sent.
    pub fn propagate_args(&mut self, args: &Args<'_>) {
        let db = self.session.db;
        self.prop.push_args(db, args);
    }

    /// Logs `args` for the client's database.
    pub fn propagate(&mut self, args: &[&[u8]]) {
        let db = self.session.db;
        self.prop.push(db, args);
    }

    /// Hides argument `index` of the running command from SLOWLOG and
    /// MONITOR, as Redis redacts passwords.
    pub fn redact(&mut self, index: usize) {
        self.session.redacted.push(index);
    }

    /// Random numbers for SPOP, RANDOMKEY and friends.
    pub fn rng(&mut self) -> &mut fastrand::Rng {
        &mut self.state.rng
    }
}

/// Upper-cases argument `index` for option matching.
pub(crate) fn upper(args: &Args<'_>, index: usize) -> Vec<u8> {
    args.get(index).to_ascii_uppercase()
}

/// Parses an integer argument.
pub(crate) fn int_arg(args: &Args<'_>, index: usize) -> Result<i64, CmdError> {
    crate::types::number::parse_i64(args.get(index)).ok_or(Cow::Borrowed(errors::NOT_INTEGER))
}

/// Finds the spec that runs `args`: the command, or for a container
/// (CLIENT, CONFIG...) its subcommand. `Err` is the error reply.
pub fn resolve(
    args: &Args<'_>,
) -> Result<(Option<&'static CommandSpec>, &'static CommandSpec), CmdError> {
    let Some(spec) = rename::resolve_name(args.get(0)) else {
        return Err(Cow::Owned(unknown_command_text(args)));
    };
    if spec.subcommands.is_empty() {
        return Ok((None, spec));
    }
    if args.len() < 2 && spec.arity_ok(1) {
        // COMMAND alone lists every command.
        return Ok((None, spec));
    }
    if args.len() < 2 {
        return Err(Cow::Owned(format!(
            "ERR wrong number of arguments for '{}' command",
            spec.name
        )));
    }
    match spec.subcommand(args.get(1)) {
        Some(sub) => Ok((Some(spec), sub)),
        None => Err(Cow::Owned(format!(
            "ERR unknown subcommand '{}'. Try {} HELP.",
            truncate(&String::from_utf8_lossy(args.get(1)), 128),
            spec.name.to_ascii_uppercase()
        ))),
    }
}

/// Runs one parsed command for a client: checks, MULTI queueing, dispatch.
pub fn execute(ctx: &mut Ctx<'_>, args: &Args<'_>) {
    if args.is_empty() {
        return;
    }
    notify::begin(ctx);
    execute_checked(ctx, args);
    notify::end(ctx);
    // ASKING lasts one command (inside MULTI, until EXEC), as in Redis.
    if ctx.session.asking
        && ctx.session.multi.is_none()
        && !args.get(0).eq_ignore_ascii_case(b"asking")
    {
        ctx.session.asking = false;
    }
}

/// In cluster mode, the redirection or refusal of a command whose keys
/// this node does not serve now (`cluster/route.rs`); `None` when it runs
/// here. The master's stream and log replay are never redirected.
fn cluster_refusal(ctx: &mut Ctx<'_>, spec: &CommandSpec, args: &Args<'_>) -> Option<String> {
    let shared = ctx.state.cluster.clone()?;
    if ctx.session.is_master || ctx.session.is_replay || !crate::cluster::route::routed(spec) {
        return None;
    }
    let queued;
    let single = [*args];
    let mut commands: Vec<Args<'_>> = Vec::new();
    let list: &[Args<'_>] = if spec.name == "exec" {
        let queue = ctx.session.multi.as_ref()?;
        queued = crate::cluster::route::queue_args(queue);
        commands.extend(queued.iter().map(|(buf, ranges)| Args::new(buf, ranges)));
        &commands
    } else {
        &single
    };
    let settings = &ctx.state.config.cluster;
    let query = crate::cluster::route::Query {
        spec,
        asking: ctx.session.asking,
        readonly: ctx.session.readonly,
        reads_when_down: settings.allow_reads_when_down,
        shard_when_down: settings.allow_pubsubshard_when_down,
    };
    let state = shared.lock();
    let keyspace = &mut ctx.state.keyspace;
    let mut exists = |key: &[u8]| keyspace.contains(0, key);
    let redirect = crate::cluster::route::route(&state, query, list, &mut exists).err()?;
    let endpoint = |node: &crate::cluster::Node| {
        cluster_topology::endpoint_for(&settings.preferred_endpoint, node)
    };
    Some(crate::cluster::route::error_text(
        &redirect, &state, &endpoint,
    ))
}

/// The body of [`execute`], between the Pub/Sub hooks.
fn execute_checked(ctx: &mut Ctx<'_>, args: &Args<'_>) {
    let (container, spec) = match resolve(args) {
        Ok(found) => found,
        Err(e) => {
            ctx.session.multi_error |= ctx.session.multi.is_some();
            reject(ctx, None, &e);
            return;
        }
    };
    let name = stats_name(container, spec);
    if !spec.has(flags::NOAUTH) && acl_check::auth_required(ctx) {
        reject(ctx, Some(name), "NOAUTH Authentication required.");
        return;
    }
    if !spec.arity_ok(args.len()) {
        ctx.session.multi_error |= ctx.session.multi.is_some();
        let text = format!(
            "ERR wrong number of arguments for '{}' command",
            full_name(container, spec)
        );
        reject(ctx, Some(name), &text);
        return;
    }
    if let Some(text) = protected_refusal(ctx, container, spec) {
        reject(ctx, Some(name), &text);
        return;
    }
    // As Redis, after the arity check and before anything else; a command
    // MULTI refuses anyway is refused as such below.
    let refused_in_multi = ctx.session.multi.is_some() && spec.has(flags::NO_MULTI);
    if !refused_in_multi {
        // ACL LOG's client info names the refused command, as Redis's.
        ctx.session.last_cmd = Some(command_label(container, spec));
        if let Some(text) = acl_check::at_dispatch(ctx, container, spec, args) {
            ctx.session.multi_error |= ctx.session.multi.is_some();
            reject(ctx, Some(name), &text);
            return;
        }
    }
    if let Some(text) = cluster_refusal(ctx, spec, args) {
        if spec.name == "exec" {
            ctx.session.multi = None;
            ctx.session.multi_error = false;
            unwatch_all(&mut ctx.state.keyspace, ctx.session);
        } else {
            ctx.session.multi_error |= ctx.session.multi.is_some();
        }
        reject(ctx, Some(name), &text);
        return;
    }
    // As Redis, eviction runs before each command a client sends, never
    // between the commands of a transaction: the DELs it logs go before
    // the command's own record, which is where they happened.
    ctx.state.out_of_memory = false;
    // The PM tier's demotion comes first: it moves bytes from DRAM to PM
    // without changing the total `maxmemory` compares. It runs for
    // replayed and replicated commands too, so a load stays in budget.
    crate::tier::before_command(ctx.state);
    if !ctx.session.is_replay && !ctx.session.is_master && ctx.state.over_maxmemory() {
        ctx.state.out_of_memory = !memory::perform_evictions(ctx);
        // The evicted keys' invalidations precede this command's reply:
        // Redis evicts before the command, not within it.
        ctx.state.pubsub.evicting = true;
        crate::server::notify::settle(ctx.state);
        ctx.state.pubsub.evicting = false;
        pubsub::flush_inline(ctx);
    }
    // As Redis: the command the client sent last, queued or run (after
    // EXEC, `exec`, not the last command it ran).
    ctx.session.last_cmd = Some(command_label(container, spec));
    if let Some(e) = replication::refusal(ctx, replication::dispatch_flags(ctx, spec, args)) {
        ctx.session.multi_error |= ctx.session.multi.is_some();
        reject(ctx, Some(name), e);
        return;
    }
    if let Some(e) = notify::subscribed_refusal(ctx, container, spec) {
        ctx.session.multi_error |= ctx.session.multi.is_some();
        ctx.reply.error(&e);
        return;
    }
    if !ctx.session.is_master && blocking::paused(ctx, spec, args) {
        ctx.session.postponed = true;
        return;
    }
    if ctx.session.multi.is_some() && !spec.has(flags::NOQUEUE) {
        if spec.has(flags::NO_MULTI) {
            ctx.session.multi_error = true;
            reject(
                ctx,
                Some(name),
                "ERR Command not allowed inside a transaction",
            );
            return;
        }
        if spec.has(flags::DENYOOM) && !ctx.session.is_replay && ctx.state.out_of_memory {
            ctx.session.multi_error = true;
            reject(ctx, Some(name), OOM);
            return;
        }
        if let Some(queue) = ctx.session.multi.as_mut() {
            // What the queue holds, for the client's memory (`multi-mem`),
            // kept as it grows so that reading it costs nothing.
            if queue.is_empty() {
                ctx.session.multi_bytes = 0;
            }
            ctx.session.multi_bytes += crate::client_memory::queued_command_bytes(args);
            queue.push(args.to_vec());
        }
        ctx.reply.simple("QUEUED");
        return;
    }
    run(ctx, container, spec, args);
}

/// The OOM refusal, worded as Redis words it.
const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";

/// Runs a command that passed the checks of [`execute`] (also used by
/// EXEC); `container` is the command of a subcommand (CONFIG for GET).
pub(crate) fn run(
    ctx: &mut Ctx<'_>,
    container: Option<&'static CommandSpec>,
    spec: &'static CommandSpec,
    args: &Args<'_>,
) {
    let name = stats_name(container, spec);
    if let Err(e) = refusal(ctx, spec) {
        reject(ctx, Some(name), &e);
        return;
    }
    ctx.state.stats.commands_processed += 1;
    let config = &ctx.state.config;
    ctx.state.keyspace.access = crate::keyspace::access::AccessPolicy {
        lfu: config.maxmemory_policy.is_lfu(),
        lfu_log_factor: config.lfu_log_factor,
        lfu_decay_minutes: config.lfu_decay_time_minutes,
    };
    if spec.flags & flags::WRITE != 0 && ctx.state.keyspace.capturing() && spans_segments(spec) {
        // Rule C1 (`keyspace/capture.rs`); single-key commands never need it.
        let mut segments = Vec::new();
        touched_segments(
            spec,
            args,
            ctx.session.db,
            ctx.state.keyspace.databases(),
            &mut segments,
        );
        ctx.state.keyspace.capture_before(&segments);
    }
    if spec.flags & flags::WRITE != 0 && ctx.state.keyspace.superseding() {
        before_write_during_rewrite(ctx, spec, args);
    }
    ctx.session.redacted.clear();
    let started = std::time::Instant::now();
    let reply_start = ctx.reply.buf.len();
    let logged_before = ctx.prop.commands;
    let result = (spec.handler)(ctx, args);
    if spec.flags & flags::WRITE != 0 && ctx.prop.commands > logged_before && !ctx.session.is_replay
    {
        ctx.state.rewrite.changes_since_save += 1;
    }
    // One reading of the clock serves the command's statistics and the
    // slow log, as Redis measures a call's duration once for both.
    let elapsed = started.elapsed();
    record_call(ctx, name, elapsed, result.as_ref().err());
    if let Err(e) = result {
        ctx.reply.error(&e);
    }
    // A command that blocked enters the slow log when it is served
    // (`blocking::serve`), as in Redis.
    if !ctx.session.is_replay && ctx.session.block.is_none() {
        diagnostics::record(ctx, spec, args, elapsed.as_micros() as u64);
    }
    notify::after_handler(ctx, spec, args, reply_start);
}

/// Whether a command may touch more than one segment: it names several
/// keys, or whole databases (FLUSHDB, FLUSHALL, SWAPDB).
fn spans_segments(spec: &CommandSpec) -> bool {
    spec.keys.may_be_many() || spec.has(flags::WHOLE_DB | flags::CROSS_DB)
}

/// Appends to `out` the global segments (`db * SEGMENTS_PER_DB +
/// segment`) that command `args` may read or write when it runs in
/// database `db` of `databases`: those of its keys (`CommandSpec::keys`),
/// every segment of the database for FLUSHDB, of both for SWAPDB, of all
/// for FLUSHALL. Nothing for a command without keys, and nothing beyond
/// `databases` (a SWAPDB naming no valid database touches nothing).
pub fn touched_segments(
    spec: &CommandSpec,
    args: &Args<'_>,
    db: usize,
    databases: usize,
    out: &mut Vec<u32>,
) {
    let whole = |db: usize, out: &mut Vec<u32>| {
        let first = (db * SEGMENTS_PER_DB) as u32;
        out.extend(first..first + SEGMENTS_PER_DB as u32);
    };
    match spec.name {
        "flushall" => (0..databases).for_each(|d| whole(d, out)),
        "flushdb" => whole(db, out),
        "swapdb" => {
            for at in [1, 2] {
                if let Some(d) = db_arg(args, at, databases) {
                    whole(d, out);
                }
            }
        }
        _ => {
            let mut positions = Vec::new();
            spec.keys.positions(args, &mut positions);
            let base = db * SEGMENTS_PER_DB;
            out.extend(
                positions
                    .into_iter()
                    .map(|at| (base + segment_of(args.get(at))) as u32),
            );
            if spec.has(flags::CROSS_DB) {
                if let Some((target, at)) = cross_db_key(spec, args, databases) {
                    out.push((target * SEGMENTS_PER_DB + segment_of(args.get(at))) as u32);
                }
            }
        }
    }
}

/// For a [`flags::CROSS_DB`] command: the database its other key is in
/// and that key's position (MOVE's key in the target database, COPY's
/// destination in the `DB` it names), if the arguments name a valid one.
pub fn cross_db_key(
    spec: &CommandSpec,
    args: &Args<'_>,
    databases: usize,
) -> Option<(usize, usize)> {
    match spec.name {
        "move" => db_arg(args, 2, databases).map(|d| (d, 1)),
        "copy" => (3..args.len().saturating_sub(1))
            .rev()
            .find(|&i| args.get(i).eq_ignore_ascii_case(b"db"))
            .and_then(|i| db_arg(args, i + 1, databases))
            .map(|d| (d, 2)),
        _ => None,
    }
}

/// Argument `at` of `args` as a database index below `databases`.
fn db_arg(args: &Args<'_>, at: usize, databases: usize) -> Option<usize> {
    std::str::from_utf8(args.get(at))
        .ok()
        .and_then(|t| t.parse::<usize>().ok())
        .filter(|&d| d < databases)
}

/// The segments of a sequence of commands (a logged record, a queued
/// transaction), in order: tracks the database a SELECT among them
/// switches to, as it will have switched by the time the commands after
/// it run (inside MULTI too).
#[derive(Clone, Copy, Debug)]
pub struct SegmentWalk {
    db: usize,
    databases: usize,
}

impl SegmentWalk {
    /// A walk starting in database `db` of `databases`.
    pub fn new(db: usize, databases: usize) -> SegmentWalk {
        SegmentWalk { db, databases }
    }

    /// The next command, `args` of `spec`: a SELECT switches the database
    /// and touches nothing; any other appends its [`touched_segments`] to
    /// `out`.
    pub fn step(&mut self, spec: &CommandSpec, args: &Args<'_>, out: &mut Vec<u32>) {
        if spec.name == "select" {
            if let Some(d) = db_arg(args, 1, self.databases) {
                self.db = d;
            }
        } else {
            touched_segments(spec, args, self.db, self.databases, out);
        }
    }
}

/// How CLIENT LIST names a command: its name, and for a subcommand
/// `container|sub` (allocating only then).
fn command_label(container: Option<&CommandSpec>, spec: &CommandSpec) -> Cow<'static, str> {
    match container {
        Some(c) => Cow::Owned(format!("{}|{}", c.name, spec.name)),
        None => Cow::Borrowed(spec.name),
    }
}

/// A command's full name: `config|get` for a subcommand.
pub fn full_name(container: Option<&CommandSpec>, spec: &CommandSpec) -> String {
    match container {
        Some(c) => format!("{}|{}", c.name, spec.name),
        None => spec.name.to_string(),
    }
}

/// While a rewrite may leave superseded keys out of its parts
/// (`keyspace/supersede.rs`): a write naming several keys may read one
/// into another's state when the log is replayed, so its keys are pinned
/// (unless the command [`flags::SUPERSEDES`] them); after SWAPDB a
/// database index no longer names the snapshot's database.
fn before_write_during_rewrite(ctx: &mut Ctx<'_>, spec: &CommandSpec, args: &Args<'_>) {
    if spec.name == "swapdb" {
        ctx.state.keyspace.stop_superseding();
        return;
    }
    let cross_db = spec.has(flags::CROSS_DB);
    if !(spec.keys.may_be_many() || cross_db) || spec.has(flags::SUPERSEDES) {
        return;
    }
    let mut positions = Vec::new();
    spec.keys.positions(args, &mut positions);
    let db = ctx.session.db;
    for at in positions {
        ctx.state.keyspace.pin(db, args.get(at));
    }
    if cross_db {
        let databases = ctx.state.keyspace.databases();
        if let Some((target, at)) = cross_db_key(spec, args, databases) {
            ctx.state.keyspace.pin(target, args.get(at));
        }
    }
}

/// Why a command must be refused now, if it must.
fn refusal(ctx: &Ctx<'_>, spec: &CommandSpec) -> CmdResult {
    if ctx.session.is_replay {
        return Ok(());
    }
    if spec.flags & flags::WRITE != 0 {
        if let Some(why) = &ctx.state.log_failure {
            return Err(Cow::Owned(format!(
                "MISCONF Errors writing to the AOF file: {why}. Writes are refused until the server is restarted; reads still work."
            )));
        }
    }
    if spec.flags & flags::DENYOOM != 0 && !scripting::oom_allowed() && ctx.state.out_of_memory {
        return Err(Cow::Borrowed(OOM));
    }
    Ok(())
}

fn unknown_command_text(args: &Args<'_>) -> String {
    let name = String::from_utf8_lossy(args.get(0));
    let mut text = format!(
        "ERR unknown command '{}', with args beginning with: ",
        truncate(&name, 128)
    );
    let mut budget = 128usize;
    for arg in args.iter().skip(1) {
        if budget == 0 {
            break;
        }
        let shown = String::from_utf8_lossy(arg);
        let shown = truncate(&shown, budget);
        budget = budget.saturating_sub(shown.len());
        text.push_str(&format!("'{shown}' "));
    }
    text
}

fn truncate(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}
