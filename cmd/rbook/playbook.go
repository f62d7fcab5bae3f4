package main

// rbook playbook: the .cantbook commands: run, validate, status, approve, reject, cancel. A
// playbook runs on the same engine, state file, control plane and approval service as a
// runbook; these commands are its CLI.

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rbookhq/rbook-action/action/preflight"
	"github.com/rbookhq/rbook-action/action/runbook"
	"github.com/rbookhq/rbook-action/controlplane/approval"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/internal/cpview"
	"github.com/rbookhq/rbook-action/internal/termui"
)

// playbookExitCodes is the exit-code paragraph of `rbook playbook run --help`.
const playbookExitCodes = `Exit codes:
  0  the run succeeded
  1  the run failed (a node failed and no error handler let it go on, a rejection, a signal)
  2  aborted before anything was recorded: an invalid playbook or inputs, a node in unknown
     state, an edited playbook; or halted because the run's records could not be kept
  3  the run was cancelled`

func newPlaybookCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "playbook",
		Short: "Run and decide .cantbook playbooks: DAGs of command, agent and approval nodes",
		Long: `A playbook (a .cantbook file) is a DAG of nodes: deterministic (a command
with arguments, no shell), agentic (a tool of an MCP server) and approval (a gate a person, or
the auto-pass policy, decides). Independent nodes run side by side; every node's output is
kept in the run's bindings under its id ({{ build.stdout }}), next to the inputs
({{ version }}). A playbook run is recorded like a runbook run: a state file that resumes
after a crash, the control plane (playbook_runs, playbook_approvals), a report with the DAG
and an evidence pack.

Exit codes: each subcommand's --help lists its own; 'rbook playbook' alone prints this help
and exits 0, an unknown subcommand exits 2.`,
		Example: `  rbook playbook validate runbooks/release.cantbook
  rbook playbook run runbooks/release.cantbook --input version=2026.4.90
  rbook playbook approve <TOKEN>
  rbook playbook status RBOOK-20260512-release-cut-1a2b3c4d`,
	}
	cmd.AddCommand(newPlaybookRunCmd(), newPlaybookValidateCmd(), newPlaybookStatusCmd(),
		newPlaybookDecideCmd(true), newPlaybookDecideCmd(false), newPlaybookCancelCmd())
	return cmd
}

