//! `spawnscope flame`: a run's flame graph, or two runs side by side on one CPU-time scale, or as
//! a differential.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::cli::usage_error;
use crate::commands::derive::{self, Writes};
use render::time::flame;

/// `spawnscope flame DIR [DIR] --out SVG [--diff]`
pub fn command(dirs: &[PathBuf], out: &Path, diff: bool) -> ExitCode {
    if diff && dirs.len() != 2 {
        return usage_error("--diff compares two results directories");
    }
    let mut sides = Vec::new();
    for dir in dirs {
        let loaded = match record::load(dir) {
            Ok(l) => l,
            Err(err) => return usage_error(format!("{}: {err:#}", dir.display())),
        };
        match derive::profile(dir, &loaded, Writes::Missing) {
            Ok(Some(derive::RunProfile { profile, .. })) => {
                let cpu_us = loaded.run.rusage.map_or(0, |r| r.user_us + r.sys_us);
                let per = cpu_us as f64 / profile.samples().max(1) as f64;
                sides.push((loaded.run.target.label(), profile, per));
            }
            Ok(None) => {
                return usage_error(format!(
                    "{} was not recorded with `run --perf` (no perf.data)",
                    dir.display()
                ))
            }
            Err(err) => {
                eprintln!("spawnscope: {}: {err:#}", dir.display());
                return ExitCode::from(1);
            }
        }
    }
    let sides: Vec<flame::Side> = sides
        .iter()
        .map(|(label, profile, per)| flame::Side {
            label: label.clone(),
            profile,
            us_per_sample: *per,
        })
        .collect();
    let drawn = if diff {
        flame::differential(&sides[0], &sides[1])
    } else {
        flame::side_by_side(&sides)
    };
    match drawn.and_then(|svg| {
        std::fs::write(out, svg).map_err(|e| anyhow::anyhow!("writing {}: {e}", out.display()))
    }) {
        Ok(()) => {
            println!("{}", out.display());
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("spawnscope: {err:#}");
            ExitCode::from(1)
        }
    }
}
