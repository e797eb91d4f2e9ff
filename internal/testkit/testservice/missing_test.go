package testservice

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestMissingHelper is not a test: TestMissing runs it in a process of its
// own, where it calls Unavailable, explicit or not (which is Missing), or
// Unable.
func TestMissingHelper(t *testing.T) {
	if os.Getenv("TARE_TEST_MISSING") == "" {
		t.Skip("run by TestMissing")
	}
	if os.Getenv("TARE_TEST_UNABLE") == "1" {
		Unable(t, "no %s here", "frobnicator")
	} else {
		Unavailable(t, os.Getenv("TARE_TEST_EXPLICIT") == "1", "no %s here", "frobnicator")
	}
	t.Log("went on after Missing")
}

// TestMissing: a missing dependency, or what the machine does not allow
// (Unable), skips the test, its message marked for scripts/test's list,
// except under CI (CI=true, 1), where it fails it, and so does a service
// the environment named; either way with the message, and the test goes
// no further.
func TestMissing(t *testing.T) {
	for _, tt := range []struct {
		ci       string
		explicit string
		unable   string
		fail     bool
		want     string
	}{
		{"", "", "", false, MissingMark + "no frobnicator here"},
		{"false", "", "", false, MissingMark + "no frobnicator here"},
		{"true", "", "", true, "--- FAIL: TestMissingHelper"},
		{"1", "", "", true, "--- FAIL: TestMissingHelper"},
		{"", "1", "", true, "--- FAIL: TestMissingHelper"},
		{"", "", "1", false, UnableMark + "no frobnicator here"},
		{"true", "", "1", true, "--- FAIL: TestMissingHelper"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestMissingHelper$", "-test.v")
		cmd.Env = append(os.Environ(), "TARE_TEST_MISSING=1", "CI="+tt.ci, "TARE_TEST_EXPLICIT="+tt.explicit, "TARE_TEST_UNABLE="+tt.unable)
		out, err := cmd.CombinedOutput()
		if failed := err != nil; failed != tt.fail || !strings.Contains(string(out), tt.want) ||
			!tt.fail && !strings.Contains(string(out), "--- SKIP: TestMissingHelper") ||
			!strings.Contains(string(out), "no frobnicator here") || strings.Contains(string(out), "went on") {
			t.Errorf("CI=%q explicit=%q unable=%q: %v, want failed=%v, %q and the message, and no further:\n%s", tt.ci, tt.explicit, tt.unable, err, tt.fail, tt.want, out)
		}
	}
}

// TestRabbitMQHelper is not a test: TestRabbitMQUnanswered runs it in a
// process of its own, where it asks for the test RabbitMQ.
func TestRabbitMQHelper(t *testing.T) {
	if os.Getenv("TARE_TEST_RABBITMQ") == "" {
		t.Skip("run by TestRabbitMQUnanswered")
	}
	RabbitMQ(t)
	t.Log("a RabbitMQ answered")
}

// TestRabbitMQUnanswered: a RabbitMQ that TARE_AMQP_URL names and that
// does not answer fails its tests; with none named and none answering on
// the default address, they skip (scripts/test names one only once it
// answers, so that without one they skip, as the README says).
func TestRabbitMQUnanswered(t *testing.T) {
	closed := "amqp://guest:guest@127.0.0.1:" + strconv.Itoa(freePort(t)) + "/"
	for _, tt := range []struct {
		url, want string
	}{
		{closed, "--- FAIL"},
		{"", "--- SKIP"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestRabbitMQHelper$", "-test.v")
		cmd.Env = append(os.Environ(), "TARE_TEST_RABBITMQ=1", "TARE_AMQP_URL="+tt.url, "CI=")
		out, _ := cmd.CombinedOutput()
		if tt.url == "" && strings.Contains(string(out), "a RabbitMQ answered") {
			t.Logf("a RabbitMQ answers on the default address: the unnamed case cannot be shown here")
			continue
		}
		if !strings.Contains(string(out), tt.want) {
			t.Errorf("TARE_AMQP_URL=%q, nothing answering: want %q:\n%s", tt.url, tt.want, out)
		}
	}
}
