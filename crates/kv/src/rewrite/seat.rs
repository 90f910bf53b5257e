//! The event loop's core, lent to the rewrite's bursts.
//!
//! Under a CPU share (`aof-rewrite-cpu-share`) the workers run in bursts
//! ([`super::pace::Burst`]). On a machine whose cores are all busy (the
//! event loop on one, its clients or other programs on the rest) a burst
//! shares a core with whatever runs there, and since the loop and its
//! clients wait for each other, slowing either slows both: the clients
//! lost about the workers' whole CPU time
//! (`docs/results/rewrite-cpu-share.md`). Two threads that wait for each other lose much less by
//! sharing one core than a busy thread costs the one it shares a core
//! with: the loop and the bench's client pinned to the same core kept
//! 0.72-0.75 of the rate they had on two (1M x 100 B). So a burst takes
//! the loop's core whole, and the loop waits the burst out on the other
//! cores of its set, beside whatever runs there; when the burst ends it
//! gets its set back.
//!
//! Only a loop that `cpus::Unstack` has kept off a core is moved: that
//! loop has a core of its own, and the cores it left hold something busy.
//! A loop with its whole set never waited behind anything, so the cores
//! are not all busy and a burst finds one free without help; and a loop
//! pinned to one core (`server_cpulist`) stays where it was put.
//!
//! The seat goes to one worker at a time (the others wait their turn)
//! and from one worker to the next without the loop going back in
//! between. A worker that blocks in a device write steps aside: the loop
//! goes back for the write's length, or the core would idle. The loop's
//! own moves wait while its core is lent.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::ThreadId;

use rustix::thread::{CpuSet, Pid};

/// What a rewrite needs to move the event loop.
#[derive(Clone, Debug)]
struct LoopThread {
    tid: Pid,
    /// The cores it may use at all: its set when it started serving.
    base: CpuSet,
    /// Set while its core is lent.
    lent: Arc<AtomicBool>,
}

thread_local! {
    /// On an event loop's thread: itself ([`register_loop`]).
    static LOOP: RefCell<Option<LoopThread>> = const { RefCell::new(None) };
}

/// Called by the event loop's thread as it starts serving, once its CPU
/// set is what `server_cpulist` makes it.
pub fn register_loop() {
    let Ok(base) = rustix::thread::sched_getaffinity(None) else {
        return;
    };
    let me = LoopThread {
        tid: rustix::thread::gettid(),
        base,
        lent: Arc::default(),
    };
    LOOP.with(|l| *l.borrow_mut() = Some(me));
}

/// On the event loop's thread: whether a rewrite holds its core now (it
/// must not move itself meanwhile).
pub fn is_lent() -> bool {
    LOOP.with(|l| {
        l.borrow()
            .as_ref()
            .is_some_and(|me| me.lent.load(Ordering::Relaxed))
    })
}

/// The loop while its core is lent.
#[derive(Debug)]
struct Lent {
    /// Its core, where the bursts run.
    home: usize,
    /// Its set before, given back after.
    saved: CpuSet,
    /// Its base less `home`: where it waits out the burst.
    away: CpuSet,
}

#[derive(Debug, Default)]
struct State {
    holder: Option<ThreadId>,
    waiting: u32,
    lent: Option<Lent>,
    /// Bursts run on the loop's core so far.
    bursts: u64,
}

/// The event loop's core, for one rewrite's bursts.
#[derive(Debug)]
pub struct Seat {
    event_loop: Option<LoopThread>,
    state: Mutex<State>,
    turn: Condvar,
}

