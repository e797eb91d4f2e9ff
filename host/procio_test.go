package host

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/tare-dev/tare"
)

// ioDD is /proc/<pid>/io of a dd writing 64 MiB with oflag=direct,
// captured on the development VM; ioCat of a cat that read a file from
// disk.
const (
	ioDD  = "rchar: 67110620\nwchar: 67108864\nsyscr: 7\nsyscw: 64\nread_bytes: 0\nwrite_bytes: 67108864\ncancelled_write_bytes: 0\n"
	ioCat = "rchar: 2102393\nwchar: 0\nsyscr: 12\nsyscw: 0\nread_bytes: 2101248\nwrite_bytes: 4096\ncancelled_write_bytes: 4096\n"
)

// formatIO writes an io file whose read_bytes and write_bytes sum to n.
func formatIO(n uint64) string {
	return fmt.Sprintf("rchar: 0\nwchar: 0\nsyscr: 0\nsyscw: 0\nread_bytes: %d\nwrite_bytes: 0\ncancelled_write_bytes: 0\n", n)
}

func TestParseIO(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    uint64
		wantErr bool
	}{
		{name: "O_DIRECT writer", in: ioDD, want: 67108864},
		{name: "reader, cancelled not taken off", in: ioCat, want: 2101248 + 4096},
		{name: "no final newline, other order", in: "write_bytes: 5\nread_bytes: 7", want: 12},
		{name: "extra lines ignored", in: "read_bytes: 1\nwrite_bytes: 2\nnew_counter: x\n", want: 3},
		{name: "empty", in: "", wantErr: true},
		{name: "no write_bytes", in: "rchar: 1\nread_bytes: 1\n", wantErr: true},
		{name: "negative", in: "read_bytes: -1\nwrite_bytes: 0\n", wantErr: true},
		{name: "not a number", in: "read_bytes: 1\nwrite_bytes: 1e3\n", wantErr: true},
		{name: "overflow", in: "read_bytes: 18446744073709551615\nwrite_bytes: 1\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseIO([]byte(tt.in))
			if tt.wantErr {
				if !errors.Is(err, ErrParse) {
					t.Errorf("parseIO(%q) = %d, %v; want an error wrapping ErrParse", tt.in, got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("parseIO(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
			}
		})
	}
}

// FuzzParseIO: parseIO never panics, fails only with ErrParse, and what it
// accepts is the sum of the two lines it names.
func FuzzParseIO(f *testing.F) {
	for _, s := range []string{ioDD, ioCat, "", "read_bytes: 1\nwrite_bytes: 2", "read_bytes:\nwrite_bytes: 2\n", "read_bytes: 1\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := parseIO(b)
		if err != nil {
			if !errors.Is(err, ErrParse) {
				t.Fatalf("error %v does not wrap ErrParse", err)
			}
			return
		}
		var read, write uint64
		for line := range strings.Lines(string(b)) {
			key, val, _ := strings.Cut(strings.TrimSuffix(line, "\n"), ":")
			v, _ := strconv.ParseUint(strings.TrimSpace(val), 10, 64)
			switch key {
			case "read_bytes":
				read = v
			case "write_bytes":
				write = v
			}
		}
		if n != read+write {
			t.Fatalf("%q parsed as %d, want read_bytes %d + write_bytes %d", b, n, read, write)
		}
	})
}

