package main

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/testservice"
	"github.com/tare-dev/tare/modelsim"
	"github.com/tare-dev/tare/openai"
	"github.com/tare-dev/tare/prompts"
)

// runJSON runs tare with --json and decodes its summary.
func runJSON(t *testing.T, args ...string) tare.Summary {
	t.Helper()
	code, stdout, stderr := tareCmd(t, append(args, "--json", "--quiet", "--no-store")...)
	if code != 0 {
		t.Fatalf("tare %s: exit %d\n%s", strings.Join(args, " "), code, stderr)
	}
	var s tare.Summary
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatalf("summary: %v\n%s", err, stdout)
	}
	return s
}

// TestStagesAndWarmup: a constant ramp on loopback offers each stage
// exactly ∫λ over its measured seconds, achieves it within 5 % (a server
// that answers at once completes each stage's requests within its
// seconds), and the warm-up's arrivals are counted apart and left out of
// every figure.
func TestStagesAndWarmup(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	s := runJSON(t, "run", "--url", srv.URL+"/", "--arrival", "constant", "--stages", "2s:100/s,2s:100/s,2s:200/s", "--warmup", "1s")

	// Λ(1s) = 25 arrivals in the warm-up; the stages after it hold 75,
	// 200 and 300.
	if s.Warmup == nil || s.Warmup.Requests != 25 || s.Warmup.DurationS != 1 {
		t.Errorf("warmup = %+v, want 25 arrivals in 1 s", s.Warmup)
	}
	if got := hits.Load(); got != 600 {
		t.Errorf("the server got %d requests, want all 600 (warm-up included)", got)
	}
	if s.Requests.Total != 575 {
		t.Errorf("requests.total = %d, want 575: the warm-up's 25 left out", s.Requests.Total)
	}
	want := []struct {
		start, duration, target float64
		n                       int
	}{{1, 1, 100, 75}, {2, 2, 100, 200}, {4, 2, 200, 300}}
	if len(s.Stages) != len(want) {
		t.Fatalf("%d stages in the summary, want %d: %+v", len(s.Stages), len(want), s.Stages)
	}
	prevRate := 0.0 // the warm-up's completions are in no stage
	for i, w := range want {
		st := s.Stages[i]
		if st.StartS != w.start || st.DurationS != w.duration || st.TargetPerS != w.target || st.Requests != w.n {
			t.Errorf("stage %d = %+v, want start %v duration %v target %v with %d requests", i+1, st, w.start, w.duration, w.target, w.n)
		}
		offered := float64(w.n) / w.duration
		if st.OfferedPerS == nil || *st.OfferedPerS != offered {
			t.Errorf("stage %d offered %v/s, want %v/s", i+1, st.OfferedPerS, offered)
		}
		// Completions in the stage differ from its arrivals by those in
		// flight at its edges: at most the arrivals of the run's slowest
		// request's time before each (a noisy machine's lag is in it).
		edges := (prevRate+w.target)**s.Latency.Max/1000 + 2
		if st.AchievedPerS == nil || math.Abs(*st.AchievedPerS-offered)*w.duration > edges {
			t.Errorf("stage %d achieved %v/s, want %v/s give or take the %.1f requests in flight at its edges (slowest request %.1f ms)", i+1, show(st.AchievedPerS), offered, edges, *s.Latency.Max)
		}
		prevRate = w.target
		if st.Verdict == "" || st.Latency.P95 == nil {
			t.Errorf("stage %d has no verdict or latency: %+v", i+1, st)
		}
	}
}

// TestStageCompletesLate: a stage offered twice what the service serves
// (one request at a time, 10 ms each: 100/s at most) achieves what the
// service served in its seconds, not what it was offered; the backlog is
// served in the next stage, which achieves more than it was offered.
func TestStageCompletesLate(t *testing.T) {
	srv := oneAtATime(10 * time.Millisecond)
	defer srv.Close()
	s := runJSON(t, "run", "--url", srv.URL+"/", "--arrival", "constant", "--stages", "0s:200/s,2s:200/s,0s:20/s,2s:20/s")
	if len(s.Stages) != 2 {
		t.Fatalf("%d stages in the summary, want 2 (jumps are no stage): %+v", len(s.Stages), s.Stages)
	}
	over, after := s.Stages[0], s.Stages[1]
	t.Logf("over capacity: offered %v/s, achieved %v/s; after: offered %v/s, achieved %v/s", show(over.OfferedPerS), show(over.AchievedPerS), show(after.OfferedPerS), show(after.AchievedPerS))
	if s.Requests.Total != 440 || s.Requests.OK != 440 {
		t.Fatalf("requests %+v, want 440 arrivals, all ok", s.Requests)
	}
	if over.OfferedPerS == nil || *over.OfferedPerS != 200 || over.AchievedPerS == nil || *over.AchievedPerS > 101 {
		t.Errorf("the stage over capacity offered %v/s and achieved %v/s: want 200/s offered, and at most the 100/s one request at a time of 10 ms serves (one more at the edge)",
			show(over.OfferedPerS), show(over.AchievedPerS))
	}
	if after.OfferedPerS == nil || *after.OfferedPerS != 20 || after.AchievedPerS == nil || *after.AchievedPerS <= *after.OfferedPerS {
		t.Errorf("the stage after offered %v/s and achieved %v/s: want 20/s offered, and more achieved, the backlog served in its seconds",
			show(after.OfferedPerS), show(after.AchievedPerS))
	}
}

