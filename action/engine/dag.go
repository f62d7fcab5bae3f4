package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/rbookhq/rbook-action/action/runbook"
)

// The playbook policy of the one scheduler (docs/decisions/playbooks-on-one-engine.md;
// docs/spec/playbooks.md, "Semantics"). A node is ready when every dependency (Step.Depends) is PASS
// or SKIPPED by a when branch; ready nodes start in plan order, up to Engine.Concurrency at
// once. A node whose dependency FAILed or was not run is recorded SKIPPED "not run: …"
// without a step_started. Bindings hold the inputs at the top level and each node's output
// under its id. A failure goes, in order, to the node's on_failure.inject_into, the first
// matching error handler, else it fails the run: running nodes finish (and are recorded),
// nothing new starts, unstarted nodes are SKIPPED "not run: the run failed at 'x'".
//
// Resume (Start.Evidence): a node whose last entry is PASS or SKIPPED never runs again and a
// PASS entry's output is its binding again; a node whose last entry is FAIL or TIMED_OUT is
// handed to the failure handling again, with its iteration counts rebuilt from the entries
// (every PASS/FAIL/TIMED_OUT entry is one execution), so a resumed run stays bounded.

// Evidence output prefixes the engine writes and reads back on resume.
const (
	// WhenSkippedPrefix starts the output of a node a false edge when skipped; such a node
	// counts as done for its dependants.
	WhenSkippedPrefix = "skipped: when "
	// NotRunPrefix starts the output of a node that did not run because a dependency failed
	// or was not run, or because the run failed (docs/decisions/playbooks-on-one-engine.md).
	NotRunPrefix = "not run: "
	// ContractViolationPrefix starts the output of a node failed by a contract (docs/spec/playbooks.md, "Error handlers"); its error_handlers event is contract_violation.
	ContractViolationPrefix = "contract_violation: "
	// RetryNotePrefix starts the step_started message of a node a retry error handler runs
	// again: "retry (error handler on: <on>) after <event>[: <handler message>]" (docs/playbooks.md: the CLI prints it when the handler fires).
	RetryNotePrefix = "retry (error handler on: "
)

type nodeState int

const (
	nsPending nodeState = iota
	nsRunning
	nsPass
	nsWhenSkipped
	nsFailed
	nsNotRun
)

type dagFailure struct {
	node, event, message string
}

// dag is the playbook policy's state; only the scheduler goroutine touches it.
type dag struct {
	r        *run
	steps    []runbook.Step
	pb       *runbook.Playbook
	idx      map[string]int
	children [][]int
	state    []nodeState
	// attempts counts the times a node was taken to run (executed, or refused by a requires
	// contract): the iteration cap applies to it. execs counts executions (step_started).
	attempts, execs []int
	// paid marks a node whose next run was already counted in spent (a handler's re-run).
	paid []bool
	// spent counts node runs against budget: first runs and every re-run a handler asked for.
	spent, budget int
	bindings      map[string]any
	// errFor is the "error" binding an inject_hint target sees on its next run.
	errFor map[int]map[string]any
	// waitFor holds extra dependencies: a node handed back by inject_hint waits for its target.
	waitFor map[int][]int
	// note goes on a node's next step_started (why it runs again).
	note map[int]string
	// continued names the failures a continue handler let pass, for the final message.
	continued []string
	failing   *dagFailure
	// resumeFail are the nodes whose last recorded entry is a failure, with that entry.
	resumeFail []int
	lastFail   map[int]Evidence
	// lastPos is the position of each node's last entry in Start.Evidence (-1: none).
	lastPos []int
	// reads are the top-level bindings each node's templates name (nil: all of them, for an
	// approval node, whose policy context carries every binding); see nodeBindings.
	reads [][]string
}

