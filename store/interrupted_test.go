package store

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/host"
)

// The child writer's instructions, passed in its environment.
const (
	childEnv    = "TARE_STORE_TEST_CHILD" // the DSN of the store to write to
	childRunEnv = "TARE_STORE_TEST_RUN"   // the run id to create

	childBatches   = 3
	childBatchSize = 400
	childTicks     = 5
)

// childMain is the writer that gets killed: it creates a run, appends
// batches of results and ticks, says "ready" and waits to be killed.
func childMain() int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := OpenWith(ctx, os.Getenv(childEnv), Settings{Processes: host.Processes{}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 3
	}
	id := os.Getenv(childRunEnv)
	if err := s.CreateRun(ctx, newRun(id, base), testEnv); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 3
	}
	for b := range childBatches {
		if err := s.AppendResults(ctx, id, makeResults(b*childBatchSize, childBatchSize)); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 3
		}
	}
	if err := s.AppendTicks(ctx, id, makeTicks(0, childTicks)); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 3
	}
	fmt.Println("ready")
	<-ctx.Done() // killed long before
	return 4
}

// TestInterruptedRun kills a writer with SIGKILL mid-run and reads its run
// back from this process: interrupted, with every batch it wrote.
func TestInterruptedRun(t *testing.T) {
	eachStore(t, func(t *testing.T, s testStore) {
		ctx := testContext(t)
		id := NewRunID()
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"="+s.dsn, childRunEnv+"="+id)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(out).ReadString('\n')
		if line != "ready\n" {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("child said %q (%v), stderr:\n%s", line, err, stderr.String())
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		var exit *exec.ExitError
		if err := cmd.Wait(); !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("child ended with %v, want killed by SIGKILL", err)
		}

		runs, err := s.FindRuns(ctx, tare.RunFilter{ID: id})
		if err != nil || len(runs) != 1 {
			t.Fatalf("FindRuns = %d runs, %v; want 1", len(runs), err)
		}
		if runs[0].Status != tare.StatusInterrupted {
			t.Errorf("status = %q, want %q", runs[0].Status, tare.StatusInterrupted)
		}
		if runs[0].EndedAt.IsZero() || runs[0].EndedAt.After(time.Now()) {
			t.Errorf("EndedAt = %v, want the child's last heartbeat", runs[0].EndedAt)
		}

		sum, err := s.FindSummary(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		want := tare.Requests{Total: childBatches * childBatchSize}
		for _, r := range makeResults(0, want.Total) {
			switch {
			case r.Dropped:
				want.Dropped++
			case r.Err != "":
				want.Errors++
			default:
				want.OK++
			}
		}
		if sum.Run.Status != tare.StatusInterrupted || sum.Requests != want {
			t.Errorf("summary: status %q, requests %+v; want %q, %+v",
				sum.Run.Status, sum.Requests, tare.StatusInterrupted, want)
		}

		got := streamAll(t, s, id)
		if !reflect.DeepEqual(got, makeResults(0, want.Total)) {
			t.Errorf("StreamResults gave %d records, not the %d the child wrote", len(got), want.Total)
		}
		ticks, err := s.FindTicks(ctx, id)
		if err != nil || len(ticks) != childTicks {
			t.Errorf("FindTicks = %d ticks, %v; want %d", len(ticks), err, childTicks)
		}
	})
}