func TestIOBy(t *testing.T) {
	const uptime = 1000 // the first table's, in clock ticks
	proc := func(pid, ppid int, comm string, start, io uint64) procStat {
		return procStat{PID: pid, PPID: ppid, Comm: comm, Start: start, IO: io, HasIO: true}
	}
	tests := []struct {
		name      string
		prev, cur []procStat
		want      []tare.ProcessIO
	}{
		{
			name: "deltas, busiest first, idle left out",
			prev: []procStat{proc(10, 1, "postgres", 5, 1000), proc(11, 1, "backup", 6, 0), proc(12, 1, "idle", 7, 50)},
			cur:  []procStat{proc(10, 1, "postgres", 5, 1500), proc(11, 1, "backup", 6, 8192), proc(12, 1, "idle", 7, 50)},
			want: []tare.ProcessIO{{Name: "backup", PID: 11, Bytes: 8192}, {Name: "postgres", PID: 10, Bytes: 500}},
		},
		{
			name: "equal bytes by pid",
			prev: []procStat{proc(30, 1, "b", 5, 0), proc(20, 1, "a", 5, 0)},
			cur:  []procStat{proc(30, 1, "b", 5, 7), proc(20, 1, "a", 5, 7)},
			want: []tare.ProcessIO{{Name: "a", PID: 20, Bytes: 7}, {Name: "b", PID: 30, Bytes: 7}},
		},
		{
			// started in the tick: all its I/O is the tick's; a pid
			// reused by a process started before the first table (not
			// read then): no baseline, nothing
			name: "new process, and a reused pid without a baseline",
			prev: []procStat{proc(40, 1, "old", 5, 900)},
			cur:  []procStat{proc(41, 1, "dd", uptime+20, 4096), proc(40, 1, "other", 500, 100000)},
			want: []tare.ProcessIO{{Name: "dd", PID: 41, Bytes: 4096}},
		},
		{
			// the child wrote 3000 bytes before the first table and 1000
			// after it, then exited; its parent reaped it and did 200
			// of its own: the parent shows 1000 + 200, the child's
			// earlier 3000 are not counted twice
			name: "reaped child charged to its parent once",
			prev: []procStat{proc(50, 1, "make", 5, 10000), proc(51, 50, "cc", 9, 3000)},
			cur:  []procStat{proc(50, 1, "make", 5, 10000+3000+1000+200)},
			want: []tare.ProcessIO{{Name: "make", PID: 50, Bytes: 1200}},
		},
		{
			name: "backwards, unreadable and kernel threads count nothing",
			prev: []procStat{proc(60, 1, "a", 5, 500), {PID: 61, Comm: "b", Start: 5}, {PID: 62, Comm: "kworker", KThread: true, Start: 5, IO: 0, HasIO: true}},
			cur:  []procStat{proc(60, 1, "a", 5, 400), {PID: 61, Comm: "b", Start: 5}, {PID: 62, Comm: "kworker", KThread: true, Start: 5, IO: 4096, HasIO: true}},
			want: nil,
		},
		{
			name: "no baseline: readable only now",
			prev: []procStat{{PID: 70, Comm: "a", Start: 5}},
			cur:  []procStat{proc(70, 1, "a", 5, 4096)},
			want: nil,
		},
		{
			name: "five at most",
			prev: []procStat{proc(1, 0, "p1", 5, 0), proc(2, 0, "p2", 5, 0), proc(3, 0, "p3", 5, 0), proc(4, 0, "p4", 5, 0), proc(5, 0, "p5", 5, 0), proc(6, 0, "p6", 5, 0)},
			cur:  []procStat{proc(1, 0, "p1", 5, 1), proc(2, 0, "p2", 5, 2), proc(3, 0, "p3", 5, 3), proc(4, 0, "p4", 5, 4), proc(5, 0, "p5", 5, 5), proc(6, 0, "p6", 5, 6)},
			want: []tare.ProcessIO{{Name: "p6", PID: 6, Bytes: 6}, {Name: "p5", PID: 5, Bytes: 5}, {Name: "p4", PID: 4, Bytes: 4}, {Name: "p3", PID: 3, Bytes: 3}, {Name: "p2", PID: 2, Bytes: 2}},
		},
	}
	table := func(ps []procStat) map[int]procStat {
		m := map[int]procStat{}
		for _, p := range ps {
			m[p.PID] = p
		}
		return m
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ioBy(table(tt.prev), table(tt.cur), uptime); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ioBy = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestProcTableIO: the table reads each process's io file beside its
// stat, and keeps reading it (through the held file) while it skips the
// stat of a process idle on CPU: a process can keep a disk busy on no CPU.
// A process whose io file cannot be read has none, and is not tried again.
func TestProcTableIO(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"1092/stat": statBash, "1092/io": formatIO(100),
		"1093/stat": strings.Replace(statBash, "1092 (bash)", "1093 (bash)", 1),
		"2/stat":    statKthreadd, "2/io": formatIO(5),
	})
	pt := newProcTable(root)
	defer pt.close()
	for i := range 2 * idleEvery {
		writeFiles(t, root, map[string]string{"1092/io": formatIO(uint64(100 + i))}) // in place: the held file reads it
		got := readTable(t, pt)
		if p := got[1092]; !p.HasIO || p.IO != uint64(100+i) {
			t.Fatalf("reading %d: bash reads as %+v, want its I/O counter %d (idle on CPU: %v)", i, p, 100+i, pt.procs[1092].idle >= idleAfter)
		}
		if p := got[1093]; p.HasIO {
			t.Fatalf("reading %d: a process without an io file reads as %+v", i, p)
		}
		if p := got[2]; p.HasIO {
			t.Fatalf("reading %d: kernel thread's io read: %+v", i, p)
		}
	}
	if e := pt.procs[1092]; e.ioFD < 0 || e.idle < idleAfter {
		t.Errorf("bash's io file held %v, idle %d readings: want it held, and idle", e.ioFD >= 0, e.idle)
	}
	if pt.held != 4 || countOpen(pt) != 4 {
		t.Errorf("%d files held (%d open), want 4: three stat files and bash's io file", pt.held, countOpen(pt))
	}
	// the missing io file is not looked for again for the same process,
	// even once it appears
	writeFiles(t, root, map[string]string{"1093/io": formatIO(7)})
	if p := readTable(t, pt)[1093]; p.HasIO {
		t.Errorf("process 1093's io tried again: %+v", p)
	}
	if err := os.RemoveAll(filepath.Join(root, "1092")); err != nil {
		t.Fatal(err)
	}
	readTable(t, pt)
	if pt.held != 2 || countOpen(pt) != 2 {
		t.Errorf("%d files held (%d open) once bash is gone, want 2", pt.held, countOpen(pt))
	}
}
