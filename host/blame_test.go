package host

import (
	"fmt"
	"math"
	"os"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/interfere"
	"github.com/tare-dev/tare/internal/testkit/testservice"
	"github.com/tare-dev/tare/schedprobe"
)

func TestBlameOf(t *testing.T) {
	ms := time.Millisecond
	holder := func(k schedprobe.Kind, group, tgid int, comm string) schedprobe.Holder {
		return schedprobe.Holder{Kind: k, Group: group, TGID: tgid, Comm: comm}
	}
	c := &schedprobe.Counts{
		Charges: []schedprobe.Charge{
			{Group: groupSUT, Holder: holder(schedprobe.Other, 0, 7, "sh"), Wait: 300 * ms},
			{Group: groupTare, Holder: holder(schedprobe.Other, 0, 9, "sh"), Wait: 100 * ms},
			{Group: groupSUT, Holder: holder(schedprobe.Watched, groupSUT, 5120, "app"), Wait: 50 * ms},
			{Group: groupSUT, Holder: holder(schedprobe.Watched, groupTare, 5000, "tare"), Wait: 20 * ms},
			{Group: groupSUT, Holder: holder(schedprobe.Kernel, 0, 14, "ksoftirqd/0"), Wait: 5 * ms},
			{Group: groupSUT, Holder: holder(schedprobe.Idle, 0, 0, "swapper/0"), Wait: 2 * ms},
			// tare check's busiest process, waiting behind the hog too.
			{Group: groupBusiest, Holder: holder(schedprobe.Other, 0, 7, "sh"), Wait: 400 * ms},
			// a group no process holds any more: left out.
			{Group: groupBusiest + 1, Holder: holder(schedprobe.Other, 0, 7, "sh"), Wait: 900 * ms},
		},
		OthersByCPU: []time.Duration{700 * ms, 0},
		Waited:      [schedprobe.Groups]time.Duration{470 * ms, 30 * ms, 400 * ms},
		Lost:        3,
	}
	waiters := map[int]tare.ProcessShare{groupBusiest: {Name: "batch", PID: 4121, CPUPct: 30}}
	got := blameOf(c, time.Second, waiters, nil, nil)
	want := &tare.Blame{Source: tare.BlameMeasured, WaitPct: 47.7, RunDelayPct: tare.Float(50), DroppedEvents: 3,
		Behind: []tare.Behind{
			{Owner: tare.OwnerOther, Name: "sh", PIDs: []int{7, 9}, WaitPct: 40},
			{Owner: tare.OwnerSUT, Name: "app", PIDs: []int{5120}, WaitPct: 5},
			{Owner: tare.OwnerTare, Name: "tare", PIDs: []int{5000}, WaitPct: 2},
			{Owner: tare.OwnerKernel, Name: "ksoftirqd/0", PIDs: []int{14}, WaitPct: 0.5},
			{Owner: tare.OwnerWakeup, Name: "", PIDs: []int{}, WaitPct: 0.2},
		},
		OthersByCPU: []tare.CPUWait{{CPU: 0, WaitPct: 70}},
		Waiters: []tare.Waiter{{Name: "batch", PIDs: []int{4121}, Root: 4121, WaitPct: 40,
			Behind: []tare.Behind{{Owner: tare.OwnerOther, Name: "sh", PIDs: []int{7}, WaitPct: 40}}}},
	}
	round(got)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("blameOf =\n%+v\nwant\n%+v", got, want)
	}
}

