//! Blocking pops in the kv experiment, each server measured with the same
//! client in the same run:
//! - round trip: one client blocked in `BLPOP q 0`, another pushes with
//!   `LPUSH q x`; the time from sending the push to the blocked client's
//!   reply, p50 and p99 over many rounds;
//! - fairness: 1,000 clients block on one list in a known order, one
//!   `RPUSH` of 1,000 elements wakes them all; the time until every reply
//!   is in, and whether each client got the element its place in the queue
//!   entitles it to (first blocked, first served).
//!
//! Neither step sleeps to let a client block: the pusher polls `INFO
//! clients` until `blocked_clients` says the clients are blocked.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::report::percentile;

/// Rounds of the round-trip measurement (a quick run does a tenth).
const ROUNDS: usize = 5_000;
/// Clients blocked at once in the fairness measurement.
const FIFO_CLIENTS: usize = 1_000;
/// How long to wait for clients to show up as blocked.
const BLOCKED_WAIT: Duration = Duration::from_secs(30);

/// A connection that writes commands and reads single-line replies or
/// one bulk string (all these commands answer with).
struct Client {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Client {
    fn connect(port: u16) -> Result<Client> {
        let stream = TcpStream::connect(("127.0.0.1", port)).context("connecting")?;
        stream.set_nodelay(true)?;
        Ok(Client {
            writer: stream.try_clone()?,
            reader: BufReader::new(stream),
        })
    }

    fn send(&mut self, args: &[&str]) -> Result<()> {
        let mut out = format!("*{}\r\n", args.len());
        for a in args {
            out.push_str(&format!("${}\r\n{a}\r\n", a.len()));
        }
        self.writer.write_all(out.as_bytes())?;
        Ok(())
    }

    fn line(&mut self) -> Result<String> {
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            bail!("the server closed the connection");
        }
        Ok(line.trim_end().to_string())
    }

    /// Reads one reply: a simple line, an integer, a bulk string, or an
    /// array of bulk strings (BLPOP's `[key, element]`), flattened.
    fn reply(&mut self) -> Result<Vec<String>> {
        let head = self.line()?;
        match head.as_bytes().first() {
            Some(b'*') => {
                let n: i64 = head[1..].parse()?;
                let mut items = Vec::new();
                for _ in 0..n.max(0) {
                    items.extend(self.reply()?);
                }
                Ok(items)
            }
            Some(b'$') if head != "$-1" => {
                let len: usize = head[1..].parse()?;
                let mut bytes = vec![0u8; len + 2];
                std::io::Read::read_exact(&mut self.reader, &mut bytes)?;
                bytes.truncate(len);
                Ok(vec![String::from_utf8_lossy(&bytes).into_owned()])
            }
            Some(b'$') => Ok(Vec::new()),
            Some(b'-') => bail!("error reply: {head}"),
            _ => Ok(vec![head]),
        }
    }

    /// `blocked_clients` from INFO clients.
    fn blocked_clients(&mut self) -> Result<usize> {
        self.send(&["INFO", "clients"])?;
        let text = self.reply()?.concat();
        text.lines()
            .find_map(|l| l.strip_prefix("blocked_clients:"))
            .and_then(|v| v.trim().parse().ok())
            .context("INFO clients has no blocked_clients")
    }

    /// Polls until at least `n` clients are blocked.
    fn wait_blocked(&mut self, n: usize) -> Result<()> {
        let deadline = Instant::now() + BLOCKED_WAIT;
        while self.blocked_clients()? < n {
            if Instant::now() > deadline {
                bail!("{n} clients did not block within {BLOCKED_WAIT:?}");
            }
        }
        Ok(())
    }
}

/// BLPOP served by LPUSH: p50 and p99 of the push-to-wake time, in µs.
fn round_trip(port: u16, rounds: usize) -> Result<(f64, f64)> {
    let mut blocked = Client::connect(port)?;
    let mut pusher = Client::connect(port)?;
    pusher.send(&["DEL", "bench:q"])?;
    pusher.reply()?;
    let mut micros = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        blocked.send(&["BLPOP", "bench:q", "0"])?;
        pusher.wait_blocked(1)?;
        let start = Instant::now();
        pusher.send(&["LPUSH", "bench:q", "x"])?;
        let got = blocked.reply()?;
        micros.push(start.elapsed().as_secs_f64() * 1e6);
        pusher.reply()?;
        if got != ["bench:q", "x"] {
            bail!("BLPOP answered {got:?}");
        }
    }
    Ok((percentile(&micros, 50.0), percentile(&micros, 99.0)))
}

/// 1,000 clients woken by one push: (milliseconds until all replied,
/// clients served out of their blocking order).
fn fifo(port: u16) -> Result<(f64, usize)> {
    let mut pusher = Client::connect(port)?;
    pusher.send(&["DEL", "bench:fifo"])?;
    pusher.reply()?;
    let mut clients = Vec::with_capacity(FIFO_CLIENTS);
    for i in 0..FIFO_CLIENTS {
        let mut c = Client::connect(port)?;
        c.send(&["BLPOP", "bench:fifo", "0"])?;
        // Each blocks before the next sends, so the queue order is known.
        pusher.wait_blocked(i + 1)?;
        clients.push(c);
    }
    let elements: Vec<String> = (0..FIFO_CLIENTS).map(|i| i.to_string()).collect();
    let mut push = vec!["RPUSH", "bench:fifo"];
    push.extend(elements.iter().map(String::as_str));
    let start = Instant::now();
    pusher.send(&push)?;
    let mut out_of_order = 0;
    for (i, c) in clients.iter_mut().enumerate() {
        let got = c.reply()?;
        if got.get(1).map(String::as_str) != Some(elements[i].as_str()) {
            out_of_order += 1;
        }
    }
    let ms = start.elapsed().as_secs_f64() * 1e3;
    pusher.reply()?;
    Ok((ms, out_of_order))
}

/// Runs both measurements against the server on `port`; figures keyed
/// `blpop_rtt_us_p50`, `blpop_rtt_us_p99`, `fifo_1000_wake_ms`,
/// `fifo_1000_out_of_order`.
pub(crate) fn measure(port: u16, quick: bool) -> Result<BTreeMap<String, f64>> {
    let rounds = if quick { ROUNDS / 10 } else { ROUNDS };
    let (p50, p99) = round_trip(port, rounds)?;
    let (wake_ms, out_of_order) = fifo(port)?;
    Ok(BTreeMap::from([
        ("blpop_rtt_us_p50".to_string(), p50),
        ("blpop_rtt_us_p99".to_string(), p99),
        ("fifo_1000_wake_ms".to_string(), wake_ms),
        ("fifo_1000_out_of_order".to_string(), out_of_order as f64),
    ]))
}
