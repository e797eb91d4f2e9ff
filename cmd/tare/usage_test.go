package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tare-dev/tare"
)

// TestUsageErrors: cobra's own errors (an unknown command or flag, a flag
// without its value, the wrong number of arguments) come back typed, as a
// tare.Error (code EINVALID) wrapping a usageError, with how to get help;
// a bad flag value is a tare.Error that names the flag, not a usage error.
func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		want  string
		usage bool
	}{
		{"unknown command", []string{"fly"}, "unknown command \"fly\" for \"tare\"\nRun 'tare --help' for usage.", true},
		{"unknown flag", []string{"run", "--bogus"}, "unknown flag: --bogus\nRun 'tare run --help' for usage.", true},
		{"unknown shorthand", []string{"check", "-z"}, "unknown shorthand flag: 'z' in -z\nRun 'tare check --help' for usage.", true},
		{"flag without value", []string{"run", "--rate"}, "flag needs an argument: --rate\nRun 'tare run --help' for usage.", true},
		{"no args wanted", []string{"version", "x"}, "unknown command \"x\" for \"tare version\"\nRun 'tare version --help' for usage.", true},
		{"too few args", []string{"compare"}, "requires at least 1 arg(s), only received 0\nRun 'tare compare --help' for usage.", true},
		{"exact args", []string{"runs", "show"}, "accepts 1 arg(s), received 0\nRun 'tare runs show --help' for usage.", true},
		{"completion", []string{"completion", "bash", "x"}, "unknown command \"x\" for \"tare completion bash\"\nRun 'tare completion bash --help' for usage.", true},
		{"bad value", []string{"run", "--url", "http://127.0.0.1:1/", "--rate", "fast"}, `--rate must look like 200/s, 12/m or 3/h; got "fast"`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			err := run(context.Background(), tt.args, strings.NewReader(""), &out, &errb)
			if err == nil {
				t.Fatal("no error")
			}
			var ue *usageError
			if errors.As(err, &ue) != tt.usage {
				t.Errorf("errors.As(usageError) = %v, want %v: %v", !tt.usage, tt.usage, err)
			}
			if code := tare.ErrorCode(err); code != tare.EINVALID {
				t.Errorf("code %q, want %q", code, tare.EINVALID)
			}
			if got := tare.ErrorMessage(err); got != tt.want {
				t.Errorf("message %q, want %q", got, tt.want)
			}
			if code := exitCode(err, &errb); code != 2 {
				t.Errorf("exit %d, want 2", code)
			}
		})
	}
}
