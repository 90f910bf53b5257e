//! The bench crate's own Redis load generator (`ferrite-bench kv-load`):
//! closed-loop clients, each on its own thread and connection, sending
//! `pipeline` commands then reading as many replies. A second opinion next
//! to redis-benchmark, and the loader of the memory experiment.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Instant;

use anyhow::{bail, Context, Result};

/// Options of `kv-load`.
#[derive(Clone, Debug, clap::Args)]
pub struct LoadArgs {
    /// Server port on 127.0.0.1.
    #[arg(long)]
    pub port: u16,
    /// `set`, `get`, or `fill` (one connection writing `key:0..requests`).
    #[arg(long)]
    pub op: String,
    /// Connections.
    #[arg(long, default_value_t = 50)]
    pub clients: usize,
    /// Commands in flight per connection.
    #[arg(long, default_value_t = 1)]
    pub pipeline: usize,
    /// Total commands.
    #[arg(long, default_value_t = 100_000)]
    pub requests: usize,
    /// Value size in bytes.
    #[arg(long, default_value_t = 256)]
    pub value_bytes: usize,
    /// Pseudo-random value bytes (different for every key of a fill)
    /// instead of a constant: incompressible, so a server that compresses
    /// its snapshot (Redis's RDB preamble with LZF) gains nothing from it.
    #[arg(long)]
    pub random_values: bool,
}

/// Fills `out` with pseudo-random bytes derived from `seed` (splitmix64):
/// deterministic, incompressible, and cheap next to a network round trip.
pub(crate) fn random_bytes(seed: u64, out: &mut [u8]) {
    let mut state = seed;
    for chunk in out.chunks_mut(8) {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        chunk.copy_from_slice(&z.to_le_bytes()[..chunk.len()]);
    }
}

/// Counts complete replies at the start of `buf`; returns (replies, bytes).
pub(crate) fn complete_replies(buf: &[u8]) -> Result<(usize, usize)> {
    let (mut count, mut at) = (0, 0);
    while at < buf.len() {
        let Some(nl) = buf[at..].windows(2).position(|w| w == b"\r\n") else {
            break;
        };
        let line = &buf[at..at + nl];
        let mut end = at + nl + 2;
        match line.first() {
            Some(b'+' | b':') => {}
            Some(b'-') => bail!("server error: {}", String::from_utf8_lossy(line)),
            Some(b'$') => {
                let n: i64 = std::str::from_utf8(&line[1..])?.parse()?;
                if n >= 0 {
                    end += n as usize + 2;
                }
            }
            _ => bail!("unexpected reply {:?}", String::from_utf8_lossy(line)),
        }
        if end > buf.len() {
            break;
        }
        at = end;
        count += 1;
    }
    Ok((count, at))
}

pub(crate) fn encode(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// One connection's share: `batches` round trips of `pipeline` commands.
fn client(port: u16, commands: &[u8], pipeline: usize, batches: usize) -> Result<()> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).context("connecting")?;
    stream.set_nodelay(true)?;
    let mut buf = vec![0u8; 1 << 20];
    for _ in 0..batches {
        stream.write_all(commands)?;
        let (mut got, mut filled) = (0, 0);
        while got < pipeline {
            let n = stream.read(&mut buf[filled..])?;
            if n == 0 {
                bail!("server closed the connection");
            }
            filled += n;
            let (count, used) = complete_replies(&buf[..filled])?;
            got += count;
            buf.copy_within(used..filled, 0);
            filled -= used;
        }
    }
    Ok(())
}

/// Runs the load; returns commands per second.
pub fn run_load(args: &LoadArgs) -> Result<f64> {
    let mut value = vec![b'x'; args.value_bytes];
    if args.op == "fill" {
        return fill(args, &mut value);
    }
    if args.random_values {
        random_bytes(0x5EED, &mut value);
    }
    let mut batch = Vec::new();
    for _ in 0..args.pipeline {
        match args.op.as_str() {
            "set" => encode(&mut batch, &[b"SET", b"key:bench", &value]),
            "get" => encode(&mut batch, &[b"GET", b"key:bench"]),
            other => bail!("unknown op {other}"),
        }
    }
    let clients = args.clients.max(1);
    let batches = (args.requests / (clients * args.pipeline.max(1))).max(1);
    let started = Instant::now();
    std::thread::scope(|s| -> Result<()> {
        let handles: Vec<_> = (0..clients)
            .map(|_| s.spawn(|| client(args.port, &batch, args.pipeline, batches)))
            .collect();
        for h in handles {
            h.join()
                .map_err(|_| anyhow::anyhow!("client thread panicked"))??;
        }
        Ok(())
    })?;
    let done = (batches * clients * args.pipeline) as f64;
    Ok(done / started.elapsed().as_secs_f64())
}

/// Writes `key:0..requests` with one pipelined connection; with
/// `random_values` key `k`'s value is `random_bytes(k)`.
fn fill(args: &LoadArgs, value: &mut [u8]) -> Result<f64> {
    const BATCH: usize = 1000;
    let started = Instant::now();
    let mut stream = TcpStream::connect(("127.0.0.1", args.port)).context("connecting")?;
    let mut buf = vec![0u8; 1 << 20];
    let mut i = 0;
    while i < args.requests {
        let n = BATCH.min(args.requests - i);
        let mut out = Vec::with_capacity(n * (value.len() + 48));
        for k in i..i + n {
            if args.random_values {
                random_bytes(k as u64, value);
            }
            encode(
                &mut out,
                &[b"SET", format!("key:{k:012}").as_bytes(), &*value],
            );
        }
        stream.write_all(&out)?;
        let (mut got, mut filled) = (0, 0);
        while got < n {
            let r = stream.read(&mut buf[filled..])?;
            if r == 0 {
                bail!("server closed the connection");
            }
            filled += r;
            let (count, used) = complete_replies(&buf[..filled])?;
            got += count;
            buf.copy_within(used..filled, 0);
            filled -= used;
        }
        i += n;
    }
    Ok(args.requests as f64 / started.elapsed().as_secs_f64())
}