// TestTargetsFile: three weighted endpoints, the third made slow: each
// gets its binomial share of the arrivals, and the slow one's latency is
// its own, not spread over the others.
func TestTargetsFile(t *testing.T) {
	const slow = 50 * time.Millisecond
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			time.Sleep(slow)
		}
	}))
	defer srv.Close()
	file := filepath.Join(t.TempDir(), "targets.jsonl")
	lines := `{"name": "home", "url": "` + srv.URL + `/", "weight": 3}
{"method": "POST", "url": "` + srv.URL + `/orders", "body": "{}", "weight": 2}
{"name": "slow", "url": "` + srv.URL + `/slow", "weight": 1}
`
	if err := os.WriteFile(file, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	const n = 600
	s := runJSON(t, "run", "--targets", file, "--rate", "200/s", "--jobs", "600", "--arrival", "constant")
	if len(s.Targets) != 3 {
		t.Fatalf("targets = %+v, want three", s.Targets)
	}
	names := []string{"home", "POST " + srv.URL + "/orders", "slow"}
	sum := 0
	for i, p := range []float64{0.5, 1.0 / 3, 1.0 / 6} {
		got := s.Targets[i]
		sum += got.Requests
		sd := math.Sqrt(n * p * (1 - p))
		if got.Name != names[i] || math.Abs(float64(got.Requests)-n*p) > 4*sd || got.OK != got.Requests {
			t.Errorf("target %d = %+v, want %q with %.0f ± %.0f requests, all ok", i, got, names[i], n*p, 4*sd)
		}
	}
	if sum != s.Requests.Total {
		t.Errorf("the targets' requests add up to %d, the run's to %d", sum, s.Requests.Total)
	}
	slowP50, fastP50 := s.Targets[2].Latency.P50, s.Targets[0].Latency.P50
	if slowP50 == nil || fastP50 == nil || *slowP50 < float64(slow/time.Millisecond) || *fastP50 >= *slowP50 {
		t.Errorf("p50 of the slow endpoint %v ms, of home %v ms: want the slow one at least %v and above home", slowP50, fastP50, slow)
	}
}

