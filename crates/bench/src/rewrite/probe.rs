//! What the rewrite experiment measures with while a server runs: a small
//! RESP connection for control commands (BGREWRITEAOF, INFO, PING), the
//! closed-loop SET load that runs before and during the rewrite, the
//! proportional memory (PSS) of a server and its fork children, and the
//! CPU time the hypervisor steals from the machine.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::kvload::{complete_replies, encode, random_bytes};

/// One control connection: a command, then its one reply.
pub(crate) struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    pub(crate) fn connect(port: u16) -> Result<Conn> {
        let stream = TcpStream::connect(("127.0.0.1", port)).context("connecting")?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(Duration::from_secs(60)))?;
        Ok(Conn {
            stream,
            buf: Vec::new(),
        })
    }

    /// Sends one command and returns its raw reply; an error reply is an
    /// `Err` (so `-LOADING` reads as "not serving yet").
    pub(crate) fn call(&mut self, args: &[&[u8]]) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        encode(&mut out, args);
        self.stream.write_all(&out)?;
        self.buf.clear();
        let mut chunk = [0u8; 64 * 1024];
        loop {
            let n = self.stream.read(&mut chunk)?;
            if n == 0 {
                bail!("server closed the connection");
            }
            self.buf.extend_from_slice(&chunk[..n]);
            let (count, used) = complete_replies(&self.buf)?;
            if count >= 1 {
                return Ok(self.buf[..used].to_vec());
            }
        }
    }

    /// `INFO section` as text.
    pub(crate) fn info(&mut self, section: &str) -> Result<String> {
        let reply = self.call(&[b"INFO", section.as_bytes()])?;
        Ok(String::from_utf8_lossy(&reply).into_owned())
    }
}

/// The value of `field:` in an INFO text.
pub(crate) fn info_field(info: &str, field: &str) -> Option<u64> {
    info.lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().parse().ok())
}

/// The sum of the `fields` (kB) of a `/proc` text, in bytes.
fn kb_fields(text: &str, fields: &[&str]) -> Option<u64> {
    let mut total = 0;
    for field in fields {
        let kb: u64 = text
            .lines()
            .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))?
            .split_whitespace()
            .next()?
            .parse()
            .ok()?;
        total += kb * 1024;
    }
    Some(total)
}

/// Proportional anonymous and shared-memory bytes of one process
/// (`Pss_Anon` + `Pss_Shmem` of `/proc/PID/smaps_rollup`); `None` once it
/// has exited.
fn pss_bytes(pid: u32) -> Option<u64> {
    rollup_bytes(pid, &["Pss_Anon", "Pss_Shmem"])
}

/// The sum of `fields` of `/proc/PID/smaps_rollup`, in bytes.
fn rollup_bytes(pid: u32, fields: &[&str]) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    kb_fields(&text, fields)
}

/// Anonymous memory of one process in transparent huge pages
/// (`AnonHugePages` of `/proc/PID/smaps_rollup`): a server whose heap got
/// fewer of them runs its steady load slower (1M x 1 KiB: 106-114k SET/s
/// with the heap in huge pages, 75-77k without), so a run's own rate is
/// read beside it.
pub(crate) fn anon_huge_bytes(pid: u32) -> Option<u64> {
    rollup_bytes(pid, &["AnonHugePages"])
}

/// The same for a process that shares no anonymous memory with another
/// (`RssAnon` + `RssShmem` of `/proc/PID/status`): a few counters, where
/// `smaps_rollup` walks every page table under the process's `mmap_lock`.
fn rss_bytes(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    kb_fields(&text, &["RssAnon", "RssShmem"])
}

/// The direct children of `pid`, from every thread's `children` list.
fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for task in tasks.flatten() {
        if let Ok(text) = std::fs::read_to_string(task.path().join("children")) {
            out.extend(
                text.split_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok()),
            );
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// Anonymous and shared memory of `pid` plus its `children` (Redis's fork
/// child, listed by [`children`]), each physical page counted once:
/// proportional shares (PSS) while there are children, whose pages the
/// parent shares copy-on-write; the resident counters otherwise, which
/// are the same then and cost no page-table walk. Walking a 1.2 GB server
/// every 50 ms from the client's core cost about a third of the SET/s at
/// 1M x 1 KiB, in the steady phase too (medians of 4 interleaved pairs
/// against sampling every 2 s).
pub(crate) fn tree_memory_bytes(pid: u32, children: &[u32]) -> u64 {
    if children.is_empty() {
        return rss_bytes(pid).unwrap_or(0);
    }
    let own = pss_bytes(pid).unwrap_or(0);
    own + children.iter().filter_map(|&c| pss_bytes(c)).sum::<u64>()
}

/// Cumulative CPU times of the machine (all CPUs) since boot, in ms.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct MachineCpu {
    /// Time the hypervisor gave to others while this machine's CPUs
    /// wanted to run (`steal`).
    pub(crate) steal_ms: f64,
    /// Time no task wanted a CPU (`idle` + `iowait`).
    pub(crate) idle_ms: f64,
}

