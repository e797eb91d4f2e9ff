// Package leakcheck fails a package's tests when a goroutine outlives
// them (goleak). It is the one place to say which goroutines may outlive
// a package's tests; none may now (fasthttp's idle-connection sweepers,
// which outlived Target.Close, went with the lean client).
package leakcheck

import (
	"testing"

	"go.uber.org/goleak"
)

// VerifyTestMain runs the package's tests, then fails them if any
// goroutine is left: call it from TestMain.
func VerifyTestMain(m *testing.M) { goleak.VerifyTestMain(m) }
