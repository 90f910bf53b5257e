//! Geohashes as Redis computes them for its geo commands, bit for bit, so
//! that scores, GEOHASH strings, distances and search results match.
//!
//! A position is a 52-bit score: longitude and latitude each scaled to 26
//! bits over their range (longitude -180..180, latitude
//! -85.05112878..85.05112878, the Web Mercator limits), then interleaved,
//! latitude in the even bits and longitude in the odd ones. Decoding
//! gives the centre of the cell. A search covers the shape with the cell
//! holding its centre and that cell's eight neighbours at a precision
//! chosen from the shape's size, reads each cell's score range from the
//! sorted set, and keeps the points inside the shape. Distances use the
//! haversine formula on a sphere of radius 6372797.560856 m.

use std::f64::consts::PI;

/// Southernmost latitude that can be encoded.
pub const LAT_MIN: f64 = -85.051_128_78;
/// Northernmost latitude that can be encoded.
pub const LAT_MAX: f64 = 85.051_128_78;
/// Westernmost longitude.
pub const LON_MIN: f64 = -180.0;
/// Easternmost longitude.
pub const LON_MAX: f64 = 180.0;
/// Bits per coordinate in a stored score.
pub const STEP_MAX: u8 = 26;
/// The Earth's radius used for distances, in metres.
pub const EARTH_RADIUS_M: f64 = 6_372_797.560_856;
/// Half the Web Mercator world's width, in metres.
const MERCATOR_MAX: f64 = 20_037_726.37;
/// Degrees to radians.
const DEG_TO_RAD: f64 = PI / 180.0;

/// A geohash: `step` bits per coordinate, interleaved in `bits`. The
/// all-zero hash (step 0) marks a neighbour left out of a search.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Hash {
    /// The interleaved bits.
    pub bits: u64,
    /// Bits per coordinate.
    pub step: u8,
}

impl Hash {
    fn is_zero(self) -> bool {
        self.bits == 0 && self.step == 0
    }
}

/// A range of one coordinate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Range {
    /// Lower end.
    pub min: f64,
    /// Upper end.
    pub max: f64,
}

/// The ranges a score's coordinates are scaled over.
const LON_RANGE: Range = Range {
    min: LON_MIN,
    max: LON_MAX,
};
const LAT_RANGE: Range = Range {
    min: LAT_MIN,
    max: LAT_MAX,
};

/// The cell a hash names.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Area {
    lon: Range,
    lat: Range,
}

/// Spreads the 32 bits of `even` over the even bit positions and those of
/// `odd` over the odd ones.
fn interleave(even: u32, odd: u32) -> u64 {
    let mut out = 0u64;
    for i in 0..32 {
        out |= u64::from((even >> i) & 1) << (2 * i);
        out |= u64::from((odd >> i) & 1) << (2 * i + 1);
    }
    out
}

/// The inverse of [`interleave`]: (even bits, odd bits).
fn deinterleave(bits: u64) -> (u32, u32) {
    let (mut even, mut odd) = (0u32, 0u32);
    for i in 0..32 {
        even |= (((bits >> (2 * i)) & 1) as u32) << i;
        odd |= (((bits >> (2 * i + 1)) & 1) as u32) << i;
    }
    (even, odd)
}

/// Encodes a position over the given ranges; `None` outside the
/// encodable limits or the ranges.
fn encode(lon_range: Range, lat_range: Range, lon: f64, lat: f64, step: u8) -> Option<Hash> {
    if step == 0 || step > 32 {
        return None;
    }
    if !(LON_MIN..=LON_MAX).contains(&lon) || !(LAT_MIN..=LAT_MAX).contains(&lat) {
        return None;
    }
    if lat < lat_range.min || lat > lat_range.max || lon < lon_range.min || lon > lon_range.max {
        return None;
    }
    let scale = (1u64 << step) as f64;
    let lat_offset = (lat - lat_range.min) / (lat_range.max - lat_range.min) * scale;
    let lon_offset = (lon - lon_range.min) / (lon_range.max - lon_range.min) * scale;
    Some(Hash {
        bits: interleave(lat_offset as u32, lon_offset as u32),
        step,
    })
}

