//! Accepting connections: shared by the event loop and its busy re-entry
//! (`busy.rs`), which both borrow the connection table apart from the
//! rest of the server.

use std::collections::{BTreeMap, HashMap};
use std::io;

use mio::net::{TcpListener, UnixListener};
use mio::{Interest, Poll, Token};

use super::conn::Conn;
use super::listen::Planned;
use super::stream::Stream;
use super::{io_err, stream, tls, CONN_BASE, UNIX_LISTENER};
use crate::commands::Session;
use crate::config::Config;
use crate::error::Result;
use crate::state::{unix_ms, ClientInfo, Stats};

/// The connection table, borrowed field by field from the server.
#[derive(Debug)]
pub(super) struct Table<'s> {
    pub conns: &'s mut Vec<Option<Conn>>,
    /// Connection index by client id.
    pub ids: &'s mut HashMap<u64, usize>,
    /// Free slots of `conns`.
    pub free: &'s mut Vec<usize>,
    pub next_client_id: &'s mut u64,
}

/// What accepting needs of the server's state besides the table.
pub(super) struct Admission<'s> {
    pub config: &'s Config,
    pub stats: &'s mut Stats,
    pub clients: &'s mut BTreeMap<u64, ClientInfo>,
    /// The users (the default user's password decides protected mode and
    /// whether a new connection starts authenticated).
    pub acl: &'s crate::users::Acl,
}

/// Accepts every connection waiting on `listener` (a `tls-port` one when
/// `tls`: its connections start a TLS handshake).
pub(super) fn accept_all(
    listener: &TcpListener,
    tls: bool,
    poll: &Poll,
    table: &mut Table<'_>,
    admission: &mut Admission<'_>,
) {
    loop {
        let (stream, peer) = match listener.accept() {
            Ok(pair) => pair,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(e) => {
                tracing::warn!("accept failed: {e}");
                return;
            }
        };
        admission.stats.connections_received += 1;
        if let Some(refusal) = refusal(admission, peer.ip().is_loopback()) {
            // A TLS client could not read a plain error line: it is
            // only disconnected.
            if !tls {
                let mut stream = stream;
                let _ = io::Write::write_all(&mut stream, refusal.as_bytes());
            }
            continue;
        }
        let session = if tls {
            match super::tls::server_side(admission.config) {
                Some(session) => Some(session),
                None => continue,
            }
        } else {
            None
        };
        let _ = stream.set_nodelay(true);
        let laddr = stream
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_default();
        let new = NewConn {
            stream: Stream::Tcp(stream),
            addr: peer.to_string(),
            laddr,
            unix: false,
        };
        add_conn(poll, table, admission, new, session);
    }
}

/// What Redis shows as both addresses of a Unix socket client.
const UNIX_ADDR: &str = "/unixsocket:0";

/// Accepts every connection waiting on the `unixsocket` listener. They
/// are local, so protected mode lets them in, as Redis does.
pub(super) fn accept_unix(
    listener: &UnixListener,
    poll: &Poll,
    table: &mut Table<'_>,
    admission: &mut Admission<'_>,
) {
    loop {
        let stream = match listener.accept() {
            Ok((stream, _)) => stream,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(e) => {
                tracing::warn!("accept on the Unix socket failed: {e}");
                return;
            }
        };
        admission.stats.connections_received += 1;
        if let Some(refusal) = refusal(admission, true) {
            let mut stream = stream;
            let _ = io::Write::write_all(&mut stream, refusal.as_bytes());
            continue;
        }
        let new = NewConn {
            stream: Stream::Unix(stream),
            addr: UNIX_ADDR.into(),
            laddr: UNIX_ADDR.into(),
            unix: true,
        };
        add_conn(poll, table, admission, new, None);
    }
}

/// An accepted socket and how CLIENT LIST names its ends.
struct NewConn {
    stream: Stream,
    addr: String,
    laddr: String,
    unix: bool,
}

/// Why a new connection must be refused, as the error line to send.
/// `local`: the peer is on this machine (loopback or a Unix socket).
fn refusal(admission: &mut Admission<'_>, local: bool) -> Option<String> {
    let c = admission.config;
    let no_password = admission.acl.default_user().is_some_and(|u| u.nopass);
    if c.protected_mode && no_password && !local {
        return Some("-DENIED Ferrite is running in protected mode because protected mode is enabled and no password is set for the default user. Connections are only accepted from the loopback interface. Set requirepass, or disable protected-mode, to accept others.\r\n".into());
    }
    if admission.clients.len() >= c.maxclients {
        admission.stats.rejected_connections += 1;
        return Some("-ERR max number of clients reached\r\n".into());
    }
    None
}

