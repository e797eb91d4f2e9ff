// Package scenario is the verdict's scenario matrix: the situations a user
// meets first, made for real on this machine (a service on loopback, CPU
// hogs beside it, a CPU quota on its cgroup) and the verdict tare must give
// on each. The matrix test in cmd/tare and bench/verdict-matrix both run it.
//
// Every scenario is bounded in time: a few seconds of load, hogs that die
// with their context, a cgroup removed afterwards. The service is a real
// `tare model` process whose every token burns CPU: 8 tokens of 1 ms make a
// request cost 8 ms of CPU, so two vCPUs serve about 250 a second.
package scenario

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/interfere"
	"github.com/tare-dev/tare/internal/testkit/testservice"
	"github.com/tare-dev/tare/modelsim"
)

// Scenario is one situation and the verdict it must get.
type Scenario struct {
	Name string
	// Service is the tare model flags of the service under test; nil for
	// the demo, which starts its own.
	Service []string
	// Args are the tare arguments: run's load flags (the service's URL is
	// added), or the demo's.
	Args []string
	// Hogs is how many CPU hogs run beside the service, started before the
	// load (HogsAfter: that long after it starts).
	Hogs      int
	HogsAfter time.Duration
	// QuotaPct puts the service in a cgroup with that CPU quota, percent
	// of one CPU; 0 for none.
	QuotaPct int
	// Deploy starts a service of real software instead of Service (a
	// proxy, an app server's pool, a database), loaded through --url.
	Deploy Deployment
	// Graph are the command names the system under test's graph must
	// hold, in its order (what was found first, then what it called).
	Graph []string
	// CPUs confines tare, and all it starts, to these CPUs (taskset -c):
	// "0" is the seed's one vCPU. Empty: no pinning.
	CPUs string

	Want     tare.Level
	Fired    []string // signals that must fire
	NotFired []string // signals that must not
	Named    string   // a process the neighbours signal must name
	WhyCode  bool     // a failed SLO must be blamed on the code

	// Pending says why tare cannot yet promise this scenario's verdict
	// every time, and what will: bench/verdict-matrix runs it and counts
	// it apart; CI's gate (cmd/tare's TestVerdictMatrix) leaves it out,
	// since a gate must be right every time. Empty for the gate's own.
	Pending string
}

// service is a request of 8 ms of CPU: 8 tokens of 1 ms, no spread.
var service = []string{"--token-cost", "1ms", "--mean-tokens", "8", "--token-spread", "0"}

