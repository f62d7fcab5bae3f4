package state

import (
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/runbook"
)

// The playbook half of the state file (docs/spec/playbooks.md, "Nodes"): a .cantbook run keeps the
// specification's state JSON (run_id, runbook_name = the playbook's name, run_status, …, evidence_pack)
// plus what a DAG needs: kind "playbook", bindings, iteration_counts and in_flight_nodes
// (several side-effecting nodes may run at once). The file is written with the same atomic
// sequence as a runbook's, so it is valid JSON after every write.

// KindPlaybook is State.Kind of a playbook run.
const KindPlaybook = "playbook"

// DefaultPlaybookStatePath is where a playbook's run is recorded unless --state-file names
// another file: .rbook/<playbook-name>.playbook.state.json (docs/playbooks.md, "Crash-resume").
func DefaultPlaybookStatePath(name string) string {
	return filepath.Join(".rbook", name+".playbook.state.json")
}

// applyPlaybook is apply for a playbook run. Unlike a runbook's, several nodes may be in
// flight at once: each side-effecting node's step_started adds it to InFlightNodes and its
// step_finished removes it (InFlight mirrors the first); every step_started counts in
// IterationCounts; a PASS whose evidence output is a JSON object becomes the node's bindings
// (the control plane derives playbook_runs.bindings the same way); a gate indicator is cleared
// only by its own node's transitions or a run-level one.
func applyPlaybook(s *State, t engine.Transition) (write bool, err error) {
	s.Seq = t.Seq
	if t.Kind != engine.TransitionRunInterrupted {
		s.Interrupted = nil
	}
	if t.StepIndex < 0 || (s.AwaitingConfirmation != nil && s.AwaitingConfirmation.StepName == t.StepName && t.Kind != engine.TransitionGateOpened) {
		s.AwaitingConfirmation = nil
	}
	write = true
	switch t.Kind {
	case engine.TransitionRunStarted:
		s.RunStatus = engine.RunInProgress
	case engine.TransitionStepStarted:
		s.CurrentStepIndex = t.StepIndex
		if s.IterationCounts == nil {
			s.IterationCounts = map[string]int{}
		}
		s.IterationCounts[t.StepName]++
		if runbook.StepType(t.StepType).SideEffecting() {
			s.InFlightNodes = slices.DeleteFunc(s.InFlightNodes, func(f InFlight) bool { return f.StepName == t.StepName })
			s.InFlightNodes = append(s.InFlightNodes, InFlight{StepIndex: t.StepIndex, StepName: t.StepName, StepType: t.StepType, StartedUTC: engine.FormatTime(t.Time)})
		} else {
			write = false
		}
	case engine.TransitionGateOpened:
		s.AwaitingConfirmation = &Gate{StepIndex: t.StepIndex, StepName: t.StepName, SinceUTC: engine.FormatTime(t.Time)}
	case engine.TransitionGateDecided:
		write = false
	case engine.TransitionStepFinished:
		if t.Evidence != nil {
			s.EvidencePack = append(s.EvidencePack, *t.Evidence)
			if t.Evidence.Status == engine.StatusPass {
				if v, ok := outputObject(t.Evidence.Output); ok {
					if s.Bindings == nil {
						s.Bindings = map[string]any{}
					}
					s.Bindings[t.StepName] = v
				}
			}
		}
		s.InFlightNodes = slices.DeleteFunc(s.InFlightNodes, func(f InFlight) bool { return f.StepName == t.StepName })
		if t.StepIndex >= 0 {
			s.LastCompletedStepIndex = t.StepIndex
		}
	case engine.TransitionRunFinished:
		if t.Evidence != nil {
			s.EvidencePack = append(s.EvidencePack, *t.Evidence)
		}
		s.InFlightNodes = nil
	case engine.TransitionRunInterrupted:
		s.Interrupted = &Interruption{AtUTC: engine.FormatTime(t.Time), Reason: t.Message}
	default:
		return false, fmt.Errorf("state: unknown transition kind %q", t.Kind)
	}
	s.InFlight = nil
	if len(s.InFlightNodes) > 0 {
		f := s.InFlightNodes[0]
		s.InFlight = &f
	} else {
		s.InFlightNodes = nil
	}
	if t.RunStatus != "" {
		s.RunStatus = t.RunStatus
	}
	if s.RunStatus.Final() {
		s.InFlight, s.InFlightNodes = nil, nil
		if s.CompletedUTC == "" {
			s.CompletedUTC = engine.FormatTime(t.Time)
		}
	}
	return write, nil
}

