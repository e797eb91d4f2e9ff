package main

import (
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tare-dev/tare"
)

// redactedConfig records every flag the user set, with secrets replaced:
// stored runs and printed summaries keep their full configuration, never
// their credentials.
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
		cfg[f.Name] = v
	})
	return tare.RedactConfig(cfg)
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
