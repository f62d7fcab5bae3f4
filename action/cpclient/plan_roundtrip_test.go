package cpclient_test

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/rbookhq/rbook-action/action/cpclient"
	"github.com/rbookhq/rbook-action/action/runbook"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// The executor's StartRun carries the loaded runbook's plan, and a reader of the control
// plane gets it back from GetRun as sent, with the secrets still masked.
func TestStartRunSendsThePlanAReaderGetsBack(t *testing.T) {
	plan, err := runbook.LoadFile("testdata/plan/secrets.yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	r := newReplica(t, sharedStore(t))
	c := cpclient.New(r.srv.URL, "")
	want := cpclient.PlanOf(plan)
	if _, err := c.StartRun(t.Context(), cpclient.RunInfo{RunID: "RBOOK-20260101-secrets-0123abcd", RunbookName: plan.Name,
		PlanDigest: plan.ContentHash, SchemaHash8: plan.SchemaHash8, StartedBy: "test", TotalSteps: len(plan.Steps),
		StartedAt: time.Now(), OwnerID: foOwner, Plan: want}); err != nil {
		t.Fatal(err)
	}
	res, err := c.Runs.GetRun(t.Context(), &rbookv1.GetRunRequest{RunId: "RBOOK-20260101-secrets-0123abcd"})
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(res.GetPlan(), want) {
		t.Fatalf("GetRun plan = %s\nwant %s", prototext.Format(res.GetPlan()), prototext.Format(want))
	}
	if strings.Contains(prototext.Format(res), "s3cr3t") {
		t.Fatal("the secret value reached the control plane")
	}
}
