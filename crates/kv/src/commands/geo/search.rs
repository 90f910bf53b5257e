//! GEORADIUS, GEORADIUSBYMEMBER (and their `_RO` forms), GEOSEARCH and
//! GEOSEARCHSTORE: one parser and one search, as in Redis, so options,
//! errors and their order are the same for all six.

use std::borrow::Cow;

use super::{float_arg, format_distance, lon_lat, reply_coordinate, shape, unit_m, zset_at};
use crate::commands::{errors, int_arg, CmdError, CmdResult, Ctx};
use crate::keyspace::events::{GENERIC, ZSET};
use crate::resp::Args;
use crate::types::geohash::{self, Extent, Shape};
use crate::types::{ScoreBound, Shared, Value, ZSet};

/// Which command is running.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// GEORADIUS: centre from longitude and latitude.
    Radius,
    /// GEORADIUSBYMEMBER: centre from a member.
    RadiusByMember,
    /// GEOSEARCH.
    Search,
    /// GEOSEARCHSTORE.
    SearchStore,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Sort {
    None,
    Asc,
    Desc,
}

/// A parsed request.
struct Request {
    shape: Option<Shape>,
    centre: Option<(f64, f64)>,
    extent: Option<(Extent, f64)>,
    sort: Sort,
    count: usize,
    any: bool,
    with_dist: bool,
    with_hash: bool,
    with_coord: bool,
    store: Option<usize>,
    store_dist: bool,
}

/// One point found.
struct Found {
    member: Vec<u8>,
    lon: f64,
    lat: f64,
    dist_m: f64,
    score: f64,
}

pub(in crate::commands) fn georadius(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    generic(ctx, args, Kind::Radius, false)
}

pub(in crate::commands) fn georadius_ro(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    generic(ctx, args, Kind::Radius, true)
}

pub(in crate::commands) fn georadiusbymember(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    generic(ctx, args, Kind::RadiusByMember, false)
}

pub(in crate::commands) fn georadiusbymember_ro(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    generic(ctx, args, Kind::RadiusByMember, true)
}

pub(in crate::commands) fn geosearch(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    generic(ctx, args, Kind::Search, true)
}

pub(in crate::commands) fn geosearchstore(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    generic(ctx, args, Kind::SearchStore, true)
}

/// The position of `member` in `z`, or Redis's error.
fn member_position(z: &ZSet, member: &[u8]) -> Result<(f64, f64), CmdError> {
    z.score(member)
        .and_then(geohash::position_of)
        .ok_or(Cow::Borrowed("ERR could not decode requested zset member"))
}

/// A radius and unit from two arguments.
fn radius_extent(args: &Args<'_>, at: usize) -> Result<(Extent, f64), CmdError> {
    let r = float_arg(args.get(at), "ERR need numeric radius")?;
    if r < 0.0 {
        return Err(Cow::Borrowed("ERR radius cannot be negative"));
    }
    Ok((Extent::Radius(r), unit_m(args.get(at + 1))?))
}

/// A width, height and unit from three arguments.
fn box_extent(args: &Args<'_>, at: usize) -> Result<(Extent, f64), CmdError> {
    let width = float_arg(args.get(at), "ERR need numeric width")?;
    let height = float_arg(args.get(at + 1), "ERR need numeric height")?;
    if height < 0.0 || width < 0.0 {
        return Err(Cow::Borrowed("ERR height or width cannot be negative"));
    }
    Ok((Extent::Box { width, height }, unit_m(args.get(at + 2))?))
}

/// Parses the fixed arguments of `kind`; returns where options start.
fn fixed_arguments(
    args: &Args<'_>,
    kind: Kind,
    z: Option<&ZSet>,
    req: &mut Request,
) -> Result<usize, CmdError> {
    match kind {
        Kind::Radius => {
            req.centre = Some(lon_lat(args.get(2), args.get(3))?);
            req.extent = Some(radius_extent(args, 4)?);
            Ok(6)
        }
        Kind::RadiusByMember => {
            if let Some(z) = z {
                req.centre = Some(member_position(z, args.get(2))?);
                req.extent = Some(radius_extent(args, 3)?);
            }
            Ok(5)
        }
        Kind::Search => Ok(2),
        Kind::SearchStore => {
            req.store = Some(1);
            Ok(3)
        }
    }
}

