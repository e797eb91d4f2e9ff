package main

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/tare-dev/tare"
)

// redactedConfig records every flag the user set, secrets replaced.
func redactedConfig(cmd *cobra.Command) map[string]string { return settings(cmd.Flags(), nil) }

// redactHeaderLine hides the value of a "Name: value" line whose name
// carries credentials.
func redactHeaderLine(s string) string {
	name, _, ok := strings.Cut(s, ":")
	if ok && tare.IsSecretName(strings.TrimSpace(name)) {
		return name + ": " + tare.Redacted
	}
	return s
}
