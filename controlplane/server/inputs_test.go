package server_test

import (
	"context"
	"maps"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rbookhq/rbook-action/controlplane/server"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// reviewForm is an approval node's form: a required colour, a number with a default, a flag.
var reviewForm = []*rbookv1.InputField{
	{Name: "target", Type: "enum", Required: true, Options: []string{"blue", "green"}, Description: "which slot"},
	{Name: "ticket", Type: "string", Pattern: `[A-Z]+-[0-9]+`},
	{Name: "replicas", Type: "number", HasDefault: true, DefaultValue: "3"},
	{Name: "dry_run", Type: "boolean"},
}

// openForm starts run id and opens its "approve" gate with form.
func openForm(t *testing.T, c clients, id string, form []*rbookv1.InputField) (*rbookv1.Approval, string) {
	t.Helper()
	startRun(t, c, id)
	res, err := c.apps.RequestApproval(context.Background(), &rbookv1.RequestApprovalRequest{OwnerId: testOwner, Epoch: epochOf(t, c, id),
		RunId: id, StepName: "approve", StepIndex: 1, Prompt: "Deploy?", Deadline: timestamppb.New(time.Now().Add(time.Hour)),
		PlanDigest: digest("plan"), Inputs: form})
	if err != nil {
		t.Fatalf("RequestApproval: %v", err)
	}
	return res.GetApproval(), res.GetToken()
}

// Approve refuses invalid input values with E_INVALID_ARGUMENT naming the field, and the gate
// stays PENDING with no vote: nothing is decided (docs/approver-inputs.md).
func TestApproveWithInvalidInputIsRefusedNamingTheFieldAndDecidesNothing(t *testing.T) {
	c := newClients(serveWith(t, server.Options{}))
	ctx := context.Background()
	for i, tc := range []struct {
		name   string
		values map[string]string
		field  string
	}{
		{"missing required", map[string]string{"ticket": "OPS-1"}, "target"},
		{"wrong type", map[string]string{"target": "blue", "replicas": "many"}, "replicas"},
		{"wrong boolean", map[string]string{"target": "blue", "dry_run": "perhaps"}, "dry_run"},
		{"pattern mismatch", map[string]string{"target": "blue", "ticket": "ops-1"}, "ticket"},
		{"not in options", map[string]string{"target": "red"}, "target"},
		{"unknown field", map[string]string{"target": "blue", "colour": "red"}, "colour"},
		{"oversize", map[string]string{"target": "blue", "ticket": "OPS-" + strings.Repeat("1", 5000)}, "ticket"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, token := openForm(t, c, "R-bad-"+string(rune('a'+i)), reviewForm)
			_, err := c.apps.Approve(ctx, &rbookv1.ApproveRequest{Token: token, Approver: "bob", Inputs: tc.values})
			wantCode(t, err, connect.CodeInvalidArgument, "E_INVALID_ARGUMENT")
			if !strings.Contains(err.Error(), "input "+tc.field+":") {
				t.Fatalf("error %q does not name the field %s", err, tc.field)
			}
			got, err := c.apps.GetApproval(ctx, &rbookv1.GetApprovalRequest{ApprovalId: a.GetApprovalId()})
			if err != nil {
				t.Fatal(err)
			}
			if got.GetApproval().GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING || len(got.GetApproval().GetVotes()) != 0 {
				t.Fatalf("after the refusal: %v with %d votes; want PENDING with none", got.GetApproval().GetStatus(), len(got.GetApproval().GetVotes()))
			}
		})
	}
}

