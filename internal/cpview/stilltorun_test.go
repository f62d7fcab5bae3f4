package cpview

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/timestamppb"

	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// `rbook get` of a run waiting at a gate lists the steps still to run with their inputs on one
// line each (terminal control characters blanked): what approving the gate lets happen.
func TestGetShowsTheStepsStillToRun(t *testing.T) {
	resp := &rbookv1.GetRunResponse{
		Run: &rbookv1.Run{RunId: "r1", Kind: rbookv1.RunKind_RUN_KIND_RUNBOOK, LastCompletedStepIndex: 0, Status: rbookv1.RunStatus_RUN_STATUS_PAUSED},
		Plan: &rbookv1.RunPlan{ContentHash: strings.Repeat("ab", 32), Steps: []*rbookv1.PlanStep{
			{Index: 0, Name: "check-https", Type: "check", Input: "Resources | where x"},
			{Index: 1, Name: "confirm-rollout", Type: "confirm", Input: "user-confirmation", Gate: true},
			{Index: 2, Name: "deploy-app", Type: "deploy", Input: "remediation/app.json\x1b[2J", ParamsJson: `{"replicas":3,"api_token":"***"}`},
		}},
	}
	var b strings.Builder
	WriteStillToRun(&b, resp)
	want := "Still to run (plan digest abababababab…):\n" +
		"    2  confirm       confirm-rollout  (gate)  user-confirmation\n" +
		"    3  deploy        deploy-app  remediation/app.json [2J  {\"replicas\":3,\"api_token\":\"***\"}\n"
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
	resp.Run.CompletedAt, resp.Run.Status = timestamppb.Now(), rbookv1.RunStatus_RUN_STATUS_SUCCEEDED
	b.Reset()
	if WriteStillToRun(&b, resp); b.Len() != 0 {
		t.Fatalf("a finished run shows steps still to run:\n%s", b.String())
	}
}
