// SPDX-License-Identifier: (MIT OR GPL-2.0-only)
//
// The scheduler probe: for the threads of the watched processes, the time
// each waited for a CPU (from becoming runnable, by a wake-up or by being
// preempted, to running) and who held that CPU meanwhile.
//
// Each CPU keeps, per group of waiters, the count k of watched threads
// waiting on it and the sum S of max(since, last switch) over them, where
// since is when the thread reached this CPU's queue. At every switch on
// the CPU the task leaving it (it held the CPU since the last switch) is
// charged
//
//	k·now − S
//
// which is each waiter's wait since the later of its arrival and the last
// switch, and then S = k·now. A waiter that starts running leaves k; one
// that the load balancer moves is charged up to the move on its old CPU
// (to whoever holds it) and joins the new one's inbox, which that CPU folds
// in at its next switch: the new CPU's run queue is not locked by the
// mover, so the inbox is the only part of a CPU's state another CPU
// changes without holding it (atomically). A wake-up happens under the
// lock of the run queue it lands on, so it changes that CPU's state
// directly.
//
// The idle task as the holder is wake-up latency: nobody was in the way.
//
// A wait behind a watched thread (the service's own, or tare's) while a
// process nobody watches held another CPU the waiters may run on is that
// process's, for as long as it held that CPU: the scheduler puts a woken
// thread on an idle CPU at once, but moves it off a busy queue only at
// the next balance, so a neighbour that keeps one CPU busy, at nice 19
// too, crowds the service onto the rest and its threads queue behind each
// other (crowder).
//
// Each wait that ends is also counted in full (waited), for the truth
// check against schedstat's run delay, twice: on the probe's clock, from
// the wake-up or preemption to the switch, and on the clock the kernel
// times run delay by, its run queue's, read at the same events. The two
// differ where the kernel does not move that clock on: a wake-up that
// asks its CPU to switch at once (a sleeper waking beside a batch job, or
// on an idle CPU) skips the clock's update at that switch
// (rq_clock_skip_update), so the kernel counts the woken thread's wait
// as nothing and adds it to the next wait of the thread it preempted.

#include "kernel.h"

#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

// GROUPS is how many groups of waiters the counts keep apart (the system
// under test, tare, the busiest processes of tare check); a power of two,
// so that a group masked with GROUPS-1 is a bound the verifier accepts.
#define GROUPS 8
#define COMM_LEN 16
#define ANCESTORS 4 // as connect.bpf.c's

enum holder_kind {
	HOLDER_OTHER = 0,   // a process nobody watches
	HOLDER_WATCHED = 1, // a watched process (holder_group says whose)
	HOLDER_KERNEL = 2,  // a kernel thread
	HOLDER_IDLE = 3,    // the idle task: wake-up latency
};

enum counter {
	LOST_CHARGES = 0, // the charges map was full
	LOST_WAITERS = 1, // the waiters map was full
	ANOMALIES = 2,    // a waiter found where the counts did not expect it
	UNSEEN = 3,       // a switch the tracepoint did not report (the task leaving was not the last one in)
	LOST_STRETCHES = 4, // the stretches ring buffer was full
	COUNTERS = 5,
};

struct watch {
	__u8 group;   // the group its threads wait in
	__u8 inherit; // the processes it forks are watched too, in the same group
	__u8 forked;  // added here at a fork, not by the loader
	__u8 pad;
};

struct waiter {
	__u64 queued;  // when it became runnable
	__u64 kqueued; // the run queue's clock then; 0: take the kernel's own stamp when it runs
	__u64 since;  // when it reached the queue of cpu
	__u32 cpu;
	__u32 group;
};

