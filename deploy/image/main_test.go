package main

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

// staticBinary builds pkg (relative to the repository's root) with cgo off.
func staticBinary(t *testing.T, pkg string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "bin")
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", pkg, err, b)
	}
	return out
}

// writeAndRead writes the image of binary as a layout and reads it back,
// as a registry tool would.
func writeAndRead(t *testing.T, binary []byte, version string) (v1.Image, v1.Descriptor) {
	t.Helper()
	img, err := Image(Config{Binary: binary, Arch: "amd64", Version: version, Created: time.Unix(1795960800, 0).UTC()})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "layout")
	if err := Write(dir, img, version); err != nil {
		t.Fatal(err)
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil || len(im.Manifests) != 1 {
		t.Fatalf("index: %+v %v, want one image", im, err)
	}
	desc := im.Manifests[0]
	got, err := idx.Image(desc.Digest)
	if err != nil {
		t.Fatal(err)
	}
	if err := validate.Image(got); err != nil {
		t.Fatalf("the layout's image does not validate: %v", err)
	}
	return got, desc
}

// files lists the image's one layer: name → header, and the bodies.
func files(t *testing.T, img v1.Image) (map[string]*tar.Header, map[string][]byte) {
	t.Helper()
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%d layers, %v: want one", len(layers), err)
	}
	if mt, _ := layers[0].MediaType(); mt != types.OCILayer {
		t.Errorf("layer media type %s, want %s", mt, types.OCILayer)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	heads, bodies := map[string]*tar.Header{}, map[string][]byte{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return heads, bodies
		}
		if err != nil {
			t.Fatal(err)
		}
		heads[h.Name] = h
		bodies[h.Name], _ = io.ReadAll(tr)
	}
}

func TestImage(t *testing.T) {
	bin, err := os.ReadFile(staticBinary(t, "./deploy/image/testdata/static"))
	if err != nil {
		t.Fatal(err)
	}
	img, desc := writeAndRead(t, bin, "v0.9.0")

	if desc.Annotations["org.opencontainers.image.ref.name"] != "v0.9.0" || desc.Platform == nil || desc.Platform.OS != "linux" || desc.Platform.Architecture != "amd64" {
		t.Errorf("index entry %+v: want the tag and linux/amd64", desc)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	uid, gid, ok := strings.Cut(c.User, ":")
	if u, err := strconv.Atoi(uid); !ok || err != nil || u == 0 {
		t.Errorf("user %q: want a numeric non-root uid:gid (runAsNonRoot checks it without /etc/passwd)", c.User)
	}
	if _, err := strconv.Atoi(gid); err != nil {
		t.Errorf("group %q is not numeric", gid)
	}
	if !slices.Equal(c.Entrypoint, []string{"/tare"}) {
		t.Errorf("entrypoint %q, want [/tare]", c.Entrypoint)
	}
	for k, want := range map[string]string{"org.opencontainers.image.version": "v0.9.0", "org.opencontainers.image.licenses": "MIT",
		"org.opencontainers.image.source": source, "org.opencontainers.image.title": "tare"} {
		if c.Labels[k] != want {
			t.Errorf("label %s = %q, want %q", k, c.Labels[k], want)
		}
	}

	heads, bodies := files(t, img)
	var names []string
	for n, h := range heads {
		names = append(names, n)
		if h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s owned by %d:%d: the image's files belong to root, so tare cannot change them", n, h.Uid, h.Gid)
		}
		if base := filepath.Base(strings.TrimSuffix(n, "/")); slices.Contains([]string{"sh", "bash", "ash", "dash", "busybox", "bin"}, base) {
			t.Errorf("the image holds %s: it should have no shell", n)
		}
	}
	slices.Sort(names)
	if want := []string{"etc/", "etc/group", "etc/passwd", "tare", "tmp/"}; !slices.Equal(names, want) {
		t.Errorf("files %q, want %q", names, want)
	}
	if h := heads["tare"]; h == nil || h.Mode != 0o755 || !bytes.Equal(bodies["tare"], bin) {
		t.Errorf("/tare: %+v, want the binary, mode 0755", h)
	}
	if !strings.Contains(string(bodies["etc/passwd"]), ":"+uid+":"+gid+":") {
		t.Errorf("/etc/passwd %q does not name the image's user %s", bodies["etc/passwd"], c.User)
	}

	// The same input gives the same image.
	again, _ := writeAndRead(t, bin, "v0.9.0")
	d1, _ := img.Digest()
	d2, _ := again.Digest()
	if d1 != d2 {
		t.Errorf("two builds of one binary: digests %s and %s", d1, d2)
	}
}

// TestImageRefusesDynamicBinary: on an empty base a binary that needs the
// dynamic loader cannot start, so it is refused at build time.
func TestImageRefusesDynamicBinary(t *testing.T) {
	for _, name := range []string{"/bin/ls", "/usr/bin/env"} {
		b, err := os.ReadFile(name)
		if err != nil {
			continue
		}
		_, err = Image(Config{Binary: b, Arch: "amd64"})
		if err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
			t.Errorf("%s: %v, want a refusal naming CGO_ENABLED=0", name, err)
		}
		return
	}
	t.Skip("no dynamically linked binary on this machine to try")
}

// TestDockerfileAgrees: the Dockerfile builds the image this program
// writes: the same user, entrypoint, files and labels.
func TestDockerfileAgrees(t *testing.T) {
	b, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	df := string(b)
	for _, want := range []string{
		"\nFROM scratch\n", "\nUSER " + User + "\n", `ENTRYPOINT ["` + Entrypoint + `"]`, "CGO_ENABLED=0", "-tags timetzdata",
		"printf '" + strings.TrimSuffix(passwd, "\n") + `\n' > /out/etc/passwd`,
		"printf '" + strings.TrimSuffix(group, "\n") + `\n' > /out/etc/group`,
	} {
		if !strings.Contains(df, want) {
			t.Errorf("the Dockerfile does not say %q", want)
		}
	}
	for k, v := range Labels("${VERSION}", time.Time{}) {
		if k == "org.opencontainers.image.created" {
			continue
		}
		if !strings.Contains(df, k+`="`+v+`"`) {
			t.Errorf("the Dockerfile's labels lack %s=%q", k, v)
		}
	}
}

// TestImageRunsTare: the image's /tare is a tare that runs with nothing
// else: no libc, no environment, as the image's user when this test may
// switch users.
func TestImageRunsTare(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the static tare binary: skipped with -short")
	}
	out := filepath.Join(t.TempDir(), "tare")
	if err := Build(context.Background(), "../..", out, "amd64", "v0.0.0-test"); err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	img, _ := writeAndRead(t, bin, "v0.0.0-test")
	_, bodies := files(t, img)
	extracted := filepath.Join(t.TempDir(), "tare")
	if err := os.WriteFile(extracted, bodies["tare"], 0o755); err != nil {
		t.Fatal(err)
	}
	run := exec.Command(extracted, "version")
	run.Env = []string{}
	if os.Geteuid() == 0 {
		// the test's directories are root's alone (0700): let 65532 in
		for d := filepath.Dir(extracted); d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
			os.Chmod(d, 0o755)
		}
		run.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65532, Gid: 65532}}
	}
	got, err := run.CombinedOutput()
	if err != nil || strings.TrimSpace(string(got)) != "tare v0.0.0-test" {
		t.Errorf("/tare version: %q %v, want \"tare v0.0.0-test\"", got, err)
	}
}
