use super::table::{self, Effect, Kind, DIRECTIVES, IMMUTABLE};
use super::*;

fn set(c: &mut Config, pairs: &[(&str, &str)]) -> std::result::Result<(), String> {
    let pairs: Vec<(String, String)> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    c.set_at_runtime(&pairs, true)
}

#[test]
fn every_default_parses_and_shows_as_written() {
    let c = Config::default();
    for d in DIRECTIVES {
        let shown = c
            .get(d.name)
            .unwrap_or_else(|| panic!("{} has no value", d.name));
        assert_eq!(shown, d.default, "{}", d.name);
        let args: Vec<String> = if d.has(table::MULTI_ARG) && !d.default.is_empty() {
            d.default.split(' ').map(String::from).collect()
        } else {
            vec![d.default.to_string()]
        };
        if d.name == "replicaof" {
            // No master: Redis has no argument form for it but `no one`.
            continue;
        }
        let reparsed = parse::parse(d, &args, d.default, Source::Runtime);
        assert!(reparsed.is_ok(), "{}: {reparsed:?}", d.name);
    }
}

#[test]
fn names_are_unique_and_lower_case() {
    let mut seen = std::collections::HashSet::new();
    for d in DIRECTIVES {
        for name in std::iter::once(d.name).chain(d.alias) {
            assert!(seen.insert(name), "{name} twice");
            assert_eq!(name, name.to_ascii_lowercase());
        }
        assert!(!d.doc.is_empty(), "{} has no doc", d.name);
    }
}

#[test]
fn directives_that_act_have_fields_and_the_others_do_not() {
    let mut c = Config::default();
    for d in DIRECTIVES {
        let has_field = fields::store(&mut c, d.name, d.default);
        assert_eq!(has_field, d.effect == Effect::Acts, "{}", d.name);
    }
}

#[test]
fn file_and_flags() {
    let mut c = Config::default();
    c.apply_text(
        "# comment\nport 7000\nmaxmemory 100mb\nappendfsync always\nbind 127.0.0.1 ::1\n",
        "t",
    )
    .unwrap();
    c.apply_flags(&[
        "--port".into(),
        "7001".into(),
        "--requirepass".into(),
        "s3cret".into(),
    ])
    .unwrap();
    assert_eq!(c.port, 7001);
    assert_eq!(c.maxmemory_bytes, 100 * 1024 * 1024);
    assert_eq!(c.appendfsync, AppendFsync::Always);
    assert_eq!(c.bind.len(), 2);
    assert_eq!(c.requirepass.as_deref(), Some("s3cret"));
    assert!(c.apply_text("nonsense 1\n", "t").is_err());
    assert!(c
        .apply_flags(&["--appendfsync".into(), "sometimes".into()])
        .is_err());
}

#[test]
fn redis_test_config_loads() {
    let mut c = Config::default();
    // The directives Redis's test harness writes into its config files.
    let text = "daemonize no\npidfile /var/run/x.pid\nport 6379\ntimeout 0\nbind 127.0.0.1\n\
        loglevel verbose\nlogfile ''\ndatabases 16\nlatency-monitor-threshold 1\n\
        repl-diskless-sync-delay 0\nsave 900 1\nrdbcompression yes\ndbfilename dump.rdb\ndir ./\n\
        slave-serve-stale-data yes\nappendonly no\nappendfsync everysec\nno-appendfsync-on-rewrite no\n\
        activerehashing yes\nenable-protected-configs yes\nenable-debug-command yes\n\
        enable-module-command yes\npropagation-error-behavior panic\nalways-show-logo yes\n\
        notify-keyspace-events KEA\n";
    c.apply_text(text, "default.conf").unwrap();
    assert_eq!(c.get("save").as_deref(), Some("900 1"));
    assert_eq!(c.get("notify-keyspace-events").as_deref(), Some("AKE"));
    assert_eq!(c.enable_debug_command, ProtectedAction::Yes);
    assert!(!c.appendonly);
}

#[test]
fn save_lines_replace_the_default_then_add() {
    let mut c = Config::default();
    c.apply_lines(vec![
        Line {
            origin: "t".into(),
            name: "save".into(),
            args: vec!["900".into(), "1".into()],
        },
        Line {
            origin: "t".into(),
            name: "save".into(),
            args: vec!["100 100".into()],
        },
    ])
    .unwrap();
    assert_eq!(c.get("save").as_deref(), Some("900 1 100 100"));
    c.apply_flags(&["--save".into(), "".into()]).unwrap();
    assert_eq!(c.get("save").as_deref(), Some(""));
    set(&mut c, &[("save", "3600 1 300 100")]).unwrap();
    assert_eq!(c.get("save").as_deref(), Some("3600 1 300 100"));
    assert!(set(&mut c, &[("save", "1 a")])
        .unwrap_err()
        .ends_with("Invalid save parameters"));
}

