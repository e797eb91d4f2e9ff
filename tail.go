package tare

import (
	"fmt"
	"strings"
	"time"
)

// Tail is per-request blame: what outside interference overlapped each
// request's life (Scheduled to Done), and how the slowest requests compare
// with the rest. Outside interference is the measured threads' wait behind
// other processes (the probe's Waits, Wait.Outside) and the
// hypervisor's steal of the ticks the request lived in. Every thread of
// the system under test counts (tare cannot tell which thread served
// which request): on a pool, one worker's wait also overlaps the requests
// of the others, so a request's exposure is an upper bound, each wait
// counted at most for the wall time it overlapped and the whole at most
// the request's latency. tare's own threads' waits count only where they
// held up its send or the read of its answer. The comparison of the
// slowest with the rest, not the overlap alone, is what the verdict
// judges.
type Tail struct {
	// Requests are the finished requests whose ticks the probe all
	// measured; Overlapped are those whose outside wait was at least
	// OverlapShare of their latency.
	Requests   int `json:"requests"`
	Overlapped int `json:"overlapped"`
	// Quiet are the latency percentiles of the requests that overlapped
	// no outside wait: what the code does on a quiet host, measured from
	// this run. Exposed are those of the ones that did.
	Quiet   PercentilesMS `json:"quiet_ms"`
	Exposed PercentilesMS `json:"exposed_ms"`
	// Measured are the latency percentiles of the Requests, what
	// Unwaited, Unstolen and Uncrowded are compared with: the run's own
	// also count the requests of ticks the probe did not measure whole,
	// which none of those holds. Nil (JSON null) in runs stored before
	// it was kept: the run's own stand in (Latency).
	Measured *PercentilesMS `json:"measured_ms"`
	// Unwaited are the percentiles of every request's latency less the
	// outside wait it overlapped: the run as it would have been without
	// it, at most (the wait is an upper bound).
	Unwaited PercentilesMS `json:"unwaited_ms"`
	// Stolen are the requests that lived in a tick in which the
	// hypervisor took one CPU for StolenShare of the tick or more (a
	// burst of steal: whichever request was on that CPU then stood
	// still); Unstolen are the percentiles of the others.
	Stolen   int           `json:"stolen"`
	Unstolen PercentilesMS `json:"unstolen_ms"`
	// Crowded are the requests that lived in a tick in which other
	// processes used CrowdedShare of one CPU or more; Uncrowded are the
	// percentiles of the others.
	Crowded   int           `json:"crowded"`
	Uncrowded PercentilesMS `json:"uncrowded_ms"`
	// Sampled is how many requests the slices were drawn from: all of a
	// run up to that size, a uniform sample of a larger one.
	Sampled int         `json:"sampled"`
	Slowest []TailSlice `json:"slowest"` // the slowest 1 % and 5 %
}

// OverlapShare is the least wait behind other processes, as a share of a request's latency, for it to count as
// overlapped (Tail.Overlapped). Steal is in a request's wait (Unwaited
// takes it off) but does not make it overlapped: no event says which
// requests the hypervisor's steal hit, so it is spread over a tick's
// requests alike, and would mark them all.
const OverlapShare = 0.05

// StolenShare is the least steal of one CPU, as a share of a tick, that
// makes the tick stolen for Tail.Stolen: 20 ms a second taken from one
// CPU at once holds up whatever ran on it by up to that, where the same
// steal spread over the tick's requests (as Unwaited spreads it) holds
// each up by a fraction of a millisecond. No event says when in the tick
// the hypervisor took the CPU, so whether the slowest requests lived in
// such ticks more than the others did is what the verdict weighs.
const StolenShare = 0.02

// CrowdedShare is the least CPU other processes used in a tick, as a
// share of one CPU, that makes the tick crowded for Tail.Crowded. A
// neighbour can slow the service without its threads waiting behind it
// at all: a hog that takes one of two CPUs leaves the service's threads
// and tare's to wait behind each other on the one left (waits the probe
// counts as their own), and one on a CPU's SMT sibling slows it. Whether
// the slowest requests lived in such ticks more than the others did is
// what the verdict weighs.
const CrowdedShare = 0.25

// OwnerSteal is the hypervisor, as what a request's life overlapped
// (TailOwner.Owner): its steal of the ticks the request lived in.
const OwnerSteal = "steal"

// TailSlice is the slowest Pct % of the sampled requests, and what they
// overlapped.
type TailSlice struct {
	Pct        float64 `json:"pct"`
	Requests   int     `json:"requests"`
	Overlapped int     `json:"overlapped"`
	// WaitMS is the mean outside wait of the slice's requests that
	// overlapped it; nil when none did.
	WaitMS *float64 `json:"wait_ms"`
	// Behind is whom the overlapped ones waited behind most, each
	// request counted under its largest, the most requests first.
	Behind []TailOwner `json:"behind"`
	// P is the chance that Requests drawn at random from the sample hold
	// Overlapped or more that overlapped (hypergeometric, one-sided):
	// small when the slowest overlapped outside waits more than the rest.
	P float64 `json:"p"`
	// ShareP is the chance that the slice's measured outside wait, as a
	// share of each request's latency, ranks as high against the rest of
	// the sample's as it does (Mann-Whitney U, one-sided, by permutation:
	// most shares tie at 0, where its normal approximation fails): small
	// when the slowest waited for more of their lives than the rest,
	// which P cannot show where most requests overlapped some wait (a
	// neighbour that crowds the service all run long). Nil where not
	// worked out (runs stored before it).
	ShareP *float64 `json:"share_p"`
	// Stolen are the slice's requests that lived in a stolen tick
	// (Tail.Stolen), StolenP the chance that as many drawn at random
	// hold as many, and StealMS the most time the hypervisor took from
	// one CPU in a tick they lived in; nil when none did.
	Stolen  int      `json:"stolen"`
	StolenP float64  `json:"stolen_p"`
	StealMS *float64 `json:"steal_ms"`
	// Crowded are the slice's requests that lived in a crowded tick
	// (Tail.Crowded), CrowdedP the chance that as many drawn at random
	// hold as many, and CrowdedBy the busiest other process of the most
	// crowded tick each lived in, the most requests first (their
	// WaitMS unset).
	Crowded   int         `json:"crowded"`
	CrowdedP  float64     `json:"crowded_p"`
	CrowdedBy []TailOwner `json:"crowded_by"`
}

