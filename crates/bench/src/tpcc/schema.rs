//! The TPC-C schema (clause 1.3) for SQLite: composite keys as
//! `WITHOUT ROWID` primary keys, plus the two secondary indexes the
//! transactions need (customer by last name, orders by customer).

/// Scale of one warehouse (clause 4.3.3.1).
pub const DISTRICTS: u64 = 10;
pub const CUSTOMERS: u64 = 3000;
pub const ITEMS: u64 = 100_000;
pub const ORDERS: u64 = 3000;
/// Orders at or above this id start undelivered (in NEW-ORDER).
pub const FIRST_NEW_ORDER: u64 = 2101;

pub const SCHEMA: &str = "
CREATE TABLE warehouse (
  w_id INTEGER PRIMARY KEY, w_name TEXT, w_street_1 TEXT, w_street_2 TEXT, w_city TEXT,
  w_state TEXT, w_zip TEXT, w_tax REAL, w_ytd REAL);
CREATE TABLE district (
  d_w_id INTEGER, d_id INTEGER, d_name TEXT, d_street_1 TEXT, d_street_2 TEXT, d_city TEXT,
  d_state TEXT, d_zip TEXT, d_tax REAL, d_ytd REAL, d_next_o_id INTEGER,
  PRIMARY KEY (d_w_id, d_id)) WITHOUT ROWID;
CREATE TABLE customer (
  c_w_id INTEGER, c_d_id INTEGER, c_id INTEGER, c_first TEXT, c_middle TEXT, c_last TEXT,
  c_street_1 TEXT, c_street_2 TEXT, c_city TEXT, c_state TEXT, c_zip TEXT, c_phone TEXT,
  c_since TEXT, c_credit TEXT, c_credit_lim REAL, c_discount REAL, c_balance REAL,
  c_ytd_payment REAL, c_payment_cnt INTEGER, c_delivery_cnt INTEGER, c_data TEXT,
  PRIMARY KEY (c_w_id, c_d_id, c_id)) WITHOUT ROWID;
CREATE INDEX customer_by_name ON customer (c_w_id, c_d_id, c_last, c_first);
CREATE TABLE history (
  h_c_id INTEGER, h_c_d_id INTEGER, h_c_w_id INTEGER, h_d_id INTEGER, h_w_id INTEGER,
  h_date TEXT, h_amount REAL, h_data TEXT);
CREATE TABLE new_order (
  no_w_id INTEGER, no_d_id INTEGER, no_o_id INTEGER,
  PRIMARY KEY (no_w_id, no_d_id, no_o_id)) WITHOUT ROWID;
CREATE TABLE orders (
  o_w_id INTEGER, o_d_id INTEGER, o_id INTEGER, o_c_id INTEGER, o_entry_d TEXT,
  o_carrier_id INTEGER, o_ol_cnt INTEGER, o_all_local INTEGER,
  PRIMARY KEY (o_w_id, o_d_id, o_id)) WITHOUT ROWID;
CREATE INDEX orders_by_customer ON orders (o_w_id, o_d_id, o_c_id, o_id);
CREATE TABLE order_line (
  ol_w_id INTEGER, ol_d_id INTEGER, ol_o_id INTEGER, ol_number INTEGER, ol_i_id INTEGER,
  ol_supply_w_id INTEGER, ol_delivery_d TEXT, ol_quantity INTEGER, ol_amount REAL,
  ol_dist_info TEXT,
  PRIMARY KEY (ol_w_id, ol_d_id, ol_o_id, ol_number)) WITHOUT ROWID;
CREATE TABLE item (
  i_id INTEGER PRIMARY KEY, i_im_id INTEGER, i_name TEXT, i_price REAL, i_data TEXT);
CREATE TABLE stock (
  s_w_id INTEGER, s_i_id INTEGER, s_quantity INTEGER,
  s_dist_01 TEXT, s_dist_02 TEXT, s_dist_03 TEXT, s_dist_04 TEXT, s_dist_05 TEXT,
  s_dist_06 TEXT, s_dist_07 TEXT, s_dist_08 TEXT, s_dist_09 TEXT, s_dist_10 TEXT,
  s_ytd INTEGER, s_order_cnt INTEGER, s_remote_cnt INTEGER, s_data TEXT,
  PRIMARY KEY (s_w_id, s_i_id)) WITHOUT ROWID;
";
