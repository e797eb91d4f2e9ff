// Command tare is a load tester that knows whose CPU it ran on. See
// `tare help` and the README.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/tare-dev/tare"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() {
		// The first signal stops the arrivals and drains what is in flight;
		// the second exits at once.
		<-signals
		fmt.Fprintln(os.Stderr, "\ntare: stopping, keeping what was measured (Ctrl-C again to exit at once)")
		cancel()
		<-signals
		os.Exit(130)
	}()
	os.Exit(exitCode(run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr), os.Stderr))
}

// exitError carries a non-zero exit status that is not a failure of tare
// itself: a verdict that --fail-on asked to fail on, or a watched command's
// own status.
type exitError struct {
	code   int
	reason string
}

func (e *exitError) Error() string { return e.reason }

// exitCode maps the outcome of run to the process status: 0 success; an
// *exitError's own code (exitSLO, 1, an SLO --fail-on slo failed on a
// trustworthy run; exitInconclusive, 3, a verdict --fail-on asked to fail
// on, or an SLO failed on a polluted run; 1 a deletion not confirmed; a
// watched command's status); 2 usage, config or runtime errors.
func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.reason != "" {
			fmt.Fprintf(stderr, "tare: %s\n", ee.reason)
		}
		return ee.code
	}
	fmt.Fprintf(stderr, "tare: %s\n", tare.ErrorMessage(err))
	return 2
}