/// Parses the options from `base` on, in Redis's order of checks.
fn options(
    args: &Args<'_>,
    kind: Kind,
    read_only: bool,
    z: Option<&ZSet>,
    base: usize,
    req: &mut Request,
) -> CmdResult {
    let searching = matches!(kind, Kind::Search | Kind::SearchStore);
    let may_store = !read_only && !searching;
    let (mut from_member, mut from_lonlat, mut by_radius, mut by_box) =
        (false, false, false, false);
    let remaining = args.len() - base;
    let mut i = 0;
    while i < remaining {
        let at = base + i;
        match args.get(at).to_ascii_lowercase().as_slice() {
            b"withdist" => req.with_dist = true,
            b"withhash" => req.with_hash = true,
            b"withcoord" => req.with_coord = true,
            b"any" => req.any = true,
            b"asc" => req.sort = Sort::Asc,
            b"desc" => req.sort = Sort::Desc,
            b"count" if i + 1 < remaining => {
                let n = int_arg(args, at + 1)?;
                if n <= 0 {
                    return Err(Cow::Borrowed("ERR COUNT must be > 0"));
                }
                req.count = usize::try_from(n).unwrap_or(usize::MAX);
                i += 1;
            }
            word @ (b"store" | b"storedist") if i + 1 < remaining && may_store => {
                req.store = Some(at + 1);
                req.store_dist = word == b"storedist";
                i += 1;
            }
            b"storedist" if kind == Kind::SearchStore => req.store_dist = true,
            b"frommember" if i + 1 < remaining && searching && !from_lonlat => {
                if let Some(z) = z {
                    req.centre = Some(member_position(z, args.get(at + 1))?);
                }
                from_member = true;
                i += 1;
            }
            b"fromlonlat" if i + 2 < remaining && searching && !from_member => {
                req.centre = Some(lon_lat(args.get(at + 1), args.get(at + 2))?);
                from_lonlat = true;
                i += 2;
            }
            b"byradius" if i + 2 < remaining && searching && !by_box => {
                req.extent = Some(radius_extent(args, at + 1)?);
                by_radius = true;
                i += 2;
            }
            b"bybox" if i + 3 < remaining && searching && !by_radius => {
                req.extent = Some(box_extent(args, at + 1)?);
                by_box = true;
                i += 3;
            }
            _ => return Err(Cow::Borrowed(errors::SYNTAX)),
        }
        i += 1;
    }
    let centre_given = from_member || from_lonlat;
    let extent_given = by_radius || by_box;
    check_request(args, kind, req, centre_given, extent_given)
}

/// The checks Redis makes once the options are read, in its order.
fn check_request(
    args: &Args<'_>,
    kind: Kind,
    req: &Request,
    centre_given: bool,
    extent_given: bool,
) -> CmdResult {
    let searching = matches!(kind, Kind::Search | Kind::SearchStore);
    if req.store.is_some() && (req.with_dist || req.with_hash || req.with_coord) {
        let what = if kind == Kind::SearchStore {
            "GEOSEARCHSTORE"
        } else {
            "STORE option in GEORADIUS"
        };
        return Err(Cow::Owned(format!(
            "ERR {what} is not compatible with WITHDIST, WITHHASH and WITHCOORD options"
        )));
    }
    let name = String::from_utf8_lossy(args.get(0));
    if searching && !centre_given {
        return Err(Cow::Owned(format!(
            "ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for {name}"
        )));
    }
    if searching && !extent_given {
        return Err(Cow::Owned(format!(
            "ERR exactly one of BYRADIUS and BYBOX can be specified for {name}"
        )));
    }
    if req.any && req.count == 0 {
        return Err(Cow::Borrowed(
            "ERR the ANY argument requires COUNT argument",
        ));
    }
    Ok(())
}

fn generic(ctx: &mut Ctx<'_>, args: &Args<'_>, kind: Kind, read_only: bool) -> CmdResult {
    let source = if kind == Kind::SearchStore { 2 } else { 1 };
    let z = zset_at(ctx, args.get(source))?;
    let mut req = Request {
        shape: None,
        centre: None,
        extent: None,
        sort: Sort::None,
        count: 0,
        any: false,
        with_dist: false,
        with_hash: false,
        with_coord: false,
        store: None,
        store_dist: false,
    };
    let base = fixed_arguments(args, kind, z.as_deref(), &mut req)?;
    options(args, kind, read_only, z.as_deref(), base, &mut req)?;
    let (Some(z), Some(centre), Some((extent, unit))) = (z, req.centre, req.extent) else {
        return missing_source(ctx, args, &req);
    };
    req.shape = Some(shape(centre, extent, unit));
    if req.count != 0 && req.sort == Sort::None && !req.any {
        req.sort = Sort::Asc;
    }
    let mut found = find(&z, &req);
    if found.is_empty() && req.store.is_none() {
        ctx.reply.array(0);
        return Ok(());
    }
    if req.sort != Sort::None {
        let desc = req.sort == Sort::Desc;
        if req.count == 0 || req.count >= found.len() {
            // Redis sorts everything with the C library's qsort, a stable
            // merge sort in glibc.
            found.sort_by(|a, b| by_distance(a, b, desc).cmp(&0));
        } else {
            partial_sort(&mut found, req.count, desc);
        }
    }
    if req.count != 0 {
        found.truncate(req.count);
    }
    for f in &mut found {
        f.dist_m /= unit;
    }
    match req.store {
        None => reply_found(ctx, &req, &found),
        Some(at) => {
            let event = if kind == Kind::SearchStore {
                "geosearchstore"
            } else {
                "georadiusstore"
            };
            store_found(ctx, args, (&req, at, event), found);
        }
    }
    Ok(())
}

