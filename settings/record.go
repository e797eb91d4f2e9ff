package settings

import (
	"iter"
	"maps"
	"strings"

	"github.com/tare-dev/tare"
)

// Record is the settings given, by name, as a run records its
// configuration, with extra: a list's items one per line, the value of a
// header line whose name carries credentials and every setting named like
// a secret redacted (tare.RedactConfig). Stored runs and printed summaries
// keep their full configuration, never their credentials. The command line
// and a plan both record through it.
func Record(given iter.Seq2[string, Value], extra map[string]string) map[string]string {
	cfg := make(map[string]string)
	for name, v := range given {
		text := v.String()
		if l, ok := v.(interface{ GetSlice() []string }); ok {
			items := l.GetSlice()
			for i, item := range items {
				items[i] = redactHeaderLine(item)
			}
			text = strings.Join(items, "\n")
		}
		cfg[name] = text
	}
	maps.Copy(cfg, extra)
	return tare.RedactConfig(cfg)
}

// Given is each of fields that given says was given, by flag.
func Given(fields []Field, given func(flag string) bool) iter.Seq2[string, Value] {
	return func(yield func(string, Value) bool) {
		for _, f := range fields {
			if given(f.Flag) && !yield(f.Flag, f.Value) {
				return
			}
		}
	}
}

// redactHeaderLine hides the value of a "Name: value" line whose name
// carries credentials.
func redactHeaderLine(s string) string {
	name, _, ok := strings.Cut(s, ":")
	if ok && tare.IsSecretName(strings.TrimSpace(name)) {
		return name + ": " + tare.Redacted
	}
	return s
}
