package host

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/internal/testkit/interfere"
	"github.com/tare-dev/tare/internal/testkit/testservice"
	"github.com/tare-dev/tare/schedprobe"
)

// TestCapWaits: past the cap, the shortest waits go (of equal ones, the
// later), and what is kept is in order of Start.
func TestCapWaits(t *testing.T) {
	at := func(ms int) time.Time { return time.Unix(1000, 0).Add(time.Duration(ms) * time.Millisecond) }
	w := func(start, waited int) tare.Wait {
		return tare.Wait{Start: at(start), End: at(start + waited), Waited: time.Duration(waited) * time.Millisecond}
	}
	for _, tt := range []struct {
		name        string
		waits       []tare.Wait
		most        int
		want        []tare.Wait
		wantDropped int
	}{
		{"under the cap: sorted", []tare.Wait{w(5, 1), w(1, 2)}, 3, []tare.Wait{w(1, 2), w(5, 1)}, 0},
		{"at the cap", []tare.Wait{w(1, 2), w(5, 1)}, 2, []tare.Wait{w(1, 2), w(5, 1)}, 0},
		{"the shortest dropped", []tare.Wait{w(1, 1), w(2, 9), w(3, 2), w(4, 7), w(5, 3)}, 3, []tare.Wait{w(2, 9), w(4, 7), w(5, 3)}, 2},
		{"of equal ones, the later dropped", []tare.Wait{w(3, 4), w(1, 4), w(2, 4)}, 2, []tare.Wait{w(1, 4), w(2, 4)}, 1},
		{"none kept", []tare.Wait{w(1, 1)}, 0, []tare.Wait{}, 1},
		{"none", nil, 2, nil, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, dropped := capWaits(slices.Clone(tt.waits), tt.most)
			if !reflect.DeepEqual(got, tt.want) || dropped != tt.wantDropped {
				t.Errorf("capWaits = %v, %d dropped; want %v, %d", got, dropped, tt.want, tt.wantDropped)
			}
		})
	}
}

// TestWaitsOf: a tick's stretches become Waits dated on the wall clock,
// in order of Start, each holder placed as the tick's Behind list places
// it (one classification: ownerOf, named by its charge): another process
// by its service, a forked member as the system under test, a kernel
// thread, wake-up; the groups not the measured ones' are left out.
func TestWaitsOf(t *testing.T) {
	ms := time.Millisecond
	procs := map[int]procStat{
		1:   {PID: 1, Comm: "systemd"},
		100: {PID: 100, Comm: "gunicorn", PPID: 1},
		101: {PID: 101, Comm: "gunicorn", PPID: 100},
		500: {PID: 500, Comm: "postgres", PPID: 1},
		512: {PID: 512, Comm: "postgres", PPID: 500},
	}
	m := &members{sut: map[int]bool{500: true, 512: true}, tare: map[int]bool{}}
	holders := []schedprobe.Holder{
		{Kind: schedprobe.Other, TGID: 101, Comm: "gunicorn"},
		{Kind: schedprobe.Other, TGID: 512, Comm: "postgres"},
		{Kind: schedprobe.Kernel, TGID: 14, Comm: "ksoftirqd/0"},
		{Kind: schedprobe.Idle},
		{Kind: schedprobe.Other, TGID: 999, Comm: "df"},
	}
	var (
		c         schedprobe.Counts
		stretches []schedprobe.Stretch
		names     = map[chargeKey]string{}
	)
	for i, h := range holders {
		c.Charges = append(c.Charges, schedprobe.Charge{Group: groupSUT, Holder: h, Wait: time.Duration(i+1) * ms})
		names[chargeKey{groupSUT, h.Kind, h.Group, h.TGID}] = h.Comm
		nameless := h
		nameless.Comm = ""
		// Later holders start earlier: the Waits come out reversed.
		start := time.Duration(10-i) * ms
		stretches = append(stretches, schedprobe.Stretch{Start: start, End: start + ms, CPU: i % 2, Group: groupSUT, Waited: time.Duration(i+1) * ms, Holder: nameless})
	}
	stretches = append(stretches, schedprobe.Stretch{Start: 0, End: ms, Group: groupBusiest, Waited: ms, Holder: schedprobe.Holder{Kind: schedprobe.Other, TGID: 101}})
	clock := waitClock{zero: time.Unix(5000, 0)}
	got, dropped := waitsOf(stretches, func(k chargeKey) string { return names[k] }, &clock, procs, m)
	if dropped != 0 || len(got) != len(holders) {
		t.Fatalf("waitsOf = %+v, %d dropped; want %d waits", got, dropped, len(holders))
	}
	blame := blameOf(&c, time.Second, nil, procs, m)
	for i, w := range got {
		s := stretches[len(holders)-1-i]
		if !w.Start.Equal(clock.zero.Add(s.Start)) || !w.End.Equal(clock.zero.Add(s.End)) || w.Waited != s.Waited || w.CPU != s.CPU || w.Group != tare.OwnerSUT || w.PID != s.Holder.TGID {
			t.Errorf("wait %d = %+v, from stretch %+v", i, w, s)
		}
		key := tare.BehindKey{Owner: w.Owner, Name: w.Name, Root: w.Root}
		if !slices.ContainsFunc(blame.Behind, func(b tare.Behind) bool {
			return b.Key() == key && (w.PID == 0 || slices.Contains(b.PIDs, w.PID))
		}) {
			t.Errorf("wait %d behind %+v (pid %d): the tick's Behind has none such: %+v", i, key, w.PID, blame.Behind)
		}
	}
	if got[4].Owner != tare.OwnerOther || got[4].Name != "gunicorn" || got[4].Root != 100 || got[3].Owner != tare.OwnerSUT {
		t.Errorf("gunicorn's worker as %+v, postgres's backend as %+v; want another process of root 100, and the system under test", got[4], got[3])
	}
}

