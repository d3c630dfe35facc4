//! SIGINT, SIGTERM and SIGHUP during a run: the processes the run started are killed, and the
//! run then unwinds through its normal cleanup (sysctls restored, cgroup removed, raw data kept)
//! before exiting with 128 + the signal.

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::Result;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use spawnscope_collector::launch::kill;

use record::process::signal_name;

#[derive(Clone)]
pub struct Interrupts {
    received: Arc<AtomicI32>,
    children: Arc<Mutex<Vec<u32>>>,
}

impl Interrupts {
    /// Starts the thread that handles the signals for the rest of the process's life.
    pub fn install() -> Result<Self> {
        let interrupts = Interrupts {
            received: Arc::new(AtomicI32::new(0)),
            children: Arc::default(),
        };
        let mut signals = Signals::new([SIGINT, SIGTERM, SIGHUP])?;
        let handler = interrupts.clone();
        std::thread::Builder::new()
            .name("signals".into())
            .spawn(move || {
                for signal in signals.forever() {
                    if handler.received.swap(signal, Ordering::SeqCst) == 0 {
                        eprintln!(
                            "\nspawnscope: {} received: stopping the run and restoring the machine",
                            signal_name(signal)
                        );
                    }
                    for &pid in handler
                        .children
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .iter()
                    {
                        kill(pid);
                    }
                }
            })?;
        Ok(interrupts)
    }

    /// No handler: nothing is ever received (for tests of what stops on a signal).
    pub fn none() -> Self {
        Interrupts {
            received: Arc::new(AtomicI32::new(0)),
            children: Arc::default(),
        }
    }

    /// A process of ours to kill if a signal comes.
    pub fn watch(&self, pid: u32) {
        self.children
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(pid);
        // A signal that came just before is not lost.
        if self.received().is_some() {
            kill(pid);
        }
    }

    pub fn unwatch(&self, pid: u32) {
        self.children
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|&p| p != pid);
    }

    pub fn received(&self) -> Option<i32> {
        Some(self.received.load(Ordering::SeqCst)).filter(|&s| s != 0)
    }
}
