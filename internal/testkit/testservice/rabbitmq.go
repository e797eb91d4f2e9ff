package testservice

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/tare-dev/tare/rabbitmq"
)

// AMQPURL is the test RabbitMQ: TARE_AMQP_URL, or the local default that
// scripts/test starts, and whether the environment named it.
func AMQPURL() (url string, explicit bool) {
	if u := os.Getenv("TARE_AMQP_URL"); u != "" {
		return u, true
	}
	return "amqp://guest:guest@127.0.0.1:5672/", false
}

// RabbitMQ returns the URL of the test RabbitMQ once it answers (a real
// AMQP handshake). When TARE_AMQP_URL is unset and nothing answers on
// the default address, RabbitMQ is Missing; when it is set, a server that
// does not answer fails the test. Tests share it, each on queues of its
// own; a test that restarts the broker starts a PrivateRabbitMQ instead.
func RabbitMQ(t testing.TB) string {
	t.Helper()
	u, explicit := AMQPURL()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := rabbitmq.Dial(ctx, rabbitmq.Config{URL: u, Name: "tare test " + t.Name()})
	if err != nil {
		shown := "(unparsable URL)"
		if pu, perr := url.Parse(u); perr == nil {
			shown = pu.Redacted()
		}
		Unavailable(t, explicit, "no RabbitMQ at %s (%v): run scripts/test, which installs and starts one (Debian's rabbitmq-server)", shown, err)
	}
	c.Close()
	return u
}

// rabbitmqServer is the script that runs one node in the foreground:
// Debian's /usr/sbin/rabbitmq-server is a wrapper that runs it as the
// rabbitmq user, with the packaged node's settings.
const rabbitmqServer = "/usr/lib/rabbitmq/bin/rabbitmq-server"

// PrivateRabbitMQ is a RabbitMQ node of the test's own, on a free
// loopback port, with its data in the test's temporary folder, that the
// test may kill and start again (its durable queues and persistent
// messages kept, as a crashed broker keeps them); the shared server is
// never restarted.
type PrivateRabbitMQ struct {
	Port     int
	distPort int
	dir      string
	cmd      *exec.Cmd
	log      *lockedBuffer
}

