package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/arrival"
	"github.com/tare-dev/tare/httptarget"
)

type demoFlags struct {
	load  loadFlags
	host  hostFlags
	judge judgeFlags
	store storeFlags
	work  int
}

func newDemoCmd() *cobra.Command {
	var f demoFlags
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Measure an embedded service on loopback, no setup needed",
		Long: `Start an embedded HTTP service on loopback whose handler does a little real
CPU work, send it about 20 seconds of Poisson arrivals, sample the host
during the same seconds, and print the summary and verdict.

Nothing to install or start: this is tare end to end on one machine. Run it
twice, at a quiet and a busy moment, and compare the verdicts.`,
		Example: `  tare demo
  tare demo --rate 100/s --duration 10s
  tare demo --json > demo.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDemo(cmd, &f)
		},
	}
	fs := cmd.Flags()
	fs.IntVar(&f.work, "work", 2000, "SHA-256 rounds of CPU work per request in the embedded service")
	f.load.register(fs, arrival.Rate(50), 0, 20*time.Second)
	f.host.register(fs)
	f.judge.register(fs)
	f.store.registerNoStore(fs)
	return cmd
}

func runDemo(cmd *cobra.Command, f *demoFlags) error {
	if f.work < 0 {
		return tare.Errorf(tare.EINVALID, "--work must be 0 or more rounds; got %d", f.work)
	}
	sched, err := f.load.schedule()
	if err != nil {
		return err
	}
	j, err := f.judge.judging()
	if err != nil {
		return err
	}
	sampling, err := f.host.config(os.Getpid())
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return tare.Errorf(tare.EUNAVAILABLE, "start the demo service on loopback: %v", err)
	}
	srv := &http.Server{Handler: busyHandler(f.work), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	}()

	target, err := httptarget.New(httptarget.Config{URL: "http://" + ln.Addr().String() + "/work", MaxConns: f.load.maxInFlight})
	if err != nil {
		return err
	}
	defer target.Close()
	if !f.judge.quiet {
		fmt.Fprintf(cmd.ErrOrStderr(), "tare demo: %s against an embedded service at %s (%d SHA-256 rounds a request)\n", sched, ln.Addr(), f.work)
	}
	st, err := f.store.open(cmd.Context())
	if err != nil {
		return err
	}
	if st != nil {
		defer st.Close()
	}
	m := measurement{
		store:    st,
		run:      tare.Run{Label: orDefault(f.load.label, "demo"), Window: f.load.window, Target: target.String(), Arrival: sched.String(), Version: version, Config: redactedConfig(cmd)},
		target:   target,
		schedule: sched,
		rate:     float64(f.load.rate),
		engine:   f.load.engine(),
		sampler:  sampling,
		judging:  j,
		progress: newProgress(cmd.ErrOrStderr(), f.judge.quiet, f.load.duration, f.load.jobs),
	}
	return measureAndReport(cmd, m, f.judge.json)
}

// busyHandler burns real CPU for each request, so steal and contention on
// the host show in its latency the way they do in a CPU-bound service.
func busyHandler(rounds int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sum := sha256.Sum256([]byte(r.URL.Path))
		for i := 0; i < rounds; i++ {
			if i%256 == 0 && r.Context().Err() != nil {
				return
			}
			sum = sha256.Sum256(sum[:])
		}
		fmt.Fprintf(w, "%x\n", sum[:8])
	})
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