impl Seat {
    /// On the event loop's thread: a seat for the rewrite it starts (one
    /// that never lends where the thread is not a registered loop).
    pub fn for_current_thread() -> Seat {
        Seat {
            event_loop: LOOP.with(|l| l.borrow().clone()),
            state: Mutex::default(),
            turn: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts a burst: waits while another worker holds the loop's core,
    /// then takes it if the loop can be moved (the calling thread then
    /// runs there alone). Returns whether it took it; if not, the caller
    /// runs where it is, beside the other workers.
    pub fn take(&self) -> bool {
        let Some(event_loop) = &self.event_loop else {
            return false;
        };
        let me = std::thread::current().id();
        let mut s = self.lock();
        if s.holder == Some(me) {
            return true;
        }
        s.waiting += 1;
        while s.holder.is_some() {
            s = self.turn.wait(s).unwrap_or_else(|p| p.into_inner());
        }
        s.waiting -= 1;
        if s.lent.is_none() {
            s.lent = lend(event_loop);
        }
        let Some(home) = s.lent.as_ref().map(|l| l.home) else {
            return false;
        };
        s.holder = Some(me);
        s.bursts += 1;
        pin_current_thread(&single(home));
        true
    }

    /// Ends the calling thread's burst: the next worker waiting gets the
    /// core, or else the loop gets its set back.
    pub fn leave(&self) {
        let me = std::thread::current().id();
        let mut s = self.lock();
        if s.holder != Some(me) {
            return;
        }
        s.holder = None;
        if s.waiting == 0 {
            give_back(s.lent.take(), self.event_loop.as_ref());
        }
        drop(s);
        self.turn.notify_one();
    }

    /// Runs `f`, a device write, with the loop back on its core if the
    /// calling thread holds it; the thread waits for the write on the
    /// cores the loop left, and takes the core again after.
    pub fn step_aside<T>(&self, f: impl FnOnce() -> T) -> T {
        let me = std::thread::current().id();
        let aside = {
            let s = self.lock();
            match (&s.lent, &self.event_loop) {
                (Some(lent), Some(event_loop)) if s.holder == Some(me) => {
                    set_affinity(event_loop.tid, &lent.saved);
                    pin_current_thread(&lent.away);
                    Some((event_loop.tid, lent.away, lent.home))
                }
                _ => None,
            }
        };
        let result = f();
        if let Some((tid, away, home)) = aside {
            set_affinity(tid, &away);
            pin_current_thread(&single(home));
        }
        result
    }

    /// Bursts run on the loop's core so far.
    pub fn bursts(&self) -> u64 {
        self.lock().bursts
    }
}

impl Drop for Seat {
    /// Gives the loop its set back if a burst still held its core.
    fn drop(&mut self) {
        let s = self.state.get_mut().unwrap_or_else(|p| p.into_inner());
        give_back(s.lent.take(), self.event_loop.as_ref());
    }
}

/// Gives the loop its set from before the burst, if `lent`.
fn give_back(lent: Option<Lent>, event_loop: Option<&LoopThread>) {
    if let (Some(lent), Some(event_loop)) = (lent, event_loop) {
        set_affinity(event_loop.tid, &lent.saved);
        event_loop.lent.store(false, Ordering::Relaxed);
    }
}

/// Moves the loop off its core if it can be moved (see the module's
/// text); what to give it back after.
fn lend(event_loop: &LoopThread) -> Option<Lent> {
    let saved = rustix::thread::sched_getaffinity(Some(event_loop.tid)).ok()?;
    let home = thread_cpu(event_loop.tid)?;
    let base = event_loop.base;
    if base.count() < 2 || saved == base || !saved.is_set(home) {
        return None;
    }
    let mut away = base;
    away.unset(home);
    event_loop.lent.store(true, Ordering::Relaxed);
    if rustix::thread::sched_setaffinity(Some(event_loop.tid), &away).is_err() {
        event_loop.lent.store(false, Ordering::Relaxed);
        return None;
    }
    Some(Lent { home, saved, away })
}

fn single(cpu: usize) -> CpuSet {
    let mut set = CpuSet::new();
    set.set(cpu);
    set
}

fn set_affinity(tid: Pid, set: &CpuSet) {
    if let Err(e) = rustix::thread::sched_setaffinity(Some(tid), set) {
        tracing::debug!("cannot move the event loop for a rewrite burst: {e}");
    }
}

fn pin_current_thread(set: &CpuSet) {
    if let Err(e) = crate::cpus::set_current_thread(set) {
        tracing::debug!("rewrite worker cannot move: {e}");
    }
}

/// The core thread `tid` of this process last ran on (field 39 of its
/// `stat`).
fn thread_cpu(tid: Pid) -> Option<usize> {
    let path = format!("/proc/self/task/{}/stat", tid.as_raw_nonzero());
    let stat = std::fs::read_to_string(path).ok()?;
    // Fields after the command name (in parentheses, which may hold
    // spaces) start at field 3.
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(39 - 3)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    fn affinity_of(tid: Pid) -> CpuSet {
        rustix::thread::sched_getaffinity(Some(tid)).expect("affinity")
    }

    /// Two CPUs the test process may use, if it has two, and the set of
    /// both (a stand-in loop's base).
    fn two_cpus() -> Option<(usize, usize, CpuSet)> {
        let set = rustix::thread::sched_getaffinity(None).ok()?;
        let mut cpus = (0..CpuSet::MAX_CPU).filter(|&c| set.is_set(c));
        let (a, b) = (cpus.next()?, cpus.next()?);
        let mut both = single(a);
        both.set(b);
        Some((a, b, both))
    }

    /// A stand-in event loop: a thread registered as one, its set
    /// `base`, then `confined` as `Unstack` would leave it, which hands
    /// its seat out and runs (busy, so that it is on its core) until told
    /// to stop.
    struct FakeLoop {
        tid: Pid,
        stop: Arc<AtomicBool>,
        thread: Option<std::thread::JoinHandle<()>>,
    }

    impl FakeLoop {
        fn start(base: &CpuSet, confined: &CpuSet) -> (FakeLoop, Seat) {
            let (send, receive) = mpsc::channel();
            let stop = Arc::new(AtomicBool::new(false));
            let (base, confined, until) = (*base, *confined, Arc::clone(&stop));
            let thread = std::thread::spawn(move || {
                rustix::thread::sched_setaffinity(None, &base).expect("base set");
                register_loop();
                rustix::thread::sched_setaffinity(None, &confined).expect("confined set");
                // Runs once on a core of the confined set, so that its
                // `stat` names one.
                std::hint::black_box((0..1000).sum::<u64>());
                send.send((rustix::thread::gettid(), Seat::for_current_thread()))
                    .expect("send");
                while !until.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            });
            let (tid, seat) = receive.recv().expect("the loop's seat");
            (
                FakeLoop {
                    tid,
                    stop,
                    thread: Some(thread),
                },
                seat,
            )
        }
    }

    impl Drop for FakeLoop {
        fn drop(&mut self) {
            self.stop.store(true, Ordering::Relaxed);
            if let Some(thread) = self.thread.take() {
                thread.join().expect("fake loop");
            }
        }
    }

    #[test]
    fn a_burst_takes_a_confined_loops_core_and_gives_it_back() {
        let Some((a, b, base)) = two_cpus() else {
            return;
        };
        let (fake, seat) = FakeLoop::start(&base, &single(a));
        let worker = std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    assert!(seat.take(), "a confined loop lends its core");
                    let during = (
                        affinity_of(fake.tid),
                        rustix::thread::sched_getaffinity(None).expect("own"),
                    );
                    let aside = seat.step_aside(|| affinity_of(fake.tid));
                    let after_aside = affinity_of(fake.tid);
                    seat.leave();
                    (during, aside, after_aside, affinity_of(fake.tid))
                })
                .join()
                .expect("worker")
        });
        let ((loop_during, worker_during), aside, after_aside, after) = worker;
        assert_eq!(loop_during, single(b), "the loop waits on the other core");
        assert_eq!(worker_during, single(a), "the worker runs on the loop's");
        assert_eq!(aside, single(a), "home for a device write");
        assert_eq!(after_aside, single(b), "and away again after it");
        assert_eq!(after, single(a), "its own set back after the burst");
        assert_eq!(seat.bursts(), 1);
        drop(fake);
    }

    #[test]
    fn a_loop_with_its_whole_set_or_no_loop_lends_nothing() {
        let Some((_, _, base)) = two_cpus() else {
            return;
        };
        let (fake, seat) = FakeLoop::start(&base, &base);
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    assert!(!seat.take(), "not confined: nothing to lend");
                    seat.leave();
                })
                .join()
                .expect("worker");
        });
        assert_eq!(affinity_of(fake.tid), base);
        assert_eq!(seat.bursts(), 0);
        drop(fake);
        // Not on an event loop's thread: a seat that never lends.
        let unregistered = Seat::for_current_thread();
        assert!(!unregistered.take());
        assert_eq!(unregistered.step_aside(|| 7), 7);
    }

    #[test]
    fn the_seat_passes_between_workers_with_the_loop_still_away() {
        let Some((a, b, base)) = two_cpus() else {
            return;
        };
        let (fake, seat) = FakeLoop::start(&base, &single(a));
        let (took, second_took) = (AtomicBool::new(false), AtomicBool::new(false));
        std::thread::scope(|scope| {
            assert!(seat.take());
            took.store(true, Ordering::SeqCst);
            let second = scope.spawn(|| {
                assert!(seat.take());
                second_took.store(true, Ordering::SeqCst);
                let away = affinity_of(fake.tid);
                seat.leave();
                away
            });
            // The second worker waits for the seat (counted as waiting)...
            while seat.lock().waiting == 0 {
                std::thread::yield_now();
            }
            assert!(!second_took.load(Ordering::SeqCst));
            seat.leave();
            // ... and gets it when the first leaves, the loop still away.
            assert_eq!(second.join().expect("second"), single(b));
        });
        assert!(took.load(Ordering::SeqCst) && second_took.load(Ordering::SeqCst));
        assert_eq!(affinity_of(fake.tid), single(a));
        assert_eq!(seat.bursts(), 2);
        drop(fake);
    }

    #[test]
    fn a_threads_core_is_read_from_its_stat() {
        let here = thread_cpu(rustix::thread::gettid()).expect("cpu");
        let set = rustix::thread::sched_getaffinity(None).expect("affinity");
        assert!(set.is_set(here), "{here}");
    }
}
