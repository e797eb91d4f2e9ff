package main

import (
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// redactedConfig records every flag the user set, with secrets replaced:
// stored runs keep their full configuration, never their credentials.
func redactedConfig(cmd *cobra.Command) map[string]string {
	cfg := make(map[string]string)
	cmd.Flags().Visit(func(f *pflag.Flag) {
		v := f.Value.String()
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			items := sv.GetSlice()
			for i, item := range items {
				items[i] = redactHeaderLine(item)
			}
			v = strings.Join(items, "\n")
		}
		if sensitive(f.Name) {
			v = "REDACTED"
		}
		cfg[f.Name] = v
	})
	return cfg
}

// redactHeaderLine hides the value of a "Name: value" line whose name
// carries credentials.
func redactHeaderLine(s string) string {
	name, _, ok := strings.Cut(s, ":")
	if ok && sensitive(name) {
		return name + ": REDACTED"
	}
	return s
}

func sensitive(name string) bool {
	n := strings.ToLower(name)
	for _, s := range []string{"authorization", "cookie", "key", "token", "secret", "password"} {
		if strings.Contains(n, s) {
			return true
		}
	}
	return false
}