func newDAG(r *run, st Start) *dag {
	plan := r.e.Plan
	n := len(plan.Steps)
	d := &dag{r: r, steps: plan.Steps, pb: plan.Playbook, idx: map[string]int{}, children: make([][]int, n),
		state: make([]nodeState, n), attempts: make([]int, n), execs: make([]int, n), paid: make([]bool, n),
		budget: runbook.RunBudgetPerNode * n, errFor: map[int]map[string]any{}, waitFor: map[int][]int{},
		note: map[int]string{}, lastFail: map[int]Evidence{}, lastPos: make([]int, n)}
	for i := range d.lastPos {
		d.lastPos[i] = -1
	}
	r.notRun = d.recordNotRun
	d.reads = make([][]string, n)
	for i, s := range plan.Steps {
		d.reads[i] = bindingReads(s)
	}
	if d.pb == nil {
		d.pb = &runbook.Playbook{}
	}
	d.bindings, _ = copyValue(st.Bindings).(map[string]any)
	if d.bindings == nil {
		d.bindings = map[string]any{}
	}
	for i, s := range d.steps {
		d.idx[s.Name] = i
		for _, dep := range s.Depends {
			if dep >= 0 && dep < n {
				d.children[dep] = append(d.children[dep], i)
			}
		}
	}
	for _, s := range d.steps {
		if s.Node != nil && len(s.Node.RewindTargets) > 0 {
			// Bound before the gate decides, so a rewind target's templates render on its
			// first run too (docs/push-back.md, "Bindings").
			d.bindings[s.Name] = map[string]any{PushBackFeedback: "", PushBackRedoFrom: "", PushBackIteration: 0}
		}
	}
	sentBack := map[int]string{} // approval node → the target of its last entry's push-back
	for pos, ev := range st.Evidence {
		i, ok := d.idx[ev.StepName]
		if !ok {
			continue
		}
		d.lastPos[i] = pos
		delete(sentBack, i)
		if t := redoFromOf(d.steps[i], ev); t != "" {
			sentBack[i] = t
			d.bindings[ev.StepName] = bindingOf(ev.Output)
		}
		switch ev.Status {
		case StatusPass:
			d.state[i] = nsPass
			d.bindings[ev.StepName] = bindingOf(ev.Output)
			d.attempts[i]++
			d.execs[i]++
		case StatusFail, StatusTimedOut:
			d.state[i] = nsFailed
			d.attempts[i]++
			if !strings.HasPrefix(ev.Output, ContractViolationPrefix+"requires") {
				d.execs[i]++
			}
			d.lastFail[i] = ev
		case StatusSkipped:
			if strings.HasPrefix(ev.Output, WhenSkippedPrefix) {
				d.state[i] = nsWhenSkipped
			} else {
				d.state[i] = nsNotRun
			}
		}
	}
	for i, target := range sentBack {
		// The push-back was recorded: the nodes it sent back that have not run since run again,
		// and the gate opens again when the run gets back to it.
		if t, ok := d.idx[target]; ok {
			for _, n := range d.rewindSet(t, i) {
				if d.lastPos[n] < d.lastPos[i] || n == i {
					d.state[n] = nsPending
				}
			}
		}
	}
	for i := range d.steps {
		d.spent += d.attempts[i]
		if d.state[i] == nsFailed {
			d.resumeFail = append(d.resumeFail, i)
		}
	}
	return d
}

func (d *dag) more() bool {
	for _, s := range d.state {
		if s == nsPending {
			return true
		}
	}
	return false
}

// capOf is how many times node i may run: max(cap, 1), cap the smallest of iteration_cap /
// max_iterations and on_failure.max_iterations that is set (docs/spec/playbooks.md, "Iterations").
func (d *dag) capOf(i int) int {
	node := d.steps[i].Node
	if node == nil {
		return runbook.DefaultIterationCap
	}
	c := node.IterationCap
	if node.OnFailure != nil && node.OnFailure.MaxIterations > 0 && node.OnFailure.MaxIterations < c {
		c = node.OnFailure.MaxIterations
	}
	return max(c, 1)
}

// deps are node i's dependencies: Step.Depends and, after an inject_hint, its target.
func (d *dag) deps(i int) []int {
	if w := d.waitFor[i]; len(w) > 0 {
		return append(append([]int(nil), d.steps[i].Depends...), w...)
	}
	return d.steps[i].Depends
}

func (d *dag) next(ctx context.Context, free int) (action, error) {
	for len(d.resumeFail) > 0 && d.failing == nil {
		i := d.resumeFail[0]
		d.resumeFail = d.resumeFail[1:]
		ev := d.lastFail[i]
		if node := d.steps[i].Node; node != nil && node.OnFailure != nil {
			// The inject was carried out before the restart: its target passed after this
			// failure, so only the failed node's re-run is left.
			if t, ok := d.idx[node.OnFailure.InjectInto]; ok && t != i && d.state[t] == nsPass && d.lastPos[t] > d.lastPos[i] {
				d.state[i] = nsPending
				d.note[i] = fmt.Sprintf("re-run after its inject target '%s' (on_failure.inject_into; resumed)", node.OnFailure.InjectInto)
				continue
			}
		}
		d.handle(i, d.eventOf(d.steps[i], ev.Status, "", ev.Output), shortText(ev.Output), bindingOf(ev.Output))
	}
	if d.failing != nil {
		return action{end: d.failEnd}, nil
	}
	var ready []int
	for changed := true; changed; {
		changed, ready = false, ready[:0]
		for i := range d.steps {
			if d.state[i] != nsPending {
				continue
			}
			if why, bad := d.badDep(i); bad {
				if err := d.skip(ctx, i, nsNotRun, why); err != nil {
					return action{}, err
				}
				changed = true
				continue
			}
			if slices.ContainsFunc(d.deps(i), func(dep int) bool { return d.state[dep] == nsPending || d.state[dep] == nsRunning }) {
				continue
			}
			if msg, skipped := d.whenFalse(i); skipped {
				if err := d.skip(ctx, i, nsWhenSkipped, msg); err != nil {
					return action{}, err
				}
				changed = true
				continue
			}
			if v := d.requiresViolation(i); v != "" {
				d.taken(i)
				d.execs[i]-- // refused: it never started
				d.state[i] = nsFailed
				if err := d.r.finish(ctx, d.steps[i], Outcome{Status: StatusFail, Output: v}, RunInProgress, ""); err != nil {
					return action{}, err
				}
				d.handle(i, runbook.EventContractViolation, v, v)
				if d.failing != nil {
					return action{end: d.failEnd}, nil
				}
				changed = true
				continue
			}
			ready = append(ready, i)
		}
	}
	var starts []task
	for _, i := range ready {
		if len(starts) >= free {
			break
		}
		starts = append(starts, d.start(i))
	}
	if len(starts) == 0 && !d.anyRunning() {
		var stuck []string
		for i, st := range d.state {
			if st == nsPending {
				stuck = append(stuck, "'"+d.steps[i].Name+"'")
			}
		}
		if len(stuck) > 0 { // cannot happen for a validated DAG; never hang on it
			d.fail("", "", fmt.Sprintf("node(s) %s wait for each other and cannot start", strings.Join(stuck, ", ")))
			return action{end: d.failEnd}, nil
		}
		return action{end: d.completeEnd}, nil
	}
	return action{starts: starts}, nil
}

