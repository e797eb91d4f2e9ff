package host

import (
	"os"
	"testing"

	"github.com/prometheus/procfs"

	"github.com/tare-dev/tare"
)

func TestReadPod(t *testing.T) {
	const uid = "3f1c9a2e-8b7d-4c1e-9f0a-5d6e7f8a9b0c"
	v1 := func(path string) []procfs.Cgroup {
		return []procfs.Cgroup{{HierarchyID: 4, Controllers: []string{"memory"}, Path: path}, {HierarchyID: 3, Controllers: []string{"cpu", "cpuacct"}, Path: path}}
	}
	for _, tt := range []struct {
		name    string
		env     map[string]string
		cgroups []procfs.Cgroup
		want    *tare.Pod
	}{
		{name: "not a pod", env: map[string]string{EnvHostname: "gen-a"}, cgroups: []procfs.Cgroup{{Path: "/user.slice/session-3.scope"}}},
		{
			name:    "downward API, cgroup namespace hides the path",
			env:     map[string]string{envKubernetes: "10.96.0.1", EnvPodName: "tare-gen-0-x7k2p", EnvPodNamespace: "load", EnvPodUID: uid, EnvHostname: "node-a"},
			cgroups: []procfs.Cgroup{{Path: "/"}},
			want:    &tare.Pod{Name: "tare-gen-0-x7k2p", Namespace: "load", UID: uid, Node: "node-a"},
		},
		{
			name:    "cgroupfs driver, guaranteed",
			env:     map[string]string{envKubernetes: "10.96.0.1"},
			cgroups: v1("/kubepods/pod" + uid + "/0a1b2c"),
			want:    &tare.Pod{UID: uid, Cgroup: "/kubepods/pod" + uid + "/0a1b2c", QoS: "Guaranteed"},
		},
		{
			name:    "systemd driver, burstable, no variables",
			cgroups: []procfs.Cgroup{{Path: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod3f1c9a2e_8b7d_4c1e_9f0a_5d6e7f8a9b0c.slice/cri-containerd-0a1b.scope"}},
			want: &tare.Pod{UID: uid, QoS: "Burstable",
				Cgroup: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod3f1c9a2e_8b7d_4c1e_9f0a_5d6e7f8a9b0c.slice/cri-containerd-0a1b.scope"},
		},
		{
			name:    "best effort",
			env:     map[string]string{EnvPodName: "w-1"},
			cgroups: v1("/kubepods/besteffort/pod" + uid + "/ff"),
			want:    &tare.Pod{Name: "w-1", UID: uid, Cgroup: "/kubepods/besteffort/pod" + uid + "/ff", QoS: "BestEffort"},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := readPod(func(k string) string { return tt.env[k] }, tt.cgroups)
			switch {
			case tt.want == nil && got != nil:
				t.Errorf("pod %+v, want none", *got)
			case tt.want != nil && (got == nil || *got != *tt.want):
				t.Errorf("pod %+v, want %+v", got, *tt.want)
			}
		})
	}
}

func TestHostProcesses(t *testing.T) {
	for _, tt := range []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"host", map[string]string{"1/stat": "1 (systemd) S 0", "2/stat": "2 (kthreadd) S 0 0 0"}, "true"},
		{"own PID namespace", map[string]string{"1/stat": "1 (tare) S 0", "7/stat": "7 (sh) S 1"}, "false"},
		{"pid 2 is no kernel thread", map[string]string{"1/stat": "1 (pause) S 0", "2/stat": "2 (tare) S 0"}, "false"},
		{"nothing to read", map[string]string{"stat": "cpu 1 2 3"}, "nil"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := "nil"
			root := t.TempDir()
			writeFiles(t, root, tt.files)
			if v := hostProcesses(root); v != nil {
				got = map[bool]string{true: "true", false: "false"}[*v]
			}
			if got != tt.want {
				t.Errorf("host processes %s, want %s", got, tt.want)
			}
		})
	}
	if v := hostProcesses("/proc"); v == nil {
		t.Errorf("this machine's /proc: unknown, want true or false")
	}
}

// TestHostname: the host's name is $TARE_HOSTNAME when set (a pod's node),
// else the kernel's, as a run's Env records it.
func TestHostname(t *testing.T) {
	t.Setenv(EnvHostname, "node-7")
	if got := Hostname(); got != "node-7" {
		t.Errorf("with %s=node-7: %q", EnvHostname, got)
	}
	t.Setenv(EnvHostname, "")
	want, err := os.Hostname()
	if err != nil {
		t.Skip("no host name here:", err)
	}
	if got := Hostname(); got != want {
		t.Errorf("Hostname() = %q, want the kernel's %q", got, want)
	}
}
