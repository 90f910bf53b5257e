//! The five TPC-C transactions (clause 2.4 - 2.8), with the spec's input
//! rules. Writers begin with `BEGIN IMMEDIATE` (SQLite takes the write
//! lock up front, so two terminals never deadlock upgrading); readers with
//! a deferred `BEGIN`.

use anyhow::{Context, Result};
use rusqlite::{params, Connection, OptionalExtension};

use super::random::Rand;
use super::schema::DISTRICTS;

/// The transaction types, in mix order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    NewOrder,
    Payment,
    OrderStatus,
    Delivery,
    StockLevel,
}

impl Kind {
    /// Every kind (the mix test counts by it).
    #[cfg(test)]
    pub const ALL: [Kind; 5] = [
        Kind::NewOrder,
        Kind::Payment,
        Kind::OrderStatus,
        Kind::Delivery,
        Kind::StockLevel,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::NewOrder => "new_order",
            Kind::Payment => "payment",
            Kind::OrderStatus => "order_status",
            Kind::Delivery => "delivery",
            Kind::StockLevel => "stock_level",
        }
    }

    /// Picks a transaction by the mix 45/43/4/4/4 (clause 5.2.3 minimums).
    pub fn pick(rand: &mut Rand) -> Kind {
        match rand.uniform(1, 100) {
            1..=45 => Kind::NewOrder,
            46..=88 => Kind::Payment,
            89..=92 => Kind::OrderStatus,
            93..=96 => Kind::Delivery,
            _ => Kind::StockLevel,
        }
    }
}

/// The terminal's context: its home warehouse and the database size.
#[derive(Clone, Copy, Debug)]
pub struct Terminal {
    pub w_id: u64,
    pub warehouses: u64,
}

/// Whether a transaction committed or rolled back by design (the 1% of
/// New-Orders with an unused item).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Committed,
    RolledBack,
}

/// Runs one transaction of `kind`.
pub fn run(db: &Connection, kind: Kind, t: Terminal, rand: &mut Rand) -> Result<Outcome> {
    let result = match kind {
        Kind::NewOrder => new_order(db, t, rand),
        Kind::Payment => payment(db, t, rand).map(|()| Outcome::Committed),
        Kind::OrderStatus => order_status(db, t, rand).map(|()| Outcome::Committed),
        Kind::Delivery => delivery(db, t, rand).map(|()| Outcome::Committed),
        Kind::StockLevel => stock_level(db, t, rand).map(|()| Outcome::Committed),
    };
    if result.is_err() && !db.is_autocommit() {
        // Leave the connection usable; the caller decides whether to retry.
        let _ = db.execute_batch("ROLLBACK");
    }
    result.with_context(|| format!("{} transaction", kind.name()))
}

/// Another warehouse than `home` (uniform), or `home` if there is one.
fn remote_warehouse(t: Terminal, rand: &mut Rand) -> u64 {
    if t.warehouses == 1 {
        return t.w_id;
    }
    let w = rand.uniform(1, t.warehouses - 1);
    if w >= t.w_id {
        w + 1
    } else {
        w
    }
}

fn now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    secs.to_string()
}

struct Line {
    i_id: u64,
    supply_w_id: u64,
    quantity: u64,
}

fn new_order_lines(t: Terminal, rand: &mut Rand) -> Vec<Line> {
    let count = rand.uniform(5, 15);
    let rollback = rand.percent(1);
    (1..=count)
        .map(|n| Line {
            // An unused item id makes the last line fail (2.4.1.4).
            i_id: if rollback && n == count {
                100_001
            } else {
                rand.item_id()
            },
            supply_w_id: if rand.percent(99) {
                t.w_id
            } else {
                remote_warehouse(t, rand)
            },
            quantity: rand.uniform(1, 10),
        })
        .collect()
}

