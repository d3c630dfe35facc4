// SPDX-License-Identifier: (MIT OR GPL-2.0)
/*
 * spawnscope collector: what one process (a thread group) costs the kernel while it spawns, holds
 * and joins its tasks, counted in the kernel and read once at the end. No event reaches user
 * space while the workload runs.
 *
 * Filter: the tgid in cfg[SC_CFG_TGID], from its exec on (sched_process_exec arms the counting;
 * what the forked child did before exec is not the workload's). Its threads are created after the
 * exec and share the tgid.
 *
 * Attach: only tracepoints. Most probes come in twins: a tp_btf program (typed arguments, CO-RE
 * reads of task_struct) and a classic tracepoint program (the tracefs format record, no BTF
 * needed). User space loads the tp_btf one and falls back to the twin per probe when it cannot
 * (collector/src/attach.rs). Syscall probes exist only as classic tracepoints: their tp_btf
 * counterpart would be raw_syscalls:sys_enter, which fires on every syscall of every process.
 *
 * Aggregation: counters per phase (the phase slot user space sets from the workload's phase
 * events), per getrusage epoch (for the cross-checks with the kernel's own accounting), per time
 * bucket, and log2 histograms. Per-thread state (switch-in time, wakeup time, syscall entry) sits
 * in one hash keyed by tid, sized at load time.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "collector.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* Kernel ABI constants (stable for years; see include/linux/sched.h, uapi/linux/sched.h). */
#define TASK_RUNNING 0x0000
#define TASK_DEAD 0x0080          /* __state of a task's last switch (do_task_dead) */
#define TASK_REPORT_MAX 0x0100    /* classic sched_switch prev_state: the switch was a preemption */
#define REPORT_EXIT_DEAD 0x0010   /* classic sched_switch prev_state "X" */
#define REPORT_EXIT_ZOMBIE 0x0020 /* classic sched_switch prev_state "Z" */
#define EXIT_DEAD 0x0010          /* task_struct exit_state: set by the reaper (EXIT_TRACE has it too) */
#define CLONE_THREAD 0x00010000
#define RUSAGE_SELF 0
#define EAGAIN 11
#define ETIMEDOUT 110
#define ENOENT 2

/* A fault counts as the faulting thread's own stack when it lies this close to the thread's user
 * stack pointer (and, when the VMA can be looked up, in the same VMA): stacks grow down, a new
 * frame's page is touched at or just below SP, a big frame up to its size above it. A window
 * instead of the whole VMA because Go runs goroutines on stacks carved out of its heap arenas. */
#define STACK_BELOW_SP (64 * 1024)
#define STACK_ABOVE_SP (256 * 1024)

/* ---- configuration and global state ------------------------------------------------------ */

/* Each in a section of its own, so user space finds each array at offset 0 of its map. */
const volatile __u64 cfg[SC_NR_CFG] SEC(".rodata.cfg") = {};
__u64 state[SC_NR_STATE] SEC(".data.state") = {};
volatile __u64 ctl[SC_NR_CTL] SEC(".data.ctl") = {};
/* When the n-th phase event was seen written (kernel clock). */
__u64 phase_seen_ns[SC_PHASE_SLOTS] SEC(".data.phases") = {};

#define TGID ((__u32)cfg[SC_CFG_TGID])

/* ---- maps --------------------------------------------------------------------------------- */

struct vec_counters { __u64 v[SC_NR_COUNTERS]; };
struct vec_cut { __u64 v[SC_NR_CUT]; };
struct vec_series { __u64 v[SC_NR_SERIES]; };
struct vec_rss { __u64 v[SC_NR_RSS]; };

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SC_PHASE_SLOTS);
	__type(key, __u32);
	__type(value, struct vec_counters);
} phase_counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SC_CUT_EPOCHS);
	__type(key, __u32);
	__type(value, struct vec_cut);
} cut_counters SEC(".maps");

/* max_entries = number of time buckets, set at load time. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct vec_series);
} series SEC(".maps");

/* A gauge, so one shared copy (last writer wins), not per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct vec_rss);
} rss SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SC_NR_HISTS * SC_HIST_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} hists SEC(".maps");

/* Failures are rare: shared, atomic adds. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SC_NR_SYS * SC_ERRNO_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} errnos SEC(".maps");

#define TF_NV_KNOWN 1 /* nvcsw_seen holds the task's nvcsw at its last switch-out */

struct sc_task {
	__u64 on_ts;      /* on a CPU since, else 0 */
	__u64 wake_ts;    /* runnable (woken or preempted) since, else 0 */
	__u64 sys_ts;     /* inside syscall sys_kind since */
	__u64 nvcsw_seen;
	__u64 oncpu_ns;   /* the thread's on-CPU time so far */
	__u32 sys_kind;   /* enum sc_sys, SC_NR_SYS = none */
	__u32 flags;
};

/* One entry per live thread of the target; max_entries set at load time from the expected tasks
 * (capped by pid_max). Preallocated, so updates are safe in scheduler context. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sc_task);
} tasks SEC(".maps");

/* Without per-thread state (the hash map above), each target thread's nvcsw at its last switch-out
 * still tells a voluntary switch from an involuntary one exactly (see btf_sched_switch): kept in
 * an array indexed by tid, max_entries = pid_max set at load time (8 bytes a possible tid; no tid
 * reaches pid_max). An array lookup is an address computation; a hash or task-storage lookup cost
 * ~300 ns a switch here (BPF run-time statistics). A slot holds nvcsw + 1 (0: not known, e.g. the
 * main thread when exec was seen by the classic program); new threads set theirs. A switch whose
 * slot is missing or unknown is told by the prev_state rule and counted in SC_ST_NV_UNTRACKED.
 * tp_btf only. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} nv_by_tid SEC(".maps");

/* The start of each kind of wait a task may be inside, for the wait figures without a per-thread
 * hash: an array indexed by tid (a lookup is an index, no hashing, nothing allocated per task;
 * task local storage cost two to three times more here, creating its struct for every new
 * thread). Sized at load to a power of two: every tid below pid_max when that is small enough,
 * else twice the tasks expected, slot = tid & (slots - 1), each slot tagged with its tid. A task
 * finding its slot held by another task's wait in progress is not timed (SC_ST_WAITS_LOST). */
struct sc_waits {
	__u64 tid;               /* whose slot it is now (64 bits: BPF has no 32-bit cmpxchg here) */
	__u64 lock_ts[2];        /* contention_begin, two levels (a mutex's wait_lock inside it) */
	__u64 lock_addr[2];
	__u32 lock_kind[2];
	__u32 lock_depth;
	__u32 futex_kind;        /* enum sc_sys: FUTEX_WAIT, FUTEX_WAKE, SC_NR_SYS = none */
	__u64 futex_ts;
	__s64 futex_bucket;      /* bucket this wait was counted in, -1 none */
	__u64 futex_uaddr;       /* ... and its address (futex_addrs' waiters), 0 none */
	__u64 machine_ts[3];     /* machine-wide, any task: the start of its enum machine_wait */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);  /* set at load: one slot per possible tid (pid_max) */
	__type(key, __u32);
	__type(value, struct sc_waits);
} waits_by_tid SEC(".maps");

struct vec_fbucket { __u64 v[SC_NR_FB]; };
struct vec_faddr { __u64 v[SC_NR_FA]; };

/* Waiters per bucket of the target's private futex hash: what each wake walks. Shared by all
 * CPUs, so atomic adds. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SC_FUTEX_BUCKETS);
	__type(key, __u32);
	__type(value, struct vec_fbucket);
} futex_buckets SEC(".maps");

/* Per futex address (private ops only), for naming the futexes whose wakes walk the most. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SC_FUTEX_ADDRS);
	__type(key, __u64);
	__type(value, struct vec_faddr);
} futex_addrs SEC(".maps");

/* When this CPU's current task got it (sched_switch): on-CPU time of tasks outside the run. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} cpu_since SEC(".maps");

/* ---- small helpers ------------------------------------------------------------------------ */

