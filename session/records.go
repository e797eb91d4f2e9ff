package session

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/httptarget"
	"github.com/tare-dev/tare/judge"
	"github.com/tare-dev/tare/records"
	"github.com/tare-dev/tare/stats"
	"github.com/tare-dev/tare/store"
)

// ReadSummary reads a file of one tare.summary/v1 object (what tare run
// --json prints). It decodes from the file as a stream: a large file of
// raw records is refused after its first line, not read whole. A missing
// file is an ENOTFOUND error, any other failure EINVALID.
func ReadSummary(path string) (tare.Summary, error) {
	var s tare.Summary
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return s, tare.Errorf(tare.ENOTFOUND, "no summary file %q", path)
		}
		return s, tare.Errorf(tare.EINVALID, "read %s: %w", path, err)
	}
	defer f.Close()
	dec := json.NewDecoder(f)
	if err := dec.Decode(&s); err != nil {
		// The decoder's message names the field and the type it wanted.
		return s, tare.Errorf(tare.EINVALID, "%s is not a %s JSON (what tare run --json prints): %w", path, tare.SummarySchema, err)
	}
	if s.Schema != tare.SummarySchema {
		return s, tare.Errorf(tare.EINVALID, "%s is not a %s JSON (what tare run --json prints): schema %q", path, tare.SummarySchema, s.Schema)
	}
	if dec.More() {
		return s, tare.Errorf(tare.EINVALID, "%s is not a %s JSON (what tare run --json prints): more than one JSON value", path, tare.SummarySchema)
	}
	return s, nil
}

// Records is a file of raw JSONL records (tare runs export) read by the
// command Command ("import", "report"), which its errors name.
type Records struct {
	Path, Command string
}

// Each streams the file's records to fn.
func (f Records) Each(fn func(*tare.Result) error) error {
	return f.each(func(r *tare.Result, _ string) error { return fn(r) })
}

// each streams the file's records to fn, with the name of the request of a
// targets file each took ("" when the record names none).
func (f Records) each(fn func(r *tare.Result, target string) error) error {
	file, err := os.Open(f.Path)
	if err != nil {
		return tare.Errorf(tare.EINVALID, "%s %s: %w", f.Command, f.Path, err)
	}
	defer file.Close()
	err = records.ReadNamed(bufio.NewReaderSize(file, 1<<20), fn)
	if errors.Is(err, records.ErrMalformed) {
		return tare.Errorf(tare.EINVALID, "%s %s: neither a tare.summary/v1 JSON (tare run --json) nor raw JSONL records (tare runs export): %w", f.Command, f.Path, err)
	}
	return err
}

// Summarise summarises and judges the records in two streaming passes,
// so memory stays flat: the first finds the run's span; then begin is
// called with it (when not nil), and the second pass feeds the recorder
// and calls each (when not nil) for every record. The host was not
// sampled where the records came from, so the host figures are n/a.
func (f Records) Summarise(begin func(start, end time.Time) error, each func(*tare.Result) error) (tare.Summary, []tare.Tick, error) {
	var (
		seen    arrivalsSeen
		end     time.Time
		targets []string // the names of the requests of a targets file, by index
	)
	err := f.each(func(r *tare.Result, target string) error {
		seen.add(r.Scheduled)
		end = maxTime(end, maxTime(r.Done, r.Scheduled))
		if i := r.TargetIndex; target != "" && i >= 0 && i < httptarget.MaxTargets {
			for len(targets) <= i {
				targets = append(targets, "")
			}
			targets[i] = target
		}
		return nil
	})
	if err != nil {
		return tare.Summary{}, nil, err
	}
	if seen.n == 0 {
		return tare.Summary{}, nil, tare.Errorf(tare.EINVALID, "%s %s: no records in it", f.Command, f.Path)
	}
	start := seen.first
	if begin != nil {
		if err := begin(start, end); err != nil {
			return tare.Summary{}, nil, err
		}
	}
	// Records come in arrival order, not in order of completion: a grace
	// over the whole run keeps every tick open until the end.
	for i, name := range targets {
		if name == "" { // no record of it named it (none took it)
			targets[i] = fmt.Sprintf("target %d", i)
		}
	}
	rec, err := stats.NewRecorder(stats.Config{Start: start, Grace: end.Sub(start) + time.Second, Targets: targets})
	if err != nil {
		return tare.Summary{}, nil, err
	}
	err = f.Each(func(r *tare.Result) error {
		rec.AddResult(r)
		if each != nil {
			return each(r)
		}
		return nil
	})
	if err != nil {
		return tare.Summary{}, nil, err
	}
	s, ticks := finish(rec, closing{
		run:        tare.Run{Label: filepath.Base(f.Path), Target: "records from " + filepath.Base(f.Path), StartedAt: start, EndedAt: end, Status: tare.StatusComplete},
		span:       seen.span(),
		thresholds: judge.DefaultThresholds(),
	})
	return s, ticks, nil
}

