//! From raw records to figures, and nothing else: no process is started, no file is read or
//! written here (the commands load records and write what is derived). One run: its summary (time,
//! memory that adds up, phases), its probe figures, the kernel's waits and where its CPU time went. Several runs:
//! cells, fits over N (and whether each is resolved at the N measured), and published experiments beside ours.
//! One module per concern (ARCHITECTURE.md), the same names as render's, so that where a figure
//! is computed and where it is shown are found the same way.

pub mod comparisons;
pub mod memory;
pub mod probes;
pub mod run;
pub mod runtimes;
pub mod serving;
pub mod time;
pub mod traces;
// The tests of the crates above (render, studies) build their fixtures with it too.
#[cfg(any(test, feature = "test-support"))]
pub mod test_support;
