/* SPDX-License-Identifier: MIT */
/*
 * What collector.bpf.c and user space (collector/, spawnscope-collector) share.
 *
 * Every map value user space reads is a flat array of __u64 indexed by one of the enums below, so
 * the Rust side never mirrors a C struct layout by hand: collector/build.rs parses the enums and
 * #defines of this file (one `SC_NAME,` per line, in order) into Rust constants and name tables.
 * Keep that shape: one enumerator per line, each enum ending in its SC_NR_* count.
 */
#ifndef SPAWNSCOPE_COLLECTOR_H
#define SPAWNSCOPE_COLLECTOR_H

/* Per-phase counter slots: slot 0 = from exec to the first phase event, slot k = phase k-1; the
 * last slot also takes every phase beyond it. */
#define SC_PHASE_SLOTS 16
/* getrusage(RUSAGE_SELF) epochs for the cross-checks: epoch e = events after e boundaries, where
 * each call has two (its entry and its return); enough for 15 calls. */
#define SC_CUT_EPOCHS 32
/* log2 histograms: slot i counts values v with 2^i <= v < 2^(i+1) (slot 0 also takes v = 0). */
#define SC_HIST_SLOTS 64
/* clone/clone3 failures by errno: errno >= SC_ERRNO_SLOTS - 1 lands in the last slot. */
#define SC_ERRNO_SLOTS 160
/* Buckets of the target's private futex hash tracked (map futex_buckets); a bigger hash is
 * counted in SC_ST_FUTEX_HASH_TOO_BIG and its wakes' walks are not known. */
#define SC_FUTEX_BUCKETS 4096
/* Futex addresses tracked (map futex_addrs); later ones are counted in SC_ST_FUTEX_ADDRS_FULL. */
#define SC_FUTEX_ADDRS 4096

