//! `spawnscope pairs`: a benchmark's alternating pairs (pairs.csv) to their figures, one JSON
//! object on stdout for the script to print.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;

use crate::cli::usage_error;
use analyse::time::paired::{self, Pair};
use analyse::{probes::overhead_band, probes::probe_cost};

/// `spawnscope pairs CSV --workload W [--exclude N,…] [--margin M] [--programs PROGRAMS_CSV
/// [--band PROBE_COST_JSON]]`
pub fn command(
    csv: &Path,
    workload: &str,
    exclude: &[u32],
    margin: f64,
    programs: Option<&Path>,
    band: Option<&Path>,
) -> ExitCode {
    if band.is_some() && programs.is_none() {
        return usage_error("--band needs --programs (the traced runs' events)".to_string());
    }
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
    let mut json = match serde_json::to_value(&figures) {
        Ok(v) => v,
        Err(err) => {
            eprintln!("spawnscope: {err}");
            return ExitCode::from(1);
        }
    };
    if let (Some(band_path), Some(programs_path)) = (band, programs) {
        let checked = (|| -> anyhow::Result<Option<overhead_band::Band>> {
            let prices =
                probe_cost_prices(band_path).with_context(|| band_path.display().to_string())?;
            let rows =
                program_rows(programs_path).with_context(|| programs_path.display().to_string())?;
            let used: Vec<u32> = pairs
                .iter()
                .filter(|p| p.workload == workload && !exclude.contains(&p.pair))
                .map(|p| p.pair)
                .collect();
            Ok(figures
                .cpu_difference_s
                .as_ref()
                .map(|d| overhead_band::band(&prices, &rows, workload, &used, d)))
        })();
        match checked {
            Ok(b) => json["band"] = serde_json::to_value(b).unwrap_or_default(),
            Err(err) => return usage_error(format!("{err:#}")),
        }
    }
    match serde_json::to_string(&json) {
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

/// probe-cost's prices from its JSON's raw rounds (`measured`), the figures derived again here.
fn probe_cost_prices(path: &Path) -> anyhow::Result<Vec<overhead_band::Price>> {
    #[derive(serde::Deserialize)]
    struct File {
        measured: record::probe_cost::Measured,
    }
    let text = std::fs::read_to_string(path).context("cannot read")?;
    let file: File = serde_json::from_str(&text).context("not probe-cost's --json output")?;
    let prices = overhead_band::prices(&probe_cost::figures(&file.measured));
    if prices.is_empty() {
        anyhow::bail!("no hook with both the lean program and its floor timed");
    }
    Ok(prices)
}

fn program_rows(csv: &Path) -> anyhow::Result<Vec<overhead_band::ProgramRow>> {
    let mut reader = csv::Reader::from_path(csv).context("cannot read")?;
    reader
        .deserialize()
        .enumerate()
        .map(|(i, row)| row.with_context(|| format!("row {}", i + 1)))
        .collect()
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
    fn probe_costs_committed_set_prices_every_hook_from_its_raw_rounds() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let set = root.join("docs/bench-probe-cost/m1/probe-cost.json");
        let prices = probe_cost_prices(&set).unwrap();
        assert_eq!(prices.len(), 10, "{prices:?}");
        // Derived again from the rounds: the figures the set's JSON holds.
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&set).unwrap()).unwrap();
        let enter = &json["figures"]["hooks"][0];
        assert_eq!(enter["hook"], "raw_syscalls:sys_enter");
        let (ours, floor) = (
            enter["judged"]["ours_ns"].as_f64().unwrap(),
            enter["judged"]["floor_ns"].as_f64().unwrap(),
        );
        assert!(
            (prices[0].low_ns - (ours - floor)).abs() < 1e-9,
            "{:?}",
            prices[0]
        );
        assert!(prices[0].high_ns >= ours, "{:?}", prices[0]);
        for p in &prices {
            assert!(0.0 <= p.low_ns && p.low_ns <= p.high_ns, "{p:?}");
        }
        // A set from before the pair counted its filtered runs reads as all the run's own.
        let rows = program_rows(&root.join("docs/bench-overhead/programs.csv")).unwrap();
        assert!(rows.iter().all(|r| r.filtered_out == 0) && !rows.is_empty());
        // What is not probe-cost's output is refused, naming why.
        let err = format!(
            "{:#}",
            probe_cost_prices(&root.join("docs/bench-overhead/figures-threads.json")).unwrap_err()
        );
        assert!(err.contains("not probe-cost's --json output"), "{err}");
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