// Matrix returns the scenarios, in the order they run.
func Matrix() []Scenario {
	light := []string{"--rate", "40/s", "--duration", "6s"}
	heavy := []string{"--rate", "400/s", "--duration", "6s", "--slo", "p95<=100ms", "--max-inflight", "2000"}
	return []Scenario{
		{Name: "quiet, light service", Service: service, Args: light,
			Want: tare.Clean, NotFired: []string{"saturation", "neighbours", "generator_starved"}},
		{Name: "quiet, service offered more than its CPUs serve", Service: service, Args: heavy,
			Want: tare.Clean, Fired: []string{"saturation"}, NotFired: []string{"neighbours"}, WhyCode: true},
		{Name: "light service beside CPU hogs", Service: service, Args: light, Hogs: 2,
			Want: tare.Polluted, Fired: []string{"neighbours"}, Named: "sh"},
		{Name: "light service in a cgroup with a 20% CPU quota", Service: service, Args: []string{"--rate", "60/s", "--duration", "6s"}, QuotaPct: 20,
			Want: tare.Polluted, Fired: []string{"throttling"}},
		{Name: "saturated service beside CPU hogs", Service: service, Args: heavy, Hogs: 2,
			Want: tare.Polluted, Fired: []string{"neighbours"}, Named: "sh"},
		{Name: "quiet, nginx in front of gunicorn over TCP", Deploy: NginxGunicorn(false, 0), Args: light,
			Want: tare.Clean, NotFired: []string{"neighbours"}, Graph: []string{"nginx", "gunicorn"}},
		// The pool recycled every 60 requests: workers that come and go
		// mid-run must stay in the graph, and neighbours are named still.
		{Name: "nginx in front of gunicorn over TCP, beside CPU hogs", Deploy: NginxGunicorn(false, 60), Args: light, Hogs: 2,
			Want: tare.Polluted, Fired: []string{"neighbours"}, Named: "sh", Graph: []string{"nginx", "gunicorn"}},
		{Name: "quiet, nginx in front of gunicorn over a Unix socket", Deploy: NginxGunicorn(true, 0), Args: light,
			Want: tare.Clean, NotFired: []string{"neighbours"}, Graph: []string{"nginx", "gunicorn"}},
		// A recycled worker is the code's own spike (a new process warms
		// up while requests wait for it), which the tick-level
		// latency_without_queue rule cannot tell from the host's: on a
		// fresh machine it went suspect (p < 0.001). Blame per request
		// (issue 39) judges it by what each slow request overlapped.
		{Name: "quiet, nginx in front of a recycled gunicorn pool over a Unix socket", Deploy: NginxGunicorn(true, 60), Args: light,
			Want: tare.Clean, NotFired: []string{"neighbours"}, Graph: []string{"nginx", "gunicorn"},
			Pending: "a recycled worker's warm-up is judged by the tick rule, which may call it the host's: blame per request (issue 39) makes it the code's"},
		{Name: "quiet, an app and its PostgreSQL on a Unix socket", Deploy: GunicornPostgres(), Args: light,
			Want: tare.Clean, NotFired: []string{"neighbours"}, Graph: []string{"gunicorn", "postgres"}},
		{Name: "an app and its PostgreSQL on a Unix socket, beside CPU hogs", Deploy: GunicornPostgres(), Args: light, Hogs: 2,
			Want: tare.Polluted, Fired: []string{"neighbours"}, Named: "sh", Graph: []string{"gunicorn", "postgres"}},
		{Name: "quiet, gunicorn in a network namespace behind a userland proxy", Deploy: GunicornInNetns(1, false), Args: light,
			Want: tare.Clean, NotFired: []string{"neighbours"}, Graph: []string{"socat", "gunicorn"}},
		{Name: "gunicorn in a network namespace behind a userland proxy, beside CPU hogs", Deploy: GunicornInNetns(2, false), Args: light, Hogs: 2,
			Want: tare.Polluted, Fired: []string{"neighbours"}, Named: "sh", Graph: []string{"socat", "gunicorn"}},
		// Each request a connection into the namespace, and a socat child,
		// of its own, each gone within milliseconds: only the kernel's
		// record of the connects shows where they went.
		{Name: "quiet, gunicorn in a network namespace behind a userland proxy, a connection a request", Deploy: GunicornInNetns(5, true), Args: light,
			Want: tare.Clean, NotFired: []string{"neighbours"}, Graph: []string{"socat", "gunicorn"}},
		{Name: "tare demo", Args: []string{"demo", "--jobs", "40", "--rate", "4/s"},
			Want: tare.Clean, NotFired: []string{"neighbours", "generator_starved"}},
		// The demo's hogs name themselves as its own (demo.HogName).
		{Name: "tare demo --neighbour", Args: []string{"demo", "--jobs", "48", "--rate", "4/s", "--neighbour"},
			Want: tare.Polluted, Fired: []string{"neighbours"}, Named: "demo-neighbour"},
		// The seed's setup: the whole demo (tare, its workers, the model)
		// on one vCPU, 120 jobs at 4/s. A tick holds about four jobs of
		// varied lengths: its p95 is its slowest, 2× the median by chance,
		// and jobs that overlap share the CPU.
		{Name: "tare demo on one vCPU", Args: []string{"demo", "--jobs", "120", "--rate", "4/s"}, CPUs: "0",
			Want: tare.Clean, NotFired: []string{"latency_without_queue"}},
		// Latency that really moves with the work flat: every request
		// held 200 ms for 5 s mid-run, at a steady 3/s (0.6 in flight).
		{Name: "quiet HTTP service stalling 200 ms for 5 s", Deploy: Stalling(200*time.Millisecond, 5*time.Second, 5*time.Second),
			Args: []string{"--arrival", "constant", "--rate", "3/s", "--duration", "16s"},
			Want: tare.Suspect, Fired: []string{"latency_without_queue"}, NotFired: []string{"neighbours", "generator_starved"}},
	}
}

