//! Scripts and streams in the kv experiment (issue #36's targets), each
//! workload on Ferrite and redis-server 7.0.15 in the same run:
//! - EVALSHA of a rate-limiter script of three commands (INCR a counter,
//!   HSET its metadata, EXPIRE the counter) on 100,000 random keys,
//!   redis-benchmark with 50 clients, pipeline 1 and 16;
//! - XADD of a three-field entry to one stream, redis-benchmark likewise;
//! - a consumer group draining a stream: a producer fills it, then
//!   [`CONSUMERS`] consumers each loop `XREADGROUP ... COUNT 10 STREAMS s >`
//!   and `XACK` of the ten IDs until the group has seen every entry;
//!   entries per second, and a check that nothing is left pending;
//! - memory per stream entry: `used_memory` (both servers count their
//!   allocator's bytes, jemalloc) and resident set before and after
//!   filling one stream, on fresh servers without persistence.
//!
//! The four servers of the throughput workloads run side by side and each
//! run measures them back to back, so a ratio is taken within a run (the
//! host is shared and its speed drifts between runs) and the figure is the
//! median of the per-run ratios:
//! - Redis without persistence (`--appendonly no --save ''`), the
//!   baseline of Ferrite's always-durable XADD;
//! - Redis and Ferrite with `appendfsync everysec` on the disk, the same
//!   durability, for EVALSHA and the consumer group;
//! - Ferrite with `appendfsync always` and its log on emulated PM (a file
//!   on tmpfs: it survives a process crash, not a power failure).
//!
//! Each EVALSHA and XADD load also yields the server's CPU time per
//! request (`<workload>_cpu_us`, figure `scripts_streams_cpu_us_per_request`).
//!
//! With `--alt-bin`, each Ferrite server has a twin running the other
//! build (`<label>_alt`), measured in the same runs next to it (the two
//! sort together, and odd runs reverse the order, so each goes first
//! every other run): a change of a few percent is then a same-run A/B on
//! a host whose speed drifts by more than that between runs.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context, Result};

use crate::kv::{start, start_bin, ServerSpec, BASE_PORT, CLIENT_CORE};
use crate::kvload::{complete_replies, encode};
use crate::report::{median, median_ratio, Report};
use crate::rewrite::probe::tree_cpu_ms;
use crate::Common;

/// The rate limiter: count a request, note the count in a hash, and keep
/// the counter for a window of `ARGV[1]` seconds.
const SCRIPT: &str = "local n = redis.call('INCR', KEYS[1])\n\
redis.call('HSET', KEYS[2], 'count', n)\n\
redis.call('EXPIRE', KEYS[1], ARGV[1])\n\
return n";
/// Keys the EVALSHA load spreads over (redis-benchmark's `-r`).
const KEY_SPACE: usize = 100_000;
/// redis-benchmark's connections.
const CLIENTS: usize = 50;
/// Consumers of the group workload.
const CONSUMERS: usize = 8;
/// Entries one XREADGROUP asks for.
const READ_COUNT: usize = 10;
/// The entry every XADD appends, as in docs/results/streams-memory.md.
const ENTRY: [&str; 6] = ["name", "user", "age", "42", "city", "paris"];
/// Entries of the memory measurement.
const MEMORY_ENTRIES: usize = 500_000;

/// The servers of the throughput workloads, by the labels of
/// [`ServerSpec::label`].
const REDIS_OFF: &str = "redis_off";
const REDIS_EVERYSEC: &str = "redis_everysec";
const FERRITE_EVERYSEC: &str = "ferrite_everysec_disk";
const FERRITE_ALWAYS_PM: &str = "ferrite_always_pm";

/// The suffix of the `--alt-bin` build's servers' labels.
const ALT: &str = "_alt";
/// The suffix of a workload's server CPU time per request, in µs: user
/// plus system time of all the server's threads, exited ones included
/// (the log's `wal-prepare` threads), over the load. Steadier than the
/// rate on a shared host, whose other jobs slow the clients and the
/// server's wake-ups more than they lengthen the server's own work.
const CPU: &str = "_cpu_us";

