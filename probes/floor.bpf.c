// SPDX-License-Identifier: (MIT OR GPL-2.0)
/*
 * The floor under each hook the collector's lean probes use: one tp_btf program per hook that
 * does the least a counting program does, one per-CPU array increment, and nothing else (no
 * filter, no clock read). `spawnscope probe-cost` times a loop that fires the hook with this
 * program attached and with the collector's, and reads the collector's cost against this one.
 *
 * csd:csd_queue_cpu has a classic tracepoint program, as the collector's (tp_btf refuses to read
 * its function-pointer argument there), so its floor is classic too: the same dispatch.
 *
 * Its own object (collector/build.rs builds it beside collector.bpf.c): loaded alone, program
 * by program, by collector/src/floor.rs. Slot i of `floor_runs` is program i of FLOOR_HOOKS
 * there, in the order below.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "Dual MIT/GPL";

#define FLOOR_HOOKS 16

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FLOOR_HOOKS);
	__type(key, __u32);
	__type(value, __u64);
} floor_runs SEC(".maps");

#define FLOOR(name, slot)                                             \
	SEC("tp_btf/" #name)                                          \
	int floor_##name(void *ctx)                                   \
	{                                                             \
		__u32 key = (slot);                                   \
		__u64 *runs = bpf_map_lookup_elem(&floor_runs, &key); \
		if (runs)                                             \
			*runs += 1;                                   \
		return 0;                                             \
	}

FLOOR(sys_enter, 0)
FLOOR(sys_exit, 1)
FLOOR(sched_switch, 2)
FLOOR(sched_wakeup, 3)
FLOOR(contention_begin, 4)
FLOOR(contention_end, 5)
FLOOR(page_fault_user, 6)
FLOOR(task_newtask, 7)
FLOOR(sched_wakeup_new, 8)
FLOOR(sched_process_exit, 9)
FLOOR(signal_deliver, 10)
FLOOR(sched_migrate_task, 11)
FLOOR(ipi_send_cpu, 12)
FLOOR(tlb_flush, 13)
FLOOR(page_fault_kernel, 14)

SEC("tracepoint/csd/csd_queue_cpu")
int floor_csd_queue_cpu(void *ctx)
{
	__u32 key = 15;
	__u64 *runs = bpf_map_lookup_elem(&floor_runs, &key);
	if (runs)
		*runs += 1;
	return 0;
}
