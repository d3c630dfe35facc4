// SPDX-License-Identifier: (MIT OR GPL-2.0)
/*
 * Syscalls counted for the run's own figures: clone/clone3 (calls, results, times, errnos),
 * mmap/munmap/mprotect/madvise (calls, bytes), the phase events written to stdout, and getrusage
 * (the cross-checks' epochs).
 *
 * A part of ../collector.bpf.c, which includes it after common.bpf.h: not compiled alone.
 */

/* Failures are rare: shared, atomic adds. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SC_NR_SYS * SC_ERRNO_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} errnos SEC(".maps");

static __always_inline void clone_enter(__u32 kind)
{
	if (!current_is_target())
		return;
	count(kind == SC_SYS_CLONE ? SC_CLONE_CALLS : SC_CLONE3_CALLS, 1);
	syscall_enter(kind);
}

static __always_inline void clone_exit(__u32 kind, long ret)
{
	bool clone = kind == SC_SYS_CLONE;
	__u64 took;
	__u32 key;
	__u64 *n;

	if (!current_is_target())
		return;
	if (ret == 0) { /* the new task returning from the syscall */
		count(clone ? SC_CLONE_CHILD_RETURNS : SC_CLONE3_CHILD_RETURNS, 1);
		return;
	}
	took = syscall_exit(kind);
	if (took)
		hist_add(clone ? SC_H_CLONE_NS : SC_H_CLONE3_NS, took);
	if (ret > 0) {
		count(clone ? SC_CLONE_OK : SC_CLONE3_OK, 1);
		return;
	}
	count(clone ? SC_CLONE_FAILED : SC_CLONE3_FAILED, 1);
	key = -ret;
	if (key >= SC_ERRNO_SLOTS)
		key = SC_ERRNO_SLOTS - 1;
	key += kind * SC_ERRNO_SLOTS;
	n = bpf_map_lookup_elem(&errnos, &key);
	if (n)
		__sync_fetch_and_add(n, 1);
}

SEC("tracepoint/syscalls/sys_enter_clone")
int tp_sys_enter_clone(struct tp_sys_enter *ctx)
{
	clone_enter(SC_SYS_CLONE);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_clone")
int tp_sys_exit_clone(struct tp_sys_exit *ctx)
{
	clone_exit(SC_SYS_CLONE, ctx->ret);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_clone3")
int tp_sys_enter_clone3(struct tp_sys_enter *ctx)
{
	clone_enter(SC_SYS_CLONE3);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_clone3")
int tp_sys_exit_clone3(struct tp_sys_exit *ctx)
{
	clone_exit(SC_SYS_CLONE3, ctx->ret);
	return 0;
}

/* mmap, munmap, mprotect, madvise: calls and bytes asked for (len is the second argument of all). */
static __always_inline void memory_call(struct tp_sys_enter *ctx, __u32 calls)
{
	if (!current_is_target())
		return;
	count(calls, 1);
	count(calls + 1, ctx->args[1]);
}

SEC("tracepoint/syscalls/sys_enter_mmap")
int tp_sys_enter_mmap(struct tp_sys_enter *ctx)
{
	memory_call(ctx, SC_MMAP_CALLS);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_munmap")
int tp_sys_enter_munmap(struct tp_sys_enter *ctx)
{
	memory_call(ctx, SC_MUNMAP_CALLS);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_mprotect")
int tp_sys_enter_mprotect(struct tp_sys_enter *ctx)
{
	memory_call(ctx, SC_MPROTECT_CALLS);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_madvise")
int tp_sys_enter_madvise(struct tp_sys_enter *ctx)
{
	memory_call(ctx, SC_MADVISE_CALLS);
	return 0;
}

/*
 * Phases, exactly: the workloads print each event as one JSON line with "event" first (the
 * contract in schema/workload-events.schema.json), and a phase event right after reading the
 * clock. Seeing `{"event":"phase"` start a write to the target's stdout switches the phase at once,
 * where set_phase() from user space comes after a pipe and a wakeup (milliseconds when 2000 freshly
 * woken threads crowd two CPUs). set_phase() still counts: the later of the two wins, so a
 * workload that writes differently is phased by user space alone.
 */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define WORD8(a, b, c, d, e, f, g, h)                                                        \
	((__u64)(a) | (__u64)(b) << 8 | (__u64)(c) << 16 | (__u64)(d) << 24 | (__u64)(e) << 32 | \
	 (__u64)(f) << 40 | (__u64)(g) << 48 | (__u64)(h) << 56)
#else
#define WORD8(a, b, c, d, e, f, g, h)                                                        \
	((__u64)(h) | (__u64)(g) << 8 | (__u64)(f) << 16 | (__u64)(e) << 24 | (__u64)(d) << 32 | \
	 (__u64)(c) << 40 | (__u64)(b) << 48 | (__u64)(a) << 56)
#endif
#define STDOUT_FD 1

SEC("tracepoint/syscalls/sys_enter_write")
int tp_sys_enter_write(struct tp_sys_enter *ctx)
{
	__u64 head[2], seen;

	if (!cfg[SC_CFG_PHASES_FROM_STDOUT] || ctx->args[0] != STDOUT_FD || ctx->args[2] < 16 ||
	    !current_is_target())
		return 0;
	if (bpf_probe_read_user(head, sizeof(head), (void *)ctx->args[1]))
		return 0;
	if (head[0] != WORD8('{', '"', 'e', 'v', 'e', 'n', 't', '"') ||
	    head[1] != WORD8(':', '"', 'p', 'h', 'a', 's', 'e', '"'))
		return 0;
	/* The workload's events come from one thread at a time: no atomics needed. */
	seen = state[SC_ST_PHASE_EVENTS];
	if (seen < SC_PHASE_SLOTS)
		phase_seen_ns[seen] = bpf_ktime_get_ns();
	state[SC_ST_PHASE_EVENTS] = seen + 1;
	return 0;
}

/* getrusage(RUSAGE_SELF) by the target: its entry and its return each open a new epoch, so the
 * cross-checks can compare rusage with what was counted before the workload's last call (its
 * result event) -- nothing after it, such as its threads' exit, stands between the two. */
SEC("tracepoint/syscalls/sys_enter_getrusage")
int tp_sys_enter_getrusage(struct tp_sys_enter *ctx)
{
	if (!current_is_target() || (int)ctx->args[0] != RUSAGE_SELF)
		return 0;
	state[SC_ST_LAST_GETRUSAGE_NS] = bpf_ktime_get_ns();
	state[SC_ST_GETRUSAGE_TID] = (__u32)bpf_get_current_pid_tgid() + 1;
	syscall_enter(SC_SYS_GETRUSAGE);
	__sync_fetch_and_add(&state[SC_ST_GETRUSAGE_CALLS], 1);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_getrusage")
int tp_sys_exit_getrusage(struct tp_sys_exit *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct sc_task *t;

	if (!current_is_target())
		return 0;
	t = task_get(tid, false);
	if (t) {
		if (t->sys_kind != SC_SYS_GETRUSAGE)
			return 0;
		t->sys_kind = SC_NR_SYS;
	} else if (state[SC_ST_GETRUSAGE_TID] != (__u64)tid + 1) {
		/* Without per-thread state: the return of the call entered last, by this thread. Calls
		 * that overlap (two threads at once; not the workloads, which call it once) lose the
		 * earlier return: the cross-checks then compare totals and say so. */
		return 0;
	}
	state[SC_ST_GETRUSAGE_TID] = 0;
	__sync_fetch_and_add(&state[SC_ST_GETRUSAGE_RETURNS], 1);
	return 0;
}
