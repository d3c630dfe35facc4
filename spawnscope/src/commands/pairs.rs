//! `spawnscope pairs`: a benchmark's alternating pairs (pairs.csv) to their figures, one JSON
//! object on stdout for the script to print.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;

use crate::analyse::paired::{self, Pair};
use crate::cli::usage_error;

/// `spawnscope pairs CSV --workload W [--exclude N,…] [--margin M] [--programs PROGRAMS_CSV]`
pub fn command(
    csv: &Path,
    workload: &str,
    exclude: &[u32],
    margin: f64,
    programs: Option<&Path>,
) -> ExitCode {
    if !(margin.is_finite() && margin > 0.0) {
        return usage_error(format!("--margin must be above 0, not {margin}"));
    }
    let pairs = match read(csv) {
        Ok(p) => p,
        Err(err) => return usage_error(format!("{}: {err:#}", csv.display())),
    };
    if !pairs.iter().any(|p| p.workload == workload) {
        return usage_error(format!(
            "{}: no pair of workload '{workload}'",
            csv.display()
        ));
    }
    let mut figures = paired::figures(&pairs, workload, exclude, margin);
    if let Some(path) = programs {
        match program_runs(path, workload) {
            Ok(runs) => paired::add_per_program_run(&mut figures, &pairs, exclude, &runs),
            Err(err) => return usage_error(format!("{}: {err:#}", path.display())),
        }
    }
    match serde_json::to_string(&figures) {
        Ok(json) => {
            println!("{json}");
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("spawnscope: {err}");
            ExitCode::from(1)
        }
    }
}

/// One row of the benchmark's programs.csv: one BPF program of one pair's traced run.
#[derive(serde::Deserialize)]
struct ProgramRow {
    workload: String,
    pair: u32,
    events: u64,
}

/// Per pair of `workload`, the traced run's program runs (every program's events summed).
fn program_runs(csv: &Path, workload: &str) -> anyhow::Result<BTreeMap<u32, u64>> {
    let mut reader = csv::Reader::from_path(csv).context("cannot read")?;
    let mut runs = BTreeMap::new();
    for (i, row) in reader.deserialize::<ProgramRow>().enumerate() {
        let row = row.with_context(|| format!("row {}", i + 1))?;
        if row.workload == workload {
            *runs.entry(row.pair).or_insert(0) += row.events;
        }
    }
    Ok(runs)
}

fn read(csv: &Path) -> anyhow::Result<Vec<Pair>> {
    let mut reader = csv::Reader::from_path(csv).context("cannot read")?;
    reader
        .deserialize()
        .enumerate()
        .map(|(i, row)| row.with_context(|| format!("row {}", i + 1)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_benchmark_csv_is_read_with_an_empty_bpf_time_as_none() {
        let dir = tempfile::tempdir().unwrap();
        let csv = dir.path().join("pairs.csv");
        // The benchmark's header, extra reference columns included (they are ignored).
        std::fs::write(
            &csv,
            "workload,pair,first,untraced_wall_s,untraced_cpu_s,traced_wall_s,traced_cpu_s,bpf_s,bpf_sampled_share,untraced_rusage_cpu_s,traced_rusage_cpu_s\n\
             threads,1,untraced,0.297,0.2075,0.2535,0.2834,0.0218,0.1089,0.1958,0.2706\n\
             threads,2,traced,0.241,0.2182,0.2692,0.2473,,,0.2061,0.2326\n",
        )
        .unwrap();
        let pairs = read(&csv).unwrap();
        assert_eq!(pairs.len(), 2);
        assert_eq!(pairs[0].bpf_s, Some(0.0218));
        assert_eq!(pairs[1].bpf_s, None);
        assert_eq!(pairs[1].first, "traced");
        // A row that is not a number where one is needed names its row.
        std::fs::write(
            &csv,
            "workload,pair,first,untraced_wall_s,untraced_cpu_s,traced_wall_s,traced_cpu_s,bpf_s\n\
             threads,1,untraced,x,1,1,1,\n",
        )
        .unwrap();
        let err = format!("{:#}", read(&csv).unwrap_err());
        assert!(err.starts_with("row 1"), "{err}");
    }

    #[test]
    fn a_traced_runs_program_runs_are_summed_per_pair_of_its_workload() {
        let dir = tempfile::tempdir().unwrap();
        let csv = dir.path().join("programs.csv");
        std::fs::write(
            &csv,
            "workload,pair,program,tracepoint,events,total_ns\n\
             threads,1,a,x,100,5\nthreads,1,b,y,50,5\nthreads,2,a,x,70,1\ngoroutines,1,a,x,9,1\n",
        )
        .unwrap();
        let runs = program_runs(&csv, "threads").unwrap();
        assert_eq!(runs, BTreeMap::from([(1, 150), (2, 70)]));
        assert_eq!(program_runs(&csv, "goroutines").unwrap()[&1], 9);
    }
}
