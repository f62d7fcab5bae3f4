package cpclient

import (
	"context"

	"github.com/rbookhq/rbook-action/action/engine"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// DecidedGate decides the paused gate of a resumed run once, with the decision the control
// plane already holds (`rbook resume`, docs/approvals.md, "Pause mode"), and hands every other gate to
// Next. When Next is the control plane's gate, its Decided hook is told the approval (the
// runner output's approval-id, approved-by and Gates table).
type DecidedGate struct {
	// StepIndex is the paused gate's step; Approval its decided approval; Decision and Err
	// what the gate returns (Err wraps context.DeadlineExceeded for a gate that timed out).
	StepIndex int
	Approval  *rbookv1.Approval
	Decision  engine.Decision
	Err       error
	Next      engine.Gate
	used      bool
}

// Await implements engine.Gate.
func (d *DecidedGate) Await(ctx context.Context, req engine.GateRequest) (engine.Decision, error) {
	if !d.used && req.StepIndex == d.StepIndex {
		d.used = true
		if cg, ok := d.Next.(*Gate); ok && cg.Decided != nil {
			cg.Decided(d.Approval)
		}
		return d.Decision, d.Err
	}
	return d.Next.Await(ctx, req)
}

// HumanNoticeGate is a playbook's control-plane gate that says when an approval node waits
// for a person: each Await runs on its own copy of CP whose Announce — called only when the
// gate opened pending, never for one the server's auto-pass policy approved at once — first
// calls Human with that request. CP's other hooks (a runner's Opened, set on CP before each
// Await) are copied with it.
type HumanNoticeGate struct {
	CP    *Gate
	Human func(engine.GateRequest)
}

// Await implements engine.Gate.
func (g *HumanNoticeGate) Await(ctx context.Context, req engine.GateRequest) (engine.Decision, error) {
	c := *g.CP
	announce := c.Announce
	c.Announce = func(a *rbookv1.Approval, token string) {
		if g.Human != nil {
			g.Human(req)
		}
		if announce != nil {
			announce(a, token)
		}
	}
	return c.Await(ctx, req)
}

// GateOf is the control plane's gate inside g: g itself, the Next of a DecidedGate or the CP
// of a HumanNoticeGate; nil when g has none (a run without a control plane).
func GateOf(g engine.Gate) *Gate {
	switch g := g.(type) {
	case *Gate:
		return g
	case *DecidedGate:
		cg, _ := g.Next.(*Gate)
		return cg
	case *HumanNoticeGate:
		return g.CP
	}
	return nil
}