// outputObject parses an evidence output that is a JSON object (a node's Value).
func outputObject(out string) (map[string]any, bool) {
	if !strings.HasPrefix(strings.TrimSpace(out), "{") {
		return nil, false
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(out), &v); err != nil || v == nil {
		return nil, false
	}
	return v, true
}

// PlaybookOpenOptions tune OpenPlaybook.
type PlaybookOpenOptions struct {
	// Now is the clock for run ids and started_utc; nil means time.Now.
	Now func() time.Time
	// Lock is the caller's lock on the state file (stale temp files are removed under it).
	Lock *Lock
	// Inputs are the validated inputs (defaults applied): a fresh run's first bindings. A
	// resumed run keeps its recorded inputs and bindings and refuses given inputs that differ
	// from the recorded ones (*InputsChangedError).
	Inputs map[string]any
	// RerunNodes and SkipNodes are the operator's answer for nodes in unknown state (started,
	// no recorded outcome): run each again, or go on as if it had been skipped.
	RerunNodes, SkipNodes []string
	// PlaybookPath, EpicID and SessionID are recorded in a fresh run's state.
	PlaybookPath, EpicID, SessionID string
}

// PlaybookEditedError refuses to resume a playbook run whose .cantbook changed since it
// started (docs/playbooks.md, "Crash-resume"): both playbook hashes are named.
type PlaybookEditedError struct {
	RunID, Path, Recorded, Current string
}

func (e *PlaybookEditedError) Error() string {
	return fmt.Sprintf("run %s was started from playbook hash %s, but %s now has hash %s; resuming would run nodes nobody reviewed together. Restore the playbook, or move the state file aside to start a new run",
		e.RunID, e.Recorded, e.Path, e.Current)
}

// UnknownNodesError refuses to resume a playbook run with side-effecting nodes that started
// and have no recorded outcome (the rule of deploy steps, docs/runbooks.md, "State, resume and crashes"): each may or may not have
// taken effect, so the operator decides per node with --rerun-node or --skip-node.
type UnknownNodesError struct {
	RunID string
	Nodes []InFlight
}

func (e *UnknownNodesError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "node in unknown state: run %s has %d node(s) that started and whose outcome was never recorded, so each may or may not have taken effect:", e.RunID, len(e.Nodes))
	for _, f := range e.Nodes {
		fmt.Fprintf(&b, "\n  %s node '%s' started at %s", f.StepType, f.StepName, f.StartedUTC)
	}
	fmt.Fprintf(&b, "\nCheck what each did, then run the same command with --rerun-node ID (run it again) or --skip-node ID (go on as if it had been skipped) for each of them")
	return b.String()
}

// InputsChangedError refuses to resume a playbook run with inputs other than those it
// started with: the recorded bindings already hold values computed from them.
type InputsChangedError struct {
	RunID, Name string
	Recorded    any
	Given       any
}

func (e *InputsChangedError) Error() string {
	rec, _ := json.Marshal(e.Recorded)
	giv, _ := json.Marshal(e.Given)
	return fmt.Sprintf("run %s was started with input %s=%s, not %s; run the same command with the run's inputs to resume it (or move its state file aside to start a new run)", e.RunID, e.Name, rec, giv)
}

