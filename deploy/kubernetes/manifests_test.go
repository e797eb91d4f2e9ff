// Package kubernetes holds tare's Kubernetes manifests (the YAML beside
// this file) and their tests: every manifest decoded strictly into the
// official API types, and the wiring that makes N pods one run checked.
// The pods' rendered command lines and environments are written to
// testdata/pods.golden.json, which cmd/tare's TestKubernetesPodsInNamespaces
// runs as N local processes.
package kubernetes

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/tare-dev/tare/internal/testkit/goldenfile"
)

// manifests are what kustomize renders from this directory, decoded.
type manifests struct {
	job       batchv1.Job
	workers   appsv1.Deployment
	calendar  appsv1.DaemonSet
	settings  corev1.ConfigMap
	namespace corev1.Namespace
	docs      [][]byte // every rendered resource, as YAML
}

// strict decodes one YAML document into out, refusing unknown and
// duplicate fields: a misspelt field would otherwise vanish silently, as
// the API server also drops it (kubectl warns, at best).
func strict(t *testing.T, what string, doc []byte, out any) {
	t.Helper()
	if err := yaml.UnmarshalStrict(doc, out); err != nil {
		t.Fatalf("%s does not decode strictly into %T: %v", what, out, err)
	}
}

// render runs kustomize, as kubectl apply -k does, on this directory.
func render(t *testing.T) manifests {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	rm, err := k.Run(filesys.MakeFsOnDisk(), ".")
	if err != nil {
		t.Fatalf("kustomize build: %v", err)
	}
	var m manifests
	seen := map[string]int{}
	for _, r := range rm.Resources() {
		doc, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		m.docs = append(m.docs, doc)
		kind, name := r.GetKind(), r.GetName()
		seen[kind]++
		what := fmt.Sprintf("rendered %s %s", kind, name)
		switch kind {
		case "Job":
			strict(t, what, doc, &m.job)
		case "Deployment":
			strict(t, what, doc, &m.workers)
		case "DaemonSet":
			strict(t, what, doc, &m.calendar)
		case "ConfigMap":
			strict(t, what, doc, &m.settings)
		case "Namespace":
			strict(t, what, doc, &m.namespace)
		default:
			t.Errorf("%s: a kind these tests do not check", what)
		}
	}
	for _, kind := range []string{"Job", "Deployment", "DaemonSet", "ConfigMap", "Namespace"} {
		if seen[kind] != 1 {
			t.Errorf("%d %s rendered, want 1", seen[kind], kind)
		}
	}
	return m
}

// TestManifestsDecodeStrictly: the files as written, before kustomize,
// decode strictly too, the kustomization into kustomize's own type.
func TestManifestsDecodeStrictly(t *testing.T) {
	for name, out := range map[string]any{
		"generators.yaml":    &batchv1.Job{},
		"workers.yaml":       &appsv1.Deployment{},
		"calendar.yaml":      &appsv1.DaemonSet{},
		"namespace.yaml":     &corev1.Namespace{},
		"kustomization.yaml": &types.Kustomization{},
	} {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		strict(t, name, b, out)
	}
	// and a misspelt field is caught.
	var j batchv1.Job
	if err := yaml.UnmarshalStrict([]byte("apiVersion: batch/v1\nkind: Job\nspec:\n  backofLimit: 0\n"), &j); err == nil {
		t.Error("a misspelt field (backofLimit) decoded: the decoder is not strict")
	}
}

func deref(p *int32) string {
	if p == nil {
		return "unset"
	}
	return strconv.Itoa(int(*p))
}

func envOf(c corev1.Container) map[string]corev1.EnvVar {
	m := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		m[e.Name] = e
	}
	return m
}

// fieldPath is the downward API field an env var reads, or "".
func fieldPath(e corev1.EnvVar) string {
	if e.ValueFrom == nil || e.ValueFrom.FieldRef == nil {
		return ""
	}
	return e.ValueFrom.FieldRef.FieldPath
}

// envFieldPaths are the fields the downward API gives environment
// variables (k8s.io/api core/v1 EnvVarSource.FieldRef, with metadata.uid,
// which the API server also accepts); labels and annotations by key.
var envFieldPaths = regexp.MustCompile(`^(metadata\.(name|namespace|uid)|spec\.(nodeName|serviceAccountName)|status\.(hostIP|hostIPs|podIP|podIPs)|metadata\.(labels|annotations)\['[^']+'\])$`)

