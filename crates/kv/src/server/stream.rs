//! A client's socket: TCP, or a Unix socket (`unixsocket`). Both carry
//! the same protocol, so the rest of the server sees one stream type and
//! only accepting, addresses and TCP's options tell them apart.

use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use mio::event::Source;
use mio::net::{TcpStream, UnixListener, UnixStream};
use mio::{Interest, Registry, Token};

use crate::error::{Error, Result};

/// A connected socket.
#[derive(Debug)]
pub enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl From<TcpStream> for Stream {
    fn from(stream: TcpStream) -> Stream {
        Stream::Tcp(stream)
    }
}

impl From<UnixStream> for Stream {
    fn from(stream: UnixStream) -> Stream {
        Stream::Unix(stream)
    }
}

impl Stream {
    /// A pending error of a non-blocking connect (TCP only: the server
    /// never connects out through a Unix socket).
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        match self {
            Stream::Tcp(s) => s.take_error(),
            Stream::Unix(s) => s.take_error(),
        }
    }

    /// Whether the socket has a peer (a non-blocking connect finished).
    pub fn is_connected(&self) -> bool {
        match self {
            Stream::Tcp(s) => s.peer_addr().is_ok(),
            Stream::Unix(s) => s.peer_addr().is_ok(),
        }
    }

    /// Ends both directions of the socket at once, so the peer sees the
    /// connection closed even before the server drops it (CLIENT KILL of
    /// a client while another command is still running).
    pub fn shutdown(&self) {
        let _ = match self {
            Stream::Tcp(s) => s.shutdown(Shutdown::Both),
            Stream::Unix(s) => s.shutdown(Shutdown::Both),
        };
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.flush(),
            Stream::Unix(s) => s.flush(),
        }
    }
}

impl Source for Stream {
    fn register(
        &mut self,
        registry: &Registry,
        token: Token,
        interest: Interest,
    ) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.register(registry, token, interest),
            Stream::Unix(s) => s.register(registry, token, interest),
        }
    }

    fn reregister(
        &mut self,
        registry: &Registry,
        token: Token,
        interest: Interest,
    ) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.reregister(registry, token, interest),
            Stream::Unix(s) => s.reregister(registry, token, interest),
        }
    }

    fn deregister(&mut self, registry: &Registry) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.deregister(registry),
            Stream::Unix(s) => s.deregister(registry),
        }
    }
}

/// Listens on the Unix socket at `path` with permissions `perm` (0: the
/// process's umask decides), as Redis does: a file left at the path by an
/// earlier run is removed first, since binding would fail on it.
pub fn bind_unix(path: &str, perm: u32) -> Result<UnixListener> {
    let fail = |op: &'static str| {
        move |source| Error::Io {
            op,
            path: path.into(),
            source,
        }
    };
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(fail("remove the old Unix socket")(e)),
    }
    let listener = UnixListener::bind(Path::new(path)).map_err(fail("bind the Unix socket"))?;
    if perm != 0 {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(perm))
            .map_err(fail("set the Unix socket's permissions"))?;
    }
    Ok(listener)
}
