package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rbookhq/rbook-action/controlplane/server"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/gen/rbook/v1/rbookv1connect"
)

// One port serves Connect (binary and JSON), gRPC (Connect's client and grpc-go) and
// gRPC-Web; reflection lists the services; health says SERVING.
func TestProtocolsReflectionHealth(t *testing.T) {
	p := startServe(t)
	ctx := context.Background()
	startRun(t, newClients(p.URL), "RBOOK-20260102-proto")
	for name, c := range map[string]clients{
		"connect": newClients(p.URL), "connect+json": newClients(p.URL, connect.WithProtoJSON()),
		"grpc": newClients(p.URL, connect.WithGRPC()), "grpc-web": newClients(p.URL, connect.WithGRPCWeb()),
	} {
		res, err := c.runs.GetRun(ctx, &rbookv1.GetRunRequest{RunId: "RBOOK-20260102-proto"})
		if err != nil || res.GetRun().GetName() != "demo" || res.GetRun().GetStartedBy() != "tester" {
			t.Fatalf("%s: GetRun %v %v", name, res.GetRun(), err)
		}
	}
	var res rbookv1.GetRunResponse
	if err := grpcConn(t, p.Addr).Invoke(ctx, rbookv1connect.RunServiceGetRunProcedure,
		&rbookv1.GetRunRequest{RunId: "RBOOK-20260102-proto"}, &res); err != nil || res.GetRun().GetTotalSteps() != 5 {
		t.Fatalf("grpc-go: GetRun %v %v", res.GetRun(), err)
	}

	rs := grpcreflect.NewClient(h2cClient(), p.URL).NewStream(ctx)
	names, err := rs.ListServices()
	rs.Close()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range names {
		got = append(got, string(n))
	}
	sort.Strings(got)
	if want := "grpc.health.v1.Health rbook.v1.ApprovalService rbook.v1.IdentityService rbook.v1.RunService"; strings.Join(got, " ") != want {
		t.Fatalf("reflection lists %v, want %s", got, want)
	}
	hc, err := grpchealth.NewClient(h2cClient(), p.URL, connect.WithGRPC()).Check(ctx, &grpchealth.CheckRequest{Service: "rbook.v1.RunService"})
	if err != nil || hc.Status != grpchealth.StatusServing {
		t.Fatalf("health: %v %v", hc, err)
	}
}

// Requests over the message-size limit are refused before decoding; the server lives on.
func TestMessageSizeLimit(t *testing.T) {
	p := startServe(t)
	big := strings.Repeat("r", server.DefaultMaxMessageBytes+1)
	for name, c := range map[string]clients{"connect": newClients(p.URL), "grpc": newClients(p.URL, connect.WithGRPC())} {
		_, err := c.apps.Approve(context.Background(), &rbookv1.ApproveRequest{Token: "t", Reason: big})
		if connect.CodeOf(err) != connect.CodeResourceExhausted {
			t.Fatalf("%s: oversized Approve: %v", name, err)
		}
	}
	var out rbookv1.ApproveResponse
	err := grpcConn(t, p.Addr).Invoke(context.Background(), rbookv1connect.ApprovalServiceApproveProcedure,
		&rbookv1.ApproveRequest{Token: "t", Reason: big}, &out)
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("grpc-go: oversized Approve: %v", err)
	}
	if _, err := newClients(p.URL).runs.ListRuns(context.Background(), &rbookv1.ListRunsRequest{}); err != nil {
		t.Fatalf("the server does not answer after oversized messages: %v", err)
	}
}