// refs are the $(VAR) references of Kubernetes' expansion in args.
var refs = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

func arg(c corev1.Container, flag string) (string, bool) {
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v, true
		}
	}
	return "", false
}

func TestGeneratorJob(t *testing.T) {
	m := render(t)
	job, pod := m.job, m.job.Spec.Template.Spec
	if len(pod.Containers) != 1 || len(pod.InitContainers) != 0 {
		t.Fatalf("%d containers, %d init containers: want one tare container", len(pod.Containers), len(pod.InitContainers))
	}
	c := pod.Containers[0]
	env := envOf(c)
	shards, err := strconv.Atoi(m.settings.Data["TARE_SHARDS"])
	if err != nil {
		t.Fatalf("TARE_SHARDS %q: %v", m.settings.Data["TARE_SHARDS"], err)
	}

	t.Run("one pod per shard, none restarted", func(t *testing.T) {
		s := job.Spec
		if s.CompletionMode == nil || *s.CompletionMode != batchv1.IndexedCompletion {
			t.Errorf("completionMode %v, want Indexed: the pods need their index", s.CompletionMode)
		}
		if s.Completions == nil || int(*s.Completions) != shards || s.Parallelism == nil || int(*s.Parallelism) != shards {
			t.Errorf("completions %s, parallelism %s: want both %d, the shards (all at the barrier at once)", deref(s.Completions), deref(s.Parallelism), shards)
		}
		if s.BackoffLimit == nil || *s.BackoffLimit != 0 {
			t.Errorf("backoffLimit %v, want 0: a retried shard offers its share twice", s.BackoffLimit)
		}
		if pod.RestartPolicy != corev1.RestartPolicyNever {
			t.Errorf("restartPolicy %q, want Never", pod.RestartPolicy)
		}
		if s.ActiveDeadlineSeconds == nil {
			t.Error("no activeDeadlineSeconds: a shard never placed would hold the others at the barrier")
		}
	})

	t.Run("the index becomes the shard", func(t *testing.T) {
		if v, _ := arg(c, "--shard-index"); v != "$(JOB_COMPLETION_INDEX)" {
			t.Errorf("--shard-index=%q, want $(JOB_COMPLETION_INDEX)", v)
		}
		if v, _ := arg(c, "--shards"); v != "$(TARE_SHARDS)" {
			t.Errorf("--shards=%q, want $(TARE_SHARDS), the count the Job's completions come from", v)
		}
		if fp := fieldPath(env["JOB_COMPLETION_INDEX"]); fp != "metadata.annotations['"+batchv1.JobCompletionIndexAnnotation+"']" {
			t.Errorf("JOB_COMPLETION_INDEX from %q, want the Job controller's annotation %s", fp, batchv1.JobCompletionIndexAnnotation)
		}
		if r := env["TARE_SHARDS"].ValueFrom; r == nil || r.ConfigMapKeyRef == nil || r.ConfigMapKeyRef.Name != m.settings.Name || r.ConfigMapKeyRef.Key != "TARE_SHARDS" {
			t.Errorf("TARE_SHARDS from %+v, want key TARE_SHARDS of the ConfigMap %s", r, m.settings.Name)
		}
	})

	t.Run("the Job's uid is the run id, the node the host", func(t *testing.T) {
		if v, _ := arg(c, "--run-id"); v != "$(TARE_RUN_ID)" {
			t.Errorf("--run-id=%q, want $(TARE_RUN_ID)", v)
		}
		if fp := fieldPath(env["TARE_RUN_ID"]); fp != "metadata.labels['"+batchv1.ControllerUidLabel+"']" {
			t.Errorf("TARE_RUN_ID from %q, want the label %s the Job controller puts on its pods", fp, batchv1.ControllerUidLabel)
		}
		if fp := fieldPath(env["TARE_HOSTNAME"]); fp != "spec.nodeName" {
			t.Errorf("TARE_HOSTNAME from %q, want spec.nodeName", fp)
		}
		if r := env["TARE_COORDINATE"].ValueFrom; r == nil || r.SecretKeyRef == nil || r.SecretKeyRef.Key != "redis-url" {
			t.Errorf("TARE_COORDINATE from %+v: the shards meet at the Redis barrier, the Secret's redis-url", r)
		}
		if r := env["TARE_QUEUE"].ValueFrom; r == nil || r.SecretKeyRef == nil || r.SecretKeyRef.Key != "redis-url" {
			t.Errorf("TARE_QUEUE from %+v: the generators fill the Secret's redis-url", r)
		}
	})

	t.Run("one node per generator", func(t *testing.T) {
		a := pod.Affinity
		if a == nil || a.PodAntiAffinity == nil || len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 1 {
			t.Fatalf("affinity %+v: want one required pod anti-affinity term", a)
		}
		term := a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0]
		if term.TopologyKey != corev1.LabelHostname {
			t.Errorf("anti-affinity topology key %q, want %s (the node)", term.TopologyKey, corev1.LabelHostname)
		}
		sel := term.LabelSelector
		if sel == nil || len(sel.MatchLabels) == 0 {
			t.Fatal("anti-affinity without a label selector")
		}
		for k, v := range sel.MatchLabels {
			if job.Spec.Template.Labels[k] != v {
				t.Errorf("anti-affinity selects %s=%s, which the generator pods do not carry: they would not repel each other", k, v)
			}
		}
	})

	t.Run("guaranteed, whole CPUs", func(t *testing.T) {
		guaranteed(t, c)
		cpu := c.Resources.Limits[corev1.ResourceCPU]
		if cpu.MilliValue()%1000 != 0 {
			t.Errorf("cpu %s: want whole CPUs (the static CPU manager pins only those)", cpu.String())
		}
	})

	t.Run("the node's processes", func(t *testing.T) {
		if !pod.HostPID {
			t.Error("hostPID is not set: tare could not name the node's processes")
		}
		if pod.HostNetwork || pod.HostIPC {
			t.Error("hostNetwork or hostIPC set: tare needs neither")
		}
		if len(pod.Volumes) != 1 || pod.Volumes[0].EmptyDir == nil {
			t.Errorf("volumes %+v: want only the emptyDir for /tmp (no hostPath)", pod.Volumes)
		}
	})

	t.Run("locked down", func(t *testing.T) { lockedDown(t, pod, c) })
	t.Run("wiring", func(t *testing.T) { wired(t, c, m.settings) })
}

