//! `rename-command OLD NEW` (config file only, as Redis 7.0): clients must
//! call command OLD by the name NEW, and OLD no longer exists; an empty
//! NEW removes the command. Lines apply in order against the table as
//! the previous lines left it, so OLD must exist by then ("No such command
//! in rename-command") and NEW must not ("Target command name already
//! exists").
//!
//! As in Redis, only the names clients send change: ACL rules, COMMAND
//! INFO and the command's own identity keep the original name. Scripts
//! call commands by the names clients use. The names in the log are the
//! ones sent, so a restart must keep the same renames (Redis's AOF and
//! replicas have the same requirement).
//!
//! The renames are installed on the event loop's thread when the server
//! starts; a flag read per command keeps servers without renames on the
//! plain table lookup.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use super::table::{lookup, CommandSpec};

/// The renames in force.
#[derive(Debug, Default)]
struct Renames {
    /// New name (lower case) to the command it calls.
    to: HashMap<String, &'static CommandSpec>,
    /// Commands no longer reachable by their own name.
    hidden: HashSet<&'static str>,
}

impl Renames {
    fn find(&self, name: &[u8]) -> Option<&'static CommandSpec> {
        let lower = String::from_utf8_lossy(name).to_ascii_lowercase();
        if let Some(spec) = self.to.get(&lower) {
            return Some(spec);
        }
        lookup(name).filter(|spec| !self.hidden.contains(spec.name))
    }

    /// Applies `rename-command old new` lines in order.
    fn build(pairs: &[(String, String)]) -> Result<Renames, String> {
        let mut renames = Renames::default();
        for (old, new) in pairs {
            let Some(spec) = renames.find(old.as_bytes()) else {
                return Err(format!("No such command in rename-command: '{old}'"));
            };
            let old_lower = old.to_ascii_lowercase();
            if renames.to.remove(&old_lower).is_none() {
                renames.hidden.insert(spec.name);
            }
            if !new.is_empty() {
                if renames.find(new.as_bytes()).is_some() {
                    return Err(format!(
                        "Target command name already exists: '{new}' (rename-command {old})"
                    ));
                }
                renames.to.insert(new.to_ascii_lowercase(), spec);
            }
        }
        Ok(renames)
    }
}

thread_local! {
    static ANY: Cell<bool> = const { Cell::new(false) };
    static ACTIVE: RefCell<Option<Rc<Renames>>> = const { RefCell::new(None) };
}

/// Checks `rename-command` lines (the config loader's error when not).
pub fn check(pairs: &[(String, String)]) -> Result<(), String> {
    Renames::build(pairs).map(|_| ())
}

/// Makes `pairs` the renames of commands run on this thread.
pub fn install(pairs: &[(String, String)]) -> Result<(), String> {
    let renames = (!pairs.is_empty())
        .then(|| Renames::build(pairs))
        .transpose()?;
    ANY.with(|any| any.set(renames.is_some()));
    ACTIVE.with(|active| *active.borrow_mut() = renames.map(Rc::new));
    Ok(())
}

/// The command a client calls by `name`, after the renames.
pub fn resolve_name(name: &[u8]) -> Option<&'static CommandSpec> {
    if !ANY.with(Cell::get) {
        return lookup(name);
    }
    ACTIVE.with(|active| match &*active.borrow() {
        Some(renames) => renames.find(name),
        None => lookup(name),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn renames_apply_in_order_as_redis_loads_them() {
        let r = Renames::build(&pairs(&[("config", "cfg"), ("flushall", "")])).unwrap();
        assert!(r.find(b"CONFIG").is_none());
        assert_eq!(r.find(b"CFG").map(|s| s.name), Some("config"));
        assert!(r.find(b"flushall").is_none());
        assert!(r.find(b"get").is_some());
        // A renamed command can be renamed again by its new name.
        let r = Renames::build(&pairs(&[("get", "g1"), ("g1", "g2")])).unwrap();
        assert!(r.find(b"g1").is_none());
        assert_eq!(r.find(b"g2").map(|s| s.name), Some("get"));
        assert!(Renames::build(&pairs(&[("nosuch", "x")]))
            .unwrap_err()
            .starts_with("No such command in rename-command"));
        assert!(Renames::build(&pairs(&[("get", "set")]))
            .unwrap_err()
            .starts_with("Target command name already exists"));
        assert!(Renames::build(&pairs(&[("get", ""), ("get", "x")])).is_err());
    }

    #[test]
    fn installed_renames_change_what_names_resolve_to() {
        install(&pairs(&[("keys", "")])).unwrap();
        assert!(resolve_name(b"keys").is_none());
        install(&[]).unwrap();
        assert!(resolve_name(b"keys").is_some());
    }
}