/* Counters kept per phase slot (map phase_counters, per CPU). */
enum sc_counter {
	SC_FAULTS_USER,          /* exceptions:page_fault_user */
	SC_FAULTS_KERNEL,        /* exceptions:page_fault_kernel on a user address */
	SC_FAULT_STACK,          /* kinds: they sum to faults_user + faults_kernel */
	SC_FAULT_HEAP,
	SC_FAULT_ANON,
	SC_FAULT_FILE,
	SC_FAULT_NOVMA,
	SC_FAULT_OTHER,          /* anon or file, not looked up (or the lookup found mmap_lock taken) */
	SC_FAULT_UNCLASSIFIED,
	SC_CLONE_CALLS,
	SC_CLONE_OK,
	SC_CLONE_FAILED,
	SC_CLONE_CHILD_RETURNS,
	SC_CLONE3_CALLS,
	SC_CLONE3_OK,
	SC_CLONE3_FAILED,
	SC_CLONE3_CHILD_RETURNS,
	SC_NEW_THREADS,          /* task:task_newtask with CLONE_THREAD */
	SC_NEW_PROCESSES,        /* task:task_newtask without CLONE_THREAD */
	SC_THREAD_EXITS,         /* sched:sched_process_exit */
	SC_SWITCHES_VOLUNTARY,
	SC_SWITCHES_INVOLUNTARY,
	SC_SWITCHES_VOLUNTARY_AFTER_EXIT,   /* switches the task's rusage can no longer see */
	SC_SWITCHES_INVOLUNTARY_AFTER_EXIT,
	SC_SWITCH_RULE_DISAGREES,   /* (preempt || prev_state == RUNNING) said otherwise */
	SC_ONCPU_NS,
	SC_RUNQ_NS,
	SC_RUNQ_WAITS,
	SC_WAKEUPS,
	SC_MIGRATIONS,
	SC_MMAP_CALLS,
	SC_MMAP_BYTES,
	SC_MUNMAP_CALLS,
	SC_MUNMAP_BYTES,
	SC_MPROTECT_CALLS,
	SC_MPROTECT_BYTES,
	SC_MADVISE_CALLS,
	SC_MADVISE_BYTES,
	SC_FUTEX_CALLS,
	SC_FUTEX_WAITS,
	SC_FUTEX_WAIT_NS,
	SC_FUTEX_WAKES,
	SC_FUTEX_WOKEN,
	SC_FUTEX_EAGAIN,
	SC_FUTEX_TIMEOUTS,
	/* -- the kernel's waits (task storage: tp_btf kernels only) -- */
	SC_FUTEX_WAKE_NS,        /* futex wake ops, enter -> exit */
	SC_FUTEX_SHARED_OPS,     /* wait/wake ops without FUTEX_PRIVATE_FLAG: global hash, walk unknown */
	SC_FUTEX_PRIVATE_WAITS,  /* wait ops hashed into the process's own futex hash */
	SC_FUTEX_PRIVATE_WAKES,  /* wake ops hashed into it */
	SC_FUTEX_WAKE_WALKED,    /* waiters queued in the woken futex's bucket at each wake, summed */
	SC_FUTEX_WAKE_WALKS_1000,/* wakes that found 1000 or more waiters in their bucket */
	SC_FUTEX_WAKE_WALKED_OTHERS, /* ... of them waiting on other addresses: what a wake walks past */
	SC_MMAP_LOCK_READ_WAITS, /* contention_begin -> end on the process's own mmap_lock, read */
	SC_MMAP_LOCK_READ_WAIT_NS,
	SC_MMAP_LOCK_WRITE_WAITS,
	SC_MMAP_LOCK_WRITE_WAIT_NS,
	SC_MMAP_LOCK_FAILED,     /* ... that ended without the lock (killable, interrupted) */
	SC_LOCK_SPIN_WAITS,      /* lock:contention_begin -> contention_end by kind (mmap_lock apart): pairs, in */
	SC_LOCK_SPIN_WAIT_NS,    /* the order of enum lock_kind in collector.bpf.c */
	SC_LOCK_RWLOCK_WAITS,
	SC_LOCK_RWLOCK_WAIT_NS,
	SC_LOCK_RWSEM_READ_WAITS,
	SC_LOCK_RWSEM_READ_WAIT_NS,
	SC_LOCK_RWSEM_WRITE_WAITS,
	SC_LOCK_RWSEM_WRITE_WAIT_NS,
	SC_LOCK_MUTEX_WAITS,
	SC_LOCK_MUTEX_WAIT_NS,
	SC_LOCK_RTMUTEX_WAITS,
	SC_LOCK_RTMUTEX_WAIT_NS,
	SC_LOCK_PERCPU_RWSEM_WAITS,
	SC_LOCK_PERCPU_RWSEM_WAIT_NS,
	SC_LOCK_OTHER_WAITS,
	SC_LOCK_OTHER_WAIT_NS,
	SC_TLB_FLUSH_TASK_SWITCH,   /* tlb:tlb_flush by reason (0..5), while a target task is current */
	SC_TLB_REMOTE_SHOOTDOWN,
	SC_TLB_LOCAL_SHOOTDOWN,
	SC_TLB_LOCAL_MM_SHOOTDOWN,
	SC_TLB_REMOTE_SEND_IPI,
	SC_TLB_REMOTE_WRONG_CPU,
	SC_IPI_SENDS,            /* ipi:ipi_send_cpu + ipi:ipi_send_cpumask by target tasks */
	SC_IPI_TARGETS,          /* CPUs they were sent to */
	SC_CSD_QUEUED,           /* csd:csd_queue_cpu: function calls queued to another CPU (one a CPU) */
	SC_CSD_TLB_QUEUED,       /* ... of them flush_tlb_func: TLB shootdowns asked of another CPU */
	/* -- the whole machine while the run is armed, not filtered to the workload -- */
	SC_MACHINE_DIRECT_RECLAIMS,
	SC_MACHINE_DIRECT_RECLAIM_NS,
	SC_MACHINE_DIRECT_RECLAIMED_PAGES,
	SC_MACHINE_CGROUP_RECLAIMS,    /* mm_vmscan_memcg_reclaim_begin -> end: a cgroup at its limit */
	SC_MACHINE_CGROUP_RECLAIM_NS,
	SC_MACHINE_CGROUP_RECLAIMED_PAGES,
	SC_MACHINE_COMPACTIONS,  /* mm_compaction_begin -> end (kcompactd and direct) */
	SC_MACHINE_COMPACTION_NS,
	SC_MACHINE_DIRECT_COMPACTIONS, /* mm_compaction_try_to_compact_pages: allocation stalls */
	SC_MACHINE_THP_COLLAPSES,      /* huge_memory: collapse work (khugepaged) */
	SC_OUTSIDE_ONCPU_NS,     /* on-CPU time of tasks neither the target's nor the collector's */
	SC_OUTSIDE_KTHREAD_ONCPU_NS, /* ... of them kernel threads' (PF_KTHREAD): kworkers, RCU, */
	                             /* kswapd: mostly work the run itself queued (frees at exit) */
	/* -- the syscalls that serve requests: only with Config::net_syscalls (else not attached) -- */
	/* Counted at their return (syscalls:sys_exit_*), in the phase they return in, on any fd: */
	/* sockets, pipes and files alike. _bytes: positive returns summed; _eagain: returned */
	/* EAGAIN (non-blocking, nothing to do); _failed: returned any error, EAGAIN included. */
	SC_ACCEPT_CALLS,
	SC_ACCEPT_FAILED,
	SC_ACCEPT_EAGAIN,
	SC_ACCEPT4_CALLS,
	SC_ACCEPT4_FAILED,
	SC_ACCEPT4_EAGAIN,
	SC_READ_CALLS,
	SC_READ_BYTES,
	SC_READ_EAGAIN,
	SC_READV_CALLS,
	SC_READV_BYTES,
	SC_READV_EAGAIN,
	SC_RECVFROM_CALLS,       /* recv() too: libc makes it recvfrom */
	SC_RECVFROM_BYTES,
	SC_RECVFROM_EAGAIN,
	SC_RECVMSG_CALLS,
	SC_RECVMSG_BYTES,
	SC_RECVMSG_EAGAIN,
	SC_WRITE_CALLS,
	SC_WRITE_BYTES,
	SC_WRITE_EAGAIN,
	SC_WRITEV_CALLS,
	SC_WRITEV_BYTES,
	SC_WRITEV_EAGAIN,
	SC_SENDTO_CALLS,         /* send() too: libc makes it sendto */
	SC_SENDTO_BYTES,
	SC_SENDTO_EAGAIN,
	SC_SENDMSG_CALLS,
	SC_SENDMSG_BYTES,
	SC_SENDMSG_EAGAIN,
	SC_EPOLL_WAIT_CALLS,
	SC_EPOLL_WAIT_EMPTY,     /* returned 0: no event before the timeout */
	SC_EPOLL_PWAIT_CALLS,
	SC_EPOLL_PWAIT_EMPTY,
	SC_EPOLL_PWAIT2_CALLS,
	SC_EPOLL_PWAIT2_EMPTY,
	SC_EPOLL_CTL_CALLS,
	SC_POLL_CALLS,
	SC_PPOLL_CALLS,
	SC_CLOSE_CALLS,
	SC_SHUTDOWN_CALLS,
	SC_NR_COUNTERS
};

