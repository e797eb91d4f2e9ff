package testservice

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// PrivateRedis is a redis-server of the test's own, on a free loopback
// port, that the test may stop and start; the shared server is never
// restarted.
type PrivateRedis struct {
	Port int
	bin  string
	cmd  *exec.Cmd
	log  bytes.Buffer
}

// NewPrivateRedis starts one, stopped when the test ends (its log shown
// when the test failed). The test is skipped when redis-server is not
// installed (a failure under CI: see Missing).
func NewPrivateRedis(t testing.TB) *PrivateRedis {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		Missing(t, "redis-server is not installed: install Debian's redis-server (scripts/test does, as root, even when a Redis already answers on 6379)")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	r := &PrivateRedis{bin: bin, Port: port}
	r.Start(t)
	t.Cleanup(func() {
		r.Stop()
		if t.Failed() {
			t.Logf("redis-server log:\n%s", r.log.String())
		}
	})
	return r
}

// URL is the server's redis:// URL, database 0.
func (r *PrivateRedis) URL() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", r.Port) }

// Start runs the server without persistence, so a restart loses the
// queue's state as a crashed cache would, and waits until it answers.
func (r *PrivateRedis) Start(t testing.TB) {
	t.Helper()
	r.cmd = exec.Command(r.bin, "--port", fmt.Sprint(r.Port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	r.cmd.Stdout, r.cmd.Stderr = &r.log, &r.log
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := r.cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", r.Port), MaxRetries: -1})
	defer rdb.Close()
	deadline := time.Now().Add(10 * time.Second)
	for rdb.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("the private redis-server on port %d did not answer in 10 s", r.Port)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop kills the server (SIGKILL: a crash, not a shutdown) and waits.
func (r *PrivateRedis) Stop() {
	if r.cmd == nil || r.cmd.Process == nil {
		return
	}
	r.cmd.Process.Kill()
	r.cmd.Wait()
	r.cmd = nil
}
