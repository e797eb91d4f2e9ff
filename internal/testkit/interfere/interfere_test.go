package interfere

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tare-dev/tare/internal/testkit/testservice"
)

// TestCPUCgroups: cgroups with a quota are made under the v1 cpu mount,
// or the v2 root when it hands the cpu controller down; not root, no cpu
// controller, or a v2 root that keeps it are not allowed, saying why.
func TestCPUCgroups(t *testing.T) {
	for _, tt := range []struct {
		name    string
		files   map[string]string // "" for a directory
		euid    int
		mount   string
		version string
		why     string // in the error wrapping ErrNotAllowed
	}{
		{name: "v2", files: map[string]string{"cgroup.subtree_control": "cpuset cpu io memory pids\n"}, version: "v2"},
		{name: "v1", files: map[string]string{"cpu,cpuacct": "", "memory": ""}, mount: "cpu,cpuacct", version: "v1"},
		{name: "v1 cpu alone", files: map[string]string{"cpu": ""}, mount: "cpu", version: "v1"},
		{name: "not root", files: map[string]string{"cgroup.subtree_control": "cpu\n"}, euid: 1000, why: "needs root"},
		{name: "nothing", why: "no cgroup cpu controller"},
		{name: "v2 keeping cpu", files: map[string]string{"cgroup.subtree_control": "memory pids\n"}, why: `does not hand the cpu controller to its children (its cgroup.subtree_control is "memory pids"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			for name, content := range tt.files {
				var err error
				if content == "" {
					err = os.Mkdir(filepath.Join(root, name), 0o755)
				} else {
					err = os.WriteFile(filepath.Join(root, name), []byte(content), 0o644)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			dir, version, err := cpuCgroups(root, tt.euid)
			if tt.why != "" {
				if !errors.Is(err, ErrNotAllowed) || !strings.Contains(err.Error(), tt.why) {
					t.Errorf("cpuCgroups: %q, %v; want an error wrapping ErrNotAllowed saying %q", dir, err, tt.why)
				}
				return
			}
			if err != nil || dir != filepath.Join(root, tt.mount) || version != tt.version {
				t.Errorf("cpuCgroups: %q, %q, %v; want %q, %q", dir, version, err, filepath.Join(root, tt.mount), tt.version)
			}
		})
	}
}

// TestQuotaCgroupHelper is not a test: TestQuotaCgroup runs it in a
// process of its own, where it calls QuotaCgroup on TARE_TEST_CGROUP_ROOT
// with a quota of TARE_TEST_QUOTA µs.
func TestQuotaCgroupHelper(t *testing.T) {
	root := os.Getenv("TARE_TEST_CGROUP_ROOT")
	if root == "" {
		t.Skip("run by TestQuotaCgroup")
	}
	quota := map[string]int{"small": 500, "fine": 20000}[os.Getenv("TARE_TEST_QUOTA")]
	QuotaCgroup(t, root, quota, 100000)
	t.Log("made the cgroup")
}

// TestQuotaCgroup: a cgroup the machine does not allow skips the test,
// saying why (under CI it fails); as root, a quota the kernel refuses
// (below its 1 ms minimum), as any failed write of the quota, fails it:
// throttling cannot go untested in a green run.
func TestQuotaCgroup(t *testing.T) {
	type quotaCase struct {
		name, root, quota, ci string
		fail                  bool
		want                  string
	}
	run := func(tt quotaCase) {
		t.Helper()
		cmd := exec.Command(os.Args[0], "-test.run=^TestQuotaCgroupHelper$", "-test.v")
		cmd.Env = append(os.Environ(), "TARE_TEST_CGROUP_ROOT="+tt.root, "TARE_TEST_QUOTA="+tt.quota, "CI="+tt.ci)
		out, err := cmd.CombinedOutput()
		if failed := err != nil; failed != tt.fail || !strings.Contains(string(out), tt.want) {
			t.Errorf("%s: %v, want failed=%v and %q:\n%s", tt.name, err, tt.fail, tt.want, out)
		}
	}
	run(quotaCase{"no cpu controller", t.TempDir(), "fine", "", false, "--- SKIP"})
	run(quotaCase{"no cpu controller, under CI", t.TempDir(), "fine", "true", true, "--- FAIL"})
	const live = "/sys/fs/cgroup"
	if _, _, err := cpuCgroups(live, os.Geteuid()); err != nil {
		testservice.Unable(t, "the cases on %s: %v", live, err)
	}
	run(quotaCase{"a quota the kernel refuses", live, "small", "", true, "--- FAIL"})
	run(quotaCase{"a quota it takes", live, "fine", "", false, "made the cgroup"})
}
