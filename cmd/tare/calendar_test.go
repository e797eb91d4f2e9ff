package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/interfere"
	"github.com/tare-dev/tare/internal/testkit/testservice"
	"github.com/tare-dev/tare/store"
)

// openStore opens the SQLite store at path for the test to fill or read.
func openStore(t *testing.T, path string) *store.SQLite {
	t.Helper()
	st, err := store.OpenSQLite(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// busyHost stores days of a host's samples, every 15 minutes up to now:
// a backup busy at 03:00 UTC every day, quiet at 11:00.
func busyHost(t *testing.T, db, name string, days int) {
	t.Helper()
	st := openStore(t, db)
	rng := rand.New(rand.NewPCG(uint64(days), 3))
	// From an hour's start, for whole days: each hour of the day on days
	// days exactly, whatever hour the test runs in (from now back, the
	// hour under way held parts of days+1 days).
	end := time.Now().Truncate(time.Hour)
	for at := end.AddDate(0, 0, -days); at.Before(end); at = at.Add(15 * time.Minute) {
		v, who := 8.0, "cron"
		switch at.UTC().Hour() {
		case 3:
			v, who = 60, "backup"
		case 11:
			v = 1
		}
		v *= 0.8 + 0.4*rng.Float64()
		err := st.AddCalendarSample(context.Background(), tare.CalendarSample{Host: name, Start: at, End: at.Add(10 * time.Second),
			Level: tare.Clean, InterferencePct: tare.Float(v), NeighboursPct: tare.Float(v), StealPct: tare.Float(0), Ticks: 10,
			CostCPUMS: tare.Float(10), TopOthers: []tare.ProcessShare{{Name: who, PID: 42, CPUPct: v}}})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// runFor runs the command line for at most d, then stops it as Ctrl-C
// does.
func runFor(t *testing.T, d time.Duration, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runUntil(t, d, 0, args...)
}

// runUntil runs the command line until it has printed lines lines (0:
// until it ends), then stops it as Ctrl-C does; after d at most, a bound
// on the wait, not on how long it should take.
func runUntil(t *testing.T, d time.Duration, lines int, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	out := &linesThenCancel{lines: lines, cancel: cancel}
	var errb bytes.Buffer
	err := run(ctx, args, strings.NewReader(""), out, &errb)
	return exitCode(err, &errb), out.String(), errb.String()
}

// linesThenCancel is a buffer that cancels once lines lines were
// written to it (never when lines is 0).
type linesThenCancel struct {
	bytes.Buffer
	lines  int
	cancel context.CancelFunc
}

func (w *linesThenCancel) Write(p []byte) (int, error) {
	n, err := w.Buffer.Write(p)
	if w.lines > 0 && bytes.Count(w.Bytes(), []byte("\n")) >= w.lines {
		w.cancel()
	}
	return n, err
}

// TestCheckEvery: tare check --every keeps the host's calendar: a sample
// every --every, each printed as a line and stored under the host's name
// ($TARE_HOSTNAME, as a pod's node), until stopped, which ends it with
// exit 0; --json prints each as a JSON object.
func TestCheckEvery(t *testing.T) {
	db := filepath.Join(t.TempDir(), "tare.db")
	t.Setenv("TARE_HOSTNAME", "node-every")
	const every, span = 2 * time.Second, 500 * time.Millisecond
	code, stdout, stderr := runUntil(t, time.Minute, 2, "check", "--every", every.String(), "--for", span.String(), "--tick", "100ms", "--db", db, "--sched-probe", "off")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, "keeping the calendar of host node-every in "+db) {
		t.Errorf("stderr %q: want the calendar announced", stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	stored, err := openStore(t, db).FindCalendarSamples(context.Background(), tare.CalendarFilter{Host: "node-every"})
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 2 || len(stored) != len(lines) {
		t.Fatalf("%d lines, %d stored; want 2 samples, each printed and stored:\n%s", len(lines), len(stored), stdout)
	}
	for i, s := range stored {
		if !strings.Contains(lines[i], " node-every ") || !strings.Contains(lines[i], "interference") {
			t.Errorf("line %d: %q", i, lines[i])
		}
		if s.Ticks < 3 || s.InterferencePct == nil || s.CostCPUMS == nil || s.Level == "" || s.End.Sub(s.Start) < span*9/10 {
			t.Errorf("sample %d: %+v", i, s)
		}
	}
	// Samples are due --every apart (session's TestKeeper checks the
	// grid on its own clock): here, in order, not overlapping, and not
	// back to back (--for apart, as with --every ignored). A busy machine
	// can start one sample late and the next on time, or push one to the
	// next slot, so the gap is held to the midpoint of the two, no more.
	first, second := stored[0], stored[1]
	if gap := second.Start.Sub(first.Start); second.Start.Before(first.End) || gap < (every+span)/2 {
		t.Errorf("sample 1 %s–%s, sample 2 from %s (%s later): want them in order, not overlapping, about --every %s apart, not back to back",
			first.Start.Format(time.TimeOnly+".000"), first.End.Format(time.TimeOnly+".000"), second.Start.Format(time.TimeOnly+".000"), gap, every)
	}

	code, stdout, stderr = runFor(t, time.Minute, "check", "--record", "--for", "1s", "--tick", "250ms", "--db", db, "--json", "--sched-probe", "off")
	var s tare.CalendarSample
	if err := json.Unmarshal([]byte(stdout), &s); code != 0 || err != nil || s.Host != "node-every" || s.InterferencePct == nil {
		t.Errorf("--record --json: exit %d, %v, sample %+v\n%s%s", code, err, s, stdout, stderr)
	}
}

// TestCheckRecordNamesAHog: a CPU hog running beside tare check --record
// is in the stored sample, by name, with its share of the host's CPU
// (among the five busiest: on a machine shared with builds it need not be
// the first).
func TestCheckRecordNamesAHog(t *testing.T) {
	interfere.Exclusive(t)
	hog := interfere.Busy(t)
	db := filepath.Join(t.TempDir(), "tare.db")
	t.Setenv("TARE_HOSTNAME", "node-hog")
	code, stdout, stderr := runFor(t, time.Minute, "check", "--record", "--for", "2s", "--db", db, "--sched-probe", "off")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	stored, err := openStore(t, db).FindCalendarSamples(context.Background(), tare.CalendarFilter{Host: "node-hog"})
	if err != nil || len(stored) != 1 {
		t.Fatalf("%d samples, %v; want one", len(stored), err)
	}
	s := stored[0]
	var hogPct float64
	for _, p := range s.TopOthers {
		if p.PID == hog.Process.Pid {
			hogPct = p.CPUPct
		}
	}
	if hogPct < 5 || *s.InterferencePct < hogPct || !strings.Contains(stdout, "busiest: ") {
		t.Errorf("the hog (pid %d) at %.1f%% of the host's CPU, interference %.1f%%; want it named, at 5%% or more:\n%s\n%+v",
			hog.Process.Pid, hogPct, *s.InterferencePct, stdout, s.TopOthers)
	}
}

// TestCheckHistory: tare check history reads a host's calendar back and
// names its busy and its quiet hour, as text, JSON and an HTML heatmap;
// with too few days it says so; a host without a calendar is an error
// naming the hosts that have one.
func TestCheckHistory(t *testing.T) {
	db := filepath.Join(t.TempDir(), "tare.db")
	busyHost(t, db, "vm-hist", 10)
	busyHost(t, db, "vm-new", 2)

	code, stdout, stderr := tareCmd(t, "check", "history", "--db", db, "--host", "vm-hist", "--tz", "UTC")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"calendar of host vm-hist", "The busiest hour is 03:00–04:00", "The quietest hour is 11:00–12:00",
		"backup", "samples a day", "other hosts in this store (--host): vm-new"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("history lacks %q:\n%s", want, stdout)
		}
	}

	code, stdout, stderr = tareCmd(t, "check", "history", "--db", db, "--host", "vm-hist", "--tz", "UTC", "--json", "--days", "14")
	var c tare.Calendar
	if err := json.Unmarshal([]byte(stdout), &c); code != 0 || err != nil {
		t.Fatalf("--json: exit %d, %v: %s", code, err, stderr)
	}
	if c.Schema != tare.CalendarSchema || c.DaysAsked != 14 || c.Busiest == nil || c.Busiest.Hour != 3 || c.Quietest.Hour != 11 || c.Hours[3].Neighbours[0].Name != "backup" {
		t.Errorf("--json: schema %q, days asked %d, busiest %+v, quietest %+v", c.Schema, c.DaysAsked, c.Busiest, c.Quietest)
	}

	page := filepath.Join(t.TempDir(), "calendar.html")
	code, _, stderr = tareCmd(t, "check", "history", "--db", db, "--host", "vm-hist", "--html", page)
	if b, err := os.ReadFile(page); code != 0 || err != nil || !strings.Contains(string(b), `id="svg-calendar-heatmap"`) {
		t.Errorf("--html: exit %d, %v: %s", code, err, stderr)
	}

	code, stdout, _ = tareCmd(t, "check", "history", "--db", db, "--host", "vm-new")
	if code != 0 || !strings.Contains(stdout, "Too few days to tell") || strings.Contains(stdout, "The busiest hour") {
		t.Errorf("2 days: exit %d\n%s", code, stdout)
	}

	code, _, stderr = tareCmd(t, "check", "history", "--db", db, "--host", "vm-none")
	if code != 2 || !strings.Contains(stderr, "no calendar samples of host vm-none") || !strings.Contains(stderr, "vm-hist (") || !strings.Contains(stderr, "tare check --every") {
		t.Errorf("a host without a calendar: exit %d: %s", code, stderr)
	}
}

// TestCheckCron: tare check cron prints the crontab line that keeps the
// calendar with tare check --record, passing the flags given on.
func TestCheckCron(t *testing.T) {
	tests := []struct {
		args []string
		when string
	}{
		{[]string{"--every", "5m"}, "*/5 * * * * "},
		{[]string{"--every", "1m", "--for", "5s"}, "* * * * * "},
		{[]string{"--every", "2h", "--steal-threshold", "15"}, "0 */2 * * * "},
		{[]string{"--every", "24h"}, "0 0 * * * "},
	}
	for _, tt := range tests {
		code, stdout, stderr := tareCmd(t, append([]string{"check", "cron", "--db", "/var/lib/tare/tare.db", "--log", "/var/log/tare-check.log"}, tt.args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", tt.args, code, stderr)
		}
		lines := strings.Split(strings.TrimSpace(stdout), "\n")
		last := lines[len(lines)-1]
		if !strings.HasPrefix(last, tt.when) || !strings.Contains(last, " check --record --for ") || !strings.Contains(last, "--db /var/lib/tare/tare.db") ||
			!strings.HasSuffix(last, ">> /var/log/tare-check.log 2>&1") || strings.Contains(last, "--every") {
			t.Errorf("%v: %q", tt.args, last)
		}
		if strings.Contains(strings.Join(tt.args, " "), "steal") && !strings.Contains(last, "--steal-threshold 15") {
			t.Errorf("%v: the threshold is not passed on: %q", tt.args, last)
		}
	}
	exe, _ := os.Executable()
	_, stdout, _ := tareCmd(t, "check", "cron", "--db", "/var/lib/tare/tare.db", "--log", "/var/log/tare-check.log")
	golden(t, "check-cron.stdout", strings.ReplaceAll(stdout, exe, "/usr/local/bin/tare"))
}

// TestCheckCalendarBadInput: what does not go with keeping a calendar is
// refused before anything is sampled or stored.
func TestCheckCalendarBadInput(t *testing.T) {
	db := filepath.Join(t.TempDir(), "never.db")
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"check", "--every", "5s", "--for", "10s", "--db", db}, "--every 5s must be longer than --for 10s"},
		{[]string{"check", "--every", "-1m", "--db", db}, "--every must be a positive duration"},
		{[]string{"check", "--every", "5m", "--fail-on", "polluted", "--db", db}, "--fail-on judges one check"},
		{[]string{"check", "--record", "--queue", "redis://127.0.0.1:1/0", "--db", db}, "--queue checks a queue before a run"},
		{[]string{"check", "cron", "--every", "7m"}, "--every 7m0s cannot be a crontab line"},
		{[]string{"check", "cron", "--every", "90m"}, "cannot be a crontab line"},
		{[]string{"check", "history", "--days", "0", "--db", db}, "--days must be from 1 to 366"},
		{[]string{"check", "history", "--tz", "Mars/Olympus", "--db", db}, `--tz: time zone "Mars/Olympus"`},
	}
	for _, tt := range tests {
		code, _, stderr := tareCmd(t, tt.args...)
		if code != 2 || !strings.Contains(stderr, tt.want) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", tt.args, code, stderr, tt.want)
		}
	}
	if _, err := os.Stat(db); err == nil {
		t.Error("bad input created the store")
	}
}

