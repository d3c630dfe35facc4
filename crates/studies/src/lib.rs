//! The published studies spawnscope reproduces, one file each: the article (its source line), its
//! published table, the programs or runs that reproduce it, and how our rows are matched to its
//! rows. `STUDIES` is the registry: `compare --reproduce NAME` offers every study with a plan, and
//! a comparison whose plan names a study gets that study's table beside its runs.
//!
//! A study is data and pure matching: it builds nothing and reads nothing itself (what it runs is
//! prepared by measure/, what it matches is analysed by analyse/).

pub mod async_runtimes_2024;
pub mod bench_of_chan;
pub mod hansen_2023;
pub mod libcopp_2018;
pub mod rust_http_2023;

use std::path::PathBuf;

use analyse::comparisons::reproduce::Reproduce;
use analyse::comparisons::run_point::RunPoint;
use measure::loadgen::LoadOptions;
use measure::sweep::CompareOptions;
use record::Plan;

/// What `compare --reproduce` was given besides the study's name.
pub struct Asked<'a> {
    pub out: PathBuf,
    pub repeats: Option<u32>,
    pub memory_limit: Option<u64>,
    pub cpus: Option<&'a str>,
    /// Workload flags as given (a study runs its article's own).
    pub flags: &'a [(String, String)],
    /// The load flags given, laid over the article's (`--duration`, …).
    pub load_over: &'a dyn Fn(LoadOptions) -> LoadOptions,
}

/// A study's runs on this host, from what compare was asked; Err: one line on what is wrong.
pub type PlanFn = fn(&Asked) -> Result<CompareOptions, String>;

/// One published study.
pub struct Study {
    /// `--reproduce NAME`, plan.json's `reproduce`.
    pub name: &'static str,
    /// What `--reproduce`'s help says of it.
    pub about: &'static str,
    /// The article: author, title, year, where it was published.
    pub source: &'static str,
    /// The runs that reproduce it on this host; Err: one line on what was asked wrongly. None:
    /// the study is run by a script (scripts/bench-chan.sh), not by compare.
    pub plan: Option<PlanFn>,
    /// Its published table beside our runs.
    pub table: Option<fn(&[RunPoint], &Plan) -> Reproduce>,
    /// Its published table as CSV in the article's own shape, where a script sets ours beside it.
    pub published_csv: Option<fn() -> String>,
}

/// Every study, in the order `--reproduce` lists them.
pub const STUDIES: [&Study; 5] = [
    &hansen_2023::STUDY,
    &async_runtimes_2024::STUDY,
    &rust_http_2023::STUDY,
    &libcopp_2018::STUDY,
    &bench_of_chan::STUDY,
];

pub fn find(name: &str) -> Option<&'static Study> {
    STUDIES.iter().copied().find(|s| s.name == name)
}

/// The studies `compare --reproduce` can run, for clap (name and help).
pub fn runnable() -> impl Iterator<Item = &'static Study> {
    STUDIES.iter().copied().filter(|s| s.plan.is_some())
}

/// The table of the study a plan names, beside the runs; None for a plain sweep.
pub fn reproduce(runs: &[RunPoint], plan: &Plan) -> Option<Reproduce> {
    let study = find(plan.reproduce.as_deref()?)?;
    Some((study.table?)(runs, plan))
}

/// Refuses the workload flags a study that runs its article's own flags cannot take.
pub fn no_flags(asked: &Asked, name: &str, why: &str) -> Result<(), String> {
    if asked.flags.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "--reproduce {name} {why}; workload flags do not apply"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_study_has_its_own_name_and_a_table_or_a_script() {
        for (i, s) in STUDIES.iter().enumerate() {
            assert!(STUDIES[..i].iter().all(|o| o.name != s.name), "{}", s.name);
            assert!(!s.source.is_empty() && !s.about.is_empty(), "{}", s.name);
            // Run by compare: its table is rendered beside the runs.
            assert_eq!(s.plan.is_some(), s.table.is_some(), "{}", s.name);
        }
        assert_eq!(find("libcopp-2018").map(|s| s.name), Some("libcopp-2018"));
        assert!(runnable().all(|s| s.name != "bench-of-chan"));
    }
}
