package load

import (
	"time"

	"golang.org/x/sys/unix"
)

// sleepPrecise sleeps in nanosleep(2), which the kernel ends within its
// timer slack rather than at the next millisecond of Go's poller.
func sleepPrecise(d time.Duration) {
	ts := unix.NsecToTimespec(int64(d))
	for unix.Nanosleep(&ts, &ts) == unix.EINTR {
		// Go's preemption signals interrupt the sleep; ts holds the rest.
	}
}
