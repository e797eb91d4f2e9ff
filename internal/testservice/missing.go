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
	t.Skipf(format, args...)
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
