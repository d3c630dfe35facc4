// SPDX-License-Identifier: (MIT OR GPL-2.0)
/*
 * Scheduling: context switches (voluntary or not, as rusage counts them), on-CPU and run-queue
 * time, wakeups, migrations, and the on-CPU time of tasks outside the run.
 *
 * A part of ../collector.bpf.c, which includes it after common.bpf.h: not compiled alone.
 */

/* When this CPU's current task got it (sched_switch): on-CPU time of tasks outside the run. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} cpu_since SEC(".maps");

/* PF_KTHREAD (include/linux/sched.h): the task is a kernel thread. */
#define SC_PF_KTHREAD 0x00200000

/* On-CPU time of the task leaving this CPU when it is outside the run: not one of the run's
 * tasks (prev_in_run), not the collector's own process, not the idle task. Kernel threads' share
 * is counted apart as well: at a big run's exit they free what it left (stacks, task structs
 * through RCU) on its behalf. */
static __always_inline void outside_switch(bool prev_in_run, __u32 prev_pid, __u32 prev_tgid,
					   __u32 prev_flags, __u64 now)
{
	__u32 zero = 0;
	__u64 *since = bpf_map_lookup_elem(&cpu_since, &zero);

	if (!since)
		return;
	if (*since && now > *since && prev_pid != 0 && !prev_in_run &&
	    prev_tgid != (__u32)cfg[SC_CFG_SELF_TGID]) {
		count_at(SC_OUTSIDE_ONCPU_NS, now - *since);
		if (prev_flags & SC_PF_KTHREAD)
			count_at(SC_OUTSIDE_KTHREAD_ONCPU_NS, now - *since);
	}
	*since = now;
}

/* ---- scheduling --------------------------------------------------------------------------- */

/* How a target thread's switch stands to the rusage its parent will read. */
enum rusage_sight {
	IN_RUSAGE,    /* counted in every rusage read after it */
	AFTER_EXIT,   /* the thread's counts were already folded into the process's: in none */
	WHILE_REAPED, /* the group leader's, after its parent claimed it in wait4 (exit_state
		       * EXIT_DEAD): the reaper's getrusage sums the leader's counters meanwhile, so
		       * this switch is in the rusage wait4 returns or not, by a race. */
};

/* prev, a target thread, leaves its CPU. voluntary: the kernel counted the switch in nvcsw.
 * last: the thread's final switch (it is dead). */
static __always_inline void switch_out(__u32 tid, struct sc_task *t, bool voluntary,
				       enum rusage_sight sight, bool last, __u64 now)
{
	bool after_exit = sight == AFTER_EXIT;

	struct vec_counters *c = phase_vec();
	struct vec_series *s = series_vec(now);
	struct vec_cut *k = cut_vec();
	__u64 slice;

	if (c) {
		c->v[voluntary ? SC_SWITCHES_VOLUNTARY : SC_SWITCHES_INVOLUNTARY] += 1;
		if (after_exit)
			c->v[voluntary ? SC_SWITCHES_VOLUNTARY_AFTER_EXIT : SC_SWITCHES_INVOLUNTARY_AFTER_EXIT] += 1;
	}
	if (k) {
		k->v[voluntary ? SC_CUT_SWITCHES_VOLUNTARY : SC_CUT_SWITCHES_INVOLUNTARY] += 1;
		if (after_exit)
			k->v[voluntary ? SC_CUT_SWITCHES_VOLUNTARY_AFTER_EXIT
				       : SC_CUT_SWITCHES_INVOLUNTARY_AFTER_EXIT] += 1;
		if (sight == WHILE_REAPED)
			k->v[voluntary ? SC_CUT_SWITCHES_VOLUNTARY_WHILE_REAPED
				       : SC_CUT_SWITCHES_INVOLUNTARY_WHILE_REAPED] += 1;
	}
	if (s)
		s->v[voluntary ? SC_S_SWITCHES_VOLUNTARY : SC_S_SWITCHES_INVOLUNTARY] += 1;
	if (!t)
		return;
	if (t->on_ts && now > t->on_ts) {
		slice = now - t->on_ts;
		hist_add(SC_H_ONCPU_SLICE_NS, slice);
		t->oncpu_ns += slice;
		if (c)
			c->v[SC_ONCPU_NS] += slice;
		if (s)
			s->v[SC_S_ONCPU_NS] += slice;
	}
	t->on_ts = 0;
	/* Preempted (or yielded): still runnable, so its run-queue wait starts now. */
	t->wake_ts = voluntary ? 0 : now;
	if (voluntary)
		t->flags &= ~TF_PREEMPTED;
	else
		t->flags |= TF_PREEMPTED;
	if (last) {
		hist_add(SC_H_THREAD_ONCPU_NS, t->oncpu_ns);
		bpf_map_delete_elem(&tasks, &tid);
	}
}

