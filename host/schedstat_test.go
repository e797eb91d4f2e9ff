package host

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func TestParseSchedstat(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    uint64
		wantErr bool
	}{
		{name: "live", in: "636407532 1176743930 3965\n", want: 1176743930},
		{name: "no newline", in: "1 2 3", want: 2},
		{name: "never waited", in: "40286 0 2\n", want: 0},
		{name: "two fields", in: "1 2\n", wantErr: true},
		{name: "four fields", in: "1 2 3 4\n", wantErr: true},
		{name: "not a number", in: "1 x 3\n", wantErr: true},
		{name: "negative", in: "1 -2 3\n", wantErr: true},
		{name: "bad first", in: "a 2 3\n", wantErr: true},
		{name: "empty", in: "", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseSchedstat([]byte(tt.in))
			if tt.wantErr {
				if !errors.Is(err, ErrParse) {
					t.Fatalf("error %v, want one wrapping ErrParse", err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}

func FuzzParseSchedstat(f *testing.F) {
	f.Add([]byte("636407532 1176743930 3965\n"))
	f.Add([]byte("0 0 0"))
	f.Add([]byte("1 18446744073709551616 3\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := parseSchedstat(b); err != nil && !errors.Is(err, ErrParse) {
			t.Fatalf("error %v does not wrap ErrParse", err)
		}
	})
}

func TestParsePIDList(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []int
		wantErr bool
	}{
		{name: "live", in: "5305 5316 ", want: []int{5305, 5316}},
		{name: "empty", in: "", want: nil},
		{name: "newline", in: "7\n", want: []int{7}},
		{name: "zero", in: "0 ", wantErr: true},
		{name: "garbage", in: "12 x ", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parsePIDList([]byte(tt.in), nil)
			if tt.wantErr {
				if !errors.Is(err, ErrParse) {
					t.Fatalf("error %v, want one wrapping ErrParse", err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tt.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func FuzzParsePIDList(f *testing.F) {
	f.Add([]byte("5305 5316 "))
	f.Add([]byte(""))
	f.Add([]byte("-1 2"))
	f.Fuzz(func(t *testing.T, b []byte) {
		pids, err := parsePIDList(b, nil)
		if err != nil {
			if !errors.Is(err, ErrParse) {
				t.Fatalf("error %v does not wrap ErrParse", err)
			}
			return
		}
		for _, p := range pids {
			if p <= 0 {
				t.Fatalf("pid %d accepted from %q", p, b)
			}
		}
	})
}

func TestParseStatPPID(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    int
		wantErr bool
	}{
		{name: "plain", in: "200 (sh) S 100 200 100 0 -1", want: 100},
		{name: "paren in name", in: "100 (redis) server) S 1 100 100 0 -1", want: 1},
		{name: "space in name", in: "300 (a b) R 200 300", want: 200},
		{name: "kernel thread", in: "2 (kthreadd) S 0 0 0", want: 0},
		{name: "no name", in: "1 init S 0", wantErr: true},
		{name: "truncated", in: "1 (init) S", wantErr: true},
		{name: "bad ppid", in: "1 (init) S x", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStatPPID([]byte(tt.in))
			if tt.wantErr {
				if !errors.Is(err, ErrParse) {
					t.Fatalf("error %v, want one wrapping ErrParse", err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}

func FuzzParseStatPPID(f *testing.F) {
	f.Add([]byte("100 (redis) server) S 1 100 100 0 -1 4194560"))
	f.Add([]byte("1 (x) S"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ppid, err := parseStatPPID(b)
		if err != nil {
			if !errors.Is(err, ErrParse) {
				t.Fatalf("error %v does not wrap ErrParse", err)
			}
			return
		}
		if ppid < 0 {
			t.Fatalf("ppid %d accepted from %q", ppid, b)
		}
	})
}

func TestRunDelayDelta(t *testing.T) {
	tests := []struct {
		name      string
		prev, cur map[int]uint64
		want      uint64
	}{
		{name: "grows", prev: map[int]uint64{1: 10, 2: 5}, cur: map[int]uint64{1: 15, 2: 7}, want: 7},
		{name: "thread exits", prev: map[int]uint64{1: 10, 2: 500}, cur: map[int]uint64{1: 15}, want: 5},
		{name: "thread starts", prev: map[int]uint64{1: 10}, cur: map[int]uint64{1: 10, 3: 40}, want: 40},
		{name: "tid reused", prev: map[int]uint64{1: 10, 2: 500}, cur: map[int]uint64{1: 10, 2: 30}, want: 30},
		{name: "all gone", prev: map[int]uint64{1: 10}, cur: map[int]uint64{}, want: 0},
		// a thread first seen with 5000 ns of delay cannot have started
		// before the previous reading, 100 ns ago: it counts for 100.
		{name: "new thread bounded by the tick", prev: map[int]uint64{1: 10}, cur: map[int]uint64{1: 10, 4: 5000}, want: 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := runDelayDelta(tt.prev, tt.cur, 100); got != tt.want {
				t.Errorf("got %d, want %d", got, tt.want)
			}
		})
	}
}

// TestTaskReader reads the run delay of testdata/tasks: process 100 with
// threads 100, 101, 102 at t0; at t1 thread 101 has exited, tid 102 belongs
// to a new thread, 103 is new, and 100 has a child 200 (threads 200, 201)
// whose thread 201 forked 300. Process 400 is unrelated.
//
//	t0: 100: 1000 ms   101: 2000 ms   102: 4000 ms           (400: 500 ms)
//	t1: 100: 1300 ms   102:   50 ms   103: 70 ms             (400: 999 ms)
//	    200: 80 ms     201: 20 ms     300: 30 ms
//
//	own threads:  (1300−1000) + 50 (reused) + 70 (new) + 0 (101 gone) = 420 ms
//	descendants:  + 80 + 20 + 30                                       = 550 ms
//
// Over a 1 s tick: 42 % and 55 %.
func TestTaskReader(t *testing.T) {
	noChildren := func(t *testing.T, dir string) {
		t.Helper()
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.Name() == "children" {
				err = os.Remove(p)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name        string
		descendants bool
		prepare     func(t *testing.T, dir string)
		want        float64
		wantAlive   int
	}{
		{name: "own threads", want: 42, wantAlive: 1},
		{name: "descendants from children files", descendants: true, want: 55, wantAlive: 3},
		{name: "descendants from ppid scan", descendants: true, prepare: noChildren, want: 55, wantAlive: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			step := func(moment string) {
				replaceTree(t, filepath.Join("testdata", "tasks", moment), root)
				if tt.prepare != nil {
					tt.prepare(t, root)
				}
			}
			step("t0")
			r := newTaskReader(root, tt.descendants, []int{100})
			if tt.prepare != nil && r.children {
				t.Fatal("children files removed, yet the reader uses them")
			}
			prev, cur := map[int]uint64{}, map[int]uint64{}
			if _, err := r.read([]int{100}, prev); err != nil {
				t.Fatal(err)
			}
			step("t1")
			alive, err := r.read([]int{100}, cur)
			if err != nil {
				t.Fatal(err)
			}
			if alive != tt.wantAlive {
				t.Errorf("%d processes alive, want %d", alive, tt.wantAlive)
			}
			got := runDelayShare(runDelayDelta(prev, cur, time.Second), time.Second)
			if !near(*got, tt.want) {
				t.Errorf("run delay %v %%, want %v %%", *got, tt.want)
			}
		})
	}
}

func TestTaskReaderGone(t *testing.T) {
	r := newTaskReader(t.TempDir(), true, []int{99})
	dst := map[int]uint64{1: 1}
	alive, err := r.read([]int{99}, dst)
	if err != nil || alive != 0 || len(dst) != 0 {
		t.Errorf("read of a vanished process: alive %d, %d threads, %v; want 0, 0, nil", alive, len(dst), err)
	}
}
