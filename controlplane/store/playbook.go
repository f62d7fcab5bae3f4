package store

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// The playbook projection (docs/spec/playbooks.md, "Table playbook_runs"; the
// control plane derives it from the transitions): for a run of kind playbook, RecordTransition keeps, in
// the transition's own transaction,
//   - bindings[node] = the step_finished evidence output parsed as a JSON object when its
//     status is PASS (a non-object output is kept as {"output": text}); a node's key is
//     written only by that node's own transitions, so no node overwrites another's output;
//   - iteration_counts[node] += 1 on each step_started;
//   - active_nodes / current_node: the nodes started and not finished (a node waiting at a
//     gate stays active), in step_index order; current_node is their ids joined by ",",
//     NULL when none;
//   - status paused while any active node's gate is open (gate_opened without gate_decided),
//     else running, until the run is final.

// MaxBindingsBytes caps a playbook run's stored bindings (the JSON text; 1 MiB as every JSON
// document of the store). A node output that would push the bindings over it is stored as
// {"omitted": "…"} naming its size instead (the executor keeps the full value in its own
// bindings and the evidence keeps the output), so the run row stays readable in one GetRun.
const MaxBindingsBytes = MaxTextBytes

// MaxNodeNoteBytes caps NodeState.Note (the last evidence output), bytes.
const MaxNodeNoteBytes = 1024

// activeNode is one entry of the active_nodes column (migration 0010).
type activeNode struct {
	Node  string `json:"node"`
	Index int    `json:"index"`
	Gate  bool   `json:"gate"`
}

// PlaybookProgress is what a playbook transition changed besides the progress columns, handed
// to watchers with Change.Progress (nil for runbook runs): the bindings and iteration counts as
// stored after it, and the active nodes in step_index order.
type PlaybookProgress struct {
	Bindings        json.RawMessage
	IterationCounts json.RawMessage
	ActiveNodes     []string
}

func parseActive(text string) ([]activeNode, error) {
	if text == "" {
		return nil, nil
	}
	var list []activeNode
	if err := json.Unmarshal([]byte(text), &list); err != nil {
		return nil, fmt.Errorf("store: active_nodes holds %q, not a JSON list: %w", truncateText(text, 80), err)
	}
	return list, nil
}

func activeNames(list []activeNode) []string {
	if len(list) == 0 {
		return nil
	}
	out := make([]string, len(list))
	for i, a := range list {
		out[i] = a.Node
	}
	return out
}

// applyPlaybook is RecordTransition's playbook projection: it updates run's active nodes,
// status and current node for t, and writes bindings and iteration_counts when t changes them.
// newStatus is RunStatusOf(t); run.Status is still the status before t. It returns what a
// watcher needs besides the progress.
func (w *writeTx) applyPlaybook(run *RunProgress, t Transition, newStatus RunStatus) (*PlaybookProgress, error) {
	active, err := parseActive(run.active)
	if err != nil {
		return nil, err
	}
	find := func() int {
		for i, a := range active {
			if a.Node == t.StepName {
				return i
			}
		}
		return -1
	}
	node := t.StepName != "" && t.StepIndex >= 0
	var setBinding json.RawMessage
	countStart := false
	switch {
	case !node:
	case t.Kind == KindStepStarted || t.Kind == KindGateOpened:
		i := find()
		if i < 0 {
			active = append(active, activeNode{Node: t.StepName, Index: t.StepIndex})
			i = len(active) - 1
		}
		active[i].Gate = t.Kind == KindGateOpened
		countStart = t.Kind == KindStepStarted
	case t.Kind == KindGateDecided:
		if i := find(); i >= 0 {
			active[i].Gate = false
		}
	case t.Kind == KindStepFinished:
		if i := find(); i >= 0 {
			active = append(active[:i], active[i+1:]...)
		}
		if t.Evidence != nil && t.Evidence.Status == StepPass {
			setBinding = nodeBinding(t.Evidence.Output)
		}
	}
	if t.Kind == KindRunInterrupted {
		// The job that waited is gone and its gates were withdrawn: no gate is open now.
		for i := range active {
			active[i].Gate = false
		}
	}
	sort.SliceStable(active, func(i, j int) bool { return active[i].Index < active[j].Index })

	final := run.Status.Final() || newStatus.Final()
	if final {
		active = nil
	}
	if !run.Status.Final() {
		if newStatus.Final() {
			run.Status = newStatus
		} else {
			run.Status = RunRunning
			for _, a := range active {
				if a.Gate {
					run.Status = RunPaused
				}
			}
		}
	}
	run.CurrentNode = strings.Join(activeNames(active), ",")
	if active == nil {
		active = []activeNode{}
	}
	text, err := json.Marshal(active)
	if err != nil {
		return nil, fmt.Errorf("store: active nodes: %w", err)
	}
	run.active = string(text)

	out := &PlaybookProgress{ActiveNodes: activeNames(active)}
	var bindings, counts string
	if err := w.queryRow(stmtSelectPlaybookBindings, t.RunID).Scan(&bindings, &counts); err != nil {
		return nil, fmt.Errorf("store: read bindings: %w", err)
	}
	if setBinding != nil {
		if bindings, err = w.objects.withBindingCached(t.RunID, bindings, t.StepName, setBinding); err != nil {
			return nil, err
		}
	}
	if countStart {
		if text, ok := w.objects.countStartCached(t.RunID, counts, t.StepName); ok {
			counts = text
		} else if counts, err = countStart1(t.RunID, counts, t.StepName); err != nil {
			return nil, err
		}
	}
	// One UPDATE of the run's row per transition (prepared statements): the row holds the
	// bindings, which grow with every finished node, so each rewrite of it costs.
	if setBinding != nil || countStart {
		if _, err := w.exec(stmtUpdatePlaybookNodes, run.active, bindings, counts, t.RunID); err != nil {
			return nil, fmt.Errorf("store: update bindings and active nodes: %w", err)
		}
	} else if _, err := w.exec(stmtUpdateActiveNodes, run.active, t.RunID); err != nil {
		return nil, fmt.Errorf("store: update active nodes: %w", err)
	}
	out.Bindings, out.IterationCounts = json.RawMessage(bindings), json.RawMessage(counts)
	return out, nil
}

