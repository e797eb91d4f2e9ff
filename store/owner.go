package store

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tare-dev/tare"
)

// formatOwner is the stored form of a run's writer, "boot/pidns/pid/start";
// "" when unknown.
func formatOwner(o tare.ProcessID) string {
	if o.Boot == "" {
		return ""
	}
	return fmt.Sprintf("%s/%s/%d/%d", o.Boot, o.PIDNS, o.PID, o.Start)
}

// parseOwner undoes formatOwner. ok is false for "" and for anything
// malformed, which then reads as an owner on another machine.
func parseOwner(s string) (o tare.ProcessID, ok bool) {
	parts := strings.Split(s, "/")
	if len(parts) != 4 || parts[0] == "" || parts[1] == "" {
		return tare.ProcessID{}, false
	}
	pid, err := strconv.Atoi(parts[2])
	if err != nil || pid <= 0 {
		return tare.ProcessID{}, false
	}
	start, err := strconv.ParseUint(parts[3], 10, 64)
	if err != nil {
		return tare.ProcessID{}, false
	}
	return tare.ProcessID{Boot: parts[0], PIDNS: parts[1], PID: pid, Start: start}, true
}