struct cpu_state {
	__u64 last;         // the last switch on this CPU
	__u64 curr;         // the task it switched to (struct task_struct *): the holder until the next
	__s64 k[GROUPS];    // watched threads waiting on this CPU
	__s64 s[GROUPS];    // the sum of max(since, last) over them
	__s64 in_k[GROUPS]; // waiters moved here since the last switch (other CPUs add, atomically)
	__s64 in_s[GROUPS]; // the sum of the times they were moved
	__u64 other_ns;     // wait charged to other processes on this CPU
	__u64 switches;     // switches seen on this CPU
};

struct charge_key {
	__u32 tgid; // the holder's process; 0 for the idle task
	__u8 group; // the waiters' group
	__u8 kind;  // enum holder_kind
	__u8 holder_group;
	__u8 pad;
};

struct charge {
	__u64 wait_ns;
	char comm[COMM_LEN]; // the holder's process's command at its latest charge
	// The processes the holder descended from when it was first charged:
	// its parent, the parent's parent…; 0 past init or the ANCESTORS
	// nearest. A child forked before its parent was watched and gone
	// before tare looks again is its parent's (a database's backend).
	__u32 ancestors[ANCESTORS];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32); // tgid
	__type(value, struct watch);
} watched SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32); // thread id
	__type(value, struct waiter);
} waiters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1); // the loader sets the number of possible CPUs
	__type(key, __u32);
	__type(value, struct cpu_state);
} cpus SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct charge_key);
	__type(value, struct charge);
} charges SEC(".maps");

// The waits that ended (the thread ran), in full, by group: counted when
// schedstat counts its run delay, so that the two can be compared tick by
// tick. One entry, read in one lookup.
struct waits {
	__u64 ns[GROUPS];      // on the probe's clock
	__u64 clocked[GROUPS]; // on the run queue's clock, as schedstat's
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct waits);
} waited SEC(".maps");

// A watched thread that exited: its run delay as schedstat showed it last,
// which /proc no longer shows once the thread is gone, beside the waits the
// probe counted of it. The loader drains the map every tick; when it is full
// a thread's exit goes unrecorded, and the loader sees it gone without one.
struct exit {
	__u64 run_delay; // ns, final
	__u32 tgid;
	__u32 group;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32); // thread id
	__type(value, struct exit);
} exited SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, COUNTERS);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

// A stretch is one charge of wait_floor_ns or more, passed on as it is
// made: group's threads waited on cpu from start to end behind one holder
// (as its charge_key names it), owed ns in all (k waiters, k·the stretch
// when each waited all of it).
struct stretch {
	__u64 start; // when the mean waiter arrived, or the last switch if later
	__u64 end;   // the charge: a switch, or a move away
	__u64 owed;
	__u32 tgid;
	__u32 cpu;
	__u8 group;
	__u8 kind;
	__u8 holder_group;
	__u8 pad[5];
};

// A stretch takes 48 bytes of the ring (an 8-byte header). At 50,000
// switches a second, each charging the waiters of two groups at most (the
// system under test's and tare's: on one CPU, more are rare), that is
// 4.8 MB/s. The reader is woken when a quarter is in use (stretch), so
// 3 MiB stay free while it waits for a CPU: 650 ms of it, on a host
// saturated enough to make 50,000 switches. It also drains at each tick.
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20);
} stretches SEC(".maps");

// The CPUs each group's threads may run on (bit c: CPU c), the union of
// its processes' affinities, which the loader keeps; 0: any. A CPU past
// 63 counts as allowed.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, GROUPS);
	__type(key, __u32);
	__type(value, __u64);
} group_cpus SEC(".maps");

// MAX_CPUS bounds the CPUs crowder looks at, for the verifier.
#define MAX_CPUS 256

// The loader's settings: the shortest charge passed on as a stretch
// (tare.WaitFloor), the waiters' groups whose are (bit g: group g;
// none by default), and the number of possible CPUs.
const volatile __u64 wait_floor_ns = 20000;
const volatile __u8 stretch_groups = 0;
const volatile __u32 nr_cpus = 1;

