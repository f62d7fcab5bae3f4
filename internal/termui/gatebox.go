package termui

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/steps"
)

// maxBoxText is the widest line inside the gate box (runes); longer text is wrapped.
const maxBoxText = 72

// maxPromptLines is how many lines of an approval node's rendered prompt the terminal box
// shows (after wrapping at maxBoxText runes); a longer prompt ends with a "…" line, and the
// whole prompt stays in the node's evidence input.
const maxPromptLines = 12

// GateBox draws a gate as a box for a terminal (stderr, where the terminal gate asks): for a
// runbook's confirm step or a playbook's approval node (playbook, without a node id) the step,
// the one deadline (steps.DeadlineText) and the three answers; for a playbook approval node
// with an id (req.NodeID) its prompt too (ApprovalBox). color paints the borders and title.
func GateBox(req engine.GateRequest, playbook, color bool) string {
	if req.NodeID != "" {
		return ApprovalBox(req, color)
	}
	name := CutRunes(steps.CleanInput(req.StepName), MaxNameColumn)
	title := fmt.Sprintf(" Confirm gate · step %d of %d · %s ", req.StepIndex+1, req.StepCount, name)
	onFail := "fail the gate"
	if req.OnFail != "" {
		onFail += "; on_fail: " + req.OnFail
	}
	var body []string
	if playbook {
		// A playbook's approval node: its words, not a runbook step's.
		title = fmt.Sprintf(" Approval node · node %d of %d · %s ", req.StepIndex+1, req.StepCount, name)
		body = append(body, Wrap(fmt.Sprintf("Run %s is paused at this approval node. The gate %s.", req.RunID, steps.DeadlineText(req, time.Now())), maxBoxText)...)
		body = append(body, "",
			"  yes, confirm    approve the node; the run goes on",
			"  cancel          cancel the run",
			"  anything else   reject the node (it fails)")
	} else {
		body = append(body, Wrap(fmt.Sprintf("Run %s is AWAITING_CONFIRMATION. The gate %s.", req.RunID, steps.DeadlineText(req, time.Now())), maxBoxText)...)
		body = append(body, "",
			"  yes, confirm    continue the run",
			"  cancel          cancel the run (you confirm the deployment next)",
			"  anything else   "+onFail)
	}
	return Box(title, append(body, pageLines(req)...), color)
}

// ApprovalBox draws a playbook approval node's gate as a box for a terminal: the node, its
// rendered prompt (cleaned of control characters, wrapped, at most maxPromptLines lines), the
// one deadline, and what each answer leads to (approve: the run goes on; reject: the node
// fails and the playbook's error handlers apply).
func ApprovalBox(req engine.GateRequest, color bool) string {
	id := CutRunes(steps.CleanInput(req.NodeID), MaxNameColumn)
	title := fmt.Sprintf(" Approval · node '%s' ", id)
	var body []string
	var prompt []string
	for _, l := range strings.Split(strings.TrimRight(req.Prompt, "\n"), "\n") {
		if l = strings.TrimRight(steps.CleanInput(l), " "); l == "" {
			prompt = append(prompt, "")
			continue
		}
		prompt = append(prompt, Wrap(l, maxBoxText)...)
	}
	if len(prompt) > maxPromptLines {
		prompt = append(prompt[:maxPromptLines-1], "… (the whole prompt is in the node's evidence input)")
	}
	if strings.TrimSpace(req.Prompt) != "" {
		body = append(body, prompt...)
		body = append(body, "")
	}
	body = append(body, Wrap(fmt.Sprintf("Run %s is paused at approval node '%s'. The approval %s.", req.RunID, id, steps.DeadlineText(req, time.Now())), maxBoxText)...)
	body = append(body, "",
		"  yes, approve    approve: the nodes after '"+id+"' run",
		"  cancel          cancel the run",
		"  anything else   reject: node '"+id+"' fails; the playbook's error",
		"                  handlers apply (without one, the run fails)")
	return Box(title, append(body, pageLines(req)...), color)
}

// pageLines are the gate box's last lines when the gate has a page on the console
// (GateRequest.ApprovalURL; docs/console-links.md): a blank line and where to decide it in a
// browser. The URL is one word, never wrapped.
func pageLines(req engine.GateRequest) []string {
	if req.ApprovalURL == "" {
		return nil
	}
	return []string{"", "Or decide it in a browser: " + steps.CleanInput(req.ApprovalURL)}
}

// Box draws a box: a leading blank line, title (bold) in the top border, one line of body a
// row, padded to the widest line plus 2 runes; the borders cyan when color.
func Box(title string, body []string, color bool) string {
	width := utf8.RuneCountInString(title) + 2
	for _, l := range body {
		width = max(width, utf8.RuneCountInString(l)+2)
	}
	border := func(s string) string { return SGR(color, SGRCyan, s) }
	var b strings.Builder
	b.WriteString("\n" + border("╭─") + SGR(color, SGRBold, title) + border(strings.Repeat("─", width-1-utf8.RuneCountInString(title))+"╮") + "\n")
	for _, l := range body {
		b.WriteString(border("│") + " " + PadRunes(l, width-2) + " " + border("│") + "\n")
	}
	b.WriteString(border("╰"+strings.Repeat("─", width)+"╯") + "\n")
	return b.String()
}
