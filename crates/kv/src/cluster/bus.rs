//! The cluster bus thread (`docs/cluster.md`): its own mio poll over the
//! bus listener, one outbound link per known node and the inbound links
//! other nodes open. The node table is shared with the event loop; this
//! thread locks it only to apply a decoded message or to build the next
//! ones, never across socket I/O, and it never writes `nodes.conf`: it
//! asks the saver thread (`saver.rs`) and holds the replies that must not
//! leave before the save until the saver reports it done.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};

use super::handler::{handle, Outgoing};
use super::msg::{self, Message};
use super::node::{flags, Node, NodeId};
use super::state::ClusterState;
use super::{now_ms, Shared};

/// How often the bus does its timed work.
const TICK: Duration = Duration::from_millis(100);
/// How long FORGET keeps a node from coming back through gossip.
const BLACKLIST_MS: i64 = 60_000;
/// The token of the waker the event loop uses to hand over messages.
const WAKER: Token = Token(usize::MAX);
/// Bytes read per `read` call.
const READ_CHUNK: usize = 16 * 1024;

/// What CLUSTER LINKS shows of one link.
#[derive(Clone, Debug)]
pub struct LinkInfo {
    pub inbound: bool,
    pub node: NodeId,
    pub created_ms: i64,
    pub events: String,
    pub send_allocated: usize,
    pub send_used: usize,
}

/// Adds a node to meet at `ip:port` (bus `cport`), in handshake with a
/// random ID until its first PONG names it; nothing when a handshake
/// with that address is already under way.
pub fn start_handshake(state: &mut ClusterState, ip: &str, port: u16, cport: u16) {
    let busy = state
        .nodes
        .values()
        .any(|n| n.has(flags::HANDSHAKE) && n.ip == ip && n.port == port && n.cport == cport);
    if busy {
        return;
    }
    let id = NodeId::random(&mut fastrand::Rng::new());
    let node = Node::new(
        id,
        flags::HANDSHAKE | flags::MEET,
        ip,
        port,
        cport,
        now_ms(),
    );
    state.nodes.insert(id, node);
}

/// Keeps `id` from being re-added through gossip for a minute.
pub fn blacklist(state: &mut ClusterState, id: NodeId) {
    state.blacklist.insert(id, now_ms() + BLACKLIST_MS);
}

/// The links as the bus thread last listed them.
pub fn links(shared: &Shared) -> Vec<LinkInfo> {
    shared
        .links
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
}

struct Link {
    stream: TcpStream,
    inbound: bool,
    /// The node an outbound link was opened to (its ID may change when a
    /// handshake completes); an inbound link's sender once known.
    node: Option<NodeId>,
    read: Vec<u8>,
    write: Vec<u8>,
    created_ms: i64,
    connected: bool,
}

/// Starts the bus thread listening on `cport` at each of `bind`.
pub fn spawn(
    shared: Arc<Shared>,
    bind: &[String],
    cport: u16,
) -> io::Result<std::thread::JoinHandle<()>> {
    let mut listeners = Vec::new();
    let hosts: Vec<String> = if bind.is_empty() {
        vec!["0.0.0.0".to_string()]
    } else {
        bind.iter()
            .map(|h| h.trim_start_matches('-').to_string())
            .collect()
    };
    for host in hosts {
        let addr: SocketAddr = format!("{host}:{cport}")
            .parse()
            .or_else(|_| format!("[{host}]:{cport}").parse())
            .map_err(|_| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("bad bind address {host}"),
                )
            })?;
        listeners.push(TcpListener::bind(addr)?);
    }
    std::thread::Builder::new()
        .name("cluster-bus".into())
        .spawn(move || {
            if let Err(e) = Bus::new(shared, listeners).and_then(|mut b| b.run()) {
                tracing::warn!("the cluster bus stopped: {e}");
            }
        })
}

