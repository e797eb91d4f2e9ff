package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

// TestOneNameForOneThing: every command names the queue's Redis --queue and
// its name --queue-name, as tare run does, and the simulated model's id is
// --model-name, as in tare run and tare worker; the spellings tare worker,
// tare cleanup and tare model documented before still work, deprecated,
// with the warning on stderr (issue 20, item 8).
func TestOneNameForOneThing(t *testing.T) {
	t.Run("cleanup", func(t *testing.T) {
		name := fmt.Sprintf("flagnames-%d", time.Now().UnixNano())
		code, now, stderr := tareCmd(t, "cleanup", "--queue", redisURL(), "--queue-name", name, "--wait", "0s")
		if code != 0 || !strings.Contains(now, fmt.Sprintf("keys of queue %q", name)) || strings.Contains(stderr, "deprecated") {
			t.Fatalf("cleanup --queue URL --queue-name NAME: exit %d\n%s%s", code, now, stderr)
		}
		code, before, stderr := tareCmd(t, "cleanup", "--redis", redisURL(), "--queue", name, "--wait", "0s")
		if code != 0 || before != now {
			t.Errorf("cleanup --redis URL --queue NAME: exit %d, printed\n%s\nwant as the new spelling:\n%s", code, before, now)
		}
		for _, want := range []string{"Flag --redis has been deprecated, use --queue", "use --queue-name " + name} {
			if !strings.Contains(stderr, want) {
				t.Errorf("the old spelling: stderr %q lacks %q", stderr, want)
			}
		}
		if strings.Contains(before, "deprecated") {
			t.Errorf("a deprecation warning went to stdout:\n%s", before)
		}
	})

	t.Run("worker", func(t *testing.T) {
		for _, args := range [][]string{{"--queue", "ftp://x"}, {"--redis", "ftp://x"}} {
			code, _, stderr := tareCmd(t, append([]string{"worker", "--model", "http://127.0.0.1:1/v1"}, args...)...)
			if code != 2 || !strings.Contains(stderr, `--queue: redis URL "ftp://x"`) {
				t.Errorf("worker %v: exit %d, %s; want 2 naming --queue", args, code, stderr)
			}
		}
	})

	t.Run("model", func(t *testing.T) {
		for _, flag := range []string{"--model-name", "--name"} {
			line, stderr := modelFirstLine(t, "model", flag, "qwen-sim", "--listen", "127.0.0.1:0", "--token-cost", "100us")
			if !strings.Contains(line, `serving "qwen-sim"`) {
				t.Errorf("model %s qwen-sim: %q, want it serving qwen-sim", flag, line)
			}
			if deprecated := strings.Contains(stderr, "Flag --name has been deprecated, use --model-name"); deprecated != (flag == "--name") {
				t.Errorf("model %s: stderr %q; want the deprecation warning for --name only", flag, stderr)
			}
		}
	})

	t.Run("help", func(t *testing.T) {
		for _, c := range []string{"worker", "cleanup"} {
			_, help, _ := tareCmd(t, c, "--help")
			if !strings.Contains(help, "--queue string") || !strings.Contains(help, "--queue-name string") || strings.Contains(help, "--redis") {
				t.Errorf("%s --help: want --queue and --queue-name, and the deprecated --redis hidden:\n%s", c, help)
			}
		}
		_, help, _ := tareCmd(t, "run", "--help")
		help = help[strings.Index(help, "Flags:"):]
		for _, flag := range []string{"--prompt", "--max-tokens"} {
			i := strings.Index(help, flag+" ")
			if i < 0 || !strings.Contains(help[i:i+strings.Index(help[i:], "\n")], "with --queue") {
				t.Errorf("run --help: %s does not say it shapes queue jobs too", flag)
			}
		}
		if _, help, _ := tareCmd(t, "model", "--help"); !strings.Contains(help, "--model-name string") || strings.Contains(help, "--name ") {
			t.Errorf("model --help: want --model-name, and the deprecated --name hidden:\n%s", help)
		}
	})
}

// modelFirstLine runs tare model in-process until it has printed its first
// line (where it serves), then stops it; it returns that line, and what
// came before it on stderr.
func modelFirstLine(t *testing.T, args ...string) (line, before string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := run(ctx, args, strings.NewReader(""), io.Discard, pw)
		pw.CloseWithError(err)
		done <- err
	}()
	r := bufio.NewReader(pr)
	var b strings.Builder
	for {
		l, err := r.ReadString('\n')
		if err != nil {
			cancel()
			t.Fatalf("tare %v printed no address: %v (%s)", args, err, b.String())
		}
		if strings.HasPrefix(l, "tare model: serving") {
			line = l
			break
		}
		b.WriteString(l)
	}
	cancel()
	go io.Copy(io.Discard, pr)
	if err := <-done; err != nil {
		t.Errorf("tare %v: %v", args, err)
	}
	return line, b.String()
}
