package host

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tare-dev/tare"
)

// The container ids of the fixture tree testdata/runtimes.
const (
	idDocker     = "863e2e3230752d206d1596588c88d84b695c9080172403208bdfb5b2435821c5" // redis-cache, redis:7
	idDockerK8s  = "c093ef76e1b160bb2a9a1d2dc59907c6a055ec593e2ae687b3a3c0495f92c120" // cri-dockerd: web of pod shop/web-7d9c5b7f4-x2k8p
	idPodman     = "2f34efe78475fdebf5ee5c3b98c90efbde716798521ef15e0454329cf00b5bfd" // web-podman, nginx:1.27
	idContainerd = "9b0794bdde90da40eb02e058b37e54ff3854dbfa46b4e0143fc943c645e495e7" // worker of pod jobs/worker-5c7d8f9b6-m2n3p
	idCRIO       = "4786e7be61388ac91c9e8da14e1fc4e40ba222b142c7dc0dfc4ab5f80c1b536d" // api of pod payments/api-6f8b9d5c7-q4wzt
	idUnknown    = "8765c20e48f7e73ac8d29d9f71535cbc8e71afd5a54cbfd7f37455ff98432da4" // in no runtime's files
)

func TestParseContainerCgroup(t *testing.T) {
	const podSlice = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod2c9e8f7a_6b5d_4c3e_8f1a_0b9c8d7e6f5a.slice"
	tests := []struct {
		name, path      string
		runtime, id     string // "" id: no container
		cgroup, machine string // machine: the Name a machine's cgroup gives
	}{
		{name: "docker, systemd driver", path: "/system.slice/docker-" + idDocker + ".scope",
			runtime: RuntimeDocker, id: idDocker, cgroup: "/system.slice/docker-" + idDocker + ".scope"},
		{name: "docker, cgroupfs driver", path: "/docker/" + idDocker, runtime: RuntimeDocker, id: idDocker, cgroup: "/docker/" + idDocker},
		{name: "docker, systemd inside the container", path: "/system.slice/docker-" + idDocker + ".scope/init.scope",
			runtime: RuntimeDocker, id: idDocker, cgroup: "/system.slice/docker-" + idDocker + ".scope"},
		{name: "podman, rootful", path: "/machine.slice/libpod-" + idPodman + ".scope", runtime: RuntimePodman, id: idPodman,
			cgroup: "/machine.slice/libpod-" + idPodman + ".scope"},
		{name: "podman, rootless, its own sub-cgroup", path: "/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-" + idPodman + ".scope/container",
			runtime: RuntimePodman, id: idPodman, cgroup: "/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-" + idPodman + ".scope"},
		{name: "podman, cgroupfs driver", path: "/libpod_parent/libpod-" + idPodman, runtime: RuntimePodman, id: idPodman, cgroup: "/libpod_parent/libpod-" + idPodman},
		{name: "podman in a pod", path: "/machine.slice/machine-libpod_pod_5d1e.slice/libpod-" + idPodman + ".scope", runtime: RuntimePodman, id: idPodman,
			cgroup: "/machine.slice/machine-libpod_pod_5d1e.slice/libpod-" + idPodman + ".scope"},
		{name: "podman's conmon is not the container", path: "/machine.slice/libpod-conmon-" + idPodman + ".scope"},
		{name: "containerd, kubelet with systemd", path: podSlice + "/cri-containerd-" + idContainerd + ".scope",
			runtime: RuntimeContainerd, id: idContainerd, cgroup: podSlice + "/cri-containerd-" + idContainerd + ".scope"},
		{name: "containerd, kubelet with cgroupfs", path: "/kubepods/besteffort/pod2c9e8f7a-6b5d-4c3e-8f1a-0b9c8d7e6f5a/" + idContainerd,
			runtime: RuntimeKubernetes, id: idContainerd, cgroup: "/kubepods/besteffort/pod2c9e8f7a-6b5d-4c3e-8f1a-0b9c8d7e6f5a/" + idContainerd},
		{name: "nerdctl", path: "/system.slice/nerdctl-" + idContainerd + ".scope", runtime: RuntimeContainerd, id: idContainerd,
			cgroup: "/system.slice/nerdctl-" + idContainerd + ".scope"},
		{name: "containerd namespace, cgroupfs", path: "/default/" + idContainerd, id: idContainerd, cgroup: "/default/" + idContainerd},
		{name: "cri-o, systemd", path: podSlice + "/crio-" + idCRIO + ".scope", runtime: RuntimeCRIO, id: idCRIO, cgroup: podSlice + "/crio-" + idCRIO + ".scope"},
		{name: "cri-o, cgroupfs", path: "/kubepods/burstable/pod7d3f8a2e-4b1c-4e5f-9a8b-2c3d4e5f6a7b/crio-" + idCRIO, runtime: RuntimeCRIO, id: idCRIO,
			cgroup: "/kubepods/burstable/pod7d3f8a2e-4b1c-4e5f-9a8b-2c3d4e5f6a7b/crio-" + idCRIO},
		{name: "cri-o's conmon is not the container", path: podSlice + "/crio-conmon-" + idCRIO + ".scope"},
		{name: "kind: a pod's container in a docker container", path: "/system.slice/docker-" + idDocker + ".scope/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod1b4e28ba_2fa1_11d2_883f_0016d3cca427.slice/cri-containerd-" + idContainerd + ".scope",
			runtime: RuntimeContainerd, id: idContainerd,
			cgroup: "/system.slice/docker-" + idDocker + ".scope/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod1b4e28ba_2fa1_11d2_883f_0016d3cca427.slice/cri-containerd-" + idContainerd + ".scope"},
		{name: "docker in docker", path: "/docker/" + idDocker + "/docker/" + idUnknown, runtime: RuntimeDocker, id: idUnknown, cgroup: "/docker/" + idDocker + "/docker/" + idUnknown},
		{name: "systemd-nspawn by machinectl", path: "/machine.slice/systemd-nspawn@build\\x2dbox.service/payload/system.slice/cron.service",
			runtime: RuntimeNspawn, id: "build-box", machine: "build-box", cgroup: "/machine.slice/systemd-nspawn@build\\x2dbox.service"},
		{name: "systemd-nspawn run by hand", path: "/machine.slice/machine-build\\x2dbox.scope/payload", runtime: RuntimeNspawn, id: "build-box", machine: "build-box",
			cgroup: "/machine.slice/machine-build\\x2dbox.scope"},
		{name: "libvirt guest", path: "/machine.slice/machine-qemu\\x2d1\\x2dvm1.scope/libvirt/vcpu0", runtime: RuntimeLibvirt, id: "qemu-1-vm1", machine: "qemu-1-vm1",
			cgroup: "/machine.slice/machine-qemu\\x2d1\\x2dvm1.scope"},

		{name: "a service", path: "/system.slice/nginx.service"},
		{name: "the root", path: "/"},
		{name: "a user's session", path: "/user.slice/user-1000.slice/session-3.scope"},
		{name: "the kubelet's pod slice alone", path: podSlice},
		{name: "a short id is not one", path: "/system.slice/docker-" + idDocker[:12] + ".scope"},
		{name: "upper-case hex is not docker's", path: "/docker/" + strings.ToUpper(idDocker)},
		{name: "a docker service", path: "/system.slice/docker.service"},
		{name: "relative", path: "docker/" + idDocker},
		{name: "empty", path: ""},
		{name: "nspawn with no name", path: "/machine.slice/systemd-nspawn@.service"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, cgroup, ok := parseContainerCgroup(tt.path)
			if ok != (tt.id != "") {
				t.Fatalf("parseContainerCgroup(%q) found %v (%+v), want %v", tt.path, ok, c, tt.id != "")
			}
			want := tare.Container{ID: tt.id, Runtime: tt.runtime, Name: tt.machine}
			if c != want || cgroup != tt.cgroup {
				t.Errorf("parseContainerCgroup(%q) = %+v in %q, want %+v in %q", tt.path, c, cgroup, want, tt.cgroup)
			}
		})
	}
}

