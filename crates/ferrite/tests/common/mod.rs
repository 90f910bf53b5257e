//! Shared by the tests that run the real `ferrite serve` binary: starting
//! it, a minimal blocking RESP client, and a free port.

#![allow(dead_code)]

pub mod ledger;
pub mod rounds;

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A minimal blocking RESP client: enough for SET, GET, INCR, MULTI, KEYS.
pub struct Client {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Vec<Reply>),
}

impl Client {
    pub fn connect(port: u16) -> std::io::Result<Client> {
        let stream = TcpStream::connect(("127.0.0.1", port))?;
        stream.set_read_timeout(Some(Duration::from_secs(20)))?;
        Ok(Client {
            reader: BufReader::new(stream.try_clone()?),
            writer: stream,
        })
    }

    pub fn send(&mut self, args: &[&[u8]]) -> std::io::Result<()> {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
        self.writer.write_all(&out)
    }

    pub fn read(&mut self) -> std::io::Result<Reply> {
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        let line = line.trim_end();
        let (tag, rest) = line.split_at(1);
        let bad = || std::io::Error::other(format!("bad reply line {line:?}"));
        Ok(match tag {
            "+" => Reply::Simple(rest.into()),
            "-" => Reply::Error(rest.into()),
            ":" => Reply::Int(rest.parse().map_err(|_| bad())?),
            "$" => {
                let n: i64 = rest.parse().map_err(|_| bad())?;
                if n < 0 {
                    Reply::Bulk(None)
                } else {
                    let mut data = vec![0u8; n as usize + 2];
                    std::io::Read::read_exact(&mut self.reader, &mut data)?;
                    data.truncate(n as usize);
                    Reply::Bulk(Some(data))
                }
            }
            "*" => {
                let n: i64 = rest.parse().map_err(|_| bad())?;
                let mut items = Vec::new();
                for _ in 0..n.max(0) {
                    items.push(self.read()?);
                }
                Reply::Array(items)
            }
            _ => return Err(bad()),
        })
    }

    pub fn call(&mut self, args: &[&[u8]]) -> std::io::Result<Reply> {
        self.send(args)?;
        self.read()
    }
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts `ferrite serve` on a free port with its data in `dir` and the
/// given extra flags, and returns once it accepts connections (or panics
/// after 30 s).
pub fn start_server(dir: &Path, flags: &[&str]) -> (Child, u16) {
    start_server_env(dir, flags, &[], None)
}

/// [`start_server`] with extra environment variables, and its log (at
/// `info`) written to `log` if given.
///
/// The port [`free_port`] found may be taken again before the server
/// binds it (by a client's outgoing connection, or another test's
/// server): the server then exits, and a connection to that port may even
/// reach someone else. So the server counts as up only once a connection
/// reaches the process started here (INFO's `process_id`); if it exited,
/// it is started again on another port.
pub fn start_server_env(
    dir: &Path,
    flags: &[&str],
    env: &[(&str, &str)],
    log: Option<&Path>,
) -> (Child, u16) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let port = free_port();
        let stderr = match log {
            Some(path) => Stdio::from(std::fs::File::create(path).expect("log file")),
            None => Stdio::null(),
        };
        let mut child = Command::new(env!("CARGO_BIN_EXE_ferrite"))
            .args(["serve", "--port", &port.to_string(), "--dir"])
            .arg(dir)
            .args(flags)
            .env("RUST_LOG", if log.is_some() { "info" } else { "warn" })
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("ferrite starts");
        loop {
            if Client::connect(port).is_ok_and(|mut c| serves_pid(&mut c, child.id())) {
                return (child, port);
            }
            if child.try_wait().expect("child status").is_some() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "server did not come up on {port}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(
            Instant::now() < deadline,
            "server exited at start-up every time"
        );
    }
}

/// Whether the server `c` is connected to is process `pid`.
fn serves_pid(c: &mut Client, pid: u32) -> bool {
    let Ok(Reply::Bulk(Some(info))) = c.call(&[b"INFO", b"server"]) else {
        return false;
    };
    String::from_utf8_lossy(&info)
        .lines()
        .find_map(|l| l.strip_prefix("process_id:"))
        .is_some_and(|v| v.trim() == pid.to_string())
}

/// One crash round: lets the clients run for `run_ms`, then `kill -9`s the
/// server, stops the clients and waits for them.
pub fn kill_after(run_ms: u64, child: &mut Child, stop: &AtomicBool, threads: Vec<JoinHandle<()>>) {
    std::thread::sleep(Duration::from_millis(run_ms));
    child.kill().expect("SIGKILL");
    let _ = child.wait();
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().expect("client thread");
    }
}

/// A figure of INFO section `section` from the server `c` is connected to.
pub fn info_figure(c: &mut Client, section: &str, name: &str) -> u64 {
    let Ok(Reply::Bulk(Some(text))) = c.call(&[b"INFO", section.as_bytes()]) else {
        panic!("INFO {section} failed")
    };
    String::from_utf8_lossy(&text)
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("INFO {section} has no {name}"))
}

/// `used_memory` of a server just started on an empty directory: the base
/// that DRAM budgets of the tier tests are set above.
pub fn empty_used_memory() -> u64 {
    let probe = tempfile::tempdir().expect("a data directory");
    let (mut child, port) = start_server(probe.path(), &[]);
    let mut c = Client::connect(port).expect("connect");
    let used = info_figure(&mut c, "memory", "used_memory");
    let _ = child.kill();
    let _ = child.wait();
    used
}

/// The flags of a server whose DRAM budget is `above` bytes over what an
/// empty server uses, with a PM tier for what does not fit and its log on
/// a file (the log is then the only source of the data).
pub fn small_dram_budget(above: u64) -> Vec<String> {
    let budget = (empty_used_memory() + above).to_string();
    ["--log-device", "file", "--maxmemory-dram", &budget]
        .into_iter()
        .chain(["--pm-tier-size", "256mb"])
        .map(String::from)
        .collect()
}

/// The IDs of the entries of an XRANGE or XPENDING reply (each entry an
/// array whose first element is its ID).
pub fn entry_ids(reply: Reply) -> std::collections::BTreeSet<Vec<u8>> {
    let Reply::Array(items) = reply else {
        panic!("not an array: {reply:?}")
    };
    items
        .into_iter()
        .map(|item| match item {
            Reply::Array(parts) => match parts.first() {
                Some(Reply::Bulk(Some(id))) => id.clone(),
                other => panic!("bad entry ID {other:?}"),
            },
            other => panic!("bad entry {other:?}"),
        })
        .collect()
}