fn servers() -> [ServerSpec; 4] {
    let spec = |system, fsync, medium| ServerSpec {
        system,
        fsync,
        medium,
    };
    [
        spec("redis", "off", "disk"),
        spec("redis", "everysec", "disk"),
        spec("ferrite", "everysec", "disk"),
        spec("ferrite", "always", "pm"),
    ]
}

/// One server of the throughput workloads: its label, its settings and,
/// for the `--alt-bin` twins, the build it runs.
struct Planned {
    label: String,
    spec: ServerSpec,
    bin: Option<PathBuf>,
}

/// The servers of a run: [`servers`], and with `alt` a twin of each
/// Ferrite server running that build.
fn plan(alt: Option<&Path>) -> Vec<Planned> {
    let mut out = Vec::new();
    for spec in servers() {
        let label = spec.label();
        if let (Some(bin), "ferrite") = (alt, spec.system) {
            out.push(Planned {
                label: format!("{label}{ALT}"),
                spec: spec.clone(),
                bin: Some(bin.to_path_buf()),
            });
        }
        out.push(Planned {
            label,
            spec,
            bin: None,
        });
    }
    out
}

/// A RESP2 reply.
#[derive(Clone, Debug, PartialEq)]
enum Reply {
    Line(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<Reply>>),
}

impl Reply {
    fn bulk_text(&self) -> Option<String> {
        match self {
            Reply::Bulk(Some(b)) => Some(String::from_utf8_lossy(b).into_owned()),
            _ => None,
        }
    }
}

/// A connection sending one command at a time (or a pipelined batch) and
/// parsing whole replies.
struct Conn {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Conn {
    fn open(port: u16) -> Result<Conn> {
        let stream = TcpStream::connect(("127.0.0.1", port)).context("connecting")?;
        stream.set_nodelay(true)?;
        Ok(Conn {
            writer: stream.try_clone()?,
            reader: BufReader::new(stream),
        })
    }

    fn call(&mut self, args: &[&str]) -> Result<Reply> {
        let mut out = Vec::new();
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        encode(&mut out, &args);
        self.writer.write_all(&out)?;
        self.reply()
    }

    fn reply(&mut self) -> Result<Reply> {
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            bail!("the server closed the connection");
        }
        let line = line.trim_end();
        let (kind, rest) = line.split_at(line.len().min(1));
        Ok(match kind {
            "+" => Reply::Line(rest.to_string()),
            "-" => bail!("error reply: {rest}"),
            ":" => Reply::Int(rest.parse()?),
            "$" => {
                let len: i64 = rest.parse()?;
                if len < 0 {
                    Reply::Bulk(None)
                } else {
                    let mut bytes = vec![0u8; len as usize + 2];
                    self.reader.read_exact(&mut bytes)?;
                    bytes.truncate(len as usize);
                    Reply::Bulk(Some(bytes))
                }
            }
            "*" => {
                let n: i64 = rest.parse()?;
                if n < 0 {
                    Reply::Array(None)
                } else {
                    let items = (0..n).map(|_| self.reply()).collect::<Result<_>>()?;
                    Reply::Array(Some(items))
                }
            }
            _ => bail!("unexpected reply line {line:?}"),
        })
    }

    fn int(&mut self, args: &[&str]) -> Result<i64> {
        match self.call(args)? {
            Reply::Int(n) => Ok(n),
            other => bail!("{} answered {other:?}, not an integer", args[0]),
        }
    }
}

/// redis-benchmark's requests per second for one command line.
fn redis_benchmark(port: u16, pipeline: usize, requests: usize, command: &[&str]) -> Result<f64> {
    let output = Command::new("taskset")
        .args([
            "-c",
            CLIENT_CORE,
            "redis-benchmark",
            "-p",
            &port.to_string(),
        ])
        .args(["-c", &CLIENTS.to_string(), "-P", &pipeline.to_string()])
        .args(["-n", &requests.to_string(), "-r", &KEY_SPACE.to_string()])
        .arg("--csv")
        .args(command)
        .output()
        .context("running redis-benchmark")?;
    let text = String::from_utf8_lossy(&output.stdout);
    text.lines()
        .filter_map(|l| l.split(',').nth(1))
        .find_map(|cell| cell.trim_matches('"').parse::<f64>().ok())
        .with_context(|| {
            format!(
                "redis-benchmark {command:?} gave no figure: {text} {}",
                String::from_utf8_lossy(&output.stderr)
            )
        })
}