// badDep reports whether a dependency of node i failed or was not run (the first such, in
// deps order) and, if so, the SKIPPED output that says so: "not run: dependency 'x' failed".
func (d *dag) badDep(i int) (string, bool) {
	for _, dep := range d.deps(i) {
		switch d.state[dep] {
		case nsFailed:
			return fmt.Sprintf("%sdependency '%s' failed", NotRunPrefix, d.steps[dep].Name), true
		case nsNotRun:
			return fmt.Sprintf("%sdependency '%s' was not run", NotRunPrefix, d.steps[dep].Name), true
		}
	}
	return "", false
}

func (d *dag) anyRunning() bool {
	for _, s := range d.state {
		if s == nsRunning {
			return true
		}
	}
	return false
}

// taken counts one run of node i (attempt, execution, and the budget unless a handler paid).
func (d *dag) taken(i int) {
	d.attempts[i]++
	d.execs[i]++
	if !d.paid[i] {
		d.spent++
	}
	d.paid[i] = false
}

// start hands node i to a worker with a private copy of the bindings.
func (d *dag) start(i int) task {
	r := d.r
	d.taken(i)
	d.state[i] = nsRunning
	delete(d.waitFor, i)
	step := d.steps[i]
	if step.TimeoutSeconds <= 0 {
		step.TimeoutSeconds = runbook.DefaultMaxStepTimeoutSeconds
	}
	rc := r.runContext(step)
	rc.Bindings = d.nodeBindings(i)
	if e, ok := d.errFor[i]; ok {
		rc.Bindings["error"] = e
		delete(d.errFor, i)
	}
	rc.Iteration = d.execs[i]
	t := task{step: step, rc: rc, message: d.note[i]}
	delete(d.note, i)
	if step.Type == runbook.TypeApproval {
		t.work = func(ctx context.Context, rc RunContext, emit emitFunc) Outcome {
			return r.approval(ctx, step, rc, emit, d.children)
		}
	} else {
		t.work = func(ctx context.Context, rc RunContext, _ emitFunc) Outcome { return r.execute(ctx, step, rc) }
	}
	return t
}

// skip records node i SKIPPED (no step_started) with the reason.
func (d *dag) skip(ctx context.Context, i int, st nodeState, why string) error {
	d.state[i] = st
	return d.r.finish(ctx, d.steps[i], Outcome{Status: StatusSkipped, Output: why}, RunInProgress, "")
}

func (d *dag) finished(ctx context.Context, t task, out Outcome) (endFunc, error) {
	i := t.step.Index
	id := t.step.Name
	output := nodeOutput(out)
	if out.Status == StatusPass {
		prev, had := d.bindings[id]
		d.bindings[id] = bindingOf(output)
		if v := d.ensuresViolation(i); v != "" {
			if had {
				d.bindings[id] = prev
			} else {
				delete(d.bindings, id)
			}
			out = Outcome{Status: StatusFail, Output: v, input: out.input}
			output = v
		}
	}
	rec := out
	rec.Output = output
	if out.Status == StatusPass || out.Status == StatusSkipped {
		d.state[i] = nsPass
		if out.Status == StatusSkipped {
			d.state[i] = nsWhenSkipped
		}
		return nil, d.r.finish(ctx, t.step, rec, RunInProgress, "")
	}
	d.state[i] = nsFailed
	if err := d.r.finish(ctx, t.step, rec, RunInProgress, ""); err != nil {
		return nil, err
	}
	if out.redoFrom != "" && d.failing == nil {
		d.bindings[id] = bindingOf(output)
		d.sendBack(i, out.redoFrom, bindingOf(output))
	} else if d.failing == nil {
		var errOut any = output
		if out.Value != nil {
			errOut = bindingOf(output)
		}
		d.handle(i, d.eventOf(t.step, out.Status, out.Event, output), shortText(output), errOut)
	}
	if d.failing != nil {
		return d.failEnd, nil
	}
	return nil, nil
}

// eventOf names the error_handlers event of a failure (docs/spec/playbooks.md, "Error handlers").
func (d *dag) eventOf(step runbook.Step, status StepStatus, event, output string) string {
	switch {
	case event != "":
		return event
	case strings.HasPrefix(output, ContractViolationPrefix):
		return runbook.EventContractViolation
	case status == StatusTimedOut && step.Type == runbook.TypeAgentic:
		return runbook.EventAgenticTimeout
	}
	return runbook.EventNodeFailed
}

