//! The held child's own counters, from /proc: what its rusage already holds before the probes
//! are attached (the classic path's pre-exec baseline; the tp_btf exec probe reads the exact one
//! from task_struct).

use crate::model::PreExec;

/// The held child's own counters from /proc, read once it sleeps in its hold (so they cannot
/// move while read): what its rusage holds from before the probes were attached. None when it
/// does not go to sleep within half a second.
pub(crate) fn held_counters(pid: u32) -> Option<PreExec> {
    for _ in 0..500 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // After the last ')' (comm may hold anything): state, ppid, ..., minflt is the 8th field.
        let fields: Vec<&str> = stat[stat.rfind(')')? + 1..].split_whitespace().collect();
        if fields.first() != Some(&"S") {
            std::thread::sleep(std::time::Duration::from_millis(1));
            continue;
        }
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let field = |name: &str| -> Option<u64> {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().parse().ok())
        };
        return Some(PreExec {
            minflt: fields.get(7)?.parse().ok()?,
            majflt: fields.get(9)?.parse().ok()?,
            nvcsw: field("voluntary_ctxt_switches:")?,
            nivcsw: field("nonvoluntary_ctxt_switches:")?,
            source: "/proc while held, then the classic probes until exec".into(),
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::launch::{self, ChildSetup};
    use std::path::Path;

    #[test]
    fn a_held_child_shows_the_faults_it_took_since_fork() {
        let setup = ChildSetup {
            gated: true,
            ..ChildSetup::default()
        };
        let child = launch::spawn(Path::new("/bin/sh"), &["-c".into(), ":".into()], setup).unwrap();
        let pre = held_counters(child.pid).expect("the held child sleeps at its gate");
        assert!(pre.source.starts_with("/proc"), "{pre:?}");
        let pid = child.pid;
        drop(child);
        launch::wait(pid).unwrap();
    }
}