/* Counters kept per getrusage epoch (map cut_counters, per CPU): what the cross-checks compare.
 * Other threads keep running while getrusage sums their counters, so the kernel's figures lie
 * between what was counted up to the call's entry and up to its return. */
enum sc_cut {
	SC_CUT_FAULTS,
	SC_CUT_SWITCHES_VOLUNTARY,
	SC_CUT_SWITCHES_INVOLUNTARY,
	SC_CUT_SWITCHES_VOLUNTARY_AFTER_EXIT,
	SC_CUT_SWITCHES_INVOLUNTARY_AFTER_EXIT,
	SC_CUT_SWITCHES_VOLUNTARY_WHILE_REAPED,   /* the leader's, racing its parent's wait4 */
	SC_CUT_SWITCHES_INVOLUNTARY_WHILE_REAPED,
	SC_CUT_NEW_THREADS,
	SC_CUT_SIGNALS_DELIVERED,  /* signal:signal_deliver: each lets one fault be taken twice */
	SC_CUT_FAULTS_UNHANDLED,   /* kernel-mode faults with page faults disabled: in no rusage */
	SC_NR_CUT
};

/* Per time bucket (map series, per CPU). */
enum sc_series {
	SC_S_FAULTS,
	SC_S_NEW_THREADS,
	SC_S_THREAD_EXITS,
	SC_S_SWITCHES_VOLUNTARY,
	SC_S_SWITCHES_INVOLUNTARY,
	SC_S_ONCPU_NS,
	SC_S_RUNQ_NS,
	SC_S_FUTEX_WAITS,
	SC_NR_SERIES
};

