//! What the probes themselves cost, measured by the kernel: with run-time statistics on, every BPF
//! program counts how often it ran and the nanoseconds spent in it (`bpf_prog_info.run_cnt`,
//! `run_time_ns`). The statistics are turned on with `BPF_ENABLE_STATS`, which hands back a file
//! descriptor: the kernel counts while any such descriptor is open and stops by itself when the
//! last one closes — on every exit path, SIGKILL included — so `kernel.bpf_stats_enabled` is never
//! left changed, and nothing here has to restore it.

use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};

use libbpf_rs::libbpf_sys;
use libbpf_rs::Object;

use crate::model::ProgramCost;
use crate::probes::PROBES;

/// Run-time statistics, on for as long as this lives.
pub(crate) struct StatsOn {
    _fd: Option<OwnedFd>,
    /// Why there are no statistics, when there are none.
    pub note: Option<String>,
}

/// Turns the kernel's BPF run-time statistics on for this collector's life.
pub(crate) fn stats_on() -> StatsOn {
    // SAFETY: bpf_enable_stats takes a plain enum and returns a new descriptor or -errno.
    let fd = unsafe { libbpf_sys::bpf_enable_stats(libbpf_sys::BPF_STATS_RUN_TIME) };
    if fd < 0 {
        let err = std::io::Error::from_raw_os_error(-fd);
        return StatsOn {
            _fd: None,
            note: Some(format!(
                "BPF run-time statistics could not be turned on (BPF_ENABLE_STATS: {err}); the probes' cost is not measured"
            )),
        };
    }
    StatsOn {
        // SAFETY: fd is a descriptor the kernel just gave this process, owned by nobody else.
        _fd: Some(unsafe { OwnedFd::from_raw_fd(fd) }),
        note: None,
    }
}

/// The tracepoint a program of the object serves (`btf_<name>` / `tp_<name>`).
fn tracepoint_of(program: &str) -> String {
    let name = program
        .strip_prefix("btf_")
        .or_else(|| program.strip_prefix("tp_"))
        .unwrap_or(program);
    PROBES
        .iter()
        .find(|p| p.name() == name)
        .map_or_else(|| name.to_string(), |p| p.tracepoint.to_string())
}

/// Every loaded program's run count and run time, most expensive first. Read while the object
/// still holds the programs (after detaching, so every run is in).
pub(crate) fn read_programs(obj: &Object) -> (Vec<ProgramCost>, Vec<String>) {
    let mut costs = Vec::new();
    let mut errors = Vec::new();
    for prog in obj.progs() {
        if !prog.autoload() {
            continue;
        }
        let name = prog.name().to_string_lossy().into_owned();
        let mut info = libbpf_sys::bpf_prog_info::default();
        let mut len = std::mem::size_of::<libbpf_sys::bpf_prog_info>() as u32;
        // SAFETY: info is a zeroed bpf_prog_info of `len` bytes, which the kernel fills; every
        // pointer field in it is zero, so the kernel writes nothing else.
        let ret = unsafe {
            libbpf_sys::bpf_prog_get_info_by_fd(prog.as_fd().as_raw_fd(), &mut info, &mut len)
        };
        if ret != 0 {
            errors.push(format!(
                "bpf_prog_info of {name}: {}",
                std::io::Error::from_raw_os_error(-ret)
            ));
            continue;
        }
        costs.push(ProgramCost {
            tracepoint: tracepoint_of(&name),
            program: name,
            run_cnt: info.run_cnt,
            run_time_ns: info.run_time_ns,
            recursion_misses: info.recursion_misses,
        });
    }
    costs.sort_by(|a, b| {
        b.run_time_ns
            .cmp(&a.run_time_ns)
            .then_with(|| a.program.cmp(&b.program))
    });
    (costs, errors)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_are_named_by_the_tracepoint_they_serve() {
        assert_eq!(tracepoint_of("btf_sched_switch"), "sched:sched_switch");
        assert_eq!(
            tracepoint_of("tp_page_fault_user"),
            "exceptions:page_fault_user"
        );
        assert_eq!(tracepoint_of("helper"), "helper");
    }
}