/* next, a target thread, gets a CPU. */
static __always_inline void switch_in(struct sc_task *t, __u64 now)
{
	struct vec_counters *c;
	struct vec_series *s;
	__u64 wait;

	t->on_ts = now;
	if (!t->wake_ts || now < t->wake_ts)
		return;
	wait = now - t->wake_ts;
	t->wake_ts = 0;
	/* Which began the wait: the trace's wake-to-run and preempted-to-run follow the same rule
	 * (analyse/sched_trace.rs), the preemption told here by nvcsw, there by prev_state. */
	hist_add(t->flags & TF_PREEMPTED ? SC_H_PREEMPTED_TO_RUN_NS : SC_H_WAKE_TO_RUN_NS, wait);
	t->flags &= ~TF_PREEMPTED;
	c = phase_vec();
	if (c) {
		c->v[SC_RUNQ_NS] += wait;
		c->v[SC_RUNQ_WAITS] += 1;
	}
	s = series_vec(now);
	if (s)
		s->v[SC_S_RUNQ_NS] += wait;
}

/*
 * Voluntary or not: __schedule() bumps prev->nvcsw when the task blocks (!preempt && a non-running
 * state) and prev->nivcsw otherwise, just before this tracepoint. Reading which counter moved
 * since the thread's last switch is exact. The state rule (preempt || prev_state == RUNNING means
 * involuntary) is not: when a signal is pending as the task tries to block, try_to_block_task()
 * leaves it running and (since early 2025: 6.14 and stable) rewrites prev_state to RUNNING, while
 * nvcsw is still the counter bumped. The rule serves when the thread's previous count is unknown, and every
 * disagreement is counted (SC_SWITCH_RULE_DISAGREES).
 */
SEC("tp_btf/sched_switch")
int BPF_PROG(btf_sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	RAN(SC_P_SCHED_SWITCH);
	__u64 now;
	struct sc_task *t;
	bool prev_in_run, next_in_run;

	if (!armed())
		return 0;
	prev_in_run = task_in_run(prev);
	next_in_run = task_in_run(next);
	/* The clocksource is read only for what needs it: a slice of a task outside the run ends or
	 * begins here (outside_switch), or per-thread times are kept. A switch between two of the
	 * run's tasks in the lean probes times nothing: the series' bucket takes the tick's time, and
	 * cpu_since's value from it is never read (the next switch on this CPU has prev in the run). */
	if (cfg[SC_CFG_PER_THREAD] || !prev_in_run || !next_in_run)
		now = bpf_ktime_get_ns();
	else
		now = tick_ns();
	outside_switch(prev_in_run, prev->pid, prev->tgid, prev->flags, now);
	if (TRACE_ON)
		trace_switch_seen(prev->pid, prev_in_run, next->pid, next_in_run);
	if (TRACE_ON && (prev_in_run || next_in_run))
		trace_emit(SC_TK_SWITCH, trace_task(prev->pid, prev->tgid),
			   trace_task(next->pid, next->tgid),
			   preempt || prev_state == TASK_RUNNING
				   ? 0 : trace_state_bits(prev_state, prev->exit_state),
			   trace_prios(prev->prio, next->prio), next->comm, TC_KERNEL);
	if (prev_in_run) {
		__u32 tid = prev->pid;
		__u64 nvcsw = prev->nvcsw;
		bool by_rule = !preempt && prev_state != TASK_RUNNING;
		bool voluntary = by_rule;
		struct vec_counters *c;

		t = task_get(tid, true);
		if (t) {
			if (t->flags & TF_NV_KNOWN)
				voluntary = nvcsw != t->nvcsw_seen;
			t->nvcsw_seen = nvcsw;
			t->flags |= TF_NV_KNOWN;
		} else {
			__u64 *seen = bpf_map_lookup_elem(&nv_by_tid, &tid);

			if (seen && *seen)
				voluntary = nvcsw + 1 != *seen;
			else
				__sync_fetch_and_add(&state[SC_ST_NV_UNTRACKED], 1);
			if (seen)
				*seen = nvcsw + 1;
		}
		if (voluntary != by_rule) {
			c = phase_vec();
			if (c)
				c->v[SC_SWITCH_RULE_DISAGREES] += 1;
		}
		/* __exit_signal() adds a dying thread's counts to the process's and clears
		 * ->sighand: switches after that are in no rusage. The leader's come last: its parent
		 * reaps it (wait_task_zombie: exit_state to EXIT_DEAD, then getrusage, then
		 * release_task) once it is a zombie, which may be before its own final switch. */
		enum rusage_sight sight = IN_RUSAGE;

		/* The leader first: once claimed, even a switch seen after release_task may have
		 * been bumped before the reaper's getrusage read it. (No barrier orders the bump
		 * before this read of exit_state; the gap is a few instructions.) */
		if (prev->pid == prev->tgid && (prev->exit_state & EXIT_DEAD))
			sight = WHILE_REAPED;
		else if (prev->sighand == NULL)
			sight = AFTER_EXIT;
		switch_out(tid, t, voluntary, sight, prev_state & TASK_DEAD, now);
	}
	if (next_in_run) {
		t = task_get(next->pid, true);
		if (t)
			switch_in(t, now);
	}
	return 0;
}

