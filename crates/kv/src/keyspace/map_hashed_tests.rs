//! The map's calls that take a key's hash computed once: they agree with
//! a `HashMap`, set the access clock as the separate calls did, and copy
//! a chunk a clone shares before writing it.

use std::collections::HashMap;

use proptest::prelude::*;

use super::KeyMap;
use crate::types::Value;

fn string(v: &[u8]) -> Value {
    Value::Str(v.into())
}

proptest! {
    /// Stores through `insert_touch_hashed` and `get_or_insert_hashed`,
    /// removals through `remove_hashed`, with a clone taken midway: the
    /// map agrees with a model at the end, the clone with the model as it
    /// was, and each key's clock says whether it was new when last set.
    #[test]
    fn hashed_calls_behave_like_a_hash_map(
        ops in proptest::collection::vec((0u8..4, 0u16..200, 0u8..30), 0..300),
        clone_at in 0usize..300,
    ) {
        let mut map = KeyMap::default();
        let mut model: HashMap<Vec<u8>, Value> = HashMap::new();
        let mut clocks: HashMap<Vec<u8>, u32> = HashMap::new();
        let mut snapshot = None;
        for (i, (op, k, len)) in ops.into_iter().enumerate() {
            if i == clone_at {
                snapshot = Some((map.clone(), model.clone()));
            }
            let key: Vec<u8> = (0..len).map(|j| b'a' + ((k as usize + j as usize) % 26) as u8)
                .chain(k.to_le_bytes()).collect();
            let hash = map.hash(&key);
            let value = string(&(i as u32).to_le_bytes());
            match op {
                0 => prop_assert_eq!(map.remove_hashed(hash, &key), model.remove(&key)),
                1 => {
                    let new = map.insert_touch_hashed(hash, &key, value.clone(), |old| {
                        old.map_or(1, |c| c + 2)
                    });
                    prop_assert_eq!(new, !model.contains_key(&key));
                    let clock = if new { 1 } else { clocks[&key] + 2 };
                    clocks.insert(key.clone(), clock);
                    model.insert(key.clone(), value);
                }
                2 => {
                    let (got, new) = map.get_or_insert_hashed(hash, &key, || value.clone(), |old| {
                        old.map_or(7, |c| c + 1)
                    });
                    prop_assert_eq!(new, !model.contains_key(&key));
                    let expected = model.entry(key.clone()).or_insert(value).clone();
                    prop_assert_eq!(&*got, &expected);
                    let clock = if new { 7 } else { clocks[&key] + 1 };
                    clocks.insert(key.clone(), clock);
                }
                _ => {
                    prop_assert_eq!(map.get_hashed(hash, &key), model.get(&key));
                    prop_assert_eq!(map.get_mut_hashed(hash, &key).is_some(), model.contains_key(&key));
                }
            }
            prop_assert_eq!(map.len(), model.len());
        }
        for (k, v) in &model {
            prop_assert_eq!(map.get(k), Some(v));
            prop_assert_eq!(map.clock(k), Some(clocks[k]));
        }
        if let Some((copy, then)) = snapshot {
            prop_assert_eq!(copy.len(), then.len());
            for (k, v) in &then {
                prop_assert_eq!(copy.get(k), Some(v));
            }
        }
    }
}
