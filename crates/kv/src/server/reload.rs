//! SAVE, DEBUG RELOAD and LOADAOF on the event loop: what they need of the
//! log and the data directory (`open_data_dir`, as at start-up).

use std::sync::Arc;

use super::Server;
use crate::rewrite::driver::Wake;
use crate::rewrite::open_dir::{open_data_dir, Access, Opened};
use crate::state::unix_ms;

impl Server {
    /// SAVE: appends what ran so far, makes the log durable, and replies.
    pub(super) fn save(&mut self, reply: &mut crate::resp::ReplyBuf) {
        self.state.save_requested = false;
        self.log_command();
        self.log.flush();
        match (self.log.sync_wait())() {
            Ok(()) => {
                self.state.start_unix_s = unix_ms() / 1000;
                self.state.rewrite.changes_since_save = 0;
                reply.ok();
            }
            Err(e) => reply.error(&format!("ERR SAVE could not make the log durable: {e}")),
        }
    }

    /// DEBUG RELOAD and LOADAOF: every command so far is in the log, so
    /// closing it (which flushes and syncs it), emptying the keyspace and
    /// opening the data directory again as at start-up loads the dataset
    /// back from Ferrite's own files: base parts, then the logs replayed.
    pub(super) fn reload(&mut self) {
        self.state.reload_requested = false;
        if let Some(rewriter) = &mut self.rewriter {
            rewriter.wait(&mut self.state);
        }
        if !self.state.config.appendonly {
            // LOADAOF with the log off, as Redis's: what the directory's
            // log files hold (the last rewrite's, or the log as it was
            // when turned off); nothing there is created or removed.
            self.empty_dataset();
            if let Err(e) = open_data_dir(&mut self.state, Access::Load) {
                tracing::error!("DEBUG LOADAOF could not load the log files: {e}");
            }
            self.state.keyspace.now_ms = unix_ms();
            return;
        }
        if let Err(e) = self.log.close() {
            self.state.log_failure = Some(format!("closing the log for DEBUG RELOAD: {e}"));
            return;
        }
        self.reopen_data("DEBUG RELOAD");
    }

    /// Empties the keyspace and loads the data directory again as at
    /// start-up (the log is closed).
    pub(super) fn reopen_data(&mut self, why: &str) {
        self.empty_dataset();
        let waker = Arc::clone(&self.waker);
        let wake = Wake::new(move || {
            let _ = waker.wake();
        });
        match open_data_dir(&mut self.state, Access::Serve(wake)).and_then(Opened::into_serving) {
            Ok((opened, rewriter)) => {
                self.log = opened.log;
                self.rewriter = rewriter;
            }
            Err(e) => {
                tracing::error!("{why} could not load the data back: {e}");
                self.state.log_failure = Some(format!("reloading for {why}: {e}"));
            }
        }
        self.state.keyspace.now_ms = unix_ms();
        // The running server's history is already its own; the log's mark
        // matters only at start-up.
        self.state.repl.log_mark = None;
    }

    /// Empties the keyspace and the function libraries (they are in the
    /// log too, and load back with the rest).
    fn empty_dataset(&mut self) {
        let databases = self.state.keyspace.databases();
        self.state.keyspace = crate::keyspace::Keyspace::new(databases);
        self.state.functions = Default::default();
    }
}