// TestBlameOfServices (issue 40): other processes are waited behind by
// service, as the process table places them: a hog's `sh` and a broker's
// disk monitor's `sh` are two, gunicorn's workers one, named by the whole
// name where the kernel cut comm; processes the table never held (gone
// before it looked), or whose pid it holds for another command, by
// command alone.
func TestBlameOfServices(t *testing.T) {
	ms := time.Millisecond
	other := func(tgid int, comm string, wait time.Duration) schedprobe.Charge {
		return schedprobe.Charge{Group: groupSUT, Holder: schedprobe.Holder{Kind: schedprobe.Other, TGID: tgid, Comm: comm}, Wait: wait}
	}
	c := &schedprobe.Counts{Charges: []schedprobe.Charge{
		other(61, "sh", 300*ms),
		other(51, "sh", 10*ms),
		other(101, "gunicorn", 50*ms),
		other(102, "gunicorn", 50*ms),
		other(200, "nightly-compact", 20*ms),
		other(998, "df", 5*ms),
		other(999, "df", 5*ms),
		other(300, "perl", 4*ms),
	}}
	procs := map[int]procStat{
		1:   {PID: 1, Comm: "systemd"},
		50:  {PID: 50, Comm: "beam.smp", PPID: 1},
		51:  {PID: 51, Comm: "sh", PPID: 50},
		60:  {PID: 60, Comm: "tare.test", PPID: 1},
		61:  {PID: 61, Comm: "sh", PPID: 60},
		100: {PID: 100, Comm: "gunicorn", PPID: 1},
		101: {PID: 101, Comm: "gunicorn", PPID: 100},
		102: {PID: 102, Comm: "gunicorn", PPID: 100},
		200: {PID: 200, Comm: "nightly-compactor", PPID: 1},
		300: {PID: 300, Comm: "python3", PPID: 1}, // the pid of perl, given since to another
	}
	got := blameOf(c, time.Second, nil, procs, nil)
	round(got)
	want := []tare.Behind{
		{Owner: tare.OwnerOther, Name: "sh", PIDs: []int{61}, WaitPct: 30, Root: 61},
		{Owner: tare.OwnerOther, Name: "gunicorn", PIDs: []int{101, 102}, WaitPct: 10, Root: 100},
		{Owner: tare.OwnerOther, Name: "nightly-compactor", PIDs: []int{200}, WaitPct: 2, Root: 200},
		{Owner: tare.OwnerOther, Name: "df", PIDs: []int{998, 999}, WaitPct: 1},
		{Owner: tare.OwnerOther, Name: "sh", PIDs: []int{51}, WaitPct: 1, Root: 51},
		{Owner: tare.OwnerOther, Name: "perl", PIDs: []int{300}, WaitPct: 0.4},
	}
	if !reflect.DeepEqual(got.Behind, want) {
		t.Errorf("behind\n%+v\nwant\n%+v", got.Behind, want)
	}
}

// TestBlameOfForkedMembers: a backend PostgreSQL forked for a connection
// within the tick ran unwatched by the probe, which charged the wait
// behind it to another process; the members found at the tick's end hold
// it (a descendant of the postmaster of the graph), so the wait is behind
// the system under test. One the table never held stays another's.
func TestBlameOfForkedMembers(t *testing.T) {
	ms := time.Millisecond
	charge := func(kind schedprobe.Kind, tgid int, wait time.Duration) schedprobe.Charge {
		return schedprobe.Charge{Group: groupSUT, Holder: schedprobe.Holder{Kind: kind, TGID: tgid, Comm: "postgres", Group: groupSUT}, Wait: wait}
	}
	c := &schedprobe.Counts{Charges: []schedprobe.Charge{
		charge(schedprobe.Watched, 500, 100*ms),
		charge(schedprobe.Other, 512, 50*ms),
		charge(schedprobe.Other, 513, 20*ms),
	}}
	procs := map[int]procStat{
		1:   {PID: 1, Comm: "systemd"},
		500: {PID: 500, Comm: "postgres", PPID: 1},
		512: {PID: 512, Comm: "postgres", PPID: 500},
	}
	m := newMembers()
	m.find(procs, [][]int{{500}}, nil, nil)
	got := blameOf(c, time.Second, nil, procs, m)
	round(got)
	want := []tare.Behind{
		{Owner: tare.OwnerSUT, Name: "postgres", PIDs: []int{500, 512}, WaitPct: 15},
		{Owner: tare.OwnerOther, Name: "postgres", PIDs: []int{513}, WaitPct: 2},
	}
	if !reflect.DeepEqual(got.Behind, want) {
		t.Errorf("behind\n%+v\nwant\n%+v", got.Behind, want)
	}
}

