//! The command statistics find a name's counters by where its strings
//! are; the same name given through other strings of the same text must
//! still reach the same counters, and different names never share them.

use ferrite_kv::cmdstats::CommandTable;
use proptest::prelude::*;

/// A copy of `text` at an address of its own.
fn elsewhere(text: &str) -> &'static str {
    Box::leak(text.to_string().into_boxed_str())
}

#[test]
fn the_same_name_through_other_strings_shares_its_counters() {
    let mut table = CommandTable::default();
    table.of(("set", "")).calls += 1;
    table.of((elsewhere("set"), elsewhere(""))).calls += 1;
    table.of(("config", "get")).calls += 1;
    table.of((elsewhere("config"), "get")).calls += 1;
    table.of(("config", elsewhere("get"))).calls += 1;
    assert_eq!(table.get(("set", "")).map(|s| s.calls), Some(2));
    assert_eq!(table.get((elsewhere("set"), "")).map(|s| s.calls), Some(2));
    assert_eq!(table.get(("config", "get")).map(|s| s.calls), Some(3));
    assert!(table.get(("config", "set")).is_none());
    let names: Vec<String> = table.sorted().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["config|get", "set"]);
}

proptest! {
    /// Against a model keyed by text: any sequence of names, each given
    /// through the table's own strings or a fresh copy, counts the same.
    #[test]
    fn counts_match_a_model_keyed_by_text(
        calls in proptest::collection::vec((0usize..6, any::<bool>()), 0..60)
    ) {
        const NAMES: [(&str, &str); 6] = [
            ("get", ""), ("set", ""), ("config", "get"),
            ("config", "set"), ("client", "list"), ("ge", "t"),
        ];
        let mut table = CommandTable::default();
        let mut model = std::collections::BTreeMap::new();
        for (which, copy) in calls {
            let (a, b) = NAMES[which];
            let name = if copy { (elsewhere(a), elsewhere(b)) } else { (a, b) };
            table.of(name).calls += 1;
            *model.entry((a, b)).or_insert(0u64) += 1;
        }
        for (a, b) in NAMES {
            prop_assert_eq!(
                table.get((a, b)).map(|s| s.calls),
                model.get(&(a, b)).copied()
            );
        }
        prop_assert_eq!(table.sorted().len(), model.len());
    }
}