// Env is how a scenario runs tare: Tare runs a command of it and returns
// what it printed on stdout (its exit status does not matter here);
// Command makes a tare command to run as a process (the service).
type Env struct {
	Tare    func(ctx context.Context, args ...string) ([]byte, error)
	Command func(ctx context.Context, args ...string) *exec.Cmd
	Stderr  io.Writer // where the service's own messages go
	// CgroupRoot is where cgroups with the cpu controller are made;
	// /sys/fs/cgroup when empty.
	CgroupRoot string
}

// ErrSkip is wrapped by Run's errors about what this machine does not
// allow (not root for a network namespace, no cgroup cpu controller for
// a quota). Any other error, a cgroup that fails as root included, is a
// fault of the scenario.
var ErrSkip = fmt.Errorf("scenario cannot run here")

// ErrMissing is wrapped by Run's errors about a program or service this
// machine lacks that scripts/test installs (nginx, gunicorn, psycopg2, the
// local PostgreSQL, iproute2, socat, taskset, python3); it wraps ErrSkip.
var ErrMissing = fmt.Errorf("%w: it needs what is not installed", ErrSkip)

// SkipUnable ends the test when err says this machine cannot run the
// scenario: for want of a program or service, testservice.Missing; for
// what it does not allow, testservice.Unable. Both skip, saying why,
// and fail under CI, which has them all. Other errors are the caller's.
func SkipUnable(t testing.TB, err error) {
	t.Helper()
	switch {
	case errors.Is(err, ErrMissing):
		testservice.Missing(t, "%v", err)
	case errors.Is(err, ErrSkip):
		testservice.Unable(t, "%v", err)
	}
}

// Run runs one scenario and returns tare's summary of it.
func (e Env) Run(ctx context.Context, sc Scenario) (tare.Summary, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	args := slices.Clone(sc.Args)
	if sc.Service != nil {
		c := e.Command(ctx, append([]string{"model", "--listen", "127.0.0.1:0"}, sc.Service...)...)
		svc, err := modelsim.Start(c, 30*time.Second, e.Stderr)
		if err != nil {
			return tare.Summary{}, err
		}
		defer svc.Stop()
		if sc.QuotaPct > 0 {
			undo, err := quota(e.CgroupRoot, svc.PID, sc.QuotaPct)
			if err != nil {
				return tare.Summary{}, err
			}
			defer undo()
		}
		args = append([]string{"run", "--model", svc.URL, "--max-tokens", "8", "--no-store"}, args...)
	} else if sc.Deploy != nil {
		dir, err := os.MkdirTemp("", "tare-scenario-")
		if err != nil {
			return tare.Summary{}, err
		}
		defer os.RemoveAll(dir)
		url, stop, err := sc.Deploy(ctx, dir)
		if err != nil {
			return tare.Summary{}, err
		}
		defer stop()
		args = append([]string{"run", "--url", url, "--no-store"}, args...)
	} else {
		args = append(args, "--no-store")
	}
	if sc.Hogs > 0 {
		stop := hogs(ctx, sc.Hogs, sc.HogsAfter)
		defer stop()
	}
	args = append(args, "--json", "--quiet")
	var out []byte
	var err error
	if sc.CPUs != "" {
		out, err = e.pinned(ctx, sc.CPUs, args)
	} else {
		out, err = e.Tare(ctx, args...)
	}
	if err != nil {
		return tare.Summary{}, err
	}
	var s tare.Summary
	if err := json.Unmarshal(out, &s); err != nil {
		return tare.Summary{}, fmt.Errorf("tare %s: summary: %w\n%s", strings.Join(args, " "), err, out)
	}
	return s, nil
}

// pinned runs tare args as a process confined to cpus by taskset, and
// returns what it printed on stdout; an exit status other than 2 (usage
// or runtime error) is the verdict's business, not an error.
func (e Env) pinned(ctx context.Context, cpus string, args []string) ([]byte, error) {
	taskset, err := exec.LookPath("taskset")
	if err != nil {
		return nil, fmt.Errorf("%w: taskset is not installed (Debian's util-linux): cannot pin tare to CPUs %s", ErrMissing, cpus)
	}
	c := e.Command(ctx, args...)
	c.Args = append([]string{"taskset", "-c", cpus, c.Path}, c.Args[1:]...)
	c.Path = taskset
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	var exit *exec.ExitError
	if err := c.Run(); err != nil && !(errors.As(err, &exit) && exit.ExitCode() != 2) {
		return nil, fmt.Errorf("taskset -c %s tare %s: %v\n%s", cpus, strings.Join(args, " "), err, errb.String())
	}
	return out.Bytes(), nil
}