func newPlaybookValidateCmd() *cobra.Command {
	var output, mcpConfig, templates, policy string
	cmd := &cobra.Command{
		Use:   "validate FILE...",
		Short: "Check .cantbook files and list every issue (file:line:col: field: message)",
		Long: `Parse and check each .cantbook against the playbook rules (version "1.0", a name,
unique node ids, known edge and depends ids, no cycle, skill or agent for agentic nodes,
command and args for deterministic ones, a prompt for approval nodes, iteration caps in
0..10) and rbook's (YAML safety limits, templates that name known inputs and nodes, when
conditions that can be true and false), and what 'rbook playbook run' checks before the first
node: the MCP config of agentic nodes (<folder>/<base>.mcp.json or --mcp-config FILE: each
node's agent is one of its servers, and a server's command is found; nothing is started) and
the report templates (--templates DIR; each is rendered for sample runs). A warning names
each approval node the auto-pass policy (--policy FILE, else the built-in rules) would pass
without a person; policy: require-human on the node pins it to a person. As with
'rbook validate', every issue is printed on stderr, one per line, as file:line:col: field:
message, and one line per file on stdout says "FILE: ok (N nodes, playbook NAME, hash H)"
or "FILE: N issue(s)". Warnings (an unquoted version: 1.0) are printed as "warning: …" and
do not make a file fail. Nothing is run or recorded.

-o json prints {"files": [{"file", "ok", "name", "nodes", "hash", "issues": [{"file",
"line", "column", "field", "message"}], "warnings": [...]}]} on stdout instead.

Exit codes: 0 every file is valid, 2 some file has issues (as 'rbook validate'), or usage.`,
		Example: `  rbook playbook validate runbooks/release.cantbook runbooks/fanout.cantbook
  rbook playbook validate runbooks/*.cantbook -o json | jq '.files[] | select(.ok | not)'`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "text" && output != "json" {
				return abort("-o %q: use text or json", output)
			}
			out, errw := cmd.OutOrStdout(), cmd.ErrOrStderr()
			res := preflight.Result{Files: []preflight.File{}}
			bad := 0
			tmplDiags := preflight.Templates(templates) // shared by every playbook: checked once
			pol, err := approval.LoadPlaybookPolicy(policy)
			if err != nil {
				return abort("--policy: %v", err)
			}
			chk := preflight.Playbooks{MCPConfig: mcpConfig, Templates: tmplDiags, Warnings: func(plan *runbook.Plan, file string) []runbook.Diagnostic {
				return autoPassWarnings(plan, file, pol, nil)
			}}
			for _, p := range args {
				vf := chk.File(p, output == "text", out, errw)
				if !vf.OK {
					bad++
				}
				res.Files = append(res.Files, vf)
			}
			if output == "json" {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				enc.SetEscapeHTML(false)
				if err := enc.Encode(res); err != nil {
					return abort("%v", err)
				}
			}
			if bad > 0 {
				return &exitError{code: exitAborted, msg: fmt.Sprintf("%d of %d playbook(s) have issues", bad, len(args))}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	cmd.Flags().StringVar(&mcpConfig, "mcp-config", "", "MCP config to check instead of <playbook folder>/<playbook base>.mcp.json (as for rbook playbook run)")
	cmd.Flags().StringVar(&templates, "templates", "", "folder whose templates/*.md override the built-in report templates (as for rbook playbook run)")
	cmd.Flags().StringVar(&policy, "policy", "", "auto-pass policy rules (YAML) to say which approval nodes would pass without a person (default: the built-in rules; as for rbook playbook run)")
	return cmd
}

func newPlaybookStatusCmd() *cobra.Command {
	f := cpFlags{runCmd: "rbook playbook run"}
	cmd := &cobra.Command{
		Use:   "status RUN_ID",
		Short: "Show a playbook run: status, each node's state, bindings, iteration counts",
		Long: `Show one playbook run as the control plane holds it: its status (running, paused,
succeeded, failed, cancelled), the active nodes, every node in plan order with its state
(pending, running, waiting, PASS, FAIL, TIMED_OUT, SKIPPED), how many times it ran and a
note, then the run's bindings (inputs and each node's output) and, for a failed run, the
error context. -o json prints the Run as proto JSON.

` + playbookHistoryHelp + `

Exit codes: 0 shown, 1 no such run (E_RUN_NOT_FOUND), refused or unreachable, 2 usage or no
control plane and no local database.`,
		Example: `  rbook playbook status RBOOK-20260512-release-cut-1a2b3c4d
  rbook playbook status RBOOK-20260512-release-cut-1a2b3c4d -o json | jq .playbook.bindings`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, done, err := f.reader(cmd)
			if err != nil {
				return err
			}
			defer done()
			resp, err := c.Runs.GetRun(cmd.Context(), &rbookv1.GetRunRequest{RunId: args[0], PageSize: 1})
			if err != nil {
				return f.rpcError(err)
			}
			r := resp.GetRun()
			if f.output == "json" {
				return cpview.PrintJSON(cmd.OutOrStdout(), r)
			}
			return cpview.WritePlaybookStatus(cmd.OutOrStdout(), r)
		},
	}
	f.register(cmd, true)
	return cmd
}

func newPlaybookDecideCmd(approve bool) *cobra.Command {
	f := cpFlags{runCmd: "rbook playbook run"}
	verb := decideVerb(approve)
	cmd := &cobra.Command{
		Use:   verb + " APPROVAL_ID|TOKEN",
		Short: strings.ToUpper(verb[:1]) + verb[1:] + " a playbook's waiting approval node by its approval id or token",
		Long: strings.ToUpper(verb[:1]) + verb[1:] + ` the approval node a playbook run waits at, by the approval id or the token the
run printed ("rbook playbook approve a-…" or "<TOKEN>"; "-" reads a token from stdin, keeping it
out of shell history).
The token is an HMAC over the run, the node and when it was issued; it decides its approval
once. A refusal prints the control plane's code:
E_APPROVAL_ALREADY_DECIDED (it was decided already: a token cannot be replayed),
E_APPROVAL_NOT_FOUND (no pending approval has this id or token), E_TOKEN_INVALID,
E_TOKEN_EXPIRED. By approval id it needs an approver's $RBOOK_TOKEN, or this run's folder on
the embedded control plane, as rbook ` + verb + ` does.

` + playbookCPHelp + `

Exit codes: 0 decided, 1 refused (the E_ code says why) or unreachable, 2 usage or no
control plane.`,
		Example: fmt.Sprintf(`  rbook playbook %s a-5wbvol5fcc25vsfvgyhmosr26e   # from another terminal in the run's folder
  rbook playbook %s <TOKEN> --control-plane http://127.0.0.1:7070 --reason %q
  echo "$TOKEN" | rbook playbook %s -`, verb, verb, decideReasonExample(approve), verb),
	}
	return withDecide(cmd, &f, approve, "Approval node")
}

func newPlaybookCancelCmd() *cobra.Command {
	f := cpFlags{runCmd: "rbook playbook run"}
	var reason string
	cmd := &cobra.Command{
		Use:   "cancel RUN_ID",
		Short: "Cancel a playbook run on the control plane",
		Long: `Cancel a playbook run that has not ended: the control plane marks it cancelled, withdraws
its pending approvals (their tokens stop working) and tells its executor, which stops the
nodes that run and records the cancel in its state file. Cancelling a cancelled run changes
nothing.

` + playbookCPHelp + `

Exit codes: 3 the run is cancelled, 1 refused (E_RUN_NOT_FOUND, E_RUN_FINAL: it already
succeeded or failed) or unreachable, 2 usage or no control plane.`,
		Example: `  rbook playbook cancel RBOOK-20260512-release-cut-1a2b3c4d --reason "wrong version"`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, done, err := f.client(cmd)
			if err != nil {
				return err
			}
			defer done()
			if reason == "" {
				reason = "cancelled by " + currentUser() + " (rbook playbook cancel)"
			}
			resp, err := c.Runs.CancelRun(cmd.Context(), &rbookv1.CancelRunRequest{RunId: args[0], Reason: reason})
			if err != nil {
				return f.rpcError(err)
			}
			if f.output == "json" {
				if err := cpview.PrintJSON(cmd.OutOrStdout(), resp.GetRun()); err != nil {
					return err
				}
				return &exitError{code: exitCancelled}
			}
			r := resp.GetRun()
			fmt.Fprintf(cmd.OutOrStdout(), "Run %s is %s.\n", r.GetRunId(), termui.StatusWord(r.GetKind(), r.GetStatus()))
			return &exitError{code: exitCancelled}
		},
	}
	f.register(cmd, true)
	cmd.Flags().StringVar(&reason, "reason", "", "why (recorded with the cancellation)")
	return cmd
}
