package session

import (
	"testing"

	"github.com/tare-dev/tare/internal/testkit/leakcheck"
)

// TestMain fails the package's tests if any goroutine outlives them: a
// measurement starts the sampler, the engine, the store's writer and the
// queue's depth reader, and each must end with it.
func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }
