package scenario

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/interfere"
	"github.com/tare-dev/tare/internal/testkit/testservice"
	"github.com/tare-dev/tare/judge"
)

// TestSkipUnableHelper is not a test: TestSkipUnable runs it in a process
// of its own, where it calls SkipUnable on the error TARE_TEST_UNABLE
// names.
func TestSkipUnableHelper(t *testing.T) {
	err := map[string]error{
		"missing":     fmt.Errorf("%w: frobnicator is not installed", ErrMissing),
		"not allowed": fmt.Errorf("%w: frobnicating needs root", ErrSkip),
		"fault":       errors.New("the frobnicator broke"),
	}[os.Getenv("TARE_TEST_UNABLE")]
	if err == nil {
		t.Skip("run by TestSkipUnable")
	}
	SkipUnable(t, err)
	t.Log("went on")
}

// TestSkipUnable: what the machine lacks or does not allow skips the
// scenario, saying why, except under CI, where it fails; any other error
// is left to the caller.
func TestSkipUnable(t *testing.T) {
	for _, tt := range []struct {
		err, ci string
		want    string
	}{
		{"missing", "", "--- SKIP"},
		{"missing", "true", "--- FAIL"},
		{"not allowed", "", "--- SKIP"},
		{"not allowed", "true", "--- FAIL"},
		{"fault", "", "went on"},
		{"fault", "true", "went on"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSkipUnableHelper$", "-test.v")
		cmd.Env = append(os.Environ(), "TARE_TEST_UNABLE="+tt.err, "CI="+tt.ci)
		out, _ := cmd.CombinedOutput()
		if !strings.Contains(string(out), tt.want) {
			t.Errorf("%s, CI=%q: want %q:\n%s", tt.err, tt.ci, tt.want, out)
		}
	}
}

// TestMissingPrograms: without taskset or python3, the scenarios that pin
// tare or stall a service are missing what scripts/test installs, which
// fails them under CI, not merely what the machine does not allow.
func TestMissingPrograms(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	ctx := context.Background()
	_, pinErr := Env{}.pinned(ctx, "0", []string{"run"})
	_, _, _, stallErr := startStalling(ctx, time.Second, 0, time.Second)
	for name, err := range map[string]error{"taskset": pinErr, "python3": stallErr} {
		if !errors.Is(err, ErrMissing) || !strings.Contains(err.Error(), name) {
			t.Errorf("without %s: %v, want an error wrapping ErrMissing naming it", name, err)
		}
	}
}

// TestQuota: a cgroup the machine does not allow is an ErrSkip; a quota
// the kernel refuses as root (0 µs, below its 1 ms minimum) is the
// scenario's failure, not a skip.
func TestQuota(t *testing.T) {
	if _, err := quota(t.TempDir(), os.Getpid(), 20); !errors.Is(err, ErrSkip) || !errors.Is(err, interfere.ErrNotAllowed) {
		t.Errorf("quota under a root with no cpu controller: %v, want an ErrSkip", err)
	}
	_, remove, err := interfere.MakeQuota("/sys/fs/cgroup", 20000, 100000)
	if err != nil {
		testservice.Unable(t, "the live case: %v", err)
	}
	if err := remove(); err != nil {
		t.Fatal(err)
	}
	undo, err := quota("", os.Getpid(), 0)
	if err == nil {
		undo()
		t.Fatal("quota of 0% was taken")
	}
	if errors.Is(err, ErrSkip) {
		t.Errorf("a quota the kernel refuses, as root: %v, want an error that is not ErrSkip", err)
	}
}

// TestCheck: the level a scenario judged by its tail wants follows the
// ratio of its p99 to the quiet run's; a neighbour must be named where
// the verdict is polluted, and a finding said where one is wanted.
func TestCheck(t *testing.T) {
	summary := func(level tare.Level, p99 float64, details ...string) *tare.Summary {
		s := &tare.Summary{Latency: tare.LatencyMS{P99: tare.Float(p99)}}
		s.Verdict.Level = level
		for _, d := range details {
			s.Verdict.Signals = append(s.Verdict.Signals, tare.Signal{Name: "tail", Fired: true, Detail: d})
		}
		return s
	}
	// measured gives s per-request blame that moved its p99 by moved.
	measured := func(s *tare.Summary, moved float64) *tare.Summary {
		s.Tail = &tare.Tail{Measured: &tare.PercentilesMS{P99: s.Latency.P99}, Unwaited: tare.PercentilesMS{P99: tare.Float(*s.Latency.P99 / moved)},
			Slowest: []tare.TailSlice{{Pct: 1}}}
		return s
	}
	batch := Scenario{Want: tare.Polluted, Named: "nightly-batch", Tail: &TailRule{Polluted: 1.5, Clean: 1.2}}
	// own is the hogs' effect on the p99 (over 1 ms without them), with
	// the interval the bootstrap gave it.
	own := func(ratio, lo, hi float64) *OwnTail {
		return &OwnTail{P99: ratio, Without: 1, Lo: lo, Hi: hi}
	}
	moved, left, between := own(2.4, 2, 2.8), own(1.1, 1, 1.15), own(1.3, 1.25, 1.4)
	named := "the p99 tail: 31 of 36 requests waited behind `nightly-batch` (pids 12, 13)"
	for _, tt := range []struct {
		name  string
		sc    Scenario
		o     Outcome
		wrong []string // what the errors must say, one each; none: right
	}{
		{"moved the tail, polluted and named", batch, Outcome{Summary: *summary(tare.Polluted, 2.4, named), Own: moved}, nil},
		{"moved the tail, clean", batch, Outcome{Summary: *summary(tare.Clean, 2.4), Own: moved},
			[]string{"level clean, want polluted (p99 2.40 ms, 2.40× (95 %: 2.00-2.80×) that of the run's own requests without the hogs, 1.00 ms)"}},
		{"moved the tail, polluted by someone else", batch, Outcome{Summary: *summary(tare.Polluted, 2.4, "behind `sh`"), Own: moved}, []string{"no signal that fired names `nightly-batch`"}},
		{"left the tail, clean", batch, Outcome{Summary: *summary(tare.Clean, 1.1), Own: left}, nil},
		{"left the tail, polluted", batch, Outcome{Summary: *summary(tare.Polluted, 1.1, named), Own: left}, []string{"level polluted, want clean"}},
		{"between, clean", batch, Outcome{Summary: *summary(tare.Clean, 1.3), Own: between}, nil},
		{"between, polluted and named", batch, Outcome{Summary: *summary(tare.Polluted, 1.3, named), Own: between}, nil},
		{"between, suspect", batch, Outcome{Summary: *summary(tare.Suspect, 1.3), Own: between}, []string{"level suspect, want clean or polluted"}},
		{"no measure without the hogs", batch, Outcome{Summary: *summary(tare.Clean, 1.1)}, []string{"no p99"}},
		// Judged at both ends of the interval: what one end wants and
		// the other does not is not wanted for sure.
		{"moved past the edge, not surely, clean", batch, Outcome{Summary: *summary(tare.Clean, 1.6), Own: own(1.6, 1.4, 1.9)}, nil},
		{"left below the edge, not surely, polluted", batch, Outcome{Summary: *summary(tare.Polluted, 1.15, named), Own: own(1.15, 1.05, 1.25)}, nil},
		{"moved, surely, at its low end", batch, Outcome{Summary: *summary(tare.Clean, 1.7), Own: own(1.7, 1.5, 1.9)}, []string{"level clean, want polluted"}},
		// tare's own measure of the move, against the run's, at the tail
		// signal's factor (×1.3).
		{"the tail's move within the run's", batch, Outcome{Summary: *measured(summary(tare.Polluted, 2.4, named), 2.2), Own: moved}, nil},
		{"the tail's move beyond the run's, both past the factor", batch, Outcome{Summary: *measured(summary(tare.Polluted, 2.4, named), 3.4), Own: moved}, nil},
		{"the tail's move past the factor, the run's surely not", batch, Outcome{Summary: *measured(summary(tare.Clean, 1.1), 1.35), Own: left},
			[]string{"tare's tail says the outside waits moved the p99 ×1.35, against its factor ×1.30; the run's own requests without the hogs say ×1.10 (95 %: 1.00-1.15×)"}},
		{"the tail's move short of the factor, the run's surely past it", batch, Outcome{Summary: *measured(summary(tare.Polluted, 2.4, named), 1.2), Own: moved}, []string{"moved the p99 ×1.20"}},
		{"the tail's move short of the factor, the run's maybe past it", batch, Outcome{Summary: *measured(summary(tare.Clean, 1.3), 1.05), Own: between}, nil},
		{"a finding said", Scenario{Want: tare.Clean, Finding: "code's own"}, Outcome{Summary: *summary(tare.Clean, 9, "the slow ticks 4, 7 overlapped nothing outside: the code's own pauses")}, nil},
		{"a finding not said", Scenario{Want: tare.Clean, Finding: "code's own"}, Outcome{Summary: *summary(tare.Clean, 9)}, []string{`the verdict does not say "code's own"`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			wrong := Check(tt.sc, tt.o)
			if len(wrong) != len(tt.wrong) {
				t.Fatalf("Check: %q, want %d errors saying %q", wrong, len(tt.wrong), tt.wrong)
			}
			for i, w := range tt.wrong {
				if !strings.Contains(wrong[i], w) {
					t.Errorf("Check: %q, want %q", wrong[i], w)
				}
			}
		})
	}
}

// TestHogsNamed: the hogs run under the name and at the nice level the
// scenario gives them, as a batch job does, and stop with the function
// that started them.
func TestHogsNamed(t *testing.T) {
	interfere.Exclusive(t)
	const name = "tare-test-hog"
	stop, spans, err := hogs(t.Context(), Scenario{Hogs: 2, HogName: name, HogNice: 19})
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, f := range procsNamed(t, name) {
		found = append(found, f[16]) // nice, field 19 of stat
	}
	if spans.startedAt().IsZero() {
		t.Error("the hogs run, and say they never started")
	}
	stop()
	if len(found) != 2 || found[0] != "19" || found[1] != "19" {
		t.Errorf("processes named %s at nice %v, want two at 19", name, found)
	}
	if left := procsNamed(t, name); len(left) > 0 {
		t.Errorf("%d processes named %s left after stop", len(left), name)
	}
}

// TestHogsStopAndContinue: hogs that run every other period are stopped
// and continued, and the record of when they ran says so.
func TestHogsStopAndContinue(t *testing.T) {
	interfere.Exclusive(t)
	const name, every = "tare-test-hog", 200 * time.Millisecond
	stop, spans, err := hogs(t.Context(), Scenario{Hogs: 1, HogName: name, HogsEvery: every})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	states := map[string]bool{}
	for end := time.Now().Add(10 * every); time.Now().Before(end); time.Sleep(every / 10) {
		for _, f := range procsNamed(t, name) {
			states[f[0]] = true // state, field 3 of stat
		}
	}
	if !states["T"] || !states["R"] {
		t.Errorf("the hog's states seen %v, want it stopped (T) and running (R)", states)
	}
	spans.mu.Lock()
	stopped := slices.Clone(spans.stopped)
	spans.mu.Unlock()
	if len(stopped) < 3 {
		t.Fatalf("stopped periods %v, want one every other %v", stopped, every)
	}
	for i, p := range stopped[:len(stopped)-1] {
		mid := p[0].Add(p[1].Sub(p[0]) / 2)
		if !spans.without(mid) || spans.without(p[0].Add(hogSettle/2)) || spans.without(p[1]) {
			t.Errorf("stopped period %d, %v to %v: without(mid) %v, without(just stopped) %v, without(continued) %v; want true, false, false",
				i, p[0], p[1], spans.without(mid), spans.without(p[0].Add(hogSettle/2)), spans.without(p[1]))
		}
	}
	if !spans.without(spans.startedAt().Add(-time.Second)) {
		t.Error("before the hogs started: not without them")
	}
}

// procsNamed is the fields of /proc/PID/stat after the command name of
// each process whose command name is name: state first.
func procsNamed(t *testing.T, name string) [][]string {
	t.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	var procs [][]string
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // gone
		}
		comm, rest, ok := strings.Cut(string(b), ") ")
		if !ok || !strings.HasSuffix(comm, "("+name) {
			continue
		}
		if f := strings.Fields(rest); len(f) > 16 {
			procs = append(procs, f)
		}
	}
	return procs
}

