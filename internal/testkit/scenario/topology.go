package scenario

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A Deployment starts a real service shaped as users run one, a process
// graph of real software from Debian's packages (nginx, gunicorn,
// PostgreSQL), in dir, and returns the URL to load and the function that
// stops all of it. What this machine lacks is an error wrapping ErrSkip.
type Deployment func(ctx context.Context, dir string) (url string, stop func(), err error)

// appPy is a WSGI app whose every request costs about 4 ms of CPU, so
// that the app server's workers, not only the proxy, show in the ledger.
const appPy = `
def app(environ, start_response):
    s = 0
    for i in range(50000):
        s += i * i
    start_response('200 OK', [('Content-Type', 'text/plain')])
    return [b'ok\n']
`

// dbAppPy is a WSGI app that runs one query on the local PostgreSQL per
// request, over its Unix socket (libpq's default, /var/run/postgresql),
// on a connection each worker keeps: the query's CPU is the database's.
const dbAppPy = `
import psycopg2
conn = None
def app(environ, start_response):
    global conn
    if conn is None:
        conn = psycopg2.connect(host='/var/run/postgresql', dbname='postgres', user='postgres')
        conn.autocommit = True
    with conn.cursor() as c:
        c.execute('SELECT sum(i) FROM generate_series(1, 40000) i')
        c.fetchone()
    start_response('200 OK', [('Content-Type', 'text/plain')])
    return [b'ok\n']
`

// NginxGunicorn is nginx proxying to a pool of 2 gunicorn sync workers,
// over loopback TCP or over a Unix socket; with maxRequests > 0 the pool
// recycles each worker after that many requests (processes that come and
// go mid-run).
func NginxGunicorn(overUnix bool, maxRequests int) Deployment {
	return func(ctx context.Context, dir string) (string, func(), error) {
		if err := need("nginx", "gunicorn"); err != nil {
			return "", nil, err
		}
		upstream, bind := "", ""
		if overUnix {
			sock := filepath.Join(dir, "app.sock")
			upstream, bind = "unix:"+sock, "unix:"+sock
		} else {
			port, err := freePort()
			if err != nil {
				return "", nil, err
			}
			upstream, bind = "127.0.0.1:"+strconv.Itoa(port), "127.0.0.1:"+strconv.Itoa(port)
		}
		var stops stack
		var recycle []string
		if maxRequests > 0 {
			recycle = []string{"--max-requests", strconv.Itoa(maxRequests)}
		}
		app, err := gunicorn(ctx, dir, appPy, bind, recycle...)
		if err != nil {
			return "", nil, err
		}
		stops.push(app)
		url, proxy, err := nginx(ctx, dir, upstream)
		if err != nil {
			stops.run()
			return "", nil, err
		}
		stops.push(proxy)
		return url, stops.run, nil
	}
}

// lightAppPy is a WSGI app whose requests cost well under a millisecond
// of CPU: a pool that mostly waits, whose tail a neighbour can move.
const lightAppPy = `
def app(environ, start_response):
    s = 0
    for i in range(3000):
        s += i
    start_response('200 OK', [('Content-Type', 'text/plain'), ('Content-Length', '3')])
    return [b'ok\n']
`

// Pool is a pool of 2 gunicorn sync workers serving lightAppPy over
// loopback TCP, nothing in front: the shape of a small Python service.
func Pool() Deployment { return gunicornTCP(lightAppPy) }

// gunicornTCP is gunicorn serving app on a free loopback port, with
// extra flags (2 sync workers unless they say otherwise), nothing in
// front.
func gunicornTCP(app string, extra ...string) Deployment {
	return func(ctx context.Context, dir string) (string, func(), error) {
		if err := need("gunicorn"); err != nil {
			return "", nil, err
		}
		port, err := freePort()
		if err != nil {
			return "", nil, err
		}
		bind := "127.0.0.1:" + strconv.Itoa(port)
		stop, err := gunicorn(ctx, dir, app, bind, extra...)
		if err != nil {
			return "", nil, err
		}
		return "http://" + bind + "/", stop, nil
	}
}

