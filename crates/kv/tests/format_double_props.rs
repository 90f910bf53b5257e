//! `format_double` (C's `%.17g`, as Redis 7.0 prints doubles) on whole
//! numbers: its shortcut for those below 10^15 must print exactly what
//! the general path prints for larger ones and what `%.17g` prints, the
//! integer's digits, with the sign, and no point or exponent.

use ferrite_kv::resp::reply::format_double;
use proptest::prelude::*;

proptest! {
    #[test]
    fn whole_numbers_print_as_their_integer(n in -999_999_999_999_999i64..=999_999_999_999_999) {
        prop_assume!(n != 0);
        prop_assert_eq!(format_double(n as f64), n.to_string());
    }

    #[test]
    fn whole_numbers_up_to_seventeen_digits_print_the_same_way(n in 1_000_000_000_000_000i64..100_000_000_000_000_000) {
        // Beyond the shortcut: the general path gives the digits of the
        // double nearest to `n`, which is itself a whole number.
        let x = n as f64;
        prop_assert_eq!(format_double(x), (x as i64).to_string());
        prop_assert_eq!(format_double(-x), (-(x as i64)).to_string());
    }

    #[test]
    fn fractions_keep_seventeen_significant_digits(n in -1_000_000i64..1_000_000, d in 1u32..1000) {
        let x = n as f64 + f64::from(d) / 1000.0 + 1e-9;
        let text = format_double(x);
        prop_assert!(text.contains('.'), "{} printed as {}", x, text);
        prop_assert_eq!(text.parse::<f64>().ok(), Some(x));
    }
}

#[test]
fn edges_of_the_shortcut() {
    assert_eq!(format_double(999_999_999_999_999.0), "999999999999999");
    assert_eq!(format_double(1e15), "1000000000000000");
    assert_eq!(format_double(-1e15), "-1000000000000000");
    assert_eq!(format_double(1e17), "1e+17");
    assert_eq!(format_double(-0.0), "-0");
    assert_eq!(format_double(0.0), "0");
    assert_eq!(format_double(42.5), "42.5");
}