// TestSamplerWaits: as root on a kernel with BTF, each tick of a sampler
// with the probe holds the Waits of a service pinned to CPU 0 behind a
// hog on CPU 0 (and of tare's, this test's, threads behind it where they
// met it): behind another process, named and by pid, each within
// the tick (its Start may precede the tick's by the wait's length, up to
// a scheduler's slice), in order of Start, none lost. (That they hold
// the charges behind the hog is TestStretches': a tick's charges are those
// until the probe is read, its Waits those until its End, a moment
// before.)
func TestSamplerWaits(t *testing.T) {
	if testing.Short() {
		t.Skip("real interference for seconds: skipped with -short")
	}
	if err := schedprobe.Expected(); err != nil {
		testservice.Unable(t, "%v", err)
	}
	interfere.Exclusive(t)
	svc := interfere.Busy(t, interfere.Pinned(0)...)
	hog := interfere.Busy(t, interfere.Pinned(0)...)
	const tick = 500 * time.Millisecond
	s, err := NewSampler(Config{Tick: tick, SUT: []int{svc.Process.Pid}, Tare: []int{os.Getpid()}, SchedProbe: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if why := s.BlameWhy(); why != "" {
		t.Fatalf("the probe did not run as root with BTF: %s", why)
	}
	const slack = 100 * time.Millisecond // far past a scheduler's slice
	named := 0                           // ticks with waits of the system under test's behind the hog
	for i, hs := range samplesOf(t, s, 4) {
		b := hs.Blame
		if b == nil {
			t.Fatalf("tick %d: no measured blame (warnings %v)", i, s.Warnings())
		}
		var behindHog time.Duration
		n, sut := 0, 0
		for j, w := range b.Waits {
			if j > 0 && w.Start.Before(b.Waits[j-1].Start) {
				t.Errorf("tick %d: wait %d starts before the one before it", i, j)
			}
			// The tick's Start as the last tick dated it: the clock moves
			// by microseconds between ticks.
			if w.Start.Before(hs.Start.Add(-slack)) || w.End.After(hs.End) || w.End.Before(hs.Start.Add(-time.Millisecond)) || w.Start.After(w.End) {
				t.Errorf("tick %d (%v to %v): a wait from %v to %v, outside it", i, hs.Start, hs.End, w.Start, w.End)
			}
			if w.PID != hog.Process.Pid {
				continue
			}
			n++
			behindHog += w.Waited
			// tare's threads (this test's) wait behind it too.
			if w.Owner != tare.OwnerOther || w.Name != "sh" || w.Group == tare.OwnerSUT && w.CPU != 0 {
				t.Errorf("tick %d: a wait behind the hog (pid %d) as %+v; want another process, sh, on CPU 0 where the system under test's threads waited", i, hog.Process.Pid, w)
			}
			if w.Group == tare.OwnerSUT {
				sut++
			}
		}
		t.Logf("tick %d: %d waits, %d behind the hog (%d of the system under test's), %v; %d lost", i, len(b.Waits), n, sut, behindHog, b.WaitsLost)
		if sut > 0 {
			named++
		}
		if b.WaitsLost != 0 {
			t.Errorf("tick %d: %d waits lost", i, b.WaitsLost)
		}
	}
	// In every tick on a quiet machine; on one with 25 threads runnable
	// per CPU, the hog may not meet the loop in a tick.
	if named == 0 {
		t.Errorf("no tick with waits of the system under test's behind the hog (pid %d)", hog.Process.Pid)
	}
}

// BenchmarkWaitsOf: what a stretch costs tare once read: made a Wait,
// placed by ownerOf (once per holder a tick) and sorted; then, as the
// store keeps it, encoded (JSON).
func BenchmarkWaitsOf(b *testing.B) {
	// 4,000 stretches a tick, and 20,000: past the cap (MaxTickWaits), as
	// a busy host makes at 20,000 requests/s, the longest kept.
	for _, n := range []int{4000, 20000} {
		procs := map[int]procStat{1: {PID: 1, Comm: "systemd"}}
		var stretches []schedprobe.Stretch
		for i := range n {
			tgid := 100 + i%40
			procs[tgid] = procStat{PID: tgid, Comm: "batch", PPID: 1}
			start := time.Duration(i) * 100 * time.Microsecond
			waited := time.Duration(20+i*7919%100) * time.Microsecond
			stretches = append(stretches, schedprobe.Stretch{Start: start, End: start + waited, CPU: i % 2, Group: i % 2, Waited: waited,
				Holder: schedprobe.Holder{Kind: schedprobe.Other, TGID: tgid}})
		}
		clock := waitClock{zero: time.Unix(5000, 0)}
		names := func(chargeKey) string { return "batch" }
		for _, encode := range []bool{false, true} {
			b.Run(fmt.Sprintf("%d/%s", n, map[bool]string{false: "made", true: "encoded"}[encode]), func(b *testing.B) {
				for b.Loop() {
					waits, _ := waitsOf(stretches, names, &clock, procs, &members{})
					if !encode {
						continue
					}
					if _, err := json.Marshal(tare.Blame{Waits: waits}); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(stretches)), "ns/stretch")
			})
		}
	}
}