/// Loads the script and checks it runs: its SHA1 and one call's answer.
fn load_script(port: u16) -> Result<String> {
    let mut conn = Conn::open(port)?;
    let sha = conn
        .call(&["SCRIPT", "LOAD", SCRIPT])?
        .bulk_text()
        .context("SCRIPT LOAD gave no SHA1")?;
    conn.call(&["DEL", "rl:check", "rlm:check"])?;
    let n = conn.int(&["EVALSHA", &sha, "2", "rl:check", "rlm:check", "60"])?;
    let ttl = conn.int(&["TTL", "rl:check"])?;
    if n != 1 || !(1..=60).contains(&ttl) {
        bail!("the rate-limiter script answered {n} and left a TTL of {ttl}");
    }
    Ok(sha)
}

/// Appends `n` entries to `key` with one pipelined connection (1,000
/// commands a batch).
fn fill_stream(port: u16, key: &str, n: usize) -> Result<()> {
    const BATCH: usize = 1000;
    let mut stream = TcpStream::connect(("127.0.0.1", port)).context("connecting")?;
    let mut buf = vec![0u8; 1 << 20];
    let mut done = 0;
    while done < n {
        let batch = BATCH.min(n - done);
        let mut out = Vec::with_capacity(batch * 96);
        let mut args: Vec<&[u8]> = vec![b"XADD", key.as_bytes(), b"*"];
        args.extend(ENTRY.iter().map(|a| a.as_bytes()));
        for _ in 0..batch {
            encode(&mut out, &args);
        }
        stream.write_all(&out)?;
        let (mut got, mut filled) = (0, 0);
        while got < batch {
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
        done += batch;
    }
    Ok(())
}

/// The IDs of an XREADGROUP reply (`[[key, [[id, fields]...]]]`); none
/// for a nil or empty reply.
fn entry_ids(reply: &Reply) -> Result<Vec<String>> {
    let streams = match reply {
        Reply::Array(None) => return Ok(Vec::new()),
        Reply::Array(Some(s)) => s,
        other => bail!("XREADGROUP answered {other:?}"),
    };
    let mut ids = Vec::new();
    for stream in streams {
        let Reply::Array(Some(pair)) = stream else {
            bail!("XREADGROUP's stream is {stream:?}");
        };
        let Some(Reply::Array(Some(entries))) = pair.get(1) else {
            bail!("XREADGROUP's stream has no entries array: {pair:?}");
        };
        for entry in entries {
            let id = match entry {
                Reply::Array(Some(e)) => e.first().and_then(Reply::bulk_text),
                _ => None,
            };
            ids.push(id.with_context(|| format!("XREADGROUP's entry is {entry:?}"))?);
        }
    }
    Ok(ids)
}

/// One consumer: reads and acknowledges batches until the group has
/// nothing new; returns the entries it took.
fn consume(port: u16, key: &str, name: &str) -> Result<usize> {
    let mut conn = Conn::open(port)?;
    let count = READ_COUNT.to_string();
    let mut taken = 0;
    loop {
        let reply = conn.call(&[
            "XREADGROUP",
            "GROUP",
            "bench",
            name,
            "COUNT",
            &count,
            "STREAMS",
            key,
            ">",
        ])?;
        let ids = entry_ids(&reply)?;
        if ids.is_empty() {
            return Ok(taken);
        }
        let mut ack = vec!["XACK", key, "bench"];
        ack.extend(ids.iter().map(String::as_str));
        let acked = conn.int(&ack)?;
        if acked != ids.len() as i64 {
            bail!("XACK of {} IDs acknowledged {acked}", ids.len());
        }
        taken += ids.len();
    }
}

/// Fills `key` with `entries`, then drains it with [`CONSUMERS`] consumers
/// of one group; entries per second of the draining.
fn consumer_group(port: u16, key: &str, entries: usize) -> Result<f64> {
    let mut admin = Conn::open(port)?;
    admin.call(&["DEL", key])?;
    fill_stream(port, key, entries)?;
    admin.call(&["XGROUP", "CREATE", key, "bench", "0"])?;
    let started = Instant::now();
    let taken = std::thread::scope(|s| -> Result<usize> {
        let handles: Vec<_> = (0..CONSUMERS)
            .map(|i| s.spawn(move || consume(port, key, &format!("c{i}"))))
            .collect();
        let mut total = 0;
        for h in handles {
            total += h
                .join()
                .map_err(|_| anyhow::anyhow!("consumer thread panicked"))??;
        }
        Ok(total)
    })?;
    let rate = taken as f64 / started.elapsed().as_secs_f64();
    let pending = match admin.call(&["XPENDING", key, "bench"])? {
        Reply::Array(Some(summary)) => summary.first().cloned(),
        _ => None,
    };
    if taken != entries || pending != Some(Reply::Int(0)) {
        bail!("the group took {taken} of {entries} entries, {pending:?} pending");
    }
    admin.call(&["DEL", key])?;
    Ok(rate)
}

/// Request counts: (pipeline 1, pipeline 16, group entries).
fn sizes(quick: bool) -> (usize, usize, usize) {
    if quick {
        (10_000, 50_000, 10_000)
    } else {
        (100_000, 500_000, 100_000)
    }
}

/// One run over every server; figures keyed by server then workload.
fn one_run(
    ports: &BTreeMap<String, u16>,
    pids: &BTreeMap<String, u32>,
    shas: &BTreeMap<String, String>,
    run: usize,
    quick: bool,
) -> Result<BTreeMap<String, BTreeMap<String, f64>>> {
    let (p1, p16, group) = sizes(quick);
    let mut out: BTreeMap<String, BTreeMap<String, f64>> = BTreeMap::new();
    // Odd runs go through the servers in the other order, so a load that
    // rises or falls during a run does not always favour the same side.
    let mut order: Vec<(&String, &u16)> = ports.iter().collect();
    if run % 2 == 1 {
        order.reverse();
    }
    for (label, &port) in order {
        let sha = &shas[label];
        let figures = out.entry(label.clone()).or_default();
        let evalsha = [
            "EVALSHA",
            sha,
            "2",
            "rl:__rand_int__",
            "rlm:__rand_int__",
            "60",
        ];
        let stream = format!("bench:xadd:{run}");
        let mut xadd = vec!["XADD", stream.as_str(), "*"];
        xadd.extend(ENTRY);
        for (pipeline, requests) in [(1, p1), (16, p16)] {
            for (name, command) in [("evalsha", &evalsha[..]), ("xadd", &xadd[..])] {
                let before = tree_cpu_ms(pids[label], &[]);
                let rps = redis_benchmark(port, pipeline, requests, command)?;
                figures.insert(format!("{name}_p{pipeline}"), rps);
                if let (Some(a), Some(b)) = (before, tree_cpu_ms(pids[label], &[])) {
                    let us = (b - a) * 1e3 / requests as f64;
                    figures.insert(format!("{name}_p{pipeline}{CPU}"), us);
                }
            }
            let len = Conn::open(port)?.int(&["XLEN", &stream])?;
            // redis-benchmark may send a few more than asked when pipelining.
            if len < requests as i64 {
                bail!("{label}: {requests} XADDs left a stream of {len}");
            }
            Conn::open(port)?.call(&["DEL", &stream])?;
        }
        let key = format!("bench:group:{run}");
        figures.insert(
            "xreadgroup_xack_entries".into(),
            consumer_group(port, &key, group)?,
        );
    }
    Ok(out)
}

/// `used_memory` from INFO memory.
fn used_memory(conn: &mut Conn) -> Result<f64> {
    let text = conn
        .call(&["INFO", "memory"])?
        .bulk_text()
        .context("INFO gave no text")?;
    text.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .context("INFO memory has no used_memory")
}

/// Bytes per entry of one stream of `entries` on fresh servers without
/// persistence: `{system: {used_memory, rss}}`.
fn memory(dir: &Path, entries: usize) -> Result<BTreeMap<String, BTreeMap<String, f64>>> {
    let mut out = BTreeMap::new();
    for (i, system) in ["redis", "ferrite"].into_iter().enumerate() {
        let spec = ServerSpec {
            system,
            fsync: "off",
            medium: "disk",
        };
        let port = BASE_PORT + 310 + i as u16;
        let server = start(&spec, port, &dir.join(system))?;
        let mut conn = Conn::open(port)?;
        let (used0, rss0) = (
            used_memory(&mut conn)?,
            crate::kv::resident_bytes(server.child.id())?,
        );
        fill_stream(port, "mem:stream", entries)?;
        let (used1, rss1) = (
            used_memory(&mut conn)?,
            crate::kv::resident_bytes(server.child.id())?,
        );
        let per = |a: f64, b: f64| (b - a) / entries as f64;
        out.insert(
            system.to_string(),
            BTreeMap::from([
                ("used_memory_bytes_per_entry".to_string(), per(used0, used1)),
                (
                    "rss_bytes_per_entry".to_string(),
                    per(rss0 as f64, rss1 as f64),
                ),
            ]),
        );
    }
    Ok(out)
}

/// The ratios of issue #36: (key, Ferrite server, Redis server, figure).
const RATIOS: [(&str, &str, &str, &str); 6] = [
    (
        "evalsha_vs_redis",
        FERRITE_EVERYSEC,
        REDIS_EVERYSEC,
        "evalsha_p1",
    ),
    (
        "evalsha_p16_vs_redis",
        FERRITE_EVERYSEC,
        REDIS_EVERYSEC,
        "evalsha_p16",
    ),
    (
        "xadd_always_pm_vs_redis_nopersist",
        FERRITE_ALWAYS_PM,
        REDIS_OFF,
        "xadd_p1",
    ),
    (
        "xadd_p16_always_pm_vs_redis_nopersist",
        FERRITE_ALWAYS_PM,
        REDIS_OFF,
        "xadd_p16",
    ),
    ("xadd_vs_redis", FERRITE_EVERYSEC, REDIS_EVERYSEC, "xadd_p1"),
    (
        "xreadgroup_xack_vs_redis",
        FERRITE_EVERYSEC,
        REDIS_EVERYSEC,
        "xreadgroup_xack_entries",
    ),
];

/// The `--alt-bin` figures: each ratio of [`RATIOS`] for the other build
/// (`<ratio>_alt`, against the same Redis in the same runs) and, per
/// Ferrite server and workload, the median of the per-run rates of the
/// other build over this one's (`<label>_alt_vs_<label>_<workload>`; for
/// the `_cpu_us` figures, its CPU time per request over this one's: above
/// 1, the other build spends more).
fn alt_ratios(report: &mut Report, runs: &[BTreeMap<String, BTreeMap<String, f64>>]) {
    let get = |run: &BTreeMap<String, BTreeMap<String, f64>>, server: &str, key: &str| {
        run.get(server).and_then(|m| m.get(key)).copied()
    };
    let median_of = |ours: &str, theirs: &str, key: &str| {
        median_ratio(
            runs.iter()
                .filter_map(|r| Some((get(r, ours, key)?, get(r, theirs, key)?))),
        )
    };
    for (ratio, ours, theirs, key) in RATIOS {
        let twin = format!("{ours}{ALT}");
        report.ratio(format!("{ratio}{ALT}"), median_of(&twin, theirs, key));
    }
    let Some(first) = runs.first() else {
        return;
    };
    for (label, figures) in first {
        let Some(base) = label.strip_suffix(ALT) else {
            continue;
        };
        for key in figures.keys() {
            let ratio = median_of(label, base, key);
            report.ratio(format!("{label}_vs_{base}_{key}"), ratio);
        }
    }
}

/// Runs the scripts and streams workloads and adds their figures and
/// ratios to `report`.
pub(crate) fn run(
    report: &mut Report,
    disk: &Path,
    pm: &Path,
    common: &Common,
    alt: Option<&Path>,
) -> Result<()> {
    let mut running = Vec::new();
    let (mut ports, mut shas, mut pids) = (BTreeMap::new(), BTreeMap::new(), BTreeMap::new());
    for (i, server) in plan(alt).iter().enumerate() {
        let root = if server.spec.medium == "pm" { pm } else { disk };
        let port = BASE_PORT + 300 + i as u16;
        running.push(start_bin(
            &server.spec,
            server.bin.as_deref(),
            port,
            &root.join(format!("scripts-{}", server.label)),
        )?);
        shas.insert(server.label.clone(), load_script(port)?);
        // taskset execs the server, so the child's PID is the server's.
        pids.insert(
            server.label.clone(),
            running.last().map_or(0, |r| r.child.id()),
        );
        ports.insert(server.label.clone(), port);
    }
    if let Some(bin) = alt {
        report.note(format!(
            "servers labelled *{ALT} run the build {} in the same runs; *{ALT} ratios are that build's, *{ALT}_vs_* its rate over this build's",
            bin.display()
        ));
    }
    if shas.values().any(|s| Some(s) != shas.values().next()) {
        bail!("the servers disagree on the script's SHA1: {shas:?}");
    }
    let mut runs = Vec::new();
    for run in 0..common.runs() {
        let figures = one_run(&ports, &pids, &shas, run, common.quick)?;
        println!("scripts/streams run {run}: {figures:?}");
        runs.push(figures);
    }
    drop(running);
    let get = |run: &BTreeMap<String, BTreeMap<String, f64>>, server: &str, key: &str| {
        run.get(server).and_then(|m| m.get(key)).copied()
    };
    for (ratio, ours, theirs, key) in RATIOS {
        let pairs = runs
            .iter()
            .filter_map(|r| Some((get(r, ours, key)?, get(r, theirs, key)?)));
        report.ratio(ratio, median_ratio(pairs));
    }
    if alt.is_some() {
        alt_ratios(report, &runs);
    }
    let mut medians: BTreeMap<String, BTreeMap<String, f64>> = BTreeMap::new();
    for label in ports.keys() {
        let keys = runs
            .first()
            .and_then(|r| r.get(label))
            .map(|m| m.keys().cloned());
        for key in keys.into_iter().flatten() {
            let values: Vec<f64> = runs.iter().filter_map(|r| get(r, label, &key)).collect();
            medians
                .entry(label.clone())
                .or_default()
                .insert(key, median(&values));
        }
    }
    let cpu: BTreeMap<String, BTreeMap<String, f64>> = medians
        .iter_mut()
        .map(|(label, figures)| {
            let (cpu, rps) = std::mem::take(figures)
                .into_iter()
                .partition(|(k, _)| k.ends_with(CPU));
            *figures = rps;
            (label.clone(), cpu)
        })
        .collect();
    report.figure("scripts_streams_rps", &medians);
    report.figure("scripts_streams_cpu_us_per_request", &cpu);
    let entries = if common.quick {
        MEMORY_ENTRIES / 10
    } else {
        MEMORY_ENTRIES
    };
    let mem = memory(&disk.join("stream-memory"), entries)?;
    let figure = |system: &str, key: &str| mem.get(system).and_then(|m| m.get(key)).copied();
    for (ratio, key) in [
        (
            "stream_bytes_per_entry_vs_redis",
            "used_memory_bytes_per_entry",
        ),
        ("stream_rss_per_entry_vs_redis", "rss_bytes_per_entry"),
    ] {
        if let (Some(f), Some(r)) = (figure("ferrite", key), figure("redis", key)) {
            report.ratio(ratio, f / r);
        }
    }
    println!("stream memory ({entries} entries): {mem:?}");
    report.figure("stream_memory", &mem);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xreadgroup_ids_are_found_and_nil_is_empty() {
        let entry = |id: &str| {
            Reply::Array(Some(vec![
                Reply::Bulk(Some(id.as_bytes().to_vec())),
                Reply::Array(Some(vec![Reply::Bulk(Some(b"f".to_vec()))])),
            ]))
        };
        let reply = Reply::Array(Some(vec![Reply::Array(Some(vec![
            Reply::Bulk(Some(b"s".to_vec())),
            Reply::Array(Some(vec![entry("1-0"), entry("1-1")])),
        ]))]));
        assert_eq!(entry_ids(&reply).unwrap(), ["1-0", "1-1"]);
        assert!(entry_ids(&Reply::Array(None)).unwrap().is_empty());
        assert!(entry_ids(&Reply::Int(3)).is_err());
        let bad = Reply::Array(Some(vec![Reply::Array(Some(vec![Reply::Int(1)]))]));
        assert!(entry_ids(&bad).is_err());
    }

    #[test]
    fn an_alt_build_twins_each_ferrite_server_only() {
        let labels = |alt: Option<&Path>| -> Vec<(String, Option<PathBuf>)> {
            plan(alt).into_iter().map(|p| (p.label, p.bin)).collect()
        };
        let alone = labels(None);
        assert_eq!(alone.len(), 4);
        assert!(alone.iter().all(|(_, bin)| bin.is_none()));
        let bin = Path::new("/tmp/old/ferrite");
        let twinned = labels(Some(bin));
        assert_eq!(twinned.len(), 6);
        for (label, built) in &twinned {
            match label.strip_suffix(ALT) {
                Some(base) => {
                    assert!(base.starts_with("ferrite_"), "{label}");
                    assert_eq!(built.as_deref(), Some(bin));
                    assert!(twinned.iter().any(|(l, b)| l == base && b.is_none()));
                }
                None => assert!(built.is_none(), "{label}"),
            }
        }
    }

    #[test]
    fn alt_ratios_are_medians_of_per_run_ratios() {
        let run = |ours: f64, alt: f64, redis: f64| {
            let mut out: BTreeMap<String, BTreeMap<String, f64>> = BTreeMap::new();
            for (label, rps) in [
                (FERRITE_ALWAYS_PM.to_string(), ours),
                (format!("{FERRITE_ALWAYS_PM}{ALT}"), alt),
                (REDIS_OFF.to_string(), redis),
            ] {
                out.insert(label, BTreeMap::from([("xadd_p16".to_string(), rps)]));
            }
            out
        };
        // Per run, alt over ours: 1.2, 0.5, 1.1; alt over Redis: 0.6, 0.5, 1.1.
        let runs = [
            run(100.0, 120.0, 200.0),
            run(200.0, 100.0, 200.0),
            run(100.0, 110.0, 100.0),
        ];
        let mut report = Report::new("test", true, 3);
        alt_ratios(&mut report, &runs);
        let got = |key: &str| report.ratios().get(key).copied();
        let ab = got("ferrite_always_pm_alt_vs_ferrite_always_pm_xadd_p16").expect("A/B ratio");
        assert!((ab - 1.1).abs() < 1e-9, "{ab}");
        let vs_redis = got("xadd_p16_always_pm_vs_redis_nopersist_alt").expect("alt ratio");
        assert!((vs_redis - 0.6).abs() < 1e-9, "{vs_redis}");
        assert!(got("ferrite_always_pm_vs_ferrite_always_pm_alt_xadd_p16").is_none());
    }

    #[test]
    fn the_ferrite_binary_serves_with_serve_and_the_bench_with_kv_serve() {
        use crate::kv::serve_subcommand;
        assert_eq!(
            serve_subcommand(Path::new("/x/target/release/ferrite")),
            "serve"
        );
        assert_eq!(serve_subcommand(Path::new("/x/ferrite-old")), "serve");
        assert_eq!(
            serve_subcommand(Path::new("/x/release/ferrite-bench")),
            "kv-serve"
        );
    }
}
