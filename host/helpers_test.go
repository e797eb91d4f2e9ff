package host

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/procfs"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// TestTruthThreadsComeAndGo, TestTruthServer and TestTruthWakeups
	// re-execute this binary as their service.
	if os.Getenv(churnEnv) != "" {
		churnMain()
		return
	}
	if os.Getenv(sleeperEnv) != "" {
		sleeperMain()
		return
	}
	if work := os.Getenv(serverEnv); work != "" {
		serverMain(work)
		return
	}
	goleak.VerifyTestMain(m)
}

// near reports whether two shares agree to well below anything printed.
func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// nearPtr is near for optional figures: both nil, or both set and near.
func nearPtr(a, b *float64) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return near(*a, *b)
}

func fmtPtr(p *float64) any {
	if p == nil {
		return "nil"
	}
	return *p
}

// procFS opens a fixture directory as a proc filesystem.
func procFS(t *testing.T, dir string) procfs.FS {
	t.Helper()
	fs, err := procfs.NewFS(dir)
	if err != nil {
		t.Fatalf("open fixture %s: %v", dir, err)
	}
	return fs
}

// replaceTree makes dst a copy of src, so a sampler rooted at dst sees the
// next reading of a fixture.
func replaceTree(t *testing.T, src, dst string) {
	t.Helper()
	entries, err := os.ReadDir(dst)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dst, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatalf("copy fixture %s: %v", src, err)
	}
}

// writeFiles creates files (path → content) under dir.
func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
