package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// cpuWatch reads /proc/stat (and, given a pid, that process's CPU time)
// every 100 ms while a test measures, by itself, not through tare's host
// package. The tests that run an attempt again when the hypervisor stole
// CPU or a neighbour took it decide from this reading, not from tare's:
// tare's reading is what they test, and a misreading of it must fail them,
// not make them try again.
type cpuWatch struct {
	pid     int
	stop    chan struct{}
	done    chan struct{}
	samples []cpuSample // written by the watching goroutine until done
	err     error
}

// cpuSample is one reading: jiffies of each line of /proc/stat ("cpu" for
// all CPUs, "cpu0", "cpu1", …) and the watched process's utime+stime.
type cpuSample struct {
	at   time.Time
	cpus map[string]cpuJiffies
	proc int64
}

// cpuJiffies are a CPU's times: total, idle (iowait included) and steal.
type cpuJiffies struct{ total, idle, steal int64 }

// watchCPU starts reading; pid 0 watches no process. Stop ends it.
func watchCPU(t *testing.T, pid int) *cpuWatch {
	t.Helper()
	w := &cpuWatch{pid: pid, stop: make(chan struct{}), done: make(chan struct{})}
	first, err := readCPU(pid)
	if err != nil {
		t.Fatalf("the test's own reading of /proc: %v", err)
	}
	w.samples = []cpuSample{first}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
			s, err := readCPU(pid)
			if err != nil {
				w.err = err
				return
			}
			w.samples = append(w.samples, s)
		}
	}()
	t.Cleanup(func() { w.Stop() })
	return w
}

// Stop ends the reading (once: later calls do nothing) and returns its
// error, if a read failed.
func (w *cpuWatch) Stop() error {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
	return w.err
}

// readCPU reads /proc/stat and pid's /proc/<pid>/stat.
func readCPU(pid int) (cpuSample, error) {
	s := cpuSample{at: time.Now(), cpus: map[string]cpuJiffies{}}
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return s, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 9 || !strings.HasPrefix(f[0], "cpu") {
			continue
		}
		// user nice system idle iowait irq softirq steal (guest is
		// inside user already)
		var v [8]int64
		for i := range v {
			if v[i], err = strconv.ParseInt(f[i+1], 10, 64); err != nil {
				return s, fmt.Errorf("/proc/stat %q: %w", line, err)
			}
		}
		j := cpuJiffies{idle: v[3] + v[4], steal: v[7]}
		for _, x := range v {
			j.total += x
		}
		s.cpus[f[0]] = j
	}
	if pid != 0 {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return s, err
		}
		// pid (comm) state ppid … utime stime: utime is the 14th field,
		// the 12th after the comm, which may hold spaces.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) < 13 {
			return s, fmt.Errorf("/proc/%d/stat: %q", pid, b)
		}
		for _, x := range f[11:13] {
			n, err := strconv.ParseInt(x, 10, 64)
			if err != nil {
				return s, fmt.Errorf("/proc/%d/stat: %w", pid, err)
			}
			s.proc += n
		}
	}
	return s, nil
}

// share is, in percent of cpu's jiffies between samples i and j, its
// steal (notProc false), or its steal and busy time not spent by the
// watched process (notProc true): what the hypervisor and everything else
// took of that CPU. -1 when no jiffy passed.
func (w *cpuWatch) share(cpu string, i, j int, notProc bool) float64 {
	a, b := w.samples[i].cpus[cpu], w.samples[j].cpus[cpu]
	total := b.total - a.total
	if total <= 0 {
		return -1
	}
	taken := b.steal - a.steal
	if notProc {
		taken = total - (b.idle - a.idle) - (w.samples[j].proc - w.samples[i].proc)
	}
	return 100 * float64(taken) / float64(total)
}

// cpuTaken sums up a watch for one question: how much of cpu the
// hypervisor (and, with notProc, everything but the watched process) took.
type cpuTaken struct {
	Mean      float64 // over the whole watch
	MaxSecond float64 // the worst 1 s window, starting at any sample
	MaxCPU    float64 // the worst CPU's mean (cpu "cpu" only)
	// MaxCPUSecond is the worst 1 s window of the worst CPU (cpu "cpu"
	// only): a burst on one CPU, as tare's stolen ticks are.
	MaxCPUSecond float64
	SecondsPct   float64 // share of the watch's consecutive seconds above limit
	cpu          string
	limit        float64
}