/// [`MachineCpu`] now, from `/proc/stat`; `None` where it has no `cpu`
/// line.
pub(crate) fn machine_cpu() -> Option<MachineCpu> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    machine_cpu_of(&stat, rustix::param::clock_ticks_per_second())
}

/// The `idle`, `iowait` and `steal` fields (the 4th, 5th and 8th numbers)
/// of a `/proc/stat` text's `cpu` line, for `ticks_per_s` ticks per
/// second.
fn machine_cpu_of(stat: &str, ticks_per_s: u64) -> Option<MachineCpu> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let numbers: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|n| n.parse().ok())
        .collect::<Option<_>>()?;
    let ms = |ticks: u64| ticks as f64 * 1e3 / ticks_per_s.max(1) as f64;
    Some(MachineCpu {
        steal_ms: ms(*numbers.get(7)?),
        idle_ms: ms(numbers.get(3)? + numbers.get(4)?),
    })
}

/// User plus system CPU time (ms) that `/proc/PID/stat`'s text `stat`
/// reports: the process's own (its threads', live or exited) and, with
/// `reaped`, its reaped children's too.
fn process_cpu_ms_of(stat: &str, reaped: bool, ticks_per_s: u64) -> Option<f64> {
    // The command name, in parentheses, may hold spaces: count fields
    // after its closing parenthesis (the state is field 3, utime 14).
    let fields: Vec<&str> = stat
        .get(stat.rfind(')')? + 1..)?
        .split_whitespace()
        .collect();
    let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
    let mut ticks = field(14)? + field(15)?;
    if reaped {
        ticks += field(16)? + field(17)?;
    }
    Some(ticks as f64 * 1e3 / ticks_per_s.max(1) as f64)
}

/// CPU time (ms) of `pid` and its `children` (Redis's fork child), live or
/// reaped; `None` once `pid` has exited. A child's time is missing between
/// its exit and its reaping, so a rate is only right over a window that
/// holds both or neither.
pub(crate) fn tree_cpu_ms(pid: u32, children: &[u32]) -> Option<f64> {
    let ticks = rustix::param::clock_ticks_per_second();
    let read = |pid: u32, reaped: bool| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| process_cpu_ms_of(&s, reaped, ticks))
    };
    let own = read(pid, true)?;
    Some(own + children.iter().filter_map(|&c| read(c, false)).sum::<f64>())
}

/// What the sampler saw over time, each as (seconds since the epoch,
/// value): the server's memory (bytes), the server's cumulative CPU time
/// (ms, [`tree_cpu_ms`]) and the machine's cumulative steal and idle time
/// (ms, [`machine_cpu`]).
#[derive(Debug, Default)]
pub(crate) struct Samples {
    pub(crate) memory: Vec<(f64, f64)>,
    pub(crate) server_cpu_ms: Vec<(f64, f64)>,
    pub(crate) steal_ms: Vec<(f64, f64)>,
    pub(crate) idle_ms: Vec<(f64, f64)>,
}

/// Samples `tree_memory_bytes(pid)`, [`tree_cpu_ms`] and [`machine_cpu`]
/// every `period` until `stop`.
pub(crate) fn sample_memory(
    pid: u32,
    period: Duration,
    epoch: Instant,
    stop: &AtomicBool,
) -> Samples {
    let mut out = Samples::default();
    while !stop.load(Ordering::Relaxed) {
        let at = epoch.elapsed().as_secs_f64();
        if let Some(cpu) = machine_cpu() {
            out.steal_ms.push((at, cpu.steal_ms));
            out.idle_ms.push((at, cpu.idle_ms));
        }
        // One listing of the children per sample, for both figures.
        let children = children(pid);
        if let Some(ms) = tree_cpu_ms(pid, &children) {
            out.server_cpu_ms.push((at, ms));
        }
        out.memory
            .push((at, tree_memory_bytes(pid, &children) as f64));
        std::thread::sleep(period);
    }
    out
}

