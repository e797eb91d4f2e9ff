// SPDX-License-Identifier: (MIT OR GPL-2.0-only)
//
// connect.bpf.c records the connections processes open: a TCP connect
// (the socket entering SYN_SENT, in the connecting task's context) and a
// Unix-domain connect (connect(2) with an AF_UNIX address), each as the
// connecting process and where it went. tare's process graph reads them to follow a system under test's
// short-lived connections (a proxy's upstream connection to an app server
// that closes after each response), which a look at the socket tables
// catches only if it is open at that instant.
//
// Keys are the process and the destination, so a process connecting to
// the same place a thousand times is one entry; the maps are LRU, so a
// host opening connections to many places evicts the oldest, never fails.
// Each entry says whom the process descended from when it connected: a
// proxy that forks a child per connection (socat's fork, inetd) connects
// from a child that is gone before tare looks, and whose parent is what
// tare knows. The ancestors are read through CO-RE, so the tracer needs
// the kernel's BTF.

// The few types and constants it needs, instead of linux/types.h and
// linux/bpf.h (whose asm/ headers are the host architecture's).
typedef unsigned char __u8;
typedef unsigned short __u16;
typedef unsigned int __u32;
typedef unsigned long long __u64;
typedef short __s16;
typedef int __s32;
typedef long long __s64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;

enum {
	BPF_MAP_TYPE_LRU_HASH = 9,
	BPF_ANY = 0,
};

#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

// The fields of the kernel's task_struct read here, wherever the running
// kernel's BTF puts them (preserve_access_index).
struct task_struct {
	int tgid;
	struct task_struct *real_parent;
} __attribute__((preserve_access_index));

char LICENSE[] SEC("license") = "Dual MIT/GPL";

#define AF_INET 2
#define AF_INET6 10
#define IPPROTO_TCP 6
#define TCP_SYN_SENT 2
#define UNIX_PATH_MAX 108

struct tcp_connect {
	__u32 tgid;
	__u16 family;
	__u16 dport; // host order, as the tracepoint gives it
	__u8 daddr[16]; // 4 bytes for AF_INET
};

struct unix_connect {
	__u32 tgid;
	__u32 len; // bytes of path given to connect(2)
	char path[UNIX_PATH_MAX]; // a leading NUL for the abstract namespace
};

#define ANCESTORS 4

// What is known of a connect besides its key.
struct seen {
	__u64 when; // ns since boot
	__u32 ancestors[ANCESTORS]; // the connecting process's parent, its parent's…; 0 past the first process
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, struct tcp_connect);
	__type(value, struct seen);
} tcp_connects SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct unix_connect);
	__type(value, struct seen);
} unix_connects SEC(".maps");

// seen_now is the current task's connect as of now, with the thread
// groups it descends from.
static __always_inline struct seen seen_now(void)
{
	struct seen v = {};
	v.when = bpf_ktime_get_ns();
	struct task_struct *t = (struct task_struct *)bpf_get_current_task();
	for (int i = 0; i < ANCESTORS; i++) {
		t = BPF_CORE_READ(t, real_parent);
		if (!t)
			break;
		v.ancestors[i] = BPF_CORE_READ(t, tgid);
		if (v.ancestors[i] <= 1)
			break; // init, or the idle task above it
	}
	return v;
}

// The classic tracepoint's record, as
// /sys/kernel/tracing/events/sock/inet_sock_set_state/format lays it out
// (the same since Linux 4.16).
struct inet_sock_set_state {
	__u64 common;
	const void *skaddr;
	int oldstate;
	int newstate;
	__u16 sport;
	__u16 dport;
	__u16 family;
	__u16 protocol;
	__u8 saddr[4];
	__u8 daddr[4];
	__u8 saddr_v6[16];
	__u8 daddr_v6[16];
};

SEC("tracepoint/sock/inet_sock_set_state")
int on_tcp_state(struct inet_sock_set_state *a)
{
	if (a->newstate != TCP_SYN_SENT || a->protocol != IPPROTO_TCP)
		return 0;
	struct tcp_connect k = {};
	k.tgid = bpf_get_current_pid_tgid() >> 32;
	k.family = a->family;
	k.dport = a->dport;
	if (a->family == AF_INET)
		__builtin_memcpy(k.daddr, a->daddr, 4);
	else if (a->family == AF_INET6)
		__builtin_memcpy(k.daddr, a->daddr_v6, 16);
	else
		return 0;
	struct seen v = seen_now();
	bpf_map_update_elem(&tcp_connects, &k, &v, BPF_ANY);
	return 0;
}

// The record of the classic tracepoint syscalls/sys_enter_connect, as
// its format file lays it out: the arguments of connect(2), each in 8
// bytes.
struct sys_enter_connect {
	__u64 common;
	__u64 nr;
	__u64 fd;
	const void *uservaddr;
	__u64 addrlen;
};

#define AF_UNIX 1

// A Unix-domain connect, read from connect(2)'s own arguments: the
// kernel has no tracepoint of its own there, and fentry is not open to
// every kernel that has BTF.
SEC("tracepoint/syscalls/sys_enter_connect")
int on_connect(struct sys_enter_connect *a)
{
	__u16 family = 0;
	if (bpf_probe_read_user(&family, sizeof(family), a->uservaddr) < 0 || family != AF_UNIX)
		return 0;
	int len = (int)a->addrlen - 2;
	if (len <= 0)
		return 0;
	struct unix_connect k = {};
	k.tgid = bpf_get_current_pid_tgid() >> 32;
	k.len = len > UNIX_PATH_MAX ? UNIX_PATH_MAX : len;
	// A path shorter than sun_path may end the user's buffer: read the
	// longest string-safe prefix first, then the rest if it was there.
	if (bpf_probe_read_user(k.path, sizeof(k.path), (const char *)a->uservaddr + 2) < 0 &&
	    bpf_probe_read_user_str(k.path, sizeof(k.path), (const char *)a->uservaddr + 2) < 0)
		return 0;
	struct seen v = seen_now();
	bpf_map_update_elem(&unix_connects, &k, &v, BPF_ANY);
	return 0;
}
