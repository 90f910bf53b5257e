//! Geo commands: positions stored as sorted-set members whose scores are
//! 52-bit geohashes (`types/geohash.rs`), read and searched as Redis 7.0
//! does.
//!
//! Logging: GEOADD logs the ZADD it amounts to (scores as integers, so
//! replay needs no geometry). The searches that store (GEORADIUS ...
//! STORE, GEOSEARCHSTORE) log themselves when they change the destination:
//! a search reads only its source, so replaying it on the same data stores
//! the same result.

use std::borrow::Cow;

use super::table::*;
use super::{errors, CmdError, CmdResult, Ctx};
use crate::resp::{Args, Protocol};
use crate::types::geohash::{self, Extent, Shape};
use crate::types::number::parse_f64;
use crate::types::{Shared, Value, ZSet};

mod search;

/// The sorted set at argument `index`: `Ok(None)` if missing.
fn zset_at(ctx: &mut Ctx<'_>, key: &[u8]) -> Result<Option<Shared<ZSet>>, CmdError> {
    match ctx.state.keyspace.get(ctx.session.db, key) {
        None => Ok(None),
        Some(Value::ZSet(z)) => Ok(Some(z.clone())),
        Some(_) => Err(Cow::Borrowed(errors::WRONGTYPE)),
    }
}

/// A float argument, with Redis's default error or `message`.
fn float_arg(text: &[u8], message: &'static str) -> Result<f64, CmdError> {
    parse_f64(text).ok_or(Cow::Borrowed(message))
}

/// Longitude and latitude from two arguments, checked against the limits
/// a geohash can encode.
fn lon_lat(lon: &[u8], lat: &[u8]) -> Result<(f64, f64), CmdError> {
    let lon = float_arg(lon, errors::NOT_FLOAT)?;
    let lat = float_arg(lat, errors::NOT_FLOAT)?;
    if !(geohash::LON_MIN..=geohash::LON_MAX).contains(&lon)
        || !(geohash::LAT_MIN..=geohash::LAT_MAX).contains(&lat)
    {
        return Err(Cow::Owned(format!(
            "ERR invalid longitude,latitude pair {lon:.6},{lat:.6}"
        )));
    }
    Ok((lon, lat))
}

/// Metres per unit (`m`, `km`, `ft`, `mi`, any case).
fn unit_m(text: &[u8]) -> Result<f64, CmdError> {
    match text.to_ascii_lowercase().as_slice() {
        b"m" => Ok(1.0),
        b"km" => Ok(1000.0),
        b"ft" => Ok(0.3048),
        b"mi" => Ok(1609.34),
        _ => Err(Cow::Borrowed(
            "ERR unsupported unit provided. please use M, KM, FT, MI",
        )),
    }
}

/// A distance the way Redis prints one: fixed point, four decimals,
/// rounded half to even.
pub(super) fn format_distance(d: f64) -> String {
    if d == 0.0 {
        return "0.0000".into();
    }
    let scaled = (d * 10_000.0).round_ties_even() as i64;
    let sign = if scaled < 0 { "-" } else { "" };
    let n = scaled.unsigned_abs();
    format!("{sign}{}.{:04}", n / 10_000, n % 10_000)
}

/// A coordinate the way Redis prints one: 17 decimals, trailing zeros
/// (and a bare point) dropped.
pub(super) fn format_coordinate(x: f64) -> String {
    let text = format!("{x:.17}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    if text == "-0" {
        "0".into()
    } else {
        text.into()
    }
}

/// Replies with a coordinate: a bulk string in RESP2, a double in RESP3
/// (printed the same way).
fn reply_coordinate(ctx: &mut Ctx<'_>, x: f64) {
    let text = format_coordinate(x);
    if ctx.reply.proto == Protocol::Resp3 {
        ctx.reply.buf.push(b',');
        ctx.reply.buf.extend_from_slice(text.as_bytes());
        ctx.reply.buf.extend_from_slice(b"\r\n");
    } else {
        ctx.reply.bulk(text.as_bytes());
    }
}

