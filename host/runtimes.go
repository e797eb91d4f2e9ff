package host

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tare-dev/tare"
)

// Runtimes says where the container runtimes keep their state on this
// host, which is where a container's name and image are written: the
// cgroup path gives only its id. Its zero value looks in each runtime's
// default places; dirs given for a runtime are looked in first.
type Runtimes struct {
	// Root is the host's filesystem root the default places are under:
	// "/" when empty. Tests point it at a fixture tree.
	Root string
	// Docker are docker's data roots (/var/lib/docker), holding
	// containers/<id>/config.v2.json.
	Docker []string
	// Containerd are containerd's state dirs (/run/containerd, and k3s's
	// and microk8s's), holding io.containerd.runtime.v2.task/<namespace>/<id>/config.json.
	Containerd []string
	// Storage are the containers/storage roots that podman and CRI-O
	// share (/var/lib/containers/storage, /run/containers/storage),
	// holding <driver>-containers/containers.json and each container's
	// userdata/config.json.
	Storage []string
}

// The runtimes' default places, under Runtimes.Root.
var (
	defaultDockerDirs     = []string{"/var/lib/docker"}
	defaultContainerdDirs = []string{"/run/containerd", "/run/k3s/containerd", "/var/snap/microk8s/common/run/containerd"}
	defaultStorageDirs    = []string{"/var/lib/containers/storage", "/run/containers/storage"}
)

// SetDir adds dir to the places of a runtime, given as docker, containerd,
// podman or cri-o (podman and CRI-O share containers/storage). Rootless
// docker and podman keep their state in the user's home, and k3s, kind or
// a docker started with --data-root elsewhere than the defaults.
func (r *Runtimes) SetDir(runtime, dir string) error {
	if dir == "" {
		return fmt.Errorf("no directory given for %s", runtime)
	}
	switch runtime {
	case RuntimeDocker:
		r.Docker = append(r.Docker, dir)
	case RuntimeContainerd:
		r.Containerd = append(r.Containerd, dir)
	case RuntimePodman, RuntimeCRIO:
		r.Storage = append(r.Storage, dir)
	default:
		return fmt.Errorf("unknown container runtime %q: want docker, containerd, podman or cri-o", runtime)
	}
	return nil
}

// dirs are the places to look, explicit ones first.
func (r *Runtimes) dirs(explicit, defaults []string) []string {
	out := slices.Clone(explicit)
	for _, d := range defaults {
		out = append(out, filepath.Join(cmpRoot(r.Root), d))
	}
	return out
}

func cmpRoot(root string) string {
	if root == "" {
		return "/"
	}
	return root
}

// Places lists the directories tare reads container names from, for a
// message saying where it looked.
func (r *Runtimes) Places() []string {
	return slices.Concat(r.dirs(r.Docker, defaultDockerDirs), r.dirs(r.Containerd, defaultContainerdDirs), r.dirs(r.Storage, defaultStorageDirs))
}

// describe fills in what the runtimes' files say of c: its name, image and
// pod, and the runtime of an id whose cgroup did not say. It reads the
// files of the runtime c names, or of every runtime that could have made
// it; a file that is absent or unreadable (another user's, on a host where
// tare is not root) leaves c as it was.
func (r *Runtimes) describe(c *tare.Container) {
	if !isContainerID(c.ID) {
		return // a machine's name is all it has
	}
	maybe := func(rts ...string) bool {
		return c.Runtime == "" || c.Runtime == RuntimeKubernetes || slices.Contains(rts, c.Runtime)
	}
	if maybe(RuntimeDocker) {
		for _, d := range r.dirs(r.Docker, defaultDockerDirs) {
			if dockerContainer(d, c) {
				return
			}
		}
	}
	if maybe(RuntimeContainerd) {
		for _, d := range r.dirs(r.Containerd, defaultContainerdDirs) {
			if containerdContainer(d, c) {
				return
			}
		}
	}
	if maybe(RuntimePodman, RuntimeCRIO) {
		for _, d := range r.dirs(r.Storage, defaultStorageDirs) {
			if storageContainer(d, c) {
				return
			}
		}
	}
}

// maxStateFile bounds a runtime file tare reads: a containers.json of a
// few thousand containers is a few megabytes.
const maxStateFile = 32 << 20

// readJSON decodes the JSON file name into v.
func readJSON(name string, v any) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxStateFile+1))
	if err != nil {
		return err
	}
	if len(b) > maxStateFile {
		return fmt.Errorf("%s: larger than %d bytes", name, maxStateFile)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrParse, name, err)
	}
	return nil
}

