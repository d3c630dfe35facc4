//! Whether this process may tune the kernel, make cgroups, load BPF and run perf.

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}
