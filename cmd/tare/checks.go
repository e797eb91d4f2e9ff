package main

import (
	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/modelsim"
	"github.com/tare-dev/tare/queue"
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
		return tare.Errorf(tare.EINVALID, "--claim-idle must be %s or more, like 5s; got %s", worker.MinClaimIdle, cfg.ClaimIdle)
	case cfg.Grace < 0:
		return tare.Errorf(tare.EINVALID, "--grace must be 0 or more; got %s", cfg.Grace)
	case cfg.MaxDeliveries < 1:
		return tare.Errorf(tare.EINVALID, "--max-deliveries must be at least 1; got %d", cfg.MaxDeliveries)
	}
	return nil
}

func init() {
	// The Redis client logs each failed dial of its pool to stderr, where
	// the lines would break into the progress line and the summary. tare
	// reports a Redis outage itself: as errors of kind "queue unavailable",
	// in the verdict's warnings, or as the command's error.
	queue.DiscardClientLogs()
}

// checkModelFlags validates tare model's figures, naming the flag: the
// simulator takes 0 for its default, so --token-cost 0 would silently
// serve 2ms tokens.
func checkModelFlags(cfg modelsim.Config) error {
	switch {
	case cfg.TokenCost <= 0:
		return tare.Errorf(tare.EINVALID, "--token-cost must be positive, like 2ms; got %s", cfg.TokenCost)
	case cfg.PromptCost <= 0:
		return tare.Errorf(tare.EINVALID, "--prompt-cost must be positive, like 50us; got %s", cfg.PromptCost)
	case cfg.MeanTokens < 1:
		return tare.Errorf(tare.EINVALID, "--mean-tokens must be at least 1; got %d", cfg.MeanTokens)
	case cfg.ContextLength < 1:
		return tare.Errorf(tare.EINVALID, "--context-length must be at least 1, like %d; got %d", modelsim.DefaultContextLength, cfg.ContextLength)
	case cfg.Parallel < 0:
		return tare.Errorf(tare.EINVALID, "--parallel must be 0 (no cap) or more; got %d", cfg.Parallel)
	case !(cfg.ErrorRate >= 0 && cfg.ErrorRate <= 1):
		return tare.Errorf(tare.EINVALID, "--error-rate must be a share from 0 to 1; got %g", cfg.ErrorRate)
	case !(cfg.CutRate >= 0 && cfg.CutRate <= 1):
		return tare.Errorf(tare.EINVALID, "--cut-rate must be a share from 0 to 1; got %g", cfg.CutRate)
	}
	return nil
}
