package schedprobe

import (
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tare-dev/tare/internal/testkit/interfere"
	"github.com/tare-dev/tare/internal/testkit/testservice"
)

// open loads the probe, or skips the test where it cannot run (not root,
// no BTF): there it is not expected to (under CI, which has both, it
// fails: testservice.Unable). As root on a kernel with BTF, a probe that
// does not load fails the test.
func open(t *testing.T) *Probe {
	t.Helper()
	return openWith(t, Options{})
}

// openWith is open, with the stretches o asks for.
func openWith(t *testing.T, o Options) *Probe {
	t.Helper()
	if testing.Short() {
		t.Skip("real scheduling for seconds: skipped with -short")
	}
	if err := Expected(); err != nil {
		testservice.Unable(t, "%v", err)
	}
	p, err := OpenWith(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	return p
}

// measure watches procs for d and returns what the probe counted.
func measure(t *testing.T, p *Probe, procs map[int]Watch, d time.Duration) Counts {
	t.Helper()
	if err := p.Watch(procs); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Read(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(d)
	c, err := p.Read()
	if err != nil {
		t.Fatal(err)
	}
	if c.Lost > 0 {
		t.Errorf("%d events lost", c.Lost)
	}
	return c
}

// behind sums the charges by the holder's process.
func behind(c Counts) map[int]time.Duration {
	by := map[int]time.Duration{}
	for _, ch := range c.Charges {
		by[ch.Holder.TGID] += ch.Wait
	}
	return by
}

func total(c Counts) time.Duration {
	var sum time.Duration
	for _, ch := range c.Charges {
		sum += ch.Wait
	}
	return sum
}

// TestPinnedHog: a busy loop pinned to CPU 0 waits behind a hog pinned
// to the same CPU, about half the time the rest of the machine leaves them
// (the scheduler shares it between the two), and the probe charges that
// wait to the hog, by pid;
// with the hog pinned to CPU 1, not a nanosecond of its wait is the
// hog's. Both run at nice -10 as root (interfere.Pinned), so that the
// rest of a busy machine weighs little against them.
func TestPinnedHog(t *testing.T) {
	p := open(t)
	interfere.Exclusive(t)
	svc := interfere.Busy(t, interfere.Pinned(0)...)
	for _, tt := range []struct {
		name string
		cpu  int
	}{{"same CPU", 0}, {"other CPU", 1}} {
		t.Run(tt.name, func(t *testing.T) {
			hog := interfere.Busy(t, interfere.Pinned(tt.cpu)...)
			defer hog.Process.Kill()
			time.Sleep(200 * time.Millisecond) // both running
			const d = 2 * time.Second
			c := measure(t, p, map[int]Watch{svc.Process.Pid: {}}, d)
			got := behind(c)[hog.Process.Pid]
			t.Logf("waited %v, %v behind the hog (pid %d); on CPU 0 %v behind other processes", total(c), got, hog.Process.Pid, c.OthersByCPU[0])
			if tt.cpu == 0 {
				// The loop and the hog, at the same weight, share what the
				// rest of the machine leaves of CPU 0: the loop waits
				// behind the hog about half of it.
				rest := c.OthersByCPU[0] - got
				if want := (d - rest) / 4; got < want {
					t.Errorf("waited %v behind the hog on its own CPU in %v (%v behind others), want %v or more", got, d, rest, want)
				}
				if names := holderNames(c); names[hog.Process.Pid] != "sh" {
					t.Errorf("the hog (pid %d) is named %q, want sh", hog.Process.Pid, names[hog.Process.Pid])
				}
			} else if got != 0 {
				t.Errorf("waited %v behind a hog on another CPU, want none", got)
			}
		})
	}
}

// TestCrowd: two busy loops of the watched service, free to run on
// either CPU, beside a real-time hog (SCHED_FIFO) pinned to CPU 0: the
// balancer keeps ordinary tasks off a CPU that real-time work holds, so
// the loops share CPU 1 and wait behind each other there. Those waits are
// the hog's (it holds the CPU they could have run on), not the service's
// own; with the loops pinned to CPU 1 themselves, they are the loops' own,
// the hog's CPU never theirs to run on. (A hog at nice -20 does not show
// it: one loop stays on its CPU and waits behind it directly.) The kernel
// still gives ordinary tasks 5 % of the hog's CPU (sched_rt_runtime_us).
func TestCrowd(t *testing.T) {
	p := open(t)
	interfere.Exclusive(t)
	if os.Geteuid() != 0 {
		t.Skip("a real-time hog needs root") // open skipped already
	}
	hog := interfere.Busy(t, "chrt", "-f", "1", "taskset", "-c", "0")
	for _, tt := range []struct {
		name   string
		prefix []string
		crowd  bool
	}{
		{"free to run on the hog's CPU", nil, true},
		{"pinned off it", []string{"taskset", "-c", "1"}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a, b := interfere.Busy(t, tt.prefix...), interfere.Busy(t, tt.prefix...)
			defer a.Process.Kill()
			defer b.Process.Kill()
			time.Sleep(300 * time.Millisecond) // settled where the balancer puts them
			c := measure(t, p, map[int]Watch{a.Process.Pid: {}, b.Process.Pid: {}}, 2*time.Second)
			by := behind(c)
			own := by[a.Process.Pid] + by[b.Process.Pid]
			t.Logf("waited %v: %v behind the hog (pid %d), %v behind each other; charged to others on CPU 0 %v, on CPU 1 %v",
				total(c), by[hog.Process.Pid], hog.Process.Pid, own, c.OthersByCPU[0], c.OthersByCPU[1])
			if tt.crowd {
				// Each loop waits about half of what CPU 1 gives them.
				if by[hog.Process.Pid] < 500*time.Millisecond || by[hog.Process.Pid] < 4*own {
					t.Errorf("waited %v behind the hog and %v behind each other, want 500ms or more behind the hog and 4× what they waited behind each other", by[hog.Process.Pid], own)
				}
				if c.OthersByCPU[0] < by[hog.Process.Pid]*3/4 {
					t.Errorf("charged %v to others on CPU 0, the hog's, want most of the %v behind it", c.OthersByCPU[0], by[hog.Process.Pid])
				}
			} else if own < 500*time.Millisecond || by[hog.Process.Pid] > own/10 {
				t.Errorf("waited %v behind each other and %v behind the hog, want 500ms or more behind each other and a tenth of that or less behind the hog", own, by[hog.Process.Pid])
			}
		})
	}
}

// holderNames are the commands of the holders, by process.
func holderNames(c Counts) map[int]string {
	names := map[int]string{}
	for _, ch := range c.Charges {
		names[ch.Holder.TGID] = ch.Holder.Comm
	}
	return names
}

// TestTwoNeighbours: beside a busy loop on CPU 0, a hog that never
// stops (`sh`) and one busy 20 ms of every 100 (`perl`), both on CPU 0:
// each is named, by command, and the hog has the larger share.
func TestTwoNeighbours(t *testing.T) {
	p := open(t)
	interfere.Exclusive(t)
	svc := interfere.Busy(t, interfere.Pinned(0)...)
	hog := interfere.Busy(t, interfere.Pinned(0)...)
	duty := interfere.Duty(t, 20*time.Millisecond, 80*time.Millisecond, interfere.Pinned(0)...)
	time.Sleep(200 * time.Millisecond)
	c := measure(t, p, map[int]Watch{svc.Process.Pid: {}}, 3*time.Second)
	by, names := behind(c), holderNames(c)
	t.Logf("behind `sh` %v, behind `perl` %v, in all %v", by[hog.Process.Pid], by[duty.Process.Pid], total(c))
	if names[hog.Process.Pid] != "sh" || names[duty.Process.Pid] != "perl" {
		t.Errorf("named the hog %q and the duty-cycle hog %q, want sh and perl", names[hog.Process.Pid], names[duty.Process.Pid])
	}
	if by[duty.Process.Pid] <= 0 || by[hog.Process.Pid] <= by[duty.Process.Pid] {
		t.Errorf("waited %v behind the hog and %v behind the duty-cycle one; want both, the hog's larger", by[hog.Process.Pid], by[duty.Process.Pid])
	}
}

// TestShortLived: a burst of short-lived processes on the busy loop's
// CPU, each a `perl` that burns a few milliseconds and exits, is named
// by its command, with many pids, and its parent (the burst's shell),
// though every one is gone before the probe is read.
func TestShortLived(t *testing.T) {
	p := open(t)
	interfere.Exclusive(t)
	svc := interfere.Busy(t, interfere.Pinned(0)...)
	if err := p.Watch(map[int]Watch{svc.Process.Pid: {}}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Read(); err != nil {
		t.Fatal(err)
	}
	burst := exec.CommandContext(t.Context(), "taskset", "-c", "0", "sh", "-c",
		`for i in $(seq 60); do perl -e '1 for 1..100000'; done`)
	if err := burst.Run(); err != nil {
		t.Fatalf("the burst: %v", err)
	}
	c, err := p.Read()
	if err != nil {
		t.Fatal(err)
	}
	var (
		waited time.Duration
		pids   []int
	)
	for _, ch := range c.Charges {
		if ch.Holder.Kind == Other && ch.Holder.Comm == "perl" {
			waited += ch.Wait
			pids = append(pids, ch.Holder.TGID)
			if ch.Holder.Ancestors[0] != burst.Process.Pid {
				t.Errorf("perl pid %d descended from %v, want the burst's shell (pid %d) first", ch.Holder.TGID, ch.Holder.Ancestors, burst.Process.Pid)
			}
		}
	}
	// The burst's CPU time, its perls' included (the shell waited for
	// them): the busy loop, always runnable on the same CPU, waits while
	// a perl runs, so most of it is wait behind perl (96 % here).
	burstCPU := burst.ProcessState.UserTime() + burst.ProcessState.SystemTime()
	t.Logf("waited %v behind %d `perl` processes, %v in all; the burst used %v of CPU", waited, len(pids), total(c), burstCPU)
	// Nine in ten: every one of 28 runs here, on a busy machine, named all 60.
	if len(pids) < 60*9/10 {
		t.Errorf("waited behind %d processes named perl, want most of the 60 (54 or more)", len(pids))
	}
	if waited < burstCPU*3/4 {
		t.Errorf("waited %v behind perl, want most (3/4 or more) of the %v of CPU the burst used on the loop's CPU", waited, burstCPU)
	}
	for _, pid := range pids {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); strings.TrimSpace(string(comm)) == "perl" {
				t.Errorf("perl pid %d still runs: not short-lived", pid)
			}
		}
	}
}

