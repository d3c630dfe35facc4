/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The kernel types collector.bpf.c uses, trimmed to the fields it reads: not the 130,000-line dump
 * of one build host's kernel, so the build needs no BTF and the file can be reviewed.
 *
 * How it was produced (kernel 6.18, x86_64, Debian 12's bpftool 7.1):
 *     bpftool btf dump file /sys/kernel/btf/vmlinux format c > /tmp/vmlinux_full.h
 * then each struct below was cut down to the members the programs read. That is enough because
 * the structs carry preserve_access_index: clang records every member access as a CO-RE
 * relocation by NAME, and libbpf resolves it against the running kernel's BTF at load time
 * (reaching into anonymous members, e.g. mm_struct's, or arm64's pt_regs where `sp` sits in an
 * anonymous struct inside a union). Offsets and sizes here are never used for those structs.
 * A member missing from a kernel makes only the program reading it fail to load; user space then
 * falls back to the classic tracepoint twin of that program (see collector/src/attach.rs).
 *
 * To regenerate or extend: dump as above, find the struct (`grep -n '^struct task_struct {'`),
 * copy the members you need (name and type only) into the minimal struct here. Check with
 *     bpftool btf dump file /sys/kernel/btf/vmlinux format c | grep -w -e nvcsw -e min_flt ...
 * The tracepoint context structs of the classic (non-BTF) programs are not here: they are plain
 * layouts in collector.bpf.c, checked against tracefs `format` files at load time.
 *
 * pt_regs holds both x86_64's and arm64's members: each build reads only its own. (The exceptions:page_fault_* tracepoints exist on x86 only; on arm64 those probes are
 * reported missing.)
 */
#ifndef __VMLINUX_H__
#define __VMLINUX_H__

typedef signed char __s8;
typedef unsigned char __u8;
typedef short int __s16;
typedef short unsigned int __u16;
typedef int __s32;
typedef unsigned int __u32;
typedef long long int __s64;
typedef long long unsigned int __u64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;
typedef __s8 s8;
typedef __u8 u8;
typedef __s16 s16;
typedef __u16 u16;
typedef __s32 s32;
typedef __u32 u32;
typedef __s64 s64;
typedef __u64 u64;
typedef _Bool bool;
enum { false = 0, true = 1 };
typedef int pid_t;

/* UAPI constants bpf_helpers.h expects from a full vmlinux.h (values are ABI). */
enum bpf_map_type {
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_ARRAY = 2,
	BPF_MAP_TYPE_PERCPU_HASH = 5,
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
	BPF_MAP_TYPE_RINGBUF = 27,
	BPF_MAP_TYPE_TASK_STORAGE = 29,
};

enum {
	BPF_F_NO_PREALLOC = 1,
};

enum {
	BPF_LOCAL_STORAGE_GET_F_CREATE = 1,
};

/* Ring buffer flags and queries (bpf_ringbuf_submit, bpf_ringbuf_query). */
enum {
	BPF_RB_NO_WAKEUP = 1,
	BPF_RB_FORCE_WAKEUP = 2,
};

enum {
	BPF_RB_AVAIL_DATA = 0,
};

enum {
	BPF_ANY = 0,
	BPF_NOEXIST = 1,
	BPF_EXIST = 2,
};


#ifndef BPF_NO_PRESERVE_ACCESS_INDEX
#pragma clang attribute push (__attribute__((preserve_access_index)), apply_to = record)
#endif

struct percpu_counter {
	s64 count;
};

struct file;
struct sighand_struct;
struct linux_binprm;
struct kernel_siginfo;
struct k_sigaction;

struct mm_struct {
	unsigned long start_brk;
	unsigned long brk;
	struct percpu_counter rss_stat[4];	/* indexed by MM_FILEPAGES.. MM_SHMEMPAGES */
};

/* The run's cgroup on the v2 (default) hierarchy: task->cgroups->dfl_cgrp->kn->id is the id
 * bpf_get_current_cgroup_id() returns for the current task (the directory's inode number). */
struct kernfs_node {
	u64 id;
};

struct cgroup {
	struct kernfs_node *kn;
};

struct css_set {
	struct cgroup *dfl_cgrp;
};

struct task_struct {
	unsigned int __state;
	unsigned int flags;
	pid_t pid;
	pid_t tgid;
	int exit_state;
	unsigned long nvcsw;
	unsigned long nivcsw;
	unsigned long min_flt;
	unsigned long maj_flt;
	struct mm_struct *mm;
	struct sighand_struct *sighand;
	int pagefault_disabled;
	struct css_set *cgroups;
	struct task_struct *group_leader;
	u64 start_time;
	int prio;
	char comm[16];
};

struct vm_area_struct {
	unsigned long vm_start;
	unsigned long vm_end;
	struct file *vm_file;
};

/* sp on both; the syscall's arguments and number (raw_syscalls): di, si, dx, r10 and orig_ax on
 * x86_64, regs[] and syscallno on arm64. Only the running architecture's are read (see
 * collector/syscalls.bpf.c), so the other's never need to resolve. */
struct pt_regs {
	unsigned long sp;
	unsigned long di;
	unsigned long si;
	unsigned long dx;
	unsigned long r10;
	unsigned long orig_ax;
	__u64 regs[31];
	int syscallno;
};

#ifndef BPF_NO_PRESERVE_ACCESS_INDEX
#pragma clang attribute pop
#endif

#endif /* __VMLINUX_H__ */
