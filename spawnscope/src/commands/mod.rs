//! One file per subcommand, thin: each parses nothing (cli.rs did), calls measure/ to run, record/
//! to read and write, analyse/ to compute and render/ to format, and says what it did. `derive`
//! is what `run`, `compare` and `report` share: a run directory's figures, and a set of runs'
//! exports.

pub mod check;
pub mod compare;
pub mod derive;
pub mod docs;
pub mod flame;
pub mod pairs;
pub mod perfetto_cut;
pub mod probe_cost;
pub mod published;
pub mod report;
pub mod run;
pub mod runtime_trace;
pub mod schema;
pub mod sysctl;
pub mod warmup;
