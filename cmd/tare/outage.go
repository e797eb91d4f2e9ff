package main

import (
	"fmt"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/queue"
)

// targetWarnings are what a target saw besides its results that the
// verdict should say: for a queue, how many jobs an outage of the queue
// touched. A job the outage touched is already counted as an error of kind
// "queue unavailable"; the warning says why the error count is what it is.
func targetWarnings(t tare.Target) []string {
	q, ok := t.(*queue.Target)
	if !ok {
		return nil
	}
	return queueWarnings(q.Stats())
}

// queueWarnings words a queue target's counters as warnings.
func queueWarnings(st queue.TargetStats) []string {
	if st.Unavailable == 0 && st.ReadErrors == 0 && st.Lost == 0 {
		return nil
	}
	w := fmt.Sprintf("%d %s touched by a queue outage (%s): counted as errors", st.Unavailable, plural(int(st.Unavailable), "job was", "jobs were"), queue.KindUnavailable)
	var details []string
	if st.Lost > 0 {
		details = append(details, fmt.Sprintf("the queue's state was lost %d %s (a restart without persistence), failing the jobs it held", st.Lost, plural(int(st.Lost), "time", "times")))
	}
	if st.ReadErrors > 0 {
		details = append(details, fmt.Sprintf("%d failed %s of results, retried with backoff", st.ReadErrors, plural(int(st.ReadErrors), "read", "reads")))
	}
	for i, d := range details {
		if i == 0 {
			w += "; "
		} else {
			w += ", "
		}
		w += d
	}
	return []string{w}
}