/// The cell of a hash over the given ranges.
fn decode(lon_range: Range, lat_range: Range, hash: Hash) -> Option<Area> {
    if hash.is_zero() {
        return None;
    }
    let (lat_cell, lon_cell) = deinterleave(hash.bits);
    let cells = (1u64 << hash.step) as f64;
    let lat_scale = lat_range.max - lat_range.min;
    let lon_scale = lon_range.max - lon_range.min;
    let end = |min: f64, cell: u32, scale: f64| min + (f64::from(cell) / cells) * scale;
    let end_after =
        |min: f64, cell: u32, scale: f64| min + ((u64::from(cell) + 1) as f64 / cells) * scale;
    Some(Area {
        lat: Range {
            min: end(lat_range.min, lat_cell, lat_scale),
            max: end_after(lat_range.min, lat_cell, lat_scale),
        },
        lon: Range {
            min: end(lon_range.min, lon_cell, lon_scale),
            max: end_after(lon_range.min, lon_cell, lon_scale),
        },
    })
}

/// The score of a position: its 26-bit-per-coordinate hash. `None` for a
/// position outside the encodable limits.
pub fn score_of(lon: f64, lat: f64) -> Option<u64> {
    encode(LON_RANGE, LAT_RANGE, lon, lat, STEP_MAX).map(align52)
}

/// A hash shifted to the 52 bits of a score.
fn align52(hash: Hash) -> u64 {
    hash.bits << (52 - u32::from(hash.step) * 2)
}

/// A score's bits as Redis's C cast of a double to a 64-bit unsigned
/// integer gives them on x86-64, so that a score no GEOADD made (negative,
/// or 2^64 and above) decodes where Redis decodes it: a negative score
/// wraps around, and one too large for the conversion reads as zero.
fn score_bits(score: f64) -> u64 {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if score < TWO_63 {
        // Below -2^63 (and NaN) the conversion yields 2^63, which
        // `i64::MIN` is.
        let signed = if score.is_nan() {
            i64::MIN
        } else {
            score as i64
        };
        signed as u64
    } else {
        let rest = score - TWO_63;
        if rest < TWO_63 {
            (rest as i64 as u64) ^ (1 << 63)
        } else {
            0
        }
    }
}

/// The position (longitude, latitude) a score stands for: the centre of
/// its cell, clamped to the encodable limits.
pub fn position_of(score: f64) -> Option<(f64, f64)> {
    let hash = Hash {
        bits: score_bits(score),
        step: STEP_MAX,
    };
    let area = decode(LON_RANGE, LAT_RANGE, hash)?;
    let lon = ((area.lon.min + area.lon.max) / 2.0).clamp(LON_MIN, LON_MAX);
    let lat = ((area.lat.min + area.lat.max) / 2.0).clamp(LAT_MIN, LAT_MAX);
    Some((lon, lat))
}

/// The standard 11-character geohash of a score (latitude over -90..90,
/// as geohash.org has it; the last character stands for bits the score
/// does not have).
pub fn geohash_string(score: f64) -> Option<[u8; 11]> {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let (lon, lat) = position_of(score)?;
    let standard_lat = Range {
        min: -90.0,
        max: 90.0,
    };
    let bits = encode(LON_RANGE, standard_lat, lon, lat, STEP_MAX).map_or(0, |h| h.bits);
    let mut out = [b'0'; 11];
    for (i, c) in out.iter_mut().enumerate().take(10) {
        *c = ALPHABET[((bits >> (52 - (i + 1) * 5)) & 0x1f) as usize];
    }
    Some(out)
}

/// The distance in metres along a meridian between two latitudes.
pub fn lat_distance(lat1: f64, lat2: f64) -> f64 {
    EARTH_RADIUS_M * (lat2 * DEG_TO_RAD - lat1 * DEG_TO_RAD).abs()
}

/// The great-circle distance in metres between two positions.
pub fn distance(lon1: f64, lat1: f64, lon2: f64, lat2: f64) -> f64 {
    let (lon1r, lon2r) = (lon1 * DEG_TO_RAD, lon2 * DEG_TO_RAD);
    let v = ((lon2r - lon1r) / 2.0).sin();
    if v == 0.0 {
        return lat_distance(lat1, lat2);
    }
    let (lat1r, lat2r) = (lat1 * DEG_TO_RAD, lat2 * DEG_TO_RAD);
    let u = ((lat2r - lat1r) / 2.0).sin();
    let a = u * u + lat1r.cos() * lat2r.cos() * v * v;
    2.0 * EARTH_RADIUS_M * a.sqrt().asin()
}

