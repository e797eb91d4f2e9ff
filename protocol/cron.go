package protocol

import (
	"fmt"
	"strings"
	"time"
)

// Cron returns crontab lines that run the protocol instead of a waiting
// tare: one line per window, at the window's opening, each running args
// (a tare protocol run PLAN) with --window W, quoted for the shell, its
// output appended to log (none when ""). The command then waits for the slot's
// seeded start inside the window, runs that window, stores it and exits;
// once the protocol's days are over it does nothing, and the lines can go.
//
// A zone other than the local one is given with CRON_TZ, which cronie and
// systemd's cron read; Debian's cron does not, and runs the lines in the
// system's zone.
func (s Schedule) Cron(args []string, log string) []string {
	command := func(window string) string {
		return CronCommand(append(args[:len(args):len(args)], "--window", window), log)
	}
	var spans []string
	for _, w := range s.Windows {
		spans = append(spans, w.Name+" "+FormatWindow(w))
	}
	loc := s.loc()
	lines := []string{
		fmt.Sprintf("# tare protocol %s: %s (%s), %d %s", s.Protocol, strings.Join(spans, ", "), loc, s.days(), plural(s.days(), "day", "days")),
		"# Each line starts at its window's opening; tare waits for the seeded start inside it, runs the",
		"# window, stores it and exits. After the last day the lines do nothing: remove them then.",
	}
	if loc != time.Local {
		lines = append(lines, "CRON_TZ="+loc.String())
	}
	for _, w := range s.Windows {
		lines = append(lines, fmt.Sprintf("%d %d * * * %s", int(w.From%time.Hour/time.Minute), int(w.From/time.Hour), command(w.Name)))
	}
	return lines
}

// CronCommand is the command of a crontab line: args, each quoted for the
// shell when it needs it, its output appended to log (none when "").
func CronCommand(args []string, log string) string {
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = shellQuote(a)
	}
	c := strings.Join(quoted, " ")
	if log != "" {
		c += " >> " + shellQuote(log) + " 2>&1"
	}
	return c
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// shellQuote quotes s for a crontab line when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=@+,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
