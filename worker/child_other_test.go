//go:build !linux

package worker_test

// The crash test re-executes the test binary with Linux-only process
// attributes; elsewhere there is no child mode.
const childEnv = "TARE_TEST_WORKER_CHILD"

func childMain() int { return 2 }
