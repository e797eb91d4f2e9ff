// Package leakcheck fails a package's tests when a goroutine outlives
// them (goleak), except fasthttp's idle-connection sweepers: httptarget's
// lean client starts them, and they outlive Target.Close by up to a sweep
// period, then exit by themselves.
package leakcheck

import (
	"testing"

	"go.uber.org/goleak"
)

// FasthttpCleaners ignores fasthttp's sweepers, for goleak.VerifyNone.
var FasthttpCleaners = []goleak.Option{
	goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*Client).mCleaner"),
	goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner"),
}

// VerifyTestMain runs the package's tests, then fails them if any
// goroutine but fasthttp's sweepers is left: call it from TestMain.
func VerifyTestMain(m *testing.M) { goleak.VerifyTestMain(m, FasthttpCleaners...) }
