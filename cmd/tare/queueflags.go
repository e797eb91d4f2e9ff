package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// queueFlags name a Redis job queue the same way in every command that
// takes one: --queue is the Redis URL holding it and --queue-name its name,
// as in tare run (tare worker and tare cleanup once took --redis URL and
// --queue NAME: both still work, deprecated).
type queueFlags struct {
	url  string
	name string
}

func (f *queueFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.Var(&queueURLValue{f: f, warn: stderrOf(cmd)}, "queue", "the Redis holding the queue, like redis://127.0.0.1:6379/0")
	fs.StringVar(&f.name, "queue-name", "tare", "the queue's name: its keys are tare:<name>:*")
	fs.StringVar(&f.url, "redis", "", "the Redis holding the queue")
	deprecate(cmd, "redis", "use --queue, as tare run does")
}

// queueURLValue is --queue. A value that is no URL is the queue's name in
// the spelling tare worker and tare cleanup had before --queue meant the
// URL there too: a URL always has a scheme (redis://, rediss://, unix://),
// a queue name never has a colon.
type queueURLValue struct {
	f    *queueFlags
	warn io.Writer
}

func (v *queueURLValue) String() string { return v.f.url }

func (v *queueURLValue) Type() string { return "string" }

func (v *queueURLValue) Set(s string) error {
	if s != "" && !strings.Contains(s, "://") {
		fmt.Fprintf(v.warn, "Flag --queue with a queue name has been deprecated, use --queue-name %s (--queue is the Redis URL, as in tare run)\n", s)
		v.f.name = s
		return nil
	}
	v.f.url = s
	return nil
}

// deprecate marks the flag old of cmd deprecated, hidden from the help,
// with a message saying what to use instead. The warning goes to stderr:
// cobra prints the warnings of its flags to stdout, which would break the
// output a script reads there.
func deprecate(cmd *cobra.Command, old, use string) {
	fs := cmd.Flags()
	fs.SetOutput(stderrOf(cmd))
	if err := fs.MarkDeprecated(old, use); err != nil {
		panic(fmt.Sprintf("deprecate --%s: %v", old, err)) // a flag of ours that does not exist
	}
}

// stderrOf writes to cmd's stderr as it is when written to: tests and main
// set it on the root after the commands are built.
func stderrOf(cmd *cobra.Command) io.Writer {
	return writerFunc(func(p []byte) (int, error) { return cmd.ErrOrStderr().Write(p) })
}

type writerFunc func([]byte) (int, error)

func (w writerFunc) Write(p []byte) (int, error) { return w(p) }

var _ pflag.Value = (*queueURLValue)(nil)