// countStart1 adds one to counts[node] in the iteration counts text of run.
func countStart1(run, counts, node string) (string, error) {
	var m map[string]int
	if err := json.Unmarshal([]byte(counts), &m); err != nil {
		return "", fmt.Errorf("store: iteration_counts of run %q: %w", run, err)
	}
	if m == nil {
		m = map[string]int{}
	}
	m[node]++
	b, err := json.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("store: iteration counts: %w", err)
	}
	return string(b), nil
}

// nodeBinding is a PASS node's binding: its evidence output when that is a JSON object,
// else {"output": text} (docs/playbooks.md, "Inputs and bindings").
func nodeBinding(output string) json.RawMessage {
	trimmed := bytes.TrimSpace([]byte(output))
	if len(trimmed) > 0 && trimmed[0] == '{' && json.Valid(trimmed) {
		var buf bytes.Buffer
		if json.Compact(&buf, trimmed) == nil {
			return buf.Bytes()
		}
	}
	b, _ := json.Marshal(map[string]string{"output": output}) // cannot fail: a string
	return b
}

// withBinding sets bindings[key] = value in the bindings JSON object text; a value that would
// take the bindings over MaxBindingsBytes is replaced by an {"omitted": …} note.
func withBinding(bindings, key string, value json.RawMessage) (string, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(bindings), &m); err != nil {
		return "", fmt.Errorf("store: bindings are not a JSON object: %w", err)
	}
	if m == nil {
		m = map[string]json.RawMessage{}
	}
	old := m[key]
	m[key] = value
	b, err := json.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("store: bindings: %w", err)
	}
	if len(b) > MaxBindingsBytes {
		note, _ := json.Marshal(map[string]string{"omitted": fmt.Sprintf(
			"the output of %d bytes would take the run's bindings over %d bytes; the evidence has it", len(value), MaxBindingsBytes)})
		m[key] = note
		if b, err = json.Marshal(m); err != nil {
			return "", fmt.Errorf("store: bindings: %w", err)
		}
		if len(b) > MaxBindingsBytes {
			m[key] = old // even the note does not fit: keep what was there
			if old == nil {
				delete(m, key)
			}
			if b, err = json.Marshal(m); err != nil {
				return "", fmt.Errorf("store: bindings: %w", err)
			}
		}
	}
	return string(b), nil
}

// playbookErrorContext is a failed playbook run's error_context: errorContext's fields plus
// "node", the node the run failed at: the transition's node, else the node of the run's
// last FAIL or TIMED_OUT step_finished ("" when none).
func (w *writeTx) playbookErrorContext(t Transition) (json.RawMessage, error) {
	base := errorContext(t)
	node := t.StepName
	if node == "" {
		err := w.readRow(`SELECT step_name FROM run_transitions WHERE run_id = ? AND kind = 'step_finished'
			AND status IN ('FAIL', 'TIMED_OUT') ORDER BY seq DESC LIMIT 1`, t.RunID).Scan(&node)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("store: read failed node: %w", err)
		}
	}
	var m map[string]any
	if err := json.Unmarshal(base, &m); err != nil {
		return nil, err
	}
	m["node"] = node
	return json.Marshal(m)
}

