//! How a process ended and what the kernel counted for it (wait4's rusage): part of run.json. The
//! types are the launcher's (spawnscope-collector), the project's one.

pub use spawnscope_collector::launch::{signal_name, Exit, Rusage};
