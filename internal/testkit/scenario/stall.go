package scenario

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Stalling is a plain HTTP service on loopback that answers at once,
// except from `from` to from+length after its first request, when it holds
// every request delay longer: a lock, a pause, a slow dependency. Its CPU
// stays idle, and at a low rate its work in flight stays flat (rate ×
// delay), so the latency that moves is not explained by more work.
func Stalling(delay, from, length time.Duration) Deployment {
	return func(ctx context.Context, _ string) (string, func(), error) {
		url, _, stop, err := startStalling(ctx, delay, from, length)
		return url, stop, err
	}
}

// Plain is the stalling service that never stalls: a light Python HTTP
// service that answers at once, a fraction of a millisecond of CPU each.
func Plain() Deployment {
	return Stalling(0, 0, 0)
}

// stallService is the service: Python's standard library, from Debian,
// a real server answering over real connections.
const stallService = `
import http.server, sys, threading, time
delay, start, length = (float(a) for a in sys.argv[1:4])
first, lock = None, threading.Lock()

class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # The headers and the body go out as two writes: with Nagle's
    # algorithm the body waits for the client's delayed ACK, 40 ms.
    disable_nagle_algorithm = True

    def do_GET(self):
        global first
        now = time.monotonic()
        with lock:
            if first is None:
                first = now
        if start <= now - first < start + length:
            time.sleep(delay)
        body = b"ok\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

class Server(http.server.ThreadingHTTPServer):
    # socketserver's backlog is 5: a burst of new connections past it
    # while the server waits for a CPU loses SYNs, each retried 1 s later.
    request_queue_size = 128

server = Server(("127.0.0.1", 0), Handler)
print("http://127.0.0.1:%d/" % server.server_address[1], flush=True)
server.serve_forever()
`

// startStalling runs the service and returns its URL, its pid and the
// function that stops it. It dies with ctx, and with the process that
// started it.
func startStalling(ctx context.Context, delay, from, length time.Duration) (url string, pid int, stop func(), err error) {
	python, err := exec.LookPath("python3")
	if err != nil {
		return "", 0, nil, fmt.Errorf("%w: python3 is not installed (Debian's python3): cannot start the stalling service", ErrMissing)
	}
	ctx, cancel := context.WithCancel(ctx)
	c := exec.CommandContext(ctx, python, "-c", stallService,
		fmt.Sprint(delay.Seconds()), fmt.Sprint(from.Seconds()), fmt.Sprint(length.Seconds()))
	c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	c.Stderr = os.Stderr
	found := make(chan string, 1)
	c.Stdout = &firstLine{found: found}
	if err := c.Start(); err != nil {
		cancel()
		return "", 0, nil, fmt.Errorf("start the stalling service: %w", err)
	}
	stop = func() {
		cancel()
		c.Wait()
	}
	select {
	case url = <-found:
		if strings.HasPrefix(url, "http://127.0.0.1:") {
			return url, c.Process.Pid, stop, nil
		}
	case <-time.After(30 * time.Second):
	}
	stop()
	return "", 0, nil, fmt.Errorf("the stalling service (pid %d) did not say where it serves within 30s: %q", c.Process.Pid, url)
}

// firstLine passes on the first line written to it, and discards the rest.
type firstLine struct {
	buf   []byte
	found chan<- string
}

func (w *firstLine) Write(p []byte) (int, error) {
	if w.found == nil {
		return len(p), nil
	}
	w.buf = append(w.buf, p...)
	if line, _, ok := bytes.Cut(w.buf, []byte("\n")); ok {
		w.found <- string(line)
		w.found = nil
	}
	return len(p), nil
}
