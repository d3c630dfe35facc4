// SPDX-License-Identifier: (MIT OR GPL-2.0)
/*
 * The whole machine while the run is armed, not filtered to the workload: reclaim, compaction,
 * THP collapses.
 *
 * A part of ../collector.bpf.c, which includes it after common.bpf.h: not compiled alone.
 */

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
	RAN(SC_P_MM_VMSCAN_DIRECT_RECLAIM_BEGIN);
	return machine_wait_begin(MW_DIRECT_RECLAIM);
}

SEC("tp_btf/mm_vmscan_direct_reclaim_end")
int BPF_PROG(btf_mm_vmscan_direct_reclaim_end, unsigned long nr_reclaimed)
{
	RAN(SC_P_MM_VMSCAN_DIRECT_RECLAIM_END);
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
	RAN(SC_P_MM_VMSCAN_MEMCG_RECLAIM_BEGIN);
	return machine_wait_begin(MW_CGROUP_RECLAIM);
}

SEC("tp_btf/mm_vmscan_memcg_reclaim_end")
int BPF_PROG(btf_mm_vmscan_memcg_reclaim_end, unsigned long nr_reclaimed)
{
	RAN(SC_P_MM_VMSCAN_MEMCG_RECLAIM_END);
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
	RAN(SC_P_MM_COMPACTION_BEGIN);
	return machine_wait_begin(MW_COMPACTION);
}

SEC("tp_btf/mm_compaction_end")
int BPF_PROG(btf_mm_compaction_end)
{
	RAN(SC_P_MM_COMPACTION_END);
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
	RAN(SC_P_MM_COMPACTION_TRY_TO_COMPACT_PAGES);
	machine_count(SC_MACHINE_DIRECT_COMPACTIONS);
	return 0;
}

SEC("tracepoint/compaction/mm_compaction_try_to_compact_pages")
int tp_mm_compaction_try_to_compact_pages(void *ctx)
{
	RAN(SC_P_MM_COMPACTION_TRY_TO_COMPACT_PAGES);
	machine_count(SC_MACHINE_DIRECT_COMPACTIONS);
	return 0;
}

SEC("tp_btf/mm_collapse_huge_page")
int BPF_PROG(btf_mm_collapse_huge_page)
{
	RAN(SC_P_MM_COLLAPSE_HUGE_PAGE);
	machine_count(SC_MACHINE_THP_COLLAPSES);
	return 0;
}

SEC("tracepoint/huge_memory/mm_collapse_huge_page")
int tp_mm_collapse_huge_page(void *ctx)
{
	RAN(SC_P_MM_COLLAPSE_HUGE_PAGE);
	machine_count(SC_MACHINE_THP_COLLAPSES);
	return 0;
}

SEC("tp_btf/mm_khugepaged_collapse_file")
int BPF_PROG(btf_mm_khugepaged_collapse_file)
{
	RAN(SC_P_MM_KHUGEPAGED_COLLAPSE_FILE);
	machine_count(SC_MACHINE_THP_COLLAPSES);
	return 0;
}

SEC("tracepoint/huge_memory/mm_khugepaged_collapse_file")
int tp_mm_khugepaged_collapse_file(void *ctx)
{
	RAN(SC_P_MM_KHUGEPAGED_COLLAPSE_FILE);
	machine_count(SC_MACHINE_THP_COLLAPSES);
	return 0;
}
