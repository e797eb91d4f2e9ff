// SPDX-License-Identifier: (MIT OR GPL-2.0-only)
//
// The few kernel types probe.bpf.c reads, instead of the whole vmlinux.h
// (3 MB of this kernel's types). Every field is read through CO-RE
// (preserve_access_index): libbpf's loader, cilium/ebpf here, moves each
// offset to where the running kernel's BTF puts it, so these structs hold
// only the fields the program reads, in any order.

#ifndef TARE_SCHEDPROBE_KERNEL_H
#define TARE_SCHEDPROBE_KERNEL_H

typedef unsigned char __u8;
typedef short __s16;
typedef unsigned short __u16;
typedef int __s32;
typedef unsigned int __u32;
typedef long long __s64;
typedef unsigned long long __u64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;
typedef int pid_t;
typedef _Bool bool;

enum bpf_map_type {
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_ARRAY = 2,
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
	BPF_MAP_TYPE_RINGBUF = 27,
};

// bpf_ringbuf_submit's flags, and bpf_ringbuf_query's question.
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
};

#define PF_KTHREAD 0x00200000 // include/linux/sched.h: I am a kernel thread
#define TASK_RUNNING 0
#define TASK_DEAD 0x00000080 // include/linux/sched.h: set for its last switch away

struct thread_info {
	__u32 cpu;
} __attribute__((preserve_access_index));

// CONFIG_SCHED_INFO: what /proc/<pid>/task/<tid>/schedstat shows.
struct sched_info {
	unsigned long long run_delay;
	unsigned long long last_queued; // the run queue's clock when it was queued
} __attribute__((preserve_access_index));

// A CPU's run queue, and the clock the kernel times run delay by.
struct rq {
	__u64 clock;
} __attribute__((preserve_access_index));

// With CONFIG_FAIR_GROUP_SCHED, a task's entity names its CFS queue, and
// that queue the CPU's run queue.
struct cfs_rq {
	struct rq *rq;
} __attribute__((preserve_access_index));

struct sched_entity {
	struct cfs_rq *cfs_rq;
} __attribute__((preserve_access_index));

struct task_struct {
	struct thread_info thread_info;
	struct sched_info sched_info;
	struct sched_entity se;
	unsigned int __state;
	unsigned int flags;
	int on_cpu;
	pid_t pid;
	pid_t tgid;
	struct task_struct *group_leader;
	struct task_struct *real_parent;
	char comm[16];
} __attribute__((preserve_access_index));

// Kernels before 5.14 named the state field state; before 5.16, with
// CONFIG_THREAD_INFO_IN_TASK, the task's CPU was a field of task_struct.
struct task_struct___old {
	long state;
	unsigned int cpu;
} __attribute__((preserve_access_index));

#endif
