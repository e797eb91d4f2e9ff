package report

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/tare-dev/tare"
)

// blameNamed is how many other processes a blame line names; the rest are
// "other processes".
const blameNamed = 3

// BlameLine says behind whom the measured threads waited, in shares of one
// CPU, the largest first: "waited 14.1% of a CPU: 11.9% behind `batch`
// (pid 4121), 1.6% behind its own threads, 0.4% behind tare, 0.2%
// wake-up". Shares under 0.05% are left out. sut says whether the system
// under test is known: its own threads are then "its own threads".
func BlameLine(b *tare.Blame, sut bool) string {
	var parts []part
	owners := map[string]float64{}
	named := 0
	for _, o := range b.Behind {
		switch {
		case o.Owner == tare.OwnerOther && o.Name != "" && named < blameNamed:
			named++
			parts = append(parts, part{o.WaitPct, "behind " + o.Who()})
		default:
			owners[o.Owner] += o.WaitPct
		}
	}
	own := "behind the system under test"
	if sut {
		own = "behind its own threads"
	}
	for owner, words := range map[string]string{
		tare.OwnerOther:  "behind other processes",
		tare.OwnerSUT:    own,
		tare.OwnerTare:   "behind tare",
		tare.OwnerKernel: "behind kernel threads",
		tare.OwnerWakeup: "wake-up",
	} {
		if v, ok := owners[owner]; ok {
			parts = append(parts, part{v, words})
		}
	}
	slices.SortFunc(parts, func(x, y part) int {
		return cmp.Or(cmp.Compare(y.pct, x.pct), cmp.Compare(x.words, y.words))
	})
	var out []string
	for _, p := range parts {
		if p.pct >= 0.05 {
			out = append(out, fmt.Sprintf("%.1f%% %s", p.pct, p.words))
		}
	}
	line := fmt.Sprintf("%.1f%% of a CPU", b.WaitPct)
	if len(out) > 0 {
		line += ": " + strings.Join(out, ", ")
	}
	return line
}

type part struct {
	pct   float64
	words string
}

// BlameSource says where the blame came from, and for a measured one how
// schedstat's run delay compares: "measured by the scheduler probe;
// schedstat 14.3%", "estimated from the CPU shares: not root".
func BlameSource(b *tare.Blame) string {
	if b.Source != tare.BlameMeasured {
		if b.Why == "" {
			return "estimated from the CPU shares"
		}
		return "estimated from the CPU shares: " + b.Why
	}
	s := "measured by the scheduler probe"
	if t := b.Schedstat; t != nil {
		s += fmt.Sprintf("; run delay %.1f%%, schedstat %.1f%%", t.ProbeWaitPct, t.WaitPct)
		if t.Disagreed > 0 {
			s += fmt.Sprintf(", %d of %d ticks disagree", t.Disagreed, t.Ticks)
		}
	}
	if b.DroppedEvents > 0 {
		s += fmt.Sprintf("; %d events lost", b.DroppedEvents)
	}
	if b.UnseenSwitches > 0 {
		s += fmt.Sprintf("; %d switches the kernel did not trace", b.UnseenSwitches)
	}
	return s
}

// blameRows are the text summary's rows of blame: whom the measured
// threads waited behind, and for tare check whom each of the busiest
// processes did.
func blameRows(p *printer, s *tare.Summary) {
	b := s.Blame
	if b == nil {
		return
	}
	p.row("waited", "%s   (%s)", BlameLine(b, s.SUT != nil), BlameSource(b))
	for _, w := range b.Waiters {
		who := tare.Behind{Name: w.Name, PIDs: w.PIDs}.Who()
		p.row("", "%s %s", who, BlameLine(&tare.Blame{WaitPct: w.WaitPct, Behind: w.Behind}, false))
	}
}

// Colours of the named neighbours in the blame chart, the busiest first;
// the rest of the other processes take colOthers.
var blameColours = []string{"#d62728", "#ff7f0e", "#e377c2"}

// blameChart stacks, per tick, the wait of the measured threads behind
// whom: their own (the system under test, tare), kernel threads, wake-up
// latency, the run's busiest neighbours by name and the other processes.
// Measured where the scheduler probe ran, else estimated (the note says
// which). Nil when no tick has a blame.
func (r *Run) blameChart(id string) *chartData {
	if !slices.ContainsFunc(r.Ticks, func(t tare.Tick) bool { return t.Host != nil && t.Host.BlameOf() != nil }) {
		return nil
	}
	c := r.timeChart(id, "blame", "Waited behind whom per tick", "% of one CPU")
	type layer struct {
		name, colour string
		get          func(*tare.Blame) float64
	}
	owner := func(o string) func(*tare.Blame) float64 {
		return func(b *tare.Blame) float64 {
			sum := 0.0
			for _, w := range b.Behind {
				if w.Owner == o {
					sum += w.WaitPct
				}
			}
			return sum
		}
	}
	layers := []layer{
		{"its own threads", colSUT, owner(tare.OwnerSUT)},
		{"tare", colTare, owner(tare.OwnerTare)},
		{"kernel threads", colKernel, owner(tare.OwnerKernel)},
		{"wake-up", colUnattributed, owner(tare.OwnerWakeup)},
	}
	var named []tare.BehindKey
	var labels []string
	if b := r.Summary.Blame; b != nil {
		for _, w := range b.Behind {
			if w.Owner == tare.OwnerOther && w.Name != "" && len(named) < len(blameColours) {
				named = append(named, w.Key())
				labels = append(labels, "`"+w.Name+"`")
				if slices.ContainsFunc(b.Behind, func(o tare.Behind) bool { return o.Owner == w.Owner && o.Name == w.Name && o.Root != w.Root }) {
					labels[len(labels)-1] = w.Who() // two of one name: which is which
				}
			}
		}
	}
	for i, key := range named {
		layers = append(layers, layer{labels[i], blameColours[i], func(b *tare.Blame) float64 {
			sum := 0.0
			for _, w := range b.Behind {
				if w.Key() == key {
					sum += w.WaitPct
				}
			}
			return sum
		}})
	}
	layers = append(layers, layer{"other processes", colOthers, func(b *tare.Blame) float64 {
		sum := 0.0
		for _, w := range b.Behind {
			if w.Owner == tare.OwnerOther && !slices.Contains(named, w.Key()) {
				sum += w.WaitPct
			}
		}
		return sum
	}})
	// Each layer is drawn as its top edge, filled down to zero, the
	// highest first, as in the whose-CPU chart.
	for i := len(layers) - 1; i >= 0; i-- {
		c.addLine(layers[i].name, layers[i].colour, r.series(func(_ int, t *tare.Tick) float64 {
			if t.Host == nil || t.Host.BlameOf() == nil {
				return math.NaN()
			}
			b, sum := t.Host.BlameOf(), 0.0
			for _, l := range layers[:i+1] {
				sum += l.get(b)
			}
			return sum
		}))
		if n := len(c.Series); n > 0 && c.Series[n-1].Name == layers[i].name {
			c.Series[n-1].Fill = true
		}
	}
	c.Note = "Of the time the system under test's and tare's threads waited for a CPU (several threads waiting at once add up past 100 %), behind whom. "
	if b := r.Summary.Blame; b != nil && b.Source == tare.BlameMeasured {
		c.Note += "Measured from the scheduler's own switch events."
	} else {
		c.Note += "Estimated from each tick's CPU shares: the scheduler probe did not run."
	}
	c.foldedNote()
	return c
}