struct Bus {
    shared: Arc<Shared>,
    poll: Poll,
    listeners: Vec<TcpListener>,
    links: HashMap<usize, Link>,
    next_token: usize,
    /// When DEBUG CLUSTERLINK KILL closed the outbound link to a node: it
    /// is reopened no sooner than a tick later, as Redis's cron reopens it
    /// only after the command (or the transaction) that killed it, so
    /// what that command published next is not sent to the node.
    killed: HashMap<NodeId, std::time::Instant>,
    /// Replies held until the save of the given generation is done: the
    /// link they answer and what to send.
    held: Vec<(u64, usize, Outgoing)>,
}

impl Bus {
    fn new(shared: Arc<Shared>, mut listeners: Vec<TcpListener>) -> io::Result<Bus> {
        let poll = Poll::new()?;
        for (i, l) in listeners.iter_mut().enumerate() {
            poll.registry().register(l, Token(i), Interest::READABLE)?;
        }
        let next_token = listeners.len();
        let waker = Arc::new(mio::Waker::new(poll.registry(), WAKER)?);
        *shared
            .bus_waker
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(waker);
        Ok(Bus {
            shared,
            poll,
            listeners,
            links: HashMap::new(),
            next_token,
            killed: HashMap::new(),
            held: Vec::new(),
        })
    }