func FuzzParseContainerCgroup(f *testing.F) {
	for _, p := range []string{"/system.slice/docker-" + idDocker + ".scope", "/docker/" + idDocker + "/init.scope",
		"/kubepods/besteffort/pod2c9e8f7a-6b5d-4c3e-8f1a-0b9c8d7e6f5a/" + idContainerd, "/machine.slice/machine-a\\x2.scope",
		"/machine.slice/systemd-nspawn@x\\x2d.service", "/", "//", "/a/../b", "/libpod-conmon-" + idPodman + ".scope"} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) {
		c, cgroup, ok := parseContainerCgroup(p)
		if !ok {
			if c != (tare.Container{}) || cgroup != "" {
				t.Fatalf("%q: not a container, but %+v in %q", p, c, cgroup)
			}
			return
		}
		if c.ID == "" {
			t.Fatalf("%q: a container with no id: %+v", p, c)
		}
		// The container's cgroup is the path up to it, and names the same container.
		if !strings.HasPrefix(p, cgroup) && !strings.HasPrefix(p+"/", cgroup+"/") {
			t.Fatalf("%q: container cgroup %q is not a prefix of it", p, cgroup)
		}
		again, cg2, ok := parseContainerCgroup(cgroup)
		if !ok || again != c || cg2 != cgroup {
			t.Fatalf("%q: its cgroup %q reads as %+v in %q, want %+v", p, cgroup, again, cg2, c)
		}
		_ = c.String()
	})
}

