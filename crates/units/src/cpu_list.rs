//! A CPU list as the kernel and taskset write it ("0-1", "0,2,4-7"): read by the host's limits
//! and by the analysis of a recorded machine, so it lives below both.

use anyhow::{bail, Context, Result};

/// A CPU list as taskset and cpuset.cpus write it: "0-1", "0,2,4-7".
pub fn parse(text: &str) -> Result<Vec<usize>> {
    let mut cpus = Vec::new();
    for part in text.split(',') {
        let bound = |s: &str| -> Result<usize> {
            s.trim()
                .parse::<usize>()
                .with_context(|| format!("'{s}' is not a CPU number"))
        };
        let (first, last) = match part.split_once('-') {
            Some((a, b)) => (bound(a)?, bound(b)?),
            None => (bound(part)?, bound(part)?),
        };
        if first > last {
            bail!("'{part}' is a range from high to low");
        }
        if last >= libc::CPU_SETSIZE as usize {
            bail!("CPU {last} is beyond what an affinity mask holds");
        }
        cpus.extend(first..=last);
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_as_taskset_writes_them() {
        assert_eq!(parse("0-1").unwrap(), vec![0, 1]);
        assert_eq!(parse("3,0,4-5,3").unwrap(), vec![0, 3, 4, 5]);
        assert!(parse("2-1").is_err());
        assert!(parse("a").is_err());
        assert!(parse("0-99999").is_err());
    }
}