fn new_order(db: &Connection, t: Terminal, rand: &mut Rand) -> Result<Outcome> {
    let d_id = rand.uniform(1, DISTRICTS);
    let c_id = rand.customer_id();
    let lines = new_order_lines(t, rand);
    let all_local = lines.iter().all(|l| l.supply_w_id == t.w_id);
    db.execute_batch("BEGIN IMMEDIATE")?;
    let _w_tax: f64 = db
        .prepare_cached("SELECT w_tax FROM warehouse WHERE w_id = ?1")?
        .query_row([t.w_id], |r| r.get(0))?;
    let (_d_tax, o_id): (f64, u64) = db
        .prepare_cached("SELECT d_tax, d_next_o_id FROM district WHERE d_w_id = ?1 AND d_id = ?2")?
        .query_row([t.w_id, d_id], |r| Ok((r.get(0)?, r.get(1)?)))?;
    db.prepare_cached("UPDATE district SET d_next_o_id = ?3 WHERE d_w_id = ?1 AND d_id = ?2")?
        .execute([t.w_id, d_id, o_id + 1])?;
    let _discount: f64 = db
        .prepare_cached(
            "SELECT c_discount FROM customer WHERE c_w_id = ?1 AND c_d_id = ?2 AND c_id = ?3",
        )?
        .query_row([t.w_id, d_id, c_id], |r| r.get(0))?;
    db.prepare_cached("INSERT INTO orders VALUES (?1, ?2, ?3, ?4, ?5, NULL, ?6, ?7)")?
        .execute(params![
            t.w_id,
            d_id,
            o_id,
            c_id,
            now(),
            lines.len(),
            all_local
        ])?;
    db.prepare_cached("INSERT INTO new_order VALUES (?1, ?2, ?3)")?
        .execute([t.w_id, d_id, o_id])?;
    for (number, line) in (1..).zip(&lines) {
        if !order_line(db, t, d_id, o_id, number, line)? {
            db.execute_batch("ROLLBACK")?;
            return Ok(Outcome::RolledBack);
        }
    }
    db.execute_batch("COMMIT")?;
    Ok(Outcome::Committed)
}

/// One New-Order line; false if the item does not exist.
fn order_line(
    db: &Connection,
    t: Terminal,
    d_id: u64,
    o_id: u64,
    number: u64,
    line: &Line,
) -> Result<bool> {
    let price: Option<f64> = db
        .prepare_cached("SELECT i_price FROM item WHERE i_id = ?1")?
        .query_row([line.i_id], |r| r.get(0))
        .optional()?;
    let Some(price) = price else { return Ok(false) };
    let dist_column = format!("s_dist_{d_id:02}");
    let (quantity, dist): (u64, String) = db
        .prepare_cached(&format!(
            "SELECT s_quantity, {dist_column} FROM stock WHERE s_w_id = ?1 AND s_i_id = ?2"
        ))?
        .query_row([line.supply_w_id, line.i_id], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })?;
    let new_quantity = if quantity >= line.quantity + 10 {
        quantity - line.quantity
    } else {
        quantity + 91 - line.quantity
    };
    let remote = u64::from(line.supply_w_id != t.w_id);
    db.prepare_cached(
        "UPDATE stock SET s_quantity = ?3, s_ytd = s_ytd + ?4, s_order_cnt = s_order_cnt + 1,
         s_remote_cnt = s_remote_cnt + ?5 WHERE s_w_id = ?1 AND s_i_id = ?2",
    )?
    .execute([
        line.supply_w_id,
        line.i_id,
        new_quantity,
        line.quantity,
        remote,
    ])?;
    let amount = line.quantity as f64 * price;
    db.prepare_cached("INSERT INTO order_line VALUES (?1, ?2, ?3, ?4, ?5, ?6, NULL, ?7, ?8, ?9)")?
        .execute(params![
            t.w_id,
            d_id,
            o_id,
            number,
            line.i_id,
            line.supply_w_id,
            line.quantity,
            amount,
            dist
        ])?;
    Ok(true)
}