func TestContainerOfLines(t *testing.T) {
	scope := "/system.slice/docker-" + idDocker + ".scope"
	tests := []struct {
		name, file string
		want       string // the path of the line it reads; "" for none
		v2         bool
	}{
		{name: "unified", file: "0::" + scope + "\n", want: scope, v2: true},
		{name: "hybrid: the cpu line", file: "12:pids:" + scope + "\n4:cpu,cpuacct:" + scope + "/sub\n1:name=systemd:" + scope + "\n0::" + scope + "\n", want: scope + "/sub"},
		{name: "hybrid, a cgroup namespace hides the v1 ones", file: "4:cpu,cpuacct:/\n1:name=systemd:/\n0::" + scope + "\n", want: scope, v2: true},
		{name: "legacy with a named hierarchy only", file: "1:name=systemd:" + scope + "\n3:memory:/\n", want: scope},
		{name: "cgroup namespace", file: "0::/\n"},
		{name: "not a container", file: "0::/system.slice/sshd.service\n"},
		{name: "garbage", file: "no colons here\n:\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, line, ok := containerOfLines([]byte(tt.file))
			if ok != (tt.want != "") {
				t.Fatalf("found %v (%+v), want %v", ok, c, tt.want != "")
			}
			if !ok {
				return
			}
			if line.path != tt.want || line.v2 != tt.v2 || c.ID != idDocker {
				t.Errorf("read %+v from line %+v, want docker %s from %q (v2 %v)", c, line, idDocker, tt.want, tt.v2)
			}
		})
	}
}

// TestDescribe names each fixture container from its runtime's own files:
// docker's config.v2.json, podman's containers.json, containerd's task
// config.json, CRI-O's spec and volatile-containers.json.
func TestDescribe(t *testing.T) {
	rt := Runtimes{Root: "testdata/runtimes"}
	tests := []struct {
		name string
		in   tare.Container
		want tare.Container
	}{
		{"docker", tare.Container{ID: idDocker, Runtime: RuntimeDocker},
			tare.Container{ID: idDocker, Runtime: RuntimeDocker, Name: "redis-cache", Image: "redis:7"}},
		{"docker, the cgroupfs driver's bare id under a pod", tare.Container{ID: idDockerK8s, Runtime: RuntimeKubernetes},
			tare.Container{ID: idDockerK8s, Runtime: RuntimeDocker, Name: "web", Pod: "shop/web-7d9c5b7f4-x2k8p",
				Image: "sha256:3b25b682ea82b2db3cc4fd48db818be788ee3f902ac7378090cf2624ec2442df"}},
		{"podman", tare.Container{ID: idPodman, Runtime: RuntimePodman},
			tare.Container{ID: idPodman, Runtime: RuntimePodman, Name: "web-podman", Image: "docker.io/library/nginx:1.27"}},
		{"containerd", tare.Container{ID: idContainerd, Runtime: RuntimeContainerd},
			tare.Container{ID: idContainerd, Runtime: RuntimeContainerd, Name: "worker", Image: "ghcr.io/acme/worker:1.4", Pod: "jobs/worker-5c7d8f9b6-m2n3p"}},
		{"containerd, a bare id", tare.Container{ID: idContainerd},
			tare.Container{ID: idContainerd, Runtime: RuntimeContainerd, Name: "worker", Image: "ghcr.io/acme/worker:1.4", Pod: "jobs/worker-5c7d8f9b6-m2n3p"}},
		{"cri-o", tare.Container{ID: idCRIO, Runtime: RuntimeCRIO},
			tare.Container{ID: idCRIO, Runtime: RuntimeCRIO, Name: "api", Image: "registry.example.com/payments/api:2.3.1", Pod: "payments/api-6f8b9d5c7-q4wzt"}},
		{"docker's cgroup, podman's files: docker's cgroup says docker", tare.Container{ID: idPodman, Runtime: RuntimeDocker},
			tare.Container{ID: idPodman, Runtime: RuntimeDocker}},
		{"in no runtime's files", tare.Container{ID: idUnknown, Runtime: RuntimeKubernetes},
			tare.Container{ID: idUnknown, Runtime: RuntimeKubernetes}},
		{"a machine", tare.Container{ID: "build-box", Name: "build-box", Runtime: RuntimeNspawn},
			tare.Container{ID: "build-box", Name: "build-box", Runtime: RuntimeNspawn}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.in
			rt.describe(&c)
			if c != tt.want {
				t.Errorf("described %+v\n as %+v,\nwant %+v", tt.in, c, tt.want)
			}
		})
	}
}

