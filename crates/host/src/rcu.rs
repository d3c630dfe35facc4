//! RCU's deferred frees, run on demand: an exited thread's task struct and kernel stack are freed
//! by RCU callbacks, a grace period or two after it exits, so free memory read while threads
//! exit by the thousand a second is short by whatever those callbacks still hold.

use std::fs::OpenOptions;
use std::io::Write;

/// Writing 1 here runs rcu_barrier(): it returns once every RCU callback queued before has run
/// (kernel 6.6+, root). A trigger, not a setting: nothing stays changed.
const DO_RCU_BARRIER: &str = "/sys/module/rcutree/parameters/do_rcu_barrier";

/// Runs rcu_barrier() `times` times in a row (a callback may queue another: a task struct's
/// frees its stack through a second one). False where the kernel or the privileges do not allow
/// it.
pub fn barrier(times: u32) -> bool {
    (0..times).all(|_| {
        OpenOptions::new()
            .write(true)
            .open(DO_RCU_BARRIER)
            .and_then(|mut f| f.write_all(b"1\n"))
            .is_ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_barrier_runs_as_root_where_the_kernel_has_it() {
        let root = unsafe { libc::geteuid() } == 0;
        let present = std::path::Path::new(DO_RCU_BARRIER).exists();
        if !(root && present) {
            println!(
                "skipped: rcu_barrier needs root and {DO_RCU_BARRIER} (root {root}, present {present})"
            );
            assert!(!barrier(1) || root, "refused without root");
            return;
        }
        assert!(barrier(2));
        // Reading it says whether a barrier is in progress: none is, once ours returned.
        let state = std::fs::read_to_string(DO_RCU_BARRIER).unwrap();
        assert_eq!(state.trim(), "0", "{state:?}");
    }
}