/* RSS per time bucket (map rss, shared): the last size seen in the bucket, in bytes plus one, so 0
 * means "no change seen in this bucket". Same order as the kernel's MM_* counters. */
enum sc_rss {
	SC_RSS_FILE,
	SC_RSS_ANON,
	SC_RSS_SWAP,
	SC_RSS_SHMEM,
	SC_NR_RSS
};

/* log2 histograms (map hists, per CPU, key = hist * SC_HIST_SLOTS + slot), all in ns. */
enum sc_hist {
	SC_H_CLONE_NS,           /* clone enter -> exit in the parent */
	SC_H_CLONE3_NS,
	SC_H_ONCPU_SLICE_NS,     /* one stay on a CPU: switch-in -> switch-out */
	SC_H_THREAD_ONCPU_NS,    /* a thread's whole on-CPU time, added at its last switch */
	/* A run-queue wait by what began it; collector.json's runq_ns is the two added. */
	SC_H_WAKE_TO_RUN_NS,     /* wakeup -> switch-in */
	SC_H_PREEMPTED_TO_RUN_NS, /* switch-out still runnable (preempted) -> switch-in */
	SC_H_FUTEX_WAIT_NS,      /* futex wait enter -> exit */
	SC_NR_HISTS
};

/* Kinds of syscall a thread is inside (errno map key = kind * SC_ERRNO_SLOTS + errno). */
enum sc_sys {
	SC_SYS_CLONE,
	SC_SYS_CLONE3,
	SC_SYS_FUTEX_WAIT,
	SC_SYS_FUTEX_WAKE,
	SC_SYS_GETRUSAGE,
	SC_NR_SYS
};

/* Global state the programs write (section .data.state), read by user space at the end.
 * The first eight, one cache line (the section starts a page): what the hot programs read
 * (armed, the series clock, the phase, the getrusage epoch), written only at the exec, a phase
 * event or a getrusage. The words programs write as they count come after, so their writes do
 * not take this line from the other CPUs (probe-cost: a thread's start or exit read three lines of
 * this map, one of them beside words the wait programs write). */
