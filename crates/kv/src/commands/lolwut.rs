//! LOLWUT: the computer art Redis draws for its version. `VERSION 5`
//! draws Georg Nees's "Schotter" (rows of squares rotated and displaced
//! more the lower they are) in Unicode Braille cells; `VERSION 6` draws a
//! city skyline in four shades of grey with ANSI colours; any other
//! version (7.0's default) answers with the version line alone. Every
//! drawing is random, as Redis's is, so only its shape is fixed: the canvas
//! size follows the arguments (clamped to Redis's limits so the command
//! stays cheap) and the text ends with the credit line Redis prints.

use std::f64::consts::PI;

use super::table::*;
use super::{acl, int_arg, upper, CmdResult, Ctx, REDIS_VERSION};
use crate::resp::Args;

/// A grid of small colour indices (0..=3), as wide and tall as asked.
struct Canvas {
    width: i64,
    height: i64,
    pixels: Vec<u8>,
}

impl Canvas {
    fn new(width: i64, height: i64, background: u8) -> Canvas {
        let cells = usize::try_from(width.max(0) * height.max(0)).unwrap_or(0);
        Canvas {
            width,
            height,
            pixels: vec![background; cells],
        }
    }

    fn index(&self, x: i64, y: i64) -> Option<usize> {
        if x < 0 || y < 0 || x >= self.width || y >= self.height {
            return None;
        }
        usize::try_from(x + y * self.width).ok()
    }

    /// Sets a pixel; points outside the canvas are clipped.
    fn set(&mut self, x: i64, y: i64, colour: u8) {
        if let Some(i) = self.index(x, y) {
            self.pixels[i] = colour;
        }
    }

    /// A pixel's colour; outside the canvas reads as 0.
    fn get(&self, x: i64, y: i64) -> u8 {
        self.index(x, y).map_or(0, |i| self.pixels[i])
    }

    /// A straight line by Bresenham's integer stepping.
    fn line(&mut self, (mut x, mut y): (i64, i64), (x2, y2): (i64, i64), colour: u8) {
        let (dx, dy) = ((x2 - x).abs(), (y2 - y).abs());
        let (sx, sy) = (if x < x2 { 1 } else { -1 }, if y < y2 { 1 } else { -1 });
        let mut err = dx - dy;
        loop {
            self.set(x, y, colour);
            if x == x2 && y == y2 {
                return;
            }
            let doubled = err * 2;
            if doubled > -dy {
                err -= dy;
                x += sx;
            }
            if doubled < dx {
                err += dx;
                y += sy;
            }
        }
    }

    /// The outline of a square of side `side` centred on (x, y), turned by
    /// `angle` radians: its corners lie on a circle, a quarter turn apart.
    fn square(&mut self, (x, y): (i64, i64), side: f32, angle: f32) {
        let radius = f64::from((side / std::f32::consts::SQRT_2).round());
        let mut corners = [(0i64, 0i64); 4];
        let mut k = f64::from((PI / 4.0) as f32 + angle);
        for corner in &mut corners {
            *corner = (
                (k.sin() * radius + x as f64).round() as i64,
                (k.cos() * radius + y as f64).round() as i64,
            );
            k += PI / 2.0;
        }
        for j in 0..4 {
            self.line(corners[j], corners[(j + 1) % 4], 1);
        }
    }
}

/// A uniform draw in [0, 1), and small integers, from the server's RNG.
struct Dice<F: FnMut() -> u64>(F);

impl<F: FnMut() -> u64> Dice<F> {
    fn unit(&mut self) -> f32 {
        ((self.0)() >> 40) as f32 / (1u64 << 24) as f32
    }

    fn below(&mut self, n: i64) -> i64 {
        if n <= 0 {
            return 0;
        }
        ((self.0)() % n as u64) as i64
    }

    fn coin(&mut self) -> bool {
        (self.0)() & 1 == 1
    }
}

