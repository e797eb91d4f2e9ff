package scenario

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// Netns is a network namespace of the scenario's own, joined to the host
// by a veth pair: the host's end is Host, the namespace's Addr. It is how
// a container's network looks from the host, made without a container
// runtime.
type Netns struct {
	Name       string
	Host, Addr string // 10.231.N.1 and 10.231.N.2
	hostLink   string
}

// MakeNetns makes a namespace and its veth pair, numbered n (0-255) so
// that concurrent ones do not collide. Without root or iproute2 the error
// wraps ErrSkip.
func MakeNetns(n int) (*Netns, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("%w: a network namespace needs root", ErrSkip)
	}
	if err := need("ip"); err != nil {
		return nil, err
	}
	id := fmt.Sprintf("tare%d-%d", os.Getpid()%100000, n)
	ns := &Netns{Name: id, hostLink: "th" + strconv.Itoa(os.Getpid()%100000) + "x" + strconv.Itoa(n),
		Host: fmt.Sprintf("10.231.%d.1", n), Addr: fmt.Sprintf("10.231.%d.2", n)}
	inner := "tn" + ns.hostLink[2:]
	steps := [][]string{
		{"ip", "netns", "add", id},
		{"ip", "link", "add", ns.hostLink, "type", "veth", "peer", "name", inner},
		{"ip", "link", "set", inner, "netns", id},
		{"ip", "addr", "add", ns.Host + "/24", "dev", ns.hostLink},
		{"ip", "link", "set", ns.hostLink, "up"},
		{"ip", "netns", "exec", id, "ip", "addr", "add", ns.Addr + "/24", "dev", inner},
		{"ip", "netns", "exec", id, "ip", "link", "set", inner, "up"},
		{"ip", "netns", "exec", id, "ip", "link", "set", "lo", "up"},
	}
	for _, s := range steps {
		if out, err := exec.Command(s[0], s[1:]...).CombinedOutput(); err != nil {
			ns.Remove()
			return nil, fmt.Errorf("%s: %w: %s", strings.Join(s, " "), err, out)
		}
	}
	return ns, nil
}

// Command runs name inside the namespace.
func (ns *Netns) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns.Name, name}, args...)...)
}

// Remove deletes the namespace and its veth pair.
func (ns *Netns) Remove() {
	exec.Command("ip", "link", "del", ns.hostLink).Run()
	exec.Command("ip", "netns", "del", ns.Name).Run()
}

// UserlandProxy starts socat on a free loopback port forwarding every
// connection to target, as docker-proxy publishes a container's port,
// and returns the port and the function that stops it.
func UserlandProxy(ctx context.Context, target string) (int, func(), error) {
	if err := need("socat"); err != nil {
		return 0, nil, err
	}
	port, err := freePort()
	if err != nil {
		return 0, nil, err
	}
	cmd := exec.CommandContext(ctx, "socat", fmt.Sprintf("TCP-LISTEN:%d,bind=127.0.0.1,reuseaddr,fork", port), "TCP:"+target)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return 0, nil, fmt.Errorf("start socat: %w", err)
	}
	return port, func() { stopGroup(cmd, syscall.SIGTERM) }, nil
}

// GunicornInNetns is gunicorn's pool in a network namespace of its own,
// published on loopback by a userland proxy: a container behind
// `docker run -p 127.0.0.1:PORT:8080`, as the host sees it. Its workers
// are threaded and keep connections alive, so socat's child for each of
// the client's connections lives the whole run; closeEach makes them
// sync workers, which close every connection after its response, so
// that each request is a socat child and a connection into the
// namespace of its own, each gone within milliseconds.
func GunicornInNetns(n int, closeEach bool) Deployment {
	return func(ctx context.Context, dir string) (string, func(), error) {
		if err := need("gunicorn"); err != nil {
			return "", nil, err
		}
		ns, err := MakeNetns(n)
		if err != nil {
			return "", nil, err
		}
		var stops stack
		stops.push(ns.Remove)
		workers := []string{"--worker-class", "gthread", "--threads", "2"}
		if closeEach {
			workers = []string{"--worker-class", "sync"}
		}
		app, err := gunicornWith(ctx, dir, appPy, ns.Addr+":8080", ns.Command, workers...)
		if err != nil {
			stops.run()
			return "", nil, err
		}
		stops.push(app)
		port, proxy, err := UserlandProxy(ctx, ns.Addr+":8080")
		if err != nil {
			stops.run()
			return "", nil, err
		}
		stops.push(proxy)
		url := fmt.Sprintf("http://127.0.0.1:%d/", port)
		if err := awaitHTTP(ctx, url); err != nil {
			stops.run()
			return "", nil, fmt.Errorf("socat to %s: %w", ns.Addr, err)
		}
		return url, stops.run, nil
	}
}
