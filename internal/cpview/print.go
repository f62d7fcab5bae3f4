// Package cpview is what the rbook CLI's control-plane commands show and how they read it:
// the tables of runs, transitions, approvals and playbook nodes, proto JSON, the paging of
// ListRuns, GetRun and ListApprovals, rbook approve's --input flags, and the messages of
// failed calls with what to do next. It prints to the writer it is given and dials nothing:
// the caller passes a connected *cpclient.Client.
package cpview

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/internal/termui"
)

// PrintJSON prints m as indented proto JSON and a newline (what -o json prints).
func PrintJSON(w io.Writer, m proto.Message) error {
	b, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(m)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}

// TS is a timestamp as RFC 3339 in UTC, "-" for none.
func TS(t *timestamppb.Timestamp) string {
	if t == nil || (t.Seconds == 0 && t.Nanos == 0) {
		return "-"
	}
	return t.AsTime().UTC().Format(time.RFC3339)
}

// ShortEnum is an enum value's name without prefix, in lower case ("run_finished").
func ShortEnum(s fmt.Stringer, prefix string) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), prefix))
}

// Tally is the APPROVALS column of `rbook approvals`: distinct approvals so far of the number
// required, e.g. "1/2".
func Tally(a *rbookv1.Approval) string {
	n := 0
	for _, v := range a.GetVotes() {
		if v.GetVerdict() == rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED {
			n++
		}
	}
	return fmt.Sprintf("%d/%d", n, max(int(a.GetApprovalsRequired()), 1))
}

// DescribeTransition prints one transition of a run of kind as a line: sequence number, time,
// kind, step, step status, the run's status in its words when it finished, the message.
func DescribeTransition(w io.Writer, kind rbookv1.RunKind, t *rbookv1.Transition) {
	what := ShortEnum(t.GetKind(), "TRANSITION_KIND_")
	line := fmt.Sprintf("%4d  %s  %-15s", t.GetSeq(), TS(t.GetTime()), what)
	if t.GetStepName() != "" {
		line += fmt.Sprintf("  %s '%s'", t.GetStepType(), t.GetStepName())
	}
	if e := t.GetEvidence(); e != nil {
		line += "  " + ShortEnum(e.GetStatus(), "STEP_STATUS_")
	}
	if t.GetKind() == rbookv1.TransitionKind_TRANSITION_KIND_RUN_FINISHED {
		line += "  " + termui.StatusWord(kind, t.GetRunStatus())
	}
	if t.GetMessage() != "" {
		line += "  — " + t.GetMessage()
	}
	fmt.Fprintln(w, line)
}

// WriteRuns prints the table of rbook runs: run id, name, kind, status in its kind's words,
// done, start time and who started it.
func WriteRuns(out io.Writer, runs []*rbookv1.Run) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "RUN\tNAME\tKIND\tSTATUS\tDONE\tSTARTED\tBY")
	for _, r := range runs {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.GetRunId(), r.GetName(), termui.RunKindWord(r), termui.StatusWord(r.GetKind(), r.GetStatus()),
			termui.RunDone(r), TS(r.GetStartedAt()), r.GetStartedBy())
	}
	return w.Flush()
}

// WriteRun prints rbook get's text: the run's line, its lease, then every transition.
func WriteRun(out io.Writer, resp *rbookv1.GetRunResponse) {
	r := resp.GetRun()
	fmt.Fprintf(out, "Run %s · runbook %s · %s · %d of %d steps done · started %s by %s\n", r.GetRunId(), r.GetName(),
		termui.StatusWord(r.GetKind(), r.GetStatus()), r.GetLastCompletedStepIndex()+1, r.GetTotalSteps(), TS(r.GetStartedAt()), r.GetStartedBy())
	if l := r.GetLease(); l != nil {
		fmt.Fprintf(out, "Owner %s · lease epoch %d · until %s\n", l.GetOwner(), l.GetEpoch(), TS(l.GetExpiresAt()))
	}
	if h := r.GetChainHead(); h != "" {
		fmt.Fprintf(out, "Chain head %s (transition %d)\n", h, r.GetLastSeq())
	}
	for _, t := range resp.GetTransitions() {
		DescribeTransition(out, r.GetKind(), t)
	}
}

