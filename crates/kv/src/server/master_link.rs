//! The replica side: the link to the master REPLICAOF names, driven by the
//! event loop like any connection (never blocking it). Connect (non-
//! blocking), PING, AUTH when `masterauth` is set, `REPLCONF
//! listening-port`, `REPLCONF capa eof capa psync2`, then `PSYNC id
//! offset+1` (`? -1` with no history). `+CONTINUE` resumes the stream;
//! `+FULLRESYNC id offset` is followed by the RDB payload, in the bulk
//! form or the EOF-marker form, which replaces the dataset, durably
//! (`install_dataset`). Then every command of the stream is applied as
//! the master's client, with no reply but `REPLCONF ACK` to GETACK, and
//! written to this server's log; the offset counts the stream's bytes up
//! to the last complete command outside a transaction.

use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::time::{Duration, Instant};

use mio::net::TcpStream;
use mio::{Interest, Token};

use super::conn::Conn;
use super::repl::{Backlog, Link, NO_ID};
use super::{Server, CONN_BASE};
use crate::commands::{encode_command, execute, Ctx, Session};
use crate::keyspace::Keyspace;
use crate::state::{unix_ms, ClientInfo};

/// Length of the EOF marker of a diskless transfer.
const EOF_MARK_LEN: usize = 40;

/// A handshake reply the link waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    Pong,
    Auth,
    Port,
    Capa,
    Psync,
}

/// How the RDB payload is delimited.
#[derive(Debug)]
enum Payload {
    /// Waiting for the `$` line.
    Header,
    /// `$len`: that many bytes.
    Bulk(usize),
    /// `$EOF:mark`: bytes up to the mark; `searched` bytes hold none.
    Eof { mark: Vec<u8>, searched: usize },
}

/// Where the link is.
#[derive(Debug)]
enum Phase {
    Connecting,
    Handshake(VecDeque<Expect>),
    Transfer {
        replid: String,
        offset: i64,
        payload: Payload,
    },
    Streaming,
}

/// The connection to the master.
#[derive(Debug)]
pub(super) struct MasterLink {
    index: usize,
    phase: Phase,
    last_ack: Instant,
    /// Stream bytes of the transaction being applied, not yet counted.
    pending: Vec<u8>,
}