pub(super) fn geoadd(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let (mut nx, mut xx, mut ch) = (false, false, false);
    let mut first = 2;
    while first < args.len() {
        match args.get(first).to_ascii_lowercase().as_slice() {
            b"nx" => nx = true,
            b"xx" => xx = true,
            b"ch" => ch = true,
            _ => break,
        }
        first += 1;
    }
    if !(args.len() - first).is_multiple_of(3) || (nx && xx) {
        return Err(Cow::Borrowed(errors::SYNTAX));
    }
    let mut points = Vec::with_capacity((args.len() - first) / 3);
    for at in (first..args.len()).step_by(3) {
        let (lon, lat) = lon_lat(args.get(at), args.get(at + 1))?;
        let score = geohash::score_of(lon, lat).unwrap_or(0);
        points.push((score, args.get(at + 2)));
    }
    let (db, key) = (ctx.session.db, args.get(1));
    if zset_at(ctx, key)?.is_none() && xx {
        ctx.reply.int(0);
        return Ok(());
    }
    let (mut added, mut changed) = (0i64, 0i64);
    if let Value::ZSet(z) = ctx.state.keyspace.get_or_insert(db, key, Value::new_zset) {
        for &(score, member) in &points {
            let score = score as f64;
            match z.score(member) {
                Some(_) if nx => {}
                Some(old) => {
                    if old != score {
                        z.insert(member, score);
                        changed += 1;
                    }
                }
                None if xx => {}
                None => {
                    z.insert(member, score);
                    added += 1;
                }
            }
        }
    }
    ctx.state.keyspace.remove_if_empty(db, key);
    if added + changed > 0 {
        // GEOADD runs as ZADD in Redis, so it raises ZADD's event.
        ctx.notify(crate::keyspace::events::ZSET, "zadd", key);
        log_as_zadd(ctx, args, first, &points);
    }
    ctx.reply.int(if ch { added + changed } else { added });
    Ok(())
}

/// Logs GEOADD as the ZADD Redis turns it into: the options as given,
/// then score and member pairs.
fn log_as_zadd(ctx: &mut Ctx<'_>, args: &Args<'_>, first: usize, points: &[(u64, &[u8])]) {
    let scores: Vec<String> = points.iter().map(|(s, _)| s.to_string()).collect();
    let mut parts: Vec<&[u8]> = vec![b"ZADD"];
    parts.extend(args.iter().skip(1).take(first - 1));
    for ((_, member), score) in points.iter().zip(&scores) {
        parts.push(score.as_bytes());
        parts.push(member);
    }
    ctx.propagate(&parts);
}

pub(super) fn geopos(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let z = zset_at(ctx, args.get(1))?;
    ctx.reply.array(args.len() - 2);
    for member in args.iter().skip(2) {
        let position = z
            .as_ref()
            .and_then(|z| z.score(member))
            .and_then(geohash::position_of);
        match position {
            Some((lon, lat)) => {
                ctx.reply.array(2);
                reply_coordinate(ctx, lon);
                reply_coordinate(ctx, lat);
            }
            None => ctx.reply.null_array(),
        }
    }
    Ok(())
}

pub(super) fn geohash_cmd(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let z = zset_at(ctx, args.get(1))?;
    ctx.reply.array(args.len() - 2);
    for member in args.iter().skip(2) {
        let text = z
            .as_ref()
            .and_then(|z| z.score(member))
            .and_then(geohash::geohash_string);
        match text {
            Some(text) => ctx.reply.bulk(&text),
            None => ctx.reply.null(),
        }
    }
    Ok(())
}

pub(super) fn geodist(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    let unit = match args.len() {
        5 => unit_m(args.get(4))?,
        n if n > 5 => return Err(Cow::Borrowed(errors::SYNTAX)),
        _ => 1.0,
    };
    let Some(z) = zset_at(ctx, args.get(1))? else {
        ctx.reply.null();
        return Ok(());
    };
    let position = |m: &[u8]| z.score(m).and_then(geohash::position_of);
    match (position(args.get(2)), position(args.get(3))) {
        (Some((lon1, lat1)), Some((lon2, lat2))) => {
            let d = geohash::distance(lon1, lat1, lon2, lat2) / unit;
            ctx.reply.bulk(format_distance(d).as_bytes());
        }
        _ => ctx.reply.null(),
    }
    Ok(())
}

