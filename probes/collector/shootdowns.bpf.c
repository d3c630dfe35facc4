// SPDX-License-Identifier: (MIT OR GPL-2.0)
/*
 * TLB flushes, IPIs and cross-CPU function calls asked for by the workload's tasks.
 *
 * A part of ../collector.bpf.c, which includes it after common.bpf.h: not compiled alone.
 */

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
	RAN(SC_P_TLB_FLUSH);
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
	RAN(SC_P_TLB_FLUSH);
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
/* One lookup of the phase's counters for both adds (count_at twice looked them up twice: the
 * program at 2.35× its floor, probe-cost on M1, 29 Nov). */
static __always_inline void ipi_sent(__u64 targets)
{
	struct vec_counters *c = phase_vec();

	if (c) {
		c->v[SC_IPI_SENDS] += 1;
		c->v[SC_IPI_TARGETS] += targets;
	}
}

static __always_inline void csd_queued(__u64 func)
{
	struct vec_counters *c = phase_vec();

	if (!c)
		return;
	c->v[SC_CSD_QUEUED] += 1;
	if (cfg[SC_CFG_TLB_FUNC] && func == cfg[SC_CFG_TLB_FUNC])
		c->v[SC_CSD_TLB_QUEUED] += 1;
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
	RAN(SC_P_CSD_QUEUE_CPU);
	if (current_is_target())
		csd_queued(ctx->func);
	return 0;
}

SEC("tp_btf/ipi_send_cpu")
int BPF_PROG(btf_ipi_send_cpu, unsigned int cpu, unsigned long callsite, void *callback)
{
	RAN(SC_P_IPI_SEND_CPU);
	if (current_is_target())
		ipi_sent(1);
	return 0;
}

/* The mask's bits, read word by word up to nr_cpu_ids (16 words: 1024 CPUs at most). */
#define IPI_MASK_WORDS 16

SEC("tp_btf/ipi_send_cpumask")
int BPF_PROG(btf_ipi_send_cpumask, void *mask, unsigned long callsite, void *callback)
{
	RAN(SC_P_IPI_SEND_CPUMASK);
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