/// The rate of a cumulative counter sampled as (time, value) over the
/// samples that enclose `[from_s, to_s]` (the last at or before `from_s`,
/// the first at or after `to_s`, or the nearest inside): units per second;
/// NaN with fewer than two samples.
pub(crate) fn rate_over(samples: &[(f64, f64)], from_s: f64, to_s: f64) -> f64 {
    let first = samples
        .iter()
        .rev()
        .find(|(t, _)| *t <= from_s)
        .or_else(|| samples.first());
    let last = samples
        .iter()
        .find(|(t, _)| *t >= to_s)
        .or_else(|| samples.last());
    match (first, last) {
        (Some(&(t0, v0)), Some(&(t1, v1))) if t1 > t0 => (v1 - v0) / (t1 - t0),
        _ => f64::NAN,
    }
}

/// One completed SET: when it completed (seconds since the epoch) and how
/// long it took (microseconds).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Done {
    pub(crate) at_s: f64,
    pub(crate) latency_us: f64,
}

/// The write load's shape.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WriteLoad {
    pub(crate) port: u16,
    pub(crate) connections: usize,
    pub(crate) keys: usize,
    pub(crate) value_bytes: usize,
}

/// One connection of the load: SET of a random existing key (the fill's
/// `key:%012d` names) to fresh pseudo-random (incompressible) bytes, one at
/// a time.
struct LoadConn {
    stream: mio::net::TcpStream,
    /// xorshift64 state: cheap, and deterministic for one seed.
    state: u64,
    value: Vec<u8>,
    out: Vec<u8>,
    written: usize,
    input: Vec<u8>,
    sent: Instant,
}

impl LoadConn {
    /// Encodes the next SET into `out`.
    fn next_request(&mut self, keys: usize) {
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        let key = format!("key:{:012}", self.state % keys.max(1) as u64);
        random_bytes(self.state, &mut self.value);
        self.out.clear();
        self.written = 0;
        encode(&mut self.out, &[b"SET", key.as_bytes(), &self.value]);
        self.sent = Instant::now();
    }