// handler finds the error handler for node id's event: handlers named by the specific event
// first, then "<id>-failed", then "node_failed", each in file order. For
// iteration_cap_exceeded only a handler that names that event may re-run (retry,
// inject_hint); a "<id>-failed" or "node_failed" retry would ask for the run the cap refuses.
func (d *dag) handler(id, event string) *runbook.ErrorHandler {
	names := []string{id + runbook.EventFailedSuffix, runbook.EventNodeFailed}
	if event != runbook.EventNodeFailed {
		names = append([]string{event}, names...)
	}
	for k, name := range names {
		for j := range d.pb.ErrorHandlers {
			h := &d.pb.ErrorHandlers[j]
			if h.On != name {
				continue
			}
			if event == runbook.EventIterationCapExceeded && k > 0 && (h.Action == runbook.HandlerRetry || h.Action == runbook.HandlerInjectHint) {
				continue
			}
			return h
		}
	}
	return nil
}

// handle applies the failure handling order to failed node i (docs/spec/playbooks.md,
// "Semantics"): on_failure.inject_into, else the matching handler, else the run fails.
// A re-run the node's cap refuses becomes iteration_cap_exceeded; a re-run past the global
// budget fails the run.
func (d *dag) handle(i int, event, detail string, errOut any) {
	step := d.steps[i]
	id := step.Name
	node := step.Node
	if node == nil {
		node = &runbook.Node{ID: id}
	}
	inject := func() bool { return node.OnFailure != nil && node.OnFailure.InjectInto != "" }
	allowInject := event != runbook.EventIterationCapExceeded
	for {
		errCtx := map[string]any{"node": id, "event": event, "message": detail, "output": errOut}
		doInject := allowInject && inject()
		via := "on_failure.inject_into"
		if !doInject {
			h := d.handler(id, event)
			if h == nil {
				d.fail(id, event, fmt.Sprintf("node '%s' failed (%s) and no error handler took it: %s", id, event, detail))
				return
			}
			msg := d.render(h.Message, errCtx)
			switch h.Action {
			case runbook.HandlerAbort:
				if msg == "" {
					msg = fmt.Sprintf("aborted by the error handler on: %s", h.On)
				}
				d.fail(id, event, msg)
				return
			case runbook.HandlerContinue:
				d.continued = append(d.continued, joinNote(fmt.Sprintf("'%s' (%s)", id, event), msg))
				return
			case runbook.HandlerRetry:
				if !d.payRerun(i) {
					return
				}
				if d.attempts[i] >= d.capOf(i) {
					event, detail, allowInject = runbook.EventIterationCapExceeded, fmt.Sprintf("node '%s' reached its iteration cap of %d runs", id, d.capOf(i)), false
					continue
				}
				d.state[i] = nsPending
				d.note[i] = joinNote(fmt.Sprintf("%s%s) after %s", RetryNotePrefix, h.On, event), msg)
				return
			case runbook.HandlerInjectHint:
				if !inject() {
					d.fail(id, event, fmt.Sprintf("the error handler on: %s (line %d) is inject_hint, but node '%s' has no on_failure.inject_into", h.On, h.Line, id))
					return
				}
				via = "inject_hint (error handler on: " + h.On + ")"
				if msg != "" {
					via += ": " + msg
				}
			default:
				d.fail(id, event, fmt.Sprintf("the error handler on: %s has an unknown action %q", h.On, h.Action))
				return
			}
		}
		t, ok := d.idx[node.OnFailure.InjectInto]
		if !ok {
			d.fail(id, event, fmt.Sprintf("node '%s': on_failure.inject_into names an unknown node '%s'", id, node.OnFailure.InjectInto))
			return
		}
		if !d.payRerun(i) {
			return
		}
		if d.attempts[i] >= d.capOf(i) {
			event, detail, allowInject = runbook.EventIterationCapExceeded, fmt.Sprintf("node '%s' reached its iteration cap of %d runs", id, d.capOf(i)), false
			continue
		}
		switch {
		case t == i:
			d.note[i] = fmt.Sprintf("re-run with its own error in its bindings (%s)", via)
		case d.state[t] == nsRunning:
			// The target is running on another branch: the failed node runs again after it.
			d.waitFor[i] = []int{t}
			d.note[i] = fmt.Sprintf("re-run after its inject target '%s', which was running (%s)", d.steps[t].Name, via)
		default:
			if !d.payRerun(t) {
				return
			}
			if d.attempts[t] >= d.capOf(t) {
				event, detail, allowInject = runbook.EventIterationCapExceeded, fmt.Sprintf("inject target '%s' of node '%s' reached its iteration cap of %d runs", d.steps[t].Name, id, d.capOf(t)), false
				continue
			}
			d.state[t] = nsPending
			if !d.reaches(i, t) { // a target downstream of the failed node runs after it anyway
				d.waitFor[i] = []int{t}
			}
			d.note[t] = fmt.Sprintf("re-run with the error of '%s' (%s) in its bindings (%s)", id, event, via)
			d.note[i] = fmt.Sprintf("re-run after its inject target '%s' (%s)", d.steps[t].Name, via)
		}
		d.errFor[t] = errCtx
		d.state[i] = nsPending
		return
	}
}