enum sc_state {
	SC_ST_ARMED,             /* 1 once the target exec'd: counting starts */
	SC_ST_T0_NS,             /* bpf_ktime_get_ns() at the exec: bucket 0 starts here */
	SC_ST_T0_JIFFIES,        /* jiffies at the exec (tick_ns) */
	SC_ST_PHASE_EVENTS,      /* phase events seen written to the target's stdout */
	SC_ST_GETRUSAGE_CALLS,   /* getrusage(RUSAGE_SELF) calls by the target (entries) */
	SC_ST_GETRUSAGE_RETURNS, /* ... and their returns */
	SC_ST_EXECS,
	SC_ST_PRE_KNOWN,         /* 1 when the PRE_* fields below were read (tp_btf exec) */
	SC_ST_PRE_MINFLT,        /* the task's own counters at exec: what rusage holds from before */
	SC_ST_PRE_MAJFLT,
	SC_ST_PRE_NVCSW,
	SC_ST_PRE_NIVCSW,
	SC_ST_LAST_GETRUSAGE_NS,
	SC_ST_TASKS_FULL,        /* the per-thread map was full: some per-thread figures are missing */
	SC_ST_LATE_EVENTS,       /* events past the last time bucket (counted in the last one) */
	SC_ST_PREARM_FAULTS,     /* the target's faults and switches from attach to exec, counted */
	SC_ST_PREARM_VOLUNTARY,  /* by the classic programs (the tp_btf ones read the task's own */
	SC_ST_PREARM_INVOLUNTARY,/* counters at exec instead) */
	SC_ST_VMA_BUSY,          /* VMA lookups that found mmap_lock held for writing */
	SC_ST_GETRUSAGE_TID,     /* tid + 1 of the last getrusage entered (no per-thread state) */
	SC_ST_NV_UNTRACKED,      /* switches told by the rule: tid outside nv_by_tid, or slot unset */
	SC_ST_FUTEX_HASH_SLOTS,  /* hash_mask + 1 of the target's private futex hash, last seen */
	SC_ST_FUTEX_HASH_RESIZES,/* times that size changed between two futex ops */
	SC_ST_FUTEX_WALK_MAX,    /* most waiters one wake found in its bucket */
	SC_ST_FUTEX_GLOBAL_HASH, /* private ops while the process had no private hash */
	SC_ST_FUTEX_HASH_TOO_BIG,/* ops on a hash of more than SC_FUTEX_BUCKETS slots */
	SC_ST_FUTEX_ADDRS_FULL,  /* ops on addresses futex_addrs had no room for */
	SC_ST_LOCK_NESTING_LOST, /* contention_begin deeper than the two levels kept */
	SC_ST_WAITS_LOST,        /* waits not timed: their tid's slot held another task's wait */
	SC_ST_RUN_FULL,          /* processes of the run run_tgids had no room for: not followed */
	SC_ST_RUN_PROCESSES,     /* processes the run_tgids map followed (the target not counted) */
	SC_NR_STATE
};

/* Load-time configuration (section .rodata, set before load). */
enum sc_cfg {
	SC_CFG_TGID,
	SC_CFG_BUCKET_NS,
	SC_CFG_NR_BUCKETS,
	SC_CFG_FAULT_KINDS,      /* 0 off, 1 stack/heap/other (no lock), 2 also a VMA lookup */
	SC_CFG_PAGE_SIZE,
	SC_CFG_PHASES_FROM_STDOUT,
	SC_CFG_PER_THREAD,       /* 1: per-thread hash (on-CPU, run-queue, syscall times); 0: none */
	SC_CFG_TASK_STORAGE,     /* 1: the wait figures' programs load (kernel BTF) */
	SC_CFG_SELF_TGID,        /* the collector's own process: not "outside the run" */
	SC_CFG_TLB_FUNC,         /* address of flush_tlb_func (kallsyms), 0 unknown */
	SC_CFG_CPU_WORDS,        /* longs in a cpumask: ceil(nr_cpu_ids / 64) */
	SC_CFG_WAIT_SLOTS,       /* slots of waits_by_tid, a power of two: slot = tid & (slots - 1) */
	SC_CFG_CGROUP_ID,        /* the run's v2 cgroup id: the run is its tasks; 0: the target's tree */
	SC_CFG_TRACE,            /* the trace's ring (trace_events) bytes: its records are emitted; 0: off */
	SC_CFG_NS_PER_JIFFY,     /* 1e9 / HZ: the series' clock is jiffies (tick_ns); 0 unknown: the clocksource */
	SC_NR_CFG
};

/* What user space writes while running (section .data.ctl). The phase slot counting uses is the
 * larger of this one and the one the kernel derives from the phase events it sees written. */
enum sc_ctl {
	SC_CTL_PHASE_SLOT,
	SC_NR_CTL
};

/* One bucket of the target's private futex hash (map futex_buckets, shared). */
enum sc_fbucket {
	SC_FB_WAITERS,           /* target tasks inside a wait op hashed here now (signed) */
	SC_FB_PEAK,              /* most at once */
	SC_FB_WAKES,
	SC_FB_WALKED,
	SC_NR_FB
};

