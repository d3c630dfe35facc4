//! What the kernel matrix (scripts/test-kernels.sh: Debian's 6.1 and 6.12 with cgroup v2 in a
//! VM, the host's 6.18 with cgroup v1) found to differ on a kernel, and what it means for the
//! figures: one line each, said by `check`. Pure: the caller reads the release, the cgroup
//! version and the THP mode.

/// The kernel's known gaps, one line each; none on a kernel where the matrix found none (6.8 and
/// later with cgroup v1).
pub fn known_gaps(release: &str, cgroup_v2: bool, thp: &str) -> Vec<String> {
    let mut out = Vec::new();
    let Some(version) = version(release) else {
        return out;
    };
    if version < (6, 7) {
        out.push(format!(
            "{release}: before 6.7 some tracepoints the collector uses are missing (6.1: ipi_send_cpu/cpumask, csd_queue_cpu, khugepaged_collapse_file): their IPI and collapse figures read \"not available here\", never 0"
        ));
    }
    if version < (6, 2) {
        out.push(format!(
            "{release}: before 6.2 /proc/PID/status RssAnon lags (each thread caches its RSS counts: ~5 KiB a parked thread on 6.1): RSS is read from smaps_rollup Anonymous where the two differ; a moment with no smaps_rollup reading keeps the lag"
        ));
    }
    if version < (6, 8) && thp == "always" {
        out.push(format!(
            "{release}: THP always before 6.8: thread stacks lack VM_NOHUGEPAGE, a stack starting on a 2 MiB boundary gets a huge page: a thread's RSS varies run to run (+0–8 KiB a thread on 6.1, reported as THP), and where threads exit (sleep, churn) those pages stay charged until split (reported as huge pages awaiting their split); THP madvise gives stable figures"
        ));
    }
    if cgroup_v2 {
        out.push(
            "cgroup v2: memory.stat slab counts the objects charged, not the slab pages they fill (~2.4–2.8 KiB a thread uncharged on 6.1 and 6.12): the slab part is /proc/meminfo Slab, host-wide, so slab other processes allocate meanwhile lands in it".to_string(),
        );
    }
    out
}

/// (major, minor) of a release such as 6.1.0-56-amd64 or 6.12.117+deb12-amd64.
fn version(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.trim().split(|c: char| !c.is_ascii_digit());
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn said(gaps: &[String], words: &str) -> bool {
        gaps.iter().any(|g| g.contains(words))
    }

    #[test]
    fn debian_6_1_with_cgroup_v2_and_thp_always_has_all_four() {
        let gaps = known_gaps("6.1.0-56-amd64", true, "always");
        assert_eq!(gaps.len(), 4, "{gaps:#?}");
        assert!(said(&gaps, "before 6.7 some tracepoints"), "{gaps:#?}");
        assert!(said(&gaps, "before 6.2 /proc/PID/status RssAnon lags"));
        assert!(said(&gaps, "THP always before 6.8"));
        assert!(said(&gaps, "cgroup v2: memory.stat slab"));
        assert!(gaps.iter().all(|g| !g.contains('\n')), "one line each");
    }

    #[test]
    fn each_gap_holds_only_on_the_kernels_it_was_found_on() {
        // 6.12 with cgroup v2: only the slab; with THP madvise 6.1 has no stack huge pages.
        assert_eq!(known_gaps("6.12.117+deb12-amd64", true, "always").len(), 1);
        assert!(!said(
            &known_gaps("6.1.0-56-amd64", false, "madvise"),
            "THP"
        ));
        assert_eq!(known_gaps("6.1.0-56-amd64", false, "madvise").len(), 2);
        // 6.5: tracepoints and THP, not the RSS counters (percpu since 6.2).
        let gaps = known_gaps("6.5.0-1-generic", false, "always");
        assert!(said(&gaps, "tracepoints") && said(&gaps, "THP") && !said(&gaps, "RssAnon"));
        // The host's 6.18 with cgroup v1: none.
        assert!(known_gaps("6.18.0-1-cloud-amd64", false, "always").is_empty());
        // 6.10 is not 6.1; an unreadable release names nothing.
        assert!(known_gaps("6.10.3", false, "always").is_empty());
        assert!(known_gaps("", true, "always").is_empty());
    }
}
