package load

import (
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// The loop's thread asks for a short slice and gives it back: the thread
// returns to Go's pool afterwards.
func TestShortSlice(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before, err := unix.SchedGetAttr(0, 0)
	if err != nil {
		t.Skipf("sched_getattr: %v", err)
	}
	t.Logf("slice before: %d ns", before.Runtime)
	restore := shortSlice()
	during, err := unix.SchedGetAttr(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	restore()
	after, err := unix.SchedGetAttr(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Kernels before 6.12 have no custom slice and report none.
	if before.Runtime != 0 && during.Runtime != uint64(loopSlice) {
		t.Errorf("slice while the loop runs: %d ns, want %d", during.Runtime, loopSlice)
	}
	if after.Runtime != before.Runtime {
		t.Errorf("slice after the loop: %d ns, want it back at %d", after.Runtime, before.Runtime)
	}
}
