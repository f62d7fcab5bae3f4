package engine_test

import (
	"context"
	"slices"
	"testing"

	"github.com/rbookhq/rbook-action/action/engine"
)

// A guarded node's env changes what its command runs (PATH picks the program, GOFLAGS adds
// -toolexec, GIT_CONFIG_* adds hooks): the policy context's command line carries it in front
// as K=V, sorted by key and rendered, so no read-only rule can pass "ls" run from another PATH.
func TestIssue9_Break_PolicyCommandsShowEnv(t *testing.T) {
	ls := det("list", "review")
	ls.Command, ls.Args = "ls", []string{"-la"}
	ls.Env = map[string]string{"PATH": "/tmp/{{ dir }}", "GOFLAGS": "-toolexec=x"}
	p := pbPlan([]pnode{appr("review", "ok?"), ls}, nil)
	g := &fakeGate{fn: func(context.Context, engine.GateRequest) (engine.Decision, error) {
		return engine.Decision{Verdict: engine.Approved, By: "me", Source: "cli"}, nil
	}}
	rec := &memRecorder{}
	e := pbEngine(p, newFake(), rec)
	e.Gate = g
	res, err := e.Run(context.Background(), engine.Start{RunID: "P", Fresh: true, Bindings: map[string]any{"dir": "evil"}})
	if err != nil || res.Status != engine.RunCompleted {
		t.Fatalf("%v %+v %s", err, res, rec.summary())
	}
	if got := g.reqs[0].Policy.Commands; !slices.Equal(got, []string{"GOFLAGS=-toolexec=x PATH=/tmp/evil ls -la"}) {
		t.Fatalf("policy commands %q", got)
	}
}
