package rq

import (
	"testing"

	"github.com/tare-dev/tare/queue"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRQFailureKind(t *testing.T) {
	for _, tt := range []struct{ name, traceback, want string }{
		{"raised", "Traceback (most recent call last):\n  File \"tasks.py\", line 9, in boom\n    raise ValueError(\"boom\")\nValueError: boom 2\n", "task raised ValueError"},
		{"dotted type", "Traceback…\nrequests.exceptions.ConnectionError: refused", "task raised requests.exceptions.ConnectionError"},
		{"bare type", "Traceback…\nKeyboardInterrupt", "task raised KeyboardInterrupt"},
		{"unknown function", "  File \"/usr/lib/python3/dist-packages/rq/utils.py\", line 220, in import_attribute\n    attribute_owner = getattr(module, attribute_owner_name)\nAttributeError: module 'tasks' has no attribute 'nope'", queue.KindUnknownTask},
		{"unknown module", "  File \"rq/utils.py\", line 1, in import_attribute\nModuleNotFoundError: No module named 'nope'", queue.KindUnknownTask},
		{"work horse killed", "Work-horse terminated unexpectedly; waitpid returned 9 (signal 9); ", queue.KindTaskFailed},
		{"empty", "", queue.KindTaskFailed},
	} {
		if got := rqFailureKind(tt.traceback); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}