func TestWorkers(t *testing.T) {
	m := render(t)
	pod := m.workers.Spec.Template.Spec
	c := pod.Containers[0]
	if len(c.Args) == 0 || c.Args[0] != "worker" {
		t.Fatalf("args %q, want tare worker", c.Args)
	}
	for flag, want := range map[string]string{"--queue-name": "$(TARE_QUEUE_NAME)", "--model": "$(TARE_TARGET)"} {
		if v, _ := arg(c, flag); v != want {
			t.Errorf("%s=%q, want %q", flag, v, want)
		}
	}
	if r := envOf(c)["TARE_QUEUE"].ValueFrom; r == nil || r.SecretKeyRef == nil || r.SecretKeyRef.Key != "redis-url" {
		t.Errorf("TARE_QUEUE from %+v: the workers take jobs from the Secret's redis-url", r)
	}
	gen := m.job.Spec.Template.Spec.Containers[0]
	if a, b := fmt.Sprint(envOf(c)["TARE_QUEUE_NAME"].ValueFrom), fmt.Sprint(envOf(gen)["TARE_QUEUE_NAME"].ValueFrom); a != b {
		t.Errorf("the workers' queue (%s) is not the generators' (%s)", a, b)
	}
	if m.workers.Spec.Replicas == nil || *m.workers.Spec.Replicas < 1 {
		t.Errorf("replicas %v", m.workers.Spec.Replicas)
	}
	for k, v := range m.workers.Spec.Selector.MatchLabels {
		if m.workers.Spec.Template.Labels[k] != v {
			t.Errorf("the selector's %s=%s is not on the pods", k, v)
		}
	}
	guaranteed(t, c)
	lockedDown(t, pod, c)
	wired(t, c, m.settings)
}

