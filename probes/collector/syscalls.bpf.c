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

/* The trace's clone wait: from the caller's entry to its return (the new task's return, 0, is
 * not the caller's). */
static __always_inline void clone_enter(__u32 kind)
{
	count(kind == SC_SYS_CLONE ? SC_CLONE_CALLS : SC_CLONE3_CALLS, 1);
	syscall_enter(kind);
	if (TRACE_ON)
		trace_wait(SC_TK_WAIT_BEGIN, SC_TW_CLONE);
}

static __always_inline void clone_exit(__u32 kind, long ret)
{
	bool clone = kind == SC_SYS_CLONE;
	__u64 took;
	__u32 key;
	__u64 *n;

	if (ret == 0) { /* the new task returning from the syscall */
		count(clone ? SC_CLONE_CHILD_RETURNS : SC_CLONE3_CHILD_RETURNS, 1);
		return;
	}
	if (TRACE_ON)
		trace_wait(SC_TK_WAIT_END, SC_TW_CLONE);
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

/* mmap, munmap, mprotect, madvise: calls and bytes asked for (len is the second argument of all). */
static __always_inline void memory_call(__u32 calls, __u64 len)
{
	struct vec_counters *c = phase_vec();

	if (c) {
		c->v[calls] += 1;
		c->v[calls + 1] += len;
	}
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

static __always_inline void write_enter(__u64 fd, __u64 buf, __u64 len)
{
	__u64 head[2], seen;

	/* The contract's events are the launched workload's: a child of the run writing to the
	 * same stdout is not it. */
	if (!cfg[SC_CFG_PHASES_FROM_STDOUT] || fd != STDOUT_FD || len < 16 || !current_is_launched())
		return;
	if (bpf_probe_read_user(head, sizeof(head), (void *)buf))
		return;
	if (head[0] != WORD8('{', '"', 'e', 'v', 'e', 'n', 't', '"') ||
	    head[1] != WORD8(':', '"', 'p', 'h', 'a', 's', 'e', '"'))
		return;
	/* The workload's events come from one thread at a time: no atomics needed. */
	seen = state[SC_ST_PHASE_EVENTS];
	if (seen < SC_PHASE_SLOTS)
		phase_seen_ns[seen] = bpf_ktime_get_ns();
	state[SC_ST_PHASE_EVENTS] = seen + 1;
}

/* getrusage(RUSAGE_SELF) by the launched process: its entry and its return each open a new epoch,
 * so the cross-checks can compare rusage with what was counted before the workload's last call
 * (its result event) -- nothing after it, such as its threads' exit, stands between the two. The
 * run's other processes' calls cut nothing: their rusage is not the workload's. */
static __always_inline void getrusage_enter(__u64 who)
{
	if ((int)who != RUSAGE_SELF || !current_is_launched())
		return;
	state[SC_ST_LAST_GETRUSAGE_NS] = bpf_ktime_get_ns();
	state[SC_ST_GETRUSAGE_TID] = (__u32)bpf_get_current_pid_tgid() + 1;
	syscall_enter(SC_SYS_GETRUSAGE);
	__sync_fetch_and_add(&state[SC_ST_GETRUSAGE_CALLS], 1);
}

static __always_inline void getrusage_exit(__u32 tid)
{
	struct sc_task *t = task_get(tid, false);

	if (t) {
		if (t->sys_kind != SC_SYS_GETRUSAGE)
			return;
		t->sys_kind = SC_NR_SYS;
	} else if (state[SC_ST_GETRUSAGE_TID] != (__u64)tid + 1) {
		/* Without per-thread state: the return of the call entered last, by this thread. Calls
		 * that overlap (two threads at once; not the workloads, which call it once) lose the
		 * earlier return: the cross-checks then compare totals and say so. */
		return;
	}
	state[SC_ST_GETRUSAGE_TID] = 0;
	__sync_fetch_and_add(&state[SC_ST_GETRUSAGE_RETURNS], 1);
}

/*
 * Every syscall above reaches its counting through one pair of programs on raw_syscalls
 * sys_enter/sys_exit, which filter on the traced process before anything else and then switch
 * on the syscall's number. One classic syscalls:sys_enter_<name> program per syscall (as before)
 * costs more at every syscall of every task on the machine: each enabled one makes the kernel
 * build a perf record of the call (perf_syscall_enter/exit) and hop through trace_call_bpf,
 * 4-5 times the programs' own run time (docs/probes-cost.md). The raw pair still puts every task
 * on the syscall-tracing slow path, as any syscall tracepoint does; that part is counted in the
 * run's stated perturbation (the pair's runs are the machine's syscalls).
 *
 * The numbers are the architecture's (arch/x86/entry/syscalls/syscall_64.tbl; the generic table
 * of include/uapi/asm-generic/unistd.h for arm64). tp_btf reads the arguments and, at the exit,
 * the number from the task's user registers; the classic raw_syscalls twin has both in its
 * record.
 */
#if defined(__TARGET_ARCH_x86)
#define NR_WRITE 1
#define NR_MMAP 9
#define NR_MPROTECT 10
#define NR_MUNMAP 11
#define NR_MADVISE 28
#define NR_CLONE 56
#define NR_GETRUSAGE 98
#define NR_FUTEX 202
#define SYSCALL_ARG(regs, n) ((n) == 0 ? (regs)->di : (n) == 1 ? (regs)->si : (n) == 2 ? (regs)->dx : (regs)->r10)
#define SYSCALL_NR(regs) ((long)(regs)->orig_ax)
#elif defined(__TARGET_ARCH_arm64)
#define NR_WRITE 64
#define NR_MMAP 222
#define NR_MPROTECT 226
#define NR_MUNMAP 215
#define NR_MADVISE 233
#define NR_CLONE 220
#define NR_GETRUSAGE 165
#define NR_FUTEX 98
#define SYSCALL_ARG(regs, n) ((regs)->regs[n])
#define SYSCALL_NR(regs) ((long)(regs)->syscallno)
#else
#error "syscall numbers are known for x86_64 and arm64 only"
#endif
/* The same on both (added after the tables were unified, 5.3+). */
#define NR_CLONE3 435
#define NR_FUTEX_WAITV 449
#define NR_FUTEX_WAKE 454
#define NR_FUTEX_WAIT 455

/* Each program of the pair tests the run first (another process's syscall is counted as filtered
 * out, FILTERED: the host's share of the run's cost), then whether the counting has started. */

/* The target's syscall `nr` enters, with its first four arguments. */
static __always_inline void target_sys_enter(long nr, __u64 a0, __u64 a1, __u64 a2, __u64 a3)
{
	switch (nr) {
	case NR_WRITE: write_enter(a0, a1, a2); break;
	case NR_MMAP: memory_call(SC_MMAP_CALLS, a1); break;
	case NR_MUNMAP: memory_call(SC_MUNMAP_CALLS, a1); break;
	case NR_MPROTECT: memory_call(SC_MPROTECT_CALLS, a1); break;
	case NR_MADVISE: memory_call(SC_MADVISE_CALLS, a1); break;
	case NR_FUTEX: futex_op_enter(a0, a1); break;
	case NR_FUTEX_WAIT: futex_enter(SC_SYS_FUTEX_WAIT, a0, a3 & FUTEX2_PRIVATE, true); break;
	/* Several futexes at once: its time counts, its buckets are not followed. */
	case NR_FUTEX_WAITV: futex_enter(SC_SYS_FUTEX_WAIT, 0, false, false); break;
	case NR_FUTEX_WAKE: futex_enter(SC_SYS_FUTEX_WAKE, a0, a3 & FUTEX2_PRIVATE, true); break;
	case NR_CLONE: clone_enter(SC_SYS_CLONE); break;
	case NR_CLONE3: clone_enter(SC_SYS_CLONE3); break;
	case NR_GETRUSAGE: getrusage_enter(a0); break;
	}
}

/* The target's syscall `nr` returns `ret` (a new thread returns from clone here too: ret 0). */
static __always_inline void target_sys_exit(long nr, long ret)
{
	switch (nr) {
	case NR_FUTEX:
	case NR_FUTEX_WAIT:
	case NR_FUTEX_WAITV:
	case NR_FUTEX_WAKE: futex_exit(ret); break;
	case NR_CLONE: clone_exit(SC_SYS_CLONE, ret); break;
	case NR_CLONE3: clone_exit(SC_SYS_CLONE3, ret); break;
	case NR_GETRUSAGE:
		if (current_is_launched())
			getrusage_exit((__u32)bpf_get_current_pid_tgid());
		break;
	}
}

SEC("tp_btf/sys_enter")
int BPF_PROG(btf_sys_enter, struct pt_regs *regs, long id)
{
	RAN(SC_P_SYS_ENTER);
	if (!current_in_run()) {
		FILTERED(SC_P_SYS_ENTER);
		return 0;
	}
	if (!armed())
		return 0;
	target_sys_enter(id, SYSCALL_ARG(regs, 0), SYSCALL_ARG(regs, 1), SYSCALL_ARG(regs, 2),
			 SYSCALL_ARG(regs, 3));
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(btf_sys_exit, struct pt_regs *regs, long ret)
{
	RAN(SC_P_SYS_EXIT);
	if (!current_in_run()) {
		FILTERED(SC_P_SYS_EXIT);
		return 0;
	}
	if (!armed())
		return 0;
	target_sys_exit(SYSCALL_NR(regs), ret);
	return 0;
}

struct tp_raw_sys_enter {
	__u64 common;
	long id;
	unsigned long args[6];
};

struct tp_raw_sys_exit {
	__u64 common;
	long id;
	long ret;
};

SEC("tracepoint/raw_syscalls/sys_enter")
int tp_sys_enter(struct tp_raw_sys_enter *ctx)
{
	RAN(SC_P_SYS_ENTER);
	if (!current_in_run()) {
		FILTERED(SC_P_SYS_ENTER);
		return 0;
	}
	if (!armed())
		return 0;
	target_sys_enter(ctx->id, ctx->args[0], ctx->args[1], ctx->args[2], ctx->args[3]);
	return 0;
}

SEC("tracepoint/raw_syscalls/sys_exit")
int tp_sys_exit(struct tp_raw_sys_exit *ctx)
{
	RAN(SC_P_SYS_EXIT);
	if (!current_in_run()) {
		FILTERED(SC_P_SYS_EXIT);
		return 0;
	}
	if (!armed())
		return 0;
	target_sys_exit(ctx->id, ctx->ret);
	return 0;
}