static __always_inline bool armed(void)
{
	return state[SC_ST_ARMED] != 0;
}

static __always_inline bool current_is_target(void)
{
	return armed() && (__u32)(bpf_get_current_pid_tgid() >> 32) == TGID;
}

static __always_inline struct vec_counters *phase_vec(void)
{
	__u64 from_user = ctl[SC_CTL_PHASE_SLOT], from_stdout = state[SC_ST_PHASE_EVENTS];
	__u32 slot = from_user > from_stdout ? from_user : from_stdout;

	if (slot >= SC_PHASE_SLOTS)
		slot = SC_PHASE_SLOTS - 1;
	return bpf_map_lookup_elem(&phase_counters, &slot);
}

static __always_inline void count_at(__u32 idx, __u64 n)
{
	struct vec_counters *c = phase_vec();

	if (c && idx < SC_NR_COUNTERS)
		c->v[idx] += n;
}

static __always_inline struct vec_cut *cut_vec(void)
{
	__u32 epoch = state[SC_ST_GETRUSAGE_CALLS] + state[SC_ST_GETRUSAGE_RETURNS];

	if (epoch >= SC_CUT_EPOCHS)
		epoch = SC_CUT_EPOCHS - 1;
	return bpf_map_lookup_elem(&cut_counters, &epoch);
}

static __always_inline __u32 bucket_of(__u64 now)
{
	__u64 t0 = state[SC_ST_T0_NS], bucket = 0;

	if (now > t0 && cfg[SC_CFG_BUCKET_NS])
		bucket = (now - t0) / cfg[SC_CFG_BUCKET_NS];
	if (bucket >= cfg[SC_CFG_NR_BUCKETS]) {
		bucket = cfg[SC_CFG_NR_BUCKETS] - 1;
		__sync_fetch_and_add(&state[SC_ST_LATE_EVENTS], 1);
	}
	return bucket;
}

static __always_inline struct vec_series *series_vec(__u64 now)
{
	__u32 bucket = bucket_of(now);

	return bpf_map_lookup_elem(&series, &bucket);
}

/* floor(log2(v)), 0 for v <= 1: the histogram slot of v. */
static __always_inline __u32 log2_slot(__u64 v)
{
	__u32 r = 0;

	if (v >> 32) { v >>= 32; r += 32; }
	if (v >> 16) { v >>= 16; r += 16; }
	if (v >> 8) { v >>= 8; r += 8; }
	if (v >> 4) { v >>= 4; r += 4; }
	if (v >> 2) { v >>= 2; r += 2; }
	if (v >> 1) r += 1;
	return r;
}

static __always_inline void hist_add(__u32 hist, __u64 value)
{
	__u32 key = hist * SC_HIST_SLOTS + log2_slot(value);
	__u64 *slot = bpf_map_lookup_elem(&hists, &key);

	if (slot)
		*slot += 1;
}

/* The tid's entry; with create, made when missing (counted in SC_ST_TASKS_FULL when full). None
 * without per-thread state: the hash map is most of what a switch, a wakeup or a new thread costs
 * (measured with the kernel's BPF run-time statistics), so by default only counters are kept. */
static __always_inline struct sc_task *task_get(__u32 tid, bool create)
{
	struct sc_task *t;
	struct sc_task fresh = { .sys_kind = SC_NR_SYS };

	if (!cfg[SC_CFG_PER_THREAD])
		return NULL;
	t = bpf_map_lookup_elem(&tasks, &tid);
	if (t || !create)
		return t;
	if (bpf_map_update_elem(&tasks, &tid, &fresh, BPF_NOEXIST) != 0) {
		t = bpf_map_lookup_elem(&tasks, &tid); /* made meanwhile by another CPU? */
		if (!t)
			__sync_fetch_and_add(&state[SC_ST_TASKS_FULL], 1);
		return t;
	}
	return bpf_map_lookup_elem(&tasks, &tid);
}

/* A slot holds no wait in progress: another tid may take it. */
static __always_inline bool waits_idle(struct sc_waits *w)
{
	return !w->lock_depth && w->futex_kind == SC_NR_SYS && !w->machine_ts[0] &&
	       !w->machine_ts[1] && !w->machine_ts[2];
}

/* The current task's wait starts. With `start` (a wait begins) the slot is taken when idle;
 * without (a wait ends) only the task's own slot is returned. NULL without the wait figures. */
static __always_inline struct sc_waits *waits_get(bool start)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u32 slot = tid & (__u32)(cfg[SC_CFG_WAIT_SLOTS] - 1);
	struct sc_waits *w;
	__u64 owner;

	if (!cfg[SC_CFG_TASK_STORAGE])
		return NULL;
	w = bpf_map_lookup_elem(&waits_by_tid, &slot);
	if (!w)
		return NULL;
	owner = w->tid;
	if (owner == tid)
		return w;
	if (!start)
		return NULL;
	/* Taken with a compare-and-swap, so two tasks sharing the slot cannot both take it. (A task
	 * past its own tag check while another takes the slot still writes into it: a window of a
	 * few instructions, only when slots < pid_max.) */
	if ((owner && !waits_idle(w)) ||
	    __sync_val_compare_and_swap(&w->tid, owner, tid) != owner) {
		__sync_fetch_and_add(&state[SC_ST_WAITS_LOST], 1);
		return NULL;
	}
	w->lock_depth = 0;
	w->futex_kind = SC_NR_SYS;
	w->futex_ts = 0;
	w->futex_bucket = -1;
	w->futex_uaddr = 0;
	w->machine_ts[0] = 0;
	w->machine_ts[1] = 0;
	w->machine_ts[2] = 0;
	return w;
}

/* On-CPU time of the task leaving this CPU when it is outside the run: not the target's, not the
 * collector's own process, not the idle task. */
static __always_inline void outside_switch(__u32 prev_pid, __u32 prev_tgid, __u64 now)
{
	__u32 zero = 0;
	__u64 *since = bpf_map_lookup_elem(&cpu_since, &zero);

	if (!since)
		return;
	if (*since && now > *since && prev_pid != 0 && prev_tgid != TGID &&
	    prev_tgid != (__u32)cfg[SC_CFG_SELF_TGID])
		count_at(SC_OUTSIDE_ONCPU_NS, now - *since);
	*since = now;
}

/* ---- exec: arms the counting -------------------------------------------------------------- */

