package session

import (
	"context"
	"strings"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/stats"
)

// Resolve returns the id of the one stored run whose id starts with
// idOrPrefix: the whole id of a sharded run's shards (they are merged when
// read), or of a run, or a unique prefix of one. No match is an
// ENOTFOUND error; a prefix of several runs is EINVALID.
func Resolve(ctx context.Context, st tare.Store, idOrPrefix string) (string, error) {
	prefix := idOrPrefix
	if prefix == "" {
		return "", tare.Errorf(tare.EINVALID, "give a run id (tare runs list shows them)")
	}
	if rows, err := Shards(ctx, st, prefix); err != nil || len(rows) > 0 {
		return prefix, err // a sharded run: its shards are merged when read
	}
	runs, err := st.FindRuns(ctx, tare.RunFilter{})
	if err != nil {
		return "", err
	}
	var match []string
	for _, r := range runs {
		if r.ID == prefix {
			return r.ID, nil
		}
		if strings.HasPrefix(r.ID, prefix) {
			match = append(match, r.ID)
		}
	}
	switch len(match) {
	case 0:
		return "", tare.Errorf(tare.ENOTFOUND, "no stored run %q (tare runs list shows them)", prefix)
	case 1:
		return match[0], nil
	}
	return "", tare.Errorf(tare.EINVALID, "run id %q is ambiguous: %d runs start with it; give more of it", prefix, len(match))
}

// Load returns the stored run idOrPrefix names (see Resolve): its summary
// and ticks, merged from its shards when it was sharded. Without ticks, a
// summary still prints (no sparklines), so a failure to read them is not
// an error here.
func Load(ctx context.Context, st tare.Store, idOrPrefix string) (tare.Summary, []tare.Tick, error) {
	id, err := Resolve(ctx, st, idOrPrefix)
	if err != nil {
		return tare.Summary{}, nil, err
	}
	s, ticks, _, err := loadStored(ctx, st, id, false)
	return s, ticks, err
}

// LoadRun returns the stored run whose whole id is id, as Load does, except
// that a failure to read its ticks is an error. The ticks are as stored:
// nil when the run has none.
func LoadRun(ctx context.Context, st tare.Store, id string) (tare.Summary, []tare.Tick, error) {
	s, ticks, _, err := loadStored(ctx, st, id, true)
	return s, ticks, err
}

// LoadInput is the stored run whose whole id is id as one side of a
// comparison, with the latencies of its raw records for the test on
// requests. A stored run has a timeline even when it recorded no tick
// (its ticks are then empty, not nil), so it is tested as one.
func LoadInput(ctx context.Context, st tare.Store, id string) (stats.CompareInput, error) {
	s, ticks, merged, err := loadStored(ctx, st, id, true)
	if err != nil {
		return stats.CompareInput{}, err
	}
	if ticks == nil && !merged {
		ticks = []tare.Tick{}
	}
	lat := stats.NewLatencies(s.Requests.Total)
	if err := StreamResults(ctx, st, id, lat.Add); err != nil {
		return stats.CompareInput{}, err
	}
	return stats.CompareInput{Summary: s, Ticks: ticks, Latencies: lat.Values(), Source: "store"}, nil
}

// load reads run id, merged from its shards when it was sharded (merged
// says so); strict says whether a failure to read the ticks of an
// unsharded run is an error.
func loadStored(ctx context.Context, st tare.Store, id string, strict bool) (s tare.Summary, ticks []tare.Tick, merged bool, err error) {
	rows, err := Shards(ctx, st, id)
	if err != nil {
		return s, nil, false, err
	}
	if len(rows) > 0 {
		s, ticks, err = merge(ctx, st, id, rows)
		return s, ticks, true, err
	}
	if s, err = st.FindSummary(ctx, id); err != nil {
		return s, nil, false, err
	}
	ticks, err = st.FindTicks(ctx, id)
	if err != nil && strict {
		return tare.Summary{}, nil, false, err
	}
	return s, ticks, false, nil
}

// StreamResults calls fn for each raw record of the stored run whose whole
// id is id: of every shard in shard order when it was sharded, each as its
// shard stamped it.
func StreamResults(ctx context.Context, st tare.Store, id string, fn func(*tare.Result) error) error {
	rows, err := Shards(ctx, st, id)
	if err != nil {
		return err
	}
	if len(rows) == 0 {
		return st.StreamResults(ctx, id, fn)
	}
	for _, r := range rows {
		if err := st.StreamResults(ctx, r.ID, fn); err != nil {
			return err
		}
	}
	return nil
}

// FindAB returns the stored A/B run idOrPrefix names, by its id or a
// unique prefix of it; found is false when no A/B run matches, so that
// the caller may look for a run of that id instead.
func FindAB(ctx context.Context, st tare.ABStore, idOrPrefix string) (ab tare.AB, found bool, err error) {
	if idOrPrefix == "" {
		return tare.AB{}, false, nil
	}
	abs, err := st.FindABs(ctx, tare.RunFilter{})
	if err != nil {
		return tare.AB{}, false, err
	}
	var match []tare.AB
	for _, ab := range abs {
		if ab.ID == idOrPrefix {
			return ab, true, nil
		}
		if strings.HasPrefix(ab.ID, idOrPrefix) {
			match = append(match, ab)
		}
	}
	switch len(match) {
	case 0:
		return tare.AB{}, false, nil
	case 1:
		return match[0], true, nil
	}
	return tare.AB{}, false, tare.Errorf(tare.EINVALID, "run id %q is ambiguous: %d A/B runs start with it; give more of it", idOrPrefix, len(match))
}