    fn run(&mut self) -> io::Result<()> {
        let mut events = Events::with_capacity(256);
        let mut last_tick = std::time::Instant::now();
        while !self.shared.stop.load(Ordering::Relaxed) {
            if let Err(e) = self.poll.poll(&mut events, Some(TICK)) {
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
            for event in events.iter() {
                let Token(t) = event.token();
                if event.token() == WAKER {
                    continue;
                }
                if t < self.listeners.len() {
                    self.accept(t);
                } else {
                    self.on_event(t, event.is_readable(), event.is_writable());
                }
            }
            self.send_published();
            if last_tick.elapsed() >= TICK {
                last_tick = std::time::Instant::now();
                self.cron();
            }
            self.shared.request_save_if_dirty();
            self.release_held();
        }
        Ok(())
    }

    /// Sends the held replies whose save is done; drops those whose save
    /// failed, as a vote that is not durable is not given.
    fn release_held(&mut self) {
        if self.held.is_empty() {
            return;
        }
        let mut waiting = Vec::new();
        for (generation, token, out) in std::mem::take(&mut self.held) {
            match self.shared.saves.status(generation) {
                None => waiting.push((generation, token, out)),
                Some(Ok(())) => {
                    if !self.apply(token, out) {
                        self.close(token);
                    }
                }
                Some(Err(e)) => {
                    tracing::warn!("can't record a failover vote in the cluster config file: {e}");
                }
            }
        }
        self.held = waiting;
    }

    /// Sends what this node's clients published: to every node, or to
    /// this shard's nodes for a sharded message.
    fn send_published(&mut self) {
        // Links DEBUG CLUSTERLINK KILL asked to close go first: a message
        // published after the kill must not travel on them.
        let kills = std::mem::take(&mut self.shared.lock().link_kills);
        for (id, to, from) in kills {
            if to {
                self.killed.insert(id, std::time::Instant::now());
            }
            let doomed: Vec<usize> = self
                .links
                .iter()
                .filter(|(_, l)| l.node == Some(id) && ((to && !l.inbound) || (from && l.inbound)))
                .map(|(t, _)| *t)
                .collect();
            for token in doomed {
                self.close(token);
            }
        }
        let (plain, shard, members) = {
            let mut state = self.shared.lock();
            if state.publish_out.is_empty() {
                return;
            }
            let mut plain = Vec::new();
            let mut shard = Vec::new();
            for (channel, message, sharded) in std::mem::take(&mut state.publish_out) {
                let bytes =
                    super::handler::publish_message(&mut state, &channel, &message, sharded);
                if sharded {
                    shard.push(bytes);
                } else {
                    plain.push(bytes);
                }
            }
            (plain, shard, super::handler::shard_members(&state))
        };
        let tokens: Vec<usize> = self
            .links
            .iter()
            .filter(|(_, l)| !l.inbound)
            .map(|(t, _)| *t)
            .collect();
        for token in tokens {
            let Some(link) = self.links.get_mut(&token) else {
                continue;
            };
            for bytes in &plain {
                link.write.extend_from_slice(bytes);
            }
            if link.node.is_some_and(|id| members.contains(&id)) {
                for bytes in &shard {
                    link.write.extend_from_slice(bytes);
                }
            }
            if !self.flush(token) {
                self.close(token);
            }
        }
    }

    fn add_link(&mut self, mut stream: TcpStream, inbound: bool, node: Option<NodeId>) {
        let token = self.next_token;
        self.next_token += 1;
        let interest = Interest::READABLE | Interest::WRITABLE;
        if self
            .poll
            .registry()
            .register(&mut stream, Token(token), interest)
            .is_err()
        {
            return;
        }
        let link = Link {
            stream,
            inbound,
            node,
            read: Vec::new(),
            write: Vec::new(),
            created_ms: now_ms(),
            connected: inbound,
        };
        self.links.insert(token, link);
    }

    fn accept(&mut self, listener: usize) {
        loop {
            let accepted = match self.listeners.get(listener) {
                Some(l) => l.accept(),
                None => return,
            };
            match accepted {
                Ok((stream, _)) => {
                    let _ = stream.set_nodelay(true);
                    self.add_link(stream, true, None);
                }
                Err(_) => return,
            }
        }
    }

    fn on_event(&mut self, token: usize, readable: bool, writable: bool) {
        let mut alive = true;
        if writable {
            alive &= self.flush(token);
        }
        if readable && alive {
            alive &= self.read(token);
        }
        if !alive {
            self.close(token);
        }
    }

    /// Writes what the link has queued; `false` when the link failed.
    fn flush(&mut self, token: usize) -> bool {
        let Some(link) = self.links.get_mut(&token) else {
            return false;
        };
        if !link.connected {
            match link.stream.peer_addr() {
                Ok(_) => link.connected = true,
                Err(e) if e.kind() == io::ErrorKind::NotConnected => return true,
                Err(_) => return false,
            }
        }
        while !link.write.is_empty() {
            match link.stream.write(&link.write) {
                Ok(0) => return false,
                Ok(n) => {
                    link.write.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
        true
    }

    /// Reads and handles every whole message; `false` when the link must
    /// close (end of stream, an error, a malformed message).
    fn read(&mut self, token: usize) -> bool {
        let mut chunk = vec![0u8; READ_CHUNK];
        loop {
            let Some(link) = self.links.get_mut(&token) else {
                return false;
            };
            match link.stream.read(&mut chunk) {
                Ok(0) => return false,
                Ok(n) => link.read.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
        loop {
            let Some(link) = self.links.get_mut(&token) else {
                return false;
            };
            let len = match msg::announced_len(&link.read) {
                Ok(Some(len)) if link.read.len() >= len => len,
                Ok(_) => return true,
                Err(_) => return false,
            };
            let bytes: Vec<u8> = link.read.drain(..len).collect();
            let Ok(message) = msg::decode(&bytes) else {
                return false;
            };
            if !self.deliver(token, message) {
                return false;
            }
        }
    }

    /// Applies one message under the table's lock, then queues what it
    /// calls for.
    fn deliver(&mut self, token: usize, message: Message) -> bool {
        let Some(link) = self.links.get(&token) else {
            return false;
        };
        let local = link.stream.local_addr().ok().map(|a| a.ip().to_string());
        let peer = link.stream.peer_addr().ok().map(|a| a.ip().to_string());
        let view = super::handler::LinkView {
            inbound: link.inbound,
            node: link.node,
            local_ip: local.unwrap_or_default(),
            peer_ip: peer.unwrap_or_default(),
        };
        let timeout = self.shared.node_timeout_ms.load(Ordering::Relaxed);
        let coverage = self.shared.full_coverage.load(Ordering::Relaxed);
        let (out, published) = {
            let mut state = self.shared.lock();
            let out = handle(&mut state, &view, &message, now_ms(), timeout);
            state.update_state(now_ms(), coverage, timeout);
            (out, !state.publish_in.is_empty())
        };
        if published {
            self.shared.publish_pending.store(true, Ordering::Release);
            let waker = self
                .shared
                .loop_waker
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            if let Some(waker) = waker {
                let _ = waker.wake();
            }
        }
        if out.save_first {
            // The reply leaves once the change is on disk; the link stays
            // open and keeps being read meanwhile.
            let generation = self.shared.saves.request();
            self.held.push((generation, token, out));
            return true;
        }
        self.apply(token, out)
    }

    /// Queues replies and broadcasts; `false` when the link must close.
    fn apply(&mut self, token: usize, out: Outgoing) -> bool {
        if let Some(link) = self.links.get_mut(&token) {
            if let Some(id) = out.link_node {
                link.node = Some(id);
            }
            for bytes in &out.reply {
                link.write.extend_from_slice(bytes);
            }
        }
        for bytes in &out.broadcast {
            for link in self.links.values_mut().filter(|l| !l.inbound) {
                link.write.extend_from_slice(bytes);
            }
        }
        if !out.reply.is_empty() {
            self.flush(token);
        }
        !out.close_link
    }

    fn close(&mut self, token: usize) {
        if let Some(mut link) = self.links.remove(&token) {
            let _ = self.poll.registry().deregister(&mut link.stream);
            if !link.inbound {
                if let Some(id) = link.node {
                    if let Some(node) = self.shared.lock().nodes.get_mut(&id) {
                        node.link_up = false;
                    }
                }
            }
        }
    }

    /// The timed work: connect to nodes without a link, ping, detect
    /// failures, publish the link list.
    fn cron(&mut self) {
        let now = now_ms();
        let timeout = self.shared.node_timeout_ms.load(Ordering::Relaxed);
        let coverage = self.shared.full_coverage.load(Ordering::Relaxed);
        let linked: Vec<NodeId> = self
            .links
            .values()
            .filter(|l| !l.inbound)
            .filter_map(|l| l.node)
            .collect();
        let plan = {
            let mut state = self.shared.lock();
            let plan = super::handler::cron(&mut state, &linked, now, timeout);
            state.update_state(now, coverage, timeout);
            plan
        };
        // Links to nodes that no longer exist (forgotten, renamed away).
        let stale: Vec<usize> = self
            .links
            .iter()
            .filter(|(_, l)| !l.inbound && l.node.is_some_and(|id| plan.gone.contains(&id)))
            .map(|(t, _)| *t)
            .collect();
        for token in stale {
            self.close(token);
        }
        self.killed.retain(|_, at| at.elapsed() < TICK);
        for (id, addr, first) in plan.connect {
            if self.killed.contains_key(&id) {
                continue;
            }
            if let Ok(stream) = TcpStream::connect(addr) {
                let _ = stream.set_nodelay(true);
                let token = self.next_token;
                self.add_link(stream, false, Some(id));
                if let Some(link) = self.links.get_mut(&token) {
                    link.write.extend_from_slice(&first);
                }
            }
        }
        for (id, bytes) in plan.ping {
            let token = self
                .links
                .iter()
                .find(|(_, l)| !l.inbound && l.node == Some(id))
                .map(|(t, _)| *t);
            if let Some(token) = token {
                if let Some(link) = self.links.get_mut(&token) {
                    link.write.extend_from_slice(&bytes);
                }
                if !self.flush(token) {
                    self.close(token);
                }
            }
        }
        for bytes in plan.broadcast {
            for link in self.links.values_mut().filter(|l| !l.inbound) {
                link.write.extend_from_slice(&bytes);
            }
        }
        let infos: Vec<LinkInfo> = self
            .links
            .values()
            .filter_map(|l| {
                Some(LinkInfo {
                    inbound: l.inbound,
                    node: l.node?,
                    created_ms: l.created_ms,
                    events: if l.write.is_empty() { "r" } else { "rw" }.to_string(),
                    send_allocated: l.write.capacity(),
                    send_used: l.write.len(),
                })
            })
            .collect();
        // A kill not yet carried out would be listed again: keep the list
        // DEBUG CLUSTERLINK KILL trimmed (`kill_link`) until it is. The
        // state lock orders this with the kill's request.
        let state = self.shared.lock();
        if state.link_kills.is_empty() {
            *self
                .shared
                .links
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = infos;
        }
    }
}