/// Finds a customer by last name (the middle one of those sorted by first
/// name, 2.5.2.2) or by id; returns the id.
fn find_customer(
    db: &Connection,
    w_id: u64,
    d_id: u64,
    by_name: bool,
    rand: &mut Rand,
) -> Result<u64> {
    if !by_name {
        return Ok(rand.customer_id());
    }
    let last = rand.last_name();
    let ids: Vec<u64> = db
        .prepare_cached(
            "SELECT c_id FROM customer WHERE c_w_id = ?1 AND c_d_id = ?2 AND c_last = ?3 ORDER BY c_first",
        )?
        .query_map(params![w_id, d_id, last], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    // Every name exists for the first 1000 customers, so ids is non-empty.
    Ok(ids
        .get(ids.len().saturating_sub(1) / 2)
        .copied()
        .unwrap_or(1))
}

fn payment(db: &Connection, t: Terminal, rand: &mut Rand) -> Result<()> {
    let d_id = rand.uniform(1, DISTRICTS);
    let (c_w_id, c_d_id) = if rand.percent(85) {
        (t.w_id, d_id)
    } else {
        (remote_warehouse(t, rand), rand.uniform(1, DISTRICTS))
    };
    let by_name = rand.percent(60);
    let amount = rand.money(1.0, 5000.0);
    db.execute_batch("BEGIN IMMEDIATE")?;
    db.prepare_cached("UPDATE warehouse SET w_ytd = w_ytd + ?2 WHERE w_id = ?1")?
        .execute(params![t.w_id, amount])?;
    db.prepare_cached("UPDATE district SET d_ytd = d_ytd + ?3 WHERE d_w_id = ?1 AND d_id = ?2")?
        .execute(params![t.w_id, d_id, amount])?;
    let c_id = find_customer(db, c_w_id, c_d_id, by_name, rand)?;
    let credit: String = db
        .prepare_cached(
            "SELECT c_credit FROM customer WHERE c_w_id = ?1 AND c_d_id = ?2 AND c_id = ?3",
        )?
        .query_row([c_w_id, c_d_id, c_id], |r| r.get(0))?;
    db.prepare_cached(
        "UPDATE customer SET c_balance = c_balance - ?4, c_ytd_payment = c_ytd_payment + ?4,
         c_payment_cnt = c_payment_cnt + 1 WHERE c_w_id = ?1 AND c_d_id = ?2 AND c_id = ?3",
    )?
    .execute(params![c_w_id, c_d_id, c_id, amount])?;
    if credit == "BC" {
        let note = format!("{c_id} {c_d_id} {c_w_id} {d_id} {} {amount:.2} ", t.w_id);
        db.prepare_cached(
            "UPDATE customer SET c_data = substr(?4 || c_data, 1, 500)
             WHERE c_w_id = ?1 AND c_d_id = ?2 AND c_id = ?3",
        )?
        .execute(params![c_w_id, c_d_id, c_id, note])?;
    }
    db.prepare_cached("INSERT INTO history VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)")?
        .execute(params![
            c_id,
            c_d_id,
            c_w_id,
            d_id,
            t.w_id,
            now(),
            amount,
            rand.astring(12, 24)
        ])?;
    db.execute_batch("COMMIT")?;
    Ok(())
}

fn order_status(db: &Connection, t: Terminal, rand: &mut Rand) -> Result<()> {
    let d_id = rand.uniform(1, DISTRICTS);
    let by_name = rand.percent(60);
    db.execute_batch("BEGIN")?;
    let c_id = find_customer(db, t.w_id, d_id, by_name, rand)?;
    let _balance: f64 = db
        .prepare_cached(
            "SELECT c_balance FROM customer WHERE c_w_id = ?1 AND c_d_id = ?2 AND c_id = ?3",
        )?
        .query_row([t.w_id, d_id, c_id], |r| r.get(0))?;
    let o_id: Option<u64> = db
        .prepare_cached(
            "SELECT max(o_id) FROM orders WHERE o_w_id = ?1 AND o_d_id = ?2 AND o_c_id = ?3",
        )?
        .query_row([t.w_id, d_id, c_id], |r| r.get(0))?;
    if let Some(o_id) = o_id {
        let mut lines = db.prepare_cached(
            "SELECT ol_i_id, ol_supply_w_id, ol_quantity, ol_amount, ol_delivery_d FROM order_line
             WHERE ol_w_id = ?1 AND ol_d_id = ?2 AND ol_o_id = ?3",
        )?;
        let count = lines.query_map([t.w_id, d_id, o_id], |_| Ok(()))?.count();
        debug_assert!(count >= 5);
    }
    db.execute_batch("COMMIT")?;
    Ok(())
}

fn delivery(db: &Connection, t: Terminal, rand: &mut Rand) -> Result<()> {
    let carrier = rand.uniform(1, 10);
    let date = now();
    db.execute_batch("BEGIN IMMEDIATE")?;
    for d_id in 1..=DISTRICTS {
        let o_id: Option<u64> = db
            .prepare_cached(
                "SELECT min(no_o_id) FROM new_order WHERE no_w_id = ?1 AND no_d_id = ?2",
            )?
            .query_row([t.w_id, d_id], |r| r.get(0))?;
        // A district with no undelivered order is skipped (2.7.4.2).
        let Some(o_id) = o_id else { continue };
        db.prepare_cached(
            "DELETE FROM new_order WHERE no_w_id = ?1 AND no_d_id = ?2 AND no_o_id = ?3",
        )?
        .execute([t.w_id, d_id, o_id])?;
        let c_id: u64 = db
            .prepare_cached(
                "SELECT o_c_id FROM orders WHERE o_w_id = ?1 AND o_d_id = ?2 AND o_id = ?3",
            )?
            .query_row([t.w_id, d_id, o_id], |r| r.get(0))?;
        db.prepare_cached(
            "UPDATE orders SET o_carrier_id = ?4 WHERE o_w_id = ?1 AND o_d_id = ?2 AND o_id = ?3",
        )?
        .execute([t.w_id, d_id, o_id, carrier])?;
        db.prepare_cached(
            "UPDATE order_line SET ol_delivery_d = ?4 WHERE ol_w_id = ?1 AND ol_d_id = ?2 AND ol_o_id = ?3",
        )?
        .execute(params![t.w_id, d_id, o_id, date])?;
        let total: f64 = db
            .prepare_cached(
                "SELECT sum(ol_amount) FROM order_line WHERE ol_w_id = ?1 AND ol_d_id = ?2 AND ol_o_id = ?3",
            )?
            .query_row([t.w_id, d_id, o_id], |r| r.get(0))?;
        db.prepare_cached(
            "UPDATE customer SET c_balance = c_balance + ?4, c_delivery_cnt = c_delivery_cnt + 1
             WHERE c_w_id = ?1 AND c_d_id = ?2 AND c_id = ?3",
        )?
        .execute(params![t.w_id, d_id, c_id, total])?;
    }
    db.execute_batch("COMMIT")?;
    Ok(())
}

fn stock_level(db: &Connection, t: Terminal, rand: &mut Rand) -> Result<()> {
    let d_id = rand.uniform(1, DISTRICTS);
    let threshold = rand.uniform(10, 20);
    db.execute_batch("BEGIN")?;
    let next: u64 = db
        .prepare_cached("SELECT d_next_o_id FROM district WHERE d_w_id = ?1 AND d_id = ?2")?
        .query_row([t.w_id, d_id], |r| r.get(0))?;
    let _low: u64 = db
        .prepare_cached(
            "SELECT count(DISTINCT s_i_id) FROM order_line JOIN stock
             ON s_w_id = ol_w_id AND s_i_id = ol_i_id
             WHERE ol_w_id = ?1 AND ol_d_id = ?2 AND ol_o_id >= ?3 AND ol_o_id < ?4
             AND s_quantity < ?5",
        )?
        .query_row(
            [t.w_id, d_id, next.saturating_sub(20), next, threshold],
            |r| r.get(0),
        )?;
    db.execute_batch("COMMIT")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tpcc::random::Constants;

    #[test]
    fn mix_is_45_43_4_4_4() {
        let constants = Constants::for_load(&mut fastrand::Rng::with_seed(3));
        let mut rand = Rand::new(11, constants);
        let mut counts = [0u32; 5];
        let n = 100_000;
        for _ in 0..n {
            let kind = Kind::pick(&mut rand);
            let i = Kind::ALL.iter().position(|&k| k == kind).unwrap_or(0);
            counts[i] += 1;
        }
        for (count, want) in counts.iter().zip([45.0, 43.0, 4.0, 4.0, 4.0]) {
            let percent = f64::from(*count) * 100.0 / f64::from(n);
            assert!((percent - want).abs() < 0.7, "{percent} vs {want}");
        }
    }
}
