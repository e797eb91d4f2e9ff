package main

import (
	"fmt"
	"net"

	"github.com/spf13/cobra"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/modelsim"
	"github.com/tare-dev/tare/session"
)

func newModelCmd() *cobra.Command {
	var (
		cfg    modelsim.Config
		listen string
	)
	cmd := &cobra.Command{
		Use:   "model [--listen 127.0.0.1:8089]",
		Short: "Serve a simulated OpenAI-compatible model whose tokens cost real CPU",
		Long: `Serve a simulated OpenAI-compatible endpoint (/v1/chat/completions, streaming
or not, /v1/completions, /v1/embeddings and /v1/models) whose prompt processing and every generated token
burn real CPU, calibrated on an idle core at start. Steal, throttling and
contention raise its latency the way they raise a small CPU-bound inference
server's, which makes it the model box of the reference topology.

It listens on loopback unless --listen names another address explicitly.
Ctrl-C stops it.`,
		Example: `  tare model
  tare model --token-cost 5ms --mean-tokens 128 --parallel 2
  tare run --model http://127.0.0.1:8089/v1 --rate 2/s --jobs 50`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := modelsim.CheckListen(listen, cmd.Flags().Changed("listen")); err != nil {
				return session.Flagged(err, "listen")
			}
			if err := checkModelFlags(cfg); err != nil {
				return err
			}
			srv, err := modelsim.New(cfg)
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return tare.Errorf(tare.EUNAVAILABLE, "--listen %s: %w", listen, err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "tare model: serving %q at http://%s/v1 (%.0f work rounds per ms of this core; Ctrl-C stops)\n",
				srv.Model(), ln.Addr(), srv.IterationsPerMS())
			return srv.Serve(cmd.Context(), ln)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&listen, "listen", modelsim.DefaultListen, "address to listen on; anything but loopback must be given explicitly")
	fs.DurationVar(&cfg.PromptCost, "prompt-cost", modelsim.DefaultPromptCost, "CPU work per prompt token, as on an idle core")
	fs.DurationVar(&cfg.TokenCost, "token-cost", modelsim.DefaultTokenCost, "CPU work per generated token, as on an idle core")
	fs.IntVar(&cfg.MeanTokens, "mean-tokens", modelsim.DefaultMeanTokens, "mean output tokens when a request sets no max_tokens")
	fs.Float64Var(&cfg.TokenSpread, "token-spread", 0.5, "spread (lognormal sigma) of the output-token count; 0 for a fixed count")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "seed of the token draws")
	fs.StringVar(&cfg.Model, "model-name", modelsim.DefaultModel, `the model id served: what --model-name of tare run and tare worker asks for, and /v1/models lists`)
	fs.StringVar(&cfg.Model, "name", modelsim.DefaultModel, "the model id served")
	deprecate(cmd, "name", "use --model-name, as tare run and tare worker do")
	fs.IntVar(&cfg.ContextLength, "context-length", modelsim.DefaultContextLength, "context window in tokens, messages and completion together: a larger max_tokens is refused with a 400, as OpenAI refuses one")
	fs.IntVar(&cfg.PrefixCache, "prefix-cache", 0, "blocks of 16 prompt tokens a prefix cache holds, as vLLM's: a prompt's leading blocks found there cost no prefill (0: no cache)")
	fs.IntVar(&cfg.Parallel, "parallel", 0, "requests generating at once at most (0: no cap); the others queue")
	fs.Float64Var(&cfg.ErrorRate, "error-rate", 0, "share (0–1) of requests answered 503, for fault tests")
	fs.Float64Var(&cfg.CutRate, "cut-rate", 0, "share (0–1) of streams cut half-way, for fault tests")
	return cmd
}