// WriteApprovals prints the table of rbook approvals, with a PAGE column (each gate's page on
// the console; docs/console-links.md) when the control plane has a public URL. Tokens are
// never shown.
func WriteApprovals(out io.Writer, approvals []*rbookv1.Approval) error {
	page := slices.ContainsFunc(approvals, func(a *rbookv1.Approval) bool { return a.GetApprovalUrl() != "" })
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	head := "APPROVAL\tRUN\tGATE\tSTATUS\tREQUESTED\tDEADLINE\tDECIDED BY\tAPPROVALS"
	if page {
		head += "\tPAGE"
	}
	fmt.Fprintln(w, head)
	for _, a := range approvals {
		line := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s", a.GetApprovalId(), a.GetRunId(), a.GetStepName(), ShortEnum(a.GetStatus(), "APPROVAL_STATUS_"),
			TS(a.GetRequestedAt()), TS(a.GetDeadline()), a.GetApprover(), Tally(a))
		if page {
			line += "\t" + a.GetApprovalUrl()
		}
		fmt.Fprintln(w, line)
	}
	return w.Flush()
}

// ParseInputFlags reads rbook approve's --input NAME=VALUE flags (docs/approver-inputs.md,
// "rbook approve") into the map ApproveRequest.inputs carries; the control plane validates
// the values. Errors: a flag without "=" or with an empty name, a name given twice.
func ParseInputFlags(flags []string) (map[string]string, error) {
	if len(flags) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(flags))
	for _, fl := range flags {
		name, value, ok := strings.Cut(fl, "=")
		_, dup := out[name]
		switch {
		case !ok || name == "":
			return nil, fmt.Errorf("--input %q: write NAME=VALUE (e.g. --input target=blue)", fl)
		case dup:
			return nil, fmt.Errorf("--input %s is given twice; give each input once", name)
		}
		out[name] = value
	}
	return out, nil
}

// InputValuesLine is "Inputs: name=value, …" (sorted by name) for an approval decided with
// approver-input values, "" without any.
func InputValuesLine(a *rbookv1.Approval) string {
	if len(a.GetInputValues()) == 0 {
		return ""
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(a.GetInputValues())) {
		parts = append(parts, k+"="+a.GetInputValues()[k])
	}
	return "Inputs: " + strings.Join(parts, ", ")
}

// WritePlaybookStatus prints rbook playbook status: the run's line, its active nodes, epic
// and session, the node table (with iteration counts of nodes an older control plane does not
// list), the bindings and the error context.
func WritePlaybookStatus(out io.Writer, r *rbookv1.Run) error {
	fmt.Fprintf(out, "Run %s · %s %s · %s · started %s by %s\n", r.GetRunId(), termui.RunKindWord(r), r.GetName(), termui.StatusWord(r.GetKind(), r.GetStatus()), TS(r.GetStartedAt()), r.GetStartedBy())
	if r.GetCompletedAt() != nil {
		fmt.Fprintf(out, "Completed %s\n", TS(r.GetCompletedAt()))
	}
	p := r.GetPlaybook()
	if p == nil {
		fmt.Fprintln(out, "(not a playbook run: no nodes or bindings; see rbook get)")
		return nil
	}
	if a := p.GetActiveNodes(); len(a) > 0 {
		fmt.Fprintf(out, "Active nodes: %s\n", strings.Join(a, ", "))
	}
	if p.GetEpicId() != "" || p.GetSessionId() != "" {
		fmt.Fprintf(out, "Epic %s · session %s\n", orDash(p.GetEpicId()), orDash(p.GetSessionId()))
	}
	if err := writeNodes(out, p); err != nil {
		return err
	}
	fmt.Fprintln(out, "Bindings:")
	fmt.Fprintln(out, indentJSON(p.GetBindings()))
	if ec := r.GetErrorContext(); ec != "" {
		fmt.Fprintln(out, "Error context:")
		fmt.Fprintln(out, indentJSON(ec))
	}
	return nil
}

// writeNodes is the node table of rbook playbook status.
func writeNodes(out io.Writer, p *rbookv1.PlaybookRunDetails) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NODE\tTYPE\tSTATE\tRUNS\tSTARTED\tFINISHED\tNOTE")
	seen := map[string]bool{}
	for _, n := range p.GetNodes() {
		seen[n.GetNodeId()] = true
		note, _, _ := strings.Cut(n.GetNote(), "\n")
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", n.GetNodeId(), n.GetType(), n.GetStatus(), n.GetIterations(), TS(n.GetStartedAt()), TS(n.GetFinishedAt()), termui.CutRunes(note, termui.MaxNoteRunes))
	}
	// Iteration counts of nodes the node list does not carry (an older control plane).
	var rest []string
	for id := range p.GetIterationCounts() {
		if !seen[id] {
			rest = append(rest, id)
		}
	}
	slices.Sort(rest)
	for _, id := range rest {
		fmt.Fprintf(w, "%s\t-\t-\t%d\t-\t-\t\n", id, p.GetIterationCounts()[id])
	}
	return w.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// indentJSON indents a JSON text for people; text that is no JSON is shown as it is.
func indentJSON(s string) string {
	if s == "" {
		return "  {}"
	}
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return "  " + s
	}
	b, _ := json.MarshalIndent(v, "  ", "  ")
	return "  " + string(b)
}