static __always_inline void count(__u32 c)
{
	__u64 *v = bpf_map_lookup_elem(&counters, &c);
	if (v)
		(*v)++;
}

static __always_inline struct cpu_state *cpu_of(__u32 cpu)
{
	return bpf_map_lookup_elem(&cpus, &cpu);
}

static __always_inline __u32 task_cpu(struct task_struct *t)
{
	if (bpf_core_field_exists(t->thread_info.cpu))
		return BPF_CORE_READ(t, thread_info.cpu);
	struct task_struct___old *o = (void *)t;
	return BPF_CORE_READ(o, cpu);
}

static __always_inline long task_state(struct task_struct *t)
{
	if (bpf_core_field_exists(t->__state))
		return BPF_CORE_READ(t, __state);
	struct task_struct___old *o = (void *)t;
	return BPF_CORE_READ(o, state);
}

// rq_clock is the clock of the run queue t is on, by which the kernel
// times run delay; 0 where the program cannot read it (a kernel without
// group scheduling, whose tasks do not name their run queue).
static __always_inline __u64 rq_clock(struct task_struct *t)
{
	if (!bpf_core_field_exists(((struct cfs_rq *)0)->rq))
		return 0;
	return BPF_CORE_READ(t, se.cfs_rq, rq, clock);
}

// add_waited counts a wait that ended, or that a move cut, by group: from
// queued to at on the probe's clock, and from kqueued to kat on the run
// queue's (either 0: not known, and the probe's figure stands for it).
static __always_inline void add_waited(__u32 g, __u64 queued, __u64 at, __u64 kqueued, __u64 kat)
{
	__u32 zero = 0;
	struct waits *done = bpf_map_lookup_elem(&waited, &zero);
	if (!done)
		return;
	__u64 ns = at > queued ? at - queued : 0;
	__u64 clocked = ns;
	if (kqueued && kat)
		clocked = kat > kqueued ? kat - kqueued : 0;
	g &= GROUPS - 1;
	__sync_fetch_and_add(&done->ns[g], ns);
	__sync_fetch_and_add(&done->clocked[g], clocked);
}

// ancestors_of fills out with the processes t descended from, nearest
// first: read once per holder, when its charge is made.
static __always_inline void ancestors_of(struct task_struct *t, __u32 *out)
{
	for (int i = 0; i < ANCESTORS; i++) {
		t = BPF_CORE_READ(t, real_parent);
		if (!t)
			break;
		out[i] = BPF_CORE_READ(t, tgid);
		if (out[i] <= 1)
			break; // init, or the idle task above it
	}
}

// stretch passes on the charge of ns to key's holder, from start to now
// on cpu, when it is long enough and its group's are wanted.
static __always_inline void stretch(struct charge_key *key, __s64 ns, __u64 start, __u64 now, __u32 cpu)
{
	if ((__u64)ns < wait_floor_ns || !(stretch_groups & (1 << (key->group & (GROUPS - 1)))))
		return;
	struct stretch *r = bpf_ringbuf_reserve(&stretches, sizeof(*r), 0);
	if (!r) {
		count(LOST_STRETCHES);
		return;
	}
	r->start = start;
	r->end = now;
	r->owed = ns;
	r->tgid = key->tgid;
	r->cpu = cpu;
	r->group = key->group;
	r->kind = key->kind;
	r->holder_group = key->holder_group;
	__builtin_memset(r->pad, 0, sizeof(r->pad));
	// A wake-up per stretch would cost the reader more than the stretch:
	// it is woken when a quarter of the ring is in use, and drains at
	// each tick.
	__u64 flags = bpf_ringbuf_query(&stretches, BPF_RB_AVAIL_DATA) >= (1 << 20) ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
	bpf_ringbuf_submit(r, flags);
}