// SIGTERM ends open streams with UNAVAILABLE (E_RETRY) and the process exits 0; the log has
// one line per RPC with procedure, code and duration.
func TestGracefulShutdownEndsStreams(t *testing.T) {
	p := startServe(t)
	c := newClients(p.URL)
	startRun(t, c, "RBOOK-20260102-shutdown")
	a, _ := gate(t, c, "RBOOK-20260102-shutdown", time.Hour)
	wa, _ := watchApproval(t, c, a.GetApprovalId())
	wr, err := newClients(p.URL, connect.WithGRPC()).runs.WatchRun(context.Background(), &rbookv1.WatchRunRequest{RunId: "RBOOK-20260102-shutdown"})
	if err != nil || !wr.Receive() {
		t.Fatalf("WatchRun: %v %v", err, wr.Err())
	}
	if err := p.stop(t); err != nil {
		t.Fatalf("rbook serve exited with %v after SIGTERM; stderr:\n%s", err, p.Stderr.String())
	}
	for wa.Receive() {
	}
	wantCode(t, wa.Err(), connect.CodeUnavailable, "E_RETRY")
	for wr.Receive() {
	}
	wantCode(t, wr.Err(), connect.CodeUnavailable, "E_RETRY")
	log := p.Stderr.String()
	for _, want := range []string{"msg=rpc procedure=/rbook.v1.RunService/StartRun protocol=connect", "code=ok", "duration_ms=",
		"procedure=/rbook.v1.RunService/WatchRun protocol=grpc", "code=unavailable", "error_code=E_RETRY", `msg="shutting down"`} {
		if !strings.Contains(log, want) {
			t.Fatalf("server log lacks %q:\n%s", want, log)
		}
	}
}

func writeAuthFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "auth")
	body := `# identity role token
ci-bot   executor exec-token-0123456789
alice    approver appr-token-0123456789
bob      executor bob-exec-token-0123456789
bob      approver bob-appr-token-0123456789
grafana  viewer   view-token-0123456789
`
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Auth covers unary and streaming calls on every protocol; roles gate writes; reflection and
// health need no token; identities come from the token, not the request.
func TestAuth(t *testing.T) {
	p := startServe(t, "--auth-file", writeAuthFile(t), "--forbid-self-approval")
	ctx := context.Background()
	anon := newClients(p.URL)
	exec := newClients(p.URL, withBearer("exec-token-0123456789"))
	appr := newClients(p.URL, withBearer("appr-token-0123456789"), connect.WithGRPC())
	view := newClients(p.URL, withBearer("view-token-0123456789"), connect.WithGRPCWeb())

	_, err := anon.runs.GetRun(ctx, &rbookv1.GetRunRequest{RunId: "x"})
	wantCode(t, err, connect.CodeUnauthenticated, "E_UNAUTHENTICATED")
	_, err = newClients(p.URL, withBearer("wrong-token-0123456789")).runs.ListRuns(ctx, &rbookv1.ListRunsRequest{})
	wantCode(t, err, connect.CodeUnauthenticated, "E_UNAUTHENTICATED")
	s, err := anon.runs.WatchRun(ctx, &rbookv1.WatchRunRequest{RunId: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if s.Receive() {
		t.Fatal("an unauthenticated WatchRun got a message")
	}
	wantCode(t, s.Err(), connect.CodeUnauthenticated, "E_UNAUTHENTICATED")
	gs, err := grpcConn(t, p.Addr).NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, rbookv1connect.ApprovalServiceWatchApprovalProcedure)
	if err != nil {
		t.Fatal(err)
	}
	if err := gs.SendMsg(&rbookv1.WatchApprovalRequest{ApprovalId: "x"}); err != nil {
		t.Fatal(err)
	}
	_ = gs.CloseSend()
	if err := gs.RecvMsg(new(rbookv1.WatchApprovalResponse)); status.Code(err) != codes.Unauthenticated || rbookCode(err) != "E_UNAUTHENTICATED" {
		t.Fatalf("grpc-go unauthenticated stream: %v", err)
	}

	// Identity comes from the token: started_by is ci-bot, not what the request claims.
	res, err := exec.runs.StartRun(ctx, &rbookv1.StartRunRequest{OwnerId: testOwner, RunId: "R-auth", Name: "demo", ContentHash: digest("plan"),
		SchemaHash8: "0123abcd", TotalSteps: 2, StartedBy: "mallory"})
	if err != nil || res.GetRun().GetStartedBy() != "ci-bot" {
		t.Fatalf("executor StartRun: %v %v", res.GetRun(), err)
	}
	_, err = view.runs.StartRun(ctx, &rbookv1.StartRunRequest{OwnerId: testOwner, RunId: "R-view", Name: "demo", ContentHash: digest("plan"), SchemaHash8: "0123abcd", TotalSteps: 2})
	wantCode(t, err, connect.CodePermissionDenied, "E_PERMISSION_DENIED")
	if _, err := view.runs.GetRun(ctx, &rbookv1.GetRunRequest{RunId: "R-auth"}); err != nil {
		t.Fatalf("viewer GetRun: %v", err)
	}
	_, tok := gate(t, exec, "R-auth", time.Hour)
	_, err = exec.apps.Approve(ctx, &rbookv1.ApproveRequest{Token: tok})
	wantCode(t, err, connect.CodePermissionDenied, "E_PERMISSION_DENIED")
	_, err = appr.apps.RequestApproval(ctx, &rbookv1.RequestApprovalRequest{OwnerId: testOwner, Epoch: 1, RunId: "R-auth", StepName: "n"})
	wantCode(t, err, connect.CodePermissionDenied, "E_PERMISSION_DENIED")
	ok, err := appr.apps.Approve(ctx, &rbookv1.ApproveRequest{Token: tok, Approver: "mallory", Reason: "ok"})
	if err != nil || ok.GetApproval().GetApprover() != "alice" {
		t.Fatalf("approver Approve: %v %v", ok.GetApproval(), err)
	}

	// --forbid-self-approval: bob started the run, so bob may not approve it (but may reject).
	bobExec := newClients(p.URL, withBearer("bob-exec-token-0123456789"))
	bobAppr := newClients(p.URL, withBearer("bob-appr-token-0123456789"))
	if _, err := bobExec.runs.StartRun(ctx, &rbookv1.StartRunRequest{OwnerId: testOwner, RunId: "R-bob", Name: "demo", ContentHash: digest("plan"),
		SchemaHash8: "0123abcd", TotalSteps: 2}); err != nil {
		t.Fatal(err)
	}
	_, btok := gate(t, bobExec, "R-bob", time.Hour)
	_, err = bobAppr.apps.Approve(ctx, &rbookv1.ApproveRequest{Token: btok})
	wantCode(t, err, connect.CodePermissionDenied, "E_SELF_APPROVAL")
	if _, err := appr.apps.Approve(ctx, &rbookv1.ApproveRequest{Token: btok}); err != nil {
		t.Fatalf("another approver after a refused self-approval: %v", err)
	}

	// Reflection and health need no token.
	rs := grpcreflect.NewClient(h2cClient(), p.URL).NewStream(ctx)
	defer rs.Close()
	if _, err := rs.ListServices(); err != nil {
		t.Fatalf("reflection without a token: %v", err)
	}
	if _, err := grpchealth.NewClient(h2cClient(), p.URL, connect.WithGRPC()).Check(ctx, &grpchealth.CheckRequest{}); err != nil {
		t.Fatalf("health without a token: %v", err)
	}
	if strings.Contains(p.Stderr.String(), "token-0123456789") {
		t.Fatal("a bearer token appears in the server log")
	}
	if !strings.Contains(p.Stderr.String(), "caller=alice") {
		t.Fatalf("the log does not name the caller:\n%s", p.Stderr.String())
	}
}

// serve refuses a non-loopback address without --auth-file (before binding anything), and a
// missing secret, with a clear message and exit code 2.
func TestServeRefusals(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		env  []string
		want string
	}{
		"non-loopback": {[]string{"--addr", "0.0.0.0:0"}, []string{"RBOOK_APPROVAL_SECRET=" + testSecret}, "refusing to serve on 0.0.0.0:0 without authentication"},
		"no secret":    {[]string{"--addr", "127.0.0.1:0"}, []string{"RBOOK_APPROVAL_SECRET=", "RBOOK_SECRET="}, "no approval secret: set RBOOK_APPROVAL_SECRET"},
		"bad auth":     {[]string{"--auth-file", "/nonexistent/auth"}, []string{"RBOOK_APPROVAL_SECRET=" + testSecret}, "auth file: open /nonexistent/auth"},
	} {
		cmd := exec.Command(rbookBin, append([]string{"serve", "--db", filepath.Join(t.TempDir(), "db")}, tc.args...)...)
		cmd.Env = append(os.Environ(), tc.env...)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), tc.want) {
			t.Errorf("%s: exit %v, output %q; want exit 2 and %q", name, err, out, tc.want)
		}
	}
}