// reaches reports whether node to depends, directly or not, on node from.
func (d *dag) reaches(from, to int) bool {
	seen := make([]bool, len(d.steps))
	stack := []int{from}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, c := range d.children[n] {
			if c == to {
				return true
			}
			if !seen[c] {
				seen[c] = true
				stack = append(stack, c)
			}
		}
	}
	return false
}

// payRerun counts a handler's re-run of node i against the global budget
// (docs/decisions/playbooks-on-one-engine.md). false: the budget is exhausted and the run fails.
func (d *dag) payRerun(i int) bool {
	d.spent++
	if d.spent > d.budget {
		d.fail(d.steps[i].Name, "execution_budget_exhausted", fmt.Sprintf("execution budget of %d node runs exhausted (%d × %d nodes) at node '%s'", d.budget, runbook.RunBudgetPerNode, len(d.steps), d.steps[i].Name))
		return false
	}
	d.paid[i] = true
	return true
}

func (d *dag) fail(node, event, msg string) {
	if d.failing == nil {
		d.failing = &dagFailure{node: node, event: event, message: msg}
	}
}

// render templates a handler message with the bindings and "error"; a template that cannot
// be rendered is kept as written, with why.
func (d *dag) render(tmpl string, errCtx map[string]any) string {
	if tmpl == "" {
		return ""
	}
	b := make(map[string]any, len(d.bindings)+1)
	for k, v := range d.bindings {
		b[k] = v
	}
	b["error"] = errCtx
	s, err := runbook.Render(tmpl, b)
	if err != nil {
		return fmt.Sprintf("%s (message template: %v)", tmpl, err)
	}
	return s
}

func joinNote(a, b string) string {
	if b == "" {
		return a
	}
	return a + ": " + b
}

// recordNotRun records every node that has not started SKIPPED with output why (a cancelled
// run's unstarted nodes; docs/playbooks.md).
func (d *dag) recordNotRun(ctx context.Context, why string) error {
	for i := range d.steps {
		if d.state[i] != nsPending {
			continue
		}
		if err := d.skip(ctx, i, nsNotRun, why); err != nil {
			return err
		}
	}
	return nil
}

// failEnd ends a failed run: unstarted nodes are recorded not run, then run_finished FAILED
// with the failure's message: "node 'x' failed (<event>) and no error handler took it: …",
// an abort handler's rendered message, or "execution budget of N node runs exhausted …".
func (d *dag) failEnd(ctx context.Context) (Result, error) {
	f := d.failing
	for i := range d.steps {
		if d.state[i] != nsPending {
			continue
		}
		why, bad := d.badDep(i)
		if !bad {
			why = fmt.Sprintf("%sthe run failed at '%s'", NotRunPrefix, f.node)
		}
		if err := d.skip(ctx, i, nsNotRun, why); err != nil {
			return Result{}, err
		}
	}
	// StepName names the node the run failed at (StepIndex stays -1: a run-level
	// transition); the control plane puts it in error_context.node.
	err := d.r.emit(ctx, Transition{Kind: TransitionRunFinished, StepIndex: -1, StepName: f.node, RunStatus: RunFailed, Message: f.message})
	return Result{Status: RunFailed, Message: f.message}, err
}

// completeEnd ends a run with nothing left to run: COMPLETED, naming the failures a continue
// handler let pass and every node that did not run because of them (docs/playbooks.md):
// "completed, but 1 node(s) failed and the run went on (error handler continue): 'x'
// (node_failed): <message>; not run because of it: 'y', 'z'".
func (d *dag) completeEnd(ctx context.Context) (Result, error) {
	msg := ""
	if len(d.continued) > 0 {
		msg = fmt.Sprintf("completed, but %d node(s) failed and the run went on (error handler continue): %s", len(d.continued), strings.Join(d.continued, ", "))
		var notRun []string
		for i, st := range d.state {
			if st == nsNotRun {
				notRun = append(notRun, "'"+d.steps[i].Name+"'")
			}
		}
		if len(notRun) > 0 {
			it := "it"
			if len(d.continued) > 1 {
				it = "them"
			}
			msg += fmt.Sprintf("; not run because of %s: %s", it, strings.Join(notRun, ", "))
		}
	}
	return d.r.end(ctx, RunCompleted, msg, nil)
}

// whenFalse evaluates the when of every edge into node i whose From is done (passed, or was
// itself skipped by a when branch); the first that is false skips i. A when whose From was
// skipped is evaluated too (docs/spec/playbooks.md, "Semantics"): its binding usually names that From's
// output, which does not exist, so a branch not taken does not run the nodes behind a
// condition on it (`exists`/`truthy`/`equals` on a missing binding are false).
func (d *dag) whenFalse(i int) (string, bool) {
	id := d.steps[i].Name
	for _, e := range d.pb.Edges {
		if e.To != id || e.When == nil {
			continue
		}
		if from, ok := d.idx[e.From]; !ok || (d.state[from] != nsPass && d.state[from] != nsWhenSkipped) {
			continue
		}
		if !evalWhen(e.When, d.bindings) {
			if e.When.Value == nil {
				return fmt.Sprintf("%s%s %s is false", WhenSkippedPrefix, e.When.Binding, e.When.Op), true
			}
			return fmt.Sprintf("%s%s %s %s is false", WhenSkippedPrefix, e.When.Binding, e.When.Op, compactJSON(e.When.Value)), true
		}
	}
	return "", false
}

