//! `ferrite export DIR FILE`: the dataset of a (stopped) data directory as
//! a plain RESP append-only file that Redis loads (`appendonly yes`, the
//! file as `appendfilename`; Redis 7 takes it as the base of a new
//! `appendonlydir`). One command per key, collections in chunks of
//! [`EXPORT_ITEMS_PER_COMMAND`] as Redis's own rewrite does, expiry as
//! PEXPIREAT, SELECT before each non-empty database.

use std::io::Write;
use std::path::Path;

use super::open_dir::{open_data_dir, Access};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::resp::format_double;
use crate::state::State;
use crate::types::stream::{Stream, StreamId};
use crate::types::Value;

/// Items of a collection per exported command.
pub const EXPORT_ITEMS_PER_COMMAND: usize = 64;

/// What an export wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExportStats {
    /// Keys written.
    pub keys: u64,
    /// Bytes of the file.
    pub bytes: u64,
}

/// Loads `config.dir` the way start-up does (read-only apart from cutting a
/// torn log tail) into a fresh state ([`open_data_dir`], [`Access::Load`]).
pub fn load_dir(config: &Config) -> Result<State> {
    let mut state = State::new(config.clone());
    open_data_dir(&mut state, Access::Load)?;
    Ok(state)
}

fn command(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
}

/// Appends the commands that rebuild `key` = `value`.
fn export_value(out: &mut Vec<u8>, key: &[u8], value: &Value) {
    let chunked = |out: &mut Vec<u8>, name: &[u8], items: Vec<Vec<u8>>, per: usize| {
        for chunk in items.chunks(EXPORT_ITEMS_PER_COMMAND * per) {
            let mut args: Vec<&[u8]> = vec![name, key];
            args.extend(chunk.iter().map(Vec::as_slice));
            command(out, &args);
        }
    };
    match value {
        Value::Str(s) => command(out, &[b"SET", key, s]),
        Value::List(list) => chunked(out, b"RPUSH", list.iter().map(|v| v.to_vec()).collect(), 1),
        Value::Set(set) => chunked(out, b"SADD", set.iter().map(|v| v.to_vec()).collect(), 1),
        Value::Hash(hash) => {
            let items = hash.iter().flat_map(|(f, v)| [f.to_vec(), v.to_vec()]);
            chunked(out, b"HSET", items.collect(), 2)
        }
        Value::ZSet(zset) => {
            let items = zset
                .iter()
                .flat_map(|(m, score)| [format_double(score).into_bytes(), m.to_vec()]);
            chunked(out, b"ZADD", items.collect(), 2)
        }
        Value::Stream(stream) => export_stream(out, key, stream),
    }
}

/// Appends the commands that rebuild stream `key` in Redis: its entries
/// with their IDs (an empty stream made by an XADD its MAXLEN 0 removes,
/// as Redis's own rewrite makes one), its counters, then each group, its consumers and its pending entries.
fn export_stream(out: &mut Vec<u8>, key: &[u8], s: &Stream) {
    let last = s.last_id.text();
    if s.length == 0 {
        // Any ID makes the stream (XSETID below sets the real last ID,
        // `0-0` included); `0-1` is the smallest XADD takes.
        command(out, &[b"XADD", key, b"MAXLEN", b"0", b"0-1", b"x", b"y"]);
    }
    for e in s.range(StreamId::MIN, StreamId::MAX, false) {
        let id = e.id.text();
        let mut args: Vec<&[u8]> = vec![b"XADD", key, id.as_bytes()];
        e.fields.iter().for_each(|(f, v)| args.extend([*f, *v]));
        command(out, &args);
    }
    let (added, max_deleted) = (s.entries_added.to_string(), s.max_deleted_id.text());
    command(
        out,
        &[
            b"XSETID",
            key,
            last.as_bytes(),
            b"ENTRIESADDED",
            added.as_bytes(),
        ]
        .into_iter()
        .chain([&b"MAXDELETEDID"[..], max_deleted.as_bytes()])
        .collect::<Vec<_>>(),
    );
    for (name, g) in &s.groups {
        let (id, read) = (g.last_id.text(), g.entries_read.to_string());
        let create: [&[u8]; 7] = [
            b"XGROUP",
            b"CREATE",
            key,
            name,
            id.as_bytes(),
            b"ENTRIESREAD",
            read.as_bytes(),
        ];
        command(out, &create);
        for consumer in g.consumers.keys() {
            command(out, &[b"XGROUP", b"CREATECONSUMER", key, name, consumer]);
        }
        for (id, nack) in &g.pel {
            let (id, time, count) = (
                id.text(),
                nack.delivery_time.to_string(),
                nack.delivery_count.to_string(),
            );
            let claim: [&[u8]; 12] = [
                b"XCLAIM",
                key,
                name,
                &nack.consumer,
                b"0",
                id.as_bytes(),
                b"TIME",
                time.as_bytes(),
                b"RETRYCOUNT",
                count.as_bytes(),
                b"JUSTID",
                b"FORCE",
            ];
            command(out, &claim);
        }
    }
}

