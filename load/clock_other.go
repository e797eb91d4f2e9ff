//go:build !linux

package load

import "time"

// sleepPrecise falls back to time.Sleep where nanosleep is not at hand.
func sleepPrecise(d time.Duration) { time.Sleep(d) }
