package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tare-dev/tare"
)

// urlFlags are the flags whose value is a URL or a DSN, which may hold a
// password, and the environment variable each reads when the command
// line does not give it: a value on the command line is in
// /proc/<pid>/cmdline, readable by anyone on the host. VAR holds the
// value itself, VAR_FILE names a file holding it (a mounted Secret).
var urlFlags = []struct{ flag, env string }{
	{"url", "TARE_URL"},
	{"model", "TARE_MODEL"},
	{"queue", "TARE_QUEUE"},
	{"coordinate", "TARE_COORDINATE"},
	{"db", "TARE_DB"},
}

// targetFlags are the flags of a load command that name its one target:
// the environment fills one only when the command line names none.
var targetFlags = []string{"url", "model", "queue", "targets"}

// fileSuffix makes the variable that names a file holding the value.
const fileSuffix = "_FILE"

// sayURLEnv adds to the help of every URL flag of cmd and the commands
// under it which variables it reads.
func sayURLEnv(cmd *cobra.Command) {
	for _, u := range urlFlags {
		f := cmd.Flags().Lookup(u.flag)
		if f == nil {
			f = cmd.PersistentFlags().Lookup(u.flag)
		}
		if f != nil && !f.Hidden && !strings.Contains(f.Usage, "$"+u.env) {
			f.Usage += fmt.Sprintf(" (when not given: $%s, or the file $%s%s names)", u.env, u.env, fileSuffix)
		}
	}
	for _, c := range cmd.Commands() {
		sayURLEnv(c)
	}
}

// urlsFromEnv sets each URL flag of cmd that the command line did not
// give from its variable, or the file its _FILE variable names. A target
// comes from the environment only when the command line names none, and
// only one may.
func urlsFromEnv(cmd *cobra.Command) error {
	fs := cmd.Flags()
	targetGiven := false
	if fs.Lookup("url") != nil { // a load command: url, model and queue are its alternative targets
		for _, name := range targetFlags {
			if f := fs.Lookup(name); f != nil && f.Changed {
				targetGiven = true
			}
		}
	}
	var fromEnv []string // the targets the environment gave
	for _, u := range urlFlags {
		f := fs.Lookup(u.flag)
		if f == nil || f.Changed {
			continue
		}
		isTarget := fs.Lookup("url") != nil && u.flag != "coordinate" && u.flag != "db"
		if isTarget && targetGiven {
			continue
		}
		v, from, err := envValue(u.env)
		if err != nil {
			return err
		}
		if v == "" {
			continue
		}
		if isTarget {
			fromEnv = append(fromEnv, from)
		}
		if err := fs.Set(u.flag, v); err != nil {
			return tare.Errorf(tare.EINVALID, "--%s from %s: %w", u.flag, from, err)
		}
	}
	if len(fromEnv) > 1 {
		return tare.Errorf(tare.EINVALID, "%s each name a target: give one target (unset the others, or name the target on the command line)", strings.Join(fromEnv, " and "))
	}
	return nil
}

// envValue is the value of the variable name, or of the file name_FILE
// names (without its trailing newline), and where it came from; "" when
// neither is set.
func envValue(name string) (value, from string, err error) {
	v, file := os.Getenv(name), os.Getenv(name+fileSuffix)
	switch {
	case v != "" && file != "":
		return "", "", tare.Errorf(tare.EINVALID, "both %s and %s%s are set: give the value or the file that holds it, not both", name, name, fileSuffix)
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", "", tare.Errorf(tare.EINVALID, "%s%s names a file tare cannot read: %w", name, fileSuffix, err)
		}
		return strings.TrimRight(string(b), "\r\n"), fmt.Sprintf("$%s%s (%s)", name, fileSuffix, file), nil
	}
	return v, "$" + name, nil
}