    /// Writes what is left of the request, as far as the socket takes it.
    fn flush(&mut self) -> Result<()> {
        while self.written < self.out.len() {
            match self.stream.write(&self.out[self.written..]) {
                Ok(0) => bail!("server closed the connection"),
                Ok(n) => self.written += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Reads what has arrived; returns whether the reply is complete.
    ///
    /// One `read` per readiness event, as redis-benchmark does, unless it
    /// filled the buffer: a shorter read took all the socket held, and
    /// data arriving later raises a new event (and `write_load` retries
    /// every connection after a quiet poll besides). Reading on to
    /// `WouldBlock` cost a second system call per SET, which made the
    /// client, not the server, the bottleneck of the closed loop.
    fn read_reply(&mut self) -> Result<bool> {
        let mut chunk = [0u8; 4096];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => bail!("server closed the connection"),
                Ok(n) => {
                    self.input.extend_from_slice(&chunk[..n]);
                    if n < chunk.len() {
                        break;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
        let (count, used) = complete_replies(&self.input)?;
        if count > 1 {
            bail!("{count} replies to one request");
        }
        self.input.drain(..used);
        Ok(count == 1)
    }
}

/// Runs `load.connections` closed-loop writers from one thread (one
/// outstanding SET per connection, as `redis-benchmark -P 1` drives them)
/// until `stop`; returns every completed SET, sorted by completion time.
///
/// One event-driven thread rather than a thread per connection: with four
/// blocking threads on the client's core every reply cost a context switch
/// there, and the client itself slowed whenever anything else ran on that
/// core, so the load measured the client as much as the server.
pub(crate) fn write_load(load: WriteLoad, epoch: Instant, stop: &AtomicBool) -> Result<Vec<Done>> {
    let mut poll = mio::Poll::new()?;
    let mut conns = Vec::new();
    for i in 0..load.connections.max(1) {
        let stream = TcpStream::connect(("127.0.0.1", load.port)).context("connecting")?;
        stream.set_nodelay(true)?;
        stream.set_nonblocking(true)?;
        let mut stream = mio::net::TcpStream::from_std(stream);
        poll.registry().register(
            &mut stream,
            mio::Token(i),
            mio::Interest::READABLE | mio::Interest::WRITABLE,
        )?;
        let mut conn = LoadConn {
            stream,
            state: 0x9E37_79B9_7F4A_7C15u64.wrapping_mul(i as u64 + 1) | 1,
            value: vec![0u8; load.value_bytes],
            out: Vec::new(),
            written: 0,
            input: Vec::new(),
            sent: Instant::now(),
        };
        conn.next_request(load.keys);
        conn.flush()?;
        conns.push(conn);
    }
    let mut events = mio::Events::with_capacity(conns.len() * 2);
    let mut done = Vec::with_capacity(1 << 18);
    let mut ready = Vec::with_capacity(conns.len());
    while !stop.load(Ordering::Relaxed) {
        poll.poll(&mut events, Some(Duration::from_millis(50)))?;
        ready.clear();
        if events.is_empty() {
            ready.extend(0..conns.len());
        } else {
            ready.extend(events.iter().map(|e| e.token().0));
        }
        for &i in &ready {
            let conn = &mut conns[i];
            conn.flush()?;
            if conn.written == conn.out.len() && conn.read_reply()? {
                done.push(Done {
                    at_s: epoch.elapsed().as_secs_f64(),
                    latency_us: conn.sent.elapsed().as_secs_f64() * 1e6,
                });
                conn.next_request(load.keys);
                conn.flush()?;
            }
        }
    }
    Ok(done)
}

/// Throughput (SET/s) and p99 latency (µs) of the SETs completed in
/// `[from_s, to_s)`.
pub(crate) fn window(done: &[Done], from_s: f64, to_s: f64) -> (f64, f64) {
    let lat: Vec<f64> = done
        .iter()
        .filter(|d| d.at_s >= from_s && d.at_s < to_s)
        .map(|d| d.latency_us)
        .collect();
    let span = (to_s - from_s).max(1e-3);
    (
        lat.len() as f64 / span,
        crate::report::percentile(&lat, 99.0),
    )
}

/// SET/s in whole buckets of `bucket_s` (a partial last bucket would
/// read as a drop), as (bucket middle, rate) points.
pub(crate) fn timeline(done: &[Done], from_s: f64, to_s: f64, bucket_s: f64) -> Vec<(f64, f64)> {
    let buckets = ((to_s - from_s) / bucket_s).floor().max(1.0) as usize;
    let mut counts = vec![0usize; buckets];
    for d in done {
        let i = ((d.at_s - from_s) / bucket_s) as usize;
        if d.at_s >= from_s && i < buckets {
            counts[i] += 1;
        }
    }
    counts
        .iter()
        .enumerate()
        .map(|(i, c)| (from_s + (i as f64 + 0.5) * bucket_s, *c as f64 / bucket_s))
        .collect()
}

/// Mean and maximum of the samples in `[from, to]`.
pub(crate) fn mean_and_max(samples: &[(f64, f64)], from: f64, to: f64) -> (f64, f64) {
    let inside: Vec<f64> = samples
        .iter()
        .filter(|(t, _)| *t >= from && *t <= to)
        .map(|(_, v)| *v)
        .collect();
    if inside.is_empty() {
        // A rewrite shorter than the sampling period: the sample just after.
        let next = samples
            .iter()
            .find(|(t, _)| *t >= from)
            .map_or(0.0, |s| s.1);
        return (next, next);
    }
    let mean = inside.iter().sum::<f64>() / inside.len() as f64;
    (mean, inside.iter().copied().fold(0.0, f64::max))
}

/// Bytes of the files under `dir`, recursively (0 for what cannot be read).
pub(crate) fn dir_bytes(dir: &std::path::Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

/// Waits until no rewrite is running or scheduled; returns `aof_rewrites`.
pub(super) fn wait_rewrites_idle(conn: &mut Conn) -> Result<u64> {
    let deadline = Instant::now() + super::REWRITE_TIMEOUT;
    loop {
        let info = conn.info("persistence")?;
        let busy = info_field(&info, "aof_rewrite_in_progress").unwrap_or(0)
            + info_field(&info, "aof_rewrite_scheduled").unwrap_or(0);
        if busy == 0 {
            return info_field(&info, "aof_rewrites").context("INFO has no aof_rewrites");
        }
        if Instant::now() > deadline {
            bail!("the rewrite did not finish in {:?}", super::REWRITE_TIMEOUT);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Sends BGREWRITEAOF and polls INFO until it has finished; returns the
/// INFO text after it.
pub(super) fn rewrite(conn: &mut Conn) -> Result<String> {
    let before = wait_rewrites_idle(conn)?;
    conn.call(&[b"BGREWRITEAOF"])?;
    loop {
        if wait_rewrites_idle(conn)? > before {
            let info = conn.info("persistence")?;
            if !info.contains("aof_last_bgrewrite_status:ok") {
                bail!("the rewrite failed: {info}");
            }
            return Ok(info);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_fields_parse() {
        let info = "$60\r\n# Persistence\r\naof_rewrite_in_progress:1\r\naof_rewrites:3\r\n";
        assert_eq!(info_field(info, "aof_rewrite_in_progress"), Some(1));
        assert_eq!(info_field(info, "aof_rewrites"), Some(3));
        assert_eq!(info_field(info, "aof_rewrite"), None);
    }

    #[test]
    fn windows_and_timelines_count_completions() {
        let done: Vec<Done> = (0..100)
            .map(|i| Done {
                at_s: i as f64 / 100.0,
                latency_us: if i == 99 { 1000.0 } else { 10.0 },
            })
            .collect();
        let (rate, _) = window(&done, 0.0, 0.5);
        assert!((rate - 100.0).abs() < 1e-9);
        let line = timeline(&done, 0.0, 1.0, 0.25);
        assert_eq!(line.len(), 4);
        assert!(line.iter().all(|(_, r)| (*r - 100.0).abs() < 1e-9));
    }

    #[test]
    fn steal_and_idle_are_read_from_the_cpu_line() {
        let stat = "cpu  10 0 5 100 1 0 2 37 0 0\ncpu0 5 0 2 50 1 0 1 20 0 0\n";
        let at_100 = machine_cpu_of(stat, 100).expect("parses");
        assert_eq!((at_100.steal_ms, at_100.idle_ms), (370.0, 1010.0));
        assert_eq!(machine_cpu_of(stat, 1000).map(|c| c.steal_ms), Some(37.0));
        assert_eq!(machine_cpu_of("cpu0 1 2 3\n", 100), None);
        assert_eq!(machine_cpu_of("cpu  1 2 3\n", 100), None);
        assert_eq!(machine_cpu_of("cpu  1 2 3 x 5 6 7 8\n", 100), None);
        assert!(machine_cpu().is_some_and(|c| c.steal_ms >= 0.0 && c.idle_ms > 0.0));
    }

    #[test]
    fn process_cpu_counts_threads_and_optionally_reaped_children() {
        // pid (comm with spaces) state ppid ... utime=7 stime=3 cutime=20 cstime=5
        let stat = "42 (a b) c) S 1 42 42 0 -1 4194560 10 0 0 0 7 3 20 5 20 0 3 0";
        assert_eq!(process_cpu_ms_of(stat, false, 100), Some(100.0));
        assert_eq!(process_cpu_ms_of(stat, true, 100), Some(350.0));
        assert_eq!(process_cpu_ms_of("42 (x) S 1 2", true, 100), None);
        assert_eq!(process_cpu_ms_of("no parenthesis", true, 100), None);
        // This process's own time grows while it computes (ticks are
        // coarse, so compute until it does, within a generous bound).
        let before = tree_cpu_ms(std::process::id(), &[]).expect("own stat");
        let started = Instant::now();
        let mut after = before;
        while after <= before && started.elapsed() < Duration::from_secs(30) {
            for _ in 0..100_000 {
                std::hint::black_box(started.elapsed());
            }
            after = tree_cpu_ms(std::process::id(), &[]).expect("own stat");
        }
        assert!(after > before, "{before} -> {after}");
    }

    #[test]
    fn rates_cover_the_window_with_the_enclosing_samples() {
        let samples = [(0.0, 0.0), (1.0, 10.0), (2.0, 50.0), (3.0, 60.0)];
        assert!((rate_over(&samples, 1.0, 2.0) - 40.0).abs() < 1e-9);
        // 1.5..1.7 lies between the samples at 1 and 2.
        assert!((rate_over(&samples, 1.5, 1.7) - 40.0).abs() < 1e-9);
        assert!((rate_over(&samples, 0.5, 2.5) - 20.0).abs() < 1e-9);
        // Past the last sample: the nearest ones inside.
        assert!((rate_over(&samples, 2.0, 9.0) - 10.0).abs() < 1e-9);
        assert!(rate_over(&samples[..1], 0.0, 1.0).is_nan());
    }

    #[test]
    fn own_memory_is_measured_with_and_without_children() {
        let me = std::process::id();
        let alone = tree_memory_bytes(me, &children(me));
        assert!(alone > 0);
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep");
        let with_child = tree_memory_bytes(me, &children(me));
        let _ = child.kill();
        let _ = child.wait();
        // Shares now, not resident sizes: within what this process owns
        // plus a small child.
        assert!(
            with_child > 0 && with_child < alone * 4,
            "{alone} {with_child}"
        );
    }
}
