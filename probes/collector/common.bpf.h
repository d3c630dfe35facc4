// SPDX-License-Identifier: (MIT OR GPL-2.0)
/*
 * What every part of the collector shares: kernel constants, the load-time configuration and the
 * global state, the maps more than one part writes, and the helpers that count into them (phase,
 * getrusage epoch, time bucket, histogram, per-thread entry, wait slot).
 *
 * Included once, by ../collector.bpf.c, before the parts.
 */
#ifndef SPAWNSCOPE_COMMON_BPF_H
#define SPAWNSCOPE_COMMON_BPF_H

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

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SC_NR_HISTS * SC_HIST_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} hists SEC(".maps");

#define TF_NV_KNOWN 1 /* nvcsw_seen holds the task's nvcsw at its last switch-out */
#define TF_PREEMPTED 2 /* wake_ts is a switch-out still runnable (preempted), not a wakeup */

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

/* Runs of each program (enum sc_prog), per CPU: see RAN. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SC_NR_PROGS);
	__type(key, __u32);
	__type(value, __u64);
} prog_runs SEC(".maps");

/* Runs of each program that were another task's, filtered out at its first test (enum sc_prog),
 * per CPU: what every other process pays while the program is attached (the syscall pair's, the
 * host's share of a run's cost). Counted only where the program says so: see FILTERED. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SC_NR_PROGS);
	__type(key, __u32);
	__type(value, __u64);
} prog_filtered SEC(".maps");

/* A run filtered out: one per-CPU add, on the branch that returns at once. */
#define FILTERED(prog)                                                   \
	do {                                                             \
		__u32 prog_key_ = (prog);                                \
		__u64 *runs_ = bpf_map_lookup_elem(&prog_filtered, &prog_key_); \
		if (runs_)                                               \
			*runs_ += 1;                                     \
	} while (0)

/* The first statement of every program: one per-CPU add (an array lookup the verifier inlines). */
#define RAN(prog)                                                   \
	do {                                                        \
		__u32 prog_key_ = (prog);                           \
		__u64 *runs_ = bpf_map_lookup_elem(&prog_runs, &prog_key_); \
		if (runs_)                                          \
			*runs_ += 1;                                \
	} while (0)

/* ---- small helpers ------------------------------------------------------------------------ */

static __always_inline bool armed(void)
{
	return state[SC_ST_ARMED] != 0;
}

/* ---- the run: which tasks are counted ---------------------------------------------------- */

/*
 * The run is every process the command starts, not one TGID: a shell wrapper, `go run`, a
 * prefork server or the processes runtime put their tasks in children. Where the run has a cgroup
 * on the v2 hierarchy (every v2 host, and hybrid ones, which mount an empty v2 hierarchy beside
 * v1), the run is that cgroup's tasks: the launcher moves the held child into it before exec, and
 * every descendant is born there. The test is the current task's cgroup id (a helper call) or, for
 * another task, four pointer loads. Without such a cgroup the run is the target and the processes
 * forked from it (task_newtask), followed in run_tgids: each new process's tgid with its start
 * time, so a tgid some other process takes once the run's one is gone is not mistaken for it.
 * SC_CFG_CGROUP_ID is load-time constant: the verifier drops the branch a run does not take.
 */
#define RUN_CGROUP_ID cfg[SC_CFG_CGROUP_ID]

/* The run's processes besides the target, when no cgroup selects them: tgid -> the group
 * leader's start_time (ns). max_entries set at load (1 when a cgroup selects). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} run_tgids SEC(".maps");

/* The start time a followed tgid was recorded with: NULL when the tgid is not followed, 0 when it
 * was followed from a classic record (no start time to tell a reused tgid by). */
static __always_inline __u64 *followed_start(__u32 tgid)
{
	return bpf_map_lookup_elem(&run_tgids, &tgid);
}

/* The current task is one of the run's (armed or not). The launched process is told by its tgid
 * before any map lookup, and a followed one's start time is read only once its tgid is found. */
static __always_inline bool current_in_run(void)
{
	__u32 tgid = (__u32)(bpf_get_current_pid_tgid() >> 32);
	__u64 *start;

	if (RUN_CGROUP_ID)
		return bpf_get_current_cgroup_id() == RUN_CGROUP_ID;
	if (tgid == TGID)
		return true;
	start = followed_start(tgid);
	return start && (!*start || *start == BPF_CORE_READ((struct task_struct *)bpf_get_current_task(),
							      group_leader, start_time));
}

/* A task the program was handed as a BTF pointer (tp_btf) is one of the run's. */
static __always_inline bool task_in_run(struct task_struct *p)
{
	__u32 tgid = (__u32)p->tgid;
	__u64 *start;

	if (RUN_CGROUP_ID)
		return p->cgroups->dfl_cgrp->kn->id == RUN_CGROUP_ID;
	if (tgid == TGID)
		return true;
	start = followed_start(tgid);
	return start && (!*start || *start == p->group_leader->start_time);
}

/* A process forked by one of the run's (the caller checked that): followed from now on when no
 * cgroup selects the run. `start`: its start_time (it is its own group leader). */
static __always_inline void follow_process(__u32 tgid, __u64 start)
{
	if (RUN_CGROUP_ID)
		return;
	if (bpf_map_update_elem(&run_tgids, &tgid, &start, BPF_ANY) == 0)
		__sync_fetch_and_add(&state[SC_ST_RUN_PROCESSES], 1);
	else
		__sync_fetch_and_add(&state[SC_ST_RUN_FULL], 1);
}

/* The target proper: the process the conductor launched (its exec arms the counting, its
 * getrusage calls cut the counts for the cross-checks, its counters at exec are taken off). */
static __always_inline bool current_is_launched(void)
{
	return (__u32)(bpf_get_current_pid_tgid() >> 32) == TGID;
}

/* The current task is one of the run's and the counting has started. */
static __always_inline bool current_is_target(void)
{
	return armed() && current_in_run();
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

/* The time a series bucket is chosen by, where nothing else needs a finer clock: the exec's time
 * plus the ticks since (jiffies, one load), where bpf_ktime_get_ns reads the clocksource (about
 * 50 ns here in a VM: most of what a switch, fault, thread start or exit program cost beyond its
 * hook's floor, `spawnscope probe-cost`; bpf_ktime_get_coarse_ns is refused to tracing programs).
 * A bucket is 100 ms, a tick 1 to 10 ms: an event near a bucket's edge may land in the one before.
 * User space finds the tick's length (collector/src/clock.rs); not known, the clocksource. */
static __always_inline __u64 tick_ns(void)
{
	__u64 per = cfg[SC_CFG_NS_PER_JIFFY];

	if (!per)
		return bpf_ktime_get_ns();
	return state[SC_ST_T0_NS] + (bpf_jiffies64() - state[SC_ST_T0_JIFFIES]) * per;
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

/* ---- syscalls: the classic records and the per-thread entry/exit ------------------------ */

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

/* Whether the per-thread entry now holds the call's start (its exit will know it). */
static __always_inline bool syscall_enter(__u32 kind)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct sc_task *t = task_get(tid, true);

	if (t) {
		t->sys_ts = bpf_ktime_get_ns();
		t->sys_kind = kind;
	}
	return t != NULL;
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

/* Fields of mm_struct this kernel may lack (futex_phash: 6.16+), read through CO-RE. */
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

#endif /* SPAWNSCOPE_COMMON_BPF_H */
