//go:build !linux

package load

import "context"

func newClock(ctx context.Context) clock { return newTimerClock(ctx) }
