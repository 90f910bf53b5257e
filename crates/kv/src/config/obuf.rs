//! `client-output-buffer-limit` as numbers: per client class, a hard
//! limit, a soft limit and how long the soft one may be exceeded
//! (`server/obuf.rs` enforces them).

/// A client class's output limits, in bytes and seconds; 0 turns a limit
/// off.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OutputLimit {
    /// Unsent reply bytes at which the client is closed at once.
    pub hard_bytes: u64,
    /// Unsent reply bytes the client may hold for `soft_seconds` at most.
    pub soft_bytes: u64,
    /// How long the soft limit may be exceeded without a break.
    pub soft_seconds: u64,
}

/// The classes, in the order the directive lists them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientClass {
    /// Every client that is neither of the others.
    Normal = 0,
    /// A replica's stream.
    Replica = 1,
    /// A client subscribed to a channel or a pattern.
    Pubsub = 2,
}

/// The three classes' limits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OutputLimits(pub [OutputLimit; 3]);

impl OutputLimits {
    /// Reads the canonical text (`normal H S T slave H S T pubsub H S T`,
    /// as the parser writes it); classes missing from it keep no limit.
    pub fn parse(text: &str) -> OutputLimits {
        let words: Vec<&str> = text.split(' ').filter(|w| !w.is_empty()).collect();
        let mut out = OutputLimits::default();
        for group in words.chunks_exact(4) {
            let class = match group[0] {
                "normal" => ClientClass::Normal,
                "slave" | "replica" => ClientClass::Replica,
                "pubsub" => ClientClass::Pubsub,
                _ => continue,
            };
            let number = |w: &str| w.parse::<u64>().unwrap_or(0);
            out.0[class as usize] = OutputLimit {
                hard_bytes: number(group[1]),
                soft_bytes: number(group[2]),
                soft_seconds: number(group[3]),
            };
        }
        out
    }

    /// The canonical text, as CONFIG GET shows it.
    pub fn show(&self) -> String {
        ["normal", "slave", "pubsub"]
            .iter()
            .zip(self.0)
            .map(|(name, l)| {
                format!(
                    "{name} {} {} {}",
                    l.hard_bytes, l.soft_bytes, l.soft_seconds
                )
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The limits of `class`.
    pub fn of(&self, class: ClientClass) -> OutputLimit {
        self.0[class as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_canonical_text_round_trips() {
        let text = "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60";
        let limits = OutputLimits::parse(text);
        assert_eq!(limits.show(), text);
        assert_eq!(
            limits.of(ClientClass::Pubsub),
            OutputLimit {
                hard_bytes: 33_554_432,
                soft_bytes: 8_388_608,
                soft_seconds: 60
            }
        );
        assert_eq!(limits.of(ClientClass::Normal), OutputLimit::default());
    }
}
