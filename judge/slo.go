package judge

import (
	"fmt"
	"strings"
	"time"

	"github.com/tare-dev/tare"
)

// SLO is a service-level objective: every objective must hold.
type SLO []Objective

// Objective is one limit on one figure, e.g. p95<=2s.
type Objective struct {
	Metric string        // avg, p50, p90, p95, p99, max (latency from the scheduled time); ttft, tpot, ttfb, e2e (per request)
	Limit  time.Duration // inclusive upper bound
	text   string
}

// ParseSLO parses objectives like "p95<=2s" or "p99<=800ms,avg<=300ms".
// Only upper bounds make sense for latency, so "<=" and "<" are accepted
// and both mean at most.
func ParseSLO(s string) (SLO, error) {
	var slo SLO
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		metric, limit, ok := strings.Cut(part, "<=")
		if !ok {
			metric, limit, ok = strings.Cut(part, "<")
		}
		metric = strings.ToLower(strings.TrimSpace(metric))
		if !ok || metric == "" {
			return nil, tare.Errorf(tare.EINVALID, "SLO objective must look like p95<=2s or avg<=300ms; got %q", part)
		}
		if _, known := sloMetrics[metric]; !known {
			return nil, tare.Errorf(tare.EINVALID, "SLO objective %q: unknown figure %q; use one of avg, p50, p90, p95, p99, max, ttft, tpot, ttfb, e2e", part, metric)
		}
		d, err := time.ParseDuration(strings.TrimSpace(limit))
		if err != nil || d <= 0 {
			return nil, tare.Errorf(tare.EINVALID, "SLO objective %q: limit must be a positive duration like 2s or 800ms; got %q", part, strings.TrimSpace(limit))
		}
		slo = append(slo, Objective{Metric: metric, Limit: d, text: metric + "<=" + d.String()})
	}
	if len(slo) == 0 {
		return nil, tare.Errorf(tare.EINVALID, "SLO must name at least one objective, like p95<=2s; got %q", s)
	}
	return slo, nil
}

// SLOOf is the SLO a stored verdict was checked against, from its checks;
// nil when it had none.
func SLOOf(checks []tare.SLOCheck) (SLO, error) {
	if len(checks) == 0 {
		return nil, nil
	}
	objectives := make([]string, len(checks))
	for i, c := range checks {
		objectives[i] = c.Objective
	}
	return ParseSLO(strings.Join(objectives, ","))
}

// String returns the objectives in canonical form.
func (s SLO) String() string {
	parts := make([]string, len(s))
	for i, o := range s {
		parts[i] = o.text
	}
	return strings.Join(parts, ",")
}

// String returns the objective in canonical form.
func (o Objective) String() string { return o.text }

var sloMetrics = map[string]func(*tare.Summary) *float64{
	"avg": func(s *tare.Summary) *float64 { return s.Latency.Avg },
	"p50": func(s *tare.Summary) *float64 { return s.Latency.P50 },
	"p90": func(s *tare.Summary) *float64 { return s.Latency.P90 },
	"p95": func(s *tare.Summary) *float64 { return s.Latency.P95 },
	"p99": func(s *tare.Summary) *float64 { return s.Latency.P99 },
	"max": func(s *tare.Summary) *float64 { return s.Latency.Max },
	"ttft": func(s *tare.Summary) *float64 {
		if s.Model == nil {
			return nil
		}
		return s.Model.TTFT.P95
	},
	"tpot": func(s *tare.Summary) *float64 {
		if s.Model == nil {
			return nil
		}
		return s.Model.TPOT.P95
	},
	"ttfb": func(s *tare.Summary) *float64 {
		if s.TTFB == nil {
			return nil
		}
		return s.TTFB.P95
	},
	"e2e": func(s *tare.Summary) *float64 { return s.Latency.P95 },
}

// perRequest are the figures an objective can hold each request to; the
// run-level check of such an objective is against the figure's p95.
var perRequest = map[string]func(*tare.Result) time.Duration{
	"ttft": firstAnswer, // the first token
	"tpot": (*tare.Result).TPOT,
	"ttfb": firstAnswer, // the first byte
	"e2e":  (*tare.Result).Latency,
}

// firstAnswer is the time to a request's first token or byte from the
// start of the call; a request without one never answered in time.
func firstAnswer(r *tare.Result) time.Duration {
	if r.FirstByte.IsZero() {
		return time.Duration(1<<63 - 1)
	}
	return r.TTFT()
}

// ForTarget checks that every objective of s is about a figure the target
// has: a plain HTTP target (http true) answers with bytes, not tokens, so
// ttft and tpot are not its figures and its first answer is ttfb; a model
// endpoint or a queue of model calls answers with tokens, so ttfb is not
// theirs. The error, EINVALID, names the objective and the one that fits.
func (s SLO) ForTarget(http bool) error {
	for _, o := range s {
		limit := o.Limit.String()
		switch {
		case http && o.Metric == "ttft":
			return tare.Errorf(tare.EINVALID, "SLO objective %q: a plain HTTP target sends no tokens, so it has no time to first token; its first answer is the first byte: ttfb<=%s", o.text, limit)
		case http && o.Metric == "tpot":
			return tare.Errorf(tare.EINVALID, "SLO objective %q: a plain HTTP target sends no tokens, so it has no time per output token; hold the whole response to e2e<=… or p95<=…", o.text)
		case !http && o.Metric == "ttfb":
			return tare.Errorf(tare.EINVALID, "SLO objective %q: ttfb is a plain HTTP target's time to first byte; a model's first answer is its first token: ttft<=%s", o.text, limit)
		}
	}
	return nil
}

// PerRequest returns a test of one finished request against the
// per-request objectives (ttft, tpot, ttfb, e2e), and their canonical text; nil
// and "" when the SLO has none. A request that meets all of them counts
// toward goodput.
func (s SLO) PerRequest() (func(*tare.Result) bool, string) {
	var objs SLO
	for _, o := range s {
		if _, ok := perRequest[o.Metric]; ok {
			objs = append(objs, o)
		}
	}
	if len(objs) == 0 {
		return nil, ""
	}
	return func(r *tare.Result) bool {
		for _, o := range objs {
			if perRequest[o.Metric](r) > o.Limit {
				return false
			}
		}
		return true
	}, objs.String()
}

// Check tests every objective against a run. A figure that was not
// measured does not meet its objective, and neither does any when no
// request succeeded: fast refusals would meet a latency objective that
// is about the requests served.
func (s SLO) Check(sum *tare.Summary) []tare.SLOCheck {
	var out []tare.SLOCheck
	served := sum.Requests.OK > 0 || sum.Requests.Errors == 0
	for _, o := range s {
		v := sloMetrics[o.Metric](sum)
		if !served {
			v = nil
		}
		limit := ms(o.Limit)
		out = append(out, tare.SLOCheck{Objective: o.text, Value: v, LimitMS: limit, Met: v != nil && *v <= limit})
	}
	return out
}

// Met reports whether every objective was met; true when there were none.
func Met(checks []tare.SLOCheck) bool {
	for _, c := range checks {
		if !c.Met {
			return false
		}
	}
	return true
}

func describe(c tare.SLOCheck) string {
	if c.Value == nil {
		return fmt.Sprintf("%s: not measured", c.Objective)
	}
	return fmt.Sprintf("%s: %.0f ms", c.Objective, *c.Value)
}
