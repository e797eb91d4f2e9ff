package host

import (
	"encoding/binary"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestParseUnixDiagFile: the UNIX_DIAG_VFS attribute gives a socket's
// bound file, its inode and the kernel's dev_t, beside its name.
func TestParseUnixDiagFile(t *testing.T) {
	ne := binary.NativeEndian
	attr := func(typ uint16, v []byte) []byte {
		a := make([]byte, 4, 4+len(v)+3)
		ne.PutUint16(a, uint16(4+len(v)))
		ne.PutUint16(a[2:], typ)
		a = append(a, v...)
		for len(a)%4 != 0 {
			a = append(a, 0)
		}
		return a
	}
	msg := make([]byte, 16) // family, type, state, pad, ino, cookie
	msg[0], msg[1], msg[2] = unix.AF_UNIX, unixStream, tcpListen
	ne.PutUint32(msg[4:], 4242)
	vfs := make([]byte, 8)
	ne.PutUint32(vfs, 77)          // the file's inode
	ne.PutUint32(vfs[4:], 8<<20|3) // major 8, minor 3
	msg = append(msg, attr(unixDiagName, []byte("/run/app.sock"))...)
	msg = append(msg, attr(unixDiagVFS, vfs)...)
	b := make([]byte, unix.NLMSG_HDRLEN, unix.NLMSG_HDRLEN+len(msg))
	ne.PutUint32(b, uint32(unix.NLMSG_HDRLEN+len(msg)))
	ne.PutUint16(b[4:], unix.SOCK_DIAG_BY_FAMILY)
	b = append(b, msg...)

	got, done, err := parseUnixDiag(b, nil)
	if err != nil || done || len(got) != 1 {
		t.Fatalf("parseUnixDiag = %+v, %v, %v", got, done, err)
	}
	u := got[0]
	if u.Inode != 4242 || u.Name != "/run/app.sock" || u.State != tcpListen || u.FileIno != 77 || !sameDev(u.FileDev, unix.Mkdev(8, 3)) {
		t.Errorf("socket %+v; want inode 4242 listening on /run/app.sock, file 77 on device 8:3", u)
	}
	if sameDev(u.FileDev, unix.Mkdev(3, 8)) {
		t.Error("sameDev took major and minor the wrong way round")
	}
}

// TestUnixListenerPIDsLive: the process listening on a Unix socket is
// found by the socket's path, by a symbolic link to it, and by a relative
// path to it; once it stops listening, nobody is; a socket file that is
// not the one asked for is not mistaken for it.
func TestUnixListenerPIDsLive(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "app.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	other, err := net.Listen("unix", filepath.Join(dir, "other.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	link := filepath.Join(dir, "link.sock")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	rel, err := filepath.Rel(wd, path)
	if err != nil || strings.HasPrefix(rel, "/") {
		rel = path
	}
	for _, p := range []string{path, link, rel} {
		got, err := UnixListenerPIDs("/proc", p)
		if err != nil || !slices.Equal(got, []int{os.Getpid()}) {
			t.Errorf("UnixListenerPIDs(%q) = %v, %v; want this process, %d", p, got, err, os.Getpid())
		}
		pids, how, err := FindUnixService("", p)
		if err != nil || !slices.Contains(pids, os.Getpid()) || how != "listening socket of unix "+p {
			t.Errorf("FindUnixService(%q) = %v, %q, %v", p, pids, how, err)
		}
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	if got, err := UnixListenerPIDs("/proc", path); err != nil || len(got) != 0 {
		t.Errorf("after closing: UnixListenerPIDs = %v, %v; want none", got, err)
	}
	if _, how, err := FindUnixService("", path); err != nil || !strings.HasPrefix(how, "not found: no visible process listens on unix ") {
		t.Errorf("after closing: FindUnixService says %q, %v", how, err)
	}
	if _, err := UnixListenerPIDs("/proc", filepath.Join(dir, "none.sock")); err == nil {
		t.Error("no error for a path that does not exist")
	}
}
