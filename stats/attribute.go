package stats

import (
	"cmp"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/stat"

	"github.com/tare-dev/tare"
)

// Attribution says how much of the tick-to-tick variation in latency the
// host and the load explain: an ordinary least squares fit of per-tick p95
// on the per-tick steal, throttled share, run delay, and queue depth (or
// in-flight requests for targets without a queue).
type Attribution struct {
	R2       float64  // coefficient of determination of the full fit, 0..1
	Ticks    int      // ticks fitted: those with completions and a host sample
	Terms    []Term   // the predictors kept, largest share first
	Sentence string   // the finding in words, for the verdict
	Warnings []string // why the fit means little, or what was left out
}

// Term is one predictor of the fit.
type Term struct {
	// Name is "steal", "throttled", "run delay", "queue depth" or
	// "in-flight".
	Name string
	// Coef is the change in per-tick p95, in ms, per unit of the predictor
	// (a percentage point, a queued job, an outstanding request) with the
	// others held fixed.
	Coef float64
	// Share is the percent of the variance of per-tick p95 this predictor
	// explains; the shares of all terms add up to 100·R2.
	Share float64
}

// Predictor names.
const (
	TermSteal      = "steal"
	TermThrottled  = "throttled"
	TermRunDelay   = "run delay"
	TermQueueDepth = "queue depth"
	TermInFlight   = "in-flight"
)

// MinAttributionTicks is the fewest ticks for an attribution worth reading;
// fewer still get a fit, with a warning.
const MinAttributionTicks = 10

// collinear is the R² above which a predictor is taken as a copy of the
// ones already kept: its share could not be told apart from theirs.
const collinear = 0.999

// Attribute fits per-tick p95 on the host and load figures of the ticks that
// have both completions and a host sample. A predictor that was not measured
// in every such tick, or did not vary, is left out.
//
// The share of each predictor is its LMG value (Lindeman, Merenda and Gold):
// the R² it adds when it joins the fit, averaged over every order in which
// the predictors could join. With at most four predictors that is sixteen
// small fits. Unlike squared standardized coefficients, the shares add up
// exactly to R² and stay fair when steal and queue depth move together,
// which is precisely what a starved host does to a queue.
func Attribute(ticks []tare.Tick) Attribution {
	var sel []*tare.Tick
	for i := range ticks {
		if ticks[i].Completions > 0 && ticks[i].Host != nil {
			sel = append(sel, &ticks[i])
		}
	}
	a := Attribution{Ticks: len(sel)}
	n := len(sel)
	if n < MinAttributionTicks {
		a.Warnings = append(a.Warnings, fmt.Sprintf("only %d ticks had both completions and a host sample: an attribution needs %d or more to mean much", n, MinAttributionTicks))
	}
	if n < 3 {
		a.Sentence = fmt.Sprintf("too few ticks (%d) with completions and a host sample to attribute per-tick p95", n)
		return a
	}

	y := make([]float64, n)
	for i, t := range sel {
		y[i] = ms(t.P95)
	}
	if stat.Variance(y, nil) == 0 {
		a.Sentence = fmt.Sprintf("per-tick p95 did not vary over %d ticks: nothing to attribute", n)
		return a
	}

	var cands []predictor
	optional := func(name string, get func(*tare.Tick) *float64) {
		x := make([]float64, 0, n)
		for _, t := range sel {
			if p := get(t); p != nil {
				x = append(x, *p)
			}
		}
		switch len(x) {
		case 0: // not measured in this run
		case n:
			cands = append(cands, predictor{name, x})
		default:
			a.Warnings = append(a.Warnings, fmt.Sprintf("%s was measured in %d of %d ticks: left out of the attribution", name, len(x), n))
		}
	}
	optional(TermSteal, func(t *tare.Tick) *float64 { return &t.Host.CPU.Steal })
	optional(TermThrottled, func(t *tare.Tick) *float64 { return t.Host.Throttled })
	optional(TermRunDelay, func(t *tare.Tick) *float64 { return t.Host.RunDelay })
	queue := slices.ContainsFunc(sel, func(t *tare.Tick) bool { return t.QueueDepth != nil })
	if queue {
		optional(TermQueueDepth, func(t *tare.Tick) *float64 { return t.QueueDepth })
	} else {
		optional(TermInFlight, func(t *tare.Tick) *float64 { v := float64(t.InFlight); return &v })
	}

	var kept []predictor
	var cols [][]float64
	for _, c := range cands {
		if stat.Variance(c.x, nil) == 0 {
			continue // constant: says nothing about the variation
		}
		if len(cols) > 0 {
			if _, r2, err := ols(c.x, cols); err != nil || r2 > collinear {
				a.Warnings = append(a.Warnings, fmt.Sprintf("%s moved in lockstep with %s: left out, its share cannot be told apart", c.name, names(kept)))
				continue
			}
		}
		kept = append(kept, c)
		cols = append(cols, c.x)
	}
	if len(kept) == 0 {
		a.Sentence = fmt.Sprintf("no host or load figure varied over the %d ticks: per-tick p95 is left unexplained", n)
		return a
	}
	if n < len(kept)+2 {
		a.Warnings = append(a.Warnings, fmt.Sprintf("%d ticks are too few to fit %d figures", n, len(kept)))
		a.Sentence = fmt.Sprintf("too few ticks (%d) to attribute per-tick p95", n)
		return a
	}

	coef, r2, err := ols(y, cols)
	if err != nil {
		a.Warnings = append(a.Warnings, fmt.Sprintf("fit per-tick p95: %v", err))
		a.Sentence = "per-tick p95 could not be attributed"
		return a
	}
	a.R2 = r2
	shares := lmg(y, cols)
	for j, p := range kept {
		a.Terms = append(a.Terms, Term{Name: p.name, Coef: coef[j], Share: 100 * shares[j]})
		if coef[j] < 0 && 100*shares[j] >= 5 {
			a.Warnings = append(a.Warnings, fmt.Sprintf("p95 fell as %s rose (%.3g ms per unit): %s is not what made it slow", p.name, coef[j], p.name))
		}
	}
	slices.SortStableFunc(a.Terms, func(x, y Term) int { return cmp.Compare(y.Share, x.Share) })
	a.Sentence = sentence(a)
	return a
}

