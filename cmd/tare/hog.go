package main

import (
	"runtime"
	"time"

	"github.com/spf13/cobra"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/demo"
	"github.com/tare-dev/tare/host"
)

// hogName and hogCommand are the demo's hog's name and command
// (demo.HogName, demo.HogCommand).
const (
	hogName    = demo.HogName
	hogCommand = demo.HogCommand
)

// newHogCmd is the demo's CPU hog: tare run again as this hidden command,
// which renames itself hogName and spins one core until --for has passed
// (or it is killed).
func newHogCmd() *cobra.Command {
	var spin time.Duration
	cmd := &cobra.Command{
		Use:    hogCommand,
		Short:  "A CPU hog of tare demo --neighbour: one core, named " + hogName,
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := host.SetCommand(hogName); err != nil {
				return tare.Errorf(tare.EUNAVAILABLE, "name the hog %s: %w", hogName, err)
			}
			// A linear congruential step, kept alive, so the loop is work
			// the compiler cannot drop.
			var x uint64
			deadline := time.Now().Add(spin)
			for time.Now().Before(deadline) && cmd.Context().Err() == nil {
				for range 1 << 16 {
					x = x*6364136223846793005 + 1442695040888963407
				}
			}
			runtime.KeepAlive(x)
			return nil
		},
	}
	cmd.Flags().DurationVar(&spin, "for", time.Minute, "how long to spin")
	return cmd
}
