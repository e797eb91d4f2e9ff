package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tare-dev/tare"
)

var (
	_ tare.ABStore = (*SQLite)(nil)
	_ tare.ABStore = (*Postgres)(nil)
)

// SaveAB stores a finished A/B run. Its variants' targets are redacted
// again, in case the caller missed a secret; its trials are runs of their
// own, stored as they ran.
func (c *core) SaveAB(ctx context.Context, ab tare.AB) error {
	if ab.ID == "" {
		return tare.Errorf(tare.EINVALID, "save A/B run: it has no id (make one with store.NewRunID)")
	}
	ab.A.Target, ab.B.Target = tare.RedactText(ab.A.Target), tare.RedactText(ab.B.Target)
	doc, err := json.Marshal(ab)
	if err != nil {
		return fmt.Errorf("save A/B run %q: %w", ab.ID, err)
	}
	_, err = c.b.exec(ctx, `INSERT INTO ab_runs (id, label, target_a, target_b, started_at, ab) VALUES (?, ?, ?, ?, ?, ?)`,
		ab.ID, ab.Label, ab.A.Target, ab.B.Target, ab.StartedAt.UnixNano(), string(doc))
	switch {
	case c.b.isUnique(err):
		return tare.Errorf(tare.EINVALID, "save A/B run: id %q already exists", ab.ID)
	case err != nil:
		return fmt.Errorf("save A/B run %q: %w", ab.ID, err)
	}
	return nil
}

// FindAB returns a stored A/B run; an unknown id is ENOTFOUND.
func (c *core) FindAB(ctx context.Context, id string) (tare.AB, error) {
	abs, err := c.FindABs(ctx, tare.RunFilter{ID: id})
	switch {
	case err != nil:
		return tare.AB{}, err
	case len(abs) == 0:
		return tare.AB{}, tare.Errorf(tare.ENOTFOUND, "A/B run %q not found", id)
	}
	return abs[0], nil
}

// FindABs lists the A/B runs the filter matches, newest first. A filter
// by window or protocol matches none: an A/B run is neither.
func (c *core) FindABs(ctx context.Context, f tare.RunFilter) ([]tare.AB, error) {
	if f.Limit < 0 {
		return nil, tare.Errorf(tare.EINVALID, "find A/B runs: limit %d is negative; use 0 for no limit", f.Limit)
	}
	if f.Window != "" || f.Protocol != "" {
		return nil, nil
	}
	var where []string
	var args []any
	if f.ID != "" {
		where, args = append(where, "id = ?"), append(args, f.ID)
	}
	if f.Label != "" {
		where, args = append(where, "label = ?"), append(args, f.Label)
	}
	if f.Target != "" {
		where = append(where, "("+c.b.contains("target_a")+" OR "+c.b.contains("target_b")+")")
		args = append(args, f.Target, f.Target)
	}
	if !f.Since.IsZero() {
		where, args = append(where, "started_at >= ?"), append(args, f.Since.UnixNano())
	}
	q := "SELECT id, ab FROM ab_runs"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY started_at DESC, id DESC"
	if f.Limit > 0 {
		q, args = q+" LIMIT ?", append(args, f.Limit)
	}
	rs, err := c.b.query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("find A/B runs: %w", err)
	}
	defer rs.Close()
	var out []tare.AB
	for rs.Next() {
		var id, doc string
		if err := rs.Scan(&id, &doc); err != nil {
			return nil, fmt.Errorf("find A/B runs: %w", err)
		}
		var ab tare.AB
		if err := json.Unmarshal([]byte(doc), &ab); err != nil {
			return nil, fmt.Errorf("find A/B run %q: %w: %q: %w", id, ErrDecode, clip(doc), err)
		}
		out = append(out, ab)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("find A/B runs: %w", err)
	}
	return out, nil
}

// DeleteAB removes a stored A/B run, not its trials; an unknown id is
// ENOTFOUND.
func (c *core) DeleteAB(ctx context.Context, id string) error {
	n, err := c.b.exec(ctx, `DELETE FROM ab_runs WHERE id = ?`, id)
	switch {
	case err != nil:
		return fmt.Errorf("delete A/B run %q: %w", id, err)
	case n == 0:
		return tare.Errorf(tare.ENOTFOUND, "A/B run %q not found", id)
	}
	return nil
}
