package main

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/rbookhq/rbook-action/internal/evidenceverify"
	"github.com/rbookhq/rbook-action/internal/termui"
)

// newEvidenceCmd is `rbook evidence`: the commands over a run's evidence (docs/evidence-verify.md).
func newEvidenceCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "evidence",
		Short: "Check a run's evidence pack, journal and signed attestation",
		Long: `Commands over a run's evidence: the evidence pack (<run_id>.evidence.json), its journal
(<run_id>.journal.jsonl) and the control plane's signed attestation (<run_id>.attestation.json).
See docs/evidence-verify.md.

Exit codes: each subcommand's --help lists its own; 'rbook evidence' alone prints this help
and exits 0, an unknown subcommand exits 2.`,
		Example: "  rbook evidence verify .rbook/RBOOK-….evidence.json --key rbook-signing.pub.pem",
	}
	cmd.AddCommand(newEvidenceVerifyCmd())
	return cmd
}

// newEvidenceVerifyCmd is `rbook evidence verify PACK`: evidenceverify.Load and Verify, the
// report printed, its exit code returned.
func newEvidenceVerifyCmd() *cobra.Command {
	var o evidenceverify.Options
	var cpURL, output string
	cmd := &cobra.Command{
		Use:     "verify PACK",
		Short:   "Verify a run's evidence offline: its hash chain, its pack, the signature and gate policies",
		Long:    evidenceverify.Help,
		Example: evidenceverify.Examples,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "text" && output != "json" {
				return &usageError{cmd, errors.New(`-o/--output: use text or json`)}
			}
			if o.KeyFile != "" && cpURL != "" {
				return &usageError{cmd, errors.New("--key and --control-plane both name the public keys: give one")}
			}
			o.Pack = args[0]
			var remote evidenceverify.Remote
			var err error
			if cpURL != "" {
				if remote, err = evidenceverify.NewRemote(cpURL); err != nil {
					return abort("rbook evidence verify: %v", err)
				}
			}
			in, err := evidenceverify.Load(cmd.Context(), o, remote)
			if err != nil {
				return abort("rbook evidence verify: %v", err)
			}
			rep := evidenceverify.Verify(in)
			out := cmd.OutOrStdout()
			if output == "json" {
				err = rep.WriteJSON(out)
			} else {
				rep.WriteText(out, termui.ColorAllowed(termui.IsTerminal(out)))
			}
			if code := rep.Code(); code != 0 && err == nil {
				return &exitError{code: code}
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Attestation, "attestation", "", "the attestation (default <run_id>.attestation.json beside PACK, else the control plane's)")
	f.StringVar(&o.KeyFile, "key", "", "the control plane's public key: a PEM file, or the JSON of its /.well-known/rbook/keys")
	f.StringVar(&cpURL, "control-plane", "", "read the public keys (and a missing attestation or journal) from this control plane")
	f.StringVar(&o.Journal, "journal", "", "the run's journal (default <run_id>.journal.jsonl beside PACK)")
	f.StringVar(&o.Head, "head", "", "the chain head kept elsewhere (sha256:…): the chain must end there")
	f.StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}
