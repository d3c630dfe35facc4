// SPDX-License-Identifier: (MIT OR GPL-2.0)
/*
 * spawnscope collector: what one process (a thread group) costs the kernel while it spawns, holds
 * and joins its tasks, counted in the kernel and read once at the end. No event reaches user
 * space while the workload runs, except the trace's records when it is asked for (trace.bpf.c).
 *
 * Filter: the tgid in cfg[SC_CFG_TGID], from its exec on (sched_process_exec arms the counting;
 * what the forked child did before exec is not the workload's). Its threads are created after the
 * exec and share the tgid.
 *
 * Attach: only tracepoints. Most probes come in twins: a tp_btf program (typed arguments, CO-RE
 * reads of task_struct) and a classic tracepoint program (the tracefs format record, no BTF
 * needed). User space loads the tp_btf one and falls back to the twin per probe when it cannot
 * (collector/src/attach.rs). The syscalls the run counts come through one raw_syscalls
 * sys_enter/sys_exit pair that filters on the process first (collector/syscalls.bpf.c); only the
 * serving syscalls, asked for apart, keep one classic syscalls:sys_exit_* program each.
 *
 * Aggregation: counters per phase (the phase slot user space sets from the workload's phase
 * events), per getrusage epoch (for the cross-checks with the kernel's own accounting), per time
 * bucket, and log2 histograms. Per-thread state (switch-in time, wakeup time, syscall entry) sits
 * in one hash keyed by tid, sized at load time.
 *
 * One concern per file, under collector/: common.bpf.h (configuration, state, the shared maps and
 * helpers), trace (the ring buffer of `run --perfetto`), tasks, switches, faults, syscalls, waits,
 * shootdowns, machine, serving. This file
 * includes them into one translation unit, so the object the collector loads is still the one
 * clang compiles here: build.rs keeps a single libbpf-cargo build, no bpftool is needed at build
 * time (`bpftool gen object` would link separately compiled parts, but each part would then
 * declare the shared maps and globals `extern` and the helpers could not stay static inline).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "collector.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

#include "collector/common.bpf.h"
#include "collector/trace.bpf.c" /* before the parts that emit its records */
#include "collector/tasks.bpf.c"
#include "collector/switches.bpf.c"
#include "collector/faults.bpf.c"
#include "collector/waits.bpf.c"
#include "collector/syscalls.bpf.c" /* after waits: it dispatches the futex calls too */
#include "collector/shootdowns.bpf.c"
#include "collector/machine.bpf.c"
#include "collector/serving.bpf.c"