// NewPrivateRabbitMQ starts one, killed when the test ends (its log shown
// when the test failed). The test is skipped under -short (a node takes
// seconds to boot) and when rabbitmq-server is not installed (a failure
// under CI: see Missing).
func NewPrivateRabbitMQ(t testing.TB) *PrivateRabbitMQ {
	t.Helper()
	if testing.Short() {
		t.Skip("boots a RabbitMQ node of its own")
	}
	if _, err := os.Stat(rabbitmqServer); err != nil {
		Missing(t, "%s is not installed: install Debian's rabbitmq-server (scripts/test does, as root)", rabbitmqServer)
	}
	r := &PrivateRabbitMQ{Port: freePort(t), distPort: freePort(t), dir: t.TempDir(), log: &lockedBuffer{}}
	if err := os.WriteFile(filepath.Join(r.dir, "enabled_plugins"), []byte("[].\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r.Start(t)
	t.Cleanup(func() {
		r.Stop()
		if t.Failed() {
			t.Logf("rabbitmq-server log:\n%s", r.log.String())
		}
	})
	return r
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// URL is the node's amqp:// URL, virtual host "/", as the default user.
func (r *PrivateRabbitMQ) URL() string {
	return fmt.Sprintf("amqp://guest:guest@127.0.0.1:%d/", r.Port)
}

// Start boots the node, on its data of any run before, and waits until it
// takes an AMQP connection.
func (r *PrivateRabbitMQ) Start(t testing.TB) {
	t.Helper()
	node := fmt.Sprintf("tare-test-%d@localhost", r.Port)
	r.cmd = exec.Command(rabbitmqServer)
	r.cmd.Env = append(os.Environ(),
		"HOME="+r.dir, // its Erlang cookie
		"RABBITMQ_NODENAME="+node,
		"RABBITMQ_NODE_IP_ADDRESS=127.0.0.1",
		fmt.Sprintf("RABBITMQ_NODE_PORT=%d", r.Port),
		fmt.Sprintf("RABBITMQ_DIST_PORT=%d", r.distPort),
		"RABBITMQ_CONF_ENV_FILE="+filepath.Join(r.dir, "rabbitmq-env.conf"), // none: not the packaged node's
		"RABBITMQ_CONFIG_FILE="+filepath.Join(r.dir, "rabbitmq"),
		"RABBITMQ_ADVANCED_CONFIG_FILE="+filepath.Join(r.dir, "advanced.config"),
		"RABBITMQ_ENABLED_PLUGINS_FILE="+filepath.Join(r.dir, "enabled_plugins"),
		"RABBITMQ_MNESIA_BASE="+filepath.Join(r.dir, "mnesia"),
		"RABBITMQ_LOG_BASE="+filepath.Join(r.dir, "log"),
		"RABBITMQ_PLUGINS_EXPAND_DIR="+filepath.Join(r.dir, "plugins-expand"),
		"RABBITMQ_PID_FILE="+filepath.Join(r.dir, "pid"),
		"RABBITMQ_LOGS=-", // to stdout, kept for a failed test
	)
	r.cmd.Stdout, r.cmd.Stderr = r.log, r.log
	// A group of its own: the script, the Erlang VM and its helpers go
	// together.
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := r.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", rabbitmqServer, err)
	}
	started := time.Now()
	deadline := started.Add(90 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c, err := rabbitmq.Dial(ctx, rabbitmq.Config{URL: r.URL(), Name: "tare test"})
		cancel()
		if err == nil {
			c.Close()
			t.Logf("the private RabbitMQ on port %d took connections %v after its start", r.Port, time.Since(started).Round(100*time.Millisecond))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the private RabbitMQ on port %d did not take a connection in 90 s: %v\n%s", r.Port, err, r.log.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Stop kills the node (SIGKILL to its process group: a crash, not a
// shutdown) and waits.
func (r *PrivateRabbitMQ) Stop() {
	if r.cmd == nil || r.cmd.Process == nil {
		return
	}
	syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
	r.cmd.Wait()
	r.cmd = nil
}

// DeclareQueue declares the durable queue name, with args, on the broker
// at amqpURL, as a user's setup would, and deletes it (with the exchange
// of the same name a Celery worker declares beside it) when the test
// ends.
func DeclareQueue(t testing.TB, amqpURL, name string, args map[string]any) {
	t.Helper()
	onChannel(t, amqpURL, func(ch *amqp.Channel) error {
		_, err := ch.QueueDeclare(name, true, false, false, false, amqp.Table(args))
		return err
	})
	DeleteQueueAtEnd(t, amqpURL, name)
}

// DeleteQueueAtEnd deletes the queue name, and the exchange of the same
// name a Celery worker declares beside it, from the broker at amqpURL
// when the test ends: the shared server keeps no test's queues.
func DeleteQueueAtEnd(t testing.TB, amqpURL, name string) {
	t.Cleanup(func() {
		onChannel(t, amqpURL, func(ch *amqp.Channel) error {
			if _, err := ch.QueueDelete(name, false, false, false); err != nil {
				return err
			}
			return ch.ExchangeDelete(name, false, false)
		})
	})
}

// onChannel runs f on a channel of a connection of its own to amqpURL.
func onChannel(t testing.TB, amqpURL string, f func(*amqp.Channel) error) {
	t.Helper()
	conn, err := amqp.DialConfig(amqpURL, amqp.Config{Dial: amqp.DefaultDial(5 * time.Second)})
	if err != nil {
		t.Errorf("connect to %s: %v", amqpURL, err)
		return
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err == nil {
		err = f(ch)
	}
	if err != nil {
		t.Errorf("on %s: %v", amqpURL, err)
	}
}
