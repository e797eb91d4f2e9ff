package session

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/calendar"
	"github.com/tare-dev/tare/protocol"
	"github.com/tare-dev/tare/settings"
	"github.com/tare-dev/tare/stats"
)

// Keeper keeps a host's calendar: every Every it samples the host for a
// short while with no load of its own (Sample), turns the check into a
// calendar sample with what it cost tare, and stores it. Samples are due
// at Every from the first; one that overruns its slot makes the keeper
// skip to the next slot to come, never pile samples up.
type Keeper struct {
	Every time.Duration
	Store tare.CalendarStore
	// Sample samples the host once and returns the check's summary, its
	// verdict judged; an error stops the keeper.
	Sample func(ctx context.Context) (tare.Summary, error)
	// Host names the host in the calendar; "" takes the summary's.
	Host string

	// Now is the clock and Wait waits on it (nil: the real ones).
	Now  func() time.Time
	Wait func(ctx context.Context, until time.Time) error
	// OnSample is told of each sample stored; OnError of each that could
	// not be (the keeper carries on: a store that is down for a while
	// costs those samples, not the calendar). With Once, a sample that
	// could not be stored is Loop's error instead.
	OnSample func(tare.CalendarSample)
	OnError  func(tare.CalendarSample, error)
	// Once stops the keeper after one sample (tare check --record, what a
	// crontab line runs).
	Once bool
}

// Loop samples and stores until ctx is done (nil: a daemon stopped is a
// daemon done) or Sample fails.
func (k *Keeper) Loop(ctx context.Context) error {
	now, wait := k.Now, k.Wait
	if now == nil {
		now = time.Now
	}
	if wait == nil {
		wait = func(ctx context.Context, until time.Time) error { return tare.Sleep(ctx, max(until.Sub(now()), 0)) }
	}
	next := now()
	for {
		if err := wait(ctx, next); err != nil {
			return nil
		}
		cpu := processCPU()
		s, err := k.Sample(ctx)
		if ctx.Err() != nil {
			return nil // stopped mid-sample: a short sample is not stored
		}
		if err != nil {
			return err
		}
		// What tare spent on the sample: the sampler, the ledger's read of
		// every process, the verdict. The store's one insert is left out.
		cost := processCPU() - cpu
		host := k.Host
		if host == "" {
			host = s.Env.Hostname
		}
		c := calendar.Sample(host, &s, &cost)
		if err := k.Store.AddCalendarSample(ctx, c); err != nil {
			if k.Once {
				return err // the one sample asked for is lost: the command failed
			}
			if k.OnError != nil {
				k.OnError(c, err)
			}
		} else if k.OnSample != nil {
			k.OnSample(c)
		}
		if k.Once {
			return nil
		}
		next = next.Add(k.Every)
		if t := now(); !next.After(t) {
			// Overran: the next slot to come, on the same grid.
			next = next.Add((t.Sub(next)/k.Every + 1) * k.Every)
		}
	}
}

// processCPU is the user plus system time this process has used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// ChooseWindows sets in s the windows the plan chooses from a host's
// calendar (windows: auto, offpeak: quietest). A protocol chooses them
// once: the windows its id already chose are used again, so that its runs
// and the lines of tare protocol cron agree whatever the calendar learns
// later. Else they are chosen now from the calendar of host in st over the
// last calendar.DefaultDays days, and, with keep, stored as the
// protocol's (a dry run keeps nothing). The choices and their evidence are
// kept for SlotRun, which records them with every run; the warnings say
// where the calendar cannot tell the windows apart. A plan without such
// windows is left as it is.
func (pl *Plan) ChooseWindows(ctx context.Context, st tare.Store, s *protocol.Schedule, host string, now time.Time, keep bool) ([]string, error) {
	if len(pl.Auto) == 0 {
		return nil, nil
	}
	chosen, err := st.FindWindowChoice(ctx, s.Protocol)
	if err != nil {
		return nil, err
	}
	var warnings []string
	if chosen == nil {
		if chosen, warnings, err = pl.choose(ctx, st, s, host, now); err != nil {
			return nil, err
		}
		if keep {
			if chosen, err = st.KeepWindowChoice(ctx, s.Protocol, chosen); err != nil {
				return nil, err
			}
		}
	}
	for _, c := range chosen {
		for i := range s.Windows {
			if s.Windows[i].Name != c.Window {
				continue
			}
			if s.Windows[i].From, s.Windows[i].To, err = protocol.ParseSpan(c.From + "-" + c.To); err != nil {
				return nil, settings.Errorf("", "protocol %s: the %s window it chose from the calendar (%s-%s) is damaged: %v; give the protocol another id (%s)", s.Protocol, c.Window, c.From, c.To, err, settings.Name("id"))
			}
		}
	}
	pl.Chosen = chosen
	return warnings, s.Validate()
}