// GunicornPostgres is a pool of 2 gunicorn workers, each request a query
// to the local PostgreSQL over its Unix socket. The workers run as the
// postgres user, so that the socket's peer authentication lets them in.
func GunicornPostgres() Deployment {
	return func(ctx context.Context, dir string) (string, func(), error) {
		if err := need("gunicorn"); err != nil {
			return "", nil, err
		}
		if _, err := os.Stat("/var/run/postgresql/.s.PGSQL.5432"); err != nil {
			return "", nil, fmt.Errorf("%w: no PostgreSQL on /var/run/postgresql/.s.PGSQL.5432: %v", ErrMissing, err)
		}
		if err := exec.Command("/usr/bin/python3", "-c", "import psycopg2").Run(); err != nil {
			return "", nil, fmt.Errorf("%w: /usr/bin/python3 has no psycopg2 (Debian's python3-psycopg2): %v", ErrMissing, err)
		}
		port, err := freePort()
		if err != nil {
			return "", nil, err
		}
		// The workers, as postgres, read the app from dir.
		if err := os.Chmod(dir, 0o755); err != nil {
			return "", nil, err
		}
		bind := "127.0.0.1:" + strconv.Itoa(port)
		stop, err := gunicorn(ctx, dir, dbAppPy, bind, "--user", "postgres", "--group", "postgres")
		if err != nil {
			return "", nil, err
		}
		return "http://" + bind + "/", stop, nil
	}
}

// GunicornOnSocket starts gunicorn with 2 sync workers serving app
// (Python source of a module with a WSGI callable app, which runs with
// dir as its directory) on the Unix socket dir/app.sock, waits until it
// answers, and returns the socket's path, the master's pid and the
// function that stops it all. A machine without gunicorn is an error
// wrapping ErrMissing.
func GunicornOnSocket(ctx context.Context, dir, app string) (sock string, pid int, stop func(), err error) {
	if err := need("gunicorn"); err != nil {
		return "", 0, nil, err
	}
	sock = filepath.Join(dir, "app.sock")
	pidFile := filepath.Join(dir, "gunicorn.pid")
	if stop, err = gunicorn(ctx, dir, app, "unix:"+sock, "--pid", pidFile); err != nil {
		return "", 0, nil, err
	}
	b, err := os.ReadFile(pidFile)
	if err == nil {
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	if err != nil {
		stop()
		return "", 0, nil, fmt.Errorf("gunicorn's pid file: %w", err)
	}
	return sock, pid, stop, nil
}

// gunicorn starts 2 sync workers serving app (Python source) on bind and
// waits until it answers.
func gunicorn(ctx context.Context, dir, app, bind string, extra ...string) (func(), error) {
	return gunicornWith(ctx, dir, app, bind, exec.CommandContext, extra...)
}

// gunicornWith is gunicorn started through command: inside a network
// namespace, where it is not answered from the host's loopback.
func gunicornWith(ctx context.Context, dir, app, bind string, command func(context.Context, string, ...string) *exec.Cmd, extra ...string) (func(), error) {
	if err := os.WriteFile(filepath.Join(dir, "app.py"), []byte(app), 0o644); err != nil {
		return nil, err
	}
	args := append([]string{"-w", "2", "-b", bind, "--chdir", dir}, extra...)
	cmd := command(ctx, "gunicorn", append(args, "app:app")...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	log, err := os.Create(filepath.Join(dir, "gunicorn.log"))
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("start gunicorn: %w", err)
	}
	stop := func() {
		stopGroup(cmd, syscall.SIGTERM)
		log.Close()
	}
	url := "http://" + bind + "/"
	if sock, ok := unixPath(bind); ok {
		url = "unix:" + sock
	}
	if err := awaitHTTP(ctx, url); err != nil {
		stop()
		b, _ := os.ReadFile(log.Name())
		return nil, fmt.Errorf("gunicorn on %s: %w\n%s", bind, err, b)
	}
	return stop, nil
}

// nginx starts nginx with 2 workers on a free loopback port, proxying to
// upstream with keep-alive upstream connections, and returns its URL.
func nginx(ctx context.Context, dir, upstream string) (string, func(), error) {
	port, err := freePort()
	if err != nil {
		return "", nil, err
	}
	conf := fmt.Sprintf(`daemon off;
user root;
worker_processes 2;
pid %[1]s/nginx.pid;
error_log %[1]s/nginx.log;
events { worker_connections 512; }
http {
  access_log off;
  client_body_temp_path %[1]s; proxy_temp_path %[1]s; fastcgi_temp_path %[1]s; uwsgi_temp_path %[1]s; scgi_temp_path %[1]s;
  upstream app { server %[2]s; keepalive 8; }
  server {
    listen 127.0.0.1:%[3]d;
    location / { proxy_pass http://app; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
}
`, dir, upstream, port)
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	stop, err := startNginx(ctx, dir, conf, func() error { return awaitHTTP(ctx, url) })
	if err != nil {
		return "", nil, fmt.Errorf("on %s: %w", url, err)
	}
	return url, stop, nil
}

// NginxTLSConfig is an nginx serving HTTP/2 over TLS on loopback: the
// PEM files of its certificate and key, and of the CA whose client
// certificates it requires (ssl_verify_client on).
type NginxTLSConfig struct {
	Cert, Key, ClientCA string
	// KeepaliveRequests is how many requests a connection serves before
	// nginx closes it (an HTTP/2 GOAWAY); 0 leaves nginx's default (1000).
	KeepaliveRequests int
}

// NginxTLS starts nginx with one worker in dir, serving HTTP/2 and
// HTTP/1.1 over TLS on a free loopback port (ALPN chooses) and asking
// every client for a certificate; it answers every request with 200 "ok"
// and logs each one's protocol, client check and connection to
// dir/access.log as "HTTP/2.0 SUCCESS 12". It returns the address.
func NginxTLS(ctx context.Context, dir string, c NginxTLSConfig) (addr string, stop func(), err error) {
	if err := need("nginx"); err != nil {
		return "", nil, err
	}
	port, err := freePort()
	if err != nil {
		return "", nil, err
	}
	keepalive := ""
	if c.KeepaliveRequests > 0 {
		keepalive = fmt.Sprintf("keepalive_requests %d;", c.KeepaliveRequests)
	}
	// "listen … ssl http2" is the form every nginx since 1.9.5 takes
	// (Debian 12 has 1.22; from 1.25.1 it is deprecated for "http2 on",
	// with a warning, and still works).
	conf := fmt.Sprintf(`daemon off;
user root;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/nginx.log;
events { worker_connections 512; }
http {
  log_format tare '$server_protocol $ssl_client_verify $connection';
  access_log %[1]s/access.log tare;
  client_body_temp_path %[1]s; proxy_temp_path %[1]s; fastcgi_temp_path %[1]s; uwsgi_temp_path %[1]s; scgi_temp_path %[1]s;
  server {
    listen 127.0.0.1:%[2]d ssl http2;
    ssl_certificate %[3]s;
    ssl_certificate_key %[4]s;
    ssl_client_certificate %[5]s;
    ssl_verify_client on;
    %[6]s
    location / { return 200 "ok
"; }
  }
}
`, dir, port, c.Cert, c.Key, c.ClientCA, keepalive)
	addr = fmt.Sprintf("127.0.0.1:%d", port)
	stop, err = startNginx(ctx, dir, conf, func() error { return awaitTCP(ctx, addr) })
	return addr, stop, err
}

// startNginx starts nginx on conf, written into dir, and waits for ready.
func startNginx(ctx context.Context, dir, conf string, ready func() error) (func(), error) {
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, "nginx", "-c", path, "-p", dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start nginx: %w", err)
	}
	stop := func() { stopGroup(cmd, syscall.SIGQUIT) }
	if err := ready(); err != nil {
		stop()
		b, _ := os.ReadFile(filepath.Join(dir, "nginx.log"))
		return nil, fmt.Errorf("nginx: %w\n%s", err, b)
	}
	return stop, nil
}