struct tp_sched_switch {
	__u64 common;
	char prev_comm[16];
	pid_t prev_pid;
	int prev_prio;
	long prev_state;
	char next_comm[16];
	pid_t next_pid;
	int next_prio;
};

/*
 * Classic twin: no preempt argument, but the kernel encodes it in prev_state (TASK_REPORT_MAX,
 * the "+" of "R+"), and prev is current. Without task_struct the rule is all there is (see above
 * for where it errs), and "after exit" is approximated by the X/Z state of the last switch.
 * The trace: next's tgid is not in the record (0), and a switch from a task outside the run to
 * one of its tasks is known only by that task's per-thread entry (Config::per_thread).
 */
SEC("tracepoint/sched/sched_switch")
int tp_sched_switch(struct tp_sched_switch *ctx)
{
	RAN(SC_P_SCHED_SWITCH);
	bool current_target;
	long st = ctx->prev_state;
	bool voluntary = !(st & TASK_REPORT_MAX) && (st & 0xff) != 0;
	__u64 now;
	struct sc_task *t;

	if (!armed()) {
		/* The held child before its exec: user space knows its counters up to the hold
		 * (/proc), these probes the rest. */
		if (current_is_launched())
			__sync_fetch_and_add(&state[voluntary ? SC_ST_PREARM_VOLUNTARY
							      : SC_ST_PREARM_INVOLUNTARY], 1);
		return 0;
	}
	now = bpf_ktime_get_ns();
	current_target = current_in_run();
	/* prev is current: its tgid is ours to read. */
	outside_switch(current_target, ctx->prev_pid, (__u32)(bpf_get_current_pid_tgid() >> 32),
		       BPF_CORE_READ((struct task_struct *)bpf_get_current_task(), flags), now);
	if (current_target) {
		bool last = st & (REPORT_EXIT_DEAD | REPORT_EXIT_ZOMBIE);
		__u32 tid = ctx->prev_pid;

		t = task_get(tid, true);
		switch_out(tid, t, voluntary, last ? AFTER_EXIT : IN_RUSAGE, last, now);
	}
	/* next's tgid is not in the record: a target thread is one with an entry. */
	t = task_get(ctx->next_pid, false);
	if (TRACE_ON)
		trace_switch_seen(ctx->prev_pid, current_target, ctx->next_pid, t != NULL);
	if (TRACE_ON && (current_target || t))
		trace_emit(SC_TK_SWITCH, bpf_get_current_pid_tgid(), trace_task(ctx->next_pid, 0),
			   st & TASK_REPORT_MAX ? 0 : st & (TASK_REPORT_MAX - 1),
			   trace_prios(ctx->prev_prio, ctx->next_prio), ctx->next_comm, TC_CTX);
	if (t)
		switch_in(t, now);
	return 0;
}

/* A target thread became runnable; t: its entry, when per-thread state is kept. */
static __always_inline void woken(struct sc_task *t)
{
	struct vec_counters *c = phase_vec();

	if (t) {
		/* A wakeup replaces a pending preemption as the wait's start, as in the trace. */
		t->wake_ts = bpf_ktime_get_ns();
		t->flags &= ~TF_PREEMPTED;
	}
	if (c)
		c->v[SC_WAKEUPS] += 1;
}

