package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tare-dev/tare"
)

// TestRunRedirects: tare run against a server that redirects every request
// (nginx's "return 301 /") counts the hops, so the server's real request
// count is in the summary; --redirects 0 reports the 301s as the answers;
// a redirect to another host is not followed unless --redirects-cross-host
// (issue 20, item 1). On both HTTP clients.
func TestRunRedirects(t *testing.T) {
	var hitsA, hitsB atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hitsB.Add(1) }))
	defer other.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hitsA.Add(1)
		switch r.URL.Path {
		case "/old":
			http.Redirect(w, r, "/", http.StatusMovedPermanently)
		case "/away":
			http.Redirect(w, r, other.URL+"/", http.StatusFound)
		}
	}))
	defer srv.Close()

	const jobs = 20
	tests := []struct {
		name         string
		path         string
		flags        []string
		ok, redirs   int
		status       string
		kind         string // the error kind of every request, or ""
		hitsA, hitsB int64
	}{
		{name: "followed and counted", path: "/old", ok: jobs, redirs: jobs, status: "200", hitsA: 2 * jobs},
		{name: "none followed", path: "/old", flags: []string{"--redirects", "0"}, ok: jobs, status: "301", hitsA: jobs},
		{name: "another host refused", path: "/away", status: "302", kind: tare.KindCrossHost, hitsA: jobs},
		{name: "another host when asked", path: "/away", flags: []string{"--redirects-cross-host"}, ok: jobs, redirs: jobs, status: "200", hitsA: jobs, hitsB: jobs},
	}
	for _, client := range []string{"lean", "net-http"} {
		for _, tt := range tests {
			t.Run(client+"/"+tt.name, func(t *testing.T) {
				hitsA.Store(0)
				hitsB.Store(0)
				args := append([]string{"run", "--url", srv.URL + tt.path, "--rate", "200/s", "--jobs", "20", "--quiet", "--json", "--no-store", "--tick", "100ms"}, tt.flags...)
				if client == "net-http" {
					args = append(args, "--net-http")
				}
				code, stdout, stderr := tareCmd(t, args...)
				if code != 0 {
					t.Fatalf("exit %d: %s", code, stderr)
				}
				var s tare.Summary
				if err := json.Unmarshal([]byte(stdout), &s); err != nil {
					t.Fatalf("summary json: %v\n%s", err, stdout)
				}
				if !strings.Contains(stdout, `"redirects": `) {
					t.Errorf("the JSON has no requests.redirects:\n%s", stdout)
				}
				if s.Requests.OK != tt.ok || s.Requests.Redirects != tt.redirs || s.StatusCodes[tt.status] != jobs {
					t.Errorf("requests %+v, status codes %v; want %d ok, %d redirects, %d × %s", s.Requests, s.StatusCodes, tt.ok, tt.redirs, jobs, tt.status)
				}
				if tt.kind != "" && s.ErrorKinds[tt.kind] != jobs {
					t.Errorf("error kinds %v, want %d × %q", s.ErrorKinds, jobs, tt.kind)
				}
				if a, b := hitsA.Load(), hitsB.Load(); a != tt.hitsA || b != tt.hitsB {
					t.Errorf("the server named served %d, the other host %d; want %d and %d", a, b, tt.hitsA, tt.hitsB)
				}
			})
		}
	}

	// The text summary says how many requests the server really served.
	code, stdout, stderr := tareCmd(t, "run", "--url", srv.URL+"/old", "--rate", "200/s", "--jobs", "20", "--quiet", "--no-store", "--tick", "100ms")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if want := "redirects    20 followed: 40 requests sent in all"; !strings.Contains(stdout, want) {
		t.Errorf("the text summary lacks %q:\n%s", want, stdout)
	}
	if code, _, stderr := tareCmd(t, "run", "--url", srv.URL+"/", "--redirects", "-1"); code != 2 || !strings.Contains(stderr, "--redirects must be 0 (follow none) or more") {
		t.Errorf("--redirects -1: exit %d, %s; want 2 naming the flag", code, stderr)
	}
}
