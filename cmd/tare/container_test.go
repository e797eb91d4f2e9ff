package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/host"
	"github.com/tare-dev/tare/internal/testkit/interfere"
	"github.com/tare-dev/tare/internal/testkit/testservice"
	"github.com/tare-dev/tare/judge"
)

// TestWatchContainer: as root, a busy process in a real cgroup named as
// docker names a container's (under a cgroup of the test's own), with a
// 20 % CPU quota, and docker's config.v2.json for that id in a fixture
// tree given with --runtime-dir. tare watch --container redis-cache finds
// the process by the container's name, counts its CPU as the system under
// test's, not a neighbour's, and measures its cgroup's throttling:
// polluted by throttling.
func TestWatchContainer(t *testing.T) {
	if testing.Short() {
		t.Skip("real throttling for ~3 s: skipped with -short")
	}
	testservice.Root(t, "making cgroups")
	const id = "863e2e3230752d206d1596588c88d84b695c9080172403208bdfb5b2435821c5" // redis-cache in the fixture tree
	docker, err := filepath.Abs("../../host/testdata/runtimes/var/lib/docker")
	if err != nil {
		t.Fatal(err)
	}
	interfere.Exclusive(t)
	dir := interfere.NamedCgroup(t, host.DefaultCgroupRoot, fmt.Sprintf("tare-test-%d-%d/system.slice/docker-%s.scope", os.Getpid(), time.Now().UnixNano(), id), 20000, 100000)
	busy := interfere.Busy(t)
	interfere.Join(t, dir, busy.Process.Pid)

	s := watchJSON(t, "--container", "redis-cache", "--runtime-dir", "docker="+docker, "--", "sleep", "3")
	u := s.SUT
	if u == nil || !slices.Equal(u.PIDs, []int{busy.Process.Pid}) || !strings.Contains(u.FoundBy, "container `redis-cache` (docker 863e2e323075, redis:7)") {
		t.Fatalf("system under test %+v, want pid %d found by --container redis-cache", u, busy.Process.Pid)
	}
	sig := signalOf(t, s, judge.SignalThrottling)
	t.Logf("found by %s; throttling: %s; cpu_by %+v; verdict %s", u.FoundBy, sig.Detail, s.Host.CPUBy, s.Verdict.Level)
	if !sig.Fired || s.Verdict.Level != tare.Polluted {
		t.Errorf("throttling %+v, level %s: want the container's quota to fire it, polluted", sig, s.Verdict.Level)
	}
	if by := s.Host.CPUBy; by == nil || by.SystemUnderTest < 5 || slices.ContainsFunc(by.TopOthers, func(p tare.ProcessShare) bool { return p.PID == busy.Process.Pid }) {
		t.Errorf("cpu_by %+v: want the container's ~20 %% of a CPU as the system under test's, not among the others", by)
	}
}
