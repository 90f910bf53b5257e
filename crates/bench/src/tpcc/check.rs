//! Consistency conditions 1-4 of clause 3.3.2, checked after a run, plus
//! SQLite's own `PRAGMA quick_check`.

use anyhow::{ensure, Result};
use rusqlite::Connection;

/// Fails with the first violated condition.
pub fn consistency(db: &Connection) -> Result<()> {
    let quick: String = db.query_row("PRAGMA quick_check", [], |r| r.get(0))?;
    ensure!(quick == "ok", "quick_check: {quick}");
    let condition = |name: &str, sql: &str| -> Result<()> {
        let bad: i64 = db.query_row(sql, [], |r| r.get(0))?;
        ensure!(bad == 0, "consistency condition {name} fails in {bad} rows");
        Ok(())
    };
    // 1: W_YTD = sum(D_YTD).
    condition(
        "1",
        "SELECT count(*) FROM warehouse WHERE abs(w_ytd -
           (SELECT sum(d_ytd) FROM district WHERE d_w_id = w_id)) > 0.01",
    )?;
    // 2: D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID).
    condition(
        "2",
        "SELECT count(*) FROM district WHERE
           d_next_o_id - 1 != (SELECT max(o_id) FROM orders WHERE o_w_id = d_w_id AND o_d_id = d_id)
           OR d_next_o_id - 1 != coalesce((SELECT max(no_o_id) FROM new_order
                WHERE no_w_id = d_w_id AND no_d_id = d_id), d_next_o_id - 1)",
    )?;
    // 3: max(NO_O_ID) - min(NO_O_ID) + 1 = rows in NEW-ORDER, per district.
    condition(
        "3",
        "SELECT count(*) FROM (SELECT max(no_o_id) - min(no_o_id) + 1 - count(*) AS gap
           FROM new_order GROUP BY no_w_id, no_d_id) WHERE gap != 0",
    )?;
    // 4: sum(O_OL_CNT) = rows in ORDER-LINE, per district.
    condition(
        "4",
        "SELECT count(*) FROM district WHERE
           (SELECT sum(o_ol_cnt) FROM orders WHERE o_w_id = d_w_id AND o_d_id = d_id) !=
           (SELECT count(*) FROM order_line WHERE ol_w_id = d_w_id AND ol_d_id = d_id)",
    )?;
    Ok(())
}