// choose chooses the plan's calendar windows from host's calendar now.
func (pl *Plan) choose(ctx context.Context, st tare.Store, s *protocol.Schedule, host string, now time.Time) ([]tare.WindowChoice, []string, error) {
	samples, err := st.FindCalendarSamples(ctx, tare.CalendarFilter{Host: host, Since: now.AddDate(0, 0, -calendar.DefaultDays), Until: now})
	if err != nil {
		return nil, nil, err
	}
	if len(samples) == 0 {
		return nil, nil, pl.Errorf("windows", nil, "%s", noCalendar(ctx, st, host, calendar.DefaultDays))
	}
	var wants []calendar.Want
	var fixed []tare.Window
	for _, w := range s.Windows {
		if i := autoIndex(pl.Auto, w.Name); i >= 0 {
			wants = append(wants, calendar.Want{Window: w.Name, Choice: pl.Auto[i].Choice})
		} else {
			fixed = append(fixed, w)
		}
	}
	cfg := calendar.Config{Host: host, Loc: s.Location, Now: now}
	chosen, warnings, err := calendar.Choose(samples, cfg, wants, fixed, s.RunLength)
	if err != nil {
		return nil, nil, pl.Errorf("windows", err, "%s", tare.ErrorMessage(err))
	}
	return chosen, warnings, nil
}

func autoIndex(auto []protocol.Auto, window string) int {
	for i, a := range auto {
		if a.Window == window {
			return i
		}
	}
	return -1
}

// noCalendar says that host has no calendar samples in the last days,
// naming the hosts of the store that have some.
func noCalendar(ctx context.Context, st tare.CalendarStore, host string, days int) string {
	msg := fmt.Sprintf("host %s has no calendar samples in the last %d days: keep `tare check --every 5m --for 10s` running on it for %d days or more (or give the windows as times, like peak: 14:00-16:00)",
		host, days, calendar.MinDays)
	hosts, err := st.FindCalendarHosts(ctx)
	if err == nil && len(hosts) > 0 {
		var names []string
		for _, h := range hosts {
			names = append(names, fmt.Sprintf("%s (%d samples)", h.Host, h.Samples))
		}
		msg += "; hosts with a calendar in this store: " + strings.Join(names, ", ")
	}
	return msg
}

// calendarChecks sets each window a protocol chose from the calendar (as
// its runs recorded) against the interference its runs measured, the
// mean of its runs' when it ran on several days.
func calendarChecks(inputs []stats.CompareInput) []tare.WindowCheck {
	var chosen []tare.WindowChoice
	sum, n := map[string]float64{}, map[string]int{}
	for _, in := range inputs {
		run := in.Summary.Run
		if raw := run.Config[protocol.ConfigCalendar]; chosen == nil && raw != "" {
			if json.Unmarshal([]byte(raw), &chosen) != nil {
				chosen = nil
			}
		}
		if v := in.Summary.Host.Interference(); v != nil && run.Window != "" {
			sum[run.Window] += *v
			n[run.Window]++
		}
	}
	if len(chosen) == 0 {
		return nil
	}
	measured := map[string]*float64{}
	for w, k := range n {
		measured[w] = tare.Float(sum[w] / float64(k))
	}
	return calendar.Verify(chosen, measured)
}