// sentence words the attribution: the largest share first, then the rest.
//
//	steal explains 62 % of the variation in per-tick p95 (R² 0.71 over 58 ticks); queue depth 9 %
func sentence(a Attribution) string {
	var b strings.Builder
	top := a.Terms[0]
	fmt.Fprintf(&b, "%s explains %.0f %% of the variation in per-tick p95 (R² %.2f over %d ticks)", top.Name, top.Share, a.R2, a.Ticks)
	for i, t := range a.Terms[1:] {
		sep := ", "
		if i == 0 {
			sep = "; "
		}
		fmt.Fprintf(&b, "%s%s %.0f %%", sep, t.Name, t.Share)
	}
	return b.String()
}

// lmg returns each column's LMG share of R²: the mean, over every order of
// the columns, of the R² it adds when it joins. Averaging over orders is
// averaging over the subsets S of the other columns, each weighted by
// |S|!(k−|S|−1)!/k!, the fraction of orders in which exactly S comes first.
func lmg(y []float64, cols [][]float64) []float64 {
	k := len(cols)
	r2 := make([]float64, 1<<k) // R² of every subset, by bit mask
	sub := make([][]float64, 0, k)
	for mask := 1; mask < 1<<k; mask++ {
		sub = sub[:0]
		for j := range k {
			if mask&(1<<j) != 0 {
				sub = append(sub, cols[j])
			}
		}
		// Subsets of columns that fit together cannot fail to fit: a
		// failure leaves that subset at 0 and the shares still add up.
		_, r2[mask], _ = ols(y, sub)
	}
	shares := make([]float64, k)
	for j := range k {
		for mask := range 1 << k {
			if mask&(1<<j) != 0 {
				continue
			}
			s := bits.OnesCount(uint(mask))
			w := fact(s) * fact(k-s-1) / fact(k)
			shares[j] += w * (r2[mask|1<<j] - r2[mask])
		}
	}
	return shares
}

// ols fits y on the columns with an intercept, by least squares on the
// centred data (which drops the intercept and helps the conditioning), and
// returns the slopes and R².
func ols(y []float64, cols [][]float64) (coef []float64, r2 float64, err error) {
	n, p := len(y), len(cols)
	ym := stat.Mean(y, nil)
	yc := mat.NewVecDense(n, nil)
	for i, v := range y {
		yc.SetVec(i, v-ym)
	}
	x := mat.NewDense(n, p, nil)
	for j, c := range cols {
		m := stat.Mean(c, nil)
		for i, v := range c {
			x.Set(i, j, v-m)
		}
	}
	var b mat.VecDense
	if err := b.SolveVec(x, yc); err != nil {
		return nil, 0, fmt.Errorf("least squares over %d ticks and %d figures: %w", n, p, err)
	}
	var fit mat.VecDense
	fit.MulVec(x, &b)
	var ssRes, ssTot float64
	for i := range n {
		e := yc.AtVec(i) - fit.AtVec(i)
		ssRes += e * e
		ssTot += yc.AtVec(i) * yc.AtVec(i)
	}
	coef = make([]float64, p)
	for j := range p {
		coef[j] = b.AtVec(j)
	}
	return coef, math.Max(0, math.Min(1, 1-ssRes/ssTot)), nil
}

func fact(n int) float64 {
	f := 1.0
	for i := 2; i <= n; i++ {
		f *= float64(i)
	}
	return f
}

// predictor is one candidate figure, per selected tick.
type predictor struct {
	name string
	x    []float64
}

// names joins the predictors' names for a sentence.
func names(ps []predictor) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.name
	}
	return strings.Join(s, " and ")
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