/// The address of `host`, resolving names (Redis resolves them too).
fn resolve(host: &str, port: u16) -> Option<SocketAddr> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Some(SocketAddr::new(ip, port));
    }
    if host.eq_ignore_ascii_case("localhost") {
        return Some(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    (host, port).to_socket_addrs().ok()?.next()
}

impl Server {
    /// Whether connection `index` is the link to the master.
    pub(super) fn is_link(&self, index: usize) -> bool {
        self.link.as_ref().is_some_and(|l| l.index == index)
    }

    /// Acts on REPLICAOF and keeps the link going: connects when it is
    /// down (at most once a second), sends an ACK every second, drops a
    /// link silent for `repl-timeout`.
    pub(super) fn link_cron(&mut self, tick: bool) {
        if std::mem::take(&mut self.state.repl.changed) {
            self.drop_link();
            if !self.state.repl.is_replica() {
                // Promoted: the replicas must learn the new ID.
                let stale = std::mem::take(&mut self.state.repl.stale_replicas);
                self.disconnect_replicas_among(&stale);
                self.state.repl.backlog.get_or_insert_with(|| {
                    Backlog::new(self.state.config.repl_backlog_size_bytes as usize)
                });
            }
            self.last_connect = None;
        }
        let Some(master) = &self.state.repl.master else {
            return;
        };
        let now = unix_ms();
        let timeout_ms = self.state.config.repl_timeout_s as i64 * 1000;
        if let Some(link) = self.link.as_ref().filter(|_| tick) {
            if now - master.last_io_ms > timeout_ms {
                match link.phase {
                    Phase::Connecting | Phase::Handshake(_) => {
                        tracing::warn!("Timeout connecting to the MASTER...")
                    }
                    Phase::Transfer { .. } => tracing::warn!("Timeout receiving bulk data from MASTER... If the problem persists try to set the 'repl-timeout' parameter in redis.conf to a larger value."),
                    Phase::Streaming => {
                        tracing::warn!("MASTER timeout: no data nor PING received...")
                    }
                }
                self.drop_link();
                return;
            }
        }
        if self.link.is_none() {
            if self
                .last_connect
                .is_none_or(|t| t.elapsed() >= Duration::from_secs(1))
            {
                self.last_connect = Some(Instant::now());
                self.connect_master();
            }
            return;
        }
        self.send_ack_if_due();
    }

    fn send_ack_if_due(&mut self) {
        let Some(link) = &mut self.link else {
            return;
        };
        if !matches!(link.phase, Phase::Streaming)
            || link.last_ack.elapsed() < Duration::from_secs(1)
        {
            return;
        }
        link.last_ack = Instant::now();
        let index = link.index;
        self.send_ack(index);
    }

    fn send_ack(&mut self, index: usize) {
        let offset = self.state.repl.offset.to_string();
        if let Some(conn) = self.conns.get_mut(index).and_then(Option::as_mut) {
            encode_command(
                &mut conn.reply.buf,
                &[b"REPLCONF", b"ACK", offset.as_bytes()],
            );
        }
        self.mark_ready(index);
    }

    fn set_link(&mut self, link: Link) {
        if let Some(m) = &mut self.state.repl.master {
            if m.link == Link::Connected && link != Link::Connected {
                m.down_since_ms = unix_ms();
            }
            m.link = link;
        }
    }

    /// Starts a non-blocking connection to the master.
    fn connect_master(&mut self) {
        let Some(m) = &self.state.repl.master else {
            return;
        };
        tracing::info!("Connecting to MASTER {}:{}", m.host, m.port);
        let Some(addr) = resolve(&m.host, m.port) else {
            tracing::warn!("Unable to connect to MASTER: cannot resolve {}", m.host);
            return;
        };
        let source = &self.state.config.bind_source_addr;
        let mut stream = match super::connect_from(addr, source) {
            Ok(s) => TcpStream::from_std(s),
            Err(e) => {
                tracing::warn!("Unable to connect to MASTER: {e}");
                return;
            }
        };
        let index = self.free.pop().unwrap_or_else(|| {
            self.conns.push(None);
            self.conns.len() - 1
        });
        let token = Token(CONN_BASE + index);
        let interest = Interest::READABLE | Interest::WRITABLE;
        if let Err(e) = self.poll.registry().register(&mut stream, token, interest) {
            tracing::warn!("cannot register the master link: {e}");
            self.free.push(index);
            return;
        }
        let id = self.next_client_id;
        self.next_client_id += 1;
        let session = Session {
            id,
            authenticated: true,
            is_master: true,
            ..Session::default()
        };
        self.state.clients.insert(
            id,
            ClientInfo {
                addr: addr.to_string(),
                created_ms: unix_ms(),
                last_ms: unix_ms(),
                resp: 2,
                ..ClientInfo::default()
            },
        );
        let mut conn = Conn::new(stream, token, session);
        conn.want_write = true;
        self.conns[index] = Some(conn);
        self.ids.insert(id, index);
        self.state.repl.link_client = Some(id);
        if let Some(m) = &mut self.state.repl.master {
            m.last_io_ms = unix_ms();
        }
        self.link = Some(MasterLink {
            index,
            phase: Phase::Connecting,
            last_ack: Instant::now(),
            pending: Vec::new(),
        });
        self.set_link(Link::Connecting);
    }

    /// A writable event on the link while connecting: the connection is
    /// up (or failed); the handshake starts with a PING.
    pub(super) fn link_writable(&mut self, index: usize) {
        let connecting = self
            .link
            .as_ref()
            .is_some_and(|l| matches!(l.phase, Phase::Connecting));
        if !connecting {
            return;
        }
        let Some(conn) = self.conns.get_mut(index).and_then(Option::as_mut) else {
            return;
        };
        let failed = matches!(conn.stream.take_error(), Ok(Some(_)) | Err(_));
        if failed {
            tracing::warn!("Error condition on socket for SYNC: connection refused");
            return self.drop_link();
        }
        if !conn.stream.is_connected() {
            return;
        }
        tracing::info!("MASTER <-> REPLICA sync started");
        encode_command(&mut conn.reply.buf, &[b"PING"]);
        if let Some(link) = &mut self.link {
            link.phase = Phase::Handshake(VecDeque::from([Expect::Pong]));
        }
        if let Some(m) = &mut self.state.repl.master {
            m.last_io_ms = unix_ms();
        }
        self.set_link(Link::Handshake);
        self.mark_ready(index);
    }

    /// Closes the link (REPLICAOF, a failure, a timeout); the cron
    /// reconnects while a master is set.
    pub(super) fn drop_link(&mut self) {
        if let Some(index) = self.link.as_ref().map(|l| l.index) {
            if let Some(conn) = self.conns.get_mut(index).and_then(Option::take) {
                self.close(conn, index);
            }
        }
        self.link_closed();
    }

    /// The link's connection closed.
    pub(super) fn link_closed(&mut self) {
        // A transfer cut short: the old dataset stays.
        self.loading_ends(Some("the connection closed before its end"));
        self.link = None;
        self.state.repl.link_client = None;
        self.set_link(Link::Connect);
    }

    /// New bytes from the master.
    pub(super) fn link_input(&mut self, conn: &mut Conn, index: usize) {
        if let Some(m) = &mut self.state.repl.master {
            m.last_io_ms = unix_ms();
        }
        loop {
            let Some(link) = &mut self.link else { return };
            let progressed = match &mut link.phase {
                Phase::Connecting => false,
                Phase::Handshake(_) => self.handshake_step(conn),
                Phase::Transfer { .. } => self.transfer_step(conn),
                Phase::Streaming => {
                    self.apply_stream(conn, index);
                    false
                }
            };
            if !progressed || conn.closing {
                return;
            }
        }
    }

    /// Takes one reply line of the handshake, if whole; whether it did.
    fn handshake_step(&mut self, conn: &mut Conn) -> bool {
        let skip = conn.inbuf.iter().take_while(|b| **b == b'\n').count();
        conn.inbuf.drain(..skip);
        let Some(end) = conn.inbuf.windows(2).position(|w| w == b"\r\n") else {
            return false;
        };
        let line = String::from_utf8_lossy(&conn.inbuf[..end]).into_owned();
        conn.inbuf.drain(..end + 2);
        let Some(Phase::Handshake(expect)) = self.link.as_mut().map(|l| &mut l.phase) else {
            return false;
        };
        let Some(what) = expect.pop_front() else {
            return false;
        };
        let error = line.starts_with('-');
        match what {
            Expect::Pong => {
                let tolerated = ["-NOAUTH", "-NOPERM", "-ERR operation not permitted"];
                if error && !tolerated.iter().any(|t| line.starts_with(t)) {
                    return self
                        .handshake_failed(&format!("Error reply to PING from master: '{line}'"));
                }
                self.send_handshake(conn);
            }
            Expect::Auth if error => {
                return self.handshake_failed(&format!("Unable to AUTH to MASTER: {line}"));
            }
            Expect::Auth | Expect::Port => {}
            Expect::Capa => self.send_psync(conn),
            Expect::Psync => return self.psync_reply(conn, &line),
        }
        true
    }

    fn handshake_failed(&mut self, why: &str) -> bool {
        tracing::warn!("{why}");
        self.link_failed();
        false
    }

    /// Marks the link to be dropped once control is back in the loop
    /// (the connection is out of the table while its input is handled).
    fn link_failed(&mut self) {
        self.link_dropping = true;
    }

    /// AUTH (when `masterauth` is set), the listening port, capabilities.
    fn send_handshake(&mut self, conn: &mut Conn) {
        let mut expect = VecDeque::new();
        let c = &self.state.config;
        if let Some(pass) = &c.masterauth {
            match &c.masteruser {
                Some(user) => encode_command(
                    &mut conn.reply.buf,
                    &[b"AUTH", user.as_bytes(), pass.as_bytes()],
                ),
                None => encode_command(&mut conn.reply.buf, &[b"AUTH", pass.as_bytes()]),
            }
            expect.push_back(Expect::Auth);
        }
        // The address the master should show and give out: announced, or
        // the one it sees and this server's port.
        let port = match c.replica_announce_port {
            0 => self.state.port,
            announced => announced,
        }
        .to_string();
        encode_command(
            &mut conn.reply.buf,
            &[b"REPLCONF", b"listening-port", port.as_bytes()],
        );
        expect.push_back(Expect::Port);
        if let Some(ip) = &c.replica_announce_ip {
            encode_command(
                &mut conn.reply.buf,
                &[b"REPLCONF", b"ip-address", ip.as_bytes()],
            );
            expect.push_back(Expect::Port);
        }
        encode_command(
            &mut conn.reply.buf,
            &[b"REPLCONF", b"capa", b"eof", b"capa", b"psync2"],
        );
        expect.push_back(Expect::Capa);
        if let Some(link) = &mut self.link {
            link.phase = Phase::Handshake(expect);
        }
    }

    /// PSYNC with the history this server has, `? -1` with none.
    fn send_psync(&mut self, conn: &mut Conn) {
        let repl = &self.state.repl;
        let (id, offset) = if repl.offset > 0 || repl.backlog.is_some() {
            (repl.replid.clone(), (repl.offset + 1).to_string())
        } else {
            ("?".to_string(), "-1".to_string())
        };
        // A master handing over asks its target to take over.
        let handover = repl.failover.as_ref().is_some_and(|f| f.in_progress);
        let mut command: Vec<&[u8]> = vec![b"PSYNC", id.as_bytes(), offset.as_bytes()];
        if handover {
            command.push(b"FAILOVER");
        }
        encode_command(&mut conn.reply.buf, &command);
        if let Some(link) = &mut self.link {
            link.phase = Phase::Handshake(VecDeque::from([Expect::Psync]));
        }
    }

    fn psync_reply(&mut self, conn: &mut Conn, line: &str) -> bool {
        let words: Vec<&str> = line.split_whitespace().collect();
        if self
            .state
            .repl
            .failover
            .as_ref()
            .is_some_and(|f| f.in_progress)
        {
            // The handover ends with the target's answer: it took over,
            // or it refused and this server is a master again.
            if matches!(words.first(), Some(&"+FULLRESYNC") | Some(&"+CONTINUE")) {
                super::failover::end(&mut self.state);
            } else {
                super::failover::abort(&mut self.state, "Failover target rejected psync request");
            }
        }
        match words.as_slice() {
            ["+FULLRESYNC", id, offset] => {
                let Ok(offset) = offset.parse::<i64>() else {
                    return self.handshake_failed(&format!("bad FULLRESYNC reply: {line}"));
                };
                tracing::info!("Full resync from master: {id}:{offset}");
                if let Some(link) = &mut self.link {
                    link.phase = Phase::Transfer {
                        replid: (*id).to_string(),
                        offset,
                        payload: Payload::Header,
                    };
                }
                // The master may close the link right after the payload's
                // last bytes (a CLIENT KILL mid-sync): read each time to
                // the end, so the close is seen even when it came in the
                // same readiness event.
                conn.read_to_end = true;
                self.set_link(Link::Transfer);
                true
            }
            ["+CONTINUE", rest @ ..] => {
                tracing::info!("Successful partial resynchronization with master.");
                let repl = &mut self.state.repl;
                if let Some(new_id) = rest.first() {
                    if *new_id != repl.replid {
                        repl.replid2 = std::mem::replace(&mut repl.replid, (*new_id).to_string());
                        repl.second_offset = repl.offset + 1;
                        self.disconnect_replicas();
                    }
                }
                // The stream goes on in the database it had selected.
                conn.session.db = self.state.repl.stream_db;
                self.start_streaming();
                true
            }
            _ => self.handshake_failed(&format!("Unexpected reply to PSYNC from master: {line}")),
        }
    }

    fn start_streaming(&mut self) {
        if let Some(link) = &mut self.link {
            link.phase = Phase::Streaming;
            link.last_ack = Instant::now() - Duration::from_secs(1);
        }
        self.set_link(Link::Connected);
    }

    /// Reads the payload's `$` line (after any `\n` keep-alives): a bulk
    /// length or an EOF mark. Whether it did.
    fn payload_header(&mut self, conn: &mut Conn) -> bool {
        let skip = conn.inbuf.iter().take_while(|b| **b == b'\n').count();
        conn.inbuf.drain(..skip);
        let Some(end) = conn.inbuf.windows(2).position(|w| w == b"\r\n") else {
            return false;
        };
        let line = conn.inbuf[..end].to_vec();
        conn.inbuf.drain(..end + 2);
        let (payload, total) = if let Some(mark) = line.strip_prefix(b"$EOF:") {
            if mark.len() != EOF_MARK_LEN {
                return self.handshake_failed("bad EOF mark from master");
            }
            let eof = Payload::Eof {
                mark: mark.to_vec(),
                searched: 0,
            };
            (eof, 0)
        } else {
            let len = line
                .strip_prefix(b"$")
                .and_then(crate::types::number::parse_i64)
                .and_then(|n| usize::try_from(n).ok());
            let Some(len) = len else {
                return self.handshake_failed("bad bulk payload format from master");
            };
            (Payload::Bulk(len), len as u64)
        };
        let bulk = matches!(payload, Payload::Bulk(_)).then_some(total);
        let mut master_id = String::new();
        if let Some(Phase::Transfer {
            payload: p, replid, ..
        }) = self.link.as_mut().map(|l| &mut l.phase)
        {
            *p = payload;
            master_id.clone_from(replid);
        }
        if let Some(m) = &mut self.state.repl.master {
            m.transfer = (total, 0);
        }
        self.payload_begins(&master_id, bulk);
        true
    }

    /// Reads the payload's `$` line, then the payload; loads it when whole.
    fn transfer_step(&mut self, conn: &mut Conn) -> bool {
        let Some(Phase::Transfer { payload, .. }) = self.link.as_mut().map(|l| &mut l.phase) else {
            return false;
        };
        let whole = match payload {
            Payload::Header => return self.payload_header(conn),
            Payload::Bulk(len) => (conn.inbuf.len() >= *len).then_some((*len, *len)),
            Payload::Eof { mark, searched } => {
                let from = searched.saturating_sub(EOF_MARK_LEN);
                let found = conn.inbuf[from..]
                    .windows(EOF_MARK_LEN)
                    .position(|w| w == mark.as_slice())
                    .map(|p| (from + p, from + p + EOF_MARK_LEN));
                *searched = conn.inbuf.len();
                found
            }
        };
        if let Some(m) = &mut self.state.repl.master {
            m.transfer.1 = conn.inbuf.len() as u64;
        }
        let Some((len, consumed)) = whole else {
            return false;
        };
        let rdb: Vec<u8> = conn.inbuf[..len].to_vec();
        conn.inbuf.drain(..consumed);
        let Some(Phase::Transfer { replid, offset, .. }) = self
            .link
            .as_mut()
            .map(|l| std::mem::replace(&mut l.phase, Phase::Streaming))
        else {
            return false;
        };
        conn.wait_ticket = 0;
        conn.read_to_end = false;
        self.payload_whole();
        let loaded = self.load_full_sync(&rdb, replid, offset, &mut conn.session);
        self.loading_ends(loaded.as_ref().err().map(String::as_str));
        match loaded {
            Ok(()) => {
                tracing::info!("MASTER <-> REPLICA sync: Finished with success");
                self.start_streaming();
                true
            }
            Err(e) => self.handshake_failed(&format!(
                "Failed trying to load the MASTER synchronization DB: {e}"
            )),
        }
    }

    /// Replaces the dataset with the master's, durably, and takes its
    /// history: ID, offset, a fresh backlog.
    fn load_full_sync(
        &mut self,
        rdb: &[u8],
        replid: String,
        offset: i64,
        session: &mut Session,
    ) -> Result<(), String> {
        let databases = self.state.keyspace.databases();
        let mut keyspace = Keyspace::new(databases);
        keyspace.now_ms = unix_ms();
        // A replica keeps keys already expired for its master's DELs.
        let loaded = crate::rdb::dump::load_bytes(rdb, &mut keyspace, false, 0)?;
        let keys = loaded.keys_loaded;
        tracing::info!(
            "MASTER <-> REPLICA sync: loaded {keys} keys ({} bytes)",
            rdb.len()
        );
        self.install_dataset(keyspace)
            .map_err(|e| format!("cannot make the new dataset durable: {e}"))?;
        // The master's libraries replace this server's, as its keys do: a
        // library only this replica had must not outlive the sync. Both go
        // through the log, so a restarted replica has the master's set.
        if !self.state.functions.is_empty() {
            self.apply_master_command(session, &[b"FUNCTION", b"FLUSH"]);
        }
        for code in loaded.libraries {
            self.apply_master_command(session, &[b"FUNCTION", b"LOAD", b"REPLACE", &code]);
        }
        let repl = &mut self.state.repl;
        repl.replid = replid;
        repl.replid2 = NO_ID.to_string();
        repl.second_offset = -1;
        repl.offset = offset;
        repl.seldb = None;
        // The master selects a database before its next record.
        repl.stream_db = 0;
        repl.backlog = Some(Backlog::new(
            self.state.config.repl_backlog_size_bytes as usize,
        ));
        // The new dataset's history, logged after it: a restart from here
        // continues with the master partially.
        if let Some(record) = self.state.repl.mark_record() {
            self.log.append(&record);
        }
        // Replicas of this replica must resync from the new history.
        self.disconnect_replicas();
        Ok(())
    }

    /// Runs one command as the master's client, discarding its reply.
    fn apply_master_command(&mut self, session: &mut Session, command: &[&[u8]]) {
        let owned: Vec<Vec<u8>> = command.iter().map(|a| a.to_vec()).collect();
        let (buf, ranges) = crate::commands::flatten(&owned);
        let args = crate::resp::Args::new(&buf, &ranges);
        let mut reply = crate::resp::ReplyBuf::new(crate::resp::Protocol::Resp2);
        let mut ctx = Ctx {
            busy: None,
            state: &mut self.state,
            session,
            reply: &mut reply,
            prop: &mut self.prop,
        };
        execute(&mut ctx, &args);
        self.log_command();
    }

    /// Applies every whole command of the stream: GETACK is answered,
    /// everything else runs with its reply discarded and is logged; the
    /// bytes count in the offset, and go on to this server's replicas,
    /// once no transaction is open.
    fn apply_stream(&mut self, conn: &mut Conn, index: usize) {
        let mut at = 0;
        let limits = conn.limits(self.state.config.proto_max_bulk_len_bytes);
        while at < conn.inbuf.len() && !self.link_dropping {
            let consumed = match conn.parser.parse(&conn.inbuf[at..], &limits) {
                Ok(Some(consumed)) => consumed,
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!("protocol error from MASTER: {e}");
                    self.link_failed();
                    break;
                }
            };
            let args = conn.parser.args(&conn.inbuf[at..]);
            let getack = args.len() >= 2
                && args.get(0).eq_ignore_ascii_case(b"REPLCONF")
                && args.get(1).eq_ignore_ascii_case(b"GETACK");
            if getack {
                let offset = self.state.repl.offset.to_string();
                encode_command(
                    &mut conn.reply.buf,
                    &[b"REPLCONF", b"ACK", offset.as_bytes()],
                );
            } else if !args.is_empty() {
                let mark = conn.reply.buf.len();
                let mut ctx = Ctx {
                    busy: None,
                    state: &mut self.state,
                    session: &mut conn.session,
                    reply: &mut conn.reply,
                    prop: &mut self.prop,
                };
                ctx.state.keyspace.expiry_ignored = true;
                execute(&mut ctx, &args);
                ctx.state.keyspace.expiry_ignored = false;
                // A SELECT of the stream outlives this connection.
                ctx.state.repl.stream_db = ctx.session.db;
                if conn.reply.buf.get(mark) == Some(&b'-') {
                    report_master_error(&conn.reply.buf[mark..], &args);
                }
                conn.reply.buf.truncate(mark);
                self.mark_stream_record(conn.session.multi.is_some(), consumed);
                self.log_command();
                let (id, db) = (conn.session.id, conn.session.db);
                self.after_command(id, db, index, None, &args);
            }
            let raw = &conn.inbuf[at..at + consumed];
            let in_multi = conn.session.multi.is_some();
            if let Some(link) = &mut self.link {
                link.pending.extend_from_slice(raw);
                if !in_multi {
                    let bytes = std::mem::take(&mut link.pending);
                    self.push_stream(&bytes);
                }
            }
            at += consumed;
        }
        conn.inbuf.drain(..at);
        // A big command from the master (a 32 MB SET) grew the buffer to
        // hold it: once all is applied the room goes back, as Redis trims
        // its master client's query buffer, so the replica's used_memory
        // does not keep it.
        if conn.inbuf.is_empty() {
            ferrite_io::buf::give_back(&mut conn.inbuf, 0, super::conn::BUF_KEEP_BYTES);
        }
    }
}

