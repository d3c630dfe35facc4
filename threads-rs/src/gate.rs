//! The release gate of `hold`, `pingpong` and `chain`: one close lets every waiting thread go.

use std::io::{self, PipeReader, PipeWriter, Read};

use crate::PROGRAM;

/// Where tasks wait until main releases them all at once: a pipe no one writes to, each task
/// blocked reading it, released when main closes the write end (its `Opener`): every reader then
/// sees end of file.
///
/// Not a futex. An `RwLock` held for writing was the gate until the slow runs were explained
/// (README, "The slow runs"): since Linux 6.16 a process hashes its private futexes into a table of
/// its own, 16 slots on 2 CPUs, and a wake walks every waiter in its slot under the slot's lock.
/// N tasks parked on one futex fill one slot; std's thread start locks a global Mutex (the
/// stack-overflow handler's thread list), and in the runs where that Mutex hashed to the gate's
/// slot (1 in 16, by address layout) each contended unlock walked every task parked so far:
/// spawning turned quadratic. A pipe's readers wait on the pipe's own queue, outside the hash.
pub struct Gate {
    waiting: PipeReader,
}

/// The write end of a [`Gate`]: dropping it (or `open`) releases every task.
pub struct Opener {
    _write_end: PipeWriter,
}

impl Opener {
    pub fn open(self) {}
}

impl Gate {
    /// A closed gate and what opens it. Before any task exists, so a process without a file
    /// descriptor left for the pipe just stops (exit 1, as when its output fails).
    pub fn closed() -> (Self, Opener) {
        match io::pipe() {
            Ok((waiting, write_end)) => (
                Gate { waiting },
                Opener {
                    _write_end: write_end,
                },
            ),
            Err(err) => {
                eprintln!("{PROGRAM}: no pipe for the release gate: {err}");
                std::process::exit(1);
            }
        }
    }

    /// Blocks until the gate opens.
    pub fn wait(&self) {
        let mut byte = [0u8; 1];
        // Ok(0) is end of file: open (nothing is ever written, so no Ok(1)). A signal interrupting
        // the read waits again; any other error cannot be waited out.
        while let Err(err) = (&self.waiting).read(&mut byte) {
            if err.kind() != io::ErrorKind::Interrupted {
                return;
            }
        }
    }
}
