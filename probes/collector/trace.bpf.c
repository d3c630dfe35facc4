// SPDX-License-Identifier: (MIT OR GPL-2.0)
/*
 * The trace (Config::trace, `run --perfetto`): one record per scheduler event of the run, into
 * the ring buffer trace_events, which user space drains to the run directory as it fills (the
 * record's slots: enum sc_trace_field in ../collector.h). The records are emitted where the
 * collector's programs already run (switches, tasks, waits, syscalls): one program per hook costs
 * less than two. What is the trace's own is here: the ring, the emitting helper, and the rename
 * programs, attached only with the trace.
 *
 * Off (cfg SC_CFG_TRACE = 0, a load-time constant) the verifier drops every emission, so the
 * programs cost what they did; the ring is then one page.
 *
 * A part of ../collector.bpf.c, included after common.bpf.h and before the parts that emit: not
 * compiled alone.
 */

/* max_entries set at load by user space: a power of two of pages (the kernel's rule); the same
 * in cfg SC_CFG_TRACE. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} trace_events SEC(".maps");

struct vec_trace_cpu { __u64 v[SC_NR_TC]; };

/* Per CPU: no shared cache line is written per record (an atomic add in .data.state would be). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct vec_trace_cpu);
} trace_cpu SEC(".maps");

#define TRACE_RING cfg[SC_CFG_TRACE]
#define TRACE_ON (TRACE_RING != 0)

/* Where a record's comm comes from. */
enum trace_comm {
	TC_NONE,
	TC_KERNEL,   /* 16 bytes of kernel memory (a task's comm) */
	TC_STRING,   /* a kernel string, up to its NUL (task_rename's new name) */
	TC_CTX,      /* 16 bytes of a classic record, at a 4-byte aligned offset */
	TC_CURRENT,  /* the current task's */
};

/* A task slot: tid | tgid << 32, which is bpf_get_current_pid_tgid()'s layout too. */
static __always_inline __u64 trace_task(__u32 tid, __u32 tgid)
{
	return tid | (__u64)tgid << 32;
}

/* Two prios in a slot. */
static __always_inline __u64 trace_prios(int prio, int other_prio)
{
	return (__u32)prio | (__u64)(__u32)other_prio << 32;
}

/*
 * One record. A record the ring has no room for is counted (SC_TC_LOST), never dropped unsaid.
 * The clock is read once the slot is reserved, so on one CPU records follow their timestamps
 * except where an interrupt's program emits between another's reservation and its clock read
 * (a few instructions). While this CPU emits, SC_TC_NESTING is non-zero and SC_TC_EMITTER names
 * the emitting task: see trace_emitting.
 */
