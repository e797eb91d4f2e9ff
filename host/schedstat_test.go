package host

import (
	"errors"
	"path/filepath"
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
	// The process table at t1, as the sampler's would hold it.
	procs := map[int]procStat{100: {PID: 100, PPID: 1}, 200: {PID: 200, PPID: 100}, 300: {PID: 300, PPID: 200}, 400: {PID: 400, PPID: 1}}
	tests := []struct {
		name        string
		descendants bool
		want        float64
		wantAlive   int
	}{
		{name: "own threads", want: 42, wantAlive: 1},
		{name: "descendants", descendants: true, want: 55, wantAlive: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			pids := []int{100}
			if tt.descendants {
				m := newMembers()
				m.find(procs, [][]int{{100}}, nil, nil)
				pids = pidsOf(m.sut, nil)
			}
			replaceTree(t, filepath.Join("testdata", "tasks", "t0"), root)
			r := newTaskReader(root)
			prev, cur := map[int]uint64{}, map[int]uint64{}
			if _, err := r.read(pids, prev); err != nil {
				t.Fatal(err)
			}
			replaceTree(t, filepath.Join("testdata", "tasks", "t1"), root)
			alive, err := r.read(pids, cur)
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
	r := newTaskReader(t.TempDir())
	dst := map[int]uint64{1: 1}
	alive, err := r.read([]int{99}, dst)
	if err != nil || alive != 0 || len(dst) != 0 {
		t.Errorf("read of a vanished process: alive %d, %d threads, %v; want 0, 0, nil", alive, len(dst), err)
	}
}