impl Server {
    /// Tags the record the command just applied from the stream (if it
    /// logged one) with the offset after it, `consumed` bytes on: the log
    /// then holds the data and its offset in one record. Inside a
    /// transaction nothing is logged until EXEC.
    fn mark_stream_record(&mut self, in_multi: bool, consumed: usize) {
        if self.prop.commands == 0 || in_multi {
            return;
        }
        let pending = self.link.as_ref().map_or(0, |link| link.pending.len());
        let repl = &self.state.repl;
        let after = repl.offset + (pending + consumed) as i64;
        self.prop.repl_mark = Some((repl.replid.clone(), after, repl.stream_db));
    }
}

/// Logs an error the master's command got here, which means the datasets
/// differ (a write on a writable replica, or a bug): in Redis's words, so
/// that operators' log searches find it.
fn report_master_error(reply: &[u8], args: &crate::resp::Args<'_>) {
    let line = reply.split(|b| *b == b'\r').next().unwrap_or_default();
    let error = String::from_utf8_lossy(line.get(1..).unwrap_or_default());
    let name = match crate::commands::resolve(args) {
        Ok((container, spec)) => crate::commands::full_name(container, spec),
        Err(_) => "<unknown>".to_string(),
    };
    tracing::warn!(
        "== CRITICAL == This replica is sending an error to its master: '{error}' after processing the command '{name}'"
    );
}

