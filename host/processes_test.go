package host

import (
	"math"
	"os"
	"testing"

	"github.com/tare-dev/tare"
)

func TestProcessAlive(t *testing.T) {
	me := Processes{}.Self()
	if me.Boot == "" {
		t.Skip("no /proc here")
	}
	dead := me
	dead.Start++ // same PID, another process: a reused PID
	tests := []struct {
		name                 string
		p                    tare.ProcessID
		wantAlive, wantKnown bool
	}{
		{"this process", me, true, true},
		{"a reused PID", dead, false, true},
		{"pid 1 started at another time", tare.ProcessID{Boot: me.Boot, PIDNS: me.PIDNS, PID: 1, Start: math.MaxUint64}, false, true},
		{"another boot", tare.ProcessID{Boot: "other", PIDNS: me.PIDNS, PID: os.Getpid(), Start: me.Start}, false, false},
		{"another PID namespace", tare.ProcessID{Boot: me.Boot, PIDNS: "pid:[1]", PID: os.Getpid(), Start: me.Start}, false, false},
		{"no such PID", tare.ProcessID{Boot: me.Boot, PIDNS: me.PIDNS, PID: math.MaxInt32, Start: 1}, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			alive, known := Processes{}.Alive(tt.p)
			if alive != tt.wantAlive || known != tt.wantKnown {
				t.Errorf("Alive = %v, known %v; want %v, %v", alive, known, tt.wantAlive, tt.wantKnown)
			}
		})
	}
	if _, known := processAlive(me, tare.ProcessID{}); known {
		t.Error("a reader without /proc claims to know")
	}
}
