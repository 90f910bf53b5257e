//! The tier experiment's load: closed-loop clients on their own threads,
//! one command in flight each, keys chosen by Zipf 0.99 or uniformly, a
//! GET:SET mix, and every command's latency kept for the percentiles.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::kvload::complete_replies;

/// How keys are chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dist {
    /// Zipf with exponent 0.99 over the keys, hot keys scattered.
    Zipf,
    /// Every key alike.
    Uniform,
}

impl Dist {
    /// `zipf` or `uniform`.
    pub fn name(self) -> &'static str {
        match self {
            Dist::Zipf => "zipf",
            Dist::Uniform => "uniform",
        }
    }
}

/// Picks keys: Zipf by the inverse of a precomputed distribution, then a
/// multiplication by an odd constant modulo the key count so that hot
/// ranks are spread over the keyspace instead of being the first keys
/// loaded (which the loading order would make the coldest).
#[derive(Debug)]
pub struct KeyChooser {
    keys: usize,
    cdf: Option<Vec<f64>>,
}

impl KeyChooser {
    /// A chooser over `keys` keys.
    pub fn new(keys: usize, dist: Dist) -> KeyChooser {
        let cdf = (dist == Dist::Zipf).then(|| {
            let mut sum = 0.0;
            let mut cdf: Vec<f64> = (0..keys)
                .map(|rank| {
                    sum += 1.0 / ((rank + 1) as f64).powf(0.99);
                    sum
                })
                .collect();
            for v in &mut cdf {
                *v /= sum;
            }
            cdf
        });
        KeyChooser {
            keys: keys.max(1),
            cdf,
        }
    }

    /// A key index for the uniform variate `u` in [0, 1).
    pub fn pick(&self, u: f64, rng: &mut fastrand::Rng) -> usize {
        match &self.cdf {
            Some(cdf) => {
                let rank = cdf.partition_point(|&c| c < u).min(self.keys - 1);
                ((rank as u128 * 2_654_435_761u128) % self.keys as u128) as usize
            }
            None => rng.usize(..self.keys),
        }
    }
}

/// The key name of index `i`.
pub fn key(i: usize) -> String {
    format!("key:{i:012}")
}

/// A connection that sends one command and reads its reply.
struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
    out: Vec<u8>,
}

impl Conn {
    fn open(port: u16) -> Result<Conn> {
        let stream = TcpStream::connect(("127.0.0.1", port)).context("connect")?;
        stream.set_nodelay(true)?;
        Ok(Conn {
            stream,
            buf: Vec::with_capacity(8192),
            out: Vec::with_capacity(8192),
        })
    }

    fn push(&mut self, args: &[&[u8]]) {
        self.out
            .extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
        for a in args {
            self.out
                .extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            self.out.extend_from_slice(a);
            self.out.extend_from_slice(b"\r\n");
        }
    }

    /// Sends what was pushed and waits for `replies` replies.
    fn flush(&mut self, replies: usize) -> Result<()> {
        self.stream.write_all(&self.out)?;
        self.out.clear();
        let mut seen = 0;
        let mut chunk = [0u8; 16384];
        while seen < replies {
            let n = self.stream.read(&mut chunk)?;
            if n == 0 {
                bail!("server closed the connection");
            }
            self.buf.extend_from_slice(&chunk[..n]);
            let (count, used) = complete_replies(&self.buf)?;
            seen += count;
            self.buf.drain(..used);
        }
        Ok(())
    }
}

/// Writes `keys` values of `value_bytes` on one connection, 64 at a time.
pub fn fill(port: u16, keys: usize, value_bytes: usize) -> Result<()> {
    let mut c = Conn::open(port)?;
    let mut value = vec![0u8; value_bytes];
    for start in (0..keys).step_by(64) {
        let end = (start + 64).min(keys);
        for i in start..end {
            crate::kvload::random_bytes(i as u64, &mut value);
            c.push(&[b"SET", key(i).as_bytes(), &value]);
        }
        c.flush(end - start)?;
    }
    Ok(())
}

/// What a load measured.
#[derive(Clone, Copy, Debug, Default)]
pub struct Measured {
    /// Commands per second, all clients.
    pub ops: f64,
    /// 99th percentile latency, microseconds.
    pub p99_us: f64,
}