// evalWhen applies one edge condition to the bindings (docs/spec/playbooks.md: equals | notEquals |
// exists | in | truthy on a binding path).
func evalWhen(w *runbook.When, bindings map[string]any) bool {
	v, ok := runbook.ResolvePath(bindings, w.Binding)
	want := true
	if b, isBool := w.Value.(bool); isBool {
		want = b
	}
	switch w.Op {
	case runbook.WhenExists:
		return ok == want
	case runbook.WhenTruthy:
		return (ok && runbook.Truthy(v)) == want
	case runbook.WhenEquals:
		return ok && looseEqual(v, w.Value)
	case runbook.WhenNotEquals:
		return !ok || !looseEqual(v, w.Value)
	case runbook.WhenIn:
		list, _ := w.Value.([]any)
		for _, x := range list {
			if ok && looseEqual(v, x) {
				return true
			}
		}
		return false
	}
	return false
}

func number(v any) (float64, bool) {
	switch x := v.(type) {
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	case float64:
		return x, true
	case float32:
		return float64(x), true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case int32:
		return float64(x), true
	case uint64:
		return float64(x), true
	}
	return 0, false
}

// looseEqual compares two JSON-like values: numbers by value whatever their Go type, the rest
// by their JSON form.
func looseEqual(a, b any) bool {
	if fa, ok := number(a); ok {
		fb, ok := number(b)
		return ok && fa == fb
	}
	if _, ok := number(b); ok {
		return false
	}
	return reflect.DeepEqual(bindingValue(a), bindingValue(b))
}

func bindingValue(v any) any {
	var out any
	dec := json.NewDecoder(strings.NewReader(compactJSON(v)))
	dec.UseNumber()
	if dec.Decode(&out) != nil {
		return v
	}
	return out
}

// fact reports whether a contract fact holds (docs/spec/playbooks.md, "Facts"): "file:PATH" when
// PATH exists (relative to Engine.WorkDir); a dotted name is a binding path; a bare name is a
// key of one of the outputs of the nodes in scope, else a top-level binding; truthy either way.
func (d *dag) fact(name string, scope []string) bool {
	if p, ok := strings.CutPrefix(name, "file:"); ok {
		if !filepath.IsAbs(p) {
			p = filepath.Join(d.r.e.WorkDir, p)
		}
		_, err := os.Stat(p)
		return err == nil
	}
	if strings.Contains(name, ".") {
		v, ok := runbook.ResolvePath(d.bindings, name)
		return ok && runbook.Truthy(v)
	}
	for _, id := range scope {
		if m, ok := d.bindings[id].(map[string]any); ok && runbook.Truthy(m[name]) {
			return true
		}
	}
	return runbook.Truthy(d.bindings[name])
}

// requiresViolation checks the requires of node i and of the edges crossed into it, before
// it runs; "" when they hold.
func (d *dag) requiresViolation(i int) string {
	id := d.steps[i].Name
	for _, e := range d.pb.Edges {
		if e.To != id {
			continue
		}
		if from, ok := d.idx[e.From]; !ok || d.state[from] != nsPass {
			continue
		}
		for _, f := range e.Requires {
			if !d.fact(f, []string{e.From}) {
				return fmt.Sprintf("%srequires '%s' of edge %s → %s does not hold: no truthy '%s' in %s's output or the bindings", ContractViolationPrefix, f, e.From, e.To, f, e.From)
			}
		}
	}
	if node := d.steps[i].Node; node != nil {
		var scope []string
		for _, dep := range d.steps[i].Depends {
			scope = append(scope, d.steps[dep].Name)
		}
		for _, f := range node.Requires {
			if !d.fact(f, scope) {
				return fmt.Sprintf("%srequires '%s' of node '%s' does not hold before it runs", ContractViolationPrefix, f, id)
			}
		}
	}
	return ""
}

// ensuresViolation checks node i's ensures and those of the edges into it, after it passed
// (its output is in the bindings); "" when they hold.
func (d *dag) ensuresViolation(i int) string {
	id := d.steps[i].Name
	if node := d.steps[i].Node; node != nil {
		for _, f := range node.Ensures {
			if !d.fact(f, []string{id}) {
				return fmt.Sprintf("%sensures '%s' of node '%s' does not hold after it ran: no truthy '%s' in its output or the bindings", ContractViolationPrefix, f, id, f)
			}
		}
	}
	for _, e := range d.pb.Edges {
		if e.To != id {
			continue
		}
		for _, f := range e.Ensures {
			if !d.fact(f, []string{id}) {
				return fmt.Sprintf("%sensures '%s' of edge %s → %s does not hold after '%s' ran: no truthy '%s' in its output or the bindings", ContractViolationPrefix, f, e.From, e.To, id, f)
			}
		}
	}
	return ""
}