// TestProtocolWindowsAuto: a plan's windows: auto takes its windows from
// this host's calendar: tare protocol cron starts peak at the backup's
// hour and off-peak at the quiet one, and says why; a dry run compares
// its windows and says whether each was as the calendar predicted; with
// too few days the plan is refused, naming its line.
func TestProtocolWindowsAuto(t *testing.T) {
	db := filepath.Join(t.TempDir(), "tare.db")
	t.Setenv("TARE_HOSTNAME", "vm-auto")
	busyHost(t, db, "vm-auto", 8)
	plan := writePlan(t, "nightly.yaml", "url: http://127.0.0.1:8080/\nrate: 2/s\njobs: 50\ntz: UTC\nwindows: auto\n")
	code, stdout, stderr := tareCmd(t, "protocol", "cron", plan, "--db", db)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"# from the calendar: peak 03:00-04:00: the busiest hour of host vm-auto's day over 8 days (32 samples)",
		"# from the calendar: offpeak 11:00-12:00: the quietest hour", "\n0 3 * * * ", "--window peak", "\n0 11 * * * "} {
		if !strings.Contains(stdout, want) {
			t.Errorf("cron lacks %q:\n%s", want, stdout)
		}
	}
	// Chosen once: the status of the protocol and a second cron agree.
	_, again, _ := tareCmd(t, "protocol", "cron", plan, "--db", db)
	if again != stdout {
		t.Errorf("a second cron differs:\n%s\nfrom\n%s", again, stdout)
	}

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	dry := writePlan(t, "dry.yaml", fmt.Sprintf("url: %s\nrate: 50/s\njobs: 30\ntick: 100ms\ntz: UTC\nwindows: {peak: busiest, offpeak: quietest}\n", srv.URL))
	code, stdout, stderr = tareCmd(t, "protocol", "run", dry, "--now", "--db", db, "--json")
	var c tare.Comparison
	if err := json.Unmarshal([]byte(stdout), &c); code != 0 || err != nil {
		t.Fatalf("dry run: exit %d, %v\n%s", code, err, stderr)
	}
	if len(c.Calendar) != 2 || c.Calendar[0].Window != "peak" || c.Calendar[0].From != "03:00" || c.Calendar[0].Measured == nil || c.Calendar[0].AsPredicted == nil {
		t.Fatalf("calendar checks %+v", c.Calendar)
	}
	// Each window set against what it measured, whichever way it went
	// on this shared machine: a peak is as busy as predicted unless it
	// measured below its days' 10th percentile (and the slack).
	for _, wc := range c.Calendar {
		quieter := *wc.Measured < wc.DayLow-1
		busier := *wc.Measured > wc.DayHigh+1
		want := !busier
		if wc.Choice == tare.ChoiceBusiest {
			want = !quieter
		}
		if *wc.AsPredicted != want || !strings.Contains(wc.Verdict, fmt.Sprintf("measured %.1f%% interference", *wc.Measured)) {
			t.Errorf("%s measured %.1f%% against %.1f–%.1f%%: as predicted %v; %s", wc.Window, *wc.Measured, wc.DayLow, wc.DayHigh, *wc.AsPredicted, wc.Verdict)
		}
	}
	if c.Calendar[0].DayLow < 40 || c.Calendar[1].DayHigh > 2 {
		t.Errorf("predictions %+v: want the backup's hour for peak, the quiet one for off-peak", c.Calendar)
	}

	few := filepath.Join(t.TempDir(), "few.db")
	busyHost(t, few, "vm-auto", 3)
	code, _, stderr = tareCmd(t, "protocol", "cron", plan, "--db", few)
	if code != 2 || !strings.Contains(stderr, "line 5, key windows") || !strings.Contains(stderr, "too few days to tell") {
		t.Errorf("3 days: exit %d: %s", code, stderr)
	}
}