// TestDescribeCRIOFromListAlone: without its spec, CRI-O's entry in
// volatile-containers.json still names the container and its pod.
func TestDescribeCRIOFromListAlone(t *testing.T) {
	root := t.TempDir()
	replaceTree(t, "testdata/runtimes", root)
	writeFiles(t, root, map[string]string{"run/containers/storage/overlay-containers/" + idCRIO + "/userdata/config.json": "{}"})
	c := tare.Container{ID: idCRIO, Runtime: RuntimeCRIO}
	(&Runtimes{Root: root}).describe(&c)
	want := tare.Container{ID: idCRIO, Runtime: RuntimeCRIO, Name: "api", Image: "registry.example.com/payments/api:2.3.1",
		Pod: "k8s_api-6f8b9d5c7-q4wzt_payments_7d3f8a2e-4b1c-4e5f-9a8b-2c3d4e5f6a7b_0"}
	if c != want {
		t.Errorf("described as %+v, want %+v", c, want)
	}
}

// TestDescribeExplicitDir: a docker data root given explicitly (docker
// --data-root elsewhere, rootless docker) is read.
func TestDescribeExplicitDir(t *testing.T) {
	var rt Runtimes
	rt.Root = t.TempDir() // nothing in the default places
	if err := rt.SetDir("docker", "testdata/runtimes/var/lib/docker"); err != nil {
		t.Fatal(err)
	}
	c := tare.Container{ID: idDocker, Runtime: RuntimeDocker}
	rt.describe(&c)
	if c.Name != "redis-cache" || c.Image != "redis:7" {
		t.Errorf("described as %+v, want redis-cache, redis:7", c)
	}
	for _, bad := range []string{"rkt", ""} {
		if err := rt.SetDir(bad, "/x"); err == nil {
			t.Errorf("SetDir(%q) accepted an unknown runtime", bad)
		}
	}
}

func TestByContainer(t *testing.T) {
	redis := &tare.Container{ID: idDocker, Runtime: RuntimeDocker, Name: "redis-cache"}
	web := &tare.Container{ID: idPodman, Runtime: RuntimePodman, Name: "web"}
	in := []tare.ProcessShare{
		{Name: "redis-server", PID: 10, CPUPct: 20, Container: redis, Children: []string{"sh"}},
		{Name: "cc1", PID: 11, CPUPct: 30},
		{Name: "nginx", PID: 12, CPUPct: 2, Container: web},
		{Name: "redis-bgsave", PID: 13, CPUPct: 25, Container: redis},
		{Name: "sh", PID: 14, CPUPct: 1, Container: redis, Children: []string{"sh", "date"}},
	}
	got := tare.Busiest(byContainer(in, map[*tare.Container]shareGroup{}))
	want := []tare.ProcessShare{
		{Name: "redis-bgsave", PID: 13, CPUPct: 46, Container: redis, Processes: 3, Children: []string{"sh", "date"}},
		{Name: "cc1", PID: 11, CPUPct: 30},
		{Name: "nginx", PID: 12, CPUPct: 2, Container: web, Processes: 1},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("grouped\n%+v,\nwant\n%+v", got, want)
	}
}