// dockerConfig is what tare reads of docker's containers/<id>/config.v2.json.
type dockerConfig struct {
	Name   string // "/redis-cache"
	Config struct {
		Image  string            // as given to docker run: "redis:7"
		Labels map[string]string // a Kubernetes container's (cri-dockerd) carry its pod
	}
}

// dockerContainer describes c from docker's data root dir, if it has it.
func dockerContainer(dir string, c *tare.Container) bool {
	var cfg dockerConfig
	if readJSON(filepath.Join(dir, "containers", c.ID, "config.v2.json"), &cfg) != nil {
		return false
	}
	c.Runtime = RuntimeDocker
	c.Name = strings.TrimPrefix(cfg.Name, "/")
	c.Image = cfg.Config.Image
	kubernetesNames(cfg.Config.Labels, c)
	return true
}

// ociSpec is what tare reads of an OCI runtime spec, a bundle's config.json.
type ociSpec struct {
	Annotations map[string]string `json:"annotations"`
}

// containerdContainer describes c from a containerd state dir, if one of
// its namespaces (k8s.io for Kubernetes, default, moby for docker's own
// containerd) has a task of that id: the bundle's config.json carries the
// CRI plugin's annotations.
func containerdContainer(dir string, c *tare.Container) bool {
	for _, shim := range []string{"io.containerd.runtime.v2.task", "io.containerd.runtime.v1.linux"} {
		namespaces, err := os.ReadDir(filepath.Join(dir, shim))
		if err != nil {
			continue
		}
		for _, ns := range namespaces {
			var spec ociSpec
			if readJSON(filepath.Join(dir, shim, ns.Name(), c.ID, "config.json"), &spec) != nil {
				continue
			}
			if ns.Name() == "moby" {
				return false // docker's own: its data root names it
			}
			c.Runtime = RuntimeContainerd
			kubernetesNames(spec.Annotations, c)
			if c.Name == "" {
				c.Name = spec.Annotations["nerdctl/name"]
			}
			return true
		}
	}
	return false
}

// storageEntry is one container of containers/storage's containers.json.
type storageEntry struct {
	ID       string   `json:"id"`
	Names    []string `json:"names"`
	Metadata string   `json:"metadata"` // JSON, the runtime's own
}

// storageMetadata is what podman (name, image-name) and CRI-O (pod-name,
// metadata-name, image-name) keep in an entry's metadata.
type storageMetadata struct {
	Name         string `json:"name"`
	MetadataName string `json:"metadata-name"`
	ImageName    string `json:"image-name"`
	PodName      string `json:"pod-name"`
	Pod          bool   `json:"pod"`
}

// storageContainer describes c from a containers/storage root, if it has
// it: the OCI spec's annotations say CRI-O's containers' pod, the lists
// (containers.json, and volatile-containers.json for podman run --rm and
// CRI-O) name every container.
func storageContainer(dir string, c *tare.Container) bool {
	drivers, err := filepath.Glob(filepath.Join(dir, "*-containers"))
	if err != nil || len(drivers) == 0 {
		return false
	}
	for _, d := range drivers {
		if crioSpec(d, c) {
			return true
		}
		for _, list := range []string{"containers.json", "volatile-containers.json"} {
			var entries []storageEntry
			if readJSON(filepath.Join(d, list), &entries) != nil {
				continue
			}
			for _, e := range entries {
				if e.ID == c.ID {
					storageNames(e, c)
					return true
				}
			}
		}
	}
	return false
}

// crioSpec describes c from its OCI spec in a containers/storage driver
// dir, if CRI-O made it: its annotations name the pod and its namespace.
func crioSpec(driverDir string, c *tare.Container) bool {
	var spec ociSpec
	if readJSON(filepath.Join(driverDir, c.ID, "userdata", "config.json"), &spec) != nil || spec.Annotations["io.kubernetes.cri-o.ContainerType"] == "" {
		return false
	}
	c.Runtime = RuntimeCRIO
	kubernetesNames(spec.Annotations, c)
	return true
}

// storageNames reads a containers.json entry: CRI-O's metadata has a pod.
func storageNames(e storageEntry, c *tare.Container) {
	var md storageMetadata
	_ = json.Unmarshal([]byte(e.Metadata), &md) // names alone will do
	c.Image = md.ImageName
	if md.PodName != "" {
		c.Runtime = RuntimeCRIO
		c.Name = md.MetadataName
		c.Pod = md.PodName // the namespace is in the spec's annotations only
		return
	}
	c.Runtime = RuntimePodman
	c.Name = md.Name
	if c.Name == "" && len(e.Names) > 0 {
		c.Name = e.Names[0]
	}
}