// book adds ns of wait of key's waiters on cpu, from start to now, to its
// holder (holder): in the charges map, and as a stretch.
static __always_inline void book(struct charge_key *key, struct task_struct *holder, __s64 ns, __u64 start, __u64 now, __u32 cpu)
{
	stretch(key, ns, start, now, cpu);
	struct charge *c = bpf_map_lookup_elem(&charges, key);
	if (!c) {
		struct charge fresh = {.wait_ns = ns};
		BPF_CORE_READ_STR_INTO(&fresh.comm, holder, group_leader, comm);
		if (key->kind == HOLDER_OTHER)
			ancestors_of(holder, fresh.ancestors);
		if (bpf_map_update_elem(&charges, key, &fresh, BPF_NOEXIST) == 0)
			return;
		c = bpf_map_lookup_elem(&charges, key); // made meanwhile on another CPU
		if (!c) {
			count(LOST_CHARGES);
			return;
		}
	}
	__sync_fetch_and_add(&c->wait_ns, ns);
	// The command as of the latest charge: a child forked as `sh` that
	// then exec'd `awk` is named `awk`, what it ran most of its life.
	BPF_CORE_READ_STR_INTO(&c->comm, holder, group_leader, comm);
}

// crowder returns the process nobody watches that held another CPU than
// cpu, one that group's threads may run on, for the longest part of start
// to now, and sets *from to when that part began and *at to its CPU; NULL
// if none did at now. One that held such a CPU and left it before now is
// not seen: the charge is a switch's, and a crowd that matters lasts.
static __always_inline struct task_struct *crowder(__u32 group, __u32 cpu, __u64 start, __u64 now, __u64 *from, __u32 *at)
{
	__u32 g = group & (GROUPS - 1);
	__u64 *mask = bpf_map_lookup_elem(&group_cpus, &g);
	__u64 allowed = mask && *mask ? *mask : ~0ULL;
	struct task_struct *by = 0;
	for (__u32 c = 0; c < MAX_CPUS; c++) {
		if (c >= nr_cpus)
			break;
		if (c == cpu || (c < 64 && !(allowed & (1ULL << c))))
			continue;
		struct cpu_state *o = cpu_of(c);
		if (!o)
			continue;
		// Another CPU's, read without its lock: a switch there under
		// way may pair the new holder with the old one's time, once.
		// Its holder since its last switch, looked at only here, not at
		// every switch: charges behind watched threads are the rarer.
		struct task_struct *t = (void *)o->curr;
		__u64 since = o->last;
		if (!t || !since || since >= now)
			continue;
		if (since < start)
			since = start;
		if (by && since >= *from)
			continue;
		if (BPF_CORE_READ(t, pid) == 0 || BPF_CORE_READ(t, flags) & PF_KTHREAD)
			continue;
		__u32 tgid = BPF_CORE_READ(t, tgid);
		if (bpf_map_lookup_elem(&watched, &tgid))
			continue;
		by = t;
		*from = since;
		*at = c;
	}
	return by;
}

// owing is one charge: ns of wait of group's threads on cpu, from start
// to now, owed to holder, thread pid of process tgid.
struct owing {
	__u64 holder;
	__s64 ns;
	__u64 start;
	__u64 now;
	__u32 pid;
	__u32 tgid;
	__u32 group;
	__u32 cpu;
};

