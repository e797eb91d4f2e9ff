package tare

import "testing"

func TestContainerString(t *testing.T) {
	const id = "863e2e3230752d206d1596588c88d84b695c9080172403208bdfb5b2435821c5"
	tests := []struct {
		c    Container
		want string
	}{
		{Container{ID: id, Runtime: "docker", Name: "redis-cache", Image: "redis:7"}, "container `redis-cache` (docker 863e2e323075, redis:7)"},
		{Container{ID: id, Runtime: "containerd", Name: "api", Image: "ghcr.io/shop/api:1.4", Pod: "shop/api-7d9"}, "container `api` of pod shop/api-7d9 (containerd 863e2e323075, ghcr.io/shop/api:1.4)"},
		{Container{ID: id, Runtime: "docker"}, "container 863e2e323075 (docker)"},
		{Container{ID: id, Runtime: "kubernetes"}, "container 863e2e323075 (kubernetes)"},
		{Container{ID: id}, "container 863e2e323075"},
		{Container{ID: id, Name: "batch"}, "container `batch` (863e2e323075)"},
		{Container{ID: id, Runtime: "containerd", Pod: "jobs/worker-1"}, "container 863e2e323075 of pod jobs/worker-1 (containerd)"},
		{Container{ID: "build-box", Name: "build-box", Runtime: "systemd-nspawn"}, "container `build-box` (systemd-nspawn)"},
	}
	for _, tt := range tests {
		if got := tt.c.String(); got != tt.want {
			t.Errorf("%+v.String() = %q, want %q", tt.c, got, tt.want)
		}
	}
}

func TestProcessShareWho(t *testing.T) {
	redis := &Container{ID: "863e2e3230752d206d1596588c88d84b695c9080172403208bdfb5b2435821c5", Runtime: "docker", Name: "redis-cache", Image: "redis:7"}
	for _, tt := range []struct {
		p    ProcessShare
		want string
	}{
		{ProcessShare{Name: "sh", PID: 7}, "`sh` (pid 7)"},
		{ProcessShare{Name: "redis-server", PID: 9, Container: redis, Processes: 1}, "container `redis-cache` (docker 863e2e323075, redis:7), `redis-server` (pid 9)"},
		{ProcessShare{Name: "redis-server", PID: 9, Container: redis, Processes: 3}, "container `redis-cache` (docker 863e2e323075, redis:7), 3 processes, busiest `redis-server` (pid 9)"},
	} {
		if got := tt.p.Who(); got != tt.want {
			t.Errorf("%+v.Who() = %q, want %q", tt.p, got, tt.want)
		}
	}
}