/// Schotter: `per_row` x `per_col` squares on a canvas two pixels per
/// console column; from the third row down each square is turned and
/// shifted by random amounts that grow with its row.
fn schotter(dice: &mut Dice<impl FnMut() -> u64>, cols: i64, per_row: i64, per_col: i64) -> Canvas {
    let width = cols * 2;
    let padding = if width > 4 { 2 } else { 0 };
    let side = (width - padding * 2) as f32 / per_row as f32;
    let height = (side * per_col as f32) as i64 + padding * 2;
    let mut canvas = Canvas::new(width, height, 0);
    for row in 0..per_col {
        for column in 0..per_row {
            let mut cx = (column as f32 * side + side / 2.0) as i64 + padding;
            let mut cy = (row as f32 * side + side / 2.0) as i64 + padding;
            let mut angle = 0.0;
            if row > 1 {
                let spread = row as f32 / per_col as f32;
                let (mut turn, mut dx, mut dy) = (
                    dice.unit() * spread,
                    dice.unit() * spread,
                    dice.unit() * spread,
                );
                for v in [&mut turn, &mut dx, &mut dy] {
                    if dice.coin() {
                        *v = -*v;
                    }
                }
                angle = turn;
                cx += (dx * side / 3.0) as i64;
                cy += (dy * side / 3.0) as i64;
            }
            canvas.square((cx, cy), side, angle);
        }
    }
    canvas
}

/// Renders a two-colour canvas as Unicode Braille: each character is a
/// block two pixels wide and four tall, one dot per set pixel.
fn braille(canvas: &Canvas) -> String {
    // Braille dot order: dots 1-3 down the left column, 4-6 down the
    // right, then 7 and 8 on the bottom row.
    const DOTS: [(i64, i64); 8] = [
        (0, 0),
        (0, 1),
        (0, 2),
        (1, 0),
        (1, 1),
        (1, 2),
        (0, 3),
        (1, 3),
    ];
    let mut text = String::new();
    for y in (0..canvas.height).step_by(4) {
        for x in (0..canvas.width).step_by(2) {
            let mut bits = 0u32;
            for (bit, (dx, dy)) in DOTS.iter().enumerate() {
                if canvas.get(x + dx, y + dy) != 0 {
                    bits |= 1 << bit;
                }
            }
            text.push(char::from_u32(0x2800 + bits).unwrap_or(' '));
        }
        // As Redis: a line break after every band but one ending exactly
        // on the last pixel row.
        if y != canvas.height - 1 {
            text.push('\n');
        }
    }
    text
}

/// One building of the skyline: its left edge, size, colour, and whether
/// it has lit windows.
struct Building {
    left: i64,
    width: i64,
    height: i64,
    colour: u8,
    windows: bool,
}

fn draw_building(canvas: &mut Canvas, dice: &mut Dice<impl FnMut() -> u64>, b: &Building) {
    let bottom = canvas.height - 1;
    let top = bottom - b.height + 1;
    for y in (top..=bottom).rev() {
        for x in b.left..b.left + b.width {
            // The roof is two pixels narrower on each side.
            if y == top && (x <= b.left + 1 || x >= b.left + b.width - 2) {
                continue;
            }
            let mut colour = b.colour;
            let inner = x > b.left + 1 && x < b.left + b.width - 2 && y > top + 1 && y < bottom - 1;
            if b.windows && inner {
                let (relx, rely) = (x - (b.left + 1), y - (top + 1));
                // Windows are two pixels wide and one tall (terminal cells
                // are taller than wide), lit in either grey.
                if (relx / 2) % 2 == 1 && rely % 2 == 1 {
                    colour = if relx % 2 == 1 {
                        canvas.get(x - 1, y)
                    } else {
                        1 + dice.below(2) as u8
                    };
                }
            }
            canvas.set(x, y, colour);
        }
    }
}

/// A skyline: two rows of windowless buildings in the two greys (the
/// lighter behind), then black buildings with windows in front.
fn skyline(canvas: &mut Canvas, dice: &mut Dice<impl FnMut() -> u64>) {
    let h = canvas.height;
    for colour in [2u8, 1] {
        let mut offset = -10;
        while offset < canvas.width {
            offset += dice.below(8);
            let width = 10 + dice.below(9);
            let height = if colour == 2 {
                h / 2 + dice.below(h) / 2
            } else {
                h / 2 + dice.below(h) / 3
            };
            let b = Building {
                left: offset,
                width,
                height,
                colour,
                windows: false,
            };
            draw_building(canvas, dice, &b);
            offset += if colour == 2 { width / 2 } else { width + 1 };
        }
    }
    let mut offset = -10;
    while offset < canvas.width {
        offset += dice.below(8);
        let mut width = 5 + dice.below(14);
        if width % 4 != 0 {
            width += width % 3;
        }
        let height = h / 3 + dice.below(h) / 2;
        draw_building(
            canvas,
            dice,
            &Building {
                left: offset,
                width,
                height,
                colour: 0,
                windows: true,
            },
        );
        offset += width + 5;
    }
}

