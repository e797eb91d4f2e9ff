package host

import (
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/interfere"
	"github.com/tare-dev/tare/internal/testkit/testservice"
)

// TestContainersLive makes real cgroups named as the container runtimes
// name theirs, moves real CPU hogs into them, and checks that the ledger
// groups each container's processes into one share named from the
// runtime's files (the fixture tree testdata/runtimes, whose ids the
// cgroups carry), and that FindContainer finds a container's processes
// and cgroup by its name, and that the graph's node of a system under
// test in a container is named by it. The cgroups are made under a cgroup of the
// test's own (tare-test-<pid>-…), not beside the host's real
// system.slice, and removed at the end. The hogs run at nice -10 (as
// root), pinned two to a CPU, so that the builds of a shared machine do
// not push them out of the busiest five.
func TestContainersLive(t *testing.T) {
	if testing.Short() {
		t.Skip("real hogs in real cgroups for ~2 s: skipped with -short")
	}
	testservice.Root(t, "making cgroups")
	interfere.Exclusive(t)
	prefix := fmt.Sprintf("tare-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	redis := tare.Container{ID: idDocker, Runtime: RuntimeDocker, Name: "redis-cache", Image: "redis:7"}
	web := tare.Container{ID: idPodman, Runtime: RuntimePodman, Name: "web-podman", Image: "docker.io/library/nginx:1.27"}
	worker := tare.Container{ID: idContainerd, Runtime: RuntimeContainerd, Name: "worker", Image: "ghcr.io/acme/worker:1.4", Pod: "jobs/worker-5c7d8f9b6-m2n3p"}
	api := tare.Container{ID: idCRIO, Runtime: RuntimeCRIO, Name: "api", Image: "registry.example.com/payments/api:2.3.1", Pod: "payments/api-6f8b9d5c7-q4wzt"}
	containers := []struct {
		want   tare.Container
		cgroup string
		cpus   []int // a hog pinned to each
	}{
		{redis, "system.slice/docker-" + idDocker + ".scope", []int{0, 1}},
		{web, "machine.slice/libpod-" + idPodman + ".scope", []int{0}},
		{worker, "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod2c9e8f7a_6b5d_4c3e_8f1a_0b9c8d7e6f5a.slice/cri-containerd-" + idContainerd + ".scope", []int{1}},
		{api, "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod7d3f8a2e_4b1c_4e5f_9a8b_2c3d4e5f6a7b.slice/crio-" + idCRIO + ".scope", []int{0}},
	}
	hogs := map[int]string{} // pid → its container's id
	dirs := map[string]string{}
	for _, c := range containers {
		dir := interfere.NamedCgroup(t, DefaultCgroupRoot, prefix+"/"+c.cgroup, 0, 0)
		dirs[c.want.ID] = dir
		for _, cpu := range c.cpus {
			hog := interfere.Busy(t, interfere.Pinned(cpu)...)
			interfere.Join(t, dir, hog.Process.Pid)
			hogs[hog.Process.Pid] = c.want.ID
		}
	}
	rt := Runtimes{Root: "testdata/runtimes"}
	// One more, the system under test: its node of the graph is named by
	// its container, and it is no neighbour.
	sutDir := interfere.NamedCgroup(t, DefaultCgroupRoot, prefix+"/system.slice/docker-"+idDockerK8s+".scope", 0, 0)
	sut := interfere.Busy(t, interfere.Pinned(1)...)
	interfere.Join(t, sutDir, sut.Process.Pid)
	s, err := NewSampler(Config{Tick: 500 * time.Millisecond, Tare: []int{os.Getpid()}, Runtimes: rt,
		SUT: []int{sut.Process.Pid}, Parts: []Part{{PIDs: []int{sut.Process.Pid}, How: "--pid"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	samples := samplesOf(t, s, 3)
	by := samples[len(samples)-1].CPUBy
	if by == nil {
		t.Fatalf("no ledger; warnings %v", s.Warnings())
	}
	for _, p := range by.TopOthers {
		t.Logf("top other: %s %.1f%% of the host", p.Who(), p.CPUPct)
		if id, ok := hogs[p.PID]; ok && (p.Container == nil || p.Container.ID != id) {
			t.Errorf("hog %d of container %s is a share of its own: %+v", p.PID, id[:12], p)
		}
	}
	for _, c := range containers {
		i := slices.IndexFunc(by.TopOthers, func(p tare.ProcessShare) bool { return p.Container != nil && p.Container.ID == c.want.ID })
		if i < 0 {
			t.Errorf("%s is not among the busiest others", c.want.String())
			continue
		}
		got := by.TopOthers[i]
		if *got.Container != c.want || got.Processes != len(c.cpus) || got.Name != "sh" {
			t.Errorf("share %+v of %+v, want %+v with %d processes, named by sh", got, *got.Container, c.want, len(c.cpus))
		}
	}

	graph := s.Graph()
	if len(graph) != 1 || graph[0].Container == nil || graph[0].Container.ID != idDockerK8s || graph[0].Container.Name != "web" {
		t.Errorf("graph %+v: want its one node in docker's container web (%s)", graph, idDockerK8s[:12])
	}
	if slices.ContainsFunc(by.TopOthers, func(p tare.ProcessShare) bool { return p.PID == sut.Process.Pid }) {
		t.Errorf("the system under test is among the others: %+v", by.TopOthers)
	}

	found, err := FindContainer(DefaultProcRoot, DefaultCgroupRoot, rt, "redis-cache")
	if err != nil {
		t.Fatal(err)
	}
	var want []int
	for pid, id := range hogs {
		if id == idDocker {
			want = append(want, pid)
		}
	}
	slices.Sort(want)
	if !slices.Equal(found.PIDs, want) || found.Cgroup != dirs[idDocker] || found.Container != redis {
		t.Errorf("FindContainer(redis-cache) = %+v, want pids %v in %s", found, want, dirs[idDocker])
	}
}