#[test]
fn aliases_reach_the_same_value() {
    let mut c = Config::default();
    set(&mut c, &[("hash-max-ziplist-entries", "100")]).unwrap();
    assert_eq!(c.get("hash-max-listpack-entries").as_deref(), Some("100"));
    set(&mut c, &[("lua-time-limit", "7")]).unwrap();
    assert_eq!(
        c.get_matching("busy-reply-threshold"),
        vec![("busy-reply-threshold".into(), "7".into())]
    );
    assert_eq!(
        c.get_matching("lua-time-limit"),
        vec![("lua-time-limit".into(), "7".into())]
    );
    let both = c.get_matching("*-read-only");
    assert_eq!(both.len(), 2, "{both:?}");
}

#[test]
fn bounds_and_syntax_are_refused_with_redis_texts() {
    let mut c = Config::default();
    let cases = [
        (
            "maxclients",
            "0",
            "argument must be between 1 and 4294967295 inclusive",
        ),
        (
            "maxclients",
            "-1",
            "argument must be between 1 and 4294967295 inclusive",
        ),
        ("hz", "x", "argument couldn't be parsed into an integer"),
        ("maxmemory", "-1", "argument must be a memory value"),
        (
            "maxmemory-clients",
            "200%",
            "percentage argument must be less or equal to 100",
        ),
        ("appendonly", "maybe", "argument must be 'yes' or 'no'"),
        (
            "appendfsync",
            "sometimes",
            "argument(s) must be one of the following: everysec, always, no",
        ),
        (
            "aof-rewrite-io-share",
            "0",
            "argument must be between 1 and 100 inclusive",
        ),
        (
            "latency-tracking-info-percentiles",
            "10 101",
            "latency-tracking-info-percentiles parameters should sit between [0.0,100.0]",
        ),
    ];
    for (name, value, why) in cases {
        let err = set(&mut c, &[(name, value)]).unwrap_err();
        assert_eq!(
            err,
            format!("ERR CONFIG SET failed (possibly related to argument '{name}') - {why}")
        );
    }
    assert_eq!(c.get("hz").as_deref(), Some("10"));
}

#[test]
fn immutables_and_unknowns_are_refused_before_anything_changes() {
    let mut c = Config::default();
    for d in DIRECTIVES.iter().filter(|d| d.has(IMMUTABLE)) {
        let err = set(&mut c, &[(d.name, d.default)]).unwrap_err();
        assert!(err.ends_with("can't set immutable config"), "{err}");
    }
    let err = set(&mut c, &[("maxmemory", "5"), ("nope", "1")]).unwrap_err();
    assert_eq!(
        err,
        "ERR Unknown option or number of arguments for CONFIG SET - 'nope'"
    );
    let err = set(&mut c, &[("maxmemory", "5"), ("hz", "x")]).unwrap_err();
    assert!(err.contains("'hz'"), "{err}");
    assert_eq!(c.maxmemory_bytes, 0, "all or nothing");
    set(&mut c, &[("maxmemory", "5"), ("hz", "20")]).unwrap();
    assert_eq!((c.maxmemory_bytes, c.hz), (5, 20));
    let err = set(&mut c, &[("log-device", "file")]).unwrap_err();
    assert!(
        err.ends_with("Ferrite sets this directive only at start-up"),
        "{err}"
    );
    set(&mut c, &[("log-device", "auto")]).unwrap();
    // The server opens or closes the log after the command.
    set(&mut c, &[("appendonly", "no")]).unwrap();
    assert!(!c.appendonly);
}

#[test]
fn special_directives_show_redis_forms() {
    let mut c = Config::default();
    set(&mut c, &[("notify-keyspace-events", "KEA")]).unwrap();
    assert_eq!(c.get("notify-keyspace-events").as_deref(), Some("AKE"));
    set(
        &mut c,
        &[("client-output-buffer-limit", "pubsub 1mb 2kb 3")],
    )
    .unwrap();
    assert_eq!(
        c.get("client-output-buffer-limit").as_deref(),
        Some("normal 0 0 0 slave 268435456 67108864 60 pubsub 1048576 2048 3")
    );
    set(
        &mut c,
        &[("latency-tracking-info-percentiles", "0.0 50.0 100.0")],
    )
    .unwrap();
    assert_eq!(
        c.get("latency-tracking-info-percentiles").as_deref(),
        Some("0 50 100")
    );
    set(&mut c, &[("shutdown-on-sigterm", "nosave now")]).unwrap();
    assert_eq!(c.get("shutdown-on-sigterm").as_deref(), Some("nosave now"));
    assert!(set(&mut c, &[("shutdown-on-sigterm", "save nosave")]).is_err());
    set(&mut c, &[("unixsocketperm", "0")]).unwrap_err();
}