/* The trace's record of a wakeup (sched_wakeup, not sched_waking: see below why). */
static __always_inline void trace_wakeup_btf(__u32 kind, struct task_struct *p)
{
	if (TRACE_ON)
		trace_emit(kind, trace_task(p->pid, p->tgid), bpf_get_current_pid_tgid(),
			   trace_task_cpu(p), trace_prios(p->prio, 0), p->comm, TC_KERNEL);
}

/*
 * The trace takes sched_wakeup, where the woken task is enqueued, rather than sched_waking,
 * where its waker starts: the collector already runs a program here (one more tracepoint would
 * be one more program run for every wakeup on the machine), and its run-queue wait starts here,
 * so the trace's wake-to-run agrees with SC_H_RUNQ_NS. What it costs: on a remote wakeup through
 * the wake list the task is enqueued by the target CPU's IPI, so the record's OTHER is whatever
 * ran there, not the waker, and its time is the enqueue's, after the IPI.
 */
SEC("tp_btf/sched_wakeup")
int BPF_PROG(btf_sched_wakeup, struct task_struct *p)
{
	RAN(SC_P_SCHED_WAKEUP);
	struct sc_task *t;

	if (!armed() || !task_in_run(p))
		return 0;
	trace_wakeup_btf(SC_TK_WAKEUP, p);
	t = task_get(p->pid, true);
	woken(t);
	return 0;
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(btf_sched_wakeup_new, struct task_struct *p)
{
	RAN(SC_P_SCHED_WAKEUP_NEW);
	struct sc_task *t;

	if (!armed() || !task_in_run(p))
		return 0;
	trace_wakeup_btf(SC_TK_WAKEUP_NEW, p);
	t = task_get(p->pid, true);
	woken(t);
	return 0;
}

struct tp_sched_wakeup {
	__u64 common;
	char comm[16];
	pid_t pid;
	int prio;
	int target_cpu;
};

/* Classic twins: a task of the run is one with a per-thread entry (Config::per_thread; without
 * it they count and trace nothing), and its tgid is not in the record (0). */
static __always_inline void trace_wakeup_tp(__u32 kind, struct tp_sched_wakeup *ctx)
{
	if (TRACE_ON)
		trace_emit(kind, trace_task(ctx->pid, 0), bpf_get_current_pid_tgid(),
			   (__u32)ctx->target_cpu, trace_prios(ctx->prio, 0), ctx->comm, TC_CTX);
}

SEC("tracepoint/sched/sched_wakeup")
int tp_sched_wakeup(struct tp_sched_wakeup *ctx)
{
	RAN(SC_P_SCHED_WAKEUP);
	struct sc_task *t;

	if (!armed())
		return 0;
	t = task_get(ctx->pid, false);
	if (t) {
		trace_wakeup_tp(SC_TK_WAKEUP, ctx);
		woken(t);
	}
	return 0;
}

SEC("tracepoint/sched/sched_wakeup_new")
int tp_sched_wakeup_new(struct tp_sched_wakeup *ctx)
{
	RAN(SC_P_SCHED_WAKEUP_NEW);
	struct sc_task *t;

	if (!armed())
		return 0;
	t = task_get(ctx->pid, false);
	if (t) {
		trace_wakeup_tp(SC_TK_WAKEUP_NEW, ctx);
		woken(t);
	}
	return 0;
}

static __always_inline void migrated(void)
{
	struct vec_counters *c = phase_vec();

	if (c)
		c->v[SC_MIGRATIONS] += 1;
}

SEC("tp_btf/sched_migrate_task")
int BPF_PROG(btf_sched_migrate_task, struct task_struct *p, int dest_cpu)
{
	RAN(SC_P_SCHED_MIGRATE_TASK);
	if (armed() && task_in_run(p))
		migrated();
	return 0;
}

struct tp_sched_migrate_task {
	__u64 common;
	__u32 comm_loc;
	pid_t pid;
	int prio;
	int orig_cpu;
	int dest_cpu;
};

SEC("tracepoint/sched/sched_migrate_task")
int tp_sched_migrate_task(struct tp_sched_migrate_task *ctx)
{
	RAN(SC_P_SCHED_MIGRATE_TASK);
	if (armed() && task_get(ctx->pid, false))
		migrated();
	return 0;
}
