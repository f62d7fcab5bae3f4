package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/gen/rbook/v1/rbookv1connect"
)

// Executors write only their own runs: with auth on, executor e2 cannot
// record a transition on e1's run (even holding e1's owner id and epoch), cannot open its gate
// and so never sees its token, cannot renew its lease or cancel it, and cannot resume it;
// GetRun shows the owner identity.
func TestExecutorsWriteOnlyTheirOwnRuns(t *testing.T) {
	p := startServe(t, "--auth-file", writeAuthFile(t))
	ctx := context.Background()
	e1 := newClients(p.URL, withBearer("exec-token-0123456789"))     // ci-bot
	e2 := newClients(p.URL, withBearer("bob-exec-token-0123456789")) // bob
	appr := newClients(p.URL, withBearer("appr-token-0123456789"))
	run := startRun(t, e1, "R-e1")
	if l := run.GetLease(); l.GetOwner() != "ci-bot" || l.GetEpoch() != 1 {
		t.Fatalf("lease = %v, want owner ci-bot at epoch 1", l)
	}
	record(t, e1, transition("R-e1", 1, 0))

	// e2 with e1's own owner id and epoch: every write is refused as another identity.
	for _, c := range []struct {
		name string
		call func(t *testing.T) error
	}{
		{"RecordTransition", func(*testing.T) error {
			_, err := e2.runs.RecordTransition(ctx, &rbookv1.RecordTransitionRequest{Transition: transition("R-e1", 2, rbookv1.RunStatus_RUN_STATUS_SUCCEEDED),
				OwnerId: testOwner, Epoch: 1})
			return err
		}},
		{"RequestApproval", func(t *testing.T) error {
			opened, err := e2.apps.RequestApproval(ctx, &rbookv1.RequestApprovalRequest{OwnerId: testOwner, Epoch: 1, RunId: "R-e1", StepName: "approve",
				StepIndex: 1, Deadline: timestamppb.New(time.Now().Add(time.Hour)), PlanDigest: digest("plan")})
			if opened.GetToken() != "" {
				t.Fatal("e2 got a token for e1's gate")
			}
			return err
		}},
		{"RenewLease", func(*testing.T) error {
			_, err := e2.runs.RenewLease(ctx, &rbookv1.RenewLeaseRequest{RunId: "R-e1", OwnerId: testOwner, Epoch: 1})
			return err
		}},
		{"CancelRun", func(*testing.T) error {
			_, err := e2.runs.CancelRun(ctx, &rbookv1.CancelRunRequest{RunId: "R-e1"})
			return err
		}},
		{"StartRun", func(*testing.T) error {
			_, err := e2.runs.StartRun(ctx, &rbookv1.StartRunRequest{OwnerId: testOwner, RunId: "R-e1", Name: "demo", ContentHash: digest("plan"),
				SchemaHash8: "0123abcd", TotalSteps: 5})
			return err
		}},
	} {
		t.Run(c.name, func(t *testing.T) { wantCode(t, c.call(t), connect.CodePermissionDenied, "E_PERMISSION_DENIED") })
	}

	// Nothing changed; e1 goes on, and its gate's token reaches only e1.
	got, err := appr.runs.GetRun(ctx, &rbookv1.GetRunRequest{RunId: "R-e1"})
	if err != nil || got.GetRun().GetLastSeq() != 1 || got.GetRun().GetStatus() != rbookv1.RunStatus_RUN_STATUS_RUNNING ||
		got.GetRun().GetLease().GetOwner() != "ci-bot" || got.GetRun().GetStartedBy() != "ci-bot" {
		t.Fatalf("GetRun after e2's attempts = %v, %v", got.GetRun(), err)
	}
	if _, tok := gate(t, e1, "R-e1", time.Hour); tok == "" {
		t.Fatal("e1 got no token for its own gate")
	}
	record(t, e1, transition("R-e1", 2, rbookv1.RunStatus_RUN_STATUS_SUCCEEDED))
	// GetRun never shows the owner id (a capability), only the owner identity.
	b, _ := json.Marshal(got)
	if strings.Contains(string(b), testOwner) {
		t.Fatalf("GetRun shows the owner id: %s", b)
	}
}

