package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tare-dev/tare"
)

// TestURLFlagsFromEnvironment: a URL flag not given on the command line
// reads its variable, or the file its _FILE variable names (a mounted
// Secret), so a password need not be on the command line, where
// /proc/<pid>/cmdline shows it to anyone on the host. A target on the
// command line wins over one in the environment, and two targets from it
// are refused.
func TestURLFlagsFromEnvironment(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	secret := filepath.Join(t.TempDir(), "url")
	if err := os.WriteFile(secret, []byte(srv.URL+"/\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	load := []string{"run", "--rate", "100/s", "--jobs", "5", "--quiet", "--json", "--no-store", "--tick", "100ms"}
	for _, tt := range []struct {
		name string
		env  map[string]string
		args []string
		hits int64  // requests the server should see
		err  string // in stderr, with exit 2
	}{
		{name: "variable", env: map[string]string{"TARE_URL": srv.URL + "/"}, hits: 5},
		{name: "file", env: map[string]string{"TARE_URL_FILE": secret}, hits: 5},
		{name: "the command line wins", env: map[string]string{"TARE_QUEUE": "redis://127.0.0.1:1/0"}, args: []string{"--url", srv.URL + "/"}, hits: 5},
		{name: "two targets", env: map[string]string{"TARE_URL": srv.URL + "/", "TARE_MODEL": srv.URL + "/v1"}, err: "$TARE_URL and $TARE_MODEL each name a target: give one target"},
		{name: "value and file", env: map[string]string{"TARE_URL": srv.URL + "/", "TARE_URL_FILE": secret}, err: "both TARE_URL and TARE_URL_FILE are set"},
		{name: "missing file", env: map[string]string{"TARE_URL_FILE": secret + ".gone"}, err: "TARE_URL_FILE names a file tare cannot read"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			hits.Store(0)
			code, stdout, stderr := tareCmd(t, append(load, tt.args...)...)
			if tt.err != "" {
				if code != 2 || !strings.Contains(stderr, tt.err) {
					t.Errorf("exit %d, stderr %q; want 2 and %q", code, stderr, tt.err)
				}
				return
			}
			var s tare.Summary
			if code != 0 || json.Unmarshal([]byte(stdout), &s) != nil {
				t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
			}
			if s.Requests.OK != 5 || hits.Load() != tt.hits {
				t.Errorf("%d ok, the server saw %d; want 5 and %d", s.Requests.OK, hits.Load(), tt.hits)
			}
		})
	}
}

// TestURLFlagsSayTheirVariables: the help of every URL flag names the
// variables it reads.
func TestURLFlagsSayTheirVariables(t *testing.T) {
	for _, tt := range []struct{ cmd, flag, env string }{
		{"run", "--url", "TARE_URL"}, {"run", "--model", "TARE_MODEL"}, {"run", "--queue", "TARE_QUEUE"},
		{"run", "--coordinate", "TARE_COORDINATE"}, {"run", "--db", "TARE_DB"}, {"worker", "--queue", "TARE_QUEUE"},
		{"worker", "--model", "TARE_MODEL"}, {"cleanup", "--queue", "TARE_QUEUE"}, {"check", "--queue", "TARE_QUEUE"},
	} {
		_, stdout, _ := tareCmd(t, tt.cmd, "--help")
		var line string
		for _, l := range strings.Split(stdout, "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), tt.flag+" ") {
				line = l
			}
		}
		if !strings.Contains(line, "$"+tt.env+",") && !strings.Contains(line, "$"+tt.env+" ") || !strings.Contains(line, "$"+tt.env+"_FILE") {
			t.Errorf("tare %s --help: %s does not name $%s and $%s_FILE: %q", tt.cmd, tt.flag, tt.env, tt.env, line)
		}
	}
}
