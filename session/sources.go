package session

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/judge"
	"github.com/tare-dev/tare/report"
	"github.com/tare-dev/tare/stats"
)

// Sources reads the runs a command's arguments name: summary or records
// files, stored runs, protocols. The store is opened only when an argument
// is not a file: comparing summary files touches no store.
type Sources struct {
	Open func(context.Context) (tare.Store, error)
	st   tare.Store
	// latencies are those of the raw records ReportRuns streamed, by run,
	// for CompareReport's test on requests.
	latencies map[*report.Run]*stats.Latencies
}

func (s *Sources) store(ctx context.Context) (tare.Store, error) {
	if s.st == nil {
		st, err := s.Open(ctx)
		if err != nil {
			return nil, err
		}
		s.st = st
	}
	return s.st, nil
}

// Close closes the store, if it was opened.
func (s *Sources) Close() {
	if s.st != nil {
		s.st.Close()
	}
}

// Compare reads the runs the arguments name (a summary file, a file of raw
// records, a protocol id, a run id or its prefix) and compares them.
func (s *Sources) Compare(ctx context.Context, args []string, rules judge.ProtocolRules) (*tare.Comparison, error) {
	var (
		inputs []stats.CompareInput
		sweeps []tare.SweepCapacity
	)
	for _, arg := range args {
		in, sw, err := s.readArg(ctx, arg)
		if err != nil {
			return nil, err
		}
		inputs, sweeps = append(inputs, in...), append(sweeps, sw...)
	}
	if len(inputs) < 2 {
		return nil, tare.Errorf(tare.EINVALID, "compare needs at least two runs; %s gave %d", strings.Join(args, " "), len(inputs))
	}
	return Compare(inputs, sweeps, rules), nil
}

// readArg reads one argument: a summary file, a protocol id or a run id.
func (src *Sources) readArg(ctx context.Context, arg string) ([]stats.CompareInput, []tare.SweepCapacity, error) {
	if fi, err := os.Stat(arg); err == nil && !fi.IsDir() {
		s, err := ReadSummary(arg)
		if err == nil {
			return []stats.CompareInput{{Summary: s, Source: arg}}, nil, nil
		}
		// Not a summary: raw records, or else what was wrong with it as a
		// summary, the likelier intent.
		in, rerr := recordsInput(arg)
		if rerr != nil {
			return nil, nil, err
		}
		return []stats.CompareInput{in}, nil, nil
	} else if strings.HasSuffix(arg, ".json") {
		return nil, nil, tare.Errorf(tare.ENOTFOUND, "no summary file %q", arg)
	}
	st, err := src.store(ctx)
	if err != nil {
		return nil, nil, err
	}
	runs, err := st.FindRuns(ctx, tare.RunFilter{Protocol: arg})
	if err != nil {
		return nil, nil, err
	}
	if len(runs) > 0 {
		return LoadWindows(ctx, st, runs)
	}
	id, err := Resolve(ctx, st, arg)
	if err != nil {
		if tare.ErrorCode(err) == tare.ENOTFOUND {
			return nil, nil, tare.Errorf(tare.ENOTFOUND, "%q is neither a summary file, a protocol nor a stored run (tare runs list shows them)", arg)
		}
		return nil, nil, err
	}
	in, err := LoadInput(ctx, st, id)
	return []stats.CompareInput{in}, nil, err
}

// recordsInput reads a file of raw JSONL records (tare runs export) as one
// side of a comparison: summarised and judged here, with its timeline and
// its latencies for the test on requests.
func recordsInput(path string) (stats.CompareInput, error) {
	f := Records{Path: path, Command: "compare"}
	s, ticks, err := f.Summarise(nil, nil)
	if err != nil {
		return stats.CompareInput{}, err
	}
	lat := stats.NewLatencies(s.Requests.Total)
	if err := f.Each(lat.Add); err != nil {
		return stats.CompareInput{}, err
	}
	return stats.CompareInput{Summary: s, Ticks: ticks, Latencies: lat.Values(), Source: path}, nil
}

