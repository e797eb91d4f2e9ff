package session

import (
	"context"
	"math"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/stats"
	"github.com/tare-dev/tare/store"
)

// sink streams one run to the store: raw records as they finish, ticks as
// their figures become final, the summary at the end. With no store, or
// after the store failed, it only remembers why.
type sink struct {
	ctx     context.Context
	st      tare.Store
	w       *store.Writer
	runID   string
	written int // ticks handed to the writer
	err     error
}

func newSink(ctx context.Context, st tare.Store, run tare.Run, env tare.Env) *sink {
	k := &sink{ctx: context.WithoutCancel(ctx), st: st, runID: run.ID}
	if st == nil {
		return k
	}
	if err := st.CreateRun(k.ctx, run, env); err != nil {
		k.err = storeError("create run "+run.ID, err)
		return k
	}
	k.w = store.NewWriter(st, run.ID, store.WriterConfig{})
	return k
}

func (k *sink) add(res *tare.Result) {
	if k.w != nil {
		k.w.Add(res)
	}
}

// ticks hands the writer the ticks whose figures are final, or all of them
// at the end of the run.
func (k *sink) ticks(rec *stats.Recorder, all bool) {
	if k.w == nil {
		return
	}
	upto := rec.Closed()
	if all {
		upto = math.MaxInt
	}
	ticks := rec.TicksBetween(k.written, upto)
	for _, t := range ticks {
		k.w.AddTick(t)
	}
	k.written += len(ticks)
}

// addTicks hands the writer ticks already final, all at once: a window
// measured before it is stored (tare watch).
func (k *sink) addTicks(ticks []tare.Tick) {
	if k.w == nil {
		return
	}
	for _, t := range ticks {
		k.w.AddTick(t)
	}
	k.written += len(ticks)
}

// finish flushes what is buffered and stores the summary. It returns the
// first thing that went wrong with the store, if anything did.
func (k *sink) finish(s *tare.Summary) error {
	if k.w != nil {
		ctx, cancel := context.WithTimeout(k.ctx, 30*time.Second)
		defer cancel()
		if err := k.w.Close(ctx); err != nil && k.err == nil {
			k.err = storeError("write the records of run "+k.runID, err)
		}
		if k.err == nil {
			if err := k.st.FinishRun(ctx, *s); err != nil {
				k.err = storeError("write the summary of run "+k.runID, err)
			}
		}
	}
	if k.err != nil {
		s.Verdict.Warnings = append(s.Verdict.Warnings, tare.ErrorMessage(k.err))
	}
	return k.err
}

// storeError says what the store failed to do; the measurement itself is
// complete, and the message says so, since it is printed after the summary.
func storeError(what string, err error) error {
	return tare.Errorf(tare.EUNAVAILABLE, "the store failed to %s: %s (the measurement above is complete; the stored run is not)", what, tare.ErrorMessage(err))
}
