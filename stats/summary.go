package stats

import (
	"maps"
	"strconv"
	"time"

	"github.com/tare-dev/tare"
)

// Summary returns the run's figures as of now, leaving Run, Env, Generator,
// Verdict and Thresholds for the caller. end is when the run ended (or now,
// for a live summary) and arrivalSpan the length of the arrival window:
//
//	offered  = arrivals / arrivalSpan
//	achieved = completions (ok + errors) / (end − Start)
//	tokens/s = output tokens / (end − Start)
//
// Each is nil when its denominator is not positive. Summary does not change
// the recorder: requests still waiting for the host samples of their ticks
// are judged on the samples in so far (a tick without one is not clean), and
// may be called again later.
func (r *Recorder) Summary(end time.Time, arrivalSpan time.Duration) tare.Summary {
	s := tare.Summary{
		Schema: tare.SummarySchema,
		Requests: tare.Requests{
			Total:     r.total,
			OK:        r.ok,
			Errors:    r.errs,
			Dropped:   r.dropped,
			Redirects: r.redirects,
		},
		Latency: tare.LatencyMS{
			Avg: r.latency.avgMS(),
			P50: r.latency.ms(50),
			P90: r.latency.ms(90),
			P95: r.latency.ms(95),
			P99: r.latency.ms(99),
			Max: r.latency.maxMS(),
		},
		Service: percentilesMS(&r.service),
		SendLag: tare.LagMS{
			P50: r.sendLag.ms(50),
			P99: r.sendLag.ms(99),
			Max: r.sendLag.maxMS(),
		},
		Host:    r.host.summary(),
		SUT:     r.host.sut(),
		Blame:   r.host.blame.summary(),
		Targets: r.targetSummaries(),
	}
	s.Generator.RunDelayPct = r.host.tareRunDelay.mean()
	if arrivalSpan > 0 {
		s.Rate.Offered = round(float64(r.total)/arrivalSpan.Seconds(), 3)
	}
	wall := end.Sub(r.cfg.Start)
	if wall > 0 {
		s.Rate.Achieved = round(float64(r.ok+r.errs)/wall.Seconds(), 3)
	}
	// A depth sampled makes a queue's figures even when no worker started
	// a job; a model target's depth is its server's queue (its waiting
	// requests), which is in its model figures and each tick, not a queue
	// of jobs.
	if r.queueSeen || r.depthN > 0 && !r.modelSeen {
		q := &tare.QueueSummary{Wait: tare.WaitMS{
			Avg: r.wait.avgMS(),
			P50: r.wait.ms(50),
			P95: r.wait.ms(95),
			P99: r.wait.ms(99),
		}}
		if r.depthN > 0 {
			q.Depth = tare.DepthStats{
				Mean: round(r.depthSum/float64(r.depthN), 2),
				Max:  round(r.depthMax, 2),
			}
		}
		s.Queue = q
	}
	if r.modelSeen {
		m := &tare.ModelSummary{
			TTFT:         percentilesMS(&r.ttft),
			TPOT:         percentilesMS(&r.tpot),
			OutputTokens: r.outputTokens,
		}
		if wall > 0 {
			m.TokensPerS = round(float64(r.outputTokens)/wall.Seconds(), 3)
		}
		if r.inputSource != "" {
			m.InputTokens, m.InputTokenSource = tare.Int(r.inputTokens), r.inputSource
			if wall > 0 {
				m.InputTokensPerS = round(float64(r.inputTokens)/wall.Seconds(), 3)
			}
		}
		m.Classes, m.Conversations = r.classSummaries(), r.conversationSummary()
		m.PromptCount = r.promptCount.summary()
		s.Model = m
	}
	if !r.modelSeen && !r.queueSeen && r.ttft.n > 0 {
		// A plain HTTP target's first answer is its first byte, not a token.
		ttfb := percentilesMS(&r.ttft)
		s.TTFB = &ttfb
	}
	if r.host.n > 0 {
		s.CleanLatency = r.cleanLatency()
	}
	if s.Tail = r.tail(); s.Tail != nil {
		// The code's own figures: the requests no outside wait overlapped,
		// where the probe measured them, rather than those of clean ticks.
		q := s.Tail.Quiet
		s.CleanLatency = &tare.CleanLatency{P50: q.P50, P95: q.P95, P99: q.P99, Requests: s.Tail.Requests - s.Tail.Overlapped, By: tare.CleanByRequests}
	}
	if r.goodput != nil {
		g := &tare.Goodput{SLO: r.goodputSLO, Met: r.good}
		if sent := r.total - r.dropped; sent > 0 {
			g.AttainmentPct = round(100*float64(r.good)/float64(sent), 2)
		}
		if wall > 0 {
			g.TokensPerS = round(float64(r.goodTokens)/wall.Seconds(), 3)
		}
		s.Goodput = g
	}
	if len(r.errorKinds) > 0 {
		s.ErrorKinds = make(map[string]int, len(r.errorKinds))
		for k, n := range r.errorKinds {
			s.ErrorKinds[k] = n
		}
	}
	if len(r.statusCodes) > 0 {
		s.StatusCodes = make(map[string]int, len(r.statusCodes))
		for code, n := range r.statusCodes {
			s.StatusCodes[strconv.Itoa(code)] = n
		}
	}
	if len(r.errorMessages) > 0 {
		s.ErrorMessages = maps.Clone(r.errorMessages)
	}
	if len(r.failedAfterStatus) > 0 {
		s.FailedAfterStatus = make(map[string]int, len(r.failedAfterStatus))
		for k, n := range r.failedAfterStatus {
			s.FailedAfterStatus[strconv.Itoa(k.status)+" "+k.kind] = n
		}
	}
	return s
}

func percentilesMS(d *dist) tare.PercentilesMS {
	return tare.PercentilesMS{
		P50: d.ms(50),
		P95: d.ms(95),
		P99: d.ms(99),
		Max: d.maxMS(),
	}
}

// cleanLatency is the clean distribution with the pending requests that the
// samples in so far already show clean, without resolving them.
func (r *Recorder) cleanLatency() *tare.CleanLatency {
	c := r.clean.clone()
	for _, p := range r.pending {
		if r.cleanSpan(int(p.first), int(p.last)) {
			c.add(p.latency)
		}
	}
	return &tare.CleanLatency{
		P50:      c.ms(50),
		P95:      c.ms(95),
		P99:      c.ms(99),
		Requests: int(c.n),
		By:       tare.CleanByTicks,
	}
}
