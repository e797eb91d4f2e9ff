package session

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/arrival"
)

// TestReadPlan: every key of a plan sets the Spec's field it names, typed,
// and the runs record the settings given by flag name, secrets hidden.
func TestReadPlan(t *testing.T) {
	pl, err := ReadPlan("../protocol/testdata/checkout.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := pl.Spec
	want := NewSpec(10, 500, 30*time.Second)
	want.Target.URL, want.Target.Method, want.Target.Body, want.Target.Timeout = "http://127.0.0.1:8080/checkout", "POST", `{"cart": 42}`, 10*time.Second
	want.Target.Headers = []string{"Content-Type: application/json", "X-Team: payments"}
	want.Load.Rate, want.Load.Seed, want.Load.MaxInFlight, want.Load.RateDefault = arrival.Rate(2), 7, 200, false
	want.Host.Tick = time.Second
	want.Judge.SLO, want.Judge.Thresholds.Steal = "p95<=2s", 15
	if !reflect.DeepEqual(s, want) {
		t.Errorf("spec\n%+v\nwant\n%+v", *s, *want)
	}
	if pl.Sweep == nil || *pl.Sweep != (SweepSpec{From: 1, To: 20, Step: 2, Narrow: NewSweepSpec().Narrow, Cooldown: 2 * time.Second}) {
		t.Errorf("sweep %+v", pl.Sweep)
	}
	if s.Load.Span() != 0 {
		t.Errorf("jobs without a duration: the default duration applies (%s); want the jobs alone to bound the run", s.Load.Span())
	}
	cfg := pl.Config(map[string]string{"protocol.plan": pl.Path})
	for k, v := range map[string]string{"url": "http://127.0.0.1:8080/checkout", "header": "Content-Type: application/json\nX-Team: payments",
		"rate": "2/s", "steal-threshold": "15", "tick": "1s", "sweep.to": "20/s", "protocol.plan": pl.Path} {
		if cfg[k] != v {
			t.Errorf("config[%q] = %q; want %q", k, cfg[k], v)
		}
	}
	if _, ok := cfg["duration"]; ok {
		t.Errorf("config has duration %q, which the plan does not set", cfg["duration"])
	}
}

// TestReadPlanErrors: a bad value is named by the plan's line and key, in
// the plan's words, whether the field's type refuses it or the check of
// the whole spec does.
func TestReadPlanErrors(t *testing.T) {
	tests := []struct{ plan, want string }{
		{"url: http://127.0.0.1:9/\njobs: many\n", `line 2, key jobs: jobs must be a whole number; got "many"`},
		{"url: http://127.0.0.1:9/\ninsecure: maybe\n", `line 2, key insecure: insecure must be true or false; got "maybe"`},
		{"url: http://127.0.0.1:9/\nthresholds: {latency-floor: soon}\n", `line 2, key thresholds.latency-floor: latency-floor must be a duration like 30s`},
		{"url: http://127.0.0.1:9/\nheaders: [\"Authorization: Bearer s3cret\"]\nrate: 0/s\n", "line 3, key rate: rate must"},
	}
	for _, tt := range tests {
		path := filepath.Join(t.TempDir(), "p.yaml")
		if err := os.WriteFile(path, []byte(tt.plan), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := ReadPlan(path)
		if err == nil || !strings.Contains(err.Error(), tt.want) || tare.ErrorCode(err) != tare.EINVALID {
			t.Errorf("plan %q: error %v; want one with %q", tt.plan, err, tt.want)
		}
	}
}

// TestPlanConfigRedacts: a credential in a plan's header never reaches the
// runs' configuration.
func TestPlanConfigRedacts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(path, []byte("url: http://127.0.0.1:9/\nheaders: [\"Authorization: Bearer s3cret\", \"X-Team: a\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pl, err := ReadPlan(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := pl.Config(nil)["header"]; strings.Contains(got, "s3cret") || !strings.Contains(got, "X-Team: a") {
		t.Errorf("header config %q: want the Authorization value redacted, the rest kept", got)
	}
}

// TestPlanFilesBesideThePlan: a plan's targets, prompts, CA, certificate
// and key files and its Unix socket, like its @body, are read from the
// plan's directory, not from where tare runs; connections, servername,
// http2 and max-streams are plan keys too.
func TestPlanFilesBesideThePlan(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "p.yaml")
	if err := os.WriteFile(path, []byte("targets: mix.jsonl\nprompts: /abs/prompts.jsonl\nunix-socket: run/app.sock\nconnections: 4\nrate: 1/s\n"+
		"cacert: ca.pem\ncert: certs/client.pem\nkey: /abs/client.key\nservername: api.internal\nhttp2: true\nmax-streams: 8\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pl, err := ReadPlan(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := pl.Spec.Target.Targets; got != filepath.Join(dir, "mix.jsonl") {
		t.Errorf("targets %q; want it beside the plan", got)
	}
	if got := pl.Spec.Target.Prompts; got != "/abs/prompts.jsonl" {
		t.Errorf("prompts %q; want the absolute path kept", got)
	}
	if tg := pl.Spec.Target; tg.CACert != filepath.Join(dir, "ca.pem") || tg.Cert != filepath.Join(dir, "certs", "client.pem") || tg.Key != "/abs/client.key" {
		t.Errorf("cacert %q, cert %q, key %q; want the relative ones beside the plan", tg.CACert, tg.Cert, tg.Key)
	}
	if tg := pl.Spec.Target; tg.ServerName != "api.internal" || !tg.HTTP2 || tg.MaxStreams != 8 {
		t.Errorf("servername %q, http2 %v, max-streams %d; want the plan's", tg.ServerName, tg.HTTP2, tg.MaxStreams)
	}
	if got := pl.Spec.Target.UnixSocket; got != filepath.Join(dir, "run", "app.sock") {
		t.Errorf("unix-socket %q; want it beside the plan", got)
	}
	if got := pl.Spec.Target.Connections; got != 4 {
		t.Errorf("connections %d; want 4", got)
	}
}

// TestPlanErrorInPlanWords: an error about the spec names the plan's
// keys, not the flags, everywhere in its message.
func TestPlanErrorInPlanWords(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(path, []byte("url: http://127.0.0.1:1/\nrate: 2/s\nstages: 10s:5/s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pl, err := ReadPlan(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Prepare(t.Context(), pl.Spec, "the plan")
	if err == nil {
		t.Fatal("stages beside a rate: no error")
	}
	msg := pl.Error(err).Error()
	if !strings.Contains(msg, "line 3, key stages: stages sets the rate") || !strings.Contains(msg, "drop rate: 2/s") || strings.Contains(msg, "--") {
		t.Errorf("error %q: want it at line 3, key stages, in the plan's words (rate:, no --flag)", msg)
	}
}

// TestPlanContainer: a plan names the system under test as a container,
// and where a runtime keeps its state; Sampling checks both.
func TestPlanContainer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(path, []byte("url: http://127.0.0.1:9/\ncontainer: redis-cache\nruntime-dirs: [docker=/data/docker, podman=/home/ci/.local/share/containers/storage]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pl, err := ReadPlan(path)
	if err != nil {
		t.Fatal(err)
	}
	h := pl.Spec.Host
	if h.Container != "redis-cache" || !reflect.DeepEqual(h.RuntimeDirs, []string{"docker=/data/docker", "podman=/home/ci/.local/share/containers/storage"}) {
		t.Fatalf("host spec %+v", h)
	}
	cfg, err := h.Sampling(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg.Runtimes.Docker, []string{"/data/docker"}) || !reflect.DeepEqual(cfg.Runtimes.Storage, []string{"/home/ci/.local/share/containers/storage"}) {
		t.Errorf("runtimes %+v", cfg.Runtimes)
	}
	for _, tt := range []struct {
		h    HostSpec
		want string
	}{
		{HostSpec{Tick: time.Second, RuntimeDirs: []string{"/data/docker"}}, `--runtime-dir "/data/docker": want RUNTIME=DIR`},
		{HostSpec{Tick: time.Second, RuntimeDirs: []string{"rkt=/var/lib/rkt"}}, `unknown container runtime "rkt": want docker, containerd, podman or cri-o`},
	} {
		if _, err := tt.h.Sampling(os.Getpid()); err == nil || !strings.Contains(err.Error(), tt.want) || tare.ErrorCode(err) != tare.EINVALID {
			t.Errorf("%+v: error %v, want one with %q", tt.h, err, tt.want)
		}
	}
}

// TestPlanModelName: a plan names the model of each request as tare run's
// --model-name does (the example of a new setting: one Field line), and
// its runs record it.
func TestPlanModelName(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(path, []byte("model: http://127.0.0.1:9/v1\nmodel-name: qwen-sim\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pl, err := ReadPlan(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := pl.Spec.Target.ModelName; got != "qwen-sim" {
		t.Errorf("model-name %q; want the plan's", got)
	}
	if got := pl.Config(nil)["model-name"]; got != "qwen-sim" {
		t.Errorf("recorded model-name %q; want the plan's", got)
	}
}

// TestPlanErrorKeepsValues: a value that looks like a flag stays what the
// user wrote when the plan words the error: the setting at fault and those
// it names are known by name (tare.SettingError), not read back from the
// message.
func TestPlanErrorKeepsValues(t *testing.T) {
	for _, tt := range []struct {
		name, plan, want string
	}{
		{"server name", "url: https://127.0.0.1:1/\nservername: --rate/x\n", `line 2, key servername: servername must be a host name like api.internal (the name the server's certificate was issued for), without a scheme, port or path; got "--rate/x"`},
		{"url", "url: https://127.0.0.1:1/--rate\nh2c: true\n", `line 2, key h2c: h2c is HTTP/2 in cleartext, for an http:// URL; got "https://127.0.0.1:1/--rate": for HTTP/2 over TLS give http2:`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "p.yaml")
			if err := os.WriteFile(path, []byte(tt.plan), 0o644); err != nil {
				t.Fatal(err)
			}
			pl, err := ReadPlan(path)
			if err != nil {
				t.Fatal(err)
			}
			_, err = Prepare(t.Context(), pl.Spec, "the plan")
			if err == nil {
				t.Fatal("no error")
			}
			if msg := pl.Error(err).Error(); !strings.Contains(msg, tt.want) || strings.Contains(msg, "rate:") {
				t.Errorf("error %q: want %q, the value as given", msg, tt.want)
			}
		})
	}
}
