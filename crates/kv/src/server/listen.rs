//! The `bind` addresses as Redis 7.0 reads them, and the sockets behind
//! them: listeners for the clients, and the source address of the links
//! this server opens (`bind-source-addr`).
//!
//! An entry is an IPv4 address (or a name resolved as one), an IPv6
//! address when it holds a `:`, `*` for every IPv4 address or `::*` for
//! every IPv6 one. A leading `-` marks it optional: when the address is
//! not on this machine (EADDRNOTAVAIL) it is skipped instead of failing.
//! An address family the system lacks is skipped whatever the mark, so
//! `* -::*` works on a host without IPv6.
//!
//! CONFIG SET binds the new addresses while the old listeners still
//! accept, and the event loop switches over only once every address is
//! bound: a failure leaves the old listeners as they were. An address
//! that stays in the list keeps its listener ([`Planned::Keep`]), since
//! binding it a second time would fail while the first is open.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};

use socket2::{Domain, Protocol, Socket, Type};

use crate::error::{Error, Result};

/// Pending connections a listener queues (Redis's `tcp-backlog` default).
const BACKLOG: i32 = 511;

/// One listener of a new set: an old one carried over, or a new one.
#[derive(Debug)]
pub enum Planned {
    /// The listener already bound at this address stays.
    Keep(SocketAddr),
    /// A listener bound for the new set.
    Fresh(std::net::TcpListener),
}

/// The socket address of one `bind` entry (without its `-`) on `port`.
fn resolve(entry: &str, port: u16) -> io::Result<SocketAddr> {
    let ip = match entry {
        "*" => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        "::*" => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        _ => match entry.parse::<IpAddr>() {
            Ok(ip) => ip,
            // A name: the first address of the family its form implies,
            // as Redis asks the resolver for one family.
            Err(_) => {
                let v6 = entry.contains(':');
                return (entry, port)
                    .to_socket_addrs()?
                    .find(|a| a.is_ipv6() == v6)
                    .ok_or_else(|| {
                        io::Error::new(
                            io::ErrorKind::InvalidInput,
                            format!("{entry:?} is not an address of this family"),
                        )
                    });
            }
        },
    };
    Ok(SocketAddr::new(ip, port))
}

/// A non-blocking listener on `addr`. An IPv6 one takes IPv6 only, so
/// `::*` and `*` can both be bound on the same port.
fn listen_on(addr: SocketAddr) -> io::Result<std::net::TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into())?;
    socket.listen(BACKLOG)?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

/// Whether a failure to bind is skipped rather than failing the set:
/// a family or protocol the system lacks, or an optional address that is
/// not on this machine.
fn skippable(e: &io::Error, optional: bool) -> bool {
    if optional && e.kind() == io::ErrorKind::AddrNotAvailable {
        return true;
    }
    matches!(
        e.raw_os_error(),
        Some(
            libc::ENOPROTOOPT
                | libc::EPROTONOSUPPORT
                | libc::ESOCKTNOSUPPORT
                | libc::EPFNOSUPPORT
                | libc::EAFNOSUPPORT
        )
    )
}

/// The listeners for `bind` on `port`: the ones in `held` (the addresses
/// listened on now) are kept, the others bound. An error names the
/// address that failed; the listeners bound so far close with it.
pub fn plan(bind: &[String], port: u16, held: &[SocketAddr]) -> Result<Vec<Planned>> {
    let mut out = Vec::new();
    for entry in bind {
        let (optional, host) = match entry.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, entry.as_str()),
        };
        let bound = resolve(host, port).and_then(|addr| {
            if held.contains(&addr) {
                Ok(Planned::Keep(addr))
            } else {
                listen_on(addr).map(Planned::Fresh)
            }
        });
        match bound {
            Ok(planned) => out.push(planned),
            Err(e) => {
                tracing::warn!("Could not create server TCP listening socket {host}:{port}: {e}");
                if !skippable(&e, optional) {
                    return Err(Error::Io {
                        op: "bind",
                        path: format!("{host}:{port}").into(),
                        source: e,
                    });
                }
            }
        }
    }
    Ok(out)
}

/// Binds a non-blocking listener on `port` at each of the `bind`
/// addresses (port 0: one the system picks). CONFIG SET port and
/// tls-port bind through this too, so a port in use is refused before
/// anything changes.
pub fn bind_listeners(bind: &[String], port: u16) -> Result<Vec<std::net::TcpListener>> {
    Ok(plan(bind, port, &[])?
        .into_iter()
        .filter_map(|p| match p {
            Planned::Fresh(l) => Some(l),
            Planned::Keep(_) => None,
        })
        .collect())
}

/// Starts a non-blocking connection to `addr` from `source`
/// (`bind-source-addr`; empty for any). As Redis, binding the source is
/// best effort: if it fails the connection goes out from any address.
pub fn connect_from(addr: SocketAddr, source: &str) -> io::Result<std::net::TcpStream> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    if !source.is_empty() {
        match resolve(source, 0) {
            Ok(from) if from.is_ipv6() == addr.is_ipv6() => {
                if let Err(e) = socket.bind(&from.into()) {
                    tracing::warn!("cannot bind the source address {source}: {e}");
                }
            }
            Ok(_) => tracing::warn!("source address {source} is not of the family of {addr}"),
            Err(e) => tracing::warn!("cannot resolve the source address {source}: {e}"),
        }
    }
    socket.set_nonblocking(true)?;
    match socket.connect(&addr.into()) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
        Err(e) => return Err(e),
    }
    Ok(socket.into())
}
