package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/testservice"
	"github.com/tare-dev/tare/peer"
)

// The peers' versions: vegeta's is the one go-partial.tsv lists, hey's the
// newest tag.
const (
	vegetaPkg = "github.com/tsenart/vegeta/v12@v12.13.0"
	heyPkg    = "github.com/rakyll/hey@v0.1.5"
)

var (
	peerMu   sync.Mutex
	peerBins = map[string]string{}
)

// peerTool returns the path of a real load tool, installed with go install
// into a GOBIN of its own under the temp directory (kept between test runs,
// so it is built once), or skips the test saying why it could not be.
func peerTool(t *testing.T, name, pkg string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: the peers are installed and run only in the full tests")
	}
	peerMu.Lock()
	defer peerMu.Unlock()
	if p, ok := peerBins[name]; ok {
		return p
	}
	version := pkg[strings.LastIndex(pkg, "@")+1:]
	bin := filepath.Join(os.TempDir(), "tare-peers", name+"-"+version)
	path := filepath.Join(bin, name)
	if _, err := os.Stat(path); err != nil {
		cmd := exec.Command("go", "install", pkg)
		cmd.Env = append(os.Environ(), "GOBIN="+bin, "GOFLAGS=-mod=mod")
		if out, err := cmd.CombinedOutput(); err != nil {
			testservice.Missing(t, "cannot install %s (go install %s): %v\n%s", name, pkg, err, out)
		}
	}
	peerBins[name] = path
	return path
}

// peerServer answers on loopback after a latency that cycles over 1–4.6 ms,
// so the percentiles differ; with stall, a request arriving 1–2 s into each
// 5 s waits until the 2 s mark.
func peerServer(t *testing.T, stall bool) *httptest.Server {
	t.Helper()
	var n atomic.Int64
	t0 := time.Now()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d := time.Millisecond + time.Duration(n.Add(1)%10)*400*time.Microsecond
		if stall {
			if in := time.Since(t0) % (5 * time.Second); in >= time.Second && in < 2*time.Second {
				d = 2*time.Second - in
			}
		}
		time.Sleep(d)
		io.WriteString(w, "ok\n")
	}))
	t.Cleanup(srv.Close)
	return srv
}

// watchResults runs tare watch --json --results spec -- args and returns
// its summary.
func watchResults(t *testing.T, spec string, args ...string) tare.Summary {
	t.Helper()
	code, stdout, stderr := tareCmd(t, append([]string{"watch", "--no-store", "--json", "--results", spec, "--"}, args...)...)
	if code != 0 {
		t.Fatalf("watch --results %s: exit %d\n%s", spec, code, stderr)
	}
	var s tare.Summary
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatalf("watch --json: %v\n%s", err, stdout)
	}
	return s
}

