package protocol

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tare-dev/tare"
)

// WindowList names each window with its span: "peak 14:00-16:00, mid 08:00-10:00".
func WindowList(ws []tare.Window) string {
	var parts []string
	for _, w := range ws {
		parts = append(parts, w.Name+" "+FormatWindow(w))
	}
	return strings.Join(parts, ", ")
}

// List writes a table of the protocols that runs belong to: how many runs
// each has, how many complete, and when the last one started.
func List(w io.Writer, runs []tare.Run) error {
	type row struct {
		id         string
		runs, done int
		last       time.Time
	}
	var rows []*row
	byID := map[string]*row{}
	for _, r := range runs {
		if r.Protocol == "" {
			continue
		}
		p := byID[r.Protocol]
		if p == nil {
			p = &row{id: r.Protocol, last: r.StartedAt}
			byID[r.Protocol] = p
			rows = append(rows, p)
		}
		p.runs++
		if r.Status == tare.StatusComplete {
			p.done++
		}
	}
	if len(rows) == 0 {
		_, err := fmt.Fprintln(w, "no protocol runs in the store (tare protocol run PLAN starts one)")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROTOCOL\tRUNS\tCOMPLETE\tLAST RUN")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", r.id, r.runs, r.done, r.last.Local().Format("2006-01-02 15:04"))
	}
	return tw.Flush()
}

// Status lays out protocol id's slots at now from its stored runs: done,
// waiting, running in another tare, or missed, and what is next.
func Status(w io.Writer, id string, runs []tare.Run, now time.Time) error {
	if len(runs) == 0 {
		return tare.Errorf(tare.ENOTFOUND, "no runs of protocol %q in the store (tare protocol status lists them)", id)
	}
	p := &printerTo{w: w}
	if runs[0].Config["protocol.dry_run"] == "true" {
		p.line("protocol %s: a dry run (tare protocol run --now), %d runs", id, len(runs))
		for _, r := range runs {
			p.line("  %-8s %s  %s  %s", r.Window, r.StartedAt.Local().Format("2006-01-02 15:04:05"), r.Status, r.ID)
		}
		return p.err
	}
	sched, err := ScheduleFromConfig(id, runs[0].Config)
	if err != nil {
		return tare.Errorf(tare.EINVALID, "protocol %s: its runs do not record their schedule (%w): tare compare %s still compares them", id, err, id)
	}
	slots := sched.Cycle(runs, now)
	p.line("protocol %s: %s, %s (%s)", id, WindowList(sched.Windows), days(sched.Days), sched.Location)
	p.line("")
	if p.err == nil {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  WINDOW\tDAY\tSTART\tSTATE\tRUN")
		for _, sl := range slots {
			start, what := sl.At, ""
			if sl.Run != nil {
				start, what = sl.Run.StartedAt, sl.Run.ID
			}
			if sl.State == SlotMissed {
				what = sl.Why
			}
			fmt.Fprintf(tw, "  %s\t%d\t%s\t%s\t%s\n", sl.Window.Name, sl.Day, start.In(sched.Location).Format("2006-01-02 15:04"), sl.State, what)
		}
		p.err = tw.Flush()
	}
	p.line("")
	if next, ok := Next(slots); ok {
		p.line("next: the %s window, day %d, at %s (in %s)", next.Window.Name, next.Day, next.At.In(sched.Location).Format("2006-01-02 15:04:05 MST"), next.At.Sub(now).Round(time.Minute))
	} else {
		p.line("the cycle is over: tare compare %s compares its windows", id)
	}
	return p.err
}

// printerTo writes lines, keeping the first error.
type printerTo struct {
	w   io.Writer
	err error
}

func (p *printerTo) line(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format+"\n", args...)
	}
}

// days is "1 day" or "N days" for a schedule of n days (0 is 1).
func days(n int) string {
	if n = max(n, 1); n == 1 {
		return "1 day"
	}
	return fmt.Sprintf("%d days", n)
}