/// The reply when the source key does not exist: the destination (if
/// any) is deleted and 0 returned, else an empty array.
fn missing_source(ctx: &mut Ctx<'_>, args: &Args<'_>, req: &Request) -> CmdResult {
    match req.store {
        Some(at) => {
            if ctx
                .state
                .keyspace
                .remove(ctx.session.db, args.get(at))
                .is_some()
            {
                ctx.notify(GENERIC, "del", args.get(at));
                ctx.propagate_args(args);
            }
            ctx.reply.int(0);
        }
        None => ctx.reply.array(0),
    }
    Ok(())
}

/// The points inside the shape, cell by cell in Redis's order (stopping
/// at COUNT with ANY).
fn find(z: &ZSet, req: &Request) -> Vec<Found> {
    let Some(shape) = req.shape else {
        return Vec::new();
    };
    let limit = if req.any { req.count } else { 0 };
    let full = |found: &Vec<Found>| limit != 0 && found.len() >= limit;
    let cells = geohash::search_cells(&shape);
    let mut found = Vec::new();
    let mut last = 0usize;
    for (i, &cell) in cells.iter().enumerate() {
        if geohash::is_skipped(cell) {
            continue;
        }
        // Very large searches can repeat a cell: skip one equal to the
        // last read (Redis never compares with the centre's, index 0).
        if last != 0 && cell == cells[last] {
            continue;
        }
        if full(&found) {
            break;
        }
        let (min, max) = geohash::cell_scores(cell);
        let range = z.range_by_score(
            ScoreBound {
                value: min as f64,
                exclusive: false,
            },
            ScoreBound {
                value: max as f64,
                exclusive: true,
            },
        );
        for (member, score) in range {
            let inside = geohash::position_of(score)
                .and_then(|(lon, lat)| Some((lon, lat, shape.contains(lon, lat)?)));
            if let Some((lon, lat, dist_m)) = inside {
                found.push(Found {
                    member: member.to_vec(),
                    lon,
                    lat,
                    dist_m,
                    score,
                });
            }
            if full(&found) {
                break;
            }
        }
        last = i;
    }
    found
}

fn reply_found(ctx: &mut Ctx<'_>, req: &Request, found: &[Found]) {
    let extras =
        usize::from(req.with_dist) + usize::from(req.with_hash) + usize::from(req.with_coord);
    ctx.reply.array(found.len());
    for f in found {
        if extras > 0 {
            ctx.reply.array(extras + 1);
        }
        ctx.reply.bulk(&f.member);
        if req.with_dist {
            ctx.reply.bulk(format_distance(f.dist_m).as_bytes());
        }
        if req.with_hash {
            ctx.reply.int(f.score as i64);
        }
        if req.with_coord {
            ctx.reply.array(2);
            reply_coordinate(ctx, f.lon);
            reply_coordinate(ctx, f.lat);
        }
    }
}