/// Writes `state`'s dataset to `file` (through `file.tmp`, synced, renamed).
pub fn export_state(state: &State, file: &Path) -> Result<ExportStats> {
    let io = |op: &'static str| {
        move |source| Error::Io {
            op,
            path: file.to_path_buf(),
            source,
        }
    };
    let tmp = file.with_extension("tmp");
    let mut writer = std::io::BufWriter::new(std::fs::File::create(&tmp).map_err(io("create"))?);
    let mut stats = ExportStats::default();
    let mut out = Vec::new();
    // Function libraries first, as Redis's own rewrite writes them.
    for (_, library) in state.functions.iter() {
        command(&mut out, &[b"FUNCTION", b"LOAD", &library.code]);
    }
    writer.write_all(&out).map_err(io("write"))?;
    out.clear();
    for db in 0..state.keyspace.databases() {
        let mut selected = false;
        for segment in state.keyspace.db(db).segments() {
            for (key, value) in segment.map.iter() {
                if !selected {
                    command(&mut out, &[b"SELECT", db.to_string().as_bytes()]);
                    selected = true;
                }
                export_value(&mut out, key, value);
                if let Some(at) = segment.expires.get(key) {
                    command(&mut out, &[b"PEXPIREAT", key, at.to_string().as_bytes()]);
                }
                stats.keys += 1;
                stats.bytes += out.len() as u64;
                writer.write_all(&out).map_err(io("write"))?;
                out.clear();
            }
        }
    }
    let file_handle = writer
        .into_inner()
        .map_err(|e| io("write")(e.into_error()))?;
    file_handle.sync_all().map_err(io("fsync"))?;
    drop(file_handle);
    std::fs::rename(&tmp, file).map_err(io("rename"))?;
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::stream::{Consumer, Group, NodeLimits};
    use crate::types::Bytes;

    /// The commands written, as text, one per line.
    fn exported(key: &[u8], s: &Stream) -> Vec<String> {
        let mut out = Vec::new();
        export_stream(&mut out, key, s);
        let text = String::from_utf8(out).unwrap();
        let mut lines = Vec::new();
        for command in text.split('*').skip(1) {
            let parts: Vec<&str> = command.split("\r\n").collect();
            let args: Vec<&str> = parts.iter().skip(2).step_by(2).copied().collect();
            lines.push(args.join(" ").trim().to_string());
        }
        lines
    }

    #[test]
    fn a_stream_exports_as_the_commands_redis_replays() {
        let mut s = Stream::default();
        let id = |ms| StreamId { ms, seq: 0 };
        s.append(id(1), &[(b"f", b"a")], NodeLimits::DEFAULT);
        s.append(id(2), &[(b"f", b"b")], NodeLimits::DEFAULT);
        s.delete(id(1));
        let mut g = Group::new(id(2), 2);
        let alice = Bytes::from(&b"alice"[..]);
        g.consumers.insert(alice.clone(), Consumer::default());
        g.assign(id(2), &alice, 1000, Some(3));
        s.groups.insert(Bytes::from(&b"g"[..]), g);
        assert_eq!(
            exported(b"k", &s),
            [
                "XADD k 2-0 f b",
                "XSETID k 2-0 ENTRIESADDED 2 MAXDELETEDID 1-0",
                "XGROUP CREATE k g 2-0 ENTRIESREAD 2",
                "XGROUP CREATECONSUMER k g alice",
                "XCLAIM k g alice 0 2-0 TIME 1000 RETRYCOUNT 3 JUSTID FORCE",
            ]
        );
        // An empty stream is made by an XADD that MAXLEN 0 undoes.
        assert_eq!(
            exported(b"e", &Stream::default()),
            [
                "XADD e MAXLEN 0 0-1 x y",
                "XSETID e 0-0 ENTRIESADDED 0 MAXDELETEDID 0-0"
            ]
        );
    }
}
