//! `spawnscope published STUDY`: a study's published figures, for scripts that run a study
//! themselves (scripts/bench-chan.sh): its source line, then its CSV where it has one.

use std::process::ExitCode;

use crate::cli::usage_error;
pub fn command(name: &str) -> ExitCode {
    let Some(study) = studies::find(name) else {
        return usage_error(format!("no study {name}"));
    };
    println!("# {}", study.source);
    if let Some(csv) = study.published_csv {
        print!("{}", csv());
    }
    ExitCode::SUCCESS
}
