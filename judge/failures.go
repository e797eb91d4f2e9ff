package judge

import (
	"fmt"
	"strings"

	"github.com/tare-dev/tare"
)

// SignalFailures is the signal of a run whose requests mostly failed.
const SignalFailures = "failures"

// FailedPct is the share of the sent requests (%) whose failing fires the
// failures signal. Above half, most of the samples behind every latency
// percentile are failures (a refusal, an error status, a timeout), so the
// figures describe how the target fails more than how it serves; below it,
// failures are a tail the error counts already show.
const FailedPct float64 = 50

// failures says how many of the requests sent failed, and of what. When
// none succeeded, the figures time failures only: they cannot describe
// the code, so the signal makes the run suspect ("tare cannot tell"),
// never polluted, which means interference from outside the test, and
// a wrong port is not that. When failures dominate but some requests
// succeeded, the figures are still the service's own (it failed), so the
// signal is a finding beside the level, as saturation is. Dropped
// arrivals never reached the target: they are not counted here.
func failures(s *tare.Summary) tare.Signal {
	sig := tare.Signal{Name: SignalFailures, Threshold: FailedPct}
	q := s.Requests
	sent := q.OK + q.Errors
	if sent == 0 {
		sig.Detail = "failures were not counted (no request was sent)"
		return sig
	}
	pct := 100 * float64(q.Errors) / float64(sent)
	sig.Value = tare.Float(pct)
	switch {
	case q.OK == 0:
		sig.Fired = true
		sig.Detail = fmt.Sprintf("no request succeeded: %d of %d failed (%s): %s; these figures describe no service",
			q.Errors, sent, kinds(s.ErrorKinds), answered(s))
	case pct > FailedPct:
		sig.Fired, sig.Finding = true, true
		sig.Detail = fmt.Sprintf("%d of %d requests failed (%s), more than %g%%: latency figures are mostly of failures",
			q.Errors, sent, kinds(s.ErrorKinds), FailedPct)
	case q.Errors > 0:
		sig.Detail = fmt.Sprintf("%d of %d requests failed (%s; threshold %g%%)", q.Errors, sent, kinds(s.ErrorKinds), FailedPct)
	default:
		sig.Detail = fmt.Sprintf("all %d requests succeeded", sent)
	}
	return sig
}

// NoService reports whether v's failures signal says no request
// succeeded.
func NoService(v tare.Verdict) bool {
	for _, sig := range v.Signals {
		if sig.Name == SignalFailures && sig.Fired && !sig.Finding {
			return true
		}
	}
	return false
}

// kinds names the most common error kinds with their counts: "152 http
// 503, 3 timeout".
func kinds(m map[string]int) string {
	const named = 3
	keys := tare.ByCount(m)
	var parts []string
	rest := 0
	for i, k := range keys {
		if i < named {
			parts = append(parts, fmt.Sprintf("%d %s", m[k], k))
		} else {
			rest += m[k]
		}
	}
	if rest > 0 {
		parts = append(parts, fmt.Sprintf("%d more of %d other kinds", rest, len(keys)-named))
	}
	if len(parts) == 0 {
		return "of no recorded kind"
	}
	return strings.Join(parts, ", ")
}

// noAnswer are the kinds of a request the target never answered.
var noAnswer = map[string]bool{
	tare.KindRefused: true, tare.KindTimeout: true, tare.KindDNS: true,
	tare.KindUnreachable: true, tare.KindConnect: true,
}

// answered says what the target did with the requests, none of which
// succeeded: never answered (nothing listening, no route, no answer in
// time), answered with error statuses, or served none of them otherwise.
// A queue always took the jobs: its failures are its workers' (their
// model refused, say), so they are named instead.
func answered(s *tare.Summary) string {
	target := "the target"
	if s.Run.Target != "" {
		target = fmt.Sprintf("the target (%s)", s.Run.Target)
	}
	silent, statuses := len(s.ErrorKinds) > 0, len(s.ErrorKinds) > 0
	for k := range s.ErrorKinds {
		silent = silent && noAnswer[k]
		statuses = statuses && tare.IsHTTPKind(k)
	}
	switch {
	case s.Queue != nil:
		return "the workers behind " + target + " succeeded at no job"
	case silent:
		return target + " never answered"
	case statuses:
		return target + " answered every request with an error status"
	}
	return target + " served none of them"
}