/// The positions of the keys of GEORADIUS and GEORADIUSBYMEMBER: the
/// source, and the key after the last STORE or STOREDIST from argument 5
/// on, as Redis finds them.
fn radius_keys(args: &Args<'_>, out: &mut Vec<usize>) {
    out.push(1);
    let mut stored = None;
    let mut at = 5;
    while at < args.len() {
        let word = args.get(at);
        let is_store =
            word.eq_ignore_ascii_case(b"store") || word.eq_ignore_ascii_case(b"storedist");
        if is_store && at + 1 < args.len() {
            stored = Some(at + 1);
            at += 1;
        }
        at += 1;
    }
    out.extend(stored);
}

/// The commands this file implements, one per line so it reads as a table.
#[rustfmt::skip]
pub(super) static COMMANDS: &[CommandSpec] = &[
    cmd!("geoadd", -5, W, K1, "geo", "Adds members with their positions.", geoadd),
    cmd!("geodist", -4, R, K1, "geo", "Returns the distance between two members.", geodist),
    cmd!("geohash", -2, R, K1, "geo", "Returns members' positions as geohash strings.", geohash_cmd),
    cmd!("geopos", -2, R, K1, "geo", "Returns members' longitude and latitude.", geopos),
    cmd!("georadius", -6, W, K1, "geo", "Finds members within a radius of a position, optionally storing them.", search::georadius)
        .with_key_finder_and_range(radius_keys, K1)
        .with_key_searches(&[one_at(1), after_keyword("STORE", 6), after_keyword("STOREDIST", 6)]),
    cmd!("georadius_ro", -6, R, K1, "geo", "Finds members within a radius of a position.", search::georadius_ro),
    cmd!("georadiusbymember", -5, W, K1, "geo", "Finds members within a radius of a member, optionally storing them.", search::georadiusbymember)
        .with_key_finder_and_range(radius_keys, K1)
        .with_key_searches(&[one_at(1), after_keyword("STORE", 5), after_keyword("STOREDIST", 5)]),
    cmd!("georadiusbymember_ro", -5, R, K1, "geo", "Finds members within a radius of a member.", search::georadiusbymember_ro),
    cmd!("geosearch", -7, R, K1, "geo", "Finds members within a circle or box.", search::geosearch),
    cmd!("geosearchstore", -8, W, (1, 2, 1), "geo", "Finds members within a circle or box and stores them.", search::geosearchstore),
];

/// Builds a search shape (used by `search`).
fn shape(centre: (f64, f64), extent: Extent, unit_m: f64) -> Shape {
    Shape {
        lon: centre.0,
        lat: centre.1,
        extent,
        unit_m,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Finds the keys of `words` as the command table would.
    fn keys_of(words: &[&str]) -> Vec<String> {
        let base: Vec<u8> = words.concat().into_bytes();
        let mut ranges = Vec::new();
        let mut at = 0;
        for w in words {
            ranges.push((at, at + w.len()));
            at += w.len();
        }
        let args = Args::new(&base, &ranges);
        let mut out = Vec::new();
        radius_keys(&args, &mut out);
        out.iter()
            .map(|&i| String::from_utf8_lossy(args.get(i)).into_owned())
            .collect()
    }

    #[test]
    fn a_radius_search_names_its_source_and_last_destination() {
        let plain = ["GEORADIUS", "src", "1", "2", "3", "km", "ASC"];
        assert_eq!(keys_of(&plain), ["src"]);
        let stores = [
            "GEORADIUS",
            "src",
            "1",
            "2",
            "3",
            "km",
            "STORE",
            "a",
            "storedist",
            "b",
        ];
        assert_eq!(keys_of(&stores), ["src", "b"]);
        let by_member = ["GEORADIUSBYMEMBER", "src", "m", "3", "km", "STORE", "d"];
        assert_eq!(keys_of(&by_member), ["src", "d"]);
        assert_eq!(
            keys_of(&["GEORADIUS", "src", "1", "2", "3", "km", "STORE"]),
            ["src"]
        );
    }

    #[test]
    fn distances_and_coordinates_print_as_redis_prints_them() {
        assert_eq!(format_distance(0.0), "0.0000");
        assert_eq!(format_distance(0.775), "0.7750");
        assert_eq!(format_distance(166.27415156960033), "166.2742");
        assert_eq!(
            format_coordinate(13.361389338970184),
            "13.36138933897018433"
        );
        assert_eq!(format_coordinate(-0.0), "0");
        assert_eq!(format_coordinate(180.0), "180");
    }
}
