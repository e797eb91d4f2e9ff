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

// take draws up to n arrivals from p.
func take(p Process, n int) []time.Duration {
	var ats []time.Duration
	for range n {
		at, ok := p.Next()
		if !ok {
			break
		}
		ats = append(ats, at)
	}
	return ats
}

// gapsSeconds turns offsets into the gaps between them, the first measured
// from 0, in seconds.
func gapsSeconds(ats []time.Duration) []float64 {
	gaps := make([]float64, len(ats))
	var prev time.Duration
	for i, at := range ats {
		gaps[i] = (at - prev).Seconds()
		prev = at
	}
	return gaps
}

func TestNew(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	tests := []struct {
		name       string
		kind       string
		rate       float64
		burstiness float64
		want       string // String() of the process, or a substring of the error
		wantErr    bool
	}{
		{name: "empty kind is poisson", kind: "", rate: 200, want: "poisson 200/s"},
		{name: "poisson", kind: "poisson", rate: 200, burstiness: 1, want: "poisson 200/s"},
		{name: "kind ignores case and space", kind: " Poisson ", rate: 2, want: "poisson 2/s"},
		{name: "gamma", kind: "gamma", rate: 200, burstiness: 0.5, want: "gamma(0.5) 200/s"},
		{name: "gamma without burstiness is shape 1", kind: "gamma", rate: 200, want: "gamma(1) 200/s"},
		{name: "constant", kind: "constant", rate: 100, want: "constant 100/s"},
		{name: "slow rate prints per minute", kind: "constant", rate: 0.2, want: "constant 12/m"},
		{name: "unknown kind", kind: "weibull", rate: 1, want: `arrival must be poisson, gamma or constant; got "weibull"`, wantErr: true},
		{name: "zero rate", kind: "poisson", rate: 0, want: "rate must be positive", wantErr: true},
		{name: "negative rate", kind: "poisson", rate: -1, want: "got -1/s", wantErr: true},
		{name: "NaN rate", kind: "poisson", rate: nan, want: "got NaN/s", wantErr: true},
		{name: "infinite rate", kind: "constant", rate: inf, want: "got +Inf/s", wantErr: true},
		{name: "rate above max", kind: "constant", rate: 2e9, want: "at most", wantErr: true},
		{name: "negative burstiness", kind: "gamma", rate: 1, burstiness: -1, want: "burstiness must be a positive number", wantErr: true},
		{name: "NaN burstiness", kind: "gamma", rate: 1, burstiness: nan, want: "got NaN", wantErr: true},
		{name: "infinite burstiness", kind: "gamma", rate: 1, burstiness: inf, want: "got +Inf", wantErr: true},
		{name: "burstiness on poisson", kind: "poisson", rate: 1, burstiness: 2, want: `burstiness 2 only applies to gamma arrivals; got arrival "poisson"`, wantErr: true},
		{name: "burstiness on default kind", kind: "", rate: 1, burstiness: 0.5, want: "only applies to gamma", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := New(tt.kind, tt.rate, tt.burstiness, 1)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("New(%q, %v, %v) = %v, want an error", tt.kind, tt.rate, tt.burstiness, p)
				}
				if code := tare.ErrorCode(err); code != tare.EINVALID {
					t.Errorf("error code = %q, want %q", code, tare.EINVALID)
				}
				if !strings.Contains(err.Error(), tt.want) {
					t.Errorf("error = %q, want it to contain %q", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("New(%q, %v, %v): %v", tt.kind, tt.rate, tt.burstiness, err)
			}
			if got := p.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestConstructorsPanicOnBadInput(t *testing.T) {
	tests := []struct {
		name string
		f    func()
	}{
		{"poisson zero rate", func() { NewPoisson(0, 1) }},
		{"gamma NaN rate", func() { NewGamma(math.NaN(), 1, 1) }},
		{"gamma zero burstiness", func() { NewGamma(1, 0, 1) }},
		{"constant negative rate", func() { NewConstant(-1) }},
		{"bound negative jobs", func() { Bound(NewConstant(1), -1, 0) }},
		{"bound negative duration", func() { Bound(NewConstant(1), 0, -time.Second) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			tt.f()
		})
	}
}

// TestSeedPinned pins the first arrivals of each seeded process: a change
// here means stored runs can no longer be replayed from their seed.
func TestSeedPinned(t *testing.T) {
	tests := []struct {
		name string
		p    Process
		want []time.Duration
	}{
		{"poisson", NewPoisson(200, 1), []time.Duration{13346165, 19878305, 31486503, 42391460, 48466144}},
		{"gamma 0.5", NewGamma(200, 0.5, 1), []time.Duration{156092, 526230, 582146, 1890112, 2315280}},
		{"gamma 4", NewGamma(200, 4, 1), []time.Duration{3900187, 4896222, 7548829, 15752414, 17689501}},
		{"constant", NewConstant(3), []time.Duration{0, 333333333, 666666667, 1000000000, 1333333333}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := take(tt.p, len(tt.want)); !slices.Equal(got, tt.want) {
				t.Errorf("first arrivals = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestSameSeedSameSequence(t *testing.T) {
	tests := []struct {
		name string
		new  func(seed uint64) Process
	}{
		{"poisson", func(seed uint64) Process { return NewPoisson(50, seed) }},
		{"gamma bursty", func(seed uint64) Process { return NewGamma(50, 0.25, seed) }},
		{"gamma smooth", func(seed uint64) Process { return NewGamma(50, 4, seed) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b, c := take(tt.new(7), 1000), take(tt.new(7), 1000), take(tt.new(8), 1000)
			if !slices.Equal(a, b) {
				t.Error("seed 7 twice gave two sequences")
			}
			if slices.Equal(a, c) {
				t.Error("seeds 7 and 8 gave the same sequence")
			}
		})
	}
}

func TestNonDecreasing(t *testing.T) {
	for _, p := range []Process{
		NewPoisson(1000, 3), NewGamma(1000, 0.1, 3), NewGamma(1000, 25, 3), NewConstant(7),
	} {
		t.Run(p.String(), func(t *testing.T) {
			ats := take(p, 20000)
			if len(ats) != 20000 {
				t.Fatalf("got %d arrivals, want 20000", len(ats))
			}
			for i := 1; i < len(ats); i++ {
				if ats[i] < ats[i-1] {
					t.Fatalf("arrival %d at %v is before arrival %d at %v", i, ats[i], i-1, ats[i-1])
				}
			}
		})
	}
}

func TestConstantIsExact(t *testing.T) {
	tests := []struct {
		name string
		rate float64
		i    int           // arrival index, from 0
		want time.Duration // its offset
	}{
		{"first at zero", 100, 0, 0},
		{"100/s", 100, 1, 10 * time.Millisecond},
		{"100/s after a day", 100, 8_640_000, 24 * time.Hour},
		{"12/m", 0.2, 3, 15 * time.Second},
		{"7.5/s", 7.5, 15, 2 * time.Second},
		// Summing the rounded gap of 333333333ns would be a millisecond
		// early after 10⁶ s; an offset from the start is not.
		{"3/s after a million seconds", 3, 3_000_000, 1_000_000 * time.Second},
		{"3/s rounds to the nearest ns", 3, 2, 666666667},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewConstant(tt.rate)
			var at time.Duration
			for range tt.i + 1 {
				var ok bool
				if at, ok = p.Next(); !ok {
					t.Fatal("exhausted")
				}
			}
			if at != tt.want {
				t.Errorf("arrival %d at %v, want %v", tt.i, at, tt.want)
			}
		})
	}
}

// ksStatistic is the Kolmogorov–Smirnov distance between the empirical
// distribution of xs and the continuous cdf.
func ksStatistic(xs []float64, cdf func(float64) float64) float64 {
	xs = slices.Clone(xs)
	slices.Sort(xs)
	n := float64(len(xs))
	var d float64
	for i, x := range xs {
		f := cdf(x)
		d = max(d, float64(i+1)/n-f, f-float64(i)/n)
	}
	return d
}

// ksCritical is the asymptotic critical value of the one-sample KS test at
// α = 0.01, √(−ln(α/2)/2)/√n = 1.6276/√n, accurate for n in the thousands.
func ksCritical(n int) float64 {
	return math.Sqrt(-math.Log(0.01/2)/2) / math.Sqrt(float64(n))
}

func TestPoissonGapsAreExponential(t *testing.T) {
	const rate, n = 200.0, 5000
	gaps := gapsSeconds(take(NewPoisson(rate, 42), n))
	cdf := func(x float64) float64 { return 1 - math.Exp(-rate*x) }
	d, crit := ksStatistic(gaps, cdf), ksCritical(n)
	t.Logf("KS D = %.4f, critical value at α=0.01 for n=%d: %.4f", d, n, crit)
	if d > crit {
		t.Errorf("gaps do not fit Exp(%v): KS D = %.4f > %.4f", rate, d, crit)
	}
}

// TestGammaMoments checks the mean gap 1/λ and the variance 1/(kλ²) over
// n gaps. The tolerance is four standard errors, computed from the gamma's
// own moments: the sample mean has relative standard error √(1/(kn)), and
// the sample variance, with excess kurtosis 6/k, √((2 + 6/k)/n). At
// n = 200000 that is ±1.8% / ±4.6% for k = 0.25 and ±0.45% / ±1.7% for k = 4.
func TestGammaMoments(t *testing.T) {
	const rate, n = 200.0, 200000
	for _, k := range []float64{0.25, 4} {
		p := NewGamma(rate, k, 11)
		t.Run(p.String(), func(t *testing.T) {
			gaps := gapsSeconds(take(p, n))
			var sum float64
			for _, g := range gaps {
				sum += g
			}
			mean := sum / n
			var ss float64
			for _, g := range gaps {
				ss += (g - mean) * (g - mean)
			}
			variance := ss / (n - 1)

			check := func(what string, got, want, relSE float64) {
				t.Helper()
				rel := math.Abs(got-want) / want
				t.Logf("%s = %.6g, want %.6g: off by %.2f%% (4 SE = %.2f%%)", what, got, want, 100*rel, 400*relSE)
				if rel > 4*relSE {
					t.Errorf("%s = %.6g, want %.6g within %.2f%%", what, got, want, 400*relSE)
				}
			}
			check("mean gap", mean, 1/rate, math.Sqrt(1/(k*n)))
			check("gap variance", variance, 1/(k*rate*rate), math.Sqrt((2+6/k)/n))
		})
	}
}

// TestGammaGapsFitGamma runs the KS test against gonum's gamma CDF. The rate
// is 1/s so nanosecond rounding of the offsets is negligible even for the
// mass a shape of 0.25 puts near zero.
func TestGammaGapsFitGamma(t *testing.T) {
	const rate, n = 1.0, 5000
	for _, k := range []float64{0.25, 1, 4} {
		p := NewGamma(rate, k, 5)
		t.Run(p.String(), func(t *testing.T) {
			dist := distuv.Gamma{Alpha: k, Beta: rate * k} // Beta is gonum's rate parameter
			d, crit := ksStatistic(gapsSeconds(take(p, n)), dist.CDF), ksCritical(n)
			t.Logf("KS D = %.4f, critical value %.4f", d, crit)
			if d > crit {
				t.Errorf("gaps do not fit Gamma(%v, %v): KS D = %.4f > %.4f", k, rate*k, d, crit)
			}
		})
	}
}

func TestBound(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	tests := []struct {
		name     string
		p        Process
		jobs     int
		duration time.Duration
		want     []time.Duration
		str      string
	}{
		{"by jobs", NewConstant(10), 3, 0, ms(0, 100, 200), "constant 10/s for 3 jobs"},
		{"by duration, end excluded", NewConstant(10), 0, 500 * time.Millisecond, ms(0, 100, 200, 300, 400), "constant 10/s for 500ms"},
		{"jobs first", NewConstant(10), 2, time.Second, ms(0, 100), "constant 10/s for 2 jobs or 1s"},
		{"duration first", NewConstant(10), 100, 250 * time.Millisecond, ms(0, 100, 200), "constant 10/s for 100 jobs or 250ms"},
		{"bound inside a bound", Bound(NewConstant(10), 2, 0), 5, 0, ms(0, 100), "constant 10/s for 2 jobs for 5 jobs"},
		{"one job", NewConstant(1), 1, 0, ms(0), "constant 1/s for 1 jobs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := Bound(tt.p, tt.jobs, tt.duration)
			if got := take(b, 1000); !slices.Equal(got, tt.want) {
				t.Errorf("arrivals = %v, want %v", got, tt.want)
			}
			for range 3 {
				if at, ok := b.Next(); ok {
					t.Fatalf("Next after exhaustion = %v, true", at)
				}
			}
			if got := b.String(); got != tt.str {
				t.Errorf("String() = %q, want %q", got, tt.str)
			}
		})
	}

	t.Run("no bound", func(t *testing.T) {
		b := Bound(NewPoisson(100, 1), 0, 0)
		if got := len(take(b, 5000)); got != 5000 {
			t.Errorf("got %d arrivals, want 5000", got)
		}
		if got := b.String(); got != "poisson 100/s" {
			t.Errorf("String() = %q", got)
		}
	})

	// Poisson arrivals in [0, T) number Poisson(λT): mean and variance λT.
	t.Run("poisson count in a window", func(t *testing.T) {
		const rate, window = 200.0, 10 * time.Second
		want := rate * window.Seconds()
		got := float64(len(take(Bound(NewPoisson(rate, 9), 0, window), 10000)))
		if math.Abs(got-want) > 4*math.Sqrt(want) {
			t.Errorf("%v arrivals in %v at %v/s, want %v ± %.0f", got, window, rate, want, 4*math.Sqrt(want))
		}
	})
}

func TestEndsPastMaxDuration(t *testing.T) {
	tests := []struct {
		name string
		p    Process
		want int // arrivals before the offsets overflow time.Duration
	}{
		// One arrival every 10⁹ s: the 10th (at 9·10¹⁸ ns) still fits,
		// the 11th (10¹⁹ ns) does not.
		{"constant", NewConstant(1e-9), 10},
		{"poisson", NewPoisson(1e-15, 1), 0}, // mean gap 10⁶ years
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := len(take(tt.p, 100)); got != tt.want {
				t.Errorf("got %d arrivals, want %d", got, tt.want)
			}
			if _, ok := tt.p.Next(); ok {
				t.Error("Next after exhaustion returned ok")
			}
		})
	}
}

func BenchmarkNext(b *testing.B) {
	for _, p := range []Process{NewPoisson(1000, 1), NewGamma(1000, 0.25, 1), NewGamma(1000, 4, 1), NewConstant(1000)} {
		b.Run(p.String(), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p.Next()
			}
		})
	}
}