/// `replicaof host port` in the configuration: the server starts as a
/// replica, and its loop connects.
pub(super) fn start_as_replica(state: &mut crate::state::State) {
    let text = state.config.replicaof.clone();
    let Some((host, port)) = text.rsplit_once(' ') else {
        return;
    };
    let Ok(port) = port.parse::<u16>() else {
        return;
    };
    state.repl.master = Some(super::repl::Master {
        host: host.to_string(),
        port,
        link: Link::Connect,
        down_since_ms: 0,
        last_io_ms: unix_ms(),
        transfer: (0, 0),
    });
}

impl Server {
    /// Makes `keyspace`, a full sync's dataset, the server's: with a
    /// manifest, as a new generation whose durable manifest is the switch
    /// (`Rewriter::install`), then loaded back as at start-up; without
    /// one, in memory only.
    fn install_dataset(&mut self, mut keyspace: Keyspace) -> crate::error::Result<()> {
        let Some(rewriter) = &mut self.rewriter else {
            self.state.keyspace = keyspace;
            return Ok(());
        };
        rewriter.wait(&mut self.state);
        self.log.close()?;
        let threads = crate::rewrite::driver::rewrite_threads(&self.state);
        let installed = rewriter.install(&mut keyspace, threads);
        drop(keyspace);
        // Whatever happened, the manifest names a whole dataset: the new
        // one, or the old one if the switch did not happen.
        self.reopen_data("a full sync");
        self.state.keyspace.now_ms = unix_ms();
        // The old log was closed, so every reply waiting for it may go;
        // the new log counts its records from its own start.
        for conn in self.conns.iter_mut().flatten() {
            conn.wait_ticket = 0;
        }
        installed
    }
}