static __always_inline void trace_emit(__u32 kind, __u64 task, __u64 other, __u64 arg,
				       __u64 prios, const void *comm, enum trace_comm how)
{
	__u64 me = bpf_get_current_pid_tgid(), outer;
	__u32 zero = 0;
	struct vec_trace_cpu *c;
	__u64 *r;

	if (!TRACE_ON)
		return;
	c = bpf_map_lookup_elem(&trace_cpu, &zero);
	if (!c)
		return;
	c->v[SC_TC_NESTING] += 1;
	outer = c->v[SC_TC_EMITTER];
	c->v[SC_TC_EMITTER] = me;
	r = bpf_ringbuf_reserve(&trace_events, SC_NR_TRACE_FIELDS * 8, 0);
	if (!r) {
		/* Atomic: another program (an interrupt's) may run between a load and a store on
		 * this CPU, and a count it lost would hide a lost record. */
		__sync_fetch_and_add(&c->v[SC_TC_LOST], 1);
		if (c->v[SC_TC_EMITTER] == me)
			c->v[SC_TC_EMITTER] = outer;
		c->v[SC_TC_NESTING] -= 1;
		return;
	}
	r[SC_TF_TS] = bpf_ktime_get_boot_ns();
	r[SC_TF_KIND_CPU] = kind | (__u64)bpf_get_smp_processor_id() << 32;
	r[SC_TF_TASK] = task;
	r[SC_TF_OTHER] = other;
	r[SC_TF_ARG] = arg;
	r[SC_TF_PRIOS] = prios;
	r[SC_TF_COMM_LO] = 0;
	r[SC_TF_COMM_HI] = 0;
	if (how == TC_KERNEL) {
		bpf_probe_read_kernel(&r[SC_TF_COMM_LO], 16, comm);
	} else if (how == TC_STRING) {
		bpf_probe_read_kernel_str(&r[SC_TF_COMM_LO], 16, comm);
	} else if (how == TC_CTX) {
		const __u32 *from = comm;
		__u32 *to = (__u32 *)&r[SC_TF_COMM_LO];

		to[0] = from[0];
		to[1] = from[1];
		to[2] = from[2];
		to[3] = from[3];
	} else if (how == TC_CURRENT) {
		bpf_get_current_comm(&r[SC_TF_COMM_LO], 16);
	}
	/* No wake-up per record: the drain thread, woken at each, would preempt the run's tasks
	 * to take one record at a time, and each of its switches would be a record again. It
	 * drains on a timer, and is woken only once the ring is half full. */
	bpf_ringbuf_submit(r, bpf_ringbuf_query(&trace_events, BPF_RB_AVAIL_DATA) > TRACE_RING / 2
				      ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP);
	__sync_fetch_and_add(&c->v[SC_TC_EMITTED], 1);
	/* Preempted emissions need not end last-in first-out: the emitter named is left alone when
	 * a later one took the slot (it is still inside), and the nesting gates a stale one. */
	if (c->v[SC_TC_EMITTER] == me)
		c->v[SC_TC_EMITTER] = outer;
	c->v[SC_TC_NESTING] -= 1;
}

/*
 * This CPU is inside trace_emit. lock:contention_end fires with the lock it waited for held, and
 * before 6.15 the ring's reservation takes a queued spinlock whose slow path fires it: a record
 * emitted from there would take that lock again on the same CPU. The lock programs therefore
 * leave alone any contention met while emitting (the trace's own, not the workload's).
 * "While emitting" is this CPU's emission *by the current task*: a program on a faultable
 * tracepoint (recent kernels made the syscall ones so) runs preemptible, so a task can be
 * switched out inside trace_emit with this CPU's nesting left raised, and the task that runs next
 * must not have its lock waits skipped for it (a contention_end skipped so would leave a wait
 * open past its task's exit). An interrupt's program sees the task it interrupted as current, so
 * the ring's own contention met there is still left alone.
 */
static __always_inline bool trace_emitting(void)
{
	__u32 zero = 0;
	struct vec_trace_cpu *c;

	if (!TRACE_ON)
		return false;
	c = bpf_map_lookup_elem(&trace_cpu, &zero);
	return c && c->v[SC_TC_NESTING] && c->v[SC_TC_EMITTER] == bpf_get_current_pid_tgid();
}

/*
 * A switch from prev to next, seen on this CPU: its prev should be the task the CPU's last switch
 * seen put on it. When it is not, a switch happened that no program saw, and if either task was
 * the run's a record of the run is missing: counted (SC_TC_UNSEEN), not silently dropped. (On
 * the 6.18 guest this was found on, a thread of the machine's own init switched out without
 * sched_switch reaching the programs; the tracepoint is not known to skip any other.)
 */
static __always_inline void trace_switch_seen(__u32 prev, bool prev_in_run, __u32 next,
					      bool next_in_run)
{
	__u32 zero = 0;
	struct vec_trace_cpu *c = bpf_map_lookup_elem(&trace_cpu, &zero);
	__u64 was;

	if (!c)
		return;
	was = c->v[SC_TC_ON_CPU];
	if (was && (__u32)was != prev + 1 && (prev_in_run || (was >> 32)))
		c->v[SC_TC_UNSEEN] += 1;
	c->v[SC_TC_ON_CPU] = (next + 1) | (__u64)next_in_run << 32;
}

