//! `spawnscope report DIR…`: what runs already on disk say, recomputed from their raw records (no
//! run is repeated, and no run directory is rewritten): each run's summary, several side by
//! side, and for several runs or a compare directory the exports, charts and report.html.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::cli::usage_error;
use crate::commands::derive::{self, Writes};
/// The deepest directory holding every path.
fn common_parent(paths: &[PathBuf]) -> Option<PathBuf> {
    let abs: Vec<PathBuf> = paths
        .iter()
        .map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()))
        .collect();
    let first = abs.first()?.parent()?.to_path_buf();
    let mut common = first;
    while !abs.iter().all(|p| p.starts_with(&common)) {
        common = common.parent()?.to_path_buf();
    }
    Some(common)
}

/// `spawnscope report DIR… [--out DIR]`: every run's summary recomputed; for several runs or a
/// compare directory, the compare exports, charts and report.html as well. No run is repeated.
/// What `report` writes for a set of runs, in its output directory.
const EXPORTS: [&str; 6] = [
    record::COMPARE_JSON,
    record::COMPARE_CSV,
    record::FITS_CSV,
    record::COMPARE_MD,
    record::REPORT_HTML,
    record::CHARTS,
];

pub fn command(dirs: &[PathBuf], out: Option<PathBuf>) -> ExitCode {
    let runs = match record::expand(dirs) {
        Ok(runs) => runs,
        Err(err) => return usage_error(format!("{err:#}")),
    };
    // Run directories named one by one: their summaries on stdout, side by side, as before.
    let given: Vec<&PathBuf> = dirs
        .iter()
        .filter(|d| d.join(record::RUN).is_file())
        .collect();
    let mut side = Vec::new();
    for dir in &given {
        match derive::run_dir(dir, Writes::Missing) {
            Ok(derived) => {
                print!("{}", render::run::summary::terminal(&derived.summary, dir));
                side.push((derived.summary, derived.loaded.machine));
            }
            Err(err) => return usage_error(format!("{err:#}")),
        }
    }
    if side.len() > 1 {
        println!("\n{}", render::run::summary::side_by_side(&side));
    }
    let compare_dirs: Vec<&PathBuf> = dirs
        .iter()
        .filter(|d| !d.join(record::RUN).is_file())
        .collect();
    let target = match (out, compare_dirs.as_slice()) {
        (Some(out), _) => Some(out),
        (None, [one]) => Some((*one).clone()),
        (None, _) if runs.len() > 1 => common_parent(&runs),
        _ => None,
    };
    let Some(target) = target else {
        return ExitCode::SUCCESS;
    };
    // A set's plan is in a compare directory given, or where the exports go: trace.sh's main job
    // writes its own there, beside its runs.
    let plan = record::find_plan(dirs).or_else(|| record::find_plan(std::slice::from_ref(&target)));
    // Said before anything there is replaced.
    let replaced: Vec<&str> = EXPORTS
        .iter()
        .copied()
        .filter(|f| target.join(f).exists())
        .collect();
    eprintln!(
        "spawnscope report: writing the set's exports to {}{}",
        target.display(),
        if replaced.is_empty() {
            String::new()
        } else {
            format!(" (replacing {})", replaced.join(", "))
        }
    );
    match std::fs::create_dir_all(&target)
        .map_err(anyhow::Error::from)
        .and_then(|_| derive::comparison(&runs, plan, &target))
    {
        Ok(report) => {
            if !compare_dirs.is_empty() {
                println!("{}", render::comparisons::compare::markdown(&report));
            } else {
                for h in &report.headlines {
                    println!("\n{}", h.line());
                }
                if let Some(line) = render::comparisons::compare::times_line(&report.cells) {
                    println!("{line}");
                }
            }
            for f in EXPORTS {
                record::give_to_invoking_user(&target.join(f));
            }
            eprintln!(
                "spawnscope report: {} runs from {} machine(s): compare.md, compare.json, compare.csv, compare-fits.csv, charts/ and report.html in {}",
                report.runs.len(),
                report.machines.len(),
                target.display()
            );
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("spawnscope: {err:#}");
            ExitCode::from(1)
        }
    }
}