// ReportRuns returns the runs an argument names, for a report: a summary
// or records file, a stored run (or a unique prefix of its id) or the
// windows of a protocol, oldest first.
func (s *Sources) ReportRuns(ctx context.Context, arg string) ([]*report.Run, error) {
	if info, err := os.Stat(arg); err == nil && info.Mode().IsRegular() {
		run, err := s.reportFile(arg)
		if err != nil {
			return nil, err
		}
		return []*report.Run{run}, nil
	}
	if strings.ContainsRune(arg, filepath.Separator) || strings.HasSuffix(arg, ".json") || strings.HasSuffix(arg, ".jsonl") {
		return nil, tare.Errorf(tare.EINVALID, "report %s: no such file", arg)
	}
	st, err := s.store(ctx)
	if err != nil {
		return nil, err
	}
	id, err := Resolve(ctx, st, arg)
	if err == nil {
		run, err := s.reportRun(ctx, st, id)
		if err != nil {
			return nil, err
		}
		return []*report.Run{run}, nil
	}
	if tare.ErrorCode(err) != tare.ENOTFOUND {
		return nil, err
	}
	windows, ferr := st.FindRuns(ctx, tare.RunFilter{Protocol: arg})
	if ferr != nil || len(windows) == 0 {
		return nil, tare.Errorf(tare.ENOTFOUND, "report %s: no stored run or protocol has that id, and there is no file by that name (tare runs list shows the runs)", arg)
	}
	var out []*report.Run
	for _, w := range slices.Backward(windows) { // oldest first: the order they ran in
		run, err := s.reportRun(ctx, st, w.ID)
		if err != nil {
			return nil, err
		}
		out = append(out, run)
	}
	return out, nil
}

// CompareReport compares runs that ReportRuns returned, as tare compare
// judges them, with the latencies of the raw records it streamed.
func (s *Sources) CompareReport(runs []*report.Run, rules judge.ProtocolRules) *tare.Comparison {
	inputs := make([]stats.CompareInput, len(runs))
	for i, r := range runs {
		inputs[i] = stats.CompareInput{Summary: r.Summary, Ticks: r.Ticks, Source: "store"}
		if lat := s.latencies[r]; lat != nil {
			inputs[i].Latencies = lat.Values()
		}
	}
	return Compare(inputs, nil, rules)
}

// streamed is the function that streams a run's raw records into run,
// collecting their latencies for CompareReport.
func (s *Sources) streamed(run *report.Run) func(*tare.Result) error {
	lat := stats.NewLatencies(run.Summary.Requests.Total)
	if s.latencies == nil {
		s.latencies = map[*report.Run]*stats.Latencies{}
	}
	s.latencies[run] = lat
	return func(r *tare.Result) error {
		lat.Add(r)
		return run.AddResult(r)
	}
}

// reportRun reads a stored run: its summary, its ticks and, streamed, its
// raw records.
func (s *Sources) reportRun(ctx context.Context, st tare.Store, id string) (*report.Run, error) {
	sum, ticks, err := LoadRun(ctx, st, id)
	if err != nil {
		return nil, err
	}
	run, err := newReportRun(sum, ticks)
	if err != nil {
		return nil, err
	}
	if err := StreamResults(ctx, st, id, s.streamed(run)); err != nil {
		return nil, err
	}
	return run, nil
}

// reportFile reads a summary JSON file as it is, or raw JSONL records,
// summarised and judged here, then streamed once more into the report.
func (s *Sources) reportFile(path string) (*report.Run, error) {
	if sum, err := ReadSummary(path); err == nil {
		return report.NewRun(sum, nil), nil
	}
	f := Records{Path: path, Command: "report"}
	sum, ticks, err := f.Summarise(nil, nil)
	if err != nil {
		return nil, err
	}
	run, err := newReportRun(sum, ticks)
	if err != nil {
		return nil, err
	}
	if err := f.Each(s.streamed(run)); err != nil {
		return nil, err
	}
	return run, nil
}

// newReportRun prepares a run with a timeline for the report, each of its
// requests to be coloured by what outside interference overlapped it, by
// the recorder's own rule (stats.Overlaps): report draws, stats decides.
func newReportRun(sum tare.Summary, ticks []tare.Tick) (*report.Run, error) {
	run := report.NewRun(sum, ticks)
	measured := func(t tare.Tick) bool {
		return t.Host != nil && t.Host.Blame != nil && t.Host.Blame.Source == tare.BlameMeasured
	}
	// A run recorded before tare kept the probe's waits with its ticks
	// (its summary has no tail) would look as if nothing overlapped.
	if sum.Tail == nil || !slices.ContainsFunc(ticks, measured) {
		return run, nil // no request's exposure is known
	}
	overlaps, err := stats.NewOverlaps(ticks)
	if err != nil {
		return nil, err
	}
	run.Exposure = overlaps.Of
	return run, nil
}