// OpenPlaybook is Open for a playbook (docs/playbooks.md, "Crash-resume"): it resumes the IN_PROGRESS run
// recorded at path, or prepares a fresh one (not written yet: the engine's run_started writes
// it). A resumed run keeps its bindings, iteration counts and evidence; Opened.SkipNodes lists
// the nodes the operator chose to skip. Errors: *CorruptError (not a playbook run, or another
// playbook's), *PlaybookEditedError, *UnknownNodesError, *InputsChangedError, an error naming
// a --rerun-node/--skip-node id that is not in unknown state or is given both answers, *NotWritableError (a final run's
// evidence pack could not be rebuilt), or a file-system error naming the path.
func OpenPlaybook(plan *runbook.Plan, path string, opts PlaybookOpenOptions) (*Opened, error) {
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	prev, err := readPrevious(plan, path, opts.Lock)
	if err != nil {
		return nil, err
	}
	if prev != nil && prev.RunStatus == engine.RunInProgress {
		if prev.Kind != KindPlaybook {
			return nil, &CorruptError{path, fmt.Sprintf("it holds an unfinished runbook run (%s of %q), not a playbook run; give the playbook its own --state-file", prev.RunID, prev.RunbookName)}
		}
		if prev.RunbookName != plan.Name {
			return nil, &CorruptError{path, fmt.Sprintf("it holds playbook %q, not %q; two playbooks must not share a state file", prev.RunbookName, plan.Name)}
		}
		if prev.RunbookHash != plan.ContentHash {
			return nil, &PlaybookEditedError{RunID: prev.RunID, Path: plan.Path, Recorded: prev.RunbookHash, Current: plan.ContentHash}
		}
		if err := checkAgainstPlan(path, prev, plan); err != nil {
			return nil, err
		}
		for _, k := range slices.Sorted(maps.Keys(opts.Inputs)) {
			if rec, ok := prev.Inputs[k]; ok && !sameJSON(rec, opts.Inputs[k]) {
				return nil, &InputsChangedError{RunID: prev.RunID, Name: k, Recorded: rec, Given: opts.Inputs[k]}
			}
		}
		inFlight := map[string]bool{}
		for _, f := range prev.InFlightNodes {
			inFlight[f.StepName] = true
		}
		answered := append(slices.Clone(opts.RerunNodes), opts.SkipNodes...)
		for _, id := range answered {
			if !inFlight[id] {
				return nil, fmt.Errorf("--rerun-node/--skip-node %s: node '%s' of run %s is not in unknown state (the nodes in unknown state: %s)", id, id, prev.RunID, nodeList(prev.InFlightNodes))
			}
		}
		for _, id := range opts.SkipNodes {
			if slices.Contains(opts.RerunNodes, id) {
				// Both answers for one node: neither may be guessed (the skip used to win
				// silently).
				return nil, fmt.Errorf("--rerun-node %s and --skip-node %s: node '%s' of run %s is given both answers; choose one (run it again, or go on as if it had been skipped)", id, id, id, prev.RunID)
			}
		}
		var unknown []InFlight
		for _, f := range prev.InFlightNodes {
			if !slices.Contains(answered, f.StepName) {
				unknown = append(unknown, f)
			}
		}
		if len(unknown) > 0 {
			return nil, &UnknownNodesError{RunID: prev.RunID, Nodes: unknown}
		}
		prev.InFlightNodes, prev.InFlight = nil, nil
		prev.TotalSteps = len(plan.Steps)
		if prev.OwnerID == "" || !sameWorkspace(prev, path) {
			prev.OwnerID = NewOwnerID()
		}
		prev.OwnerWorkspace = WorkspaceID(path)
		return &Opened{State: prev, Resumed: true, StartIndex: 0, SkipNodes: slices.Clone(opts.SkipNodes), path: path}, nil
	}
	if len(opts.RerunNodes)+len(opts.SkipNodes) > 0 {
		return nil, fmt.Errorf("--rerun-node/--skip-node answer for nodes of an unfinished run, but %s holds none", path)
	}
	t := now().UTC()
	taken := takenRunIDs(path, prev)
	id := PlaybookRunID(plan.Name, t)
	for taken(id) {
		id = NextRunID(id)
	}
	o := &Opened{path: path, taken: taken}
	if prev != nil {
		o.PrevPath = path + ".prev-" + prev.RunID
	}
	o.State = &State{
		RunID: id, RunbookName: plan.Name, RunStatus: engine.RunInProgress,
		CurrentStepIndex: 0, LastCompletedStepIndex: -1, TotalSteps: len(plan.Steps),
		EvidencePack: []engine.Evidence{}, StartedUTC: engine.FormatTime(t), SchemaHash8: plan.SchemaHash8,
		RunbookHash: plan.ContentHash, OwnerID: NewOwnerID(), OwnerWorkspace: WorkspaceID(path),
		Kind: KindPlaybook, PlaybookPath: opts.PlaybookPath, Bindings: maps.Clone(opts.Inputs), Inputs: maps.Clone(opts.Inputs),
		IterationCounts: map[string]int{}, EpicID: opts.EpicID, SessionID: opts.SessionID,
	}
	if o.State.Bindings == nil {
		o.State.Bindings = map[string]any{}
	}
	if owner := workspaceOwner(path, prev); owner != "" {
		o.State.OwnerID = owner
	}
	return o, nil
}

func nodeList(fs []InFlight) string {
	if len(fs) == 0 {
		return "none"
	}
	names := make([]string, len(fs))
	for i, f := range fs {
		names[i] = f.StepName
	}
	return strings.Join(names, ", ")
}

// sameJSON reports whether a and b encode to the same JSON (a recorded binding read back
// from the file is float64/string/bool; a given input may be json.Number or a string).
func sameJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	if err1 != nil || err2 != nil {
		return false
	}
	var u, v any
	if json.Unmarshal(x, &u) != nil || json.Unmarshal(y, &v) != nil {
		return false
	}
	ux, _ := json.Marshal(u)
	vy, _ := json.Marshal(v)
	return string(ux) == string(vy)
}
