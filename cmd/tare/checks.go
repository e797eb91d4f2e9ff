package main

import (
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/worker"
)

// checkWorkerFlags validates tare worker's figures before anything
// connects, naming the flag: the worker package would take 0 for its
// default and report a negative figure only once running.
func checkWorkerFlags(cfg worker.Config) error {
	switch {
	case cfg.Concurrency < 1:
		return tare.Errorf(tare.EINVALID, "--concurrency must be at least 1; got %d", cfg.Concurrency)
	case cfg.ClaimIdle < worker.MinClaimIdle:
		return tare.Errorf(tare.EINVALID, "--claim-idle must be %s or more, like 30s; got %s", worker.MinClaimIdle, cfg.ClaimIdle)
	case cfg.Grace < 0:
		return tare.Errorf(tare.EINVALID, "--grace must be 0 or more; got %s", cfg.Grace)
	case cfg.MaxDeliveries < 1:
		return tare.Errorf(tare.EINVALID, "--max-deliveries must be at least 1; got %d", cfg.MaxDeliveries)
	}
	return nil
}

func init() {
	// go-redis logs each failed dial of its pool to stderr, where the lines
	// would break into the progress line and the summary. tare reports a
	// Redis outage itself: as errors of kind "queue unavailable", in the
	// verdict's warnings, or as the command's error.
	redis.SetLogger(&logging.VoidLogger{})
}

// checkWindow validates a --window filter: an unknown window would match
// no run and look like an empty store.
func checkWindow(w string) error {
	switch w {
	case "", "peak", "offpeak", "mid":
		return nil
	}
	return tare.Errorf(tare.EINVALID, "--window must be peak, offpeak or mid; got %q", w)
}