// Quantile names the percentile the slice begins at: p99 for the slowest
// 1 %, p95 for 5 %.
func (sl TailSlice) Quantile() string {
	if sl.Pct <= 1 {
		return "p99"
	}
	return "p95"
}

// At is the percentile of p the slowest sl begin at (TailSlice.Quantile).
func (p PercentilesMS) At(sl TailSlice) *float64 {
	if sl.Pct <= 1 {
		return p.P99
	}
	return p.P95
}

// Latency is the percentile the slowest sl begin at, over the requests
// the tail measured (Measured), or, in a run stored before those were
// kept, over all of s's.
func (t *Tail) Latency(s *Summary, sl TailSlice) *float64 {
	if t.Measured != nil {
		return t.Measured.At(sl)
	}
	return s.Latency.At(sl)
}

// At is the latency percentile the slowest sl begin at.
func (l LatencyMS) At(sl TailSlice) *float64 {
	return PercentilesMS{P95: l.P95, P99: l.P99}.At(sl)
}

// Sentence says what the slowest requests overlapped, as the summary
// shows it: "the p99 tail: 31 of 36 requests overlapped waits behind
// `nightly-batch` (pids 812, 813), 2.1 ms each on average; requests with
// no outside wait: p99 0.9 ms".
func (t *Tail) Sentence(sl TailSlice) string {
	out := fmt.Sprintf("the %s tail: %d of %d requests overlapped outside waits", sl.Quantile(), sl.Overlapped, sl.Requests)
	if len(sl.Behind) > 0 {
		out = fmt.Sprintf("the %s tail: %d of %d requests overlapped waits behind %s", sl.Quantile(), sl.Overlapped, sl.Requests, OwnerNames(sl.Behind))
	}
	if sl.WaitMS != nil {
		out += fmt.Sprintf(", %s each on average", MSText(*sl.WaitMS))
	}
	out += fmt.Sprintf(" (of all %d requests measured, %d did)", t.Requests, t.Overlapped)
	if q := t.Quiet.At(sl); q != nil {
		out += fmt.Sprintf("; requests with no outside wait: %s %s", sl.Quantile(), MSText(*q))
	}
	return out
}

// OwnerNames names the owners the slowest requests waited behind, the
// most first: "`nightly-batch` (pids 812, 813)", "the hypervisor's
// steal"; at most three, and how many more.
func OwnerNames(owners []TailOwner) string {
	var names []string
	for i, o := range owners {
		if i == 3 {
			names = append(names, fmt.Sprintf("%d more", len(owners)-i))
			break
		}
		names = append(names, o.Who())
	}
	return strings.Join(names, ", ")
}

// Who names the owner as the tail sentence does.
func (o TailOwner) Who() string {
	switch o.Owner {
	case OwnerSteal:
		return "the hypervisor's steal"
	case OwnerKernel:
		if o.Name != "" {
			return fmt.Sprintf("kernel thread `%s`", o.Name)
		}
		return "kernel threads"
	}
	if o.Name == "" {
		return "other processes"
	}
	return Behind{Name: o.Name, PIDs: o.PIDs}.Who()
}

// MSText formats milliseconds with three significant figures, in seconds
// from one second on, as the reports do.
func MSText(v float64) string {
	switch {
	case v >= 1000:
		return fmt.Sprintf("%.3gs", v/1000)
	case v >= 100:
		return fmt.Sprintf("%.0fms", v)
	case v >= 10:
		return fmt.Sprintf("%.1fms", v)
	}
	return fmt.Sprintf("%.2fms", v)
}

// Exposure is what outside interference overlapped one request's life,
// by Tail's rule (stats.Overlaps.Of computes it for a stored run's
// records; the report colours each request by it).
type Exposure struct {
	Wait time.Duration // outside wait overlapped, at most the request's latency
	Top  TailOwner     // whom it waited behind most (Requests and WaitMS unset); zero when nobody
	// Overlapped: Wait was at least OverlapShare of the latency.
	Overlapped bool
}

// TailOwner is one owner the slowest requests waited behind.
type TailOwner struct {
	Owner    string  `json:"owner"` // OwnerOther or OwnerSteal (OwnerKernel in runs stored before kernel threads stopped counting)
	Name     string  `json:"name,omitempty"`
	PIDs     []int   `json:"pids,omitempty"`
	Root     int     `json:"root,omitempty"`
	Requests int     `json:"requests"` // requests it held up most
	WaitMS   float64 `json:"wait_ms"`  // their mean wait behind it
}
