package host

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestNameFromCmdline(t *testing.T) {
	tests := []struct {
		name, comm, cmdline string
		want                string // "": not found
	}{
		{"argv[0] a path", "nightly-compact", "/opt/jobs/bin/nightly-compactor\x00--hourly\x00", "nightly-compactor"},
		{"argv[0] a base name", "stress-ng-strea", "stress-ng-stream\x00", "stress-ng-stream"},
		{"a title over the arguments", "nightly-compact", "nightly-compactor: merging segments 4 of 9\x00\x00\x00", "nightly-compactor"},
		{"a script under its interpreter", "nightly-reindex", "/bin/sh\x00/opt/jobs/nightly-reindexer\x00--all\x00", "nightly-reindexer"},
		{"a name of exactly 15 bytes", "exactly-fifteen", "./exactly-fifteen\x00", ""},
		{"argv[0] another program", "nightly-compact", "/usr/bin/other-program\x00", ""},
		{"comm not cut", "python3", "/usr/bin/python3.12\x00", ""},
		{"no arguments (a zombie)", "nightly-compact", "", ""},
		{"no NUL at the end", "nightly-compact", "nightly-compactor", "nightly-compactor"},
		{"the path's directory has the name", "nightly-compact", "/srv/nightly-compactor/run\x00", ""},
		{"a colon in the title right after comm", "nightly-compact", "nightly-compact: idle\x00", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := nameFromCmdline(tt.comm, []byte(tt.cmdline))
			if got != tt.want || ok != (tt.want != "") {
				t.Errorf("nameFromCmdline(%q, %q) = %q, %v; want %q", tt.comm, tt.cmdline, got, ok, tt.want)
			}
		})
	}
}

func TestNameFromExe(t *testing.T) {
	tests := []struct{ comm, exe, want string }{
		{"nightly-backup-", "/usr/local/bin/nightly-backup-runner", "nightly-backup-runner"},
		{"nightly-backup-", "/usr/local/bin/nightly-backup-runner (deleted)", "nightly-backup-runner"},
		{"nightly-backup-", "/usr/bin/python3.12", ""},
		{"python3", "/usr/bin/python3.12", ""},
	}
	for _, tt := range tests {
		got, ok := nameFromExe(tt.comm, tt.exe)
		if got != tt.want || ok != (tt.want != "") {
			t.Errorf("nameFromExe(%q, %q) = %q, %v; want %q", tt.comm, tt.exe, got, ok, tt.want)
		}
	}
}

// FuzzNameFromCmdline: whatever a process writes over its arguments, the
// name found is comm made longer, one word of one path's base name.
func FuzzNameFromCmdline(f *testing.F) {
	f.Add("nightly-compact", []byte("/opt/jobs/bin/nightly-compactor\x00--hourly\x00"))
	f.Add("nightly-compact", []byte("nightly-compactor: merging\x00\x00"))
	f.Add("nightly-reindex", []byte("/bin/sh\x00/opt/nightly-reindexer\x00"))
	f.Add("a:b/c d\x00efghijk", []byte("a:b/c d\x00efghijklmnop:q"))
	f.Fuzz(func(t *testing.T, comm string, cmdline []byte) {
		name, ok := nameFromCmdline(comm, cmdline)
		if !ok {
			if name != "" {
				t.Errorf("not found, but named %q", name)
			}
			return
		}
		if len(comm) != commLen || len(name) <= len(comm) || !strings.HasPrefix(name, comm) {
			t.Errorf("comm %q named %q: want comm of %d bytes made longer", comm, name, commLen)
		}
		if strings.ContainsAny(name[len(comm):], "\x00/ :") {
			t.Errorf("comm %q named %q: past comm, a NUL, slash, space or colon", comm, name)
		}
	})
}

// TestProcTableNames reads the fixture tree testdata/names: the processes
// whose comm the kernel cut at 15 bytes are named in full, from their
// cmdline or their executable, once; the others keep their comm.
func TestProcTableNames(t *testing.T) {
	root := t.TempDir()
	replaceTree(t, filepath.Join("testdata", "names"), root)
	want := map[int]string{
		4000: "nightly-compactor",     // argv[0]
		4001: "stress-ng-stream",      // argv[0], a base name
		4002: "python3",               // not cut: its cmdline is not read
		4003: "nightly-backup-runner", // no cmdline: its executable, deleted since
		4004: "exactly-fifteen",       // 15 bytes, and that is all of it
		4005: "nightly-compactor",     // a title written over its arguments
		4006: "nightly-reindexer",     // a script, argv[1] of its interpreter
		4007: "nightly-compact",       // neither its arguments nor its executable say more
	}
	pt := newProcTable(root)
	defer pt.close()
	check := func(moment string, want map[int]string) {
		t.Helper()
		got := readTable(t, pt)
		for pid, name := range want {
			if got[pid].Comm != name {
				t.Errorf("%s: pid %d named %q, want %q", moment, pid, got[pid].Comm, name)
			}
		}
	}
	check("first reading", want)

	// Read once: a title rewritten since does not rename it...
	writeFiles(t, root, map[string]string{"4000/cmdline": "nightly-compactor-v2\x00"})
	check("second reading", want)
	// ...but a new process under the pid (another starttime) is read anew.
	s := readTable(t, pt)[4000]
	s.Comm, s.Start = "nightly-compact", s.Start+1
	writeStat(t, root, s)
	want[4000] = "nightly-compactor-v2"
	check("pid reused", want)
}

// TestProcTableNamesLive: a process whose name is longer than 15 bytes
// (a copy of sh named nightly-compactor, busy in a loop) is named in full
// in the live /proc, where the kernel's comm is nightly-compact.
func TestProcTableNamesLive(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh:", err)
	}
	dir := t.TempDir()
	prog := filepath.Join(dir, "nightly-compactor")
	b, err := os.ReadFile(sh)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(prog, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), prog, "-c", "while :; do :; done")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	comm, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(cmd.Process.Pid), "comm"))
	if err != nil || strings.TrimSpace(string(comm)) != "nightly-compact" {
		t.Fatalf("the kernel's comm %q (%v), want it cut to nightly-compact", comm, err)
	}
	pt := newProcTable(DefaultProcRoot)
	defer pt.close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := readTable(t, pt)[cmd.Process.Pid].Comm
		if got == "nightly-compactor" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d named %q, want nightly-compactor", cmd.Process.Pid, got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestExcluderWholeNames: --exclude takes a process by its whole name, or
// by the 15 bytes of it ps -o comm shows.
func TestExcluderWholeNames(t *testing.T) {
	tests := []struct {
		named []string
		comm  string
		want  bool
	}{
		{[]string{"nightly-compactor"}, "nightly-compactor", true},
		{[]string{"nightly-compact"}, "nightly-compactor", true},
		{[]string{"nightly-compact"}, "nightly-compact", true},
		{[]string{"nightly"}, "nightly-compactor", false},
		{[]string{"nightly-compactor"}, "nightly-compact", false},
	}
	for _, tt := range tests {
		if got := excluder(tt.named)(7, tt.comm); got != tt.want {
			t.Errorf("--exclude %v of %q: %v, want %v", tt.named, tt.comm, got, tt.want)
		}
	}
}
