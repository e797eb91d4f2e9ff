package main

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/judge"
	"github.com/tare-dev/tare/report"
	"github.com/tare-dev/tare/stats"
)

// recordsFile is a file of raw JSONL records (tare runs export) read by
// command what ("import", "report").
type recordsFile struct {
	path, what string
}

// each streams the file's records to fn.
func (f recordsFile) each(fn func(*tare.Result) error) error {
	file, err := os.Open(f.path)
	if err != nil {
		return tare.Errorf(tare.EINVALID, "%s %s: %w", f.what, f.path, err)
	}
	defer file.Close()
	err = report.ReadRecords(bufio.NewReaderSize(file, 1<<20), fn)
	if errors.Is(err, report.ErrRecord) {
		return tare.Errorf(tare.EINVALID, "%s %s: neither a tare.summary/v1 JSON (tare run --json) nor raw JSONL records (tare runs export): %w", f.what, f.path, err)
	}
	return err
}

// summarise summarises and judges the records in two streaming passes,
// so memory stays flat: the first finds the run's span; then begin is
// called with it, and the second pass feeds the recorder and calls each
// (when not nil) for every record. The host was not sampled where the
// records came from, so the host figures are n/a.
func (f recordsFile) summarise(begin func(start, end time.Time) error, each func(*tare.Result) error) (tare.Summary, []tare.Tick, error) {
	var (
		n                int
		start, last, end time.Time
	)
	err := f.each(func(r *tare.Result) error {
		if n == 0 || r.Scheduled.Before(start) {
			start = r.Scheduled
		}
		last, end = maxTime(last, r.Scheduled), maxTime(end, maxTime(r.Done, r.Scheduled))
		n++
		return nil
	})
	if err != nil {
		return tare.Summary{}, nil, err
	}
	if n == 0 {
		return tare.Summary{}, nil, tare.Errorf(tare.EINVALID, "%s %s: no records in it", f.what, f.path)
	}
	if begin != nil {
		if err := begin(start, end); err != nil {
			return tare.Summary{}, nil, err
		}
	}
	// Records come in arrival order, not in order of completion: a grace
	// over the whole run keeps every tick open until the end.
	rec, err := stats.NewRecorder(stats.Config{Start: start, Grace: end.Sub(start) + time.Second})
	if err != nil {
		return tare.Summary{}, nil, err
	}
	err = f.each(func(r *tare.Result) error {
		rec.AddResult(r)
		if each != nil {
			return each(r)
		}
		return nil
	})
	if err != nil {
		return tare.Summary{}, nil, err
	}
	// n arrivals spread from the first to the last: the arrival window is
	// one mean gap longer than that, as for a live run.
	span := last.Sub(start)
	if n > 1 {
		span += span / time.Duration(n-1)
	}
	s := rec.Summary(end, span)
	s.Schema = tare.SummarySchema
	s.Run = tare.Run{Label: filepath.Base(f.path), Target: "records from " + filepath.Base(f.path), StartedAt: start, EndedAt: end, Status: tare.StatusComplete}
	ticks := rec.Ticks()
	th := judge.DefaultThresholds()
	s.Verdict = judge.Judge(&s, ticks, th, nil)
	s.Thresholds = th.Map()
	return s, ticks, nil
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
