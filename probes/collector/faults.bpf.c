// SPDX-License-Identifier: (MIT OR GPL-2.0)
/*
 * Memory: page faults (user and kernel mode, by kind), the signals that make a fault be taken
 * twice, and RSS over time.
 *
 * A part of ../collector.bpf.c, which includes it after common.bpf.h: not compiled alone.
 */

/* A gauge, so one shared copy (last writer wins), not per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct vec_rss);
} rss SEC(".maps");

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
	if (addr >= mm->start_brk && addr < mm->brk)
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
	__u64 now = tick_ns(); /* for the series alone */
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

/*
 * A kernel-mode fault taken with page faults disabled is never handled: the access is fixed up
 * (fails) and no rusage counts it. perf's user call-chain walk does this from NMI on every sample
 * whose frame chain ends in an unmapped word (copy_from_user_nmi): one per sample of a Go
 * process, 3,021 in a 6.1 VM's goroutines --perf run against 897 faults. Counted apart, cut at
 * getrusage like the faults. (An atomic futex op that faults is retried through
 * fixup_user_fault, which rusage counts without an exception: the check's window carries them.)
 */
static __always_inline void fault_unhandled(void)
{
	struct vec_cut *k = cut_vec();

	if (k)
		k->v[SC_CUT_FAULTS_UNHANDLED] += 1;
}

SEC("tp_btf/page_fault_user")
int BPF_PROG(btf_page_fault_user, unsigned long address, struct pt_regs *regs,
	     unsigned long error_code)
{
	RAN(SC_P_PAGE_FAULT_USER);
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
	RAN(SC_P_PAGE_FAULT_KERNEL);
	__u32 kind = SC_FAULT_UNCLASSIFIED;
	struct pt_regs *user_regs;

	if ((long)address < 0 || !current_is_target())
		return 0;
	if (bpf_get_current_task_btf()->pagefault_disabled) {
		fault_unhandled();
		return 0;
	}
	if (cfg[SC_CFG_FAULT_KINDS]) {
		user_regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
		kind = fault_kind(address, user_regs->sp);
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
	if (armed()) {
		if (current_in_run())
			fault(user_mode, SC_FAULT_UNCLASSIFIED);
	} else if (current_is_launched()) {
		/* The held child before its exec: the only process of the run yet. */
		__sync_fetch_and_add(&state[SC_ST_PREARM_FAULTS], 1);
	}
}

SEC("tracepoint/exceptions/page_fault_user")
int tp_page_fault_user(struct tp_page_fault *ctx)
{
	RAN(SC_P_PAGE_FAULT_USER);
	classic_fault(true);
	return 0;
}

SEC("tracepoint/exceptions/page_fault_kernel")
int tp_page_fault_kernel(struct tp_page_fault *ctx)
{
	RAN(SC_P_PAGE_FAULT_KERNEL);
	if ((long)ctx->address < 0)
		return 0;
	if (current_is_target() &&
	    BPF_CORE_READ((struct task_struct *)bpf_get_current_task(), pagefault_disabled)) {
		fault_unhandled();
		return 0;
	}
	classic_fault(false);
	return 0;
}

/* ---- signals delivered: faults taken twice ------------------------------------------------- */

/*
 * The fault tracepoints fire at each fault's entry; rusage counts faults completed. A fault that
 * waits (a major fault's I/O, mmap_lock dropped) and finds a signal pending returns to user space
 * unfinished (fault_signal_pending), the signal is delivered, and the instruction faults again:
 * two entries, one fault. So every extra entry needs a signal delivered to that thread in
 * between, and the signals delivered to the target's threads bound the faults' cross-check.
 * get_signal fires signal_deliver in the thread the signal is delivered to: current. Cut at
 * getrusage like the faults it bounds.
 */
static __always_inline void signal_delivered(void)
{
	struct vec_cut *k = cut_vec();

	if (k)
		k->v[SC_CUT_SIGNALS_DELIVERED] += 1;
}

SEC("tp_btf/signal_deliver")
int BPF_PROG(btf_signal_deliver, int sig, struct kernel_siginfo *info, struct k_sigaction *ka)
{
	RAN(SC_P_SIGNAL_DELIVER);
	if (!current_is_target())
		return 0;
	signal_delivered();
	return 0;
}

SEC("tracepoint/signal/signal_deliver")
int tp_signal_deliver(void *ctx)
{
	RAN(SC_P_SIGNAL_DELIVER);
	if (!current_is_target())
		return 0;
	signal_delivered();
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
	RAN(SC_P_RSS_STAT);
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
	RAN(SC_P_RSS_STAT);
	if (ctx->curr && current_is_target())
		rss_seen(ctx->member, ctx->size);
	return 0;
}