// kubernetesNames reads a Kubernetes container's name, image and pod from
// the annotations (containerd's CRI plugin, CRI-O) or labels (cri-dockerd)
// the runtime gave it. The pod's sandbox (pause) container has no name of
// its own: its pod names it.
func kubernetesNames(a map[string]string, c *tare.Container) {
	first := func(keys ...string) string {
		for _, k := range keys {
			if v := a[k]; v != "" {
				return v
			}
		}
		return ""
	}
	if name := first("io.kubernetes.cri.container-name", "io.kubernetes.container.name"); name != "" && name != "POD" {
		c.Name = name
	} else if first("io.kubernetes.cri.container-type", "io.kubernetes.cri-o.ContainerType", "io.kubernetes.docker.type") != "" {
		c.Name = "" // the sandbox
	}
	if img := first("io.kubernetes.cri.image-name", "io.kubernetes.cri-o.ImageName"); img != "" {
		c.Image = img
	}
	pod := first("io.kubernetes.cri.sandbox-name", "io.kubernetes.pod.name")
	if ns := first("io.kubernetes.cri.sandbox-namespace", "io.kubernetes.pod.namespace"); ns != "" && pod != "" {
		pod = ns + "/" + pod
	}
	if pod != "" {
		c.Pod = pod
	}
}

// knownContainer is a container a runtime's files list, and the file.
type knownContainer struct {
	tare.Container
	From string
}

// known lists the containers the runtimes' files on this host name, and
// says of each place what it found there (for a message when a container
// named by the user is not running): "/var/lib/docker: 3 containers",
// "/run/containerd: absent".
func (r *Runtimes) known() (list []knownContainer, places []string) {
	look := func(dir string, find func(string) ([]knownContainer, error)) {
		if !isDir(dir) {
			places = append(places, dir+": absent")
			return
		}
		found, err := find(dir)
		switch {
		case err != nil:
			places = append(places, fmt.Sprintf("%s: %v", dir, err))
		default:
			places = append(places, fmt.Sprintf("%s: %d %s", dir, len(found), map[bool]string{true: "container", false: "containers"}[len(found) == 1]))
		}
		list = append(list, found...)
	}
	for _, d := range r.dirs(r.Docker, defaultDockerDirs) {
		look(d, func(dir string) ([]knownContainer, error) {
			ids, err := os.ReadDir(filepath.Join(dir, "containers"))
			if err != nil && !os.IsNotExist(err) {
				return nil, fmt.Errorf("list: %w", err)
			}
			var out []knownContainer
			for _, e := range ids {
				c := tare.Container{ID: e.Name()}
				if isContainerID(c.ID) && dockerContainer(dir, &c) {
					out = append(out, knownContainer{c, filepath.Join(dir, "containers", c.ID)})
				}
			}
			return out, nil
		})
	}
	for _, d := range r.dirs(r.Containerd, defaultContainerdDirs) {
		look(d, func(dir string) ([]knownContainer, error) {
			tasks, _ := filepath.Glob(filepath.Join(dir, "io.containerd.runtime.v*", "*", "*", "config.json"))
			var out []knownContainer
			for _, t := range tasks {
				c := tare.Container{ID: filepath.Base(filepath.Dir(t))}
				if isContainerID(c.ID) && containerdContainer(dir, &c) {
					out = append(out, knownContainer{c, filepath.Dir(t)})
				}
			}
			return out, nil
		})
	}
	for _, d := range r.dirs(r.Storage, defaultStorageDirs) {
		look(d, func(dir string) ([]knownContainer, error) {
			lists, _ := filepath.Glob(filepath.Join(dir, "*-containers", "*containers.json"))
			var out []knownContainer
			for _, l := range lists {
				var entries []storageEntry
				if err := readJSON(l, &entries); err != nil {
					return out, fmt.Errorf("read: %w", err)
				}
				for _, e := range entries {
					c := tare.Container{ID: e.ID}
					if !isContainerID(c.ID) {
						continue
					}
					if !crioSpec(filepath.Dir(l), &c) {
						storageNames(e, &c)
					}
					out = append(out, knownContainer{c, l})
				}
			}
			return out, nil
		})
	}
	return list, places
}