// nodeOutput is the evidence output of a node's outcome: the compact JSON of Value when set,
// else Output (a failure's text).
func nodeOutput(out Outcome) string {
	if out.Value == nil {
		return out.Output
	}
	return compactJSON(out.Value)
}

// compactJSON marshals v without HTML escaping or a trailing newline.
func compactJSON(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprintf("%v", v)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// bindingOf is the binding an evidence output gives its node: the output parsed as a JSON
// object, else {"output": text}. A live run and a resumed one read the same.
func bindingOf(output string) map[string]any {
	dec := json.NewDecoder(strings.NewReader(output))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err == nil && m != nil && !dec.More() {
		return m
	}
	return map[string]any{"output": output}
}

// nodeBindings is node i's private deep copy of the bindings it can read: those its
// templates name (an executor renders only its node's templates), or all of them for a node
// whose reads are not known (approval nodes: the policy context carries every binding).
// Copying only what a node reads keeps a run linear in its nodes: a deep copy of every
// binding per node made a 1,000-node run quadratic (BenchmarkDAGScheduler1000Nodes).
func (d *dag) nodeBindings(i int) map[string]any {
	if d.reads[i] == nil {
		m, _ := copyValue(d.bindings).(map[string]any)
		return m
	}
	m := make(map[string]any, len(d.reads[i])+1)
	for _, k := range d.reads[i] {
		if v, ok := d.bindings[k]; ok {
			m[k] = copyValue(v)
		}
	}
	return m
}

// bindingReads lists the top-level bindings step's templates name (args, env, cwd, agentic
// inputs), each once; nil means every binding (approval nodes and runbook steps).
func bindingReads(step runbook.Step) []string {
	n := step.Node
	if n == nil || step.Type == runbook.TypeApproval {
		return nil
	}
	reads := []string{}
	add := func(tmpl string) {
		refs, _ := runbook.TemplateRefs(tmpl) // a malformed template fails in the executor
		for _, ref := range refs {
			root, _, _ := strings.Cut(ref, ".")
			if !slices.Contains(reads, root) {
				reads = append(reads, root)
			}
		}
	}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			add(x)
		case map[string]any:
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	for _, a := range n.Args {
		add(a)
	}
	for _, v := range n.Env {
		add(v)
	}
	add(n.Cwd)
	walk(n.Inputs)
	return reads
}

// copyValue deep-copies maps and lists (other values are immutable scalars).
func copyValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		if x == nil {
			return map[string]any(nil)
		}
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = copyValue(e)
		}
		return m
	case []any:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = copyValue(e)
		}
		return l
	case []string:
		return append([]string(nil), x...)
	}
	return v
}

func shortText(s string) string {
	const limit = 300
	s = strings.TrimSpace(s)
	if len(s) > limit {
		cut := limit
		for cut > 0 && (s[cut]&0xC0) == 0x80 {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

// approval runs a playbook approval node on the run's Gate, as a confirm step (docs/playbooks.md, "Approval nodes"): the prompt is rendered with the bindings, the GateRequest carries the node id and
// the PolicyContext, approved is PASS with {approved, by, reason, auto_passed, rule}, plus
// inputs (field name → value) when the node declares a form, a rejection is FAIL (error
// handlers apply). The evidence input is the rendered prompt.
// children are the plan's dependants of each node (dag.children, fixed once the run starts).
func (r *run) approval(ctx context.Context, step runbook.Step, rc RunContext, emit emitFunc, children [][]int) Outcome {
	node := step.Node
	if node == nil {
		node = &runbook.Node{ID: step.Name}
	}
	prompt, err := runbook.Render(node.Prompt, rc.Bindings)
	if err != nil {
		return Outcome{Status: StatusFail, Output: fmt.Sprintf("approval '%s': the prompt cannot be rendered: %v", step.Name, err)}
	}
	in := prompt
	if r.e.Gate == nil {
		return Outcome{Status: StatusFail, Output: "no gate is configured to decide approval nodes", input: &in}
	}
	sctx, cancel := context.WithTimeout(ctx, time.Duration(step.TimeoutSeconds)*time.Second)
	defer cancel()
	deadline, _ := sctx.Deadline()
	req := GateRequest{RunID: r.id, StepIndex: step.Index, StepName: step.Name, StepCount: len(r.e.Plan.Steps), Prompt: prompt,
		Deadline: deadline, PlanDigest: r.e.Plan.ContentHash, NodeID: step.Name, Policy: r.policyContext(step, prompt, rc.Bindings, children),
		Inputs: node.Form, RewindTargets: node.RewindTargets}
	out := r.await(ctx, sctx, step, rc, req, emit, func(d Decision, msg string) Outcome {
		v := map[string]any{"approved": d.Verdict == Approved, "by": d.By, "reason": d.Reason, "auto_passed": false, "rule": ""}
		if d.Policy != nil {
			v["auto_passed"], v["rule"] = d.Policy.AutoPassed, d.Policy.Rule
		}
		if len(node.Form) > 0 {
			// The values become the node's binding {{ <id>.inputs.<name> }} and are in its
			// evidence output (docs/approver-inputs.md, "Where the values go"); every declared
			// field is bound, "" when it has no value.
			in := map[string]any{}
			for _, f := range node.Form {
				in[f.Name] = d.InputValues[f.Name]
			}
			v["inputs"] = in
		}
		if len(node.RewindTargets) > 0 {
			pushBackValue(v, d, rc.Iteration)
		}
		if d.Verdict == Approved {
			return Outcome{Status: StatusPass, Output: msg, Value: v}
		}
		if d.RedoFrom != "" {
			if !slices.Contains(node.RewindTargets, d.RedoFrom) {
				// The control plane checks this; a gate that did not is no push-back.
				return Outcome{Status: StatusFail, Output: fmt.Sprintf("approval '%s' was sent back to '%s', which is not one of its rewind_targets (%s)",
					step.Name, d.RedoFrom, strings.Join(node.RewindTargets, ", "))}
			}
			return Outcome{Status: StatusFail, Output: msg, Value: v, redoFrom: d.RedoFrom}
		}
		return Outcome{Status: StatusFail, Output: msg, Value: v}
	})
	out.input = &in
	return out
}

// policyContext is what the auto-pass policy sees at approval node step (PolicyContextOf
// with the run's plan).
func (r *run) policyContext(step runbook.Step, prompt string, bindings map[string]any, children [][]int) *PolicyContext {
	return policyContextOf(r.e.Plan, step, prompt, bindings, children)
}

// PolicyContextOf is what the auto-pass policy sees at the approval node step of plan when it
// opens with bindings and its rendered prompt: the node (id, type, prompt, depends, and policy
// when the node has one: "require-human" pins it to a person), the bindings, the playbook, and the command lines and tools of the nodes the gate
// guards, reachable from it before the next approval node, with args rendered where their
// bindings exist already, else as written; a node's env assignments come first as K=V (sorted
// by key, values rendered likewise), so "PATH=/x ls" is what the policy sees for a node with
// env PATH. Before a run (rbook playbook validate, a run's start) the bindings are the inputs
// at most, so args that name node outputs stay as written.
func PolicyContextOf(plan *runbook.Plan, step runbook.Step, prompt string, bindings map[string]any) *PolicyContext {
	children := make([][]int, len(plan.Steps))
	for i, s := range plan.Steps {
		for _, dep := range s.Depends {
			if dep >= 0 && dep < len(plan.Steps) {
				children[dep] = append(children[dep], i)
			}
		}
	}
	return policyContextOf(plan, step, prompt, bindings, children)
}

func policyContextOf(plan *runbook.Plan, step runbook.Step, prompt string, bindings map[string]any, children [][]int) *PolicyContext {
	node := step.Node
	deps := []any{}
	if node != nil {
		for _, dep := range node.Depends {
			deps = append(deps, dep)
		}
	}
	pc := &PolicyContext{
		Node:     map[string]any{"id": step.Name, "type": string(step.Type), "prompt": prompt, "depends": deps},
		Bindings: bindings,
		Playbook: map[string]any{"name": plan.Name, "hash": plan.ContentHash, "version": ""},
		Commands: []string{},
		Tools:    []string{},
	}
	if node != nil && node.Policy != "" {
		// The control plane's evaluator honours it before any rule (approval.NodePolicyKey).
		pc.Node["policy"] = node.Policy
	}
	if plan.Playbook != nil {
		pc.Playbook["version"] = plan.Playbook.Version
	}
	guarded := make([]bool, len(plan.Steps))
	queue := append([]int(nil), children[step.Index]...)
	for len(queue) > 0 {
		c := queue[0]
		queue = queue[1:]
		if guarded[c] || plan.Steps[c].Type == runbook.TypeApproval {
			continue
		}
		guarded[c] = true
		queue = append(queue, children[c]...)
	}
	for i, s := range plan.Steps {
		if !guarded[i] || s.Node == nil {
			continue
		}
		switch s.Type {
		case runbook.TypeDeterministic:
			// The node's env goes in front as K=V (sorted by key), as a shell would show it:
			// PATH, GOFLAGS or GIT_CONFIG_* change what the command runs, so the policy must
			// see them (docs/decisions/auto-pass-policy.md: fail closed; a read-only rule never
			// matches such a line).
			var parts []string
			for _, k := range slices.Sorted(maps.Keys(s.Node.Env)) {
				v := s.Node.Env[k]
				if r, err := runbook.Render(v, bindings); err == nil {
					v = r
				}
				parts = append(parts, k+"="+v)
			}
			parts = append(parts, s.Node.Command)
			for _, a := range s.Node.Args {
				if v, err := runbook.Render(a, bindings); err == nil {
					a = v
				}
				parts = append(parts, a)
			}
			pc.Commands = append(pc.Commands, strings.Join(parts, " "))
		case runbook.TypeAgentic:
			pc.Tools = append(pc.Tools, strings.Trim(s.Node.Agent+"/"+s.Node.Skill, "/"))
		}
	}
	return pc
}

// WhenHolds reports whether edge condition w holds on bindings, exactly as the run decides
// it when the edge's From is done (docs/spec/playbooks.md, "Semantics"): a
// missing binding makes exists, truthy, equals and in false and notEquals true. rbook plan
// uses it on a playbook's inputs.
func WhenHolds(w *runbook.When, bindings map[string]any) bool { return evalWhen(w, bindings) }