/// One load's shape.
#[derive(Clone, Copy, Debug)]
pub struct Load {
    /// Server port.
    pub port: u16,
    /// Keys the fill wrote.
    pub keys: usize,
    /// SET value size.
    pub value_bytes: usize,
    /// Percent of GETs.
    pub get_pct: u32,
    /// Connections.
    pub clients: usize,
    /// How long to measure.
    pub duration: Duration,
}

/// Runs `load` with keys from `chooser`.
pub fn run(load: Load, chooser: &Arc<KeyChooser>) -> Result<Measured> {
    let start = Instant::now();
    let threads: Vec<_> = (0..load.clients)
        .map(|t| {
            let chooser = Arc::clone(chooser);
            std::thread::spawn(move || client(load, &chooser, t as u64))
        })
        .collect();
    let mut latencies: Vec<u32> = Vec::new();
    for thread in threads {
        let mine = thread
            .join()
            .map_err(|_| anyhow::anyhow!("a load thread panicked"))??;
        latencies.extend(mine);
    }
    let elapsed = start.elapsed().as_secs_f64();
    if latencies.is_empty() {
        bail!("no command completed");
    }
    latencies.sort_unstable();
    let at = ((latencies.len() as f64 * 0.99) as usize).min(latencies.len() - 1);
    Ok(Measured {
        ops: latencies.len() as f64 / elapsed,
        p99_us: f64::from(latencies[at]),
    })
}

fn client(load: Load, chooser: &KeyChooser, seed: u64) -> Result<Vec<u32>> {
    let mut c = Conn::open(load.port)?;
    let mut rng = fastrand::Rng::with_seed(seed.wrapping_mul(0x9E37_79B9) + 1);
    let mut value = vec![0u8; load.value_bytes];
    let mut latencies = Vec::with_capacity(1 << 16);
    let end = Instant::now() + load.duration;
    while Instant::now() < end {
        let k = key(chooser.pick(rng.f64(), &mut rng));
        if rng.u32(..100) < load.get_pct {
            c.push(&[b"GET", k.as_bytes()]);
        } else {
            crate::kvload::random_bytes(rng.u64(..), &mut value);
            c.push(&[b"SET", k.as_bytes(), &value]);
        }
        let sent = Instant::now();
        c.flush(1)?;
        latencies.push(sent.elapsed().as_micros().min(u128::from(u32::MAX)) as u32);
    }
    Ok(latencies)
}

/// An INFO field of the server on `port`.
pub fn info_field(port: u16, section: &str, name: &str) -> Result<f64> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    let cmd = format!("*2\r\n$4\r\nINFO\r\n${}\r\n{section}\r\n", section.len());
    stream.write_all(cmd.as_bytes())?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 65536];
    loop {
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            bail!("server closed the connection");
        }
        buf.extend_from_slice(&chunk[..n]);
        if complete_replies(&buf)?.0 == 1 {
            break;
        }
    }
    let text = String::from_utf8_lossy(&buf);
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .and_then(|v| v.trim().parse().ok())
        .with_context(|| format!("INFO {section} has no {name}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zipf_favours_few_keys_and_uniform_does_not() {
        let mut rng = fastrand::Rng::with_seed(7);
        let zipf = KeyChooser::new(10_000, Dist::Zipf);
        let mut counts = vec![0u32; 10_000];
        for _ in 0..100_000 {
            counts[zipf.pick(rng.f64(), &mut rng)] += 1;
        }
        counts.sort_unstable_by(|a, b| b.cmp(a));
        let top: u32 = counts[..100].iter().sum();
        assert!(top > 40_000, "the top 1% took {top} of 100,000");
        let uniform = KeyChooser::new(10_000, Dist::Uniform);
        let mut counts = vec![0u32; 10_000];
        for _ in 0..100_000 {
            counts[uniform.pick(rng.f64(), &mut rng)] += 1;
        }
        counts.sort_unstable_by(|a, b| b.cmp(a));
        let top: u32 = counts[..100].iter().sum();
        assert!(top < 5_000, "the top 1% took {top} of 100,000");
    }
}