// Check returns what is wrong with the verdict on sc; none when it is right.
func Check(sc Scenario, s tare.Summary) []string {
	var wrong []string
	if s.Verdict.Level != sc.Want {
		wrong = append(wrong, fmt.Sprintf("level %s, want %s", s.Verdict.Level, sc.Want))
	}
	fired := map[string]tare.Signal{}
	for _, sig := range s.Verdict.Signals {
		if sig.Fired {
			fired[sig.Name] = sig
		}
	}
	for _, name := range sc.Fired {
		if _, ok := fired[name]; !ok {
			wrong = append(wrong, fmt.Sprintf("signal %s did not fire", name))
		}
	}
	for _, name := range sc.NotFired {
		if sig, ok := fired[name]; ok {
			wrong = append(wrong, fmt.Sprintf("signal %s fired: %s", name, sig.Detail))
		}
	}
	if sc.Named != "" && !strings.Contains(fired["neighbours"].Detail, "`"+sc.Named+"`") {
		wrong = append(wrong, fmt.Sprintf("the neighbours signal does not name `%s`: %q", sc.Named, fired["neighbours"].Detail))
	}
	if len(sc.Graph) > 0 {
		var names []string
		if s.SUT != nil {
			for _, n := range s.SUT.Graph {
				names = append(names, n.Name)
			}
		}
		if !slices.Equal(names, sc.Graph) {
			wrong = append(wrong, fmt.Sprintf("the system under test's graph is %v, want %v", names, sc.Graph))
		}
	}
	if sc.WhyCode && !strings.Contains(strings.Join(s.Verdict.Advice, "\n"), "the problem is the code") {
		wrong = append(wrong, fmt.Sprintf("the failed SLO is not blamed on the code: %q", s.Verdict.Advice))
	}
	return wrong
}

// hogs starts n CPU-bound shell loops after a delay, as an unrelated
// neighbour would run, and returns the function that stops them.
func hogs(ctx context.Context, n int, after time.Duration) (stop func()) {
	ctx, cancel := context.WithTimeout(ctx, after+2*time.Minute)
	var started []*exec.Cmd
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-time.After(after):
		case <-ctx.Done():
			return
		}
		for range n {
			h := exec.CommandContext(ctx, "sh", "-c", "while :; do :; done")
			if h.Start() == nil {
				started = append(started, h)
			}
		}
	}()
	if after == 0 {
		<-done
		time.Sleep(500 * time.Millisecond) // let them be running when the load starts
	}
	return func() {
		cancel()
		<-done
		for _, h := range started {
			h.Wait()
		}
	}
}

// quota moves pid into a new cgroup allowed pct % of one CPU, and returns
// the function that moves it back to the parent and removes the cgroup.
// Only what the machine does not allow (not root, no cpu controller) is
// an ErrSkip: a cgroup that fails as root is the scenario's failure.
func quota(root string, pid, pct int) (undo func(), err error) {
	if root == "" {
		root = "/sys/fs/cgroup"
	}
	dir, remove, err := interfere.MakeQuota(root, pct*1000, 100000)
	switch {
	case errors.Is(err, interfere.ErrNotAllowed):
		return nil, fmt.Errorf("%w: %w", ErrSkip, err)
	case err != nil:
		return nil, fmt.Errorf("the cgroup of the service's quota: %w", err)
	}
	back := func() {
		os.WriteFile(filepath.Join(filepath.Dir(dir), "cgroup.procs"), []byte(strconv.Itoa(pid)), 0)
		remove()
	}
	// cgroup.procs moves the whole process, every thread of the service.
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
		back()
		return nil, fmt.Errorf("move pid %d into %s: %w", pid, dir, err)
	}
	return back, nil
}