// TestTruth: the probe's run delay of the watched threads agrees with
// schedstat's, tick by tick, within 5 % (or 1 ms a tick), for threads
// that sleep, wake, are preempted and move between CPUs: four shell loops
// unpinned, two of them sleeping a few milliseconds at a time, beside a
// hog. And the charges, which run as the waits go, add up to the same
// over the whole, within 5 %.
func TestTruth(t *testing.T) {
	p := open(t)
	interfere.Exclusive(t)
	interfere.Busy(t)
	var pids []int
	watch := map[int]Watch{}
	for i := range 4 {
		var cmd *exec.Cmd
		if i%2 == 0 {
			cmd = interfere.Busy(t)
		} else {
			cmd = interfere.Duty(t, 10*time.Millisecond, 3*time.Millisecond)
		}
		pids = append(pids, cmd.Process.Pid)
		watch[cmd.Process.Pid] = Watch{Group: i % 2}
	}
	if err := p.Watch(watch); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	// The probe's ended waits are read just before and just after
	// schedstat's: however long this test waits for a CPU between the
	// reads, schedstat's figure at its moment lies between the two.
	type reading struct{ before, sched, after time.Duration }
	read := func() reading {
		b, err := p.Waited()
		if err != nil {
			t.Fatal(err)
		}
		d := runDelay(t, pids)
		a, err := p.Waited()
		if err != nil {
			t.Fatal(err)
		}
		return reading{b[0] + b[1], d, a[0] + a[1]}
	}
	if _, err := p.Read(); err != nil {
		t.Fatal(err)
	}
	prev := read()
	var charged, schedstat time.Duration
	const tick = 500 * time.Millisecond
	for i := range 6 {
		time.Sleep(tick)
		cur := read()
		c, err := p.Read()
		if err != nil {
			t.Fatal(err)
		}
		want := cur.sched - prev.sched
		lo, hi := cur.before-prev.after, cur.after-prev.before
		charged, schedstat = charged+total(c), schedstat+want
		tolerance := max(want/20, time.Millisecond)
		t.Logf("tick %d: run delay %v to %v by the probe (%v on its own clock), %v by schedstat; charged %v; %d switches (%d not traced), %d lost, %d anomalies", i, lo, hi, c.Timed[0]+c.Timed[1], want, total(c), c.Switches, c.Unseen, c.Lost, c.Anomalies)
		if want < lo-tolerance || want > hi+tolerance {
			t.Errorf("tick %d: schedstat's run delay %v is more than %v outside the probe's %v to %v", i, want, tolerance, lo, hi)
		}
		if c.Anomalies > 0 || c.Lost > 0 {
			t.Errorf("tick %d: %d events lost, %d anomalies", i, c.Lost, c.Anomalies)
		}
		prev = cur
	}
	if math.Abs(float64(charged-schedstat)) > 0.05*float64(schedstat) {
		t.Errorf("charged %v in all, schedstat %v: more than 5%% apart", charged, schedstat)
	}
}

