package host

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/testservice"
)

// writeDirect writes n MiB of zeros to a new file in dir with O_DIRECT,
// then fsyncs it: storage I/O the kernel charges to this process at once,
// whatever the page cache holds.
func writeDirect(t *testing.T, dir string, n int) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, "direct"), os.O_CREATE|os.O_TRUNC|os.O_WRONLY|unix.O_DIRECT, 0o600)
	if err != nil {
		t.Fatalf("open for O_DIRECT: %v", err)
	}
	defer f.Close()
	// O_DIRECT wants a buffer aligned to the block size: a mapping is.
	buf, err := unix.Mmap(-1, 0, 1<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(buf)
	for range n {
		if _, err := f.Write(buf); err != nil {
			t.Fatalf("O_DIRECT write: %v", err)
		}
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

// diskDir is a directory on a disk for this test's writes: its TempDir,
// unless that is in memory (tmpfs writes reach no storage, and count none).
func diskDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err == nil && fs.Type != unix.TMPFS_MAGIC && fs.Type != unix.RAMFS_MAGIC {
		return dir
	}
	dir, err := os.MkdirTemp(".", "io-evidence-") // the package's directory, in the checkout
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// TestSamplerIOEvidence, on this host's /proc: a tick in which this test
// wrote with O_DIRECT, and reaped a child (dd) that did too, names this
// process in IOBy with at least both writes (a child's I/O is its
// parent's once reaped); every tick has FixedWorkUS, and PSIIOSome where
// the kernel has /proc/pressure/io.
func TestSamplerIOEvidence(t *testing.T) {
	if _, err := os.Stat("/proc/self/io"); err != nil {
		testservice.Unable(t, "no /proc/self/io (a kernel without task I/O accounting): %v", err)
	}
	dd, err := exec.LookPath("dd")
	if err != nil {
		testservice.Missing(t, "dd (coreutils): %v", err)
	}
	_, psiErr := os.Stat("/proc/pressure/io")
	dir := diskDir(t)
	s, err := NewSampler(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const mib = 1 << 20
	for tick := range 3 {
		var wrote int64
		if tick == 1 {
			writeDirect(t, dir, 16)
			out, err := exec.Command(dd, "if=/dev/zero", "of="+filepath.Join(dir, "dd"), "bs=1M", "count=16", "oflag=direct", "conv=fsync").CombinedOutput()
			if err != nil {
				t.Fatalf("dd: %v: %s", err, out)
			}
			wrote = 32 * mib
		}
		time.Sleep(tare.MinTick)
		hs, err := s.Sample(time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if hs.FixedWorkUS == nil || *hs.FixedWorkUS <= 0 {
			t.Errorf("tick %d: fixed work took %v µs, want a time above 0", tick, fmtPtr(hs.FixedWorkUS))
		}
		if psiErr == nil && (hs.PSIIOSome == nil || *hs.PSIIOSome < 0 || *hs.PSIIOSome > 100) {
			t.Errorf("tick %d: I/O pressure %v, want a share in [0, 100] (/proc/pressure/io exists)", tick, fmtPtr(hs.PSIIOSome))
		}
		for i := 1; i < len(hs.IOBy); i++ {
			if hs.IOBy[i].Bytes > hs.IOBy[i-1].Bytes || hs.IOBy[i].Bytes <= 0 {
				t.Errorf("tick %d: IOBy not the busiest first, or with an idle process: %+v", tick, hs.IOBy)
			}
		}
		if wrote == 0 {
			continue
		}
		var self int64
		for _, p := range hs.IOBy {
			if p.PID == os.Getpid() {
				self = p.Bytes
				if want := s.prev.Procs[p.PID].Comm; p.Name != want || want == "" {
					t.Errorf("tick %d: this process named %q in IOBy, %q in the process table", tick, p.Name, want)
				}
			}
		}
		if self < wrote {
			t.Errorf("tick %d: this process wrote %d bytes (itself and its reaped dd); IOBy %+v", tick, wrote, hs.IOBy)
		}
		t.Logf("tick %d: I/O pressure %v %%, fixed work %v µs, IOBy %+v", tick, fmtPtr(hs.PSIIOSome), fmtPtr(hs.FixedWorkUS), hs.IOBy)
	}
	if w := s.Warnings(); len(w) > 0 {
		t.Logf("warnings: %v", w)
	}
}