/// Renders a four-grey canvas with ANSI escapes, one space per pixel with
/// both foreground and background set, so terminals agree on the shade.
fn ansi(canvas: &Canvas) -> String {
    let mut text = String::new();
    for y in 0..canvas.height {
        for x in 0..canvas.width {
            let shade = match canvas.get(x, y) {
                1 => "0;90;100m",
                2 => "0;37;47m",
                3 => "0;97;107m",
                _ => "0;30;40m",
            };
            text.push_str("\x1b[");
            text.push_str(shade);
            text.push_str(" \x1b[0m");
        }
        if y != canvas.height - 1 {
            text.push('\n');
        }
    }
    text
}

/// Reads optional integer argument `at` (after VERSION, if given), clamped
/// to `lo..=hi`.
fn arg(args: &Args<'_>, at: usize, default: i64, lo: i64, hi: i64) -> Result<i64, super::CmdError> {
    if at >= args.len() {
        return Ok(default);
    }
    Ok(int_arg(args, at)?.clamp(lo, hi))
}

fn lolwut(ctx: &mut Ctx<'_>, args: &Args<'_>) -> CmdResult {
    // `VERSION n` picks the drawing; like Redis, n is read as an unsigned
    // 32-bit number, and the drawing's own arguments follow it.
    let (version, first) = if args.len() >= 3 && upper(args, 1) == b"VERSION" {
        (Some(int_arg(args, 2)? as u32), 3)
    } else {
        (None, 1)
    };
    let rng = &mut ctx.state.rng;
    let mut dice = Dice(|| rng.u64(..));
    let text = match version {
        Some(5) => {
            let cols = arg(args, first, 66, 1, 1000)?;
            let per_row = arg(args, first + 1, 8, 1, 200)?;
            let per_col = arg(args, first + 2, 12, 1, 200)?;
            let art = braille(&schotter(&mut dice, cols, per_row, per_col));
            format!("{art}\nGeorg Nees - schotter, plotter on paper, 1968. Redis ver. {REDIS_VERSION}\n")
        }
        Some(6) => {
            let cols = arg(args, first, 80, 1, 1000)?;
            let rows = arg(args, first + 1, 20, 1, 1000)?;
            let mut canvas = Canvas::new(cols, rows, 3);
            skyline(&mut canvas, &mut dice);
            format!(
                "{}\nDedicated to the 8 bit game developers of past and present.\nOriginal 8 bit image from Plaguemon by hikikomori. Redis ver. {REDIS_VERSION}\n",
                ansi(&canvas)
            )
        }
        _ => format!("Redis ver. {REDIS_VERSION}\n"),
    };
    ctx.reply.verbatim(&text);
    Ok(())
}

/// The commands this file implements.
#[rustfmt::skip]
pub(super) static COMMANDS: &[CommandSpec] = &[
    cmd!("lolwut", -1, READONLY | FAST, K0, "server", "Displays computer art and the Redis version", lolwut).with_acl(acl::bit("read")),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_horizontal_line_sets_every_pixel_between_its_ends() {
        let mut c = Canvas::new(5, 1, 0);
        c.line((0, 0), (4, 0), 1);
        assert_eq!(c.pixels, vec![1; 5]);
    }

    #[test]
    fn pixels_outside_the_canvas_are_clipped() {
        let mut c = Canvas::new(2, 2, 0);
        c.line((-3, -3), (5, 5), 1);
        assert_eq!(c.pixels, vec![1, 0, 0, 1]);
        assert_eq!(c.get(9, 9), 0);
    }

    #[test]
    fn braille_maps_each_dot_to_its_bit() {
        let mut c = Canvas::new(2, 4, 0);
        c.set(0, 0, 1);
        assert_eq!(braille(&c), "\u{2801}\n");
        c.set(1, 3, 1);
        assert_eq!(braille(&c), "\u{2881}\n");
    }
}
