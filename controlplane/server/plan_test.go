package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/rbookhq/rbook-action/controlplane/server"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// testPlan is a runbook plan of n steps for digest: a check, a confirm gate, then deploys.
func testPlan(planDigest string, n int) *rbookv1.RunPlan {
	p := &rbookv1.RunPlan{ContentHash: planDigest}
	for i := range n {
		s := &rbookv1.PlanStep{Index: int32(i), Name: fmt.Sprintf("step-%d", i), Type: "deploy", OnFail: "halt", TimeoutSeconds: 300,
			Input: "templates/app.yaml", ParamsJson: `{"replicas":"3","api_token":"***"}`}
		switch i {
		case 0:
			s.Type, s.Input, s.ParamsJson = "check", "Resources | where subscriptionId in~ ('sub-a')", ""
		case 1:
			s.Type, s.Input, s.ParamsJson, s.Gate = "confirm", "user-confirmation", "", true
		}
		p.Steps = append(p.Steps, s)
	}
	return p
}

func startWithPlan(c clients, id, planDigest string, plan *rbookv1.RunPlan, total int32) (*rbookv1.StartRunResponse, error) {
	return c.runs.StartRun(context.Background(), &rbookv1.StartRunRequest{OwnerId: testOwner, RunId: id, Name: "demo",
		ContentHash: planDigest, SchemaHash8: "0123abcd", TotalSteps: total, StartedBy: "tester", Plan: plan})
}

// The plan StartRun carries comes back from GetRun unchanged, over each protocol a client
// may speak.
func TestGetRunReturnsThePlanStartRunSent(t *testing.T) {
	url := serveWith(t, server.Options{})
	for _, proto_ := range []struct {
		name string
		opts []connect.ClientOption
	}{{"connect", nil}, {"grpc", []connect.ClientOption{connect.WithGRPC()}}, {"connect-json", []connect.ClientOption{connect.WithProtoJSON()}}} {
		t.Run(proto_.name, func(t *testing.T) {
			c := newClients(url, proto_.opts...)
			want := testPlan(digest("plan"), 5)
			if _, err := startWithPlan(c, "r-plan-"+proto_.name, digest("plan"), want, 5); err != nil {
				t.Fatal(err)
			}
			got, err := c.runs.GetRun(context.Background(), &rbookv1.GetRunRequest{RunId: "r-plan-" + proto_.name})
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(got.GetPlan(), want) {
				t.Fatalf("GetRun plan = %v\nwant %v", got.GetPlan(), want)
			}
		})
	}
}

// A run that resumes with another digest shows no plan until its executor sends the plan of
// that digest: a person is never shown steps the run no longer executes.
func TestGetRunDropsThePlanWhenTheContentHashChanges(t *testing.T) {
	c := newClients(serveWith(t, server.Options{}))
	if _, err := startWithPlan(c, "r-edit", digest("v1"), testPlan(digest("v1"), 5), 5); err != nil {
		t.Fatal(err)
	}
	planOf := func() *rbookv1.RunPlan {
		t.Helper()
		res, err := c.runs.GetRun(context.Background(), &rbookv1.GetRunRequest{RunId: "r-edit"})
		if err != nil {
			t.Fatal(err)
		}
		return res.GetPlan()
	}
	if _, err := startWithPlan(c, "r-edit", digest("v2"), nil, 5); err != nil {
		t.Fatal(err)
	}
	if p := planOf(); p != nil {
		t.Fatalf("after a resume with another digest and no plan, GetRun returned the old plan (digest %s)", p.GetContentHash())
	}
	v2 := testPlan(digest("v2"), 6)
	if _, err := startWithPlan(c, "r-edit", digest("v2"), v2, 6); err != nil {
		t.Fatal(err)
	}
	if p := planOf(); !proto.Equal(p, v2) {
		t.Fatalf("after a resume with the v2 plan, GetRun plan = %v", p)
	}
}

// StartRun refuses a plan that breaks the wire contract, naming the field, and creates no run.
func TestStartRunRefusesAPlanOutsideItsBounds(t *testing.T) {
	c := newClients(serveWith(t, server.Options{}))
	big := strings.Repeat("x", 16<<10+1)
	for i, tc := range []struct {
		name, want string
		total      int32
		plan       func() *rbookv1.RunPlan
	}{
		{"another digest", "plan.content_hash", 5, func() *rbookv1.RunPlan { return testPlan(digest("other"), 5) }},
		{"steps not total_steps", "plan.steps holds 4 steps but total_steps is 5", 5, func() *rbookv1.RunPlan { return testPlan(digest("plan"), 4) }},
		{"over 1000 steps", "over the limit of 1000", 1001, func() *rbookv1.RunPlan { return testPlan(digest("plan"), 1001) }},
		{"input over 16 KiB", "plan.steps[2].input", 5, func() *rbookv1.RunPlan { p := testPlan(digest("plan"), 5); p.Steps[2].Input = big; return p }},
		{"params over 16 KiB", "plan.steps[3].params_json", 5, func() *rbookv1.RunPlan {
			p := testPlan(digest("plan"), 5)
			p.Steps[3].ParamsJson = big
			return p
		}},
		{"argv over 16 KiB", "plan.steps[4].argv", 5, func() *rbookv1.RunPlan {
			p := testPlan(digest("plan"), 5)
			p.Steps[4].Argv = []string{big[:9000], big[:9000]}
			return p
		}},
		{"over 1 MiB in all", "over the limit of 1048576", 100, func() *rbookv1.RunPlan {
			p := testPlan(digest("plan"), 100)
			for _, s := range p.Steps {
				s.Input = big[:16<<10]
			}
			return p
		}},
		{"index not its position", "plan.steps[1].index", 5, func() *rbookv1.RunPlan { p := testPlan(digest("plan"), 5); p.Steps[1].Index = 7; return p }},
		{"depends out of range", "plan.steps[2].depends[0]", 5, func() *rbookv1.RunPlan {
			p := testPlan(digest("plan"), 5)
			p.Steps[2].Depends = []int32{9}
			return p
		}},
		{"unknown type", "plan.steps[0].type", 5, func() *rbookv1.RunPlan { p := testPlan(digest("plan"), 5); p.Steps[0].Type = "shell"; return p }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := fmt.Sprintf("r-bound-%d", i)
			_, err := startWithPlan(c, id, digest("plan"), tc.plan(), tc.total)
			wantCode(t, err, connect.CodeInvalidArgument, "E_INVALID_ARGUMENT")
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not name %q", err, tc.want)
			}
			_, err = c.runs.GetRun(context.Background(), &rbookv1.GetRunRequest{RunId: id})
			wantCode(t, err, connect.CodeNotFound, "E_RUN_NOT_FOUND")
		})
	}
}

// A 50 MiB StartRun is refused by the server's message limit before it is read whole, with an
// error that says the message is too large.
func TestStartRunRefusesAFiftyMiBPlan(t *testing.T) {
	c := newClients(serveWith(t, server.Options{}))
	p := testPlan(digest("plan"), 1000)
	chunk := strings.Repeat("y", 52<<10)
	for _, s := range p.Steps {
		s.Input = chunk
	}
	_, err := startWithPlan(c, "r-huge", digest("plan"), p, 1000)
	if connect.CodeOf(err) != connect.CodeResourceExhausted || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("StartRun with a %d-byte plan: %v, want resource_exhausted saying the message is larger than the limit", proto.Size(p), err)
	}
}
