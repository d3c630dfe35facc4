//! Which K CPUs a run confined to K CPUs gets (`run --cpu-count K`): one CPU per physical core
//! first, SMT siblings after, of the CPUs the conductor may use — so that K = 2 on a machine with
//! SMT is two cores, not one core's two hyperthreads.

use std::fs;

use anyhow::{bail, Result};

use crate::limits::{cpu_list, usable_cpus};

/// The policy in words (run.json and `--help` say it).
pub const POLICY: &str =
    "one CPU per physical core first (cores in the order of their lowest CPU), SMT siblings after";

/// A CPU and the physical core it is on: (package id, core id).
pub type Placed = (usize, (u32, u32));

/// Where each CPU sits, from /sys/devices/system/cpu/cpuN/topology. A CPU whose topology cannot
/// be read is taken as a core of its own (a kernel without CONFIG_SCHED_SMT still lists them).
pub fn read_topology(cpus: &[usize]) -> Vec<Placed> {
    let read = |cpu: usize, file: &str| -> Option<u32> {
        fs::read_to_string(format!("/sys/devices/system/cpu/cpu{cpu}/topology/{file}"))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    cpus.iter()
        .map(|&cpu| {
            let place = read(cpu, "physical_package_id")
                .zip(read(cpu, "core_id"))
                // Unknown: a core of its own, numbered past any real one.
                .unwrap_or((u32::MAX, cpu as u32));
            (cpu, place)
        })
        .collect()
}

/// The CPUs in the policy's order: each core's lowest CPU (cores ordered by that CPU), then each
/// core's second CPU, and so on.
pub fn policy_order(placed: &[Placed]) -> Vec<usize> {
    let mut sorted = placed.to_vec();
    sorted.sort_unstable();
    // Rank of each CPU among its core's CPUs (0: the core's lowest).
    let mut ranked: Vec<(usize, usize)> = sorted
        .iter()
        .map(|&(cpu, place)| {
            let rank = sorted
                .iter()
                .filter(|&&(other, p)| p == place && other < cpu)
                .count();
            (rank, cpu)
        })
        .collect();
    // Cores are met in the order of their lowest CPU, so (rank, cpu) orders them as the policy says.
    ranked.sort_unstable();
    ranked.into_iter().map(|(_, cpu)| cpu).collect()
}

/// The first `k` CPUs of `usable` in the policy's order, sorted; bad input past what is usable.
pub fn first_k(k: usize, placed: &[Placed]) -> Result<Vec<usize>> {
    if k == 0 {
        bail!("a run needs at least one CPU");
    }
    if k > placed.len() {
        let usable: Vec<usize> = placed.iter().map(|p| p.0).collect();
        bail!(
            "{k} CPUs asked, this process may run on {} ({})",
            placed.len(),
            cpu_list(&usable)
        );
    }
    let mut cpus: Vec<usize> = policy_order(placed).into_iter().take(k).collect();
    cpus.sort_unstable();
    Ok(cpus)
}

/// `--cpu-count K` on this machine: the CPUs, or why not (bad input).
pub fn cpus_for_count(k: usize) -> Result<Vec<usize>> {
    first_k(k, &read_topology(&usable_cpus()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cores_first_then_their_siblings() {
        // 2 packages × 2 cores × 2 threads, numbered as Intel does: siblings n and n+4.
        let placed: Vec<Placed> = (0..8)
            .map(|cpu| (cpu, ((cpu % 4 / 2) as u32, (cpu % 2) as u32)))
            .collect();
        assert_eq!(policy_order(&placed), vec![0, 1, 2, 3, 4, 5, 6, 7]);
        // Siblings numbered side by side (0,1 one core): the even ones first.
        let adjacent: Vec<Placed> = (0..8).map(|cpu| (cpu, (0, (cpu / 2) as u32))).collect();
        assert_eq!(policy_order(&adjacent), vec![0, 2, 4, 6, 1, 3, 5, 7]);
        assert_eq!(first_k(3, &adjacent).unwrap(), vec![0, 2, 4]);
        assert_eq!(first_k(5, &adjacent).unwrap(), vec![0, 1, 2, 4, 6]);
    }

    #[test]
    fn core_ids_repeat_across_packages_and_are_told_apart() {
        // Two packages whose cores are both numbered 0: two cores, not two siblings.
        let placed: Vec<Placed> = vec![(0, (0, 0)), (1, (1, 0)), (2, (0, 0)), (3, (1, 0))];
        assert_eq!(first_k(2, &placed).unwrap(), vec![0, 1]);
    }

    #[test]
    fn more_cpus_than_usable_or_none_is_bad_input() {
        let placed: Vec<Placed> = vec![(0, (0, 0)), (3, (0, 1))];
        let err = first_k(3, &placed).unwrap_err().to_string();
        assert!(err.contains("may run on 2 (0,3)"), "{err}");
        assert!(first_k(0, &placed).is_err());
        assert_eq!(first_k(2, &placed).unwrap(), vec![0, 3]);
    }

    #[test]
    fn this_machine_gives_one_cpu_and_all_of_them() {
        let usable = usable_cpus().unwrap();
        assert_eq!(cpus_for_count(1).unwrap().len(), 1);
        assert_eq!(cpus_for_count(usable.len()).unwrap(), usable);
        assert!(cpus_for_count(usable.len() + 1).is_err());
    }
}