func (c cpuTaken) String() string {
	s := fmt.Sprintf("%s: mean %.1f%%, worst second %.1f%%, %.0f%% of seconds above %g%%", c.cpu, c.Mean, c.MaxSecond, c.SecondsPct, c.limit)
	if c.cpu == "cpu" {
		s += fmt.Sprintf(", worst CPU's mean %.1f%%, its worst second %.1f%%", c.MaxCPU, c.MaxCPUSecond)
	}
	return s
}

// taken reads the watch (stopped) for cpu against limit, in percent.
func (w *cpuWatch) taken(cpu string, notProc bool, limit float64) cpuTaken {
	c := cpuTaken{cpu: cpu, limit: limit}
	n := len(w.samples)
	if n < 2 {
		return c
	}
	c.Mean = max(0, w.share(cpu, 0, n-1, notProc))
	// second(i) is the first sample at least a second after sample i.
	second := func(i int) int {
		j := i + 1
		for j < n && w.samples[j].at.Sub(w.samples[i].at) < time.Second {
			j++
		}
		return j
	}
	for i := 0; i < n-1; i++ {
		if j := second(i); j < n {
			c.MaxSecond = max(c.MaxSecond, w.share(cpu, i, j, notProc))
		}
	}
	seconds, above := 0, 0
	for i := 0; i < n-1; {
		j := second(i)
		if j >= n {
			break
		}
		seconds++
		if w.share(cpu, i, j, notProc) > limit {
			above++
		}
		i = j
	}
	if seconds > 0 {
		c.SecondsPct = 100 * float64(above) / float64(seconds)
	}
	if cpu == "cpu" {
		for name := range w.samples[0].cpus {
			if name != "cpu" {
				c.MaxCPU = max(c.MaxCPU, w.share(name, 0, n-1, notProc))
				for i := 0; i < n-1; i++ {
					if j := second(i); j < n {
						c.MaxCPUSecond = max(c.MaxCPUSecond, w.share(name, i, j, notProc))
					}
				}
			}
		}
	}
	return c
}

// TestCPUWatchTaken: the test's own reading of the CPU, on samples of
// two CPUs every 500 ms: cpu1 steals 30 % in the third second only, and a
// watched process takes half of cpu1 throughout.
func TestCPUWatchTaken(t *testing.T) {
	w := &cpuWatch{}
	start := time.Now()
	var cpu0, cpu1, proc int64
	var steal1 int64
	for i := range 9 { // 4 s
		if i > 0 {
			cpu0 += 50
			cpu1 += 50
			proc += 25
			if i == 5 || i == 6 {
				steal1 += 15
			}
		}
		// cpu1: the process's half busy, the rest idle but for steal.
		w.samples = append(w.samples, cpuSample{at: start.Add(time.Duration(i) * 500 * time.Millisecond), proc: proc, cpus: map[string]cpuJiffies{
			"cpu":  {total: cpu0 + cpu1, idle: cpu0 + cpu1 - proc - steal1, steal: steal1},
			"cpu0": {total: cpu0, idle: cpu0},
			"cpu1": {total: cpu1, idle: cpu1 - proc - steal1, steal: steal1},
		}})
	}
	check := func(got cpuTaken, mean, maxSecond, maxCPU, secondsPct float64) {
		t.Helper()
		if got.Mean != mean || got.MaxSecond != maxSecond || got.MaxCPU != maxCPU || got.SecondsPct != secondsPct {
			t.Errorf("%s; want mean %g, worst second %g, worst CPU %g, %g%% of seconds", got, mean, maxSecond, maxCPU, secondsPct)
		}
	}
	// 4 s of 100 jiffies a second on each CPU; 30 stolen from cpu1 in
	// the third second (one of four, 25 %).
	check(w.taken("cpu", false, 10), 3.75, 15, 7.5, 25) // 30 of 800; 30 of 200 that second; cpu1 30 of 400
	if got := w.taken("cpu", false, 10).MaxCPUSecond; got != 30 {
		t.Errorf("worst CPU's worst second %g%%, want 30%% (cpu1's third second)", got)
	}
	check(w.taken("cpu1", false, 10), 7.5, 30, 0, 25) // 30 of 400; 30 of 100
	check(w.taken("cpu1", true, 10), 7.5, 30, 0, 25)  // the process's half of cpu1 is not taken from it
}