// Valid values are stored with the vote and the decision, defaults applied, and returned on
// the Approval by Approve, GetApproval and ListApprovals; the form is returned too.
func TestApproveWithValidInputKeepsTheValuesOnTheApproval(t *testing.T) {
	c := newClients(serveWith(t, server.Options{}))
	ctx := context.Background()
	a, token := openForm(t, c, "R-good", reviewForm)
	if len(a.GetInputs()) != 4 || a.GetInputs()[0].GetOptions()[1] != "green" || a.GetInputs()[0].GetDescription() != "which slot" {
		t.Fatalf("opened gate's inputs = %v; want the form as sent", a.GetInputs())
	}
	res, err := c.apps.Approve(ctx, &rbookv1.ApproveRequest{Token: token, Approver: "bob",
		Inputs: map[string]string{"target": "blue", "ticket": "OPS-7", "dry_run": "True"}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"target": "blue", "ticket": "OPS-7", "replicas": "3", "dry_run": "true"}
	got := res.GetApproval()
	if got.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED || !maps.Equal(got.GetInputValues(), want) ||
		len(got.GetVotes()) != 1 || !maps.Equal(got.GetVotes()[0].GetInputValues(), want) {
		t.Fatalf("Approve = %v; want APPROVED with %v on the approval and its vote", got, want)
	}
	g, err := c.apps.GetApproval(ctx, &rbookv1.GetApprovalRequest{ApprovalId: a.GetApprovalId()})
	if err != nil || !maps.Equal(g.GetApproval().GetInputValues(), want) {
		t.Fatalf("GetApproval values = %v, %v; want %v", g.GetApproval().GetInputValues(), err, want)
	}
	l, err := c.apps.ListApprovals(ctx, &rbookv1.ListApprovalsRequest{RunId: "R-good"})
	if err != nil || len(l.GetApprovals()) != 1 || !maps.Equal(l.GetApprovals()[0].GetInputValues(), want) {
		t.Fatalf("ListApprovals = %v, %v; want the values", l, err)
	}
}

// A form the control plane finds invalid is refused when the gate opens, naming the attribute.
func TestRequestApprovalWithAnInvalidFormIsRefusedNamingTheField(t *testing.T) {
	c := newClients(serveWith(t, server.Options{}))
	startRun(t, c, "R-form")
	_, err := c.apps.RequestApproval(context.Background(), &rbookv1.RequestApprovalRequest{OwnerId: testOwner, Epoch: epochOf(t, c, "R-form"),
		RunId: "R-form", StepName: "approve", StepIndex: 1, Deadline: timestamppb.New(time.Now().Add(time.Hour)),
		PlanDigest: digest("plan"), Inputs: []*rbookv1.InputField{{Name: "target", Type: "enum"}}})
	wantCode(t, err, connect.CodeInvalidArgument, "E_INVALID_ARGUMENT")
	if !strings.Contains(err.Error(), "inputs[0].options") {
		t.Fatalf("error %q does not name inputs[0].options", err)
	}
}

// An auto-pass policy approves a gate whose form it can fill with defaults, and the gate is
// decided with them; a form with a required field without a default needs a person, so the
// same policy leaves that gate pending and says which field (docs/approver-inputs.md).
func TestAutoPassFillsDefaultsAndNeverPassesAFormThatNeedsAPerson(t *testing.T) {
	p := startServe(t, "--playbook-policy", filepath.Join("testdata", "trust-all.policy.yaml"))
	c := newClients(p.URL)
	open := func(runID string, form []*rbookv1.InputField) *rbookv1.Approval {
		startPlaybookRun(t, c, runID, `{}`)
		res, err := c.apps.RequestApproval(context.Background(), &rbookv1.RequestApprovalRequest{OwnerId: testOwner, Epoch: epochOf(t, c, runID),
			RunId: runID, StepName: "go-live", StepIndex: 1, Prompt: "Deploy?", Deadline: timestamppb.New(time.Now().Add(time.Hour)),
			PlanDigest: digest("plan"), Policy: &rbookv1.PolicyContext{NodeJson: `{"id":"go-live","type":"approval"}`, Commands: []string{"echo deploying"}},
			Inputs: form})
		if err != nil {
			t.Fatalf("RequestApproval %s: %v", runID, err)
		}
		return res.GetApproval()
	}
	defaults := open("pb-defaults", []*rbookv1.InputField{{Name: "replicas", Type: "number", Required: true, HasDefault: true, DefaultValue: "3"},
		{Name: "note", Type: "string"}})
	if !defaults.GetAutoPassed() || !maps.Equal(defaults.GetInputValues(), map[string]string{"replicas": "3", "note": ""}) {
		t.Fatalf("gate with defaults: auto_passed %v, values %v; want auto-passed with replicas=3", defaults.GetAutoPassed(), defaults.GetInputValues())
	}
	person := open("pb-person", reviewForm)
	if person.GetAutoPassed() || person.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING ||
		!strings.Contains(person.GetPolicy().GetReason(), "the input target is required and has no default") {
		t.Fatalf("gate whose form needs a person: %v, policy %v; want pending, saying target needs a person", person.GetStatus(), person.GetPolicy())
	}
}
