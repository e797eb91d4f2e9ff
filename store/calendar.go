package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tare-dev/tare"
)

var (
	_ tare.CalendarStore = (*SQLite)(nil)
	_ tare.CalendarStore = (*Postgres)(nil)
)

const calendarColumns = "host, start_ns, end_ns, level, interference, steal, neighbours, busy, " +
	"psi_some, throttled, run_delay, polluted_ticks, ticks, cost_cpu_ms, top_others"

// AddCalendarSample stores one sample of a host's calendar. A sample with
// no host, or that ends before it starts, is EINVALID.
func (c *core) AddCalendarSample(ctx context.Context, s tare.CalendarSample) error {
	switch {
	case s.Host == "":
		return tare.Errorf(tare.EINVALID, "add calendar sample: the sample names no host")
	case s.Start.IsZero() || s.End.Before(s.Start):
		return tare.Errorf(tare.EINVALID, "add calendar sample of host %q: it must start, and end after it starts (%s → %s)",
			s.Host, s.Start.Format(time.RFC3339), s.End.Format(time.RFC3339))
	}
	top := s.TopOthers
	if top == nil {
		top = []tare.ProcessShare{}
	}
	topJSON, err := json.Marshal(top)
	if err != nil {
		return fmt.Errorf("add calendar sample of host %q: encode its busiest processes: %w", s.Host, err)
	}
	_, err = c.b.exec(ctx, "INSERT INTO calendar_samples ("+calendarColumns+") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
		s.Host, s.Start.UnixNano(), s.End.UnixNano(), string(s.Level), nullFloat(s.InterferencePct),
		nullFloat(s.StealPct), nullFloat(s.NeighboursPct), nullFloat(s.BusyPct), nullFloat(s.PSISomePct),
		nullFloat(s.ThrottledPct), nullFloat(s.RunDelayPct), nullFloat(s.PollutedTicksPct), s.Ticks,
		nullFloat(s.CostCPUMS), string(topJSON))
	if err != nil {
		return fmt.Errorf("add calendar sample of host %q: %w", s.Host, err)
	}
	return nil
}

// FindCalendarSamples returns the filter's host's samples in the order
// they started. A filter without a host is EINVALID.
func (c *core) FindCalendarSamples(ctx context.Context, f tare.CalendarFilter) ([]tare.CalendarSample, error) {
	if f.Host == "" {
		return nil, tare.Errorf(tare.EINVALID, "find calendar samples: name the host")
	}
	where, args := []string{"host = ?"}, []any{f.Host}
	if !f.Since.IsZero() {
		where, args = append(where, "start_ns >= ?"), append(args, f.Since.UnixNano())
	}
	if !f.Until.IsZero() {
		where, args = append(where, "start_ns < ?"), append(args, f.Until.UnixNano())
	}
	rs, err := c.b.query(ctx, "SELECT "+calendarColumns+" FROM calendar_samples WHERE "+
		strings.Join(where, " AND ")+" ORDER BY start_ns, pk", args...)
	if err != nil {
		return nil, fmt.Errorf("find calendar samples of host %q: %w", f.Host, err)
	}
	defer rs.Close()
	var out []tare.CalendarSample
	for rs.Next() {
		var (
			s                                 tare.CalendarSample
			start, end                        int64
			level, top                        string
			interference, steal, neighbours   sql.NullFloat64
			busy, psi, throttled, delay, poll sql.NullFloat64
			cost                              sql.NullFloat64
		)
		if err := rs.Scan(&s.Host, &start, &end, &level, &interference, &steal, &neighbours, &busy,
			&psi, &throttled, &delay, &poll, &s.Ticks, &cost, &top); err != nil {
			return nil, fmt.Errorf("find calendar samples of host %q: %w", f.Host, err)
		}
		s.Start, s.End, s.Level = time.Unix(0, start).UTC(), time.Unix(0, end).UTC(), tare.Level(level)
		s.InterferencePct, s.StealPct, s.NeighboursPct = floatOf(interference), floatOf(steal), floatOf(neighbours)
		s.BusyPct, s.PSISomePct, s.ThrottledPct = floatOf(busy), floatOf(psi), floatOf(throttled)
		s.RunDelayPct, s.PollutedTicksPct, s.CostCPUMS = floatOf(delay), floatOf(poll), floatOf(cost)
		if err := json.Unmarshal([]byte(top), &s.TopOthers); err != nil {
			return nil, fmt.Errorf("find calendar samples of host %q: %w: busiest processes %q: %w", f.Host, ErrDecode, clip(top), err)
		}
		out = append(out, s)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("find calendar samples of host %q: %w", f.Host, err)
	}
	return out, nil
}

// FindCalendarHosts lists the hosts with samples, by name.
func (c *core) FindCalendarHosts(ctx context.Context) ([]tare.CalendarHost, error) {
	rs, err := c.b.query(ctx, `SELECT host, COUNT(*), MIN(start_ns), MAX(start_ns)
		FROM calendar_samples GROUP BY host ORDER BY host`)
	if err != nil {
		return nil, fmt.Errorf("find calendar hosts: %w", err)
	}
	defer rs.Close()
	var out []tare.CalendarHost
	for rs.Next() {
		var h tare.CalendarHost
		var first, last int64
		if err := rs.Scan(&h.Host, &h.Samples, &first, &last); err != nil {
			return nil, fmt.Errorf("find calendar hosts: %w", err)
		}
		h.First, h.Last = time.Unix(0, first).UTC(), time.Unix(0, last).UTC()
		out = append(out, h)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("find calendar hosts: %w", err)
	}
	return out, nil
}

// KeepWindowChoice stores the windows protocol chose from a calendar
// unless it has some stored already, and returns those stored: of two
// tares choosing at once, the first to store wins, and both use its
// choice.
func (c *core) KeepWindowChoice(ctx context.Context, protocol string, chosen []tare.WindowChoice) ([]tare.WindowChoice, error) {
	if protocol == "" || len(chosen) == 0 {
		return nil, tare.Errorf(tare.EINVALID, "keep window choice: a protocol id and its windows are needed")
	}
	b, err := json.Marshal(chosen)
	if err != nil {
		return nil, fmt.Errorf("keep the windows of protocol %s: %w", protocol, err)
	}
	_, err = c.b.exec(ctx, `INSERT INTO protocol_windows (protocol, chosen_at, chosen) VALUES (?, ?, ?)
		ON CONFLICT (protocol) DO NOTHING`, protocol, c.now().UnixNano(), string(b))
	if err != nil {
		return nil, fmt.Errorf("keep the windows of protocol %s: %w", protocol, err)
	}
	return c.FindWindowChoice(ctx, protocol)
}

// FindWindowChoice returns the windows protocol chose from a calendar, nil
// when none.
func (c *core) FindWindowChoice(ctx context.Context, protocol string) ([]tare.WindowChoice, error) {
	var raw string
	err := c.b.queryRow(ctx, `SELECT chosen FROM protocol_windows WHERE protocol = ?`, protocol).Scan(&raw)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("find the windows of protocol %s: %w", protocol, err)
	}
	var chosen []tare.WindowChoice
	if err := json.Unmarshal([]byte(raw), &chosen); err != nil {
		return nil, fmt.Errorf("find the windows of protocol %s: %w: %q: %w", protocol, ErrDecode, clip(raw), err)
	}
	return chosen, nil
}