// settle adds a charge (o) to its holder, and passes it on as a stretch.
// Behind a watched holder, the part while a process nobody watches held
// another CPU the waiters may run on is that process's (crowder). A
// global function: the verifier checks it once, not once for each group
// on_switch charges in each of its paths, which made loading the probe
// take tens of milliseconds.
__noinline int settle(struct owing *o)
{
	if (!o || o->ns <= 0)
		return 0;
	struct task_struct *holder = (void *)o->holder;
	__u32 pid = o->pid, tgid = o->tgid, group = o->group, cpu = o->cpu;
	__s64 ns = o->ns;
	__u64 start = o->start, now = o->now;
	struct cpu_state *st = cpu_of(cpu);
	if (!st)
		return 0;
	struct charge_key key = {.group = group};
	if (pid == 0) {
		key.kind = HOLDER_IDLE;
	} else {
		key.tgid = tgid;
		struct watch *w = bpf_map_lookup_elem(&watched, &key.tgid);
		if (w) {
			key.kind = HOLDER_WATCHED;
			key.holder_group = w->group;
		} else if (BPF_CORE_READ(holder, flags) & PF_KTHREAD) {
			key.kind = HOLDER_KERNEL;
		} else {
			key.kind = HOLDER_OTHER;
			__sync_fetch_and_add(&st->other_ns, ns);
		}
	}
	if (key.kind == HOLDER_WATCHED && now > start) {
		__u64 from = 0;
		__u32 at = 0;
		struct task_struct *by = crowder(group, cpu, start, now, &from, &at);
		if (by) {
			__s64 part = (__s64)((__u64)ns * (now - from) / (now - start)); // ns > 0
			if (part > ns)
				part = ns;
			struct charge_key other = {.group = group, .kind = HOLDER_OTHER, .tgid = BPF_CORE_READ(by, tgid)};
			struct cpu_state *there = cpu_of(at);
			if (there)
				__sync_fetch_and_add(&there->other_ns, part);
			book(&other, by, part, from, now, cpu);
			ns -= part;
			if (ns <= 0)
				return 0;
		}
	}
	book(&key, holder, ns, start, now, cpu);
	return 0;
}

// forget takes a waiter out of the counts of a CPU whose run queue this
// program does not hold, through its inbox. Its share of that CPU's S is
// taken as its since, which is right unless a switch came between: then
// one charge there is off by that much.
static __always_inline void forget(struct waiter *w)
{
	struct cpu_state *o = cpu_of(w->cpu);
	__u32 g = w->group & (GROUPS - 1);
	count(ANOMALIES);
	if (!o)
		return;
	__sync_fetch_and_add(&o->in_k[g], -1);
	__sync_fetch_and_add(&o->in_s[g], -(__s64)w->since);
}

// start_wait counts thread pid of group as waiting on cpu from now, and
// from kqueued on the run queue's clock; the caller holds that CPU's run
// queue.
static __always_inline void start_wait(__u32 pid, __u32 group, __u32 cpu, struct cpu_state *st, __u64 now, __u64 kqueued)
{
	struct waiter *old = bpf_map_lookup_elem(&waiters, &pid);
	if (old) {
		forget(old); // it ran, or moved, unseen
		bpf_map_delete_elem(&waiters, &pid);
	}
	__u32 g = group & (GROUPS - 1);
	struct waiter w = {.queued = now, .kqueued = kqueued, .since = now, .cpu = cpu, .group = g};
	if (bpf_map_update_elem(&waiters, &pid, &w, BPF_ANY)) {
		count(LOST_WAITERS);
		return;
	}
	st->k[g]++;
	st->s[g] += now;
}

// end_wait ends the wait of thread pid (w) at at, kat on the run queue's
// clock (0: not known), on cpu, whose state st this program holds: the
// wait counts in full (waited), and the thread leaves the counts of its
// CPU, where its share of S is max(since, last).
static __always_inline void end_wait(struct waiter *w, __u32 pid, __u32 cpu, struct cpu_state *st, __u64 at, __u64 kat)
{
	__u32 g = w->group & (GROUPS - 1);
	add_waited(g, w->queued, at, w->kqueued, kat);
	if (w->cpu == cpu) {
		st->k[g]--;
		st->s[g] -= w->since > st->last ? w->since : st->last;
	} else {
		forget(w);
	}
	bpf_map_delete_elem(&waiters, &pid);
}