/// What a search covers.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Extent {
    /// A circle of this radius (in the search's unit).
    Radius(f64),
    /// A box this wide (east-west) and high (north-south).
    Box {
        /// Width in the search's unit.
        width: f64,
        /// Height in the search's unit.
        height: f64,
    },
}

/// A search shape: centre, extent, and the unit's size in metres.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shape {
    /// Centre longitude.
    pub lon: f64,
    /// Centre latitude.
    pub lat: f64,
    /// The extent, in units.
    pub extent: Extent,
    /// Metres per unit.
    pub unit_m: f64,
}

impl Shape {
    /// The distance in metres from the centre to a point inside the
    /// shape; `None` outside it.
    pub fn contains(&self, lon: f64, lat: f64) -> Option<f64> {
        match self.extent {
            Extent::Radius(radius) => {
                let d = distance(self.lon, self.lat, lon, lat);
                (d <= radius * self.unit_m).then_some(d)
            }
            Extent::Box { width, height } => {
                if lat_distance(lat, self.lat) > height * self.unit_m / 2.0 {
                    return None;
                }
                if distance(lon, lat, self.lon, lat) > width * self.unit_m / 2.0 {
                    return None;
                }
                Some(distance(self.lon, self.lat, lon, lat))
            }
        }
    }

    /// Half the height and half the width in metres (the radius twice for
    /// a circle).
    fn half_extent_m(&self) -> (f64, f64) {
        match self.extent {
            Extent::Radius(r) => (r * self.unit_m, r * self.unit_m),
            Extent::Box { width, height } => {
                (self.unit_m * (height / 2.0), self.unit_m * (width / 2.0))
            }
        }
    }

    /// West, south, east and north ends of the box around the shape.
    fn bounds(&self) -> [f64; 4] {
        let (height, width) = self.half_extent_m();
        let lat_delta = height / EARTH_RADIUS_M / DEG_TO_RAD;
        let lon_delta_top =
            width / EARTH_RADIUS_M / ((self.lat + lat_delta) * DEG_TO_RAD).cos() / DEG_TO_RAD;
        let lon_delta_bottom =
            width / EARTH_RADIUS_M / ((self.lat - lat_delta) * DEG_TO_RAD).cos() / DEG_TO_RAD;
        // The box is widest on its side nearer the pole.
        let lon_delta = if self.lat < 0.0 {
            lon_delta_bottom
        } else {
            lon_delta_top
        };
        [
            self.lon - lon_delta,
            self.lat - lat_delta,
            self.lon + lon_delta,
            self.lat + lat_delta,
        ]
    }

    /// The radius of the circle around the shape, in metres.
    fn radius_m(&self) -> f64 {
        match self.extent {
            Extent::Radius(r) => r * self.unit_m,
            Extent::Box { width, height } => {
                ((width / 2.0) * (width / 2.0) + (height / 2.0) * (height / 2.0)).sqrt()
                    * self.unit_m
            }
        }
    }
}

/// The precision (bits per coordinate) whose cells are about as large as
/// a search of `radius_m` metres at latitude `lat`.
fn steps_for_radius(mut radius_m: f64, lat: f64) -> u8 {
    if radius_m == 0.0 {
        return STEP_MAX;
    }
    let mut step: i32 = 1;
    while radius_m < MERCATOR_MAX {
        radius_m *= 2.0;
        step += 1;
    }
    // Two less so the range fits in most cases; cells shrink towards the
    // poles, so one or two less again there.
    step -= 2;
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    step.clamp(1, i32::from(STEP_MAX)) as u8
}

/// Moves a hash one cell along longitude (`east`) or latitude (`north`),
/// wrapping around at the ends.
fn step_cell(hash: Hash, forward: bool, along_lon: bool) -> Hash {
    const ODD: u64 = 0xaaaa_aaaa_aaaa_aaaa;
    const EVEN: u64 = 0x5555_5555_5555_5555;
    let shift = 64 - u32::from(hash.step) * 2;
    let (moving_mask, other_mask) = if along_lon { (ODD, EVEN) } else { (EVEN, ODD) };
    let mut moving = hash.bits & moving_mask;
    let other = hash.bits & other_mask;
    // Filling the other coordinate's bits with ones makes the carry or
    // borrow run across them.
    let fill = other_mask >> shift;
    if forward {
        moving = moving.wrapping_add(fill + 1);
    } else {
        moving = (moving | fill).wrapping_sub(fill + 1);
    }
    moving &= moving_mask >> shift;
    Hash {
        bits: moving | other,
        step: hash.step,
    }
}