fn add_conn(
    poll: &Poll,
    table: &mut Table<'_>,
    admission: &mut Admission<'_>,
    new: NewConn,
    tls: Option<Box<rustls::ServerConnection>>,
) {
    let NewConn {
        mut stream,
        addr,
        laddr,
        unix,
    } = new;
    let index = table.free.pop().unwrap_or_else(|| {
        table.conns.push(None);
        table.conns.len() - 1
    });
    let token = Token(CONN_BASE + index);
    if let Err(e) = poll
        .registry()
        .register(&mut stream, token, Interest::READABLE)
    {
        tracing::warn!("cannot register a connection: {e}");
        table.free.push(index);
        return;
    }
    let id = *table.next_client_id;
    *table.next_client_id += 1;
    let session = Session {
        id,
        authenticated: admission.acl.default_open(),
        ..Session::default()
    };
    admission.clients.insert(
        id,
        ClientInfo {
            addr,
            laddr,
            unix,
            created_ms: unix_ms(),
            last_ms: unix_ms(),
            resp: 2,
            ..ClientInfo::default()
        },
    );
    let mut conn = Conn::new(stream, token, session);
    conn.tls = tls;
    table.conns[index] = Some(conn);
    table.ids.insert(id, index);
}

/// Listens on the configured `unixsocket`, if any, with its
/// `unixsocketperm`.
pub(super) fn bind_unix_listener(
    poll: &Poll,
    config: &Config,
) -> Result<Option<(UnixListener, String)>> {
    if config.unixsocket.is_empty() {
        return Ok(None);
    }
    let path = config.unixsocket.clone();
    let mut listener = stream::bind_unix(&path, config.unixsocketperm)?;
    poll.registry()
        .register(&mut listener, Token(UNIX_LISTENER), Interest::READABLE)
        .map_err(io_err("register", path.clone()))?;
    Ok(Some((listener, path)))
}

/// Registers listener `i` under token `i`.
pub(super) fn register_listeners(poll: &Poll, listeners: &mut [TcpListener]) -> Result<()> {
    for (i, listener) in listeners.iter_mut().enumerate() {
        poll.registry()
            .register(listener, Token(i), Interest::READABLE)
            .map_err(io_err("register", format!("listener {i}")))?;
    }
    Ok(())
}

/// The listeners: accepting, and replacing them when CONFIG SET moves a
/// port.
impl super::Server {
    /// Listens on the listeners CONFIG SET port or bind planned instead
    /// of the old ones (connected clients stay).
    pub(super) fn replace_listeners(&mut self, new: Vec<Planned>) {
        let old = std::mem::take(&mut self.listeners);
        self.listeners = switch(&self.poll, old, new);
        if let Err(e) = register_listeners(&self.poll, &mut self.listeners) {
            tracing::warn!("cannot listen on the new addresses: {e}");
        }
        self.state.bound = local_addrs(&self.listeners);
        // With no listener left (an empty `bind`) the port stays, for
        // the next `bind` to listen on; CONFIG SET port 0 clears it.
        if let Some(port) = self.listeners.first().and_then(|l| l.local_addr().ok()) {
            self.state.port = port.port();
        }
        tracing::info!("listening on port {}", self.state.port);
    }

    /// Listens for TLS on the listeners CONFIG SET tls-port or bind
    /// planned instead of the old ones (connected clients stay).
    pub(super) fn replace_tls_listeners(&mut self, new: Vec<Planned>) {
        let old = std::mem::take(&mut self.tls_listeners);
        self.tls_listeners = switch(&self.poll, old, new);
        if let Err(e) = tls::register_listeners(&self.poll, &mut self.tls_listeners) {
            tracing::warn!("cannot listen for TLS on the new addresses: {e}");
        }
        self.state.tls_bound = local_addrs(&self.tls_listeners);
        tracing::info!("listening for TLS on port {}", self.state.config.tls.port);
    }

    /// Accepts every pending connection of the TCP or TLS listener
    /// `listener`, or of the Unix socket for `None`.
    pub(super) fn accept(&mut self, listener: Option<usize>) {
        let mut table = Table {
            conns: &mut self.conns,
            ids: &mut self.ids,
            free: &mut self.free,
            next_client_id: &mut self.next_client_id,
        };
        let mut admission = Admission {
            config: &self.state.config,
            stats: &mut self.state.stats,
            clients: &mut self.state.clients,
            acl: &self.state.acl,
        };
        match listener {
            Some(index) => {
                if let Some((socket, tls)) =
                    tls::listener(&self.listeners, &self.tls_listeners, index)
                {
                    accept_all(socket, tls, &self.poll, &mut table, &mut admission);
                }
            }
            None => {
                if let Some((unix, _)) = &self.unix_listener {
                    accept_unix(unix, &self.poll, &mut table, &mut admission);
                }
            }
        }
    }
}

/// The addresses `listeners` accept on.
pub(super) fn local_addrs(listeners: &[TcpListener]) -> Vec<std::net::SocketAddr> {
    listeners
        .iter()
        .filter_map(|l| l.local_addr().ok())
        .collect()
}

/// The listeners of plan `new`, taking the kept ones out of `old`; the
/// rest of `old` closes. Every listener leaves the poll here, to be
/// registered again under the token of its new place.
fn switch(poll: &Poll, mut old: Vec<TcpListener>, new: Vec<Planned>) -> Vec<TcpListener> {
    for listener in &mut old {
        let _ = poll.registry().deregister(listener);
    }
    let mut out = Vec::new();
    for planned in new {
        match planned {
            Planned::Fresh(listener) => out.push(TcpListener::from_std(listener)),
            Planned::Keep(addr) => {
                let at = old.iter().position(|l| l.local_addr().ok() == Some(addr));
                if let Some(at) = at {
                    out.push(old.swap_remove(at));
                }
            }
        }
    }
    out
}
