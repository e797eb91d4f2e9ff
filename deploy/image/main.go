// Command image assembles tare's container image without a container
// engine: a static tare binary (CGO_ENABLED=0) on an empty base, written as
// an OCI image layout, the same image the repository's Dockerfile builds.
//
//	go run ./deploy/image -o dist/tare-image              # builds tare for linux/amd64 first
//	go run ./deploy/image -o dist/tare-image -arch arm64 -version v0.9.0
//	go run ./deploy/image -o dist/tare-image -binary ./tare   # a binary built already
//
// Push the layout with any OCI tool, for instance
//
//	crane push dist/tare-image registry.example.com/tare:v0.9.0
//	skopeo copy oci:dist/tare-image:v0.9.0 docker://registry.example.com/tare:v0.9.0
//
// The image holds /tare, an /etc/passwd and /etc/group naming user and
// group 65532 (tare), and an empty /tmp: no shell, no package manager, no
// libraries. It runs as 65532:65532, so it needs no root and runs on a
// read-only root filesystem (tare writes only to its store, which is
// PostgreSQL in a cluster, or a mounted volume).
package main

import (
	"archive/tar"
	"bytes"
	"cmp"
	"context"
	"debug/elf"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// What the image is; the Dockerfile at the repository's root says the same
// (image_test.go checks that it does).
const (
	User       = "65532:65532" // numeric, so the kubelet can check runAsNonRoot without an /etc/passwd lookup
	Entrypoint = "/tare"
	passwd     = "tare:x:65532:65532:tare:/nonexistent:/sbin/nologin\n"
	group      = "tare:x:65532:\n"
	source     = "https://github.com/tare-dev/tare"
)

// Config says what to put in the image.
type Config struct {
	Binary  []byte    // the static tare binary
	Arch    string    // GOARCH of the binary: amd64, arm64
	Version string    // tare's version, for the labels
	Created time.Time // the image's and its files' time: the same input gives the same digest
}

func main() {
	out := flag.String("o", "dist/tare-image", "write the OCI image layout to this directory (replaced)")
	binary := flag.String("binary", "", "put this static tare binary in the image instead of building one")
	arch := flag.String("arch", "amd64", "the image's architecture (GOARCH)")
	version := flag.String("version", "", "tare's version (default: git describe)")
	tag := flag.String("tag", "", "the name the layout gives the image, like v0.9.0 (default: the version)")
	flag.Parse()
	if err := run(context.Background(), *out, *binary, *arch, *version, *tag); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(2)
	}
}

func run(ctx context.Context, out, binary, arch, version, tag string) error {
	if version == "" {
		v, err := exec.CommandContext(ctx, "git", "describe", "--tags", "--always", "--dirty").Output()
		version = strings.TrimSpace(string(v))
		if err != nil || version == "" {
			version = "dev"
		}
	}
	if binary == "" {
		dir, err := os.MkdirTemp("", "tare-image")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		binary = filepath.Join(dir, "tare")
		if err := Build(ctx, ".", binary, arch, version); err != nil {
			return err
		}
	}
	bin, err := os.ReadFile(binary)
	if err != nil {
		return fmt.Errorf("read the tare binary: %w", err)
	}
	img, err := Image(Config{Binary: bin, Arch: arch, Version: version, Created: commitTime(ctx)})
	if err != nil {
		return err
	}
	if err := Write(out, img, cmp.Or(tag, version)); err != nil {
		return err
	}
	d, _ := img.Digest()
	fmt.Printf("wrote %s: tare %s for linux/%s, %s\n", out, version, arch, d)
	return nil
}

// Build compiles tare, from the repository at root, as a static Linux binary: no cgo (so no libc to
// ship), the time zone database embedded (a scratch image has none), paths
// trimmed and symbols stripped.
func Build(ctx context.Context, root, out, arch, version string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-tags", "timetzdata",
		"-ldflags", "-s -w -X main.version="+version, "-o", out, "./cmd/tare")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("build tare for linux/%s in %s: %w", arch, root, err)
	}
	return nil
}

// Image is tare's image: one layer on an empty base, OCI media types.
func Image(c Config) (v1.Image, error) {
	if err := static(c.Binary); err != nil {
		return nil, err
	}
	files, err := layerTar(c.Binary, c.Created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(files)), nil },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("image layer: %w", err)
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.AppendLayers(base, layer)
	if err != nil {
		return nil, fmt.Errorf("image layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", c.Arch
	cf.Created = v1.Time{Time: c.Created}
	for i := range cf.History {
		cf.History[i].Created, cf.History[i].CreatedBy = cf.Created, "go run ./deploy/image"
	}
	cf.Config = v1.Config{
		User:       User,
		Entrypoint: []string{Entrypoint},
		Cmd:        []string{"--help"},
		WorkingDir: "/",
		Env:        []string{"PATH=/"},
		Labels:     Labels(c.Version, c.Created),
	}
	return mutate.ConfigFile(img, cf)
}

// Labels are the image's OCI annotations as labels.
func Labels(version string, created time.Time) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":       "tare",
		"org.opencontainers.image.description": "open-loop load tester that says whether the host was quiet enough to trust the figures",
		"org.opencontainers.image.source":      source,
		"org.opencontainers.image.licenses":    "MIT",
		"org.opencontainers.image.version":     version,
		"org.opencontainers.image.created":     created.UTC().Format(time.RFC3339),
	}
}

// Write writes img as the OCI image layout in dir, replacing what was
// there, named tag (the org.opencontainers.image.ref.name annotation that
// skopeo's oci:dir:tag and crane read).
func Write(dir string, img v1.Image, tag string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("write image layout %s: %w", dir, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	err = p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": tag}),
		layout.WithPlatform(v1.Platform{OS: cf.OS, Architecture: cf.Architecture}))
	if err != nil {
		return fmt.Errorf("write image layout %s: %w", dir, err)
	}
	return nil
}

// layerTar is the image's one layer. Every entry is owned by root and
// read-only to user 65532, so the running tare cannot change its own image.
func layerTar(binary []byte, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	entries := []struct {
		name string
		mode int64
		body string
		dir  bool
	}{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/group", mode: 0o644, body: group},
		{name: "etc/passwd", mode: 0o644, body: passwd},
		{name: "tare", mode: 0o755, body: string(binary)},
		{name: "tmp/", mode: 0o1777, dir: true},
	}
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, ModTime: mtime, Format: tar.FormatPAX, Typeflag: tar.TypeReg, Size: int64(len(e.body))}
		if e.dir {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := io.WriteString(tw, e.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// static refuses a binary that needs a dynamic loader: on an empty base
// there is none, and the container would fail with "no such file".
func static(binary []byte) error {
	f, err := elf.NewFile(bytes.NewReader(binary))
	if err != nil {
		return fmt.Errorf("the tare binary is not a Linux ELF executable: %w", err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return errors.New("the tare binary is dynamically linked (it has an ELF interpreter): build it with CGO_ENABLED=0")
		}
	}
	return nil
}

// commitTime is the time of the commit built, so the image's digest
// depends only on its content; SOURCE_DATE_EPOCH overrides it.
func commitTime(ctx context.Context) time.Time {
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		var secs int64
		if _, err := fmt.Sscan(s, &secs); err == nil {
			return time.Unix(secs, 0).UTC()
		}
	}
	out, err := exec.CommandContext(ctx, "git", "log", "-1", "--format=%ct").Output()
	var secs int64
	if _, perr := fmt.Sscan(string(out), &secs); err != nil || perr != nil {
		return time.Unix(0, 0).UTC()
	}
	return time.Unix(secs, 0).UTC()
}