/* One futex address (map futex_addrs, shared, key = uaddr). */
enum sc_faddr {
	SC_FA_WAITS,
	SC_FA_WAKES,
	SC_FA_WALKED,
	SC_FA_MAX_WALK,
	SC_FA_BUCKET,
	SC_FA_WAITERS,           /* target tasks inside a wait op on this address now (signed) */
	SC_NR_FA
};

/* The collector's programs by tracepoint (a tp_btf program and its classic twin share one): runs
 * counted by each program itself (map prog_runs, per CPU), so the runs of a measured run are known
 * without the kernel's run-time statistics, whose two clock reads a run cost more than this. */
enum sc_prog {
	SC_P_PAGE_FAULT_USER,
	SC_P_PAGE_FAULT_KERNEL,
	SC_P_SIGNAL_DELIVER,
	SC_P_RSS_STAT,
	SC_P_MM_VMSCAN_DIRECT_RECLAIM_BEGIN,
	SC_P_MM_VMSCAN_DIRECT_RECLAIM_END,
	SC_P_MM_VMSCAN_MEMCG_RECLAIM_BEGIN,
	SC_P_MM_VMSCAN_MEMCG_RECLAIM_END,
	SC_P_MM_COMPACTION_BEGIN,
	SC_P_MM_COMPACTION_END,
	SC_P_MM_COMPACTION_TRY_TO_COMPACT_PAGES,
	SC_P_MM_COLLAPSE_HUGE_PAGE,
	SC_P_MM_KHUGEPAGED_COLLAPSE_FILE,
	SC_P_SYS_EXIT_READ,
	SC_P_SYS_EXIT_READV,
	SC_P_SYS_EXIT_RECVFROM,
	SC_P_SYS_EXIT_RECVMSG,
	SC_P_SYS_EXIT_WRITE,
	SC_P_SYS_EXIT_WRITEV,
	SC_P_SYS_EXIT_SENDTO,
	SC_P_SYS_EXIT_SENDMSG,
	SC_P_SYS_EXIT_ACCEPT,
	SC_P_SYS_EXIT_ACCEPT4,
	SC_P_SYS_EXIT_EPOLL_WAIT,
	SC_P_SYS_EXIT_EPOLL_PWAIT,
	SC_P_SYS_EXIT_EPOLL_PWAIT2,
	SC_P_SYS_EXIT_EPOLL_CTL,
	SC_P_SYS_EXIT_POLL,
	SC_P_SYS_EXIT_PPOLL,
	SC_P_SYS_EXIT_CLOSE,
	SC_P_SYS_EXIT_SHUTDOWN,
	SC_P_TLB_FLUSH,
	SC_P_CSD_QUEUE_CPU,
	SC_P_IPI_SEND_CPU,
	SC_P_IPI_SEND_CPUMASK,
	SC_P_SCHED_SWITCH,
	SC_P_SCHED_WAKEUP,
	SC_P_SCHED_WAKEUP_NEW,
	SC_P_SCHED_MIGRATE_TASK,
	SC_P_SYS_ENTER,
	SC_P_SYS_EXIT,
	SC_P_SCHED_PROCESS_EXEC,
	SC_P_TASK_NEWTASK,
	SC_P_SCHED_PROCESS_EXIT,
	SC_P_CONTENTION_BEGIN,
	SC_P_CONTENTION_END,
	SC_P_TASK_RENAME,        /* attached only with the trace */
	SC_NR_PROGS
};


/* The trace (Config::trace, `run --perfetto`): one record per scheduler event of the run, streamed
 * through the ring buffer `trace_events` and written raw by user space. A record is
 * SC_NR_TRACE_FIELDS __u64 slots, read by collector/src/trace_events.rs. Two 32-bit values share
 * a slot as low | high << 32. */
