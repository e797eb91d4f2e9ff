package main

import (
	"bufio"
	"encoding/json"
	"net"
	"net/url"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/interfere"
	"github.com/tare-dev/tare/internal/testkit/testservice"
	"github.com/tare-dev/tare/judge"
	"github.com/tare-dev/tare/schedprobe"
)

// TestRunForkedBackendsAreTheService: a threaded Python app that opens a
// fresh PostgreSQL connection for every request (testdata/forkdb/app.py),
// loaded past what it serves on this host, makes the server fork a
// backend per request, most of which exit between two readings of the
// process table. A backend is its postmaster's, and the postmaster is in
// the system under test's graph (the app calls it): the wait behind the
// backends is the system under test's, whether the scheduler probe
// measured it or the ledger estimated it, and neither the neighbours
// signal nor the advice names `postgres`. Before, backends forked before
// the probe watched the postmaster (the tick the graph found it, or a
// slow look) and gone by the next reading were charged to another
// process named postgres: "Stop `postgres` (pids …)".
//
// The app connects over TCP with TARE_POSTGRES_DSN, which is how tests
// find PostgreSQL (over /var/run/postgresql the server's peer
// authentication would want the app run as the postgres user); the graph
// follows either.
func TestRunForkedBackendsAreTheService(t *testing.T) {
	testservice.NeedPython(t, "psycopg2")
	dsn := testservice.PostgresDSN()
	if u, err := url.Parse(dsn); err != nil || !isLoopback(u.Hostname()) {
		testservice.Missing(t, "TARE_POSTGRES_DSN %q is not a PostgreSQL on this host's loopback, which the system under test's graph could follow", dsn)
	}
	interfere.Exclusive(t)
	port := startForkDB(t, dsn)
	for _, probe := range []string{"auto", "off"} {
		t.Run("sched-probe "+probe, func(t *testing.T) {
			if probe == "auto" {
				if err := schedprobe.Expected(); err != nil {
					testservice.Unable(t, "%v", err)
				}
			}
			code, stdout, stderr := tareCmd(t, "run", "--url", "http://127.0.0.1:"+port+"/", "--rate", "120/s", "--duration", "8s",
				"--timeout", "5s", "--sched-probe", probe, "--quiet", "--json", "--no-store")
			if code != 0 {
				t.Fatalf("exit %d; stderr %s", code, stderr)
			}
			var s tare.Summary
			if err := json.Unmarshal([]byte(stdout), &s); err != nil {
				t.Fatalf("summary: %v\n%s", err, stdout)
			}
			checkForkedBackends(t, s, probe == "auto")
		})
	}
}

// checkForkedBackends checks that s, of a run against testdata/forkdb,
// counts PostgreSQL's backends as the system under test's.
func checkForkedBackends(t *testing.T, s tare.Summary, measured bool) {
	t.Helper()
	n := signalOf(t, s, judge.SignalNeighbours)
	b := s.Blame
	if b == nil {
		t.Fatalf("no blame; neighbours %s", n.Detail)
	}
	var sut, other float64
	var sutPIDs []int
	for _, w := range b.Behind {
		switch {
		case w.Name == "postgres" && w.Owner == tare.OwnerSUT:
			sut += w.WaitPct
			sutPIDs = append(sutPIDs, w.PIDs...)
		case w.Name == "postgres":
			other += w.WaitPct
		}
	}
	var graph []string
	pg := -1
	if s.SUT != nil {
		for i, node := range s.SUT.Graph {
			graph = append(graph, node.Name+" ("+node.ReachedBy+")")
			if node.Name == "postgres" && strings.HasPrefix(node.ReachedBy, "tcp ") {
				pg = i
			}
		}
	}
	var achieved, offered float64
	if s.Rate.Achieved != nil && s.Rate.Offered != nil {
		achieved, offered = *s.Rate.Achieved, *s.Rate.Offered
	}
	t.Logf("%d requests (%d ok), %.1f/s of %.1f/s; %s blame: waited %.1f%% of a CPU, behind postgres as the system under test %.1f%% (%d pids), as another %.1f%%; graph %v; %s: %s",
		s.Requests.Total, s.Requests.OK, achieved, offered, b.Source, b.WaitPct, sut, len(sutPIDs), other, graph, s.Verdict.Level, n.Detail)
	if want := map[bool]string{true: tare.BlameMeasured, false: tare.BlameEstimated}[measured]; b.Source != want {
		t.Errorf("blame %s, want %s", b.Source, want)
	}
	if pg < 0 {
		t.Fatalf("the graph %v has no postgres reached over TCP from the app", graph)
	}
	if s.Requests.Total == 0 || s.Requests.OK > s.Requests.Total*9/10 {
		t.Errorf("the app served %d of %d requests: not loaded past what it serves", s.Requests.OK, s.Requests.Total)
	}
	if strings.Contains(n.Detail, "`postgres`") {
		t.Errorf("the neighbours signal names postgres, which the system under test called: %s", n.Detail)
	}
	if advice := strings.Join(s.Verdict.Advice, "\n"); strings.Contains(advice, "`postgres`") {
		t.Errorf("the advice names postgres:\n%s", advice)
	}
	if other > 0 {
		t.Errorf("waited %.2f%% of a CPU behind postgres as another process's, want none: it is the system under test's", other)
	}
	if measured && (sut <= 0 || len(sutPIDs) < 2) {
		t.Errorf("waited %.2f%% behind postgres (pids %v) as the system under test, want the backends' wait measured there", sut, sutPIDs)
	}
}

// startForkDB starts testdata/forkdb/app.py against dsn and returns its
// port, killed with its threads when the test ends.
func startForkDB(t *testing.T, dsn string) string {
	t.Helper()
	cmd := exec.Command(testservice.Python, "testdata/forkdb/app.py", dsn)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the app: %v", err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	})
	line, _ := bufio.NewReader(out).ReadString('\n')
	port, ok := strings.CutPrefix(strings.TrimSpace(line), "ready ")
	if !ok {
		testservice.Unavailable(t, testservice.PostgresExplicit(), "the app did not start: %s%s", line, stderr.String())
	}
	return port
}

// isLoopback reports whether host names this host's loopback.
func isLoopback(host string) bool {
	ip := net.ParseIP(host)
	return host == "localhost" || ip != nil && ip.IsLoopback()
}