// A zombie executor never writes again: after another owner
// took the run over (its lease expired), the old owner's transitions, gates and renewals get
// E_LEASE_LOST over Connect and gRPC alike, and a fresh executor's StartRun of a live run gets
// E_RUN_OWNED, never the run.
func TestZombieExecutorIsFenced(t *testing.T) {
	p := startServe(t)
	ctx := context.Background()
	c := newClients(p.URL)
	const other = "other-owner-0123456789"
	res, err := c.runs.StartRun(ctx, &rbookv1.StartRunRequest{OwnerId: testOwner, RunId: "R-z", Name: "demo", ContentHash: digest("plan"),
		SchemaHash8: "0123abcd", TotalSteps: 5, LeaseSeconds: 5})
	if err != nil || !res.GetCreated() {
		t.Fatalf("StartRun: %v %v", res, err)
	}
	record(t, c, transition("R-z", 1, 0))
	takeOver := &rbookv1.StartRunRequest{OwnerId: other, RunId: "R-z", Name: "demo", ContentHash: digest("plan"), SchemaHash8: "0123abcd", TotalSteps: 5}
	_, err = c.runs.StartRun(ctx, takeOver)
	wantCode(t, err, connect.CodeAlreadyExists, "E_RUN_OWNED")
	takeOver.TakeOver = true
	_, err = c.runs.StartRun(ctx, takeOver)
	wantCode(t, err, connect.CodeFailedPrecondition, "E_LEASE_HELD")
	if !strings.Contains(err.Error(), "until ") {
		t.Errorf("E_LEASE_HELD does not say until when: %v", err)
	}
	// Wait for the 5 s lease to lapse: the server's clock decides, so poll the take-over.
	var took *rbookv1.StartRunResponse
	for deadline := time.Now().Add(15 * time.Second); ; {
		took, err = c.runs.StartRun(ctx, takeOver)
		if err == nil || time.Now().After(deadline) {
			break
		}
		wantCode(t, err, connect.CodeFailedPrecondition, "E_LEASE_HELD")
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil || took.GetCreated() || took.GetRun().GetLease().GetEpoch() != 2 {
		t.Fatalf("take-over after the lease lapsed = %v, %v", took, err)
	}
	// The old owner (epoch 1) is a zombie: each of its writes is E_LEASE_LOST.
	zombie := &rbookv1.RecordTransitionRequest{Transition: transition("R-z", 2, rbookv1.RunStatus_RUN_STATUS_SUCCEEDED), OwnerId: testOwner, Epoch: 1}
	for _, z := range []struct {
		name string
		call func() error
	}{
		{"RecordTransition", func() error { _, err := c.runs.RecordTransition(ctx, zombie); return err }},
		{"RequestApproval", func() error {
			_, err := c.apps.RequestApproval(ctx, &rbookv1.RequestApprovalRequest{OwnerId: testOwner, Epoch: 1, RunId: "R-z", StepName: "approve",
				StepIndex: 1, Deadline: timestamppb.New(time.Now().Add(time.Hour)), PlanDigest: digest("plan")})
			return err
		}},
		{"RenewLease", func() error {
			_, err := c.runs.RenewLease(ctx, &rbookv1.RenewLeaseRequest{RunId: "R-z", OwnerId: testOwner, Epoch: 1})
			return err
		}},
	} {
		t.Run(z.name, func(t *testing.T) { wantCode(t, z.call(), connect.CodeFailedPrecondition, "E_LEASE_LOST") })
	}
	var out rbookv1.RecordTransitionResponse
	err = grpcConn(t, p.Addr).Invoke(ctx, rbookv1connect.RunServiceRecordTransitionProcedure, zombie, &out, grpc.WaitForReady(true))
	if status.Code(err) != codes.FailedPrecondition || rbookCode(err) != "E_LEASE_LOST" {
		t.Fatalf("grpc-go zombie transition: %v", err)
	}
	if _, err := c.runs.RecordTransition(ctx, &rbookv1.RecordTransitionRequest{Transition: transition("R-z", 2, rbookv1.RunStatus_RUN_STATUS_SUCCEEDED),
		OwnerId: other, Epoch: 2}); err != nil {
		t.Fatalf("the new owner's transition: %v", err)
	}
}

// Limits hold at the server: an evidence output over 64 KiB (plus the
// executor's truncation note) is refused, and GetRun / GetEvidencePack of a run far larger
// than 4 MiB come in pages that a stock grpc-go client (4 MiB receive limit) reads whole.
func TestServerLimitsAndPaging(t *testing.T) {
	p := startServe(t)
	ctx := context.Background()
	c := newClients(p.URL)
	startRun(t, c, "R-big")
	big := transition("R-big", 1, 0)
	big.Evidence = &rbookv1.Evidence{StepName: "s", Type: "check", Output: strings.Repeat("x", 64<<10+257), Status: rbookv1.StepStatus_STEP_STATUS_FAIL,
		TimestampUtc: "2026-12-01T00:00:00.000000000Z"}
	_, err := c.runs.RecordTransition(ctx, &rbookv1.RecordTransitionRequest{Transition: big, OwnerId: testOwner, Epoch: 1})
	wantCode(t, err, connect.CodeInvalidArgument, "E_INVALID_ARGUMENT")

	// 120 entries of 64 KiB output and 40 KiB input: about 12.5 MiB of evidence.
	const n = 120
	input := strings.Repeat("q", 40<<10)
	for seq := int64(1); seq <= n; seq++ {
		tr := transition("R-big", seq, 0)
		tr.Evidence = &rbookv1.Evidence{StepName: "s", Type: "check", Input: &input, Output: strings.Repeat("y", 64<<10),
			Status: rbookv1.StepStatus_STEP_STATUS_PASS, TimestampUtc: "2026-12-01T00:00:00.000000000Z"}
		record(t, c, tr)
	}
	conn := grpcConn(t, p.Addr) // grpc-go's default 4 MiB receive limit
	var seqs []int64
	pages := 0
	for token := ""; ; pages++ {
		var page rbookv1.GetRunResponse
		if err := conn.Invoke(ctx, rbookv1connect.RunServiceGetRunProcedure, &rbookv1.GetRunRequest{RunId: "R-big", PageToken: token}, &page); err != nil {
			t.Fatalf("grpc-go GetRun page %d: %v", pages, err)
		}
		for _, tr := range page.GetTransitions() {
			seqs = append(seqs, tr.GetSeq())
		}
		if token = page.GetNextPageToken(); token == "" {
			break
		}
	}
	if len(seqs) != n || seqs[0] != 1 || seqs[n-1] != n || pages < 3 {
		t.Fatalf("GetRun pages: %d pages, %d transitions (first %v), want %d in several pages", pages+1, len(seqs), seqs[:min(3, len(seqs))], n)
	}
	entries := 0
	for token := ""; ; {
		var page rbookv1.GetEvidencePackResponse
		if err := conn.Invoke(ctx, rbookv1connect.RunServiceGetEvidencePackProcedure, &rbookv1.GetEvidencePackRequest{RunId: "R-big", PageToken: token}, &page); err != nil {
			t.Fatalf("grpc-go GetEvidencePack: %v", err)
		}
		var js []map[string]any
		if err := json.Unmarshal([]byte(page.GetEvidencePackJson()), &js); err != nil || len(js) != len(page.GetEntries()) {
			t.Fatalf("evidence_pack_json of a page: %d entries, %v; want %d", len(js), err, len(page.GetEntries()))
		}
		entries += len(page.GetEntries())
		if token = page.GetNextPageToken(); token == "" {
			break
		}
	}
	if entries != n {
		t.Fatalf("GetEvidencePack pages hold %d entries, want %d", entries, n)
	}
	// ListApprovals: 50 gates with 64 KiB prompts (3.2 MiB and more) come in pages a stock
	// grpc-go client reads.
	prompt := strings.Repeat("p", 64<<10)
	for i := range 50 {
		if _, err := c.apps.RequestApproval(ctx, &rbookv1.RequestApprovalRequest{OwnerId: testOwner, Epoch: 1, RunId: "R-big",
			StepName: fmt.Sprintf("gate-%d", i), StepIndex: 1, Prompt: prompt, Deadline: timestamppb.New(time.Now().Add(time.Hour)),
			PlanDigest: digest("plan")}); err != nil {
			t.Fatalf("RequestApproval %d: %v", i, err)
		}
	}
	approvals, apages := 0, 0
	for token := ""; ; apages++ {
		var page rbookv1.ListApprovalsResponse
		if err := conn.Invoke(ctx, rbookv1connect.ApprovalServiceListApprovalsProcedure,
			&rbookv1.ListApprovalsRequest{RunId: "R-big", PageSize: 500, PageToken: token}, &page); err != nil {
			t.Fatalf("grpc-go ListApprovals page %d: %v", apages, err)
		}
		approvals += len(page.GetApprovals())
		if token = page.GetNextPageToken(); token == "" {
			break
		}
	}
	if approvals != 50 || apages != 1 {
		t.Fatalf("ListApprovals: %d approvals in %d pages, want 50 in 2", approvals, apages+1)
	}
	_, err = c.runs.GetRun(ctx, &rbookv1.GetRunRequest{RunId: "R-big", PageToken: "seq:x"})
	wantCode(t, err, connect.CodeInvalidArgument, "E_INVALID_ARGUMENT")
	small, err := c.runs.GetRun(ctx, &rbookv1.GetRunRequest{RunId: "R-big", PageSize: 7})
	if err != nil || len(small.GetTransitions()) != 7 || small.GetNextPageToken() != "seq:8" {
		t.Fatalf("page_size 7: %d transitions, token %q, %v", len(small.GetTransitions()), small.GetNextPageToken(), err)
	}
}