func TestUnescapeUnit(t *testing.T) {
	for in, want := range map[string]string{`a\x2db`: "a-b", `\x2d\x2d`: "--", `plain`: "plain", `bad\x2`: `bad\x2`, `bad\xzz`: `bad\xzz`, `\x`: `\x`} {
		if got := unescapeUnit(in); got != want {
			t.Errorf("unescapeUnit(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestLedgerContainers: the v2 fixture's tick (TestLedgerFixture) with
// its two other processes in containers. batch (pid 60, 10 %) and cron
// (pid 61, 2 %) in docker's redis-cache are one share of 12 %, named by
// the container and by batch; with cron in podman's web-podman instead,
// they are two, each named by its container.
func TestLedgerContainers(t *testing.T) {
	docker := "0::/system.slice/docker-" + idDocker + ".scope\n"
	podman := "0::/machine.slice/libpod-" + idPodman + ".scope/container\n"
	redis := &tare.Container{ID: idDocker, Runtime: RuntimeDocker, Name: "redis-cache", Image: "redis:7"}
	web := &tare.Container{ID: idPodman, Runtime: RuntimePodman, Name: "web-podman", Image: "docker.io/library/nginx:1.27"}
	tests := []struct {
		name       string
		cron       string // pid 61's cgroup file
		wantShares []tare.ProcessShare
	}{
		{"one container", docker, []tare.ProcessShare{{Name: "batch", PID: 60, CPUPct: 12, Container: redis, Processes: 2}}},
		{"two containers", podman, []tare.ProcessShare{{Name: "batch", PID: 60, CPUPct: 10, Container: redis, Processes: 1},
			{Name: "cron", PID: 61, CPUPct: 2, Container: web, Processes: 1}}},
		{"one in none", "0::/system.slice/cron.service\n", []tare.ProcessShare{{Name: "batch", PID: 60, CPUPct: 10, Container: redis, Processes: 1},
			{Name: "cron", PID: 61, CPUPct: 2}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			step := func(moment string) {
				replaceTree(t, filepath.Join("testdata", "v2", moment), root)
				files := map[string]string{"proc/60/cgroup": docker}
				if isDir(filepath.Join(root, "proc", "61")) {
					files["proc/61/cgroup"] = tt.cron
				}
				writeFiles(t, root, files)
			}
			step("t0")
			s, err := NewSampler(Config{ProcRoot: filepath.Join(root, "proc"), CgroupRoot: filepath.Join(root, "cgroup"),
				SUT: []int{42}, Tare: []int{50}, Runtimes: Runtimes{Root: "testdata/runtimes"}, Now: func() time.Time { return t0 }})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			step("t1")
			got, err := s.Sample(t0.Add(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			by := got.CPUBy
			if by == nil || !near(by.Others, 12) {
				t.Fatalf("ledger %+v, want others 12 %%; warnings %v", by, s.Warnings())
			}
			if len(by.TopOthers) != len(tt.wantShares) {
				t.Fatalf("top others %+v, want %+v", by.TopOthers, tt.wantShares)
			}
			for i, w := range tt.wantShares {
				g := by.TopOthers[i]
				if g.Name != w.Name || g.PID != w.PID || !near(g.CPUPct, w.CPUPct) || g.Processes != w.Processes || !g.Container.SameAs(w.Container) ||
					g.Container != nil && *g.Container != *w.Container {
					t.Errorf("top other %d = %+v (container %+v), want %+v (container %+v)", i, g, g.Container, w, w.Container)
				}
			}
		})
	}
}

// containerHost writes a fixture host under a temp dir: processes in the
// fixture's containers (docker's redis-cache: 100, 101; podman's
// web-podman: 200; containerd's worker of pod jobs/…: 300; a bare id no
// runtime knows: 400; none: 1, 500), with the host's kthreadd as pid 2,
// and a unified cgroup tree holding docker's scope.
func containerHost(t *testing.T) (procRoot, cgroupRoot string) {
	t.Helper()
	root := t.TempDir()
	docker := "0::/system.slice/docker-" + idDocker + ".scope\n"
	files := map[string]string{
		"proc/1/cgroup":             "0::/init.scope\n",
		"proc/2/stat":               "2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 20 0 1 0 1 0 0\n",
		"proc/100/cgroup":           docker,
		"proc/101/cgroup":           "0::/system.slice/docker-" + idDocker + ".scope/worker\n",
		"proc/200/cgroup":           "0::/machine.slice/libpod-" + idPodman + ".scope/container\n",
		"proc/300/cgroup":           "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod2c9e8f7a_6b5d_4c3e_8f1a_0b9c8d7e6f5a.slice/cri-containerd-" + idContainerd + ".scope\n",
		"proc/400/cgroup":           "0::/kubepods/besteffort/pod1b4e28ba-2fa1-11d2-883f-0016d3cca427/" + idUnknown + "\n",
		"proc/500/cgroup":           "0::/system.slice/sshd.service\n",
		"cgroup/cgroup.controllers": "cpu io memory pids\n",
		"cgroup/system.slice/docker-" + idDocker + ".scope/cpu.stat": "usage_usec 10\nnr_periods 0\nnr_throttled 0\nthrottled_usec 0\n",
	}
	writeFiles(t, root, files)
	return filepath.Join(root, "proc"), filepath.Join(root, "cgroup")
}

func TestFindContainer(t *testing.T) {
	procRoot, cgroupRoot := containerHost(t)
	rt := Runtimes{Root: "testdata/runtimes"}
	dockerScope := filepath.Join(cgroupRoot, "system.slice", "docker-"+idDocker+".scope")
	tests := []struct {
		ref      string
		wantID   string
		wantPIDs []int
		cgroup   string
	}{
		{"redis-cache", idDocker, []int{100, 101}, dockerScope},
		{idDocker, idDocker, []int{100, 101}, dockerScope},
		{idDocker[:12], idDocker, []int{100, 101}, dockerScope},
		{"863e", idDocker, []int{100, 101}, dockerScope},
		{"web-podman", idPodman, []int{200}, ""}, // its cgroup is not in the fixture tree
		{"worker", idContainerd, []int{300}, ""},
		{"jobs/worker-5c7d8f9b6-m2n3p/worker", idContainerd, []int{300}, ""},
		{"worker-5c7d8f9b6-m2n3p/worker", idContainerd, []int{300}, ""},
		{idUnknown, idUnknown, []int{400}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.ref, func(t *testing.T) {
			got, err := FindContainer(procRoot, cgroupRoot, rt, tt.ref)
			if err != nil {
				t.Fatal(err)
			}
			if got.Container.ID != tt.wantID || !slices.Equal(got.PIDs, tt.wantPIDs) || got.Cgroup != tt.cgroup {
				t.Errorf("FindContainer(%q) = %+v, want %s with pids %v in %q", tt.ref, got, tt.wantID, tt.wantPIDs, tt.cgroup)
			}
		})
	}
}

func TestFindContainerErrors(t *testing.T) {
	procRoot, cgroupRoot := containerHost(t)
	stopped := t.TempDir()
	replaceTree(t, "testdata/runtimes", stopped)
	tests := []struct {
		name, ref string
		rt        Runtimes
		code      string
		want      []string
	}{
		{"no such container", "redis-cach", Runtimes{Root: "testdata/runtimes"}, tare.ENOTFOUND, []string{
			`container "redis-cach" not found: no process under ` + procRoot + ` runs in a container of that name or id`,
			"running: container `redis-cache` (docker 863e2e323075, redis:7), container `web-podman` (podman 2f34efe78475, docker.io/library/nginx:1.27)",
			"testdata/runtimes/var/lib/docker: 2 containers", "testdata/runtimes/run/k3s/containerd: absent", "--runtime-dir"}},
		{"known to docker, not running", "web", Runtimes{Root: "testdata/runtimes"}, tare.ENOTFOUND, []string{
			"container `web` of pod shop/web-7d9c5b7f4-x2k8p (docker c093ef76e1b1, sha256:3b25b682ea82b2db3cc4fd48db818be788ee3f902ac7378090cf2624ec2442df) is in testdata/runtimes/var/lib/docker/containers/" + idDockerK8s,
			"but no process under " + procRoot + " runs in it: is it running?"}},
		{"too short a prefix", "86", Runtimes{Root: "testdata/runtimes"}, tare.ENOTFOUND, []string{`container "86" not found`}},
		{"empty", "", Runtimes{}, tare.EINVALID, []string{"no container named"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := FindContainer(procRoot, cgroupRoot, tt.rt, tt.ref)
			if err == nil {
				t.Fatalf("FindContainer(%q) found one", tt.ref)
			}
			if tare.ErrorCode(err) != tt.code {
				t.Errorf("code %q, want %q: %v", tare.ErrorCode(err), tt.code, err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nlacks %q", err, w)
				}
			}
		})
	}
}

// TestFindContainerAmbiguous: two running containers of one name (the
// same container name in two pods) are refused, each named.
func TestFindContainerAmbiguous(t *testing.T) {
	procRoot, cgroupRoot := containerHost(t)
	root := t.TempDir()
	replaceTree(t, "testdata/runtimes", root)
	// a second task named worker, in another pod
	writeFiles(t, root, map[string]string{"run/containerd/io.containerd.runtime.v2.task/k8s.io/" + idUnknown + "/config.json": `{"annotations": {
		"io.kubernetes.cri.container-name": "worker", "io.kubernetes.cri.sandbox-name": "worker-2", "io.kubernetes.cri.sandbox-namespace": "batch"}}`})
	_, err := FindContainer(procRoot, cgroupRoot, Runtimes{Root: root}, "worker")
	if tare.ErrorCode(err) != tare.EINVALID {
		t.Fatalf("FindContainer(worker) = %v, want EINVALID", err)
	}
	for _, w := range []string{`container "worker" names 2 running containers`, "of pod jobs/worker-5c7d8f9b6-m2n3p", "of pod batch/worker-2", "give the id of one"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
	if got, err := FindContainer(procRoot, cgroupRoot, Runtimes{Root: root}, "batch/worker-2/worker"); err != nil || got.Container.ID != idUnknown {
		t.Errorf("by pod: %+v, %v; want %s", got, err, idUnknown)
	}
}

// TestFindContainerOwnPIDNamespace: in a PID namespace of its own, the
// error says why another container's processes are out of sight.
func TestFindContainerOwnPIDNamespace(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"proc/1/stat": "1 (tare) S 0 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0\n", "proc/1/cgroup": "0::/\n"})
	_, err := FindContainer(filepath.Join(root, "proc"), filepath.Join(root, "cgroup"), Runtimes{Root: root}, "redis-cache")
	for _, w := range []string{"no process there runs in any container", "lists only the processes of tare's own PID namespace", "--pid=host"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error %v lacks %q", err, w)
		}
	}
}

func TestSelfContainer(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  *tare.Container
	}{
		{"the cgroup path", map[string]string{"proc/self/cgroup": "1:cpu:/docker/" + idDocker + "\n0::/\n"},
			&tare.Container{ID: idDocker, Runtime: RuntimeDocker, Name: "redis-cache", Image: "redis:7"}},
		{"docker's mounts, in a cgroup namespace", map[string]string{"proc/self/cgroup": "0::/\n",
			"proc/self/mountinfo": "612 590 0:52 / / rw,relatime master:301 - overlay overlay rw\n" +
				"650 612 253:1 /var/lib/docker/containers/" + idDocker + "/resolv.conf /etc/resolv.conf rw,relatime - ext4 /dev/vda1 rw\n"},
			&tare.Container{ID: idDocker, Runtime: RuntimeDocker, Name: "redis-cache", Image: "redis:7"}},
		{"podman's mounts", map[string]string{"proc/self/cgroup": "0::/\n",
			"proc/self/mountinfo": "700 612 0:60 /containers/storage/overlay-containers/" + idPodman + "/userdata/hostname /etc/hostname rw - tmpfs tmpfs rw\n"},
			&tare.Container{ID: idPodman, Runtime: RuntimePodman, Name: "web-podman", Image: "docker.io/library/nginx:1.27"}},
		{"podman's marker, privileged", map[string]string{"proc/1/stat": "1 (sh) S 0 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0\n",
			"run/.containerenv": "engine=\"podman-5.4.0\"\nname=\"tare-gen\"\nid=\"" + idPodman + "\"\nimage=\"ghcr.io/tare-dev/tare:latest\"\nrootless=0\n"},
			&tare.Container{ID: idPodman, Runtime: RuntimePodman, Name: "tare-gen", Image: "ghcr.io/tare-dev/tare:latest"}},
		{"docker's marker", map[string]string{"proc/1/stat": "1 (sh) S 0 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0\n", ".dockerenv": ""},
			&tare.Container{Runtime: RuntimeDocker}},
		{"systemd-nspawn's marker", map[string]string{"proc/1/stat": "1 (systemd) S 0 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0\n", "run/systemd/container": "systemd-nspawn\n"},
			&tare.Container{Runtime: RuntimeNspawn}},
		{"a marker on a VM's disk, with the host's processes", map[string]string{"proc/2/stat": "2 (kthreadd) S 0 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 1 0 0\n", ".dockerenv": ""}, nil},
		{"no container", map[string]string{"proc/self/cgroup": "0::/user.slice/user-1000.slice/session-2.scope\n"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			writeFiles(t, root, tt.files)
			got := selfContainer(filepath.Join(root, "proc"), Runtimes{Root: "testdata/runtimes"})
			if (got == nil) != (tt.want == nil) || got != nil && *got != *tt.want {
				t.Errorf("selfContainer = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestOwnPIDNamespaceWarning(t *testing.T) {
	for _, tt := range []struct {
		env  tare.Env
		want string
	}{
		{tare.Env{Container: &tare.Container{ID: idDocker, Runtime: RuntimeDocker, Name: "tare-gen"}}, "tare runs in container `tare-gen` (docker 863e2e323075) with a PID namespace of its own"},
		{tare.Env{Pod: &tare.Pod{Namespace: "tare", Name: "gen-0"}}, "tare runs in pod tare/gen-0 with"},
		{tare.Env{}, "tare runs in a container with"},
	} {
		msg := ownPIDNamespace(tt.env).Error()
		for _, w := range []string{tt.want, "hostPID is not set", "counted as unattributed, not named", "--pid=host"} {
			if !strings.Contains(msg, w) {
				t.Errorf("warning %q lacks %q", msg, w)
			}
		}
	}
}

// TestDocsContainerPaths: every cgroup path docs/containers.md shows for a
// runtime reads as a container of that runtime (its placeholders filled
// in: <id>, <uid>, <name>, and … for the slices between).
func TestDocsContainerPaths(t *testing.T) {
	b, err := os.ReadFile("../docs/containers.md")
	if err != nil {
		t.Fatal(err)
	}
	runtimes := map[string]string{"docker": RuntimeDocker, "podman": RuntimePodman, "containerd (Kubernetes, nerdctl)": RuntimeContainerd,
		"CRI-O": RuntimeCRIO, "kubelet with cgroupfs": RuntimeKubernetes, "systemd-nspawn": RuntimeNspawn}
	fill := strings.NewReplacer("<id>", idContainerd, "<uid>", "2c9e8f7a-6b5d-4c3e-8f1a-0b9c8d7e6f5a", "<name>", "build", "…", "kubepods-besteffort.slice")
	rows := 0
	for _, line := range strings.Split(string(b), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) != 4 {
			continue
		}
		rt, ok := runtimes[strings.TrimSpace(cells[1])]
		if !ok || !strings.Contains(cells[2], "`/") {
			continue
		}
		rows++
		parts := strings.Split(cells[2], "`")
		for i := 1; i < len(parts); i += 2 {
			p := fill.Replace(parts[i])
			if strings.Contains(p, "uid>") || strings.Contains(p, "pod<uid") {
				t.Fatalf("placeholder left in %q", p)
			}
			c, _, ok := parseContainerCgroup(p)
			if !ok || c.Runtime != rt {
				t.Errorf("docs: %q (%s) reads as %+v, %v", p, strings.TrimSpace(cells[1]), c, ok)
			}
		}
	}
	if rows != len(runtimes) {
		t.Errorf("found %d rows of the runtimes' cgroups in docs/containers.md, want %d", rows, len(runtimes))
	}
}

// TestContainerIndexInherits: a child of a process known to be in a
// container is in it without its cgroup file being read; a child of a
// reused pid, or of a process in none, is read.
func TestContainerIndexInherits(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"proc/10/cgroup": "0::/system.slice/docker-" + idDocker + ".scope\n",
		"proc/20/cgroup": "0::/system.slice/sshd.service\n",
		"proc/23/cgroup": "0::/machine.slice/libpod-" + idPodman + ".scope\n",
		// 11, 12 and 21 have no cgroup file: read, they would be in none
	})
	procs := map[int]procStat{
		10: {PID: 10, PPID: 1, Start: 100}, 11: {PID: 11, PPID: 10, Start: 200},
		20: {PID: 20, PPID: 1, Start: 100}, 21: {PID: 21, PPID: 20, Start: 200}, 23: {PID: 23, PPID: 20, Start: 300},
	}
	x := newContainerIndex(filepath.Join(root, "proc"), Runtimes{Root: "testdata/runtimes"})
	for _, pid := range []int{10, 20} {
		x.of(pid, procs[pid], procs)
	}
	if c := x.of(11, procs[11], procs); c == nil || c.ID != idDocker || c.Name != "redis-cache" {
		t.Errorf("child of redis-cache's process: %+v, want redis-cache", c)
	}
	if c := x.of(21, procs[21], procs); c != nil {
		t.Errorf("child of sshd, no cgroup file: %+v, want none", c)
	}
	if c := x.of(23, procs[23], procs); c == nil || c.ID != idPodman {
		t.Errorf("a container's first process, child of a host process: %+v, want podman's, read from its file", c)
	}
	// pid 10 is reused by another process: its child is read, not inherited
	procs[10] = procStat{PID: 10, PPID: 1, Start: 150}
	procs[12] = procStat{PID: 12, PPID: 10, Start: 250}
	if c := x.of(12, procs[12], procs); c != nil {
		t.Errorf("child of a reused pid: %+v, want none (its own file is missing)", c)
	}
}
