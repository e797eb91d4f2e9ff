package stats

import (
	"slices"
	"testing"

	"github.com/tare-dev/tare"
)

// TestConnsPerTick: a connection counts in use once in each tick it
// carried a request at some moment of, from the send to the end; results
// on no connection, and dropped arrivals, count none.
func TestConnsPerTick(t *testing.T) {
	on := func(conn uint64, r *tare.Result) *tare.Result { r.Conn = conn; return r }
	tests := []struct {
		name    string
		results []*tare.Result
		want    []int
	}{
		{name: "one connection, a request a tick",
			results: []*tare.Result{on(1, span(0.1, 0.2)), on(1, span(1.1, 1.2)), on(1, span(2.1, 2.2))},
			want:    []int{1, 1, 1}},
		{name: "several requests of one connection in a tick count it once",
			results: []*tare.Result{on(1, span(0.1, 0.2)), on(1, span(0.3, 0.4)), on(1, span(0.5, 0.6))},
			want:    []int{1}},
		{name: "two connections at once",
			results: []*tare.Result{on(1, span(0.1, 0.5)), on(2, span(0.2, 0.6)), on(1, span(1.1, 1.2))},
			want:    []int{2, 1}},
		{name: "a long request counts in every tick it spans, its next one not again",
			results: []*tare.Result{on(1, span(0.5, 2.5)), on(1, span(2.6, 3.2)), on(2, span(1.5, 1.6))},
			want:    []int{1, 2, 1, 1}},
		{name: "results on no connection",
			results: []*tare.Result{span(0.1, 0.2), span(1.1, 1.2)},
			want:    []int{0, 0}},
		{name: "dropped arrivals",
			results: []*tare.Result{on(1, span(0.1, 0.2)), {Scheduled: sec(1.5), Dropped: true}},
			want:    []int{1, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := NewRecorder(Config{Start: t0})
			if err != nil {
				t.Fatal(err)
			}
			for _, res := range tt.results {
				r.AddResult(res)
			}
			if got := r.ConnsPerTick(); !slices.Equal(got, tt.want) {
				t.Errorf("ConnsPerTick() = %v; want %v", got, tt.want)
			}
		})
	}
}

// TestConnsForgottenAsTicksClose: the connections remembered are those of
// the ticks still open, so a run that opens a connection per request
// keeps a few, not one per request.
func TestConnsForgottenAsTicksClose(t *testing.T) {
	r, err := NewRecorder(Config{Start: t0})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 600 {
		at := float64(i) / 10
		res := span(at, at+0.05)
		res.Conn = uint64(i + 1)
		r.AddResult(res)
	}
	if n := len(r.connTick); n > 50 {
		t.Errorf("%d connections remembered after 60 s of one connection per request; want those of the open ticks only", n)
	}
	per := r.ConnsPerTick()
	if len(per) != 60 || slices.Min(per) != 10 || slices.Max(per) != 10 {
		t.Errorf("ConnsPerTick() = %v; want 10 in each of 60 ticks", per)
	}
}
