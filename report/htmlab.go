package report

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/tare-dev/tare"
)

// abData is an A/B run in the page's data part: its tare.ab/v1 and the
// points of its charts.
type abData struct {
	AB     *tare.AB     `json:"ab"`
	Charts []*chartData `json:"charts"`
}

// abView is an A/B run's section of the page.
type abView struct {
	Heading      string
	Sub          string
	Result       string
	Class        string
	Interference string
	Warnings     []string
	Charts       []chartView
	Header       []string
	Pairs        [][]string
	Ratios       [][]string
}

// abCharts draw an A/B run's paired trials: each pair's B/A on the metric
// that decides, against 1 and the interval over the pairs; and each
// trial's polluted ticks, A's and B's, so that a pair hit on one side
// only shows.
func abCharts(ab *tare.AB) []*chartData {
	ratio := &chartData{ID: "ab-pairs", Title: "B against A, pair by pair: B/A of " + ab.On, Kind: kindPairs,
		XLabel: "pair", YLabel: "B/A " + ab.On, height: smallHeight + 40}
	pairs := seriesData{Name: "B/A of each pair", Color: colP95, Dots: true}
	for _, p := range ab.Pairs {
		pairs.Points = append(pairs.Points, point{float64(p.N), orNaN(p.Ratios[ab.On])})
	}
	ratio.Series = []seriesData{pairs}
	ratio.Marks = []markData{{Name: "1: A = B", Value: 1, Color: colThreshold}}
	for _, r := range ab.Ratios {
		if r.Metric != ab.On || r.Ratio == nil || r.RatioLow == nil {
			continue
		}
		ci := fmt.Sprintf("%g %% CI", ab.ConfidencePct)
		ratio.Marks = append(ratio.Marks, markData{Name: fmt.Sprintf("B/A over the pairs %.3f", *r.Ratio), Value: *r.Ratio, Color: colSLO},
			markData{Name: fmt.Sprintf("%s low %.3f", ci, *r.RatioLow), Value: *r.RatioLow, Color: colStage},
			markData{Name: fmt.Sprintf("%s high %.3f", ci, *r.RatioHigh), Value: *r.RatioHigh, Color: colStage})
		ratio.Note = fmt.Sprintf("The dots are the pairs' own B/A; the lines the ratio over the pairs and its %s (the randomisation test over the pairs), against 1, where A and B are the same.", ci)
	}

	noise := &chartData{ID: "ab-interference", Title: "Interference of each trial: its polluted ticks", Kind: kindXY,
		XLabel: "pair", YLabel: "% of the trial's ticks", height: smallHeight}
	a := seriesData{Name: "A's trial", Color: colTare, Dots: true}
	b := seriesData{Name: "B's trial", Color: colOthers, Dots: true, Dashed: true}
	for _, p := range ab.Pairs {
		a.Points = append(a.Points, point{float64(p.N), orNaN(p.A.PollutedTicksPct)})
		b.Points = append(b.Points, point{float64(p.N), orNaN(p.B.PollutedTicksPct)})
	}
	noise.Series = []seriesData{a, b}
	noise.Note = ab.Interference.Detail
	return []*chartData{ratio, noise}
}

func abSection(ab *tare.AB, d *abData) (*abView, error) {
	v := &abView{
		Heading: "A/B run " + cmp.Or(ab.Label, shortID(ab.ID)),
		Sub: fmt.Sprintf("%s, %s of %.1fs, each variant at %.1f/s; A %s, B %s; %s", ab.Mode, plural(len(ab.Pairs), "trial pair", "trial pairs"),
			ab.TrialS, ab.RatePerS, ab.A.Target, ab.B.Target, ab.Status),
		Result: fmt.Sprintf("%s: %s", ab.Result, ab.Verdict), Class: abClass(ab.Result),
		Interference: ab.Interference.Detail, Warnings: ab.Warnings,
		Header: []string{"pair", "first", "A " + ab.On, "B " + ab.On, "B/A", "A's trial", "B's trial", "A run", "B run"},
	}
	for _, p := range ab.Pairs {
		v.Pairs = append(v.Pairs, []string{fmt.Sprint(p.N), orDash(strings.ToUpper(p.First)),
			ms(p.A.Value(ab.On)), ms(p.B.Value(ab.On)), ratio(p.Ratios[ab.On]),
			trialLevel(&p.A), trialLevel(&p.B), orDash(shortID(p.A.RunID)), orDash(shortID(p.B.RunID))})
	}
	for _, r := range ab.Ratios {
		if r.Ratio == nil {
			v.Ratios = append(v.Ratios, []string{r.Metric, "n/a", "", fmt.Sprint(r.Pairs)})
			continue
		}
		diff := fmt.Sprintf("%+.1f %% (no interval: too few pairs)", *r.DiffPct)
		if r.DiffLowPct != nil {
			diff = fmt.Sprintf("%+.1f %% (%+.1f to %+.1f %%)", *r.DiffPct, *r.DiffLowPct, *r.DiffHighPct)
		}
		v.Ratios = append(v.Ratios, []string{r.Metric, ratio(r.Ratio), diff, fmt.Sprint(r.Pairs)})
	}
	var err error
	v.Charts, err = charts(d.Charts)
	return v, err
}

// trialLevel is a trial's verdict, marked when it was hit.
func trialLevel(t *tare.ABTrial) string {
	if t.Hit {
		return string(t.Verdict) + " (hit)"
	}
	return string(t.Verdict)
}

// abClass colours the result with the verdicts' colours: B slower is
// red, inconclusive a doubt, the same or faster green.
func abClass(r tare.ABResult) string {
	switch r {
	case tare.ABSlower:
		return "polluted"
	case tare.ABInconclusive:
		return "suspect"
	}
	return "clean"
}
