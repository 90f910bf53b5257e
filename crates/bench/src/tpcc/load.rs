//! The initial database population (clause 4.3.3) for W warehouses.

use anyhow::Result;
use rusqlite::{params, Connection};

use super::random::{last_name, Rand};
use super::schema::{CUSTOMERS, DISTRICTS, FIRST_NEW_ORDER, ITEMS, ORDERS, SCHEMA};

/// A timestamp for every load-time date (dates do not affect the workload).
const LOAD_DATE: &str = "2026-01-01 00:00:00";

/// Creates the schema and loads `warehouses` warehouses into `db`.
pub fn load(db: &Connection, warehouses: u64, rand: &mut Rand) -> Result<()> {
    db.execute_batch("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;")?;
    db.execute_batch(SCHEMA)?;
    db.execute_batch("BEGIN")?;
    load_items(db, rand)?;
    for w in 1..=warehouses {
        load_warehouse(db, w, rand)?;
        load_stock(db, w, rand)?;
        for d in 1..=DISTRICTS {
            load_district(db, w, d, rand)?;
            load_customers(db, w, d, rand)?;
            load_orders(db, w, d, rand)?;
        }
    }
    db.execute_batch("COMMIT")?;
    Ok(())
}

fn load_items(db: &Connection, rand: &mut Rand) -> Result<()> {
    let mut insert = db.prepare("INSERT INTO item VALUES (?1, ?2, ?3, ?4, ?5)")?;
    for i in 1..=ITEMS {
        let name = rand.astring(14, 24);
        let price = rand.money(1.0, 100.0);
        let data = rand.data_with_original();
        insert.execute(params![i, rand.uniform(1, 10_000), name, price, data])?;
    }
    Ok(())
}

fn address(rand: &mut Rand) -> [String; 5] {
    [
        rand.astring(10, 20),
        rand.astring(10, 20),
        rand.astring(10, 20),
        rand.astring(2, 2),
        rand.zip(),
    ]
}

fn load_warehouse(db: &Connection, w: u64, rand: &mut Rand) -> Result<()> {
    let [s1, s2, city, state, zip] = address(rand);
    let tax = rand.money(0.0, 0.2);
    db.execute(
        "INSERT INTO warehouse VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 300000.0)",
        params![w, rand.astring(6, 10), s1, s2, city, state, zip, tax],
    )?;
    Ok(())
}

fn load_stock(db: &Connection, w: u64, rand: &mut Rand) -> Result<()> {
    let mut insert = db.prepare(
        "INSERT INTO stock VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, 0, 0, 0, ?14)",
    )?;
    for i in 1..=ITEMS {
        let dist: Vec<String> = (0..10).map(|_| rand.astring(24, 24)).collect();
        let quantity = rand.uniform(10, 100);
        let data = rand.data_with_original();
        insert.execute(params![
            w, i, quantity, dist[0], dist[1], dist[2], dist[3], dist[4], dist[5], dist[6], dist[7],
            dist[8], dist[9], data
        ])?;
    }
    Ok(())
}

fn load_district(db: &Connection, w: u64, d: u64, rand: &mut Rand) -> Result<()> {
    let [s1, s2, city, state, zip] = address(rand);
    let tax = rand.money(0.0, 0.2);
    db.execute(
        "INSERT INTO district VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 30000.0, ?10)",
        params![
            w,
            d,
            rand.astring(6, 10),
            s1,
            s2,
            city,
            state,
            zip,
            tax,
            ORDERS + 1
        ],
    )?;
    Ok(())
}

fn load_customers(db: &Connection, w: u64, d: u64, rand: &mut Rand) -> Result<()> {
    let mut insert = db.prepare(
        "INSERT INTO customer VALUES (?1, ?2, ?3, ?4, 'OE', ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12,
         ?13, 50000.0, ?14, -10.0, 10.0, 1, 0, ?15)",
    )?;
    let mut history =
        db.prepare("INSERT INTO history VALUES (?1, ?2, ?3, ?2, ?3, ?4, 10.0, ?5)")?;
    for c in 1..=CUSTOMERS {
        // The first 1000 customers take every last name once (4.3.3.1).
        let last = if c <= 1000 {
            last_name(c - 1)
        } else {
            rand.last_name_for_load()
        };
        let [s1, s2, city, state, zip] = address(rand);
        let credit = if rand.percent(10) { "BC" } else { "GC" };
        let discount = rand.money(0.0, 0.5);
        insert.execute(params![
            w,
            d,
            c,
            rand.astring(8, 16),
            last,
            s1,
            s2,
            city,
            state,
            zip,
            rand.nstring(16, 16),
            LOAD_DATE,
            credit,
            discount,
            rand.astring(300, 500)
        ])?;
        history.execute(params![c, d, w, LOAD_DATE, rand.astring(12, 24)])?;
    }
    Ok(())
}

fn load_orders(db: &Connection, w: u64, d: u64, rand: &mut Rand) -> Result<()> {
    let mut order = db.prepare("INSERT INTO orders VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 1)")?;
    let mut line =
        db.prepare("INSERT INTO order_line VALUES (?1, ?2, ?3, ?4, ?5, ?1, ?6, 5, ?7, ?8)")?;
    let mut new_order = db.prepare("INSERT INTO new_order VALUES (?1, ?2, ?3)")?;
    let customers = rand.permutation(CUSTOMERS);
    for (o, &c) in (1..=ORDERS).zip(&customers) {
        let delivered = o < FIRST_NEW_ORDER;
        let carrier = delivered.then(|| rand.uniform(1, 10));
        let lines = rand.uniform(5, 15);
        order.execute(params![w, d, o, c, LOAD_DATE, carrier, lines])?;
        for n in 1..=lines {
            let amount = if delivered {
                0.0
            } else {
                rand.money(0.01, 9999.99)
            };
            let delivery = delivered.then_some(LOAD_DATE);
            let item = rand.uniform(1, ITEMS);
            line.execute(params![
                w,
                d,
                o,
                n,
                item,
                delivery,
                amount,
                rand.astring(24, 24)
            ])?;
        }
        if !delivered {
            new_order.execute(params![w, d, o])?;
        }
    }
    Ok(())
}