/* A wait of the current task begins or ends (enum sc_trace_wait). */
static __always_inline void trace_wait(__u32 kind, __u32 wait)
{
	trace_emit(kind, bpf_get_current_pid_tgid(), 0, wait, 0, NULL, TC_NONE);
}

/* ---- the switch's state, as ftrace reports it ------------------------------------------------ */

#define TASK_REPORT 0x7f
#define TASK_IDLE_BITS (0x0002 | 0x0400) /* TASK_UNINTERRUPTIBLE | TASK_NOLOAD */
#define TASK_RTLOCK_WAIT 0x1000
#define TASK_FROZEN 0x8000

/* prev's state in the classic record's bits (__trace_sched_switch_state: 1 << (fls(state) - 1),
 * 0 for a runnable task); the caller has told a preemption apart. */
static __always_inline __u64 trace_state_bits(__u32 state, __u32 exit_state)
{
	__u32 s = (state | exit_state) & TASK_REPORT;

	if ((state & TASK_IDLE_BITS) == TASK_IDLE_BITS)
		s = TASK_REPORT + 1;
	if (state & (TASK_RTLOCK_WAIT | TASK_FROZEN))
		s = 0x0002;
	return s ? 1ULL << log2_slot(s) : 0;
}

/* The CPU a woken task will run on (task_cpu()): task_struct.thread_info.cpu since 5.16, the
 * task's own `cpu` on the kernels between 5.3 and 5.16 that moved it there; -1 (as u32) when
 * neither is known. */
struct thread_info___cpu {
	__u32 cpu;
} __attribute__((preserve_access_index));

struct task_struct___ti {
	struct thread_info___cpu thread_info;
} __attribute__((preserve_access_index));

struct task_struct___cpu {
	unsigned int cpu;
} __attribute__((preserve_access_index));

static __always_inline __u64 trace_task_cpu(struct task_struct *p)
{
	if (bpf_core_field_exists(struct thread_info___cpu, cpu) &&
	    bpf_core_field_exists(struct task_struct___ti, thread_info))
		return BPF_CORE_READ((struct task_struct___ti *)p, thread_info.cpu);
	if (bpf_core_field_exists(struct task_struct___cpu, cpu))
		return BPF_CORE_READ((struct task_struct___cpu *)p, cpu);
	return (__u32)-1;
}

/* ---- task_rename: attached only with the trace -------------------------------------------- */

/* A task of the run renamed (prctl PR_SET_NAME, pthread_setname_np, a write to its comm), or the
 * launched process's exec, which names it after its binary before it arms the counting. */
SEC("tp_btf/task_rename")
int BPF_PROG(btf_task_rename, struct task_struct *task, const char *comm)
{
	RAN(SC_P_TASK_RENAME);
	if ((__u32)task->tgid != TGID && !(armed() && task_in_run(task)))
		return 0;
	trace_emit(SC_TK_RENAME, trace_task(task->pid, task->tgid), 0, 0,
		   trace_prios(task->prio, 0), comm, TC_STRING);
	return 0;
}

struct tp_task_rename {
	__u64 common;
	pid_t pid;
	char oldcomm[16];
	char newcomm[16];
};

/* Classic twin: the record names the renamed task by pid only, so only a task renaming itself
 * (the usual way: prctl, pthread_setname_np on itself) is known to be the run's. */
SEC("tracepoint/task/task_rename")
int tp_task_rename(struct tp_task_rename *ctx)
{
	RAN(SC_P_TASK_RENAME);
	__u64 id = bpf_get_current_pid_tgid();

	if ((__u32)id != (__u32)ctx->pid || (!current_is_launched() && !current_is_target()))
		return 0;
	trace_emit(SC_TK_RENAME, id, 0, 0, 0, ctx->newcomm, TC_CTX);
	return 0;
}
