package main

import "github.com/spf13/cobra"

func newProtocolCmd() *cobra.Command { return &cobra.Command{Use: "protocol"} }