#[test]
fn hidden_directives_answer_only_by_exact_name() {
    let c = Config::default();
    assert_eq!(c.get_matching("watchdog-period").len(), 1);
    assert!(c.get_matching("watchdog-*").is_empty());
    assert!(table::lookup("watchdog-period").is_some_and(|d| matches!(d.kind, Kind::Num { .. })));
}

#[test]
fn the_rewrite_io_share_is_a_percentage_changeable_at_run_time() {
    let mut c = Config::default();
    assert_eq!(
        c.aof_rewrite_io_share_percent,
        crate::rewrite::pace::DEFAULT_SHARE_PERCENT
    );
    assert_eq!(
        c.aof_rewrite_cpu_share_percent,
        crate::rewrite::pace::DEFAULT_CPU_SHARE_PERCENT
    );
    for bad in ["0", "101", "-5", "half", ""] {
        assert!(
            set(&mut c, &[("aof-rewrite-io-share", bad)]).is_err(),
            "{bad}"
        );
    }
    set(&mut c, &[("aof-rewrite-io-share", "100")]).unwrap();
    assert_eq!(c.aof_rewrite_io_share_percent, 100);
}

#[test]
fn ferrite_log_settings_change_at_run_time() {
    let mut c = Config::default();
    assert!(c.release_log_cache());
    assert_eq!(c.everysec_sync_bytes(), 16 << 20);
    // An empty size reads as 0 in Redis, so only these are wrong.
    for bad in ["-1", "lots", "16xb"] {
        assert!(
            set(&mut c, &[("aof-everysec-sync-bytes", bad)]).is_err(),
            "{bad}"
        );
    }
    set(
        &mut c,
        &[
            ("aof-everysec-sync-bytes", "4mb"),
            ("aof-release-log-cache", "no"),
        ],
    )
    .unwrap();
    assert_eq!(c.everysec_sync_bytes(), 4 << 20);
    assert!(!c.release_log_cache());
    assert!(set(&mut c, &[("aof-rewrite-lend-loop-core", "1")]).is_err());
}

#[test]
fn memory_units() {
    assert_eq!(parse_memory("1gb"), Some(1 << 30));
    assert_eq!(parse_memory("1k"), Some(1000));
    assert_eq!(parse_memory("1KB"), Some(1024));
    assert_eq!(parse_memory("12"), Some(12));
    assert_eq!(parse_memory("x"), None);
    assert_eq!(parse_memory("-1"), None);
}

#[test]
fn rewrite_keeps_comments_and_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.conf");
    std::fs::write(
        &path,
        "# top\nport 7000\n\nmaxmemory 1mb\nsave 900 1\nsave 300 10\nbogus x\n",
    )
    .unwrap();
    assert!(
        Config::load(Some(&path), &[]).is_err(),
        "an unknown directive stops the load"
    );
    std::fs::write(
        &path,
        "# top\nport 7000\n\nmaxmemory 1mb\nsave 900 1\nsave 300 10\nslave-read-only yes\n",
    )
    .unwrap();
    let mut c = Config::load(Some(&path), &[]).unwrap();
    set(
        &mut c,
        &[("maxmemory", "2mb"), ("save", "60 5"), ("hz", "20")],
    )
    .unwrap();
    c.rewrite_file().unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(
        text,
        "# top\nport 7000\n\nmaxmemory 2mb\nsave 60 5\n\nreplica-read-only yes\n# Generated by CONFIG REWRITE\nhz 20\n"
    );
    let again = Config::load(Some(&path), &[]).unwrap();
    assert_eq!(again.hz, 20);
    assert_eq!(again.get("save").as_deref(), Some("60 5"));
    assert_eq!(
        Config::default().rewrite_file().unwrap_err(),
        "ERR The server is running without a config file"
    );
}

#[test]
fn the_documentation_is_current() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/configuration.md");
    let doc = std::fs::read_to_string(path).unwrap_or_default();
    let table = markdown();
    if !doc.contains(&table) {
        if std::env::var_os("FERRITE_BLESS").is_some() {
            let start = doc
                .find("<!-- directives -->")
                .map(|s| s + "<!-- directives -->\n".len());
            let end = doc.find("<!-- /directives -->");
            if let (Some(start), Some(end)) = (start, end) {
                let updated = format!("{}{table}{}", &doc[..start], &doc[end..]);
                std::fs::write(path, updated).unwrap();
                return;
            }
        }
        panic!("docs/configuration.md is not current: run `FERRITE_BLESS=1 cargo test -p ferrite-kv --lib config` and commit it");
    }
}