static __always_inline void arm(__u64 now)
{
	if (!state[SC_ST_ARMED]) {
		state[SC_ST_T0_NS] = now;
		state[SC_ST_ARMED] = 1; /* last: every other program checks it first */
	}
	state[SC_ST_EXECS] += 1;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(btf_sched_process_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
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

static __always_inline void new_task(__u32 tid, __u64 clone_flags, __u64 nvcsw, bool nv_known)
{
	__u64 now = bpf_ktime_get_ns();
	struct vec_counters *c = phase_vec();
	struct vec_series *s;
	struct vec_cut *k;
	struct sc_task *t;

	if (!(clone_flags & CLONE_THREAD)) {
		if (c)
			c->v[SC_NEW_PROCESSES] += 1;
		return;
	}
	if (c)
		c->v[SC_NEW_THREADS] += 1;
	k = cut_vec();
	if (k)
		k->v[SC_CUT_NEW_THREADS] += 1;
	s = series_vec(now);
	if (s)
		s->v[SC_S_NEW_THREADS] += 1;
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
	if (!current_is_target())
		return 0;
	new_task(task->pid, clone_flags, task->nvcsw, true);
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
	if (!current_is_target())
		return 0;
	/* A new thread's nvcsw starts at 0 (copy_process). */
	new_task(ctx->pid, ctx->clone_flags, 0, true);
	return 0;
}

static __always_inline void thread_exit(void)
{
	struct vec_counters *c = phase_vec();
	struct vec_series *s = series_vec(bpf_ktime_get_ns());

	if (c)
		c->v[SC_THREAD_EXITS] += 1;
	if (s)
		s->v[SC_S_THREAD_EXITS] += 1;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(btf_sched_process_exit, struct task_struct *p)
{
	if (armed() && (__u32)p->tgid == TGID)
		thread_exit();
	return 0;
}

SEC("tracepoint/sched/sched_process_exit")
int tp_sched_process_exit(void *ctx)
{
	if (current_is_target()) /* the exiting task is current */
		thread_exit();
	return 0;
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
	hist_add(SC_H_RUNQ_NS, wait);
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
	__u64 now;
	struct sc_task *t;

	if (!armed())
		return 0;
	now = bpf_ktime_get_ns();
	outside_switch(prev->pid, prev->tgid, now);
	if ((__u32)prev->tgid == TGID) {
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
	if ((__u32)next->tgid == TGID) {
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
 */
SEC("tracepoint/sched/sched_switch")
int tp_sched_switch(struct tp_sched_switch *ctx)
{
	bool current_target = (__u32)(bpf_get_current_pid_tgid() >> 32) == TGID;
	long st = ctx->prev_state;
	bool voluntary = !(st & TASK_REPORT_MAX) && (st & 0xff) != 0;
	__u64 now;
	struct sc_task *t;

	if (!armed()) {
		/* The held child before its exec: user space knows its counters up to the hold
		 * (/proc), these probes the rest. */
		if (current_target)
			__sync_fetch_and_add(&state[voluntary ? SC_ST_PREARM_VOLUNTARY
							      : SC_ST_PREARM_INVOLUNTARY], 1);
		return 0;
	}
	now = bpf_ktime_get_ns();
	/* prev is current: its tgid is ours to read. */
	outside_switch(ctx->prev_pid, (__u32)(bpf_get_current_pid_tgid() >> 32), now);
	if (current_target) {
		bool last = st & (REPORT_EXIT_DEAD | REPORT_EXIT_ZOMBIE);
		__u32 tid = ctx->prev_pid;

		t = task_get(tid, true);
		switch_out(tid, t, voluntary, last ? AFTER_EXIT : IN_RUSAGE, last, now);
	}
	/* next's tgid is not in the record: a target thread is one with an entry. */
	t = task_get(ctx->next_pid, false);
	if (t)
		switch_in(t, now);
	return 0;
}

/* A target thread became runnable; t: its entry, when per-thread state is kept. */
static __always_inline void woken(struct sc_task *t)
{
	struct vec_counters *c = phase_vec();

	if (t)
		t->wake_ts = bpf_ktime_get_ns();
	if (c)
		c->v[SC_WAKEUPS] += 1;
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(btf_sched_wakeup, struct task_struct *p)
{
	struct sc_task *t;

	if (!armed() || (__u32)p->tgid != TGID)
		return 0;
	t = task_get(p->pid, true);
	woken(t);
	return 0;
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(btf_sched_wakeup_new, struct task_struct *p)
{
	struct sc_task *t;

	if (!armed() || (__u32)p->tgid != TGID)
		return 0;
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

SEC("tracepoint/sched/sched_wakeup")
int tp_sched_wakeup(struct tp_sched_wakeup *ctx)
{
	struct sc_task *t;

	if (!armed())
		return 0;
	t = task_get(ctx->pid, false);
	if (t)
		woken(t);
	return 0;
}

SEC("tracepoint/sched/sched_wakeup_new")
int tp_sched_wakeup_new(struct tp_sched_wakeup *ctx)
{
	struct sc_task *t;

	if (!armed())
		return 0;
	t = task_get(ctx->pid, false);
	if (t)
		woken(t);
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
	if (armed() && (__u32)p->tgid == TGID)
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
	if (armed() && task_get(ctx->pid, false))
		migrated();
	return 0;
}

/* ---- page faults -------------------------------------------------------------------------- */

struct vma_probe {
	__u64 addr;
	__u64 sp;
	__u32 kind;
};

static __always_inline bool near_sp(__u64 addr, __u64 sp)
{
	return sp && addr + STACK_BELOW_SP >= sp && addr < sp + STACK_ABOVE_SP;
}

static long classify_vma(struct task_struct *task, struct vm_area_struct *vma, void *data)
{
	struct vma_probe *p = data;

	if (vma->vm_file)
		p->kind = SC_FAULT_FILE;
	else if (near_sp(p->addr, p->sp) && vma->vm_start <= p->sp && p->sp < vma->vm_end)
		p->kind = SC_FAULT_STACK;
	else
		p->kind = SC_FAULT_ANON;
	return 0;
}

/*
 * Which memory the fault is in: the faulting thread's own stack (near its user SP), the brk heap,
 * elsewhere. Neither needs a lock. At FAULT_KINDS_VMA "elsewhere" is split further by looking up
 * the VMA: other anonymous memory (mmap'd heaps, Go's arenas and the goroutine stacks in them,
 * other threads' stacks) or a file, and "stack" must share the VMA of SP. That lookup takes
 * mmap_lock with a trylock and, IRQs being off in this tracepoint, releases it from an irq_work:
 * about 15 us per fault on the 2-core VM, which quadrupled the goroutines' spawn time -- so it is
 * not the default. The trylock fails whenever another thread holds mmap_lock for writing (during
 * thread spawning, often: each new stack is mmap'd and mprotect'd); the fault is then "other".
 */
#define FAULT_KINDS_VMA 2

static __always_inline __u32 fault_kind(__u64 addr, __u64 sp)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct mm_struct *mm = task->mm;
	struct vma_probe p = { .addr = addr, .sp = sp, .kind = SC_FAULT_OTHER };
	bool near = near_sp(addr, sp);
	long err;

	if (!mm)
		return SC_FAULT_UNCLASSIFIED;
	if (addr >= BPF_CORE_READ(mm, start_brk) && addr < BPF_CORE_READ(mm, brk))
		return SC_FAULT_HEAP;
	if (cfg[SC_CFG_FAULT_KINDS] < FAULT_KINDS_VMA)
		return near ? SC_FAULT_STACK : SC_FAULT_OTHER;
	err = bpf_find_vma(task, addr, classify_vma, &p, 0);
	if (err == -ENOENT)
		/* Below the main stack's VMA: the stack growing, else a bad address. */
		return near ? SC_FAULT_STACK : SC_FAULT_NOVMA;
	if (err) {
		__sync_fetch_and_add(&state[SC_ST_VMA_BUSY], 1);
		return near ? SC_FAULT_STACK : SC_FAULT_OTHER;
	}
	return p.kind;
}

static __always_inline void fault(bool user_mode, __u32 kind)
{
	__u64 now = bpf_ktime_get_ns();
	struct vec_counters *c = phase_vec();
	struct vec_series *s = series_vec(now);
	struct vec_cut *k = cut_vec();

	if (kind > SC_FAULT_UNCLASSIFIED || kind < SC_FAULT_STACK)
		kind = SC_FAULT_UNCLASSIFIED;
	if (c) {
		c->v[user_mode ? SC_FAULTS_USER : SC_FAULTS_KERNEL] += 1;
		c->v[kind] += 1;
	}
	if (k)
		k->v[SC_CUT_FAULTS] += 1;
	if (s)
		s->v[SC_S_FAULTS] += 1;
}

SEC("tp_btf/page_fault_user")
int BPF_PROG(btf_page_fault_user, unsigned long address, struct pt_regs *regs,
	     unsigned long error_code)
{
	__u32 kind = SC_FAULT_UNCLASSIFIED;

	if (!current_is_target())
		return 0;
	if (cfg[SC_CFG_FAULT_KINDS])
		kind = fault_kind(address, regs->sp);
	fault(true, kind);
	return 0;
}

/* rusage's minflt also counts faults the kernel takes on user addresses (copy_to_user into a fresh
 * page, a futex word, the clear_child_tid write at thread exit): this tracepoint. Faults on kernel
 * addresses (vmalloc) are no process's. */
SEC("tp_btf/page_fault_kernel")
int BPF_PROG(btf_page_fault_kernel, unsigned long address, struct pt_regs *regs,
	     unsigned long error_code)
{
	__u32 kind = SC_FAULT_UNCLASSIFIED;
	struct pt_regs *user_regs;

	if ((long)address < 0 || !current_is_target())
		return 0;
	if (cfg[SC_CFG_FAULT_KINDS]) {
		user_regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
		kind = fault_kind(address, BPF_CORE_READ(user_regs, sp));
	}
	fault(false, kind);
	return 0;
}

struct tp_page_fault {
	__u64 common;
	unsigned long address;
	unsigned long ip;
	unsigned long error_code;
};

static __always_inline void classic_fault(bool user_mode)
{
	if ((__u32)(bpf_get_current_pid_tgid() >> 32) != TGID)
		return;
	if (armed())
		fault(user_mode, SC_FAULT_UNCLASSIFIED);
	else
		__sync_fetch_and_add(&state[SC_ST_PREARM_FAULTS], 1);
}

SEC("tracepoint/exceptions/page_fault_user")
int tp_page_fault_user(struct tp_page_fault *ctx)
{
	classic_fault(true);
	return 0;
}

SEC("tracepoint/exceptions/page_fault_kernel")
int tp_page_fault_kernel(struct tp_page_fault *ctx)
{
	if ((long)ctx->address >= 0)
		classic_fault(false);
	return 0;
}

/* ---- RSS ---------------------------------------------------------------------------------- */

static __always_inline void rss_seen(int member, __s64 bytes)
{
	__u32 bucket = bucket_of(bpf_ktime_get_ns());
	struct vec_rss *r = bpf_map_lookup_elem(&rss, &bucket);

	if (!r || member < 0 || member >= SC_NR_RSS)
		return;
	r->v[member] = (bytes > 0 ? bytes : 0) + 1;
}

/* Only changes made by the target's own threads to its own mm ("curr"); reclaim by kswapd is left
 * out, and so is any mm that happens to reuse the address after the target is gone. */
SEC("tp_btf/rss_stat")
int BPF_PROG(btf_rss_stat, struct mm_struct *mm, int member)
{
	struct task_struct *task;
	__s64 pages;

	if (!current_is_target())
		return 0;
	task = bpf_get_current_task_btf();
	if ((__u64)task->mm != (__u64)mm)
		return 0;
	/* Constant indexes: each read is relocated with the kernel's own sizeof(percpu_counter). */
	switch (member) {
	case SC_RSS_FILE: pages = BPF_CORE_READ(mm, rss_stat[SC_RSS_FILE].count); break;
	case SC_RSS_ANON: pages = BPF_CORE_READ(mm, rss_stat[SC_RSS_ANON].count); break;
	case SC_RSS_SWAP: pages = BPF_CORE_READ(mm, rss_stat[SC_RSS_SWAP].count); break;
	case SC_RSS_SHMEM: pages = BPF_CORE_READ(mm, rss_stat[SC_RSS_SHMEM].count); break;
	default: return 0;
	}
	rss_seen(member, pages * (__s64)cfg[SC_CFG_PAGE_SIZE]);
	return 0;
}

struct tp_rss_stat {
	__u64 common;
	__u32 mm_id;
	__u32 curr;
	int member;
	int pad;
	long size;
};

SEC("tracepoint/kmem/rss_stat")
int tp_rss_stat(struct tp_rss_stat *ctx)
{
	if (ctx->curr && current_is_target())
		rss_seen(ctx->member, ctx->size);
	return 0;
}

/* ---- syscalls (classic tracepoints only) -------------------------------------------------- */

struct tp_sys_enter {
	__u64 common;
	int nr;
	int pad;
	unsigned long args[6];
};

struct tp_sys_exit {
	__u64 common;
	int nr;
	int pad;
	long ret;
};

static __always_inline void syscall_enter(__u32 kind)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct sc_task *t = task_get(tid, true);

	if (t) {
		t->sys_ts = bpf_ktime_get_ns();
		t->sys_kind = kind;
	}
}

/* The time since the matching enter, 0 when there was none (e.g. the child's return from clone). */
static __always_inline __u64 syscall_exit(__u32 kind)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct sc_task *t = task_get(tid, false);
	__u64 now = bpf_ktime_get_ns(), took = 0;

	if (t && t->sys_kind == kind && t->sys_ts && now >= t->sys_ts)
		took = now - t->sys_ts;
	if (t)
		t->sys_kind = SC_NR_SYS;
	return took;
}

static __always_inline void count(__u32 idx, __u64 n)
{
	count_at(idx, n);
}

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
 * The futex hash a private futex lands in. Since 6.16 a process has its own hash
 * (mm->futex_phash, kernel/futex/core.c): bucket = jhash2({address low, high}, 2, offset) &
 * hash_mask, where address is uaddr's page and offset uaddr's place in it. futex_wake() walks
 * that bucket's whole chain -- every waiter queued on any address hashing there -- under the
 * bucket's spinlock, until it has woken nr_wake matching waiters. Counting each bucket's waiters
 * (+1 at a wait op's entry, -1 at its exit) tells, at each wake, how many it may walk.
 */
struct futex_private_hash___x {
	unsigned int hash_mask;
} __attribute__((preserve_access_index));

struct rw_semaphore___x {
	long count;
} __attribute__((preserve_access_index));

struct mm_struct___x {
	struct futex_private_hash___x *futex_phash;
	struct rw_semaphore___x mmap_lock;
} __attribute__((preserve_access_index));

static __always_inline __u32 rol32(__u32 word, __u32 shift)
{
	return (word << shift) | (word >> ((-shift) & 31));
}

/* include/linux/jhash.h, jhash2() for two words: Bob Jenkins' lookup3 final mix. */
static __always_inline __u32 jhash2_2(__u32 k0, __u32 k1, __u32 initval)
{
	__u32 a, b, c;

	a = b = c = 0xdeadbeef + (2 << 2) + initval;
	b += k1;
	a += k0;
	c ^= b; c -= rol32(b, 14);
	a ^= c; a -= rol32(c, 11);
	b ^= a; b -= rol32(a, 25);
	c ^= b; c -= rol32(b, 16);
	a ^= c; a -= rol32(c, 4);
	b ^= a; b -= rol32(a, 14);
	c ^= b; c -= rol32(b, 24);
	return c;
}

/* The bucket of private futex uaddr in the current process's own hash, -1 when not known (no
 * private hash: the process uses the global one; a kernel before 6.16; a hash too big). */
static __always_inline __s64 futex_bucket_of(__u64 uaddr)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct mm_struct___x *mm;
	struct futex_private_hash___x *fph;
	__u64 page = cfg[SC_CFG_PAGE_SIZE] ? cfg[SC_CFG_PAGE_SIZE] : 4096;
	__u64 offset = uaddr & (page - 1), address = uaddr - offset, slots, seen;
	__u32 mask;

	if (!bpf_core_field_exists(struct mm_struct___x, futex_phash))
		return -1;
	mm = (struct mm_struct___x *)BPF_CORE_READ(task, mm);
	fph = BPF_CORE_READ(mm, futex_phash);
	mask = fph ? BPF_CORE_READ(fph, hash_mask) : 0;
	if (!mask) {
		__sync_fetch_and_add(&state[SC_ST_FUTEX_GLOBAL_HASH], 1);
		return -1;
	}
	slots = (__u64)mask + 1;
	seen = state[SC_ST_FUTEX_HASH_SLOTS];
	if (seen != slots) {
		if (seen)
			__sync_fetch_and_add(&state[SC_ST_FUTEX_HASH_RESIZES], 1);
		state[SC_ST_FUTEX_HASH_SLOTS] = slots;
	}
	if (slots > SC_FUTEX_BUCKETS) {
		__sync_fetch_and_add(&state[SC_ST_FUTEX_HASH_TOO_BIG], 1);
		return -1;
	}
	return jhash2_2((__u32)address, (__u32)(address >> 32), (__u32)offset) & mask;
}

static __always_inline struct vec_faddr *futex_addr(__u64 uaddr, __s64 bucket)
{
	struct vec_faddr fresh = {}, *fa = bpf_map_lookup_elem(&futex_addrs, &uaddr);

	if (fa)
		return fa;
	fresh.v[SC_FA_BUCKET] = bucket;
	if (bpf_map_update_elem(&futex_addrs, &uaddr, &fresh, BPF_NOEXIST) &&
	    !bpf_map_lookup_elem(&futex_addrs, &uaddr))
		__sync_fetch_and_add(&state[SC_ST_FUTEX_ADDRS_FULL], 1);
	return bpf_map_lookup_elem(&futex_addrs, &uaddr);
}

static __always_inline void atomic_max(__u64 *at, __u64 v)
{
	/* A lost race leaves a slightly lower maximum: good enough for a high-water mark. */
	if (v > *at)
		*at = v;
}

/* A futex op's entry, in task storage: its start, and for a wait the bucket it joins; for a wake,
 * the waiters queued in its bucket now. */
static __always_inline void futex_hash_enter(__u32 kind, __u64 uaddr, bool private_op, bool hashed)
{
	struct sc_waits *w = waits_get(true);
	struct vec_fbucket *fb;
	struct vec_faddr *fa;
	__s64 bucket, queued, others;
	__u32 key;

	if (!w)
		return;
	w->futex_kind = kind;
	w->futex_ts = bpf_ktime_get_ns();
	w->futex_bucket = -1;
	w->futex_uaddr = 0;
	if (kind == SC_NR_SYS || !hashed)
		return;
	if (!private_op) {
		count_at(SC_FUTEX_SHARED_OPS, 1);
		return;
	}
	bucket = futex_bucket_of(uaddr);
	if (bucket < 0 || bucket >= SC_FUTEX_BUCKETS)
		return;
	key = bucket;
	fb = bpf_map_lookup_elem(&futex_buckets, &key);
	if (!fb)
		return;
	fa = futex_addr(uaddr, bucket);
	if (kind == SC_SYS_FUTEX_WAIT) {
		queued = __sync_fetch_and_add((__s64 *)&fb->v[SC_FB_WAITERS], 1) + 1;
		if (queued > 0)
			atomic_max(&fb->v[SC_FB_PEAK], queued);
		w->futex_bucket = bucket;
		count_at(SC_FUTEX_PRIVATE_WAITS, 1);
		if (fa) {
			__sync_fetch_and_add(&fa->v[SC_FA_WAITS], 1);
			__sync_fetch_and_add((__s64 *)&fa->v[SC_FA_WAITERS], 1);
			w->futex_uaddr = uaddr;
		}
		return;
	}
	queued = (__s64)fb->v[SC_FB_WAITERS];
	if (queued < 0)
		queued = 0;
	/* The waiters on other addresses are what the walk passes over without waking: the cost of
	 * sharing the bucket. Its own waiters are woken from the front (FIFO) and end the walk. */
	others = queued - (fa ? (__s64)fa->v[SC_FA_WAITERS] : 0);
	if (others < 0)
		others = 0;
	count_at(SC_FUTEX_PRIVATE_WAKES, 1);
	count_at(SC_FUTEX_WAKE_WALKED, queued);
	count_at(SC_FUTEX_WAKE_WALKED_OTHERS, others);
	if (queued >= 1000)
		count_at(SC_FUTEX_WAKE_WALKS_1000, 1);
	atomic_max(&state[SC_ST_FUTEX_WALK_MAX], queued);
	__sync_fetch_and_add(&fb->v[SC_FB_WAKES], 1);
	__sync_fetch_and_add(&fb->v[SC_FB_WALKED], queued);
	if (fa) {
		__sync_fetch_and_add(&fa->v[SC_FA_WAKES], 1);
		__sync_fetch_and_add(&fa->v[SC_FA_WALKED], queued);
		atomic_max(&fa->v[SC_FA_MAX_WALK], queued);
	}
}

/* futex(2): op & FUTEX_CMD_MASK says whether the call may sleep or wakes others. */
static __always_inline void futex_enter(__u32 kind, __u64 uaddr, bool private_op, bool hashed)
{
	if (!current_is_target())
		return;
	count(SC_FUTEX_CALLS, 1);
	if (kind == SC_SYS_FUTEX_WAIT)
		count(SC_FUTEX_WAITS, 1);
	else if (kind == SC_SYS_FUTEX_WAKE)
		count(SC_FUTEX_WAKES, 1);
	syscall_enter(kind);
	if (cfg[SC_CFG_TASK_STORAGE])
		futex_hash_enter(kind, uaddr, private_op, hashed);
}

/* The op's exit: its time from the per-thread entry when there is one, else from task storage;
 * a wait leaves its bucket. */
static __always_inline void futex_exit(long ret)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct sc_task *t;
	struct sc_waits *w = NULL;
	struct vec_series *s;
	struct vec_fbucket *fb;
	__u64 now, took = 0;
	__u32 kind = SC_NR_SYS, key;

	if (!current_is_target())
		return;
	now = bpf_ktime_get_ns();
	t = task_get(tid, false);
	if (t) {
		kind = t->sys_kind;
		if (kind == SC_SYS_FUTEX_WAIT || kind == SC_SYS_FUTEX_WAKE) {
			if (t->sys_ts && now >= t->sys_ts)
				took = now - t->sys_ts;
			t->sys_kind = SC_NR_SYS;
		}
	}
	if (cfg[SC_CFG_TASK_STORAGE]) {
		w = waits_get(false);
		if (w) {
			if (!t) {
				kind = w->futex_kind;
				if (w->futex_ts && now >= w->futex_ts)
					took = now - w->futex_ts;
			}
			if (w->futex_bucket >= 0 && w->futex_bucket < SC_FUTEX_BUCKETS) {
				key = w->futex_bucket;
				fb = bpf_map_lookup_elem(&futex_buckets, &key);
				if (fb)
					__sync_fetch_and_add((__s64 *)&fb->v[SC_FB_WAITERS], -1);
			}
			if (w->futex_uaddr) {
				__u64 uaddr = w->futex_uaddr;
				struct vec_faddr *fa = bpf_map_lookup_elem(&futex_addrs, &uaddr);

				if (fa)
					__sync_fetch_and_add((__s64 *)&fa->v[SC_FA_WAITERS], -1);
			}
			w->futex_kind = SC_NR_SYS;
			w->futex_ts = 0;
			w->futex_bucket = -1;
			w->futex_uaddr = 0;
		}
	}
	if (kind == SC_SYS_FUTEX_WAKE) {
		if (ret > 0)
			count(SC_FUTEX_WOKEN, ret);
		count(SC_FUTEX_WAKE_NS, took);
		return;
	}
	if (kind != SC_SYS_FUTEX_WAIT)
		return;
	hist_add(SC_H_FUTEX_WAIT_NS, took);
	count(SC_FUTEX_WAIT_NS, took);
	s = series_vec(now);
	if (s)
		s->v[SC_S_FUTEX_WAITS] += 1;
	if (ret == -EAGAIN)
		count(SC_FUTEX_EAGAIN, 1);
	else if (ret == -ETIMEDOUT)
		count(SC_FUTEX_TIMEOUTS, 1);
}

#define FUTEX_PRIVATE_FLAG 128
#define FUTEX2_PRIVATE 128

SEC("tracepoint/syscalls/sys_enter_futex")
int tp_sys_enter_futex(struct tp_sys_enter *ctx)
{
	__u32 cmd = ctx->args[1] & 0x7f; /* FUTEX_CMD_MASK: without PRIVATE and CLOCK_REALTIME */
	__u32 kind = SC_NR_SYS;

	switch (cmd) {
	case 0:  /* FUTEX_WAIT */
	case 6:  /* FUTEX_LOCK_PI */
	case 9:  /* FUTEX_WAIT_BITSET */
	case 11: /* FUTEX_WAIT_REQUEUE_PI */
	case 13: /* FUTEX_LOCK_PI2 */
		kind = SC_SYS_FUTEX_WAIT;
		break;
	case 1:  /* FUTEX_WAKE */
	case 3:  /* FUTEX_REQUEUE */
	case 4:  /* FUTEX_CMP_REQUEUE */
	case 5:  /* FUTEX_WAKE_OP */
	case 7:  /* FUTEX_UNLOCK_PI */
	case 10: /* FUTEX_WAKE_BITSET */
	case 12: /* FUTEX_CMP_REQUEUE_PI */
		kind = SC_SYS_FUTEX_WAKE;
		break;
	}
	futex_enter(kind, ctx->args[0], ctx->args[1] & FUTEX_PRIVATE_FLAG, true);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_futex")
int tp_sys_exit_futex(struct tp_sys_exit *ctx)
{
	futex_exit(ctx->ret);
	return 0;
}

/* futex2 (6.7+): futex_wait, futex_waitv and futex_wake. */
SEC("tracepoint/syscalls/sys_enter_futex_wait")
int tp_sys_enter_futex_wait(struct tp_sys_enter *ctx)
{
	futex_enter(SC_SYS_FUTEX_WAIT, ctx->args[0], ctx->args[3] & FUTEX2_PRIVATE, true);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_futex_wait")
int tp_sys_exit_futex_wait(struct tp_sys_exit *ctx)
{
	futex_exit(ctx->ret);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_futex_waitv")
int tp_sys_enter_futex_waitv(struct tp_sys_enter *ctx)
{
	/* Several futexes at once: its time counts, its buckets are not followed. */
	futex_enter(SC_SYS_FUTEX_WAIT, 0, false, false);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_futex_waitv")
int tp_sys_exit_futex_waitv(struct tp_sys_exit *ctx)
{
	futex_exit(ctx->ret);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_futex_wake")
int tp_sys_enter_futex_wake(struct tp_sys_enter *ctx)
{
	futex_enter(SC_SYS_FUTEX_WAKE, ctx->args[0], ctx->args[3] & FUTEX2_PRIVATE, true);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_futex_wake")
int tp_sys_exit_futex_wake(struct tp_sys_exit *ctx)
{
	futex_exit(ctx->ret);
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

/*
 * The syscalls that serve requests (accept, reads, writes, readiness, close), loaded only with
 * Config::net_syscalls: their tracepoints fire on every such call of every process on the machine
 * (a load generator's included), so each syscall has one program, at its return, where the
 * result is: the call, the bytes it moved, whether it found nothing to do (EAGAIN). A call counts
 * in the phase it returns in. The filter comes first: the tgid, then one per-CPU counter vector.
 */
static __always_inline struct vec_counters *net_vec(void)
{
	if ((__u32)(bpf_get_current_pid_tgid() >> 32) != TGID || !armed())
		return NULL;
	return phase_vec();
}

/* read, write and their kin: calls, bytes moved (ret > 0), EAGAIN returns. */
static __always_inline void net_io(long ret, __u32 calls, __u32 bytes, __u32 eagain)
{
	struct vec_counters *c = net_vec();

	if (!c)
		return;
	c->v[calls] += 1;
	if (ret > 0)
		c->v[bytes] += ret;
	else if (ret == -EAGAIN)
		c->v[eagain] += 1;
}

/* accept, accept4: calls, failures (any errno), EAGAIN among them (nothing waiting). */
static __always_inline void net_accept(long ret, __u32 calls, __u32 failed, __u32 eagain)
{
	struct vec_counters *c = net_vec();

	if (!c)
		return;
	c->v[calls] += 1;
	if (ret < 0) {
		c->v[failed] += 1;
		if (ret == -EAGAIN)
			c->v[eagain] += 1;
	}
}

/* epoll_wait and kin: calls, and calls that returned no event (the timeout passed). */
static __always_inline void net_wait(long ret, __u32 calls, __u32 empty)
{
	struct vec_counters *c = net_vec();

	if (!c)
		return;
	c->v[calls] += 1;
	if (ret == 0)
		c->v[empty] += 1;
}

static __always_inline void net_call(__u32 calls)
{
	struct vec_counters *c = net_vec();

	if (c)
		c->v[calls] += 1;
}

SEC("tracepoint/syscalls/sys_exit_read")
int tp_sys_exit_read(struct tp_sys_exit *ctx)
{
	net_io(ctx->ret, SC_READ_CALLS, SC_READ_BYTES, SC_READ_EAGAIN);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_readv")
int tp_sys_exit_readv(struct tp_sys_exit *ctx)
{
	net_io(ctx->ret, SC_READV_CALLS, SC_READV_BYTES, SC_READV_EAGAIN);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_recvfrom")
int tp_sys_exit_recvfrom(struct tp_sys_exit *ctx)
{
	net_io(ctx->ret, SC_RECVFROM_CALLS, SC_RECVFROM_BYTES, SC_RECVFROM_EAGAIN);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_recvmsg")
int tp_sys_exit_recvmsg(struct tp_sys_exit *ctx)
{
	net_io(ctx->ret, SC_RECVMSG_CALLS, SC_RECVMSG_BYTES, SC_RECVMSG_EAGAIN);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_write")
int tp_sys_exit_write(struct tp_sys_exit *ctx)
{
	net_io(ctx->ret, SC_WRITE_CALLS, SC_WRITE_BYTES, SC_WRITE_EAGAIN);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_writev")
int tp_sys_exit_writev(struct tp_sys_exit *ctx)
{
	net_io(ctx->ret, SC_WRITEV_CALLS, SC_WRITEV_BYTES, SC_WRITEV_EAGAIN);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_sendto")
int tp_sys_exit_sendto(struct tp_sys_exit *ctx)
{
	net_io(ctx->ret, SC_SENDTO_CALLS, SC_SENDTO_BYTES, SC_SENDTO_EAGAIN);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_sendmsg")
int tp_sys_exit_sendmsg(struct tp_sys_exit *ctx)
{
	net_io(ctx->ret, SC_SENDMSG_CALLS, SC_SENDMSG_BYTES, SC_SENDMSG_EAGAIN);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_accept")
int tp_sys_exit_accept(struct tp_sys_exit *ctx)
{
	net_accept(ctx->ret, SC_ACCEPT_CALLS, SC_ACCEPT_FAILED, SC_ACCEPT_EAGAIN);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_accept4")
int tp_sys_exit_accept4(struct tp_sys_exit *ctx)
{
	net_accept(ctx->ret, SC_ACCEPT4_CALLS, SC_ACCEPT4_FAILED, SC_ACCEPT4_EAGAIN);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_epoll_wait")
int tp_sys_exit_epoll_wait(struct tp_sys_exit *ctx)
{
	net_wait(ctx->ret, SC_EPOLL_WAIT_CALLS, SC_EPOLL_WAIT_EMPTY);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_epoll_pwait")
int tp_sys_exit_epoll_pwait(struct tp_sys_exit *ctx)
{
	net_wait(ctx->ret, SC_EPOLL_PWAIT_CALLS, SC_EPOLL_PWAIT_EMPTY);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_epoll_pwait2")
int tp_sys_exit_epoll_pwait2(struct tp_sys_exit *ctx)
{
	net_wait(ctx->ret, SC_EPOLL_PWAIT2_CALLS, SC_EPOLL_PWAIT2_EMPTY);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_epoll_ctl")
int tp_sys_exit_epoll_ctl(struct tp_sys_exit *ctx)
{
	net_call(SC_EPOLL_CTL_CALLS);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_poll")
int tp_sys_exit_poll(struct tp_sys_exit *ctx)
{
	net_call(SC_POLL_CALLS);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_ppoll")
int tp_sys_exit_ppoll(struct tp_sys_exit *ctx)
{
	net_call(SC_PPOLL_CALLS);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_close")
int tp_sys_exit_close(struct tp_sys_exit *ctx)
{
	net_call(SC_CLOSE_CALLS);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_shutdown")
int tp_sys_exit_shutdown(struct tp_sys_exit *ctx)
{
	net_call(SC_SHUTDOWN_CALLS);
	return 0;
}

/* ---- the kernel's waits: tp_btf only (task storage holds each wait's start) --------------- */

/* include/trace/events/lock.h: the flags say which kind of lock is contended. */
#define LCB_F_SPIN 1
#define LCB_F_READ 2
#define LCB_F_WRITE 4
#define LCB_F_RT 8
#define LCB_F_PERCPU 16
#define LCB_F_MUTEX 32

/* In the order of the SC_LOCK_*_WAITS / _WAIT_NS pairs of enum sc_counter. */
enum lock_kind {
	LK_SPIN,          /* raw/spin locks (queued spinlock slow path) */
	LK_RWLOCK,        /* spinning rwlock_t, read or write */
	LK_RWSEM_READ,    /* rw_semaphore, readers (the own mmap_lock apart: LK_MMAP_*) */
	LK_RWSEM_WRITE,
	LK_MUTEX,         /* optimistic spinning and sleeping alike */
	LK_RTMUTEX,       /* rt_mutex and PREEMPT_RT's rwbase */
	LK_PERCPU_RWSEM,
	LK_OTHER,         /* flags 0: semaphores */
	LK_NR,            /* the kinds counted with SC_LOCK_* pairs end here */
	LK_MMAP_READ = LK_NR, /* the rw_semaphore is the process's own mmap_lock: SC_MMAP_LOCK_* */
	LK_MMAP_WRITE,
};

/* The address of the current process's mmap_lock, 0 when the kernel's BTF lacks it. */
static __always_inline __u64 own_mmap_lock(void)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u64 mm;

	if (!bpf_core_field_exists(struct mm_struct___x, mmap_lock))
		return 0;
	mm = (__u64)BPF_CORE_READ(task, mm);
	return mm ? mm + bpf_core_field_offset(struct mm_struct___x, mmap_lock) : 0;
}

static __always_inline __u32 lock_kind(__u32 flags)
{
	if (flags & LCB_F_PERCPU)
		return LK_PERCPU_RWSEM;
	if (flags & LCB_F_RT)
		return LK_RTMUTEX;
	if (flags & LCB_F_MUTEX)
		return LK_MUTEX;
	if (flags & LCB_F_SPIN)
		return flags & (LCB_F_READ | LCB_F_WRITE) ? LK_RWLOCK : LK_SPIN;
	if (flags & LCB_F_READ)
		return LK_RWSEM_READ;
	if (flags & LCB_F_WRITE)
		return LK_RWSEM_WRITE;
	return LK_OTHER;
}

/* The kind of a contended wait, telling the process's mmap_lock from other rw_semaphores: the
 * mmap_lock waits are counted here, where the wait is, rather than by bracketing every
 * acquisition with mmap_lock:mmap_lock_start_locking/acquire_returned (they fire for every
 * mmap, mprotect and fault that takes the lock, waiting or not: three times the cost). What this
 * leaves out is a writer's optimistic spinning before it queues, CPU time that perf shows. */
static __always_inline __u32 wait_kind(void *lock, __u32 flags)
{
	__u32 kind = lock_kind(flags);

	if ((kind == LK_RWSEM_READ || kind == LK_RWSEM_WRITE) && (__u64)lock == own_mmap_lock())
		return kind == LK_RWSEM_READ ? LK_MMAP_READ : LK_MMAP_WRITE;
	return kind;
}

/* Two levels: a mutex's slow path may contend on its wait_lock inside its own contention. A
 * second begin on the lock already waited for (a mutex going from spinning to sleeping) continues
 * the same wait. */
SEC("tp_btf/contention_begin")
int BPF_PROG(btf_contention_begin, void *lock, unsigned int flags)
{
	struct sc_waits *w;
	__u32 d;

	if (!current_is_target())
		return 0;
	w = waits_get(true);
	if (!w)
		return 0;
	d = w->lock_depth;
	if (d == 1 && w->lock_addr[0] == (__u64)lock) {
		w->lock_kind[0] = wait_kind(lock, flags);
		return 0;
	}
	if (d == 2 && w->lock_addr[1] == (__u64)lock) {
		w->lock_kind[1] = wait_kind(lock, flags);
		return 0;
	}
	if (d >= 2) {
		__sync_fetch_and_add(&state[SC_ST_LOCK_NESTING_LOST], 1);
		return 0;
	}
	/* A spinlock taken while already spinning (an rwlock's slow path spins on its wait_lock)
	 * is the same CPU time: the outer wait counts it once. */
	if (d == 1 && (w->lock_kind[0] == LK_SPIN || w->lock_kind[0] == LK_RWLOCK) &&
	    lock_kind(flags) == LK_SPIN)
		return 0;
	d &= 1;
	w->lock_addr[d] = (__u64)lock;
	w->lock_kind[d] = wait_kind(lock, flags);
	w->lock_ts[d] = bpf_ktime_get_ns();
	w->lock_depth = d + 1;
	return 0;
}

SEC("tp_btf/contention_end")
int BPF_PROG(btf_contention_end, void *lock, int ret)
{
	struct sc_waits *w;
	__u64 now, took;
	__u32 top, kind;

	if (!current_is_target())
		return 0;
	w = waits_get(false);
	if (!w || !w->lock_depth)
		return 0;
	top = (w->lock_depth - 1) & 1;
	if (w->lock_addr[top] != (__u64)lock) {
		/* The inner end was missed: close the outer one if it is this lock. */
		if (top != 1 || w->lock_addr[0] != (__u64)lock)
			return 0;
		top = 0;
	}
	now = bpf_ktime_get_ns();
	took = now > w->lock_ts[top] ? now - w->lock_ts[top] : 0;
	kind = w->lock_kind[top];
	w->lock_depth = top;
	if (kind == LK_MMAP_READ || kind == LK_MMAP_WRITE) {
		count_at(kind == LK_MMAP_WRITE ? SC_MMAP_LOCK_WRITE_WAITS : SC_MMAP_LOCK_READ_WAITS, 1);
		count_at(kind == LK_MMAP_WRITE ? SC_MMAP_LOCK_WRITE_WAIT_NS : SC_MMAP_LOCK_READ_WAIT_NS,
			 took);
		if (ret)
			count_at(SC_MMAP_LOCK_FAILED, 1);
		return 0;
	}
	if (kind >= LK_NR)
		kind = LK_OTHER;
	count_at(SC_LOCK_SPIN_WAITS + 2 * kind, 1);
	count_at(SC_LOCK_SPIN_WAIT_NS + 2 * kind, took);
	return 0;
}

/* tlb:tlb_flush reasons (include/linux/mm_types.h enum tlb_flush_reason): 0 on task switch,
 * 1 remote shootdown (received), 2 local shootdown, 3 local mm shootdown, 4 remote IPI send,
 * 5 remote wrong CPU. Counted while a target task is current. */
static __always_inline void tlb_flushed(int reason)
{
	__u32 idx;

	/* A constant index per reason: the verifier cannot bound one computed from an int. */
	switch (reason) {
	case 0: idx = SC_TLB_FLUSH_TASK_SWITCH; break;
	case 1: idx = SC_TLB_REMOTE_SHOOTDOWN; break;
	case 2: idx = SC_TLB_LOCAL_SHOOTDOWN; break;
	case 3: idx = SC_TLB_LOCAL_MM_SHOOTDOWN; break;
	case 4: idx = SC_TLB_REMOTE_SEND_IPI; break;
	case 5: idx = SC_TLB_REMOTE_WRONG_CPU; break;
	default: return;
	}
	count_at(idx, 1);
}

SEC("tp_btf/tlb_flush")
int BPF_PROG(btf_tlb_flush, int reason, unsigned long pages)
{
	if (current_is_target())
		tlb_flushed(reason);
	return 0;
}

struct tp_tlb_flush {
	__u64 common;
	int reason;
	int pad;
	unsigned long pages;
};

SEC("tracepoint/tlb/tlb_flush")
int tp_tlb_flush(struct tp_tlb_flush *ctx)
{
	if (current_is_target())
		tlb_flushed(ctx->reason);
	return 0;
}

static __always_inline __u64 popcount64(__u64 x)
{
	x = x - ((x >> 1) & 0x5555555555555555ULL);
	x = (x & 0x3333333333333333ULL) + ((x >> 2) & 0x3333333333333333ULL);
	x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0fULL;
	return (x * 0x0101010101010101ULL) >> 56;
}

/* The callback ipi_send_* report is the IPI's handler (generic_smp_call_function_*, NULL for a
 * reschedule), not the function it runs: which function each CPU is asked to run is
 * csd:csd_queue_cpu's. That one is classic only: tp_btf refuses to read its argument `func`, a
 * function pointer (smp_call_func_t). */
static __always_inline void ipi_sent(__u64 targets)
{
	count_at(SC_IPI_SENDS, 1);
	count_at(SC_IPI_TARGETS, targets);
}

static __always_inline void csd_queued(__u64 func)
{
	count_at(SC_CSD_QUEUED, 1);
	if (cfg[SC_CFG_TLB_FUNC] && func == cfg[SC_CFG_TLB_FUNC])
		count_at(SC_CSD_TLB_QUEUED, 1);
}

struct tp_csd_queue_cpu {
	__u64 common;
	unsigned int cpu;
	unsigned int pad;
	__u64 callsite;
	__u64 func;
};

SEC("tracepoint/csd/csd_queue_cpu")
int tp_csd_queue_cpu(struct tp_csd_queue_cpu *ctx)
{
	if (current_is_target())
		csd_queued(ctx->func);
	return 0;
}

SEC("tp_btf/ipi_send_cpu")
int BPF_PROG(btf_ipi_send_cpu, unsigned int cpu, unsigned long callsite, void *callback)
{
	if (current_is_target())
		ipi_sent(1);
	return 0;
}

/* The mask's bits, read word by word up to nr_cpu_ids (16 words: 1024 CPUs at most). */
#define IPI_MASK_WORDS 16

SEC("tp_btf/ipi_send_cpumask")
int BPF_PROG(btf_ipi_send_cpumask, void *mask, unsigned long callsite, void *callback)
{
	__u64 words = cfg[SC_CFG_CPU_WORDS], bits, targets = 0;
	__u32 i;

	if (!current_is_target())
		return 0;
	for (i = 0; i < IPI_MASK_WORDS && i < words; i++) {
		if (bpf_probe_read_kernel(&bits, sizeof(bits), (__u64 *)mask + i))
			break;
		targets += popcount64(bits);
	}
	ipi_sent(targets);
	return 0;
}

/* ---- the whole machine while the run is armed (not filtered to the workload) --------------- */

/* Waits of any task of the machine, kept by the same table (sc_waits.machine_ts). */
enum machine_wait {
	MW_DIRECT_RECLAIM,       /* an allocation freeing memory first */
	MW_CGROUP_RECLAIM,       /* a cgroup at its memory limit (memory.max, limit_in_bytes) */
	MW_COMPACTION,           /* kcompactd or an allocation compacting */
	MW_NR
};

static __always_inline int machine_wait_begin(__u32 which)
{
	struct sc_waits *w;

	if (!armed() || which >= MW_NR)
		return 0;
	w = waits_get(true);
	if (w)
		w->machine_ts[which] = bpf_ktime_get_ns();
	return 0;
}

/* The wait's time (at least 1 ns), 0 when its start was not seen: then nothing is counted. */
static __always_inline __u64 machine_wait_end(__u32 which)
{
	struct sc_waits *w;
	__u64 now, start;

	if (!armed() || which >= MW_NR)
		return 0;
	w = waits_get(false);
	if (!w || !w->machine_ts[which])
		return 0;
	start = w->machine_ts[which];
	w->machine_ts[which] = 0;
	now = bpf_ktime_get_ns();
	return now > start ? now - start : 1;
}

SEC("tp_btf/mm_vmscan_direct_reclaim_begin")
int BPF_PROG(btf_mm_vmscan_direct_reclaim_begin)
{
	return machine_wait_begin(MW_DIRECT_RECLAIM);
}

SEC("tp_btf/mm_vmscan_direct_reclaim_end")
int BPF_PROG(btf_mm_vmscan_direct_reclaim_end, unsigned long nr_reclaimed)
{
	__u64 took = machine_wait_end(MW_DIRECT_RECLAIM);

	if (took) {
		count_at(SC_MACHINE_DIRECT_RECLAIMS, 1);
		count_at(SC_MACHINE_DIRECT_RECLAIM_NS, took);
		count_at(SC_MACHINE_DIRECT_RECLAIMED_PAGES, nr_reclaimed);
	}
	return 0;
}

SEC("tp_btf/mm_vmscan_memcg_reclaim_begin")
int BPF_PROG(btf_mm_vmscan_memcg_reclaim_begin)
{
	return machine_wait_begin(MW_CGROUP_RECLAIM);
}

SEC("tp_btf/mm_vmscan_memcg_reclaim_end")
int BPF_PROG(btf_mm_vmscan_memcg_reclaim_end, unsigned long nr_reclaimed)
{
	__u64 took = machine_wait_end(MW_CGROUP_RECLAIM);

	if (took) {
		count_at(SC_MACHINE_CGROUP_RECLAIMS, 1);
		count_at(SC_MACHINE_CGROUP_RECLAIM_NS, took);
		count_at(SC_MACHINE_CGROUP_RECLAIMED_PAGES, nr_reclaimed);
	}
	return 0;
}

SEC("tp_btf/mm_compaction_begin")
int BPF_PROG(btf_mm_compaction_begin)
{
	return machine_wait_begin(MW_COMPACTION);
}

SEC("tp_btf/mm_compaction_end")
int BPF_PROG(btf_mm_compaction_end)
{
	__u64 took = machine_wait_end(MW_COMPACTION);

	if (took) {
		count_at(SC_MACHINE_COMPACTIONS, 1);
		count_at(SC_MACHINE_COMPACTION_NS, took);
	}
	return 0;
}

/* Counters only: no start to keep, so classic twins too. */
static __always_inline void machine_count(__u32 idx)
{
	if (armed())
		count_at(idx, 1);
}

SEC("tp_btf/mm_compaction_try_to_compact_pages")
int BPF_PROG(btf_mm_compaction_try_to_compact_pages)
{
	machine_count(SC_MACHINE_DIRECT_COMPACTIONS);
	return 0;
}

SEC("tracepoint/compaction/mm_compaction_try_to_compact_pages")
int tp_mm_compaction_try_to_compact_pages(void *ctx)
{
	machine_count(SC_MACHINE_DIRECT_COMPACTIONS);
	return 0;
}

SEC("tp_btf/mm_collapse_huge_page")
int BPF_PROG(btf_mm_collapse_huge_page)
{
	machine_count(SC_MACHINE_THP_COLLAPSES);
	return 0;
}

SEC("tracepoint/huge_memory/mm_collapse_huge_page")
int tp_mm_collapse_huge_page(void *ctx)
{
	machine_count(SC_MACHINE_THP_COLLAPSES);
	return 0;
}

SEC("tp_btf/mm_khugepaged_collapse_file")
int BPF_PROG(btf_mm_khugepaged_collapse_file)
{
	machine_count(SC_MACHINE_THP_COLLAPSES);
	return 0;
}

SEC("tracepoint/huge_memory/mm_khugepaged_collapse_file")
int tp_mm_khugepaged_collapse_file(void *ctx)
{
	machine_count(SC_MACHINE_THP_COLLAPSES);
	return 0;
}