// ImportSummary stores a run measured elsewhere from its summary, kept as
// it is under a new id and, when label is not empty, that label; a run
// that never finished is stored as interrupted. It returns the new id.
func ImportSummary(ctx context.Context, st tare.Store, s tare.Summary, label string) (string, error) {
	s.Run.ID = store.NewRunID()
	if label != "" {
		s.Run.Label = label
	}
	if s.Run.Status == "" || s.Run.Status == tare.StatusRunning {
		s.Run.Status = tare.StatusInterrupted
	}
	status := s.Run.Status
	run := s.Run
	run.Status = tare.StatusRunning
	if err := st.CreateRun(ctx, run, s.Env); err != nil {
		return "", err
	}
	s.Run.Status = status
	return s.Run.ID, st.FinishRun(ctx, s)
}

// ImportRecords stores the raw JSONL records of the file at path as a new
// run, labelled label (default: the file's name) and marked as stored by
// tare version, summarised and judged again here (see Records.Summarise).
// It returns the new id.
func ImportRecords(ctx context.Context, st tare.Store, path, label, version string) (string, error) {
	run := tare.Run{ID: store.NewRunID(), Label: cmp.Or(label, filepath.Base(path)), Target: "imported from " + filepath.Base(path),
		Status: tare.StatusRunning, Version: version}
	batch := make([]tare.Result, 0, 1000)
	flush := func() error {
		err := st.AppendResults(ctx, run.ID, batch)
		batch = batch[:0]
		return err
	}
	begin := func(start, end time.Time) error {
		run.StartedAt, run.EndedAt = start, end
		return st.CreateRun(ctx, run, tare.Env{})
	}
	s, ticks, err := Records{path, "import"}.Summarise(begin, func(r *tare.Result) error {
		if batch = append(batch, *r); len(batch) == cap(batch) {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err == nil {
		err = st.AppendTicks(ctx, run.ID, ticks)
	}
	if err != nil {
		return "", err
	}
	s.Run.ID, s.Run.Label, s.Run.Target, s.Run.Version = run.ID, run.Label, run.Target, version
	return run.ID, st.FinishRun(ctx, s)
}

// ReadBack summarises and judges stored run id again from what the store
// kept of it: its raw records and the host samples of its ticks, whose
// probe waits give each request's blame (the summary's Tail), judged with
// the run's own thresholds and SLO. What only the live run measured (the
// generator's own figures, the system under test's graph) is not kept:
// those figures are n/a.
func ReadBack(ctx context.Context, st tare.Store, id string) (tare.Summary, []tare.Tick, error) {
	stored, err := st.FindSummary(ctx, id)
	if err != nil {
		return tare.Summary{}, nil, err
	}
	kept, err := st.FindTicks(ctx, id)
	if err != nil {
		return tare.Summary{}, nil, err
	}
	th := judge.ThresholdsOf(stored.Thresholds)
	slo, err := judge.SLOOf(stored.Verdict.SLO)
	if err != nil {
		return tare.Summary{}, nil, fmt.Errorf("the SLO of run %s: %w", id, err)
	}
	start, end := stored.Run.StartedAt, stored.Run.EndedAt
	cfg := stats.Config{Start: start, Threshold: th.Steal, Grace: end.Sub(start) + time.Second}
	if len(kept) > 0 {
		cfg.Start, cfg.Tick = kept[0].Start, kept[0].End.Sub(kept[0].Start)
	}
	for _, t := range stored.Targets {
		cfg.Targets = append(cfg.Targets, t.Name)
	}
	rec, err := stats.NewRecorder(cfg)
	if err != nil {
		return tare.Summary{}, nil, fmt.Errorf("run %s: %w", id, err)
	}
	for _, t := range kept {
		if t.Host != nil {
			rec.AddHost(*t.Host)
		}
	}
	var seen arrivalsSeen
	err = st.StreamResults(ctx, id, func(r *tare.Result) error {
		seen.add(r.Scheduled)
		rec.AddResult(r)
		return nil
	})
	if err != nil {
		return tare.Summary{}, nil, err
	}
	var blameWhy string
	if stored.Blame != nil {
		blameWhy = stored.Blame.Why
	}
	s, ticks := finish(rec, closing{run: stored.Run, span: seen.span(), env: stored.Env, blameWhy: blameWhy, thresholds: th, slo: slo})
	return s, ticks, nil
}
