package testservice

import (
	"os"
	"strconv"
	"testing"
)

// CI reports whether the tests run under CI (CI=true, as CI services set
// it): there scripts/test installs and starts everything the suite needs,
// so nothing the suite needs may be missing.
func CI() bool {
	ci, _ := strconv.ParseBool(os.Getenv("CI"))
	return ci
}

// The words a skip of Missing and of Unable starts with: scripts/test
// lists the skips that carry them, which mean something is missing, and
// only counts the others, which a test makes on purpose (a helper run in
// a process of its own, a case that does not apply here).
const (
	MissingMark = "missing: "
	UnableMark  = "not allowed here: "
)

// Missing ends a test that cannot run for want of something the suite
// needs (a program, a Python module, a service): it skips, saying what is
// missing and how to get it, except under CI, where it fails, so that a
// dependency that did not install cannot pass as a green run whose real
// tests all skipped.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	if CI() {
		t.Fatalf("CI=true, and this test's dependency is missing (scripts/test installs it under CI): "+format, args...)
	}
	t.Skipf(MissingMark+format, args...)
}

// Unable ends a test this machine does not allow: not root, a kernel
// without BTF, no tracefs, no cgroup cpu controller. It skips, saying
// why, except under CI, which runs as root on a kernel with BTF, tracefs
// and a cgroup cpu controller (.ci/run checks them before anything
// else): there it fails, so that what needs them cannot go untested in a
// green run.
func Unable(t testing.TB, format string, args ...any) {
	t.Helper()
	if CI() {
		t.Fatalf("CI=true, and CI runs as root on a kernel with BTF, tracefs and a cgroup cpu controller (.ci/run checks them), yet: "+format, args...)
	}
	t.Skipf(UnableMark+format, args...)
}

// Root ends the test with Unable unless it runs as root; what says what
// needs root.
func Root(t testing.TB, what string) {
	t.Helper()
	if os.Geteuid() != 0 {
		Unable(t, "%s needs root", what)
	}
}

// Unavailable ends a test whose service (Redis, PostgreSQL) did not
// answer or refused what the test needs of it. When the environment named
// the service (explicit: TARE_REDIS_URL, TARE_POSTGRES_DSN, which
// scripts/test always sets) the test fails: the service the run was
// pointed at is broken. Otherwise the service is Missing.
func Unavailable(t testing.TB, explicit bool, format string, args ...any) {
	t.Helper()
	if explicit {
		t.Fatalf(format, args...)
	}
	Missing(t, format, args...)
}