enum sc_trace_field {
	SC_TF_TS,                /* bpf_ktime_get_boot_ns(): CLOCK_BOOTTIME, what Perfetto reads ftrace on */
	SC_TF_KIND_CPU,          /* enum sc_trace_kind | the CPU it happened on << 32 */
	SC_TF_TASK,              /* tid | tgid << 32 of the task the event is about (see sc_trace_kind) */
	SC_TF_OTHER,             /* tid | tgid << 32 of the other task, where there is one, else 0 */
	SC_TF_ARG,               /* per kind, see sc_trace_kind */
	SC_TF_PRIOS,             /* prio of TASK | prio of OTHER << 32 (kernel prio, 0..139) */
	SC_TF_COMM_LO,           /* a comm, 16 bytes NUL-padded, in two slots (see sc_trace_kind) */
	SC_TF_COMM_HI,
	SC_NR_TRACE_FIELDS
};

/* What a trace record is about, and what its slots hold (one comment line per enumerator: build.rs
 * reads the enum line by line):
 *   SWITCH      sched_switch: TASK switched out (prev), OTHER in (next); ARG prev_state as the
 *               tracepoint reports it (0: preempted, still runnable); COMM next's comm
 *   WAKEUP      sched_wakeup: TASK woken, OTHER the task current when it fired (the waker,
 *               or the task an interrupt came in on; 0 for idle); ARG the CPU it will run on;
 *               COMM TASK's
 *   WAKEUP_NEW  sched_wakeup_new: as WAKEUP, a new task's first
 *   NEWTASK     task_newtask: TASK the new task (tgid = tid for a new process, the creator's for
 *               a thread), OTHER the creator; ARG clone_flags; COMM the new task's
 *   RENAME      task_rename: TASK; COMM its new comm
 *   EXIT        sched_process_exit: TASK exits (every thread has one); COMM its
 *   WAIT_BEGIN  a wait the collector times begins: TASK waits; ARG enum sc_trace_wait
 *   WAIT_END    ... and ends
 * TASK is always the run's, except in a SWITCH, where either side is. */
enum sc_trace_kind {
	SC_TK_SWITCH,
	SC_TK_WAKEUP,
	SC_TK_WAKEUP_NEW,
	SC_TK_NEWTASK,
	SC_TK_RENAME,
	SC_TK_EXIT,
	SC_TK_WAIT_BEGIN,
	SC_TK_WAIT_END,
	SC_NR_TRACE_KINDS
};

/* Where the classic (non-BTF) twins lack a field, it is 0: a switch's next tgid, a wakeup's
 * tgid, a new task's prio. Records of one task come in the order they happened; across CPUs the
 * ring holds them in the order they were reserved. */

/* The waits a trace shows as slices (ARG of SC_TK_WAIT_BEGIN / _END). A wait's END carries the
 * wait its BEGIN did; lock waits nest (two levels, as the collector times them). */
enum sc_trace_wait {
	SC_TW_FUTEX,             /* futex wait syscall, entry to return */
	SC_TW_MMAP_LOCK_READ,    /* lock:contention_begin to _end on the process's own mmap_lock */
	SC_TW_MMAP_LOCK_WRITE,
	SC_TW_CLONE,             /* clone / clone3 syscall, entry to return in the caller */
	SC_TW_LOCK,              /* lock:contention_begin to _end (kernel locks) */
	SC_NR_TRACE_WAITS
};

/* The trace's per-CPU words (map trace_cpu): user space sums EMITTED and LOST over CPUs. */
enum sc_trace_cpu {
	SC_TC_NESTING,           /* emissions in progress on this CPU (see trace.bpf.c) */
	SC_TC_EMITTED,           /* records submitted to the ring */
	SC_TC_LOST,              /* records the ring had no room for (bpf_ringbuf_reserve failed) */
	SC_TC_ON_CPU,            /* pid + 1 | in the run << 32 of the task the last switch seen put on this CPU */
	SC_TC_UNSEEN,            /* switches of the run's tasks no program saw (see trace_switch_seen) */
	SC_TC_EMITTER,           /* pid_tgid of the task whose emission is innermost on this CPU */
	SC_NR_TC
};

#endif /* SPAWNSCOPE_COLLECTOR_H */