// latencies reads the latencies of a results file, sorted, in ms.
func latencies(t *testing.T, format, path string) []float64 {
	t.Helper()
	spec, err := peer.ParseSpec(format + ":" + path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := peer.NewReader(f, spec.Format, peer.Options{Start: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	var ms []float64
	for {
		var res tare.Result
		if err := r.Read(&res); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, float64(res.Latency())/float64(time.Millisecond))
	}
	slices.Sort(ms)
	return ms
}

// agree checks that tare's and the tool's quantile q lie between the order
// statistics either side of rank q·n, widened by what separates the two
// without either being wrong: tare's run-wide HDR histogram (3 significant
// digits, 1 µs unit), the 0.001 ms of the summary and the tool's own
// resolution (res ms). Tools define a quantile differently (vegeta
// interpolates a t-digest, hey takes the first sample past the rank), so
// the figures cannot be asked to be equal, only to name the same sample.
func agree(t *testing.T, what string, sorted []float64, q, tareMS, toolMS, res float64) {
	t.Helper()
	n := len(sorted)
	k := q * float64(n)
	lo := sorted[max(0, int(math.Floor(k))-2)]
	hi := sorted[min(n-1, int(math.Ceil(k))+1)]
	slack := hi*0.001 + 0.001 + 0.001 + res
	lo, hi = lo-slack, hi+slack
	if tareMS < lo || tareMS > hi || toolMS < lo || toolMS > hi {
		t.Errorf("%s p%g: tare %.3f ms, the tool %.3f ms, want both in [%.3f, %.3f] (the samples either side of rank %.1f of %d)",
			what, q*100, tareMS, toolMS, lo, hi, k, n)
	}
}

// TestWatchResultsVegeta: real vegeta under tare watch --results. tare
// counts the requests vegeta's own report counts, and its p50 and p99
// name the same samples as vegeta report's.
func TestWatchResultsVegeta(t *testing.T) {
	vegeta := peerTool(t, "vegeta", vegetaPkg)
	srv := peerServer(t, false)
	dir := t.TempDir()
	targets, bin := filepath.Join(dir, "targets.txt"), filepath.Join(dir, "r.bin")
	if err := os.WriteFile(targets, []byte("GET "+srv.URL+"/\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := watchResults(t, "vegeta:"+bin, vegeta, "attack", "-rate", "200/s", "-duration", "3s", "-targets", targets, "-output", bin)

	out, err := exec.Command(vegeta, "report", "-type", "json", bin).Output()
	if err != nil {
		t.Fatalf("vegeta report: %v", err)
	}
	var rep struct {
		Requests  int              `json:"requests"`
		Latencies map[string]int64 `json:"latencies"`
		Success   float64          `json:"success"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("vegeta report: %v\n%s", err, out)
	}
	t.Logf("vegeta report: %d requests, p50 %.3f ms, p99 %.3f ms; tare: %d requests, p50 %.3f ms, p99 %.3f ms",
		rep.Requests, float64(rep.Latencies["50th"])/1e6, float64(rep.Latencies["99th"])/1e6, s.Requests.Total, *s.Latency.P50, *s.Latency.P99)
	if s.Requests.Total != rep.Requests || s.Requests.OK != int(math.Round(rep.Success*float64(rep.Requests))) || rep.Requests < 500 {
		t.Errorf("tare counted %d requests (%d ok), vegeta report %d (success %.2f)", s.Requests.Total, s.Requests.OK, rep.Requests, rep.Success)
	}
	sorted := latencies(t, "vegeta", bin)
	agree(t, "vegeta", sorted, 0.50, *s.Latency.P50, float64(rep.Latencies["50th"])/1e6, 0)
	agree(t, "vegeta", sorted, 0.99, *s.Latency.P99, float64(rep.Latencies["99th"])/1e6, 0)
	if !strings.HasPrefix(s.Run.Arrival, "vegeta results") || s.Host.Ticks == 0 {
		t.Errorf("run %+v: want vegeta named as the arrival", s.Run)
	}
	if !hasWarning(s, "vegeta's latencies start at its actual send") || hasWarning(s, "coordinated omission") {
		t.Errorf("warnings %q: want the open-loop note, no coordinated omission", s.Verdict.Warnings)
	}
}

// TestWatchResultsHey: real hey under tare watch --results hey-csv. With
// -o csv hey prints no summary, so its own figures are its -n and the
// percentiles its summary computes (requester/report.go: the first sorted
// latency whose rank i·100/n reaches the percentile) over the latencies it
// wrote.
func TestWatchResultsHey(t *testing.T) {
	hey := peerTool(t, "hey", heyPkg)
	srv := peerServer(t, false)
	csv := filepath.Join(t.TempDir(), "r.csv")
	const n = 600
	s := watchResults(t, "hey-csv:"+csv, "sh", "-c", fmt.Sprintf("%s -n %d -c 4 -o csv %s/ > %s", hey, n, srv.URL, csv))
	sorted := latencies(t, "hey-csv", csv)
	heyPct := func(p int) float64 {
		for i, v := range sorted {
			if i*100/len(sorted) >= p {
				return v
			}
		}
		return math.NaN()
	}
	t.Logf("hey: %d requests, p50 %.3f ms, p99 %.3f ms; tare: %d requests, p50 %.3f ms, p99 %.3f ms",
		len(sorted), heyPct(50), heyPct(99), s.Requests.Total, *s.Latency.P50, *s.Latency.P99)
	if s.Requests.Total != n || len(sorted) != n || s.Requests.OK != n {
		t.Errorf("tare counted %d requests (%d ok), hey wrote %d, was asked for %d", s.Requests.Total, s.Requests.OK, len(sorted), n)
	}
	agree(t, "hey", sorted, 0.50, *s.Latency.P50, heyPct(50), 0.1)
	agree(t, "hey", sorted, 0.99, *s.Latency.P99, heyPct(99), 0.1)
	if !hasWarning(s, "coordinated omission: hey is a closed loop") {
		t.Errorf("warnings %q: want hey's closed loop named", s.Verdict.Warnings)
	}
}

// TestWatchResultsStall: against a server that stalls 1 s every 5 s, vegeta
// (an open loop with workers to spare) shows the stall in its latencies and
// gets no coordinated-omission warning; hey (a closed loop) hides it, and
// the warning names the second it sent nothing.
func TestWatchResultsStall(t *testing.T) {
	vegeta := peerTool(t, "vegeta", vegetaPkg)
	hey := peerTool(t, "hey", heyPkg)
	dir := t.TempDir()

	srv := peerServer(t, true)
	targets, bin := filepath.Join(dir, "targets.txt"), filepath.Join(dir, "r.bin")
	if err := os.WriteFile(targets, []byte("GET "+srv.URL+"/\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	v := watchResults(t, "vegeta:"+bin, vegeta, "attack", "-rate", "50/s", "-duration", "3s", "-targets", targets, "-output", bin)
	t.Logf("vegeta: p99 %.1f ms, warnings %q", *v.Latency.P99, v.Verdict.Warnings)
	if *v.Latency.P99 < 300 || hasWarning(v, "coordinated omission") {
		t.Errorf("vegeta: p99 %.1f ms, warnings %q; want the stall in the latencies, no coordinated omission", *v.Latency.P99, v.Verdict.Warnings)
	}

	srv = peerServer(t, true)
	csv := filepath.Join(dir, "r.csv")
	h := watchResults(t, "hey-csv:"+csv, "sh", "-c", fmt.Sprintf("%s -z 3s -c 2 -o csv %s/ > %s", hey, srv.URL, csv))
	t.Logf("hey: %d requests, p99 %.1f ms, warnings %q", h.Requests.Total, *h.Latency.P99, h.Verdict.Warnings)
	if !hasWarning(h, "coordinated omission") || !hasWarning(h, "hey sent nothing for") {
		t.Errorf("hey: warnings %q; want coordinated omission and the stall of its sends", h.Verdict.Warnings)
	}
}

func hasWarning(s tare.Summary, sub string) bool {
	for _, w := range s.Verdict.Warnings {
		if strings.Contains(w, sub) {
			return true
		}
	}
	return false
}

// TestWatchResultsJSONL: any tool's results in the jsonl form; --slo is
// judged on them (tare watch refuses it without --results), and a bad line
// is an error naming the line.
func TestWatchResultsJSONL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.jsonl")
	script := fmt.Sprintf(`now=$(date +%%s.%%N); for i in 1 2 3 4 5 6 7 8 9 10; do echo "{\"timestamp\": $now, \"latency_ms\": 1500, \"status\": 200}"; done > %s`, path)
	code, stdout, stderr := tareCmd(t, "watch", "--no-store", "--json", "--results", "jsonl:"+path, "--slo", "p95<=1s", "--fail-on", "slo", "--", "sh", "-c", script)
	if code != 1 && code != 3 {
		t.Fatalf("exit %d, want 1 (the SLO failed) or 3 (on a polluted host)\n%s", code, stderr)
	}
	var s tare.Summary
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	if s.Requests.Total != 10 || *s.Latency.P95 < 1490 || !hasWarning(s, "tare cannot tell whether they are scheduled") {
		t.Errorf("requests %d, p95 %v, warnings %q", s.Requests.Total, *s.Latency.P95, s.Verdict.Warnings)
	}
	// One timestamp per request: the tool's send lag and its service time
	// apart from latency are not measured, so they are null, never 0 or
	// the latency again, and the summary says why.
	if s.SendLag.P99 != nil || s.SendLag.Max != nil || s.Service.P50 != nil || s.Service.P99 != nil {
		t.Errorf("send lag %v/%v, service %v/%v: want null for another tool's results", s.SendLag.P99, s.SendLag.Max, s.Service.P50, s.Service.P99)
	}
	if !hasWarning(s, "send lag and service time are not measured") {
		t.Errorf("no warning says send lag and service are not measured: %q", s.Verdict.Warnings)
	}
	if err := os.WriteFile(path, []byte("{\"timestamp\": 1767366246, \"latency_ms\": 2, \"status\": 200}\n{\"timestamp\": 1767366246}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = tareCmd(t, "watch", "--no-store", "--results", "jsonl:"+path, "--", "true")
	if code != 2 || !strings.Contains(stderr, "line 2") || !strings.Contains(stderr, "no latency_ms") {
		t.Errorf("bad line: exit %d, want 2 and the line named\n%s", code, stderr)
	}
}