// TestOwnerOfGone: a process the probe did not watch, forked and gone
// between two readings of the table (a backend PostgreSQL forked for one
// connection before the probe watched the postmaster), is the system
// under test's when the nearest of its ancestors the table holds is:
// its parent, or past a parent gone too (a CGI script's shell), its
// grandparent. One whose nearest known ancestor is another process, or
// that the probe saw no ancestor of, is another's, named as the probe
// named it.
func TestOwnerOfGone(t *testing.T) {
	procs := map[int]procStat{
		1:   {PID: 1, Comm: "systemd"},
		300: {PID: 300, Comm: "bash", PPID: 1},
		500: {PID: 500, Comm: "postgres", PPID: 1},
		600: {PID: 600, Comm: "apache2", PPID: 1},
		601: {PID: 601, Comm: "apache2", PPID: 600},
		700: {PID: 700, Comm: "cron", PPID: 1},
		// 512 was a backend; its pid is another process's now
		512: {PID: 512, Comm: "sleep", PPID: 700},
		// 520 was forked by the postmaster and left its tree (a daemon)
		520: {PID: 520, Comm: "postgres", PPID: 1},
	}
	m := newMembers()
	m.find(procs, [][]int{{500}, {600}}, nil, nil)
	ancestry := func(pids ...int) (a [schedprobe.Ancestry]int) {
		copy(a[:], pids)
		return a
	}
	for _, tc := range []struct {
		name      string
		tgid      int
		comm      string
		ancestors [schedprobe.Ancestry]int
		owner     string
		wantName  string
	}{
		{"a backend gone", 511, "postgres", ancestry(500, 1), tare.OwnerSUT, "postgres"},
		{"a backend whose pid was reused", 512, "postgres", ancestry(500, 1), tare.OwnerSUT, "postgres"},
		{"a CGI script whose shell is gone too", 620, "perl", ancestry(619, 601, 600, 1), tare.OwnerSUT, "perl"},
		{"a neighbour's child gone", 310, "perl", ancestry(300, 1), tare.OwnerOther, "perl"},
		{"a neighbour's grandchild, its parent gone", 311, "perl", ancestry(309, 300, 1), tare.OwnerOther, "perl"},
		{"gone, no ancestor known", 320, "postgres", ancestry(), tare.OwnerOther, "postgres"},
		{"gone, every ancestor gone up to init", 321, "postgres", ancestry(319, 318, 1), tare.OwnerOther, "postgres"},
		{"alive, out of the tree since", 520, "postgres", ancestry(500, 1), tare.OwnerOther, "postgres"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := schedprobe.Holder{Kind: schedprobe.Other, TGID: tc.tgid, Comm: tc.comm, Ancestors: tc.ancestors}
			owner, name, _ := ownerOf(h, procs, m)
			if owner != tc.owner || name != tc.wantName {
				t.Errorf("ownerOf(%+v) = %s %q, want %s %q", h, owner, name, tc.owner, tc.wantName)
			}
		})
	}
}

// round rounds b's shares to 1e-9, as float sums leave them.
func round(b *tare.Blame) {
	r := func(v float64) float64 { return math.Round(v*1e9) / 1e9 }
	b.WaitPct = r(b.WaitPct)
	for i := range b.Behind {
		b.Behind[i].WaitPct = r(b.Behind[i].WaitPct)
	}
	for i := range b.Waiters {
		b.Waiters[i].WaitPct = r(b.Waiters[i].WaitPct)
		for j := range b.Waiters[i].Behind {
			b.Waiters[i].Behind[j].WaitPct = r(b.Waiters[i].Behind[j].WaitPct)
		}
	}
}

