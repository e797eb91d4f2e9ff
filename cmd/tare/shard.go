package main

import (
	"context"
	"time"

	"github.com/tare-dev/tare"
)

// waitUntil sleeps until t, or returns ctx's error if it ends first.
func waitUntil(ctx context.Context, t time.Time) error {
	if d := time.Until(t); d > 0 {
		return tare.Sleep(ctx, d)
	}
	return nil
}