// TestCalendar: the DaemonSet keeps each node's calendar: tare check
// --every with the node's name as the host, into the shared store from
// the Secret, the node's process table in view, no CPU limit to throttle
// the sampler, locked down and wired as the others.
func TestCalendar(t *testing.T) {
	m := render(t)
	ds, pod := m.calendar, m.calendar.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers: want one tare container", len(pod.Containers))
	}
	c := pod.Containers[0]
	env := envOf(c)
	if len(c.Args) == 0 || c.Args[0] != "check" {
		t.Fatalf("args %q, want tare check", c.Args)
	}
	for flag, key := range map[string]string{"--every": "TARE_CALENDAR_EVERY", "--for": "TARE_CALENDAR_FOR"} {
		if v, _ := arg(c, flag); v != "$("+key+")" {
			t.Errorf("%s=%q, want $(%s)", flag, v, key)
		}
		if _, ok := m.settings.Data[key]; !ok {
			t.Errorf("the kustomization's settings have no %s", key)
		}
	}
	every, err1 := time.ParseDuration(m.settings.Data["TARE_CALENDAR_EVERY"])
	span, err2 := time.ParseDuration(m.settings.Data["TARE_CALENDAR_FOR"])
	if err1 != nil || err2 != nil || span <= 0 || every <= span {
		t.Errorf("TARE_CALENDAR_EVERY %q, TARE_CALENDAR_FOR %q: want durations, every longer than for (%v, %v)",
			m.settings.Data["TARE_CALENDAR_EVERY"], m.settings.Data["TARE_CALENDAR_FOR"], err1, err2)
	}
	if fp := fieldPath(env["TARE_HOSTNAME"]); fp != "spec.nodeName" {
		t.Errorf("TARE_HOSTNAME from %q, want spec.nodeName: the calendar is the node's", fp)
	}
	if r := env["TARE_DB"].ValueFrom; r == nil || r.SecretKeyRef == nil || r.SecretKeyRef.Key != "db" {
		t.Errorf("TARE_DB from %+v: the calendars go to the Secret's db, the store the runs share", r)
	}
	if !pod.HostPID {
		t.Error("hostPID is not set: the samples could not name the node's processes")
	}
	if pod.HostNetwork || pod.HostIPC || len(pod.Volumes) != 0 {
		t.Errorf("hostNetwork %v, hostIPC %v, volumes %+v: the calendar needs none", pod.HostNetwork, pod.HostIPC, pod.Volumes)
	}
	if lim, ok := c.Resources.Limits[corev1.ResourceCPU]; ok {
		t.Errorf("a CPU limit (%s): its quota would throttle the sampler, and the calendar would record that", lim.String())
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources %+v: want a CPU request and a memory limit", c.Resources)
	}
	for k, v := range ds.Spec.Selector.MatchLabels {
		if ds.Spec.Template.Labels[k] != v {
			t.Errorf("the selector's %s=%s is not on the pods", k, v)
		}
	}
	if ds.Spec.Template.Labels["app.kubernetes.io/component"] == "generator" {
		t.Error("the calendar pods carry the generators' label: the generators' anti-affinity would keep them off their nodes")
	}
	lockedDown(t, pod, c)
	wired(t, c, m.settings)
}

// guaranteed: requests equal limits for CPU and memory, the Guaranteed QoS
// class, in which the kubelet neither squeezes nor evicts the pod first.
func guaranteed(t *testing.T, c corev1.Container) {
	t.Helper()
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, lim := c.Resources.Requests[r], c.Resources.Limits[r]
		if lim.IsZero() || req.Cmp(lim) != 0 {
			t.Errorf("%s: request %s, limit %s: want them equal and set (Guaranteed QoS)", r, req.String(), lim.String())
		}
	}
	var zero resource.Quantity
	if c.Resources.Limits.Cpu().Cmp(zero) == 0 {
		t.Error("no CPU limit")
	}
}

// lockedDown: non-root as the image's user, read-only root, nothing
// gained, no service account token.
func lockedDown(t *testing.T, pod corev1.PodSpec, c corev1.Container) {
	t.Helper()
	psc, sc := pod.SecurityContext, c.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser != 65532 {
		t.Errorf("pod security context %+v: want runAsNonRoot as 65532, the image's user (deploy/image)", psc)
	}
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || sc.Privileged != nil && *sc.Privileged {
		t.Errorf("container security context %+v: want a read-only root, no privilege escalation, every capability dropped", sc)
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Error("the service account token is mounted: tare never calls the API server")
	}
	if len(c.Command) != 0 {
		t.Errorf("command %q: the image's entrypoint is /tare, and it has no shell", c.Command)
	}
}

