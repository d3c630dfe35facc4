// SPDX-License-Identifier: (MIT OR GPL-2.0)
/*
 * The kernel's waits: futex waits and wakes (with the private hash's buckets each wake walks) and
 * contended locks (lock:contention_begin/end, the process's own mmap_lock apart).
 *
 * A part of ../collector.bpf.c, which includes it after common.bpf.h: not compiled alone.
 */

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

/*
 * The futex hash a private futex lands in. Since 6.16 a process has its own hash
 * (mm->futex_phash, kernel/futex/core.c): bucket = jhash2({address low, high}, 2, offset) &
 * hash_mask, where address is uaddr's page and offset uaddr's place in it. futex_wake() walks
 * that bucket's whole chain -- every waiter queued on any address hashing there -- under the
 * bucket's spinlock, until it has woken nr_wake matching waiters. Counting each bucket's waiters
 * (+1 at a wait op's entry, -1 at its exit) tells, at each wake, how many it may walk.
 */

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
	mm = (struct mm_struct___x *)task->mm;
	fph = mm ? mm->futex_phash : NULL;
	mask = fph ? fph->hash_mask : 0;
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
 * the waiters queued in its bucket now. Whether the op's start was kept (its exit will know it). */
static __always_inline bool futex_hash_enter(__u32 kind, __u64 uaddr, bool private_op, bool hashed)
{
	struct sc_waits *w = waits_get(true);
	struct vec_fbucket *fb;
	struct vec_faddr *fa;
	__s64 bucket, queued, others;
	__u32 key;

	if (!w)
		return false;
	w->futex_kind = kind;
	w->futex_ts = bpf_ktime_get_ns();
	w->futex_bucket = -1;
	w->futex_uaddr = 0;
	if (kind == SC_NR_SYS || !hashed)
		return true;
	if (!private_op) {
		count_at(SC_FUTEX_SHARED_OPS, 1);
		return true;
	}
	bucket = futex_bucket_of(uaddr);
	if (bucket < 0 || bucket >= SC_FUTEX_BUCKETS)
		return true;
	key = bucket;
	fb = bpf_map_lookup_elem(&futex_buckets, &key);
	if (!fb)
		return true;
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
		return true;
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
	return true;
}

/* futex(2): op & FUTEX_CMD_MASK says whether the call may sleep or wakes others. The trace's
 * wait begins only where its exit will know it was a wait (per-thread entry or task storage): a
 * wait begun is a wait ended. */
static __always_inline void futex_enter(__u32 kind, __u64 uaddr, bool private_op, bool hashed)
{
	bool kept;

	count(SC_FUTEX_CALLS, 1);
	if (kind == SC_SYS_FUTEX_WAIT)
		count(SC_FUTEX_WAITS, 1);
	else if (kind == SC_SYS_FUTEX_WAKE)
		count(SC_FUTEX_WAKES, 1);
	kept = syscall_enter(kind);
	if (cfg[SC_CFG_TASK_STORAGE])
		kept = futex_hash_enter(kind, uaddr, private_op, hashed) || kept;
	if (TRACE_ON && kept && kind == SC_SYS_FUTEX_WAIT)
		trace_wait(SC_TK_WAIT_BEGIN, SC_TW_FUTEX);
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
			/* Task storage's, where no per-thread entry knew the call: none, or one made
			 * during the wait (a switch-out creates it) after the enter found the map full.
			 * The trace's BEGIN then came from here, so must its END. */
			if (!t || (kind != SC_SYS_FUTEX_WAIT && kind != SC_SYS_FUTEX_WAKE)) {
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
	if (TRACE_ON)
		trace_wait(SC_TK_WAIT_END, SC_TW_FUTEX);
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

/* futex(2)'s entry: its op (args[1]) says whether it waits or wakes. */
static __always_inline void futex_op_enter(__u64 uaddr, __u64 op)
{
	__u32 cmd = op & 0x7f; /* FUTEX_CMD_MASK: without PRIVATE and CLOCK_REALTIME */
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
	futex_enter(kind, uaddr, op & FUTEX_PRIVATE_FLAG, true);
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
	mm = (__u64)task->mm;
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

/* The trace's wait for a lock kind. */
static __always_inline __u32 trace_lock_wait(__u32 kind)
{
	return kind == LK_MMAP_READ ? SC_TW_MMAP_LOCK_READ
	       : kind == LK_MMAP_WRITE ? SC_TW_MMAP_LOCK_WRITE
	       : SC_TW_LOCK;
}

/* Two levels: a mutex's slow path may contend on its wait_lock inside its own contention. A
 * second begin on the lock already waited for (a mutex going from spinning to sleeping) continues
 * the same wait. */
SEC("tp_btf/contention_begin")
int BPF_PROG(btf_contention_begin, void *lock, unsigned int flags)
{
	RAN(SC_P_CONTENTION_BEGIN);
	struct sc_waits *w;
	__u32 d;

	if (!current_is_target() || trace_emitting())
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
	if (TRACE_ON)
		trace_wait(SC_TK_WAIT_BEGIN, trace_lock_wait(w->lock_kind[d]));
	return 0;
}

SEC("tp_btf/contention_end")
int BPF_PROG(btf_contention_end, void *lock, int ret)
{
	RAN(SC_P_CONTENTION_END);
	struct vec_counters *c;
	struct sc_waits *w;
	__u64 now, took;
	__u32 top, kind;

	if (!current_is_target() || trace_emitting())
		return 0;
	w = waits_get(false);
	if (!w || !w->lock_depth)
		return 0;
	top = (w->lock_depth - 1) & 1;
	if (w->lock_addr[top] != (__u64)lock) {
		/* The inner end was missed: close the outer one if it is this lock (the trace ends
		 * the inner one here too, so that its waits still nest). */
		if (top != 1 || w->lock_addr[0] != (__u64)lock)
			return 0;
		if (TRACE_ON)
			trace_wait(SC_TK_WAIT_END, trace_lock_wait(w->lock_kind[1]));
		top = 0;
	}
	/* This runs with the lock taken: every other waiter queues behind it. The kind was told at
	 * contention_begin (the mmap_lock's address read there, not here); what is left is one
	 * clock read and one counter vector. */
	now = bpf_ktime_get_ns();
	took = now > w->lock_ts[top] ? now - w->lock_ts[top] : 0;
	kind = w->lock_kind[top];
	w->lock_depth = top;
	if (TRACE_ON)
		trace_wait(SC_TK_WAIT_END, trace_lock_wait(kind));
	c = phase_vec();
	if (!c)
		return 0;
	if (kind == LK_MMAP_READ || kind == LK_MMAP_WRITE) {
		bool write = kind == LK_MMAP_WRITE;

		c->v[write ? SC_MMAP_LOCK_WRITE_WAITS : SC_MMAP_LOCK_READ_WAITS] += 1;
		c->v[write ? SC_MMAP_LOCK_WRITE_WAIT_NS : SC_MMAP_LOCK_READ_WAIT_NS] += took;
		if (ret)
			c->v[SC_MMAP_LOCK_FAILED] += 1;
		return 0;
	}
	if (kind >= LK_NR)
		kind = LK_OTHER;
	c->v[SC_LOCK_SPIN_WAITS + 2 * kind] += 1;
	c->v[SC_LOCK_SPIN_WAIT_NS + 2 * kind] += took;
	return 0;
}
