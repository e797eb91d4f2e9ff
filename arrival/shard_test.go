package arrival

import (
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/tare-dev/tare"
)

func TestParseShard(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Shard
		bad  bool
	}{
		{name: "second of four", in: "2/4", want: Shard{2, 4}},
		{name: "spaces", in: " 1 / 1 ", want: Shard{1, 1}},
		{name: "last", in: "4/4", want: Shard{4, 4}},
		{name: "zero index", in: "0/4", bad: true},
		{name: "past the count", in: "5/4", bad: true},
		{name: "no slash", in: "2", bad: true},
		{name: "negative", in: "-1/4", bad: true},
		{name: "too many", in: "1/100000", bad: true},
		{name: "empty", in: "", bad: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseShard(tt.in)
			if tt.bad {
				var e *tare.Error
				if !errors.As(err, &e) || e.Code != tare.EINVALID {
					t.Fatalf("ParseShard(%q) = %v, %v; want an EINVALID error", tt.in, got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseShard(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
			if back, err := ParseShard(got.String()); err != nil || back != got {
				t.Errorf("round trip of %v: %v, %v", got, back, err)
			}
		})
	}
}

func FuzzParseShard(f *testing.F) {
	for _, s := range []string{"2/4", "1/1", "0/0", "4096/4096", "x/y", "/", "9999999999999999999/1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sh, err := ParseShard(s)
		if err != nil {
			return
		}
		if sh.Index < 1 || sh.Index > sh.Count || sh.Count > MaxShards {
			t.Fatalf("ParseShard(%q) accepted %+v", s, sh)
		}
	})
}

func TestShardJobsAddUp(t *testing.T) {
	for _, total := range []int{0, 1, 3, 4, 10, 1001} {
		for n := 1; n <= 5; n++ {
			sum := 0
			for i := 1; i <= n; i++ {
				sum += Shard{i, n}.Jobs(total)
			}
			if sum != total {
				t.Errorf("%d jobs over %d shards: shares add up to %d", total, n, sum)
			}
		}
	}
}

func TestShardSeedsDiffer(t *testing.T) {
	seen := map[uint64]Shard{}
	for base := uint64(0); base < 4; base++ {
		for i := 1; i <= 8; i++ {
			s := Shard{i, 8}.Seed(base)
			if prev, ok := seen[s]; ok {
				t.Fatalf("shard %d of base %d has the seed of %v", i, base, prev)
			}
			seen[s] = Shard{i, int(base)}
		}
	}
	if got := (Shard{1, 1}).Seed(42); got != 42 {
		t.Errorf("an unsharded run's seed is %d, want the base 42", got)
	}
}

// merged draws every shard of n and returns their arrivals in time order.
func merged(t *testing.T, kind string, rate float64, n, jobs int, duration time.Duration) []time.Duration {
	t.Helper()
	var all []time.Duration
	for i := 1; i <= n; i++ {
		p, err := Split(kind, rate, 0, 7, jobs, duration, Shard{i, n})
		if err != nil {
			t.Fatal(err)
		}
		for at, ok := p.Next(); ok; at, ok = p.Next() {
			all = append(all, at)
		}
	}
	slices.Sort(all)
	return all
}

// TestShardedPoissonIsPoissonAtTheFullRate: four shards at 50/s each,
// merged, pass the same KS test for Exp(200/s) gaps as one generator at
// 200/s does (TestPoissonGapsAreExponential).
func TestShardedPoissonIsPoissonAtTheFullRate(t *testing.T) {
	const rate, n = 200.0, 4
	all := merged(t, KindPoisson, rate, n, 0, 30*time.Second)
	gaps := gapsSeconds(all)
	cdf := func(x float64) float64 { return 1 - math.Exp(-rate*x) }
	d, crit := ksStatistic(gaps, cdf), ksCritical(len(gaps))
	t.Logf("%d merged arrivals; KS D = %.4f, critical value at α=0.01: %.4f", len(all), d, crit)
	if d > crit {
		t.Errorf("merged gaps do not fit Exp(%v): KS D = %.4f > %.4f", rate, d, crit)
	}
	// 6000 expected in 30 s; the count is Poisson, sd √6000 ≈ 77.
	if got := float64(len(all)); math.Abs(got-rate*30) > 5*math.Sqrt(rate*30) {
		t.Errorf("%v arrivals in 30s at %v/s", got, rate)
	}
	// The shards are not copies of one another.
	a, _ := Split(KindPoisson, rate, 0, 7, 0, time.Second, Shard{1, n})
	b, _ := Split(KindPoisson, rate, 0, 7, 0, time.Second, Shard{2, n})
	if x, _ := a.Next(); func() bool { y, _ := b.Next(); return x == y }() {
		t.Error("shards 1 and 2 start with the same arrival")
	}
}

func TestShardedJobsAddUp(t *testing.T) {
	for _, kind := range []string{KindPoisson, KindGamma, KindConstant} {
		t.Run(kind, func(t *testing.T) {
			if got := len(merged(t, kind, 100, 3, 1000, 0)); got != 1000 {
				t.Errorf("3 shards of 1000 jobs offered %d", got)
			}
		})
	}
}

// TestRoundRobinDealsOneSchedule: the shards of a gamma or constant run
// offer exactly the unsharded schedule between them.
func TestRoundRobinDealsOneSchedule(t *testing.T) {
	for _, kind := range []string{KindGamma, KindConstant} {
		t.Run(kind, func(t *testing.T) {
			whole, err := Split(kind, 50, 0, 7, 0, 10*time.Second, Shard{})
			if err != nil {
				t.Fatal(err)
			}
			var want []time.Duration
			for at, ok := whole.Next(); ok; at, ok = whole.Next() {
				want = append(want, at)
			}
			got := merged(t, kind, 50, 4, 0, 10*time.Second)
			if !slices.Equal(got, want) {
				t.Errorf("4 shards offered %d arrivals, not the %d of the one schedule", len(got), len(want))
			}
		})
	}
}

func TestSplitRejects(t *testing.T) {
	if _, err := Split(KindPoisson, 10, 0, 1, 0, time.Second, Shard{5, 4}); err == nil {
		t.Error("shard 5/4 accepted")
	}
	if _, err := Split(KindPoisson, 0, 0, 1, 0, time.Second, Shard{1, 4}); err == nil {
		t.Error("rate 0 accepted")
	}
}