// NodeState is one playbook node's state derived from a run's transitions (the proto's
// NodeState). Status is "running" (started, not finished), "waiting" (its
// gate is open), or the evidence status of its last step_finished ("PASS", "FAIL",
// "TIMED_OUT", "SKIPPED"). The store knows only what was recorded: a node that never appeared
// in a transition has no NodeState (it is not listed as "pending").
type NodeState struct {
	NodeID string
	// Type is the node's step_type ("deterministic", "agentic", "approval").
	Type       string
	Status     string
	Index      int
	Iterations int
	// StartedAt is its last step_started's time (executor clock), FinishedAt its last
	// step_finished's when that came after it; zero otherwise.
	StartedAt, FinishedAt time.Time
	// Note is the last evidence output, at most MaxNodeNoteBytes.
	Note string
}

// NodeTracker derives NodeStates from transitions applied in seq order (GetRun and WatchRun
// of playbook runs). The zero value is ready to use.
type NodeTracker struct {
	byID map[string]*NodeState
}

// Apply folds one transition in; run-level transitions (step_index -1 or no step name) are
// ignored.
func (nt *NodeTracker) Apply(t Transition) {
	if t.StepName == "" || t.StepIndex < 0 {
		return
	}
	if nt.byID == nil {
		nt.byID = map[string]*NodeState{}
	}
	n := nt.byID[t.StepName]
	if n == nil {
		n = &NodeState{NodeID: t.StepName, Index: t.StepIndex, Status: "running"}
		nt.byID[t.StepName] = n
	}
	if n.Type == "" || t.StepType != "" {
		if t.StepType != "" {
			n.Type = t.StepType
		} else if t.Evidence != nil {
			n.Type = t.Evidence.Type
		}
	}
	switch t.Kind {
	case KindStepStarted:
		n.Status, n.Iterations, n.StartedAt, n.FinishedAt = "running", n.Iterations+1, t.At, time.Time{}
	case KindGateOpened:
		n.Status = "waiting"
	case KindGateDecided:
		n.Status = "running"
	case KindStepFinished:
		if t.Evidence != nil {
			n.Status = string(t.Evidence.Status)
			n.Note = truncateText(t.Evidence.Output, MaxNodeNoteBytes-len("…"))
		}
		n.FinishedAt = t.At
	}
}

// States returns the nodes seen so far in step_index order.
func (nt *NodeTracker) States() []NodeState {
	out := make([]NodeState, 0, len(nt.byID))
	for _, n := range nt.byID {
		out = append(out, *n)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Index != out[j].Index {
			return out[i].Index < out[j].Index
		}
		return out[i].NodeID < out[j].NodeID
	})
	return out
}

// NodeStates derives the NodeStates of ts (a run's transitions in seq order).
func NodeStates(ts []Transition) []NodeState {
	var nt NodeTracker
	for _, t := range ts {
		nt.Apply(t)
	}
	return nt.States()
}

// RunWithNodes returns the run row and, for a playbook run, Run.Nodes derived from all its
// transitions (NodeStates), read from one snapshot; it reads only the columns NodeState needs
// and at most MaxNodeNoteBytes of each output. Errors: ErrNotFound, storage errors.
func (s *Store) RunWithNodes(ctx context.Context, runID string) (Run, error) {
	tx, err := s.reader.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return Run{}, fmt.Errorf("store: begin read: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only
	run, err := scanRun(tx.QueryRowContext(ctx, "SELECT "+runColumns+" FROM playbook_runs WHERE run_id = ?", runID))
	if errors.Is(err, sql.ErrNoRows) {
		return Run{}, fmt.Errorf("%w: run %q", ErrNotFound, runID)
	}
	if err != nil {
		return Run{}, fmt.Errorf("store: read run: %w", err)
	}
	if run.Kind != KindPlaybook {
		return run, nil
	}
	rows, err := tx.QueryContext(ctx, `SELECT kind, step_index, step_name, step_type, status, substr(output, 1, ?),
		evidence_type, at FROM run_transitions WHERE run_id = ? AND step_index >= 0 AND step_name <> '' ORDER BY seq`,
		MaxNodeNoteBytes+1, runID)
	if err != nil {
		return Run{}, fmt.Errorf("store: read transitions: %w", err)
	}
	defer rows.Close()
	var nt NodeTracker
	for rows.Next() {
		var (
			t                          Transition
			kind                       string
			status, output, evType, at sql.NullString
		)
		if err := rows.Scan(&kind, &t.StepIndex, &t.StepName, &t.StepType, &status, &output, &evType, &at); err != nil {
			return Run{}, fmt.Errorf("store: read transitions: %w", err)
		}
		t.Kind = TransitionKind(kind)
		if t.At, err = parseTime("at", at); err != nil {
			return Run{}, err
		}
		if status.Valid {
			t.Evidence = &Evidence{Status: StepStatus(status.String), Output: output.String, Type: evType.String}
		}
		nt.Apply(t)
	}
	if err := rows.Err(); err != nil {
		return Run{}, fmt.Errorf("store: read transitions: %w", err)
	}
	run.Nodes = nt.States()
	return run, nil
}