// awaitTCP waits up to 20 s for addr to accept a connection.
func awaitTCP(ctx context.Context, addr string) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", addr)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("nothing accepted connections on %s within 20 s: %w", addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// awaitHTTP waits up to 20 s for a 200 from url ("unix:PATH" for a
// server on a Unix socket).
func awaitHTTP(ctx context.Context, url string) error {
	client := http.Client{Timeout: time.Second}
	if sock, ok := unixPath(url); ok {
		client.Transport = &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}}
		url = "http://app/"
	}
	deadline := time.Now().Add(20 * time.Second)
	var last error
	for time.Now().Before(deadline) && ctx.Err() == nil {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("status %s", resp.Status)
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	return errors.Join(errors.New("no 200 within 20 s"), last)
}

func unixPath(s string) (string, bool) {
	const prefix = "unix:"
	if len(s) > len(prefix) && s[:len(prefix)] == prefix {
		return s[len(prefix):], true
	}
	return "", false
}

// need says which of the commands this machine lacks, as an ErrMissing.
func need(commands ...string) error {
	for _, c := range commands {
		if _, err := exec.LookPath(c); err != nil {
			return fmt.Errorf("%w: %s is not installed (Debian's nginx-light, gunicorn, postgresql, python3-psycopg2, socat and iproute2 make these scenarios)", ErrMissing, c)
		}
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// stopGroup sends sig to the process group cmd leads (started with
// Setpgid), and SIGKILL if it is still there 10 s later.
func stopGroup(cmd *exec.Cmd, sig syscall.Signal) {
	syscall.Kill(-cmd.Process.Pid, sig)
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

// stack runs the stop functions pushed, last first.
type stack []func()

func (s *stack) push(f func()) { *s = append(*s, f) }

func (s *stack) run() {
	for i := len(*s) - 1; i >= 0; i-- {
		(*s)[i]()
	}
}