SEC("raw_tp/sched_switch")
int on_switch(__u64 *ctx)
{
	struct task_struct *prev = (void *)ctx[1];
	struct task_struct *next = (void *)ctx[2];
	__u32 cpu = bpf_get_smp_processor_id();
	struct cpu_state *st = cpu_of(cpu);
	if (!st)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	st->switches++;
	// prev is the task running this: its ids without reading its memory.
	__u64 prev_ids = bpf_get_current_pid_tgid();
	__u32 prev_pid = (__u32)prev_ids, prev_tgid = prev_ids >> 32;

	// Some switches are never traced (on this project's Firecracker
	// guest, every switch away from its agent's threads): then prev took
	// the CPU unseen, at a moment between the last switch seen and now.
	// If it was waiting, its wait is taken to end at the last switch seen,
	// and nothing of the moment is charged to it.
	if (st->curr && st->curr != (__u64)prev) {
		count(UNSEEN);
		__u32 ppid = prev_pid;
		struct waiter *pw = bpf_map_lookup_elem(&waiters, &ppid);
		if (pw)
			end_wait(pw, ppid, cpu, st, pw->since > st->last ? pw->since : st->last, 0);
	}

	for (int g = 0; g < GROUPS; g++) {
		if (st->in_k[g] || st->in_s[g]) {
			st->k[g] += __sync_lock_test_and_set(&st->in_k[g], 0);
			st->s[g] += __sync_lock_test_and_set(&st->in_s[g], 0);
		}
		__s64 k = st->k[g];
		if (k <= 0) {
			if (k < 0)
				count(ANOMALIES);
			st->k[g] = 0;
			st->s[g] = 0;
			continue;
		}
		__s64 owed = k * (__s64)now - st->s[g];
		__s64 most = k * (__s64)(now - st->last); // a move's inbox time may precede last by a moment
		if (owed > most)
			owed = most;
		// The mean waiter's arrival: exact for one waiter, the usual case.
		__u64 start = owed > 0 ? now - (__u64)owed / (__u64)k : now;
		if (start < st->last)
			start = st->last;
		struct owing o = {.holder = (__u64)prev, .ns = owed, .start = start, .now = now,
				  .pid = prev_pid, .tgid = prev_tgid, .group = g, .cpu = cpu};
		settle(&o);
		st->s[g] = k * (__s64)now;
	}
	st->last = now;
	st->curr = (__u64)next;

	// The thread that runs now stops waiting. The run queue's clock is
	// where the kernel left it for this switch: the kernel's end of the
	// same wait.
	__u32 pid = BPF_CORE_READ(next, pid);
	struct waiter *w = bpf_map_lookup_elem(&waiters, &pid);
	if (w) {
		if (!w->kqueued) // it moved: the kernel's stamp of its arrival here
			w->kqueued = BPF_CORE_READ(next, sched_info.last_queued);
		end_wait(w, pid, cpu, st, now, rq_clock(next));
	}

	// The thread that leaves while still runnable (preempted, or it
	// yielded) starts waiting, on the run queue's clock where the kernel
	// starts it.
	long prev_state = prev_pid != 0 ? task_state(prev) : 0;
	if (prev_pid != 0 && prev_state == TASK_RUNNING) {
		struct watch *wt = bpf_map_lookup_elem(&watched, &prev_tgid);
		if (wt)
			start_wait(prev_pid, wt->group, cpu, st, now, rq_clock(prev));
	} else if (prev_state & TASK_DEAD) {
		// Its last switch: its run delay is final.
		struct watch *wt = bpf_map_lookup_elem(&watched, &prev_tgid);
		if (wt) {
			struct exit e = {.run_delay = BPF_CORE_READ(prev, sched_info.run_delay), .tgid = prev_tgid, .group = wt->group};
			bpf_map_update_elem(&exited, &prev_pid, &e, BPF_ANY);
		}
	}
	return 0;
}

