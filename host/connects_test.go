package host

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/testservice"
	"github.com/tare-dev/tare/schedprobe"
)

// TestSamplerConnectsFailed: where the connection tracer is expected (root,
// tracefs), one that fails to load is a warning of the run, which goes on
// without it, and says what its graph misses.
func TestSamplerConnectsFailed(t *testing.T) {
	if err := schedprobe.ConnectsExpected(); err != nil {
		testservice.Unable(t, "%v", err)
	}
	openConnects = func(*schedprobe.KernelTypes) (*schedprobe.Connects, error) {
		return nil, errors.New("connection tracer: load the eBPF program: the verifier said no")
	}
	t.Cleanup(func() { openConnects = schedprobe.OpenConnectsWith })
	s, err := NewSampler(Config{Tick: tare.MinTick, SUT: []int{os.Getpid()}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	warnings := fmt.Sprint(s.Warnings())
	if s.connects != nil || !strings.Contains(warnings, "the verifier said no") || !strings.Contains(warnings, "misses connections") {
		t.Errorf("warnings %s; want the tracer's failure, and what the graph misses without it", warnings)
	}
}
