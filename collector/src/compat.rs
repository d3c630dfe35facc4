//! TRANSITIONAL, to be reverted when the conductor switches to [`crate::launch`]: the crate-root
//! name `Rusage` still means the four counters the conductor's costs.rs builds field by field
//! (`Rusage { minflt, majflt, nvcsw, nivcsw }`), so the workspace keeps compiling until then. The
//! collector itself uses only [`crate::launch::Rusage`]; cross_checks takes either.

use serde::{Deserialize, Serialize};

use crate::launch;

/// The four getrusage counters the cross-checks compare (a workload result's `rusage`, in part).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rusage {
    pub minflt: u64,
    pub majflt: u64,
    pub nvcsw: u64,
    pub nivcsw: u64,
}

impl From<Rusage> for launch::Rusage {
    fn from(r: Rusage) -> Self {
        launch::Rusage {
            minflt: r.minflt,
            majflt: r.majflt,
            nvcsw: r.nvcsw,
            nivcsw: r.nivcsw,
            ..launch::Rusage::default()
        }
    }
}