// postgresSchema is a DSN of the test PostgreSQL whose search_path is a
// schema of the test's own, dropped when the test ends.
func postgresSchema(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, postgresDSN())
	if err != nil {
		testservice.Unavailable(t, testservice.PostgresExplicit(), "PostgreSQL at %s: %v (scripts/test starts one)", tare.RedactText(postgresDSN()), err)
	}
	defer admin.Close(ctx)
	schema := fmt.Sprintf("tare_calendar_%d", time.Now().UnixNano())
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create schema %s: %v", schema, err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), postgresDSN())
		if err == nil {
			c.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
			c.Close(context.Background())
		}
	})
	u, err := url.Parse(postgresDSN())
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// TestKubernetesCalendarPods runs the calendar DaemonSet's command line,
// exactly as deploy/kubernetes renders it, as the pods of two nodes with
// the environment the kubelet gives them (the node's name, the Secret's
// store, the settings, at a 2 s pace here), into one PostgreSQL: each
// node's calendar is kept under its name, and tare check history reads
// either from the one store.
func TestKubernetesCalendarPods(t *testing.T) {
	if testing.Short() {
		t.Skip("two calendar pods for ~5 s: skipped with -short")
	}
	b, err := os.ReadFile("../../deploy/kubernetes/testdata/pods.golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var pods struct {
		Settings map[string]string `json:"settings"`
		Calendar podCommand        `json:"calendar"`
	}
	if err := json.Unmarshal(b, &pods); err != nil {
		t.Fatal(err)
	}
	dsn := postgresSchema(t)
	settings := map[string]string{}
	for k, v := range pods.Settings {
		settings[k] = v
	}
	for k, v := range map[string]string{"TARE_CALENDAR_EVERY": "2s", "TARE_CALENDAR_FOR": "1s"} {
		if _, ok := settings[k]; !ok {
			t.Fatalf("the kustomization no longer sets %s", k)
		}
		settings[k] = v
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	nodes := []string{"node-a", "node-b"}
	var cmds []*exec.Cmd
	var errs []*strings.Builder
	for _, node := range nodes {
		env, args := pod{fields: map[string]string{"spec.nodeName": node, "metadata.name": "tare-calendar-" + node, "metadata.namespace": "tare",
			"metadata.uid": fmt.Sprint(time.Now().UnixNano())}, secrets: map[string]string{"db": dsn}, settings: settings}.environ(t, pods.Calendar)
		c := exec.CommandContext(ctx, os.Args[0], args...)
		c.Env = append(env, "TARE_TEST_MAIN=1", "PATH="+os.Getenv("PATH"))
		// As the kubelet stops a pod: SIGTERM, which stops the keeper.
		c.Cancel = func() error { return c.Process.Signal(syscall.SIGTERM) }
		var stderr strings.Builder
		c.Stderr = &stderr
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, errs = append(cmds, c), append(errs, &stderr)
	}
	for i, c := range cmds {
		// Wait reports the context's end; the exit status is what counts.
		if err := c.Wait(); c.ProcessState == nil || c.ProcessState.ExitCode() != 0 {
			t.Errorf("pod of %s: %v: %s", nodes[i], err, errs[i])
		}
	}
	st, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	hosts, err := st.FindCalendarHosts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(hosts) != 2 || hosts[0].Host != "node-a" || hosts[1].Host != "node-b" || hosts[0].Samples < 2 || hosts[1].Samples < 2 {
		t.Fatalf("hosts %+v: want node-a and node-b, 2 or 3 samples each", hosts)
	}
	code, stdout, stderr := tareCmd(t, "check", "history", "--db", dsn, "--host", "node-b")
	if code != 0 || !strings.Contains(stdout, "calendar of host node-b") || !strings.Contains(stdout, "other hosts in this store (--host): node-a") {
		t.Errorf("history of node-b: exit %d\n%s%s", code, stdout, stderr)
	}
}
