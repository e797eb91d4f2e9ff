package host

import (
	"context"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tare-dev/tare/internal/testkit/interfere"
	"github.com/tare-dev/tare/internal/testkit/testservice"
	"github.com/tare-dev/tare/schedprobe"
)

// churnEnv makes the test binary churnMain, the service of
// TestTruthThreadsComeAndGo.
const churnEnv = "TARE_HOST_CHURN"

// churnMain is a many-threaded service whose threads come and go: four
// that stay, each busy 5 ms then asleep 0.2 ms, and a new one every 5 ms
// that is busy for 1 ms and exits (a goroutine that ends locked to its
// thread takes the thread with it), as a pool that starts threads per
// task does (llama.cpp's, per token). It ends after a minute.
func churnMain() {
	busy := func(d time.Duration) {
		for end := time.Now().Add(d); time.Now().Before(end); {
		}
	}
	for range 4 {
		go func() {
			runtime.LockOSThread()
			for {
				busy(5 * time.Millisecond)
				time.Sleep(200 * time.Microsecond)
			}
		}()
	}
	var wg sync.WaitGroup
	for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		wg.Go(func() {
			runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
			busy(time.Millisecond)
		})
	}
	wg.Wait()
}

// TestTruthThreadsComeAndGo: the probe's run delay agrees with
// schedstat's, within the truth check's bound, in at least 95 % of the
// ticks of a service whose threads come and go, sharing its CPU with a
// pinned hog. Schedstat alone loses the waits of a thread that exits (the
// thread is gone from /proc) while the probe counted them: before the
// probe kept each thread's final run delay, every such tick was either
// left out of the check or disagreed.
func TestTruthThreadsComeAndGo(t *testing.T) {
	if testing.Short() {
		t.Skip("real interference for seconds: skipped with -short")
	}
	if err := schedprobe.Expected(); err != nil {
		testservice.Unable(t, "%v", err)
	}
	interfere.Exclusive(t)
	interfere.Busy(t, interfere.Pinned(0)...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	svc := exec.CommandContext(ctx, "taskset", append([]string{"-c", "0"}, os.Args[0], "-test.run=^$")...)
	svc.Env = append(os.Environ(), churnEnv+"=1")
	svc.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := svc.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = svc.Wait() }()
	time.Sleep(200 * time.Millisecond) // taskset execs the service
	s, err := NewSampler(Config{Tick: 500 * time.Millisecond, SUT: []int{svc.Process.Pid}, Tare: []int{os.Getpid()}, SchedProbe: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if why := s.BlameWhy(); why != "" {
		t.Fatalf("the probe did not run as root with BTF: %s", why)
	}
	const ticks = 40
	compared, disagreed := 0, 0
	// The first tick is not compared: the probe did not see the waits
	// already under way when it began to watch.
	for i, hs := range samplesOf(t, s, ticks)[1:] {
		b := hs.Blame
		if b == nil || b.RunDelayPct == nil || hs.RunDelay == nil {
			t.Logf("tick %d: not compared (run delay %v)", i+1, fmtPtr(hs.RunDelay))
			continue
		}
		compared++
		verdict := "agree"
		if hs.Disagrees() {
			disagreed++
			verdict = "DISAGREE"
		}
		t.Logf("tick %d: run delay %.2f%% by the probe, %.2f%% by schedstat (spread %.2f%%): %s", i+1, *b.RunDelayPct, *hs.RunDelay, *b.RunDelaySpreadPct, verdict)
	}
	if compared < (ticks-1)*9/10 {
		t.Errorf("%d of %d ticks compared: want at least 90 %%, a thread that exits must not take its tick out of the check", compared, ticks-1)
	}
	if disagreed*20 > compared {
		t.Errorf("%d of %d ticks disagreed: want at most 5 %%", disagreed, compared)
	}
}