func TestCheckExposure(t *testing.T) {
	for _, tc := range []struct {
		addr           string
		auth, insecure bool
		wantErr        bool
	}{
		{"127.0.0.1:7070", false, false, false},
		{"[::1]:7070", false, false, false},
		{"localhost:0", false, false, false},
		{"0.0.0.0:7070", false, false, true},
		{":7070", false, false, true},
		{"10.1.2.3:7070", false, false, true},
		{"10.1.2.3:7070", true, false, false},
		{"0.0.0.0:7070", false, true, false},
		{"no-port", false, false, true},
	} {
		if err := server.CheckExposure(tc.addr, tc.auth, tc.insecure); (err != nil) != tc.wantErr {
			t.Errorf("CheckExposure(%q, auth=%v, insecure=%v) = %v, want error %v", tc.addr, tc.auth, tc.insecure, err, tc.wantErr)
		}
	}
}

func TestParseAuthErrors(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{"alice approver", "f:1: want \"identity role token [groups=a,b] [github=login]\", got 2 fields"},
		{"# c\n\nalice admin token-0123456789abc", "f:3: role \"admin\" is not executor, approver or viewer"},
		{"alice approver short", "f:1: the token of \"alice\" is shorter than 16 bytes"},
		{"a viewer same-token-0123456789\nb viewer same-token-0123456789", "f:2: the token of \"b\" is also used on line 1"},
		{"# nothing\n", "f: no callers"},
	} {
		_, err := server.ParseAuth(strings.NewReader(tc.body), "f")
		if err == nil || err.Error() != tc.want && !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("ParseAuth(%q) = %v, want %q", tc.body, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "0123456789") {
			t.Errorf("ParseAuth error reveals a token: %v", err)
		}
	}
}