// TestPlainAnswersAtOnce: the plain Python service answers a request on
// a kept-alive connection about as soon as a Go server on loopback does,
// not a delayed ACK later (its headers and body are two writes, and
// Nagle's algorithm held the second for the client's ACK: a median of
// 44 ms a request). A median of 40 requests, against the Go server's
// taken the same way.
func TestPlainAnswersAtOnce(t *testing.T) {
	url, stop, err := Plain()(t.Context(), t.TempDir())
	SkipUnable(t, err)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	gosrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") }))
	defer gosrv.Close()
	python, golang := medianGet(t, url), medianGet(t, gosrv.URL)
	if python > 50*golang {
		t.Errorf("the plain service's median request took %v, %.0f× a Go server's %v: want under 50×", python, float64(python)/float64(golang), golang)
	}
}

// medianGet is the median time of 40 GETs of url on one connection.
func medianGet(t *testing.T, url string) time.Duration {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}
	defer client.CloseIdleConnections()
	var took []time.Duration
	for range 40 {
		start := time.Now()
		resp, err := client.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	return took[len(took)/2]
}

// TestPlainBacklog: connections the plain service has not accepted yet,
// while it waits for a CPU (here: stopped), wait in a backlog deep
// enough for a burst, not dropped to be retried 1 s later
// (socketserver's default backlog is 5, and a starved service showed
// requests of 1.03 s).
func TestPlainBacklog(t *testing.T) {
	url, pid, stop, err := startStalling(t.Context(), 0, 0, 0)
	SkipUnable(t, err)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(pid, syscall.SIGCONT)
	addr := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/")
	const burst = 40
	refused := make(chan error, burst)
	for range burst {
		go func() {
			c, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
			if err == nil {
				c.Close()
			}
			refused <- err
		}()
	}
	var lost int
	for range burst {
		if <-refused != nil {
			lost++
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d connections to the stopped service were not taken into its backlog within 500 ms", lost, burst)
	}
}

// TestStealMoved: an attempt is the hypervisor's when its bursts of steal
// moved the tail of a run that had to be clean: a quiet run beside any
// scenario, the run itself only in a scenario of a quiet host.
func TestStealMoved(t *testing.T) {
	stolen := func() *tare.Summary {
		return &tare.Summary{
			Latency: tare.LatencyMS{P95: tare.Float(0.85), P99: tare.Float(2.8)},
			Tail: &tare.Tail{Requests: 3600, Sampled: 3600, Stolen: 360,
				Unstolen: tare.PercentilesMS{P95: tare.Float(0.8), P99: tare.Float(1.4)},
				Slowest: []tare.TailSlice{
					{Pct: 1, Requests: 36, P: 1, Stolen: 21, StolenP: 1e-12, StealMS: tare.Float(87)},
					{Pct: 5, Requests: 180, P: 1, StolenP: 1},
				}},
		}
	}
	unmoved := &tare.Summary{Latency: tare.LatencyMS{P99: tare.Float(1)}}
	stealSignal := &tare.Summary{Latency: tare.LatencyMS{P99: tare.Float(1)},
		Verdict: tare.Verdict{Level: tare.Polluted, Signals: []tare.Signal{{Name: "steal", Fired: true}}}}
	quietHost := Scenario{Want: tare.Clean}
	batch := Scenario{Want: tare.Polluted, Tail: &TailRule{Polluted: 1.5, Clean: 1.2}}
	moved, left := &OwnTail{P99: 2.8, Without: 1.4, Lo: 1.8, Hi: 2.2}, &OwnTail{P99: 2.8, Without: 2.7, Lo: 1, Hi: 1.1}
	for _, tt := range []struct {
		name string
		sc   Scenario
		o    Outcome
		want bool
	}{
		{"a quiet host's run", quietHost, Outcome{Summary: *stolen()}, true},
		{"a quiet host's run, not moved", quietHost, Outcome{Summary: *unmoved}, false},
		{"a neighbour's run: polluted is its due", batch, Outcome{Summary: *stolen(), Own: moved}, false},
		// The neighbour moved the p99 1.04× its own without it: clean is
		// wanted, and the steal made it polluted.
		{"a neighbour's run its p99 wants clean", batch, Outcome{Summary: *stolen(), Own: left}, true},
		{"the steal signal on a run that wants clean", batch, Outcome{Summary: *stealSignal, Own: left}, true},
		{"the steal signal on a neighbour's run", batch, Outcome{Summary: *stealSignal, Own: moved}, false},
		{"no measure of the neighbour's effect", batch, Outcome{Summary: *stolen()}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.o.StealMoved(tt.sc, judge.DefaultThresholds()); got != tt.want {
				t.Errorf("StealMoved = %v, want %v", got, tt.want)
			}
		})
	}
}
