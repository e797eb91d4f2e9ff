package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/testservice"
	"github.com/tare-dev/tare/modelsim"
)

// podCommand is one container of deploy/kubernetes as kustomize renders it
// (deploy/kubernetes writes testdata/pods.golden.json, and fails when the
// manifests no longer render to it).
type podCommand struct {
	Args []string `json:"args"`
	Env  []struct {
		Name      string `json:"name"`
		Value     string `json:"value"`
		FieldPath string `json:"field_path"`
		ConfigMap string `json:"config_map_key"`
		Secret    string `json:"secret_key"`
	} `json:"env"`
}

type renderedPods struct {
	Settings  map[string]string `json:"settings"`
	Generator podCommand        `json:"generator"`
	Worker    podCommand        `json:"worker"`
}

// pod is what the kubelet knows of one pod: its downward API fields, its
// Secret and its ConfigMap.
type pod struct {
	fields   map[string]string // field path → value
	secrets  map[string]string
	settings map[string]string
}

// environ is the container's environment as the kubelet builds it, and
// its args expanded by Kubernetes' rules: $(VAR) of a defined variable is
// its value, $$ is $, anything else stays as written.
func (p pod) environ(t *testing.T, c podCommand) (env []string, args []string) {
	t.Helper()
	vars := map[string]string{
		// the kubelet's own, in every container (enableServiceLinks only
		// drops the other Services')
		"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443",
	}
	for _, e := range c.Env {
		var v string
		var ok bool
		switch {
		case e.FieldPath != "":
			v, ok = p.fields[e.FieldPath]
		case e.ConfigMap != "":
			v, ok = p.settings[e.ConfigMap]
		case e.Secret != "":
			v, ok = p.secrets[e.Secret]
		default:
			v, ok = e.Value, true
		}
		if !ok {
			t.Fatalf("%s: this test does not know what the kubelet would give it (%+v)", e.Name, e)
		}
		vars[e.Name] = v
	}
	ref := regexp.MustCompile(`\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	for _, a := range c.Args {
		args = append(args, ref.ReplaceAllStringFunc(a, func(m string) string {
			if m == "$$" {
				return "$"
			}
			if v, ok := vars[m[2:len(m)-1]]; ok {
				return v
			}
			return m
		}))
	}
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	return env, args
}

// TestKubernetesPodsInNamespaces runs the generator pod's command line,
// exactly as deploy/kubernetes renders it, as 3 processes, each in a
// network and UTS namespace of its own (its pod), with the environment the
// kubelet gives it: the index from the Job's annotation, the Job's uid,
// the node's name, the Secret's Redis URL and store DSN (reached through
// the namespace's veth), the settings. The worker pod's command line runs
// on this host against the simulated model. Shards 1 and 3 are placed on
// one "node" and shard 2 runs without hostPID (a PID namespace of its own):
// the three rows merge into one run under the Job's uid, the merged verdict
// warns of the shared node, and shard 2's row says what it could not see.
func TestKubernetesPodsInNamespaces(t *testing.T) {
	if testing.Short() {
		t.Skip("three namespaced generator pods and a worker for ~5 s: skipped with -short")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		testservice.Missing(t, "unshare is not installed: a namespace cannot get a host name of its own; install Debian's util-linux (scripts/test does, as root)")
	}
	b, err := os.ReadFile("../../deploy/kubernetes/testdata/pods.golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var pods renderedPods
	if err := json.Unmarshal(b, &pods); err != nil {
		t.Fatal(err)
	}
	svc := namespacedServices(t)
	dsn, redisURL := svc.dsn, svc.redis.String()

	const shards = 3
	jobUID := uuid.NewString()
	settings := map[string]string{}
	for k, v := range pods.Settings {
		settings[k] = v
	}
	model := testservice.Model(t, modelsim.Config{TokenCost: time.Millisecond, MeanTokens: 4})
	queueName := "k8s-" + jobUID[:8]
	for k, v := range map[string]string{"TARE_TARGET": model.URL + "/v1", "TARE_RATE": "45/s", "TARE_DURATION": "3s",
		"TARE_SHARDS": fmt.Sprint(shards), "TARE_QUEUE_NAME": queueName, "TARE_LABEL": "k8s-test"} {
		if _, ok := settings[k]; !ok {
			t.Fatalf("the kustomization no longer sets %s", k)
		}
		settings[k] = v
	}
	t.Cleanup(func() {
		svc.forget(jobUID)
		tareCmd(t, "cleanup", "--queue", redisURL, "--queue-name", queueName, "--wait", "0s")
	})
	runCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// The worker pod, on this host.
	wenv, wargs := pod{fields: map[string]string{"spec.nodeName": "node-w", "metadata.name": "tare-workers-5d8f-x2k", "metadata.namespace": "tare",
		"metadata.uid": uuid.NewString()}, secrets: map[string]string{"redis-url": redisURL}, settings: settings}.environ(t, pods.Worker)
	worker := exec.CommandContext(runCtx, os.Args[0], wargs...)
	worker.Env = append(wenv, "TARE_TEST_MAIN=1")
	var werr strings.Builder
	worker.Stderr = &werr
	if err := worker.Start(); err != nil {
		t.Fatal(err)
	}

	nodes := []string{"node-a", "node-b", "node-a"} // shards 1 and 3 share a node
	names := make([]string, shards)
	cmds := make([]*exec.Cmd, shards)
	outs := make([]strings.Builder, shards)
	errs := make([]strings.Builder, shards)
	for k := range shards {
		h := newNetHost(t, k)
		podRedis, podDB := svc.through(t, h)
		names[k] = fmt.Sprintf("tare-generators-%d-%s", k, h.ns[len(h.ns)-3:])
		env, args := pod{
			fields: map[string]string{
				"metadata.annotations['batch.kubernetes.io/job-completion-index']": fmt.Sprint(k),
				"metadata.labels['batch.kubernetes.io/controller-uid']":            jobUID,
				"spec.nodeName": nodes[k], "metadata.name": names[k], "metadata.namespace": "tare", "metadata.uid": uuid.NewString(),
			},
			secrets:  map[string]string{"redis-url": podRedis, "db": podDB},
			settings: settings,
		}.environ(t, pods.Generator)
		// The pod's own host name is its name; shard 2 has no hostPID.
		wrap := []string{"netns", "exec", h.ns, "unshare", "--uts"}
		if k == 1 {
			wrap = append(wrap, "--pid", "--fork", "--mount-proc")
		}
		wrap = append(wrap, "sh", "-c", `hostname "$0" && exec "$@"`, names[k], os.Args[0])
		cmds[k] = exec.CommandContext(runCtx, "ip", append(wrap, args...)...)
		cmds[k].Env = append(env, "TARE_TEST_MAIN=1", "PATH="+os.Getenv("PATH"))
		cmds[k].Stdout, cmds[k].Stderr = &outs[k], &errs[k]
	}
	for k, c := range cmds {
		if err := c.Start(); err != nil {
			t.Fatalf("start pod %d: %v", k, err)
		}
	}
	for k, c := range cmds {
		if err := c.Wait(); err != nil {
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 {
				t.Fatalf("pod %s: %v\n%s\nworker: %s", names[k], err, errs[k].String(), werr.String())
			}
		}
	}
	tareCmd(t, "cleanup", "--queue", redisURL, "--queue-name", queueName, "--wait", "5s")
	if err := worker.Wait(); err != nil {
		t.Errorf("the worker after cleanup's stop: %v\n%s", err, werr.String())
	}

	code, stdout, stderr := tareCmd(t, "runs", "show", jobUID, "--json", "--db", dsn)
	if code != 0 {
		for k := range shards {
			t.Logf("pod %s:\n%s\n%s", names[k], outs[k].String(), errs[k].String())
		}
		t.Fatalf("runs show %s: exit %d: %s", jobUID, code, stderr)
	}
	var s tare.Summary
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatal(err)
	}
	if s.Env.Pod != nil {
		t.Errorf("the merged run's env names one pod (%+v): each shard has its own", s.Env.Pod)
	}
	if s.Run.ID != jobUID || len(s.Shards) != shards {
		t.Fatalf("merged run %q with %d shards, want the Job's uid %s with %d", s.Run.ID, len(s.Shards), jobUID, shards)
	}
	sum := 0
	for k, sh := range s.Shards {
		t.Logf("shard %s on %s: %d requests, level %s, fired %v", sh.Shard, sh.Hostname, sh.Requests, sh.Level, sh.Fired)
		if want := fmt.Sprintf("%d/%d", k+1, shards); sh.Shard != want || sh.Hostname != nodes[k] || sh.Pod != "tare/"+names[k] {
			t.Errorf("shard %s on %q in pod %q, want %s on %s (spec.nodeName) in tare/%s", sh.Shard, sh.Hostname, sh.Pod, want, nodes[k], names[k])
		}
		if sh.Requests == 0 {
			t.Errorf("shard %s sent nothing", sh.Shard)
		}
		sum += sh.Requests
	}
	if s.Requests.Total != sum || s.Requests.OK != sum {
		t.Errorf("merged requests %+v, want the shards' %d, all answered", s.Requests, sum)
	}
	warned := strings.Join(s.Verdict.Warnings, "\n")
	t.Logf("merged verdict %s, warnings:\n%s", s.Verdict.Level, warned)
	if !strings.Contains(warned, "shards 1/3, 3/3 ran on one host, node-a") {
		t.Errorf("the merged verdict does not warn of two shards on node-a:\n%s", warned)
	}

	// Each row says which pod measured it, and what it could see.
	for k := range shards {
		row := fmt.Sprintf("%s.shard-%d-of-%d", jobUID, k+1, shards)
		code, stdout, stderr := tareCmd(t, "runs", "show", row, "--json", "--db", dsn)
		if code != 0 {
			t.Fatalf("runs show %s: exit %d: %s", row, code, stderr)
		}
		var r tare.Summary
		if err := json.Unmarshal([]byte(stdout), &r); err != nil {
			t.Fatal(err)
		}
		e := r.Env
		if e.Pod == nil || e.Pod.Name != names[k] || e.Pod.Node != nodes[k] || e.Pod.Namespace != "tare" || e.Pod.UID == "" || e.Hostname != nodes[k] {
			t.Errorf("shard %d's env: host %q, pod %+v; want pod %s on %s", k+1, e.Hostname, e.Pod, names[k], nodes[k])
		}
		hostPID := k != 1
		t.Logf("shard %d: host %s, host_processes %v, pod %+v", k+1, e.Hostname, e.HostProcesses != nil && *e.HostProcesses, e.Pod)
		if e.HostProcesses == nil || *e.HostProcesses != hostPID {
			t.Errorf("shard %d's env says host_processes %v, want %v", k+1, e.HostProcesses, hostPID)
		}
		saidSo := strings.Contains(strings.Join(r.Verdict.Warnings, "\n"), "hostPID is not set")
		if saidSo == hostPID {
			t.Errorf("shard %d (hostPID %v): warned of the missing hostPID: %v\n%s", k+1, hostPID, saidSo, strings.Join(r.Verdict.Warnings, "\n"))
		}
	}
}