// The embedded mode: Start on a loopback port, with a generated secret file.
func TestStartEmbedded(t *testing.T) {
	dir := t.TempDir()
	secret, created, err := server.LoadOrCreateSecretFile(filepath.Join(dir, "secret"))
	if err != nil || !created || len(secret) < 16 {
		t.Fatalf("LoadOrCreateSecretFile: %v %v %d", err, created, len(secret))
	}
	if fi, err := os.Stat(filepath.Join(dir, "secret")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("secret file mode: %v %v", fi.Mode(), err)
	}
	again, created, err := server.LoadOrCreateSecretFile(filepath.Join(dir, "secret"))
	if err != nil || created || string(again) != string(secret) {
		t.Fatalf("reloading the secret: %v %v", err, created)
	}
	r, err := server.Start(context.Background(), server.Config{Addr: "127.0.0.1:0", DBPath: filepath.Join(dir, "sub", "cp.db"),
		Options: server.Options{Secret: secret, Logger: slog.New(slog.DiscardHandler)}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(r.URL(), "http://127.0.0.1:") {
		t.Fatalf("URL %q", r.URL())
	}
	c := newClients(r.URL())
	startRun(t, c, "R-embedded")
	_, tok := gate(t, c, "R-embedded", time.Hour)
	if _, err := c.apps.Approve(context.Background(), &rbookv1.ApproveRequest{Token: tok}); err != nil {
		t.Fatal(err)
	}
	h2cTransport.CloseIdleConnections()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.runs.ListRuns(context.Background(), &rbookv1.ListRunsRequest{}); err == nil {
		t.Fatal("the server still answers after Close")
	}
	_, err = server.Start(context.Background(), server.Config{Addr: "127.0.0.1:0", DBPath: filepath.Join(dir, "x.db"), Options: server.Options{Secret: []byte("short")}})
	if err == nil || !strings.Contains(err.Error(), "shorter than 16 bytes") {
		t.Fatalf("Start with a short secret: %v", err)
	}
}

// The evidence pack comes back in execution order with the fields of docs/spec/runbooks.md, "Step
// 7: Append an evidence-pack entry".
func TestEvidencePackAndListing(t *testing.T) {
	p := startServe(t)
	c := newClients(p.URL)
	ctx := context.Background()
	startRun(t, c, "R-ev")
	for seq := int64(1); seq <= 5; seq++ {
		record(t, c, transition("R-ev", seq, 0))
	}
	res, err := c.runs.GetEvidencePack(ctx, &rbookv1.GetEvidencePackRequest{RunId: "R-ev"})
	if err != nil {
		t.Fatal(err)
	}
	var pack []map[string]any
	if err := json.Unmarshal([]byte(res.GetEvidencePackJson()), &pack); err != nil {
		t.Fatal(err)
	}
	if len(pack) != 2 || len(res.GetEntries()) != 2 || pack[0]["step_name"] != "s0" || pack[1]["step_name"] != "s1" ||
		pack[0]["status"] != "PASS" || pack[0]["input"] != nil || pack[0]["timestamp_utc"] != "2023-11-14T22:13:23.000000000Z" {
		t.Fatalf("evidence pack: %s", res.GetEvidencePackJson())
	}
	if !strings.Contains(res.GetEvidencePackJson(), `"input": null`) {
		t.Fatalf("a step without input must have \"input\": null: %s", res.GetEvidencePackJson())
	}
	for i := range 3 {
		startRun(t, c, "R-list-"+string(rune('a'+i)))
	}
	page, err := c.runs.ListRuns(ctx, &rbookv1.ListRunsRequest{PageSize: 2})
	if err != nil || len(page.GetRuns()) != 2 || page.GetNextPageToken() == "" {
		t.Fatalf("ListRuns page 1: %d runs, token %q, %v", len(page.GetRuns()), page.GetNextPageToken(), err)
	}
	_, err = c.runs.ListRuns(ctx, &rbookv1.ListRunsRequest{PageToken: "garbage"})
	wantCode(t, err, connect.CodeInvalidArgument, "E_INVALID_ARGUMENT")
	_, err = c.runs.StartRun(ctx, &rbookv1.StartRunRequest{OwnerId: "another-owner-0123456789", RunId: "R-ev", Name: "demo", ContentHash: digest("plan"), SchemaHash8: "0123abcd", TotalSteps: 5})
	wantCode(t, err, connect.CodeAlreadyExists, "E_RUN_OWNED")
	_, err = c.runs.StartRun(ctx, &rbookv1.StartRunRequest{OwnerId: testOwner, RunId: "R-bad", Name: "bad name", ContentHash: digest("plan"), SchemaHash8: "0123abcd", TotalSteps: 5})
	wantCode(t, err, connect.CodeInvalidArgument, "E_INVALID_ARGUMENT")
	_, err = c.runs.RecordTransition(ctx, &rbookv1.RecordTransitionRequest{Transition: transition("nope", 1, 0), OwnerId: testOwner, Epoch: 1})
	wantCode(t, err, connect.CodeNotFound, "E_RUN_NOT_FOUND")
	record(t, c, transition("R-ev", 6, rbookv1.RunStatus_RUN_STATUS_SUCCEEDED))
	_, err = c.runs.StartRun(ctx, &rbookv1.StartRunRequest{OwnerId: testOwner, RunId: "R-ev", Name: "demo", ContentHash: digest("plan"), SchemaHash8: "0123abcd", TotalSteps: 5})
	wantCode(t, err, connect.CodeFailedPrecondition, "E_RUN_FINAL")
	_, err = c.runs.CancelRun(ctx, &rbookv1.CancelRunRequest{RunId: "R-ev"})
	wantCode(t, err, connect.CodeFailedPrecondition, "E_RUN_FINAL")
}

// An approval keeps the on_fail it was requested with (RequestApproval, GetApproval,
// ListApprovals, a retried RequestApproval), and every stored transition carries the time
// the control plane recorded it.
func TestOnFailAndRecordedAt(t *testing.T) {
	p := startServe(t)
	c := newClients(p.URL)
	ctx := context.Background()
	const id = "RBOOK-20260102-onfail"
	startRun(t, c, id)
	opened, err := c.apps.RequestApproval(ctx, &rbookv1.RequestApprovalRequest{OwnerId: testOwner, Epoch: 1, RunId: id, StepName: "approve", StepIndex: 1,
		Deadline: timestamppb.New(time.Now().Add(time.Hour)), PlanDigest: digest("plan"), OnFail: "rollback"})
	if err != nil || opened.GetApproval().GetOnFail() != "rollback" {
		t.Fatalf("RequestApproval: %v, %v; want on_fail rollback", opened.GetApproval(), err)
	}
	retried, err := c.apps.RequestApproval(ctx, &rbookv1.RequestApprovalRequest{OwnerId: testOwner, Epoch: 1, RunId: id, StepName: "approve", StepIndex: 1,
		Deadline: timestamppb.New(time.Now().Add(time.Hour)), PlanDigest: digest("plan"), OnFail: "rollback"})
	if err != nil || retried.GetApproval().GetApprovalId() != opened.GetApproval().GetApprovalId() || retried.GetApproval().GetOnFail() != "rollback" {
		t.Fatalf("retried RequestApproval: %v, %v", retried.GetApproval(), err)
	}
	got, err := c.apps.GetApproval(ctx, &rbookv1.GetApprovalRequest{ApprovalId: opened.GetApproval().GetApprovalId()})
	if err != nil || got.GetApproval().GetOnFail() != "rollback" {
		t.Fatalf("GetApproval: %v, %v", got.GetApproval(), err)
	}
	list, err := c.apps.ListApprovals(ctx, &rbookv1.ListApprovalsRequest{RunId: id})
	if err != nil || len(list.GetApprovals()) != 1 || list.GetApprovals()[0].GetOnFail() != "rollback" {
		t.Fatalf("ListApprovals: %v, %v", list.GetApprovals(), err)
	}
	_, err = c.apps.RequestApproval(ctx, &rbookv1.RequestApprovalRequest{OwnerId: testOwner, Epoch: 1, RunId: id, StepName: "other", StepIndex: 2,
		Deadline: timestamppb.New(time.Now().Add(time.Hour)), PlanDigest: digest("plan"), OnFail: "retry"})
	wantCode(t, err, connect.CodeInvalidArgument, "E_INVALID_ARGUMENT")

	// recorded_at: the server's clock when it stored the transition (the sender's value is
	// ignored), between the call's start and end; a replay keeps the first one.
	before := time.Now()
	for seq := int64(1); seq <= 3; seq++ {
		tr := transition(id, seq, 0)
		tr.RecordedAt = timestamppb.New(time.Unix(1, 0)) // ignored
		record(t, c, tr)
	}
	after := time.Now()
	run, err := c.runs.GetRun(ctx, &rbookv1.GetRunRequest{RunId: id})
	if err != nil || len(run.GetTransitions()) != 3 {
		t.Fatalf("GetRun: %d transitions, %v", len(run.GetTransitions()), err)
	}
	var prev time.Time
	for _, tr := range run.GetTransitions() {
		at := tr.GetRecordedAt().AsTime()
		// A second of slack: two processes read the same wall clock, which may be stepped.
		if tr.GetRecordedAt() == nil || at.Before(before.Add(-time.Second)) || at.After(after.Add(time.Second)) || at.Before(prev) {
			t.Fatalf("transition %d recorded_at %v, want between %v and %v, not before %v", tr.GetSeq(), at, before, after, prev)
		}
		prev = at
	}
	record(t, c, transition(id, 2, 0)) // a replay
	again, err := c.runs.GetRun(ctx, &rbookv1.GetRunRequest{RunId: id})
	if err != nil || !again.GetTransitions()[1].GetRecordedAt().AsTime().Equal(run.GetTransitions()[1].GetRecordedAt().AsTime()) {
		t.Fatalf("a replay changed recorded_at: %v -> %v (%v)", run.GetTransitions()[1].GetRecordedAt(), again.GetTransitions()[1].GetRecordedAt(), err)
	}
}
