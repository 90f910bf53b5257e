//! The round driver of the kill -9 tests of the real `ferrite serve`
//! binary. Each round starts the server on the same data directory, checks
//! what recovery kept against the test's ledger, runs the test's clients
//! against it and kills the server with SIGKILL after a pseudo-random
//! delay; a last restart is checked the same way and handed back to the
//! test for its own final checks. The ledger holds what the clients were
//! told: an operation is noted as in doubt before it is sent and as
//! acknowledged once its reply is read, so after a kill only the
//! operations in flight are in doubt, and each check settles those to
//! what recovery decided, holding every later restart to it.

use std::ops::Range;
use std::process::Child;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use tempfile::TempDir;

use super::{kill_after, start_server, Client};

/// Which client of which round a load runs as.
#[derive(Clone, Copy, Debug)]
pub struct Who {
    pub round: usize,
    pub client: usize,
}

impl Who {
    /// A name unique to this client and round, for keys no other client
    /// writes.
    pub fn tag(self) -> String {
        format!("r{}c{}", self.round, self.client)
    }
}

/// What a kill -9 test knows about the server's data, and the load that
/// teaches it.
pub trait Ledger: Send + 'static {
    /// One client's load, from its connection until `stop` is set or the
    /// connection breaks (the kill): notes each operation in `ledger` as
    /// in doubt before sending it and as acknowledged once its reply is
    /// read.
    fn client(ledger: &Mutex<Self>, port: u16, who: Who, stop: &AtomicBool);

    /// Checks the server restarted after round `round - 1` (round 0: the
    /// first start), connected as `c`, against the ledger, panicking with
    /// `round` in the message if an acknowledged operation is lost or
    /// something never sent appears; then settles what was in doubt to
    /// what recovery decided.
    fn verify(&mut self, c: &mut Client, round: usize);
}

/// One kill -9 test's configuration.
pub struct Rounds<'a> {
    /// Names the test in the line that reports its rounds and seed.
    pub name: &'a str,
    /// The server's flags, at every start.
    pub flags: &'a [&'a str],
    /// Rounds when `FERRITE_CRASH_ITERS` does not set them.
    pub rounds: usize,
    /// Concurrent clients in each round.
    pub clients: usize,
    /// Mixed with the process id: the kill delays follow from it.
    pub seed: u64,
    /// Milliseconds the load runs before each kill: drawn from this range.
    pub kill_ms: Range<u64>,
}

/// A server that is killed when dropped, so that a failed check leaves no
/// server running.
pub struct Running(pub Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The server as the last restart recovered it, still running (it is
/// killed on drop), with the ledger it was checked against.
pub struct Survivor<L> {
    pub server: Running,
    pub port: u16,
    pub ledger: L,
    /// How many rounds ran.
    pub rounds: usize,
    /// The data directory, dropped after the server (fields drop in order).
    dir: TempDir,
}

impl<L> Survivor<L> {
    /// Kills the server and hands back its data directory, for checks of
    /// the files it left.
    pub fn stop(self) -> TempDir {
        let Survivor { server, dir, .. } = self;
        drop(server);
        dir
    }
}

fn verify<L: Ledger>(ledger: &Mutex<L>, port: u16, round: usize) {
    let mut c = Client::connect(port).expect("connect after restart");
    ledger.lock().unwrap().verify(&mut c, round);
}

impl Rounds<'_> {
    /// Runs the rounds from an empty data directory with `ledger` as what
    /// is known at the start, and returns the last restart, checked.
    pub fn run<L: Ledger>(&self, ledger: L) -> Survivor<L> {
        let asked = std::env::var("FERRITE_CRASH_ITERS").ok();
        let rounds = asked.and_then(|v| v.parse().ok()).unwrap_or(self.rounds);
        let dir = tempfile::tempdir().expect("a data directory");
        let shared = Arc::new(Mutex::new(ledger));
        let mut seed = self.seed ^ u64::from(std::process::id());
        eprintln!("{}: {rounds} rounds, seed {seed:#x}", self.name);
        let spread = self.kill_ms.end.saturating_sub(self.kill_ms.start).max(1);
        for round in 0..rounds {
            let (child, port) = start_server(dir.path(), self.flags);
            let mut server = Running(child);
            verify(&shared, port, round);
            let stop = Arc::new(AtomicBool::new(false));
            let threads: Vec<_> = (0..self.clients)
                .map(|client| {
                    let (ledger, stop) = (Arc::clone(&shared), Arc::clone(&stop));
                    let who = Who { round, client };
                    std::thread::spawn(move || L::client(&ledger, port, who, &stop))
                })
                .collect();
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let delay = self.kill_ms.start + (seed >> 33) % spread;
            kill_after(delay, &mut server.0, &stop, threads);
        }
        let (child, port) = start_server(dir.path(), self.flags);
        let server = Running(child);
        verify(&shared, port, rounds);
        let ledger = match Arc::try_unwrap(shared) {
            Ok(ledger) => ledger.into_inner().expect("a ledger no client poisoned"),
            Err(_) => unreachable!("every client thread was joined"),
        };
        Survivor {
            server,
            port,
            ledger,
            rounds,
            dir,
        }
    }
}