// runDelay sums the run delay of every thread of pids
// (/proc/<pid>/task/<tid>/schedstat, its second field, in ns).
func runDelay(t *testing.T, pids []int) time.Duration {
	t.Helper()
	var sum time.Duration
	for _, pid := range pids {
		tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
		if err != nil || len(tasks) == 0 {
			t.Fatalf("threads of pid %d: %v", pid, err)
		}
		for _, f := range tasks {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			fields := strings.Fields(string(b))
			ns, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				t.Fatalf("%s: %q: %v", f, b, err)
			}
			sum += time.Duration(ns)
		}
	}
	return sum
}

// TestOpenUnavailable: Open's errors say what is missing and wrap
// ErrUnavailable; as root with BTF it loads.
func TestOpenUnavailable(t *testing.T) {
	p, err := Open()
	if err == nil {
		p.Close()
		return
	}
	if !errors.Is(err, ErrUnavailable) {
		t.Errorf("Open: %v, want an error wrapping ErrUnavailable", err)
	}
	if Expected() == nil {
		t.Errorf("Open as root on a kernel with BTF: %v", err)
	}
}

// BenchmarkOpen is loading and attaching the program, and detaching it:
// once a run. Most of it is parsing the kernel's BTF to relocate the
// program.
func BenchmarkOpen(b *testing.B) {
	if err := Expected(); err != nil {
		testservice.Unable(b, "%v", err)
	}
	for b.Loop() {
		p, err := Open()
		if err != nil {
			b.Fatal(err)
		}
		p.Close()
	}
}

// BenchmarkTick is what the sampler asks of the probe once a tick: its
// ended waits twice, its counts, and the watched processes (here this
// process and its parent), on a live host.
func BenchmarkTick(b *testing.B) {
	if err := Expected(); err != nil {
		testservice.Unable(b, "%v", err)
	}
	p, err := Open()
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	watch := map[int]Watch{os.Getpid(): {Group: 1}, os.Getppid(): {Group: 0, Inherit: true}}
	for b.Loop() {
		for range 2 {
			if _, err := p.Waited(); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := p.Read(); err != nil {
			b.Fatal(err)
		}
		if err := p.Watch(watch); err != nil {
			b.Fatal(err)
		}
	}
}
