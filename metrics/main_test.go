package metrics_test

import (
	"testing"

	"github.com/tare-dev/tare/internal/testkit/leakcheck"
)

// TestMain fails the package's tests if any goroutine outlives them: the
// /metrics server, and the scrapes it serves, end with the run.
func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }
