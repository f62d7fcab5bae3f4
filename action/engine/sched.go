package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/rbookhq/rbook-action/action/runbook"
)

// The one scheduler (docs/decisions/playbooks-on-one-engine.md). Both plan kinds run through schedule: a
// ready queue a policy fills, workers that execute one step each in their own goroutine, and
// the scheduler goroutine, which alone emits transitions (so Seq is strictly ordered and
// recorders are called from one goroutine). A worker that must record something while it runs
// (a gate's gate_opened and gate_decided) asks the scheduler to emit it and waits for the
// answer. The runbook's on_fail table with docs/decisions/rollback-compensation.md compensation (chain, below) and the playbook's
// error handlers (dag, dag.go) are the two policies.

// emitFunc records a transition; a worker's emitFunc goes through the scheduler goroutine.
type emitFunc func(ctx context.Context, t Transition) error

// endFunc ends the run: it writes the last records and returns the Result.
type endFunc func(ctx context.Context) (Result, error)

// task is one step handed to a worker.
type task struct {
	step runbook.Step
	rc   RunContext
	// message and rollbackFor go on the step's step_started.
	message, rollbackFor string
	work                 func(ctx context.Context, rc RunContext, emit emitFunc) Outcome
}

// action is what a policy asks the scheduler to do next.
type action struct {
	// again: the policy recorded something (a skipped step) and wants to be asked again.
	again bool
	// starts are the steps to start now (at most the free slots).
	starts []task
	// end, when set, ends the run once no worker runs any more.
	end endFunc
}

// policy decides what runs and what a step's outcome means.
type policy interface {
	// more reports whether steps are left to start (a cancel is only an interruption then).
	more() bool
	// next is called when no end is pending; free is how many workers may start (≥ 1).
	next(ctx context.Context, free int) (action, error)
	// finished handles a worker's outcome (not for halts, cancels, and interrupted steps).
	// A non-nil endFunc ends the run once the other workers are done.
	finished(ctx context.Context, t task, out Outcome) (endFunc, error)
}

type workerMsg struct {
	t   task
	out Outcome
	// req and ack: a worker's request to emit a transition, answered on ack.
	req *Transition
	ack chan error
}

// errSchedulerGone is what a worker's emit returns after the scheduler stopped (a recorder failed).
var errSchedulerGone = errors.New("the run stopped")

// schedule is the one loop: fill the ready queue, dispatch, emit, apply the policy.
func (r *run) schedule(ctx context.Context, pol policy, limit int) (Result, error) {
	if limit < 1 {
		limit = 1
	}
	wctx, wcancel := context.WithCancel(ctx)
	quit := make(chan struct{})
	defer close(quit)
	defer wcancel()
	ch := make(chan workerMsg)
	running := map[int]runbook.Step{}
	var order []int // running step indexes, in start order
	var interrupted []runbook.Step
	var pending endFunc
	remove := func(idx int) {
		delete(running, idx)
		for k, v := range order {
			if v == idx {
				order = append(order[:k], order[k+1:]...)
				break
			}
		}
	}
	for {
		if pending != nil && len(running) == 0 {
			return pending(ctx)
		}
		if ctx.Err() != nil && (len(running) > 0 || len(interrupted) > 0 || pol.more()) {
			for _, idx := range order {
				interrupted = append(interrupted, running[idx])
			}
			for len(running) > 0 { // the workers' contexts are cancelled: let them return
				if err := r.flush(ctx); err != nil {
					return Result{}, err
				}
				m := <-ch
				if m.req != nil {
					m.ack <- r.emitFlushed(ctx, *m.req)
					continue
				}
				remove(m.t.step.Index)
			}
			slices.SortFunc(interrupted, func(a, b runbook.Step) int { return a.Index - b.Index })
			res, _, err := r.stopped(ctx, interrupted)
			return res, err
		}
		if pending == nil {
			act, err := pol.next(ctx, limit-len(running))
			if err != nil {
				return Result{}, err
			}
			if act.again {
				continue
			}
			if act.end != nil {
				pending = act.end
				continue
			}
			for _, t := range act.starts {
				if err := r.emit(ctx, Transition{Kind: TransitionStepStarted, StepIndex: t.step.Index, StepName: t.step.Name, StepType: string(t.step.Type), RunStatus: RunInProgress, RollbackFor: t.rollbackFor, Message: t.message}); err != nil {
					return Result{}, err
				}
				running[t.step.Index] = t.step
				order = append(order, t.step.Index)
			}
			// The starts (and what was recorded before them: the previous step's finish)
			// are durable before any of the steps runs.
			if err := r.flush(ctx); err != nil {
				return Result{}, err
			}
			for _, t := range act.starts {
				go func(t task) {
					emit := func(_ context.Context, tr Transition) error {
						ack := make(chan error, 1)
						select {
						case ch <- workerMsg{req: &tr, ack: ack}:
						case <-quit:
							return errSchedulerGone
						}
						select {
						case err := <-ack:
							return err
						case <-quit:
							return errSchedulerGone
						}
					}
					out := func() (out Outcome) {
						defer func() {
							if v := recover(); v != nil {
								out = panicOutcome("step", v)
							}
						}()
						return t.work(wctx, t.rc, emit)
					}()
					select {
					case ch <- workerMsg{t: t, out: out}:
					case <-quit:
					}
				}(t)
			}
			if len(running) == 0 {
				return Result{}, errors.New("engine: the scheduler has nothing to run and no end (a policy bug)")
			}
		}
		if err := r.flush(ctx); err != nil { // nothing recorded waits on a step's end
			return Result{}, err
		}
		m := <-ch
		for m.req != nil { // a running gate's transition: record it and keep waiting
			m.ack <- r.emitFlushed(ctx, *m.req)
			m = <-ch
		}
		remove(m.t.step.Index)
		if ctx.Err() != nil {
			interrupted = append(interrupted, m.t.step)
			continue
		}
		out := m.out
		if out.halt != nil {
			if pending == nil {
				halt := out.halt
				pending = func(context.Context) (Result, error) {
					return Result{Status: RunInProgress, Message: halt.Error()}, halt
				}
			}
			continue
		}
		if out.Cancel {
			if pending == nil {
				by := "user at the gate"
				if r.e.Plan.Kind == runbook.KindPlaybook {
					r.cancelAt = []string{m.t.step.Name}
					if out.Output != "" {
						by = out.Output
					}
				}
				pending = func(ctx context.Context) (Result, error) { return r.cancel(ctx, by) }
			}
			continue
		}
		end, err := pol.finished(ctx, m.t, out)
		if err != nil {
			return Result{}, err
		}
		if end != nil && pending == nil {
			pending = end
		}
	}
}

// chain is the runbook policy: one step at a time in file order, the specification's on_fail table
// (halt, continue, rollback) and docs/decisions/rollback-compensation.md compensation (docs/spec/runbooks.md, "Step 5").
type chain struct {
	r *run
	i int
}

func (c *chain) more() bool { return c.i < len(c.r.e.Plan.Steps) }

func (c *chain) next(ctx context.Context, _ int) (action, error) {
	r := c.r
	steps := r.e.Plan.Steps
	if c.i >= len(steps) {
		return action{end: func(ctx context.Context) (Result, error) {
			return r.end(ctx, RunCompleted, r.continuedFailures(), nil)
		}}, nil
	}
	step := steps[c.i]
	c.i++
	if step.Type == runbook.TypeRollback {
		return action{again: true}, r.finish(ctx, step, Outcome{Status: StatusSkipped, Output: rollbackOnlyNote}, RunInProgress, "")
	}
	if step.Input == nil && step.Type != runbook.TypeConfirm {
		out := Outcome{Status: StatusSkipped, Output: "kql_or_template is missing; nothing to run"}
		return action{again: true}, r.finish(ctx, step, out, RunInProgress, "")
	}
	t := task{step: step, rc: r.runContext(step)}
	if step.Type == runbook.TypeConfirm {
		t.work = func(ctx context.Context, rc RunContext, emit emitFunc) Outcome { return r.confirm(ctx, step, rc, emit) }
	} else {
		t.work = func(ctx context.Context, rc RunContext, _ emitFunc) Outcome { return r.execute(ctx, step, rc) }
	}
	return action{starts: []task{t}}, nil
}

func (c *chain) finished(ctx context.Context, t task, out Outcome) (endFunc, error) {
	r, step := c.r, t.step
	if out.DeployName != "" {
		r.lastDep = out.DeployName
	}
	if out.Status != StatusFail && out.Status != StatusTimedOut {
		return nil, r.finish(ctx, step, out, RunInProgress, "")
	}
	why := fmt.Sprintf("step '%s' ended %s; on_fail: %s", step.Name, out.Status, step.OnFail)
	switch step.OnFail {
	case runbook.OnFailContinue:
		return nil, r.finish(ctx, step, out, RunInProgress, "")
	case runbook.OnFailRollback:
		if err := r.finish(ctx, step, out, RunInProgress, step.Name); err != nil {
			return nil, err
		}
		return func(ctx context.Context) (Result, error) { return r.compensate(ctx, step.Name, RunFailed) }, nil
	default: // halt
		if err := r.finish(ctx, step, out, RunFailed, ""); err != nil {
			return nil, err
		}
		return func(ctx context.Context) (Result, error) { return r.end(ctx, RunFailed, why, nil) }, nil
	}
}

// interruptMessage says which steps a signal stopped.
func interruptMessage(cause string, steps []runbook.Step) string {
	if len(steps) == 1 {
		return fmt.Sprintf("%s during step '%s' (index %d); the step was stopped", cause, steps[0].Name, steps[0].Index)
	}
	names := make([]string, len(steps))
	for i, s := range steps {
		names[i] = fmt.Sprintf("'%s' (index %d)", s.Name, s.Index)
	}
	return fmt.Sprintf("%s during steps %s; the steps were stopped", cause, strings.Join(names, ", "))
}
