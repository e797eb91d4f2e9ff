package session

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/peer"
	"github.com/tare-dev/tare/settings"
	"github.com/tare-dev/tare/stats"
)

// resultsGrace keeps every tick of a window open until its end
// (stats.Config.Grace), for results read after the last host sample.
const resultsGrace = 1000 * time.Hour

// readResults adds the results of spec's file to rec, and returns the span
// of their arrivals and the format's warnings. start is the instant the
// tool was started (hey's offsets count from it).
func readResults(spec peer.Spec, start time.Time, rec *stats.Recorder) (time.Duration, []string, error) {
	return eachResult(spec, start, rec.AddResult)
}

// eachResult calls fn with each result of spec's file, as readResults
// reads them; fn must not keep the result.
func eachResult(spec peer.Spec, start time.Time, fn func(*tare.Result)) (time.Duration, []string, error) {
	f, err := os.Open(spec.Path)
	if err != nil {
		return 0, nil, settings.Errorf("results", ": cannot read the %s results: %w (did the command write them to %q?)", spec.Format.Name, errors.Unwrap(err), spec.Path)
	}
	defer f.Close()
	r, err := peer.NewReader(f, spec.Format, peer.Options{Start: start})
	if err != nil {
		return 0, nil, err
	}
	var first, last time.Time
	for {
		var res tare.Result
		err := r.Read(&res)
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, nil, &tare.Error{Code: tare.EINVALID, Message: fmt.Sprintf("--results %s: %v", spec.Path, err), Err: err}
		}
		if first.IsZero() || res.Scheduled.Before(first) {
			first = res.Scheduled
		}
		if res.Scheduled.After(last) {
			last = res.Scheduled
		}
		// The tool stamped one instant per request, which the reader gives
		// as both the schedule and the send: its send lag and a service
		// time apart from latency are not measured (null), not 0 and the
		// latency again.
		res.Sent = time.Time{}
		fn(&res)
	}
	ws := r.Warnings()
	if r.Count() > 0 {
		ws = append(ws, fmt.Sprintf("send lag and service time are not measured for the %s results: the tool stamps one instant per request, so the latency from it is the only time there is", cmp.Or(spec.Format.Tool, spec.Format.Name)))
	}
	if r.Count() == 0 {
		ws = append(ws, fmt.Sprintf("%s holds no results: the window is judged on the host alone", spec.Path))
	}
	return last.Sub(first), ws, nil
}