// wired: every $(VAR) in the args is a variable of the container (else
// Kubernetes leaves it as it is) and none is a Secret's (args are the
// command line, which /proc/<pid>/cmdline shows to anyone on the node),
// every variable's source exists, the downward API fields are ones it
// gives environment variables, and the secrets come from a Secret, never
// inline.
func wired(t *testing.T, c corev1.Container, settings corev1.ConfigMap) {
	t.Helper()
	env := envOf(c)
	for _, a := range c.Args {
		for _, r := range refs.FindAllStringSubmatch(a, -1) {
			e, ok := env[r[1]]
			if !ok {
				t.Errorf("arg %q refers to $(%s), which the container does not define", a, r[1])
			}
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				t.Errorf("arg %q puts the Secret's %s on the command line, readable by anyone on the node in /proc/<pid>/cmdline: let tare read $%s from the environment", a, e.ValueFrom.SecretKeyRef.Key, r[1])
			}
		}
		if strings.Contains(a, "://") {
			t.Errorf("arg %q holds a URL: connection strings come from the Secret", a)
		}
	}
	for name, e := range env {
		switch {
		case name == "TARE_DB" || name == "TARE_QUEUE" || name == "TARE_COORDINATE" || strings.Contains(name, "KEY") || strings.Contains(name, "PASSWORD"):
			if e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
				t.Errorf("%s is not from a Secret (secretKeyRef)", name)
			}
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil:
			if !envFieldPaths.MatchString(e.ValueFrom.FieldRef.FieldPath) {
				t.Errorf("%s from %q: the downward API gives environment variables no such field", name, e.ValueFrom.FieldRef.FieldPath)
			}
		case e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil:
			r := e.ValueFrom.ConfigMapKeyRef
			if _, ok := settings.Data[r.Key]; r.Name != settings.Name || !ok {
				t.Errorf("%s from ConfigMap %s key %s, which the kustomization does not make", name, r.Name, r.Key)
			}
		}
	}
}

// credentials in a URL (user:password@) or a DSN keyword.
var inlineSecret = regexp.MustCompile(`(?i)://[^/\s:@]*:[^/\s@]+@|password\s*=|kind:\s*Secret\b`)

// TestNoSecretInline: no rendered resource holds a credential or a Secret.
func TestNoSecretInline(t *testing.T) {
	m := render(t)
	for _, doc := range m.docs {
		if loc := inlineSecret.FindIndex(doc); loc != nil {
			t.Errorf("a rendered manifest holds a secret (%q):\n%s", doc[loc[0]:loc[1]], doc)
		}
	}
	for _, probe := range []string{"url: redis://:hunter2@redis:6379/0", "dsn: host=pg password=x", "kind: Secret"} {
		if !inlineSecret.MatchString(probe) {
			t.Errorf("the check misses %q", probe)
		}
	}
}

// podEnv is one environment variable of a rendered container, in the form
// cmd/tare's TestKubernetesPodsInNamespaces resolves as the kubelet would.
type podEnv struct {
	Name      string `json:"name"`
	Value     string `json:"value,omitempty"`
	FieldPath string `json:"field_path,omitempty"` // the downward API
	ConfigMap string `json:"config_map_key,omitempty"`
	Secret    string `json:"secret_key,omitempty"`
}

type podCommand struct {
	Args []string `json:"args"`
	Env  []podEnv `json:"env"`
}

// TestPodsGolden writes the containers' command lines and environments
// as kustomize renders them, with the settings they read.
func TestPodsGolden(t *testing.T) {
	m := render(t)
	cmdOf := func(c corev1.Container) podCommand {
		pc := podCommand{Args: c.Args}
		for _, e := range c.Env {
			pe := podEnv{Name: e.Name, Value: e.Value, FieldPath: fieldPath(e)}
			if f := e.ValueFrom; f != nil && f.ConfigMapKeyRef != nil {
				pe.ConfigMap = f.ConfigMapKeyRef.Key
			}
			if f := e.ValueFrom; f != nil && f.SecretKeyRef != nil {
				pe.Secret = f.SecretKeyRef.Key
			}
			pc.Env = append(pc.Env, pe)
		}
		return pc
	}
	out := struct {
		Settings  map[string]string `json:"settings"`
		Generator podCommand        `json:"generator"`
		Worker    podCommand        `json:"worker"`
		Calendar  podCommand        `json:"calendar"`
	}{m.settings.Data, cmdOf(m.job.Spec.Template.Spec.Containers[0]), cmdOf(m.workers.Spec.Template.Spec.Containers[0]),
		cmdOf(m.calendar.Spec.Template.Spec.Containers[0])}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		t.Fatal(err)
	}
	goldenfile.Check(t, "pods.golden.json", buf.Bytes())
}