static __always_inline int wakeup(struct task_struct *p)
{
	__u32 tgid = BPF_CORE_READ(p, tgid);
	struct watch *wt = bpf_map_lookup_elem(&watched, &tgid);
	if (!wt)
		return 0;
	if (BPF_CORE_READ(p, on_cpu))
		return 0; // woken before it left its CPU: it never stopped running
	__u32 pid = BPF_CORE_READ(p, pid);
	if (bpf_map_lookup_elem(&waiters, &pid))
		return 0; // waiting already
	__u32 cpu = task_cpu(p);
	struct cpu_state *st = cpu_of(cpu);
	if (!st)
		return 0;
	// Queued just now, on the run queue's clock just moved on.
	start_wait(pid, wt->group, cpu, st, bpf_ktime_get_ns(), rq_clock(p));
	return 0;
}

SEC("raw_tp/sched_wakeup")
int on_wakeup(__u64 *ctx)
{
	return wakeup((void *)ctx[0]);
}

SEC("raw_tp/sched_wakeup_new")
int on_wakeup_new(__u64 *ctx)
{
	return wakeup((void *)ctx[0]);
}

// on_migrate follows a waiting thread that the scheduler moves to another
// CPU. The mover holds the old CPU's run queue, not the new one's.
SEC("raw_tp/sched_migrate_task")
int on_migrate(__u64 *ctx)
{
	struct task_struct *p = (void *)ctx[0];
	__u32 dest = (__u32)ctx[1];
	__u32 pid = BPF_CORE_READ(p, pid);
	struct waiter *w = bpf_map_lookup_elem(&waiters, &pid);
	if (!w || w->cpu == dest)
		return 0;
	struct cpu_state *dst = cpu_of(dest);
	if (!dst)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	__u32 g = w->group & (GROUPS - 1);
	// The kernel adds the wait so far to the run delay at a move (it
	// dequeues the thread, on the old run queue's clock, which p still
	// names), and counts the rest from its arrival on dest: so does
	// waited, or a wait that a tick's end cuts after the move lands in one
	// tick here and in two in schedstat.
	add_waited(g, w->queued, now, w->kqueued, rq_clock(p));
	w->queued = now;
	w->kqueued = 0;
	struct cpu_state *src = cpu_of(w->cpu);
	if (src && task_cpu(p) == w->cpu) {
		__u64 from = w->since > src->last ? w->since : src->last;
		struct task_struct *holder = (void *)src->curr;
		struct owing o = {.holder = (__u64)holder, .ns = (__s64)(now - from), .start = from, .now = now,
				  .pid = BPF_CORE_READ(holder, pid), .tgid = BPF_CORE_READ(holder, tgid), .group = g, .cpu = w->cpu};
		settle(&o);
		src->k[g]--;
		src->s[g] -= from;
	} else {
		forget(w);
	}
	w->cpu = dest;
	w->since = now;
	__sync_fetch_and_add(&dst->in_k[g], 1);
	__sync_fetch_and_add(&dst->in_s[g], now);
	return 0;
}

// on_fork watches the processes a watched process forks, from their
// first wake-up, when it inherits: a short-lived child of the system under
// test is the system under test, though it is gone before the loader
// looks again.
SEC("raw_tp/sched_process_fork")
int on_fork(__u64 *ctx)
{
	struct task_struct *parent = (void *)ctx[0];
	struct task_struct *child = (void *)ctx[1];
	__u32 ptgid = BPF_CORE_READ(parent, tgid);
	__u32 ctgid = BPF_CORE_READ(child, tgid);
	if (ptgid == ctgid)
		return 0; // a thread: its process is watched already
	struct watch *w = bpf_map_lookup_elem(&watched, &ptgid);
	if (!w || !w->inherit)
		return 0;
	struct watch c = *w;
	c.forked = 1;
	bpf_map_update_elem(&watched, &ctgid, &c, BPF_NOEXIST);
	return 0;
}

// GPL-compatible, as the kernel requires of a program that reads its
// memory (bpf_probe_read_kernel); this source is also offered under MIT.
char LICENSE[] SEC("license") = "Dual MIT/GPL";
