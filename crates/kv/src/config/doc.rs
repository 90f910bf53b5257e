//! `docs/configuration.md`'s table of directives, generated from
//! [`super::table::DIRECTIVES`] (a test checks the file is current).

use super::table::{
    Directive, Effect, Kind, Special, Unit, DIRECTIVES, HIDDEN, IMMUTABLE, STARTUP_ONLY,
};

fn kind_text(d: &Directive) -> String {
    match d.kind {
        Kind::Bool => "yes/no".into(),
        Kind::Num {
            min,
            max,
            signed,
            unit,
        } => {
            let bound = |n: i64| {
                if signed {
                    n.to_string()
                } else {
                    (n as u64).to_string()
                }
            };
            let what = match unit {
                Unit::Plain => "integer",
                Unit::Memory => "size",
                Unit::MemoryPercent => "size or percent",
                Unit::Octal => "octal",
            };
            format!("{what} {}..{}", bound(min), bound(max))
        }
        Kind::Enum(names) => names.join(" \\| "),
        Kind::Flags(names) => format!("set of {}", names.join(" ")),
        Kind::Text => "text".into(),
        Kind::Special(s) => match s {
            Special::Dir => "path",
            Special::Save => "seconds changes ...",
            Special::ClientOutputBufferLimit => "class hard soft seconds ...",
            Special::OomScoreAdjValues => "three integers",
            Special::NotifyKeyspaceEvents => "event class letters",
            Special::Bind => "addresses",
            Special::Replicaof => "host port",
            Special::LatencyTrackingInfoPercentiles => "percentiles",
            Special::CpuList => "CPU list",
        }
        .into(),
    }
}

fn escape(text: &str) -> String {
    text.replace('|', "\\|")
}

/// The Markdown table of every directive.
pub fn markdown() -> String {
    let mut out = String::from(
        "| Directive | Alias | Type | Default | Run time | Effect in Ferrite | Description |\n|---|---|---|---|---|---|---|\n",
    );
    for d in DIRECTIVES {
        let runtime = if d.has(IMMUTABLE) {
            "no"
        } else if d.has(STARTUP_ONLY) {
            "no (Ferrite)"
        } else {
            "yes"
        };
        let effect = match d.effect {
            Effect::Acts => "acts".to_string(),
            Effect::None(why) => format!("accepted, no effect: {why}"),
        };
        let hidden = if d.has(HIDDEN) { " (hidden)" } else { "" };
        out.push_str(&format!(
            "| `{}`{hidden} | {} | {} | `{}` | {runtime} | {} | {} |\n",
            d.name,
            d.alias.map(|a| format!("`{a}`")).unwrap_or_default(),
            kind_text(d),
            escape(d.default),
            escape(&effect),
            escape(d.doc),
        ));
    }
    out
}