/// A cell moved by `dx` cells east and `dy` cells north (each -1, 0, 1).
fn neighbour(hash: Hash, dx: i8, dy: i8) -> Hash {
    let mut h = hash;
    if dx != 0 {
        h = step_cell(h, dx > 0, true);
    }
    if dy != 0 {
        h = step_cell(h, dy > 0, false);
    }
    h
}

/// The cells a search reads, in Redis's order: the centre's cell, then
/// north, south, east, west, north-east, north-west, south-east,
/// south-west. Cells that cannot hold a match are zero ([`Hash::default`]).
pub fn search_cells(shape: &Shape) -> [Hash; 9] {
    let [min_lon, min_lat, max_lon, max_lat] = shape.bounds();
    let mut steps = steps_for_radius(shape.radius_m(), shape.lat);
    let cells_at = |steps: u8| -> Option<(Hash, [Hash; 9])> {
        let centre = encode(LON_RANGE, LAT_RANGE, shape.lon, shape.lat, steps)?;
        let moves: [(i8, i8); 9] = [
            (0, 0),
            (0, 1),
            (0, -1),
            (1, 0),
            (-1, 0),
            (1, 1),
            (-1, 1),
            (1, -1),
            (-1, -1),
        ];
        Some((centre, moves.map(|(dx, dy)| neighbour(centre, dx, dy))))
    };
    let Some((_, mut cells)) = cells_at(steps) else {
        return [Hash::default(); 9];
    };
    let area = |h: Hash| decode(LON_RANGE, LAT_RANGE, h);
    let too_small = match (
        area(cells[1]),
        area(cells[2]),
        area(cells[3]),
        area(cells[4]),
    ) {
        (Some(n), Some(s), Some(e), Some(w)) => {
            n.lat.max < max_lat || s.lat.min > min_lat || e.lon.max < max_lon || w.lon.min > min_lon
        }
        _ => false,
    };
    if steps > 1 && too_small {
        steps -= 1;
        if let Some((_, c)) = cells_at(steps) {
            cells = c;
        }
    }
    if steps >= 2 {
        if let Some(centre) = area(cells[0]) {
            let mut drop =
                |indexes: [usize; 3]| indexes.iter().for_each(|&i| cells[i] = Hash::default());
            if centre.lat.min < min_lat {
                drop([2, 7, 8]);
            }
            if centre.lat.max > max_lat {
                drop([1, 5, 6]);
            }
            if centre.lon.min < min_lon {
                drop([4, 8, 6]);
            }
            if centre.lon.max > max_lon {
                drop([3, 7, 5]);
            }
        }
    }
    cells
}

/// The scores a cell covers: `min..max`, `max` excluded.
pub fn cell_scores(hash: Hash) -> (u64, u64) {
    let next = Hash {
        bits: hash.bits + 1,
        step: hash.step,
    };
    (align52(hash), align52(next))
}

/// Whether a cell is one a search skips (zeroed by [`search_cells`]).
pub fn is_skipped(hash: Hash) -> bool {
    hash.is_zero()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interleaving_round_trips() {
        for (a, b) in [
            (0u32, 0u32),
            (1, 0),
            (0, 1),
            (0x3ff_ffff, 0x123_4567),
            (u32::MAX, 7),
        ] {
            assert_eq!(deinterleave(interleave(a, b)), (a, b));
        }
    }

    #[test]
    fn scores_and_geohashes_are_redis_values() {
        // Values real Redis 7.0 gives for these positions.
        assert_eq!(
            score_of(-73.9454966, 40.747533),
            Some(1_791_875_804_419_201)
        );
        assert_eq!(score_of(13.361389, 38.115556), Some(3_479_099_956_230_698));
        assert_eq!(
            &geohash_string(score_of(-5.6, 42.6).unwrap() as f64).unwrap(),
            b"ezs42e44yx0"
        );
        assert_eq!(score_of(181.0, 0.0), None);
        assert_eq!(score_of(0.0, 85.06), None);
    }

    #[test]
    fn a_decoded_position_is_near_the_encoded_one() {
        let (lon, lat) = position_of(score_of(13.361389, 38.115556).unwrap() as f64).unwrap();
        assert!((lon - 13.361389).abs() < 1e-5 && (lat - 38.115556).abs() < 1e-5);
        let d = distance(13.361389, 38.115556, 15.087269, 37.502669);
        assert!((166_274.0..166_275.0).contains(&d), "{d}");
    }
}
