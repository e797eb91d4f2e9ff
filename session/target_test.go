package session

import (
	"net"
	"os"
	"testing"

	"github.com/tare-dev/tare/queue"
)

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