// TestBlameFold: past the eighth named owner, other processes and kernel
// threads are summed, unnamed, under their owner; the system under test's
// and tare's processes stay named.
func TestBlameFold(t *testing.T) {
	var c schedprobe.Counts
	for i := range 12 {
		c.Charges = append(c.Charges, schedprobe.Charge{Holder: schedprobe.Holder{Kind: schedprobe.Other, TGID: 100 + i, Comm: fmt.Sprintf("job%02d", i)},
			Wait: time.Duration(20-i) * time.Millisecond})
	}
	c.Charges = append(c.Charges, schedprobe.Charge{Holder: schedprobe.Holder{Kind: schedprobe.Watched, Group: groupSUT, TGID: 5, Comm: "app"}, Wait: time.Millisecond})
	b := blameOf(&c, time.Second, nil, nil, nil)
	var named []string
	rest := 0.0
	for _, w := range b.Behind {
		switch {
		case w.Owner == tare.OwnerOther && w.Name == "":
			rest = w.WaitPct
		default:
			named = append(named, w.Name)
		}
	}
	wantNamed := []string{"job00", "job01", "job02", "job03", "job04", "job05", "job06", "job07", "app"}
	if !reflect.DeepEqual(named, wantNamed) || math.Abs(rest-(12+11+10+9)/10.0) > 1e-9 {
		t.Errorf("named %v and the rest %.2f%%, want %v and 4.2%%", named, rest, wantNamed)
	}
}

// TestSamplerBlame: as root on a kernel with BTF, a sampler with the
// scheduler probe measures the blame of each tick: a service pinned to CPU
// 0 with a hog on CPU 0 waits behind the hog (named, by pid), and each
// tick's run delay by the probe agrees with schedstat's (the truth check),
// from the second tick on.
func TestSamplerBlame(t *testing.T) {
	if testing.Short() {
		t.Skip("real interference for seconds: skipped with -short")
	}
	if err := schedprobe.Expected(); err != nil {
		testservice.Unable(t, "%v", err)
	}
	interfere.Exclusive(t)
	svc := interfere.Busy(t, interfere.Pinned(0)...)
	hog := interfere.Busy(t, interfere.Pinned(0)...)
	s, err := NewSampler(Config{Tick: 500 * time.Millisecond, SUT: []int{svc.Process.Pid}, Tare: []int{os.Getpid()}, SchedProbe: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if why := s.BlameWhy(); why != "" {
		t.Fatalf("the probe did not run as root with BTF: %s", why)
	}
	for i, hs := range samplesOf(t, s, 4) {
		b := hs.Blame
		if b == nil || b.Source != tare.BlameMeasured || hs.RunDelay == nil {
			t.Fatalf("tick %d: blame %+v, run delay %v; want both measured (warnings %v)", i, b, hs.RunDelay, s.Warnings())
		}
		// The first tick after the probe began to watch is not compared:
		// it did not see the waits already under way.
		if (b.RunDelayPct == nil) != (i == 0) {
			t.Fatalf("tick %d: the probe's run delay %v; want it compared after the first tick", i, fmtPtr(b.RunDelayPct))
		}
		if i == 0 {
			continue
		}
		t.Logf("tick %d: waited %.1f%%, run delay %.1f%% by the probe, %.1f%% by schedstat (sut %v tare %v); behind %+v", i, b.WaitPct, *b.RunDelayPct, *hs.RunDelay, fmtPtr(hs.SUTRunDelay), fmtPtr(hs.TareRunDelay), b.Behind)
		if hs.Disagrees() {
			t.Errorf("tick %d: the probe's run delay %.2f%% disagrees with schedstat's %.2f%%", i, *b.RunDelayPct, *hs.RunDelay)
		}
		at := slices.IndexFunc(b.Behind, func(w tare.Behind) bool { return slices.Contains(w.PIDs, hog.Process.Pid) })
		// About half of CPU 0 on a quiet machine; a busy one's other
		// processes take their part.
		if at < 0 || b.Behind[at].Owner != tare.OwnerOther || b.Behind[at].Name != "sh" || b.Behind[at].WaitPct < 1 {
			t.Errorf("tick %d: the hog (sh, pid %d) not waited behind: %+v", i, hog.Process.Pid, b.Behind)
		}
	}
}
