package session

import (
	"net"
	"os"
	"strings"
	"testing"

	"github.com/tare-dev/tare/queue"
)

func TestQueueWarnings(t *testing.T) {
	tests := []struct {
		name string
		st   queue.TargetStats
		want string
	}{
		{"quiet", queue.TargetStats{Enqueued: 10, Matched: 10}, ""},
		{"one job", queue.TargetStats{Unavailable: 1, ReadErrors: 1},
			"1 job was touched by a queue outage (queue unavailable): counted as errors; 1 failed read of results, retried with backoff"},
		{"restart", queue.TargetStats{Unavailable: 7, ReadErrors: 12, Lost: 1},
			"7 jobs were touched by a queue outage (queue unavailable): counted as errors; the queue's state was lost 1 time (a restart without persistence), failing the jobs it held, 12 failed reads of results, retried with backoff"},
		{"broker crash", queue.TargetStats{Unavailable: 46, Unconfirmed: 4},
			"the broker did not confirm the message of 4 jobs (publish not confirmed: refused, or its connection closed first): counted as errors; they may still have run, and a late result is not counted\n" +
				"46 jobs were touched by a queue outage (queue unavailable): counted as errors"},
		{"one refused", queue.TargetStats{Unconfirmed: 1},
			"the broker did not confirm the message of 1 job (publish not confirmed: refused, or its connection closed first): counted as errors; it may still have run, and a late result is not counted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := strings.Join(queueWarnings(tt.st), "\n")
			if got != tt.want {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

// TestLocateWorkers: a worker that registers no pid (BullMQ's) is found
// by its connection to the broker: here this process holds both ends of
// one over loopback. Workers with a pid, on a Unix socket, or whose
// connection is not on this host keep what they had.
func TestLocateWorkers(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	hostname, _ := os.Hostname()
	ws := []queue.WorkerInfo{
		{Name: "here", ClientAddr: c.LocalAddr().String(), ServerAddr: c.RemoteAddr().String()},
		{Name: "here, before Redis 6.2", ClientAddr: c.LocalAddr().String()},
		{Name: "registered", PID: 42, Host: "elsewhere", ClientAddr: c.LocalAddr().String()},
		{Name: "unix socket", ClientAddr: "/run/redis.sock:0"},
		{Name: "another host", ClientAddr: "192.0.2.7:50000", ServerAddr: c.RemoteAddr().String()},
	}
	LocateWorkers("", ws)
	want := []queue.WorkerInfo{
		{Name: "here", PID: os.Getpid(), Host: hostname, ClientAddr: c.LocalAddr().String(), ServerAddr: c.RemoteAddr().String()},
		{Name: "here, before Redis 6.2", PID: os.Getpid(), Host: hostname, ClientAddr: c.LocalAddr().String()},
		ws[2], ws[3], ws[4],
	}
	for i := range want {
		if ws[i] != want[i] {
			t.Errorf("worker %q: got %+v, want %+v", want[i].Name, ws[i], want[i])
		}
	}
}