// TestTargetsSummarisedAgain: the raw records of a run of a targets file,
// exported and summarised again (tare runs import, tare report FILE), keep
// their figures per request, under the requests' names.
func TestTargetsSummarisedAgain(t *testing.T) {
	t.Setenv("TARE_DB", filepath.Join(t.TempDir(), "targets.db"))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	dir := t.TempDir()
	file := filepath.Join(dir, "targets.jsonl")
	lines := `{"name": "home", "url": "` + srv.URL + `/", "weight": 2}
{"name": "orders", "method": "POST", "url": "` + srv.URL + `/orders", "body": "{}"}
`
	if err := os.WriteFile(file, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := tareCmd(t, "run", "--targets", file, "--rate", "200/s", "--jobs", "60", "--quiet", "--json")
	if code != 0 {
		t.Fatalf("run: exit %d\n%s", code, stderr)
	}
	var ran tare.Summary
	if err := json.Unmarshal([]byte(stdout), &ran); err != nil {
		t.Fatal(err)
	}
	records := filepath.Join(dir, "run.jsonl")
	if code, _, stderr := tareCmd(t, "runs", "export", ran.Run.ID, "-o", records); code != 0 {
		t.Fatalf("export: exit %d\n%s", code, stderr)
	}
	code, stdout, stderr = tareCmd(t, "runs", "import", records)
	m := regexp.MustCompile(`as run (\S+)`).FindStringSubmatch(stdout)
	if code != 0 || m == nil {
		t.Fatalf("import: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = tareCmd(t, "runs", "show", m[1], "--json")
	var again tare.Summary
	if code != 0 || json.Unmarshal([]byte(stdout), &again) != nil {
		t.Fatalf("show: exit %d\n%s%s", code, stdout, stderr)
	}
	if len(again.Targets) != 2 || len(ran.Targets) != 2 {
		t.Fatalf("targets summarised again: %+v; want those of the run: %+v", again.Targets, ran.Targets)
	}
	for i, want := range ran.Targets {
		if got := again.Targets[i]; got.Name != want.Name || got.Requests != want.Requests || got.OK != want.OK {
			t.Errorf("target %d summarised again: %s, %d requests, %d ok; the run had %s, %d, %d", i, got.Name, got.Requests, got.OK, want.Name, want.Requests, want.OK)
		}
	}
}

// TestPromptsDriveTheModel: a prompt dataset and synthetic prompts drive
// the simulated model; every request's prompt tokens (from the server's
// usage) are the words asked, and its output tokens the budget asked.
func TestPromptsDriveTheModel(t *testing.T) {
	// Answers longer than any budget, so each stops at its max_tokens.
	srv := testservice.Model(t, modelsim.Config{TokenCost: 20 * time.Microsecond, PromptCost: time.Microsecond, MeanTokens: 4000})
	file := filepath.Join(t.TempDir(), "prompts.jsonl")
	dataset := `{"prompt": "one two three", "max_tokens": 5}
{"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "four five six seven"}], "max_tokens": 9}
{"prompt": "eight"}
`
	if err := os.WriteFile(file, []byte(dataset), 0o644); err != nil {
		t.Fatal(err)
	}
	ps, err := prompts.Read(file, false)
	if err != nil {
		t.Fatal(err)
	}
	sources := map[string]tare.Prompts{
		"dataset":   prompts.Dataset(ps, prompts.Lengths{Mean: 7}, 1),
		"synthetic": prompts.Synthetic(prompts.Lengths{Mean: 40, Spread: 10}, prompts.Lengths{Mean: 20, Spread: 5}, 1),
	}
	for name, src := range sources {
		t.Run(name, func(t *testing.T) {
			c, err := openai.New(openai.Config{URL: srv.URL + "/v1", Prompts: src})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			for seq := range uint64(12) {
				asked := src(seq)
				words := 0
				for _, m := range asked.Messages {
					words += len(strings.Fields(m.Content))
				}
				res := tare.Result{Seq: seq}
				c.Do(context.Background(), &res)
				if res.Err != "" {
					t.Fatalf("arrival %d: %s", seq, res.Err)
				}
				if res.PromptTokens != words || res.PromptTokenSource != "usage" {
					t.Errorf("arrival %d: %d prompt tokens (%s), asked %d words", seq, res.PromptTokens, res.PromptTokenSource, words)
				}
				if res.OutputTokens != asked.MaxTokens || res.TokenSource != "usage" {
					t.Errorf("arrival %d: %d output tokens (%s), asked max_tokens %d", seq, res.OutputTokens, res.TokenSource, asked.MaxTokens)
				}
			}
		})
	}

	// The same through tare run: the summary's input tokens are the sum.
	s := runJSON(t, "run", "--model", srv.URL+"/v1", "--prompts", file, "--output-tokens", "7", "--rate", "50/s", "--jobs", "6", "--arrival", "constant")
	m := s.Model
	// Twice (3 + 2 + 4 + 1) words in (the system message counts too),
	// twice (5 + 9 + 7) tokens out.
	if m == nil || m.InputTokens == nil || *m.InputTokens != 20 || m.InputTokenSource != "usage" || m.OutputTokens != 42 || m.InputTokensPerS == nil {
		b, _ := json.Marshal(m)
		t.Errorf("model summary %s: want 20 input tokens from usage, 42 output", b)
	}
}

// TestMixBadInput: each malformed stages, targets and prompts form exits 2
// with the line (for files) and the accepted form, and sends nothing.
func TestMixBadInput(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	url := srv.URL + "/"
	dir := t.TempDir()
	file := func(name, body string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	plan := file("stages.yaml", "url: "+url+"\nstages: 30s-10/s\n")
	badTargets := file("bad.http", "GET "+url+"\nX-Bad header\n")
	badPrompts := file("bad-prompts.jsonl", `{"prompt": "a"}`+"\n"+`{"text": "b"}`+"\n")
	const model = "http://127.0.0.1:9/v1"
	badJSON := file("bad.jsonl", `{"url": "`+url+`"}`+"\n"+`{"url": "`+url+`", "weight": -1}`+"\n")
	const form = "stages must look like 30s:10/s,2m:50/s"
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"stages no colon", []string{"run", "--url", url, "--stages", "30s-10/s"}, `--` + form},
		{"stages bad duration", []string{"run", "--url", url, "--stages", "30s:10/s,soon:5/s"}, `stage 2 "soon:5/s" does not start with a duration like 30s or 2m`},
		{"stages bad rate", []string{"run", "--url", url, "--stages", "30s:fast"}, `stage 1 "30s:fast" does not end with a rate like 10/s or 0/s`},
		{"stages no time", []string{"run", "--url", url, "--stages", "0s:10/s"}, "which lasts no time"},
		{"stages all zero", []string{"run", "--url", url, "--stages", "10s:0/s"}, "whose rate is 0 throughout"},
		{"stages and rate", []string{"run", "--url", url, "--stages", "10s:5/s", "--rate", "5/s"}, "--stages sets the rate of every moment: drop --rate"},
		{"stages in a sweep", []string{"sweep", "--url", url, "--slo", "p95<=1s", "--stages", "10s:5/s"}, "a sweep sets each step's rate itself: drop --stages"},
		{"stages in a plan", []string{"protocol", "run", plan, "--now"}, "stages.yaml, line 2, key stages: " + form},
		{"targets bad header", []string{"run", "--targets", badTargets}, `--targets file "` + badTargets + `", line 2: header must look like "Name: value"; got "X-Bad header"; the file must be vegeta's http format`},
		{"targets bad weight", []string{"run", "--targets", badJSON}, `line 2: weight must be a positive number; got -1; the file must be JSON lines like {"name"`},
		{"targets missing", []string{"run", "--targets", "/nonexistent/t.http"}, `targets file "/nonexistent/t.http" does not exist`},
		{"targets and url", []string{"run", "--targets", badTargets, "--url", url}, "--targets names the requests: drop --url"},
		{"targets and body", []string{"run", "--targets", badTargets, "--body", "x"}, "--targets sets each request's method and body: drop --body"},
		{"targets order alone", []string{"run", "--url", url, "--targets-order"}, "--targets-order needs --targets FILE"},
		{"prompts bad line", []string{"run", "--model", model, "--prompts", badPrompts}, `--prompts file "` + badPrompts + `", line 2: none of prompt, messages or conversations; the file must be JSON lines like {"prompt"`},
		{"prompts missing", []string{"run", "--model", model, "--prompts", "/nonexistent/p.jsonl"}, `prompts file "/nonexistent/p.jsonl" does not exist`},
		{"prompts without a model", []string{"run", "--url", url, "--prompts", badPrompts}, "--prompts, --input-tokens and --output-tokens feed a model: give --model URL or --queue URL"},
		{"prompts and prompt", []string{"run", "--model", model, "--input-tokens", "5", "--prompt", "hi"}, "--prompt is one prompt for every request: drop it"},
		{"input tokens", []string{"run", "--model", model, "--input-tokens", "many"}, `--input-tokens must be MEAN or MEAN,SPREAD in tokens, like 512,128; got "many"`},
		{"output tokens", []string{"run", "--model", model, "--output-tokens", "128,-3"}, `--output-tokens must be MEAN or MEAN,SPREAD in tokens, like 512,128; got "128,-3"`},
		{"reply without sharegpt", []string{"run", "--model", model, "--output-tokens", "reply"}, "--output-tokens reply takes the budget from a ShareGPT --prompts file"},
		{"warmup negative", []string{"run", "--url", url, "--warmup", "-1s"}, "--warmup must be 0 or more, like 10s; got -1s"},
		{"warmup whole run", []string{"run", "--url", url, "--duration", "5s", "--warmup", "5s"}, "--warmup 5s is as long as the run (5s)"},
		{"warmup whole stages", []string{"run", "--url", url, "--stages", "3s:5/s", "--warmup", "4s"}, "--warmup 4s is as long as the run (3s)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("TARE_DB", filepath.Join(dir, "bad.db"))
			code, stdout, stderr := tareCmd(t, tt.args...)
			if code != 2 {
				t.Errorf("exit %d, want 2; stdout %q stderr %q", code, stdout, stderr)
			}
			if !strings.Contains(stderr, tt.want) {
				t.Errorf("stderr %q does not contain %q", stderr, tt.want)
			}
		})
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("bad input sent %d requests; want none", n)
	}
}
