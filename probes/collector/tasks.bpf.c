// SPDX-License-Identifier: (MIT OR GPL-2.0)
/*
 * Tasks: the exec that arms the counting, thread creation (task_newtask) and thread exit.
 *
 * A part of ../collector.bpf.c, which includes it after common.bpf.h: not compiled alone.
 */

/* ---- exec: arms the counting -------------------------------------------------------------- */

static __always_inline void arm(__u64 now)
{
	if (!state[SC_ST_ARMED]) {
		state[SC_ST_T0_NS] = now;
		/* Only where the tick clock is on: a kernel without bpf_jiffies64 has it off (0),
		 * and the verifier drops the call with the branch. */
		if (cfg[SC_CFG_NS_PER_JIFFY])
			state[SC_ST_T0_JIFFIES] = bpf_jiffies64();
		state[SC_ST_ARMED] = 1; /* last: every other program checks it first */
	}
	state[SC_ST_EXECS] += 1;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(btf_sched_process_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	RAN(SC_P_SCHED_PROCESS_EXEC);
	__u64 now = bpf_ktime_get_ns();
	struct sc_task *t;

	if ((__u32)p->tgid != TGID)
		return 0;
	if (!state[SC_ST_ARMED]) {
		/* What the task's rusage already holds from between fork and exec (the conductor's
		 * pre_exec, execve's own argument copying): not the workload's. */
		state[SC_ST_PRE_MINFLT] = p->min_flt;
		state[SC_ST_PRE_MAJFLT] = p->maj_flt;
		state[SC_ST_PRE_NVCSW] = p->nvcsw;
		state[SC_ST_PRE_NIVCSW] = p->nivcsw;
		state[SC_ST_PRE_KNOWN] = 1;
	}
	t = task_get(p->pid, true);
	if (t) {
		t->on_ts = now; /* it is running */
		t->nvcsw_seen = p->nvcsw;
		t->flags |= TF_NV_KNOWN;
	} else {
		__u32 tid = p->pid;
		__u64 *seen = bpf_map_lookup_elem(&nv_by_tid, &tid);

		if (seen)
			*seen = p->nvcsw + 1;
	}
	arm(now);
	return 0;
}

struct tp_sched_process_exec {
	__u64 common;
	__u32 filename_loc;
	pid_t pid;
	pid_t old_pid;
};

SEC("tracepoint/sched/sched_process_exec")
int tp_sched_process_exec(struct tp_sched_process_exec *ctx)
{
	RAN(SC_P_SCHED_PROCESS_EXEC);
	__u64 now = bpf_ktime_get_ns();
	struct sc_task *t;

	if ((__u32)(bpf_get_current_pid_tgid() >> 32) != TGID)
		return 0;
	t = task_get(ctx->pid, true);
	if (t)
		t->on_ts = now;
	arm(now);
	return 0;
}

/* ---- thread creation and exit ------------------------------------------------------------- */

/* A task created by one of the run's: a thread, or a process the run now includes (`start`: its
 * start_time, 0 when not known; see follow_process). Either way its switches are the run's, so
 * its nvcsw (0 at its birth: copy_mm) is known from here. */
static __always_inline void new_task(__u32 tid, __u64 clone_flags, __u64 nvcsw, bool nv_known,
				     __u64 start)
{
	__u64 now = tick_ns(); /* for the series alone */
	struct vec_counters *c = phase_vec();
	struct vec_series *s;
	struct vec_cut *k;
	struct sc_task *t;

	if (!(clone_flags & CLONE_THREAD)) {
		if (c)
			c->v[SC_NEW_PROCESSES] += 1;
		follow_process(tid, start);
	} else {
		if (c)
			c->v[SC_NEW_THREADS] += 1;
		k = cut_vec();
		if (k)
			k->v[SC_CUT_NEW_THREADS] += 1;
		s = series_vec(now);
		if (s)
			s->v[SC_S_NEW_THREADS] += 1;
	}
	t = task_get(tid, true);
	if (t && nv_known) {
		t->nvcsw_seen = nvcsw;
		t->flags |= TF_NV_KNOWN;
	}
	if (!t) {
		/* The tid may be one a thread of this run had before: start its slot afresh. */
		__u64 *seen = bpf_map_lookup_elem(&nv_by_tid, &tid);

		if (seen)
			*seen = nvcsw + 1;
	}
}

SEC("tp_btf/task_newtask")
int BPF_PROG(btf_task_newtask, struct task_struct *task, __u64 clone_flags)
{
	RAN(SC_P_TASK_NEWTASK);
	if (!current_is_target())
		return 0;
	new_task(task->pid, clone_flags, task->nvcsw, true, task->start_time);
	if (TRACE_ON)
		trace_emit(SC_TK_NEWTASK, trace_task(task->pid, task->tgid),
			   bpf_get_current_pid_tgid(), clone_flags,
			   trace_prios(task->prio, bpf_get_current_task_btf()->prio), task->comm,
			   TC_KERNEL);
	return 0;
}

struct tp_task_newtask {
	__u64 common;
	pid_t pid;
	char comm[16];
	__u32 pad;
	__u64 clone_flags;
};

SEC("tracepoint/task/task_newtask")
int tp_task_newtask(struct tp_task_newtask *ctx)
{
	RAN(SC_P_TASK_NEWTASK);
	if (!current_is_target())
		return 0;
	/* A new task's nvcsw starts at 0 (copy_mm); its start time is not in the record (0: a
	 * process followed by its tgid alone). */
	new_task(ctx->pid, ctx->clone_flags, 0, true, 0);
	if (TRACE_ON) {
		__u64 creator = bpf_get_current_pid_tgid();
		/* A thread joins its creator's process; a process is its own. Prios: not in the
		 * record. */
		__u32 tgid = ctx->clone_flags & CLONE_THREAD ? creator >> 32 : ctx->pid;

		trace_emit(SC_TK_NEWTASK, trace_task(ctx->pid, tgid), creator, ctx->clone_flags, 0,
			   ctx->comm, TC_CTX);
	}
	return 0;
}

static __always_inline void thread_exit(void)
{
	struct vec_counters *c = phase_vec();
	struct vec_series *s = series_vec(tick_ns());

	if (c)
		c->v[SC_THREAD_EXITS] += 1;
	if (s)
		s->v[SC_S_THREAD_EXITS] += 1;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(btf_sched_process_exit, struct task_struct *p)
{
	RAN(SC_P_SCHED_PROCESS_EXIT);
	if (!armed() || !task_in_run(p))
		return 0;
	thread_exit();
	if (TRACE_ON)
		trace_emit(SC_TK_EXIT, trace_task(p->pid, p->tgid), 0, 0, trace_prios(p->prio, 0),
			   p->comm, TC_KERNEL);
	return 0;
}

struct tp_sched_process_exit {
	__u64 common;
	char comm[16];
	pid_t pid;
	int prio;
};

SEC("tracepoint/sched/sched_process_exit")
int tp_sched_process_exit(struct tp_sched_process_exit *ctx)
{
	RAN(SC_P_SCHED_PROCESS_EXIT);
	if (!current_is_target()) /* the exiting task is current */
		return 0;
	thread_exit();
	if (TRACE_ON)
		trace_emit(SC_TK_EXIT, bpf_get_current_pid_tgid(), 0, 0, trace_prios(ctx->prio, 0),
			   ctx->comm, TC_CTX);
	return 0;
}