/// Stores the points found at argument `at` (scores, or distances for
/// STOREDIST), or deletes it when nothing was found; logs the command
/// when the destination changed.
fn store_found(
    ctx: &mut Ctx<'_>,
    args: &Args<'_>,
    (req, at, event): (&Request, usize, &'static str),
    found: Vec<Found>,
) {
    let (db, dest) = (ctx.session.db, args.get(at));
    let stored = found.len();
    let changed = if found.is_empty() {
        ctx.state.keyspace.remove(db, dest).is_some()
    } else {
        let mut z = ZSet::default();
        for f in found {
            z.insert(&f.member, if req.store_dist { f.dist_m } else { f.score });
        }
        ctx.state
            .keyspace
            .set(db, dest, Value::ZSet(Shared::new(z)), false);
        true
    };
    if stored > 0 {
        ctx.notify(ZSET, event, dest);
    } else if changed {
        ctx.notify(GENERIC, "del", dest);
    }
    if changed {
        ctx.propagate_args(args);
    }
    ctx.reply.int(stored as i64);
}

/// Redis's comparison of two points: -1, 0 or 1 by distance (reversed for
/// DESC).
fn by_distance(a: &Found, b: &Found, desc: bool) -> i32 {
    let order = if a.dist_m > b.dist_m {
        1
    } else if a.dist_m == b.dist_m {
        0
    } else {
        -1
    };
    if desc {
        -order
    } else {
        order
    }
}

/// Sorts the first `count` points into place the way Redis's partial
/// quicksort (`pqsort`, after Bentley and McIlroy's) does, so that points
/// at equal distances come out in Redis's order when COUNT cuts the list.
fn partial_sort(v: &mut [Found], count: usize, desc: bool) {
    let wanted = (0, count.saturating_sub(1));
    partial_sort_range(v, 0, v.len(), wanted, desc);
}

/// Whether the elements `start..start + len` overlap the wanted ranks.
fn overlaps(start: usize, len: usize, wanted: (usize, usize)) -> bool {
    let end = start + len;
    !((wanted.0 < start && wanted.1 < start) || (wanted.0 >= end && wanted.1 >= end))
}

/// The median of elements `x`, `y` and `z`, as Redis's `med3` picks it.
fn median(v: &[Found], x: usize, y: usize, z: usize, desc: bool) -> usize {
    let cmp = |i: usize, j: usize| by_distance(&v[i], &v[j], desc);
    if cmp(x, y) < 0 {
        if cmp(y, z) < 0 {
            y
        } else if cmp(x, z) < 0 {
            z
        } else {
            x
        }
    } else if cmp(y, z) > 0 {
        y
    } else if cmp(x, z) < 0 {
        x
    } else {
        z
    }
}

/// The pivot of `n` elements from `a`: the middle one, the median of
/// three above 7 elements, the median of three medians above 40.
fn pivot(v: &[Found], a: usize, n: usize, desc: bool) -> usize {
    let mut pm = a + n / 2;
    if n > 7 {
        let (mut pl, mut pn) = (a, a + n - 1);
        if n > 40 {
            let d = n / 8;
            pl = median(v, pl, pl + d, pl + 2 * d, desc);
            pm = median(v, pm - d, pm, pm + d, desc);
            pn = median(v, pn - 2 * d, pn - d, pn, desc);
        }
        pm = median(v, pl, pm, pn, desc);
    }
    pm
}

/// Splits `n` elements from `a` around the pivot at `a` into
/// `[equal | less | unsorted | greater | equal]`; returns the ends
/// `(pa, pb, pc, pd)` of Bentley and McIlroy's partition.
fn partition(v: &mut [Found], a: usize, n: usize, desc: bool) -> (usize, usize, usize, usize) {
    let cmp = |v: &[Found], i: usize, j: usize| by_distance(&v[i], &v[j], desc);
    let (mut pa, mut pb) = (a + 1, a + 1);
    let (mut pc, mut pd) = (a + n - 1, a + n - 1);
    loop {
        while pb <= pc {
            let c = cmp(v, pb, a);
            if c > 0 {
                break;
            }
            if c == 0 {
                v.swap(pa, pb);
                pa += 1;
            }
            pb += 1;
        }
        while pb <= pc {
            let c = cmp(v, pc, a);
            if c < 0 {
                break;
            }
            if c == 0 {
                v.swap(pc, pd);
                pd -= 1;
            }
            pc -= 1;
        }
        if pb > pc {
            return (pa, pb, pc, pd);
        }
        v.swap(pb, pc);
        pb += 1;
        pc -= 1;
    }
}

fn partial_sort_range(
    v: &mut [Found],
    mut a: usize,
    mut n: usize,
    wanted: (usize, usize),
    desc: bool,
) {
    loop {
        if n < 7 {
            for m in a + 1..a + n {
                let mut l = m;
                while l > a && by_distance(&v[l - 1], &v[l], desc) > 0 {
                    v.swap(l, l - 1);
                    l -= 1;
                }
            }
            return;
        }
        let pm = pivot(v, a, n, desc);
        v.swap(a, pm);
        let (pa, pb, pc, pd) = partition(v, a, n, desc);
        // Move the runs equal to the pivot from both ends to the middle.
        let pn = a + n;
        let r = (pa - a).min(pb - pa);
        swap_blocks(v, a, pb - r, r);
        let r = (pd - pc).min(pn - pd - 1);
        swap_blocks(v, pb, pn - r, r);
        // Sort only the sides that hold wanted ranks.
        let r = pb - pa;
        if r > 1 && overlaps(a, r, wanted) {
            partial_sort_range(v, a, r, wanted, desc);
        }
        let r = pd - pc;
        if r <= 1 {
            return;
        }
        a = pn - r;
        n = r;
        if !overlaps(a, n, wanted) {
            return;
        }
    }
}

/// Swaps the `n` elements from `x` with the `n` from `y`, pairwise.
fn swap_blocks(v: &mut [Found], x: usize, y: usize, n: usize) {
    for i in 0..n {
        v.swap(x + i, y + i);
    }
}
