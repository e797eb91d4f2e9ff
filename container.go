package tare

import (
	"fmt"
	"strings"
)

// Container is a container that processes run in: the runtime and id its
// cgroup path says, and, where that runtime's own files on the host say
// more, its name, image and Kubernetes pod. A field nobody said is "".
type Container struct {
	// ID is the runtime's container id (64 hex digits), or a
	// systemd-nspawn machine's name.
	ID string `json:"id"`
	// Name is the container's name: docker's and podman's --name, a
	// Kubernetes container's name in its pod spec.
	Name  string `json:"name"`
	Image string `json:"image"` // the image as the runtime recorded it, like redis:7
	// Runtime is docker, podman, containerd, cri-o, systemd-nspawn or
	// libvirt; kubernetes when only the kubelet's cgroup path says what
	// it is; "" when nothing does.
	Runtime string `json:"runtime"`
	Pod     string `json:"pod,omitempty"` // namespace/name of its Kubernetes pod
}

// shortID is how many hex digits of an id docker and podman print.
const shortID = 12

// ShortID is the id as docker ps prints it: its first 12 hex digits (a
// machine's name whole).
func (c *Container) ShortID() string {
	if len(c.ID) == 64 && strings.Trim(c.ID, "0123456789abcdef") == "" {
		return c.ID[:shortID]
	}
	return c.ID
}

// SameAs reports whether c and o are the same container (either may be
// nil: two nils are the same absence).
func (c *Container) SameAs(o *Container) bool {
	if c == nil || o == nil {
		return c == o
	}
	return c.ID == o.ID && c.Runtime == o.Runtime
}

// String names the container for a person, as the runtime's own tools
// would let them find it:
//
//	container `redis-cache` (docker 3f2a1b2c3d4e, redis:7)
//	container `api` of pod shop/api-7d9 (containerd 9b1c0d2e3f4a, ghcr.io/shop/api:1.4)
//	container 3f2a1b2c3d4e (docker)
func (c *Container) String() string {
	var b strings.Builder
	b.WriteString("container ")
	switch {
	case c.Name != "":
		fmt.Fprintf(&b, "`%s`", c.Name)
	case c.ID != "":
		b.WriteString(c.ShortID())
	default:
		b.Reset()
		b.WriteString("a container") // its runtime left a mark, not its id
	}
	if c.Pod != "" {
		fmt.Fprintf(&b, " of pod %s", c.Pod)
	}
	var in []string
	switch {
	case c.Name == "" || c.Name == c.ID || c.ID == "":
		in = append(in, c.Runtime)
	case c.Runtime != "":
		in = append(in, c.Runtime+" "+c.ShortID())
	default:
		in = append(in, c.ShortID())
	}
	if c.Image != "" {
		in = append(in, c.Image)
	}
	if in[0] == "" {
		in = in[1:]
	}
	if len(in) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(in, ", "))
	}
	return b.String()
}
