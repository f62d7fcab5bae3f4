package server_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"
	_ "modernc.org/sqlite"

	"github.com/rbookhq/rbook-action/controlplane/approval"
	"github.com/rbookhq/rbook-action/controlplane/server"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// startPlaybookRun creates playbook run id with digest("plan") and the given first bindings.
func startPlaybookRun(t testing.TB, c clients, id, bindings string) *rbookv1.Run {
	t.Helper()
	res, err := c.runs.StartRun(context.Background(), &rbookv1.StartRunRequest{OwnerId: testOwner, RunId: id, Name: "release-cut",
		ContentHash: digest("plan"), SchemaHash8: "0123abcd", TotalSteps: 4, StartedBy: "tester", Kind: rbookv1.RunKind_RUN_KIND_PLAYBOOK,
		Bindings: bindings, EpicId: "T889", SessionId: "ses_xyz"})
	if err != nil {
		t.Fatalf("StartRun %s: %v", id, err)
	}
	return res.GetRun()
}

// requestPolicyGate opens approval node "review" of runID with a policy context guarding cmds.
func requestPolicyGate(t testing.TB, c clients, runID string, cmds, tools []string) (*rbookv1.RequestApprovalResponse, error) {
	t.Helper()
	return c.apps.RequestApproval(context.Background(), &rbookv1.RequestApprovalRequest{OwnerId: testOwner, Epoch: epochOf(t, c, runID),
		RunId: runID, StepName: "review", StepIndex: 2, Prompt: "Publish 2026.4.90?", Deadline: timestamppb.New(time.Now().Add(time.Hour)),
		PlanDigest: digest("plan"), Policy: &rbookv1.PolicyContext{NodeJson: `{"id":"review","type":"approval"}`,
			BindingsJson: `{"version":"2026.4.90"}`, PlaybookJson: `{"name":"release-cut"}`, Commands: cmds, Tools: tools}})
}

// approvalRow reads the approval's row straight from the database file.
func approvalRow(t *testing.T, dbPath, id string) (status string, autoPassed int, approver, source, reason, policy string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+dbPath+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var ap, src, rs, pj sql.NullString
	if err := db.QueryRow(`SELECT status, auto_passed, approver, decided_by_source, reason, policy_json FROM playbook_approvals
		WHERE approval_id = ?`, id).Scan(&status, &autoPassed, &ap, &src, &rs, &pj); err != nil {
		t.Fatal(err)
	}
	return status, autoPassed, ap.String, src.String, rs.String, pj.String
}

// A playbook approval node whose guarded commands are read-only auto-passes over Connect: the
// response, GetApproval, ListApprovals, WatchApproval and the row all show it approved by the
// policy; its token replayed by Approve or Reject gets E_APPROVAL_ALREADY_DECIDED.
func TestRequestApprovalAutoPassesOverConnect(t *testing.T) {
	p := startServe(t)
	c := newClients(p.URL)
	startPlaybookRun(t, c, "pb-auto", `{"version":"2026.4.90"}`)
	res, err := requestPolicyGate(t, c, "pb-auto", []string{"go test ./...", "git status"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	a := res.GetApproval()
	wantReason := approval.RuleReadOnly + ": only read-only or QA commands, no agentic node"
	if a.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED || !a.GetAutoPassed() || a.GetApprover() != "policy" ||
		a.GetDecidedBySource() != "policy" || a.GetReason() != wantReason || a.GetApprovedAt() == nil {
		t.Fatalf("approval = %v", a)
	}
	if pd := a.GetPolicy(); !pd.GetAutoPassed() || pd.GetRule() != approval.RuleReadOnly || pd.GetAction() != "auto-approve" || pd.GetShadow() {
		t.Fatalf("policy = %v", pd)
	}
	status, auto, approver, source, reason, policy := approvalRow(t, p.DB, a.GetApprovalId())
	if status != "approved" || auto != 1 || approver != "policy" || source != "policy" || reason != wantReason ||
		!strings.Contains(policy, `"rule":"default-read-only"`) {
		t.Fatalf("row = %s %d %s %s %q %s", status, auto, approver, source, reason, policy)
	}
	got, err := c.apps.GetApproval(context.Background(), &rbookv1.GetApprovalRequest{ApprovalId: a.GetApprovalId()})
	if err != nil || got.GetApproval().GetPolicy().GetRule() != approval.RuleReadOnly {
		t.Fatalf("GetApproval: %v %v", got, err)
	}
	list, err := c.apps.ListApprovals(context.Background(), &rbookv1.ListApprovalsRequest{RunId: "pb-auto"})
	if err != nil || len(list.GetApprovals()) != 1 || !list.GetApprovals()[0].GetPolicy().GetAutoPassed() {
		t.Fatalf("ListApprovals: %v %v", list, err)
	}
	s, first := watchApproval(t, c, a.GetApprovalId())
	if first.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED || s.Receive() || s.Err() != nil {
		t.Fatalf("WatchApproval: first %v, then more=%v err=%v", first.GetStatus(), s.Msg(), s.Err())
	}
	_, err = c.apps.Approve(context.Background(), &rbookv1.ApproveRequest{Token: res.GetToken(), Approver: "mallory"})
	wantCode(t, err, connect.CodeFailedPrecondition, "E_APPROVAL_ALREADY_DECIDED")
	if !strings.Contains(err.Error(), "already approved by policy") {
		t.Fatalf("replay error %v", err)
	}
	_, err = c.apps.Reject(context.Background(), &rbookv1.RejectRequest{Token: res.GetToken(), Approver: "mallory"})
	wantCode(t, err, connect.CodeFailedPrecondition, "E_APPROVAL_ALREADY_DECIDED")
	// A retried RequestApproval (an executor that resumed) gets the same decided gate and token.
	again, err := requestPolicyGate(t, c, "pb-auto", []string{"go test ./...", "git status"}, nil)
	if err != nil || again.GetApproval().GetApprovalId() != a.GetApprovalId() || again.GetToken() != res.GetToken() {
		t.Fatalf("retry: %v %v", again, err)
	}
}

// A gate guarding `git push` needs a human even though a custom auto-approve rule that
// matches comes first; Approval.policy says which rule and why; a human then approves it by
// token once, and the replay is E_APPROVAL_ALREADY_DECIDED.
func TestGitPushNeedsHumanOverConnect(t *testing.T) {
	file := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(file, []byte("rules:\n  - name: trust-all\n    when: \"true\"\n    action: auto-approve\n    reason: trusted team\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startServe(t, "--playbook-policy", file)
	c := newClients(p.URL)
	startPlaybookRun(t, c, "pb-push", `{}`)
	res, err := requestPolicyGate(t, c, "pb-push", []string{"go test ./...", "git push origin main"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	a := res.GetApproval()
	pd := a.GetPolicy()
	if a.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING || a.GetAutoPassed() || pd.GetAutoPassed() ||
		pd.GetRule() != approval.RuleGitPush || pd.GetAction() != "require-human" ||
		!strings.Contains(pd.GetReason(), "git push needs a human (overrides auto-approve rule trust-all)") {
		t.Fatalf("approval %v policy %v", a.GetStatus(), pd)
	}
	// Without the push the custom rule passes the gate.
	startPlaybookRun(t, c, "pb-docs", `{}`)
	docs, err := requestPolicyGate(t, c, "pb-docs", []string{"make docs"}, nil)
	if err != nil || !docs.GetApproval().GetAutoPassed() || docs.GetApproval().GetReason() != "trust-all: trusted team" {
		t.Fatalf("docs gate: %v %v", docs.GetApproval(), err)
	}
	ok, err := c.apps.Approve(context.Background(), &rbookv1.ApproveRequest{Token: res.GetToken(), Approver: "keaton", Reason: "LGTM"})
	if err != nil || ok.GetApproval().GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED || ok.GetApproval().GetPolicy().GetRule() != approval.RuleGitPush {
		t.Fatalf("Approve: %v %v", ok, err)
	}
	_, err = c.apps.Approve(context.Background(), &rbookv1.ApproveRequest{Token: res.GetToken(), Approver: "keaton"})
	wantCode(t, err, connect.CodeFailedPrecondition, "E_APPROVAL_ALREADY_DECIDED")
	if log := p.Stderr.String(); !strings.Contains(log, `msg="gate policy"`) || !strings.Contains(log, "rule=default-git-push") || strings.Contains(log, res.GetToken()) {
		t.Fatalf("want a gate policy log line naming the rule, never the token:\n%s", log)
	}
}

// --policy-shadow records what the policy would have decided and lets a human decide.
func TestPolicyShadowOverConnect(t *testing.T) {
	p := startServe(t, "--policy-shadow")
	c := newClients(p.URL)
	startPlaybookRun(t, c, "pb-shadow", `{}`)
	res, err := requestPolicyGate(t, c, "pb-shadow", []string{"go vet ./..."}, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, pd := res.GetApproval(), res.GetApproval().GetPolicy()
	if a.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING || a.GetAutoPassed() || !pd.GetShadow() || pd.GetAutoPassed() ||
		pd.GetAction() != "auto-approve" || pd.GetRule() != approval.RuleReadOnly {
		t.Fatalf("approval %v policy %v", a.GetStatus(), pd)
	}
	status, auto, _, _, _, policy := approvalRow(t, p.DB, a.GetApprovalId())
	if status != "pending" || auto != 0 || !strings.Contains(policy, `"shadow":true`) {
		t.Fatalf("row %s %d %s", status, auto, policy)
	}
}

// A policy context is refused on a runbook run (confirm steps never auto-pass), and a policy
// context with a bad field is refused naming it.
func TestPolicyContextRefusals(t *testing.T) {
	p := startServe(t)
	c := newClients(p.URL)
	startRun(t, c, "rb-1")
	_, err := requestPolicyGate(t, c, "rb-1", []string{"go test ./..."}, nil)
	wantCode(t, err, connect.CodeInvalidArgument, "E_INVALID_ARGUMENT")
	if !strings.Contains(err.Error(), "policy is only for playbook approval nodes") {
		t.Fatalf("err = %v", err)
	}
	startPlaybookRun(t, c, "pb-bad", `{}`)
	_, err = c.apps.RequestApproval(context.Background(), &rbookv1.RequestApprovalRequest{OwnerId: testOwner, Epoch: 1, RunId: "pb-bad",
		StepName: "review", StepIndex: 2, Deadline: timestamppb.New(time.Now().Add(time.Hour)), PlanDigest: digest("plan"),
		Policy: &rbookv1.PolicyContext{BindingsJson: `["not", "an object"]`}})
	wantCode(t, err, connect.CodeInvalidArgument, "E_INVALID_ARGUMENT")
	if !strings.Contains(err.Error(), "policy.bindings_json must be a JSON object") {
		t.Fatalf("err = %v", err)
	}
	for _, tc := range []struct {
		cmds []string
		want string
	}{
		{make([]string, server.MaxPolicyCommands+1), "policy.commands has 257 entries, over the limit of 256"},
		{[]string{strings.Repeat("x", server.MaxPolicyCommandBytes+1)}, "policy.commands[0] is 4097 bytes, over the limit of 4096"},
	} {
		_, err = requestPolicyGate(t, c, "pb-bad", tc.cmds, nil)
		wantCode(t, err, connect.CodeInvalidArgument, "E_INVALID_ARGUMENT")
		if !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("err = %v, want %q", err, tc.want)
		}
	}
	page, err := c.apps.ListApprovals(context.Background(), &rbookv1.ListApprovalsRequest{})
	if err != nil || len(page.GetApprovals()) != 0 {
		t.Fatalf("refused requests opened gates: %v %v", page, err)
	}
}

// rbook serve refuses a policy file whose rule does not compile, naming file, line and rule.
func TestServeRefusesPolicyThatDoesNotCompile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(file, []byte("rules:\n  - name: ok\n    when: \"true\"\n    action: require-human\n    reason: r\n  - name: broken\n    when: \"commands.exists(c,\"\n    action: auto-approve\n    reason: r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(rbookBin, "serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "db"), "--playbook-policy", file)
	cmd.Env = append(os.Environ(), "RBOOK_APPROVAL_SECRET="+testSecret)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	want := file + `:6: rule "broken": when does not compile`
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), want) {
		t.Fatalf("exit %v, output %q; want exit 2 and %q", err, out, want)
	}
}

// Tokens on playbook gates: a well-signed token that matches no
// approval is E_APPROVAL_NOT_FOUND; a decided one is E_APPROVAL_ALREADY_DECIDED by Approve and
// by Reject.
func TestTokenErrorsOnPlaybookGates(t *testing.T) {
	p := startServe(t)
	c := newClients(p.URL)
	startPlaybookRun(t, c, "pb-tok", `{}`)
	stray, err := approval.Issue([]byte(testSecret), approval.Claims{RunID: "pb-tok", NodeID: "review", IssuedAt: time.Now(),
		ExpiresAt: time.Now().Add(time.Hour), Nonce: "a-nosuchapproval", PlanDigest: digest("plan")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.apps.Approve(context.Background(), &rbookv1.ApproveRequest{Token: stray})
	wantCode(t, err, connect.CodeNotFound, "E_APPROVAL_NOT_FOUND")
	_, err = c.apps.Reject(context.Background(), &rbookv1.RejectRequest{Token: stray})
	wantCode(t, err, connect.CodeNotFound, "E_APPROVAL_NOT_FOUND")
	res, err := requestPolicyGate(t, c, "pb-tok", []string{"make release"}, nil) // no rule matches: a human
	if err != nil || res.GetApproval().GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING || res.GetApproval().GetPolicy().GetRule() != "" {
		t.Fatalf("gate: %v %v", res.GetApproval(), err)
	}
	if _, err := c.apps.Reject(context.Background(), &rbookv1.RejectRequest{Token: res.GetToken(), Approver: "keaton", Reason: "not today"}); err != nil {
		t.Fatal(err)
	}
	for _, try := range []func() error{
		func() error {
			_, err := c.apps.Approve(context.Background(), &rbookv1.ApproveRequest{Token: res.GetToken()})
			return err
		},
		func() error {
			_, err := c.apps.Reject(context.Background(), &rbookv1.RejectRequest{Token: res.GetToken()})
			return err
		},
	} {
		wantCode(t, try(), connect.CodeFailedPrecondition, "E_APPROVAL_ALREADY_DECIDED")
	}
}

// 20 concurrent Approve calls with one playbook gate's token: exactly one wins, the others get
// E_APPROVAL_ALREADY_DECIDED (the store's one compare-and-set).
func TestConcurrentApproveOneWins(t *testing.T) {
	p := startServe(t)
	c := newClients(p.URL)
	startPlaybookRun(t, c, "pb-race", `{}`)
	res, err := requestPolicyGate(t, c, "pb-race", []string{"git push"}, nil)
	if err != nil || res.GetApproval().GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING {
		t.Fatalf("gate: %v %v", res, err)
	}
	const n = 20
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		winners []string
		codes   = map[string]int{}
	)
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			who := fmt.Sprintf("approver-%02d", i)
			_, err := c.apps.Approve(context.Background(), &rbookv1.ApproveRequest{Token: res.GetToken(), Approver: who})
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				winners = append(winners, who)
				return
			}
			codes[rbookCode(err)]++
		}()
	}
	close(start)
	wg.Wait()
	if len(winners) != 1 || codes["E_APPROVAL_ALREADY_DECIDED"] != n-1 {
		t.Fatalf("winners %v, errors %v; want 1 winner and %d E_APPROVAL_ALREADY_DECIDED", winners, codes, n-1)
	}
	got, err := c.apps.GetApproval(context.Background(), &rbookv1.GetApprovalRequest{ApprovalId: res.GetApproval().GetApprovalId()})
	if err != nil || got.GetApproval().GetApprover() != "unverified:"+winners[0] || len(got.GetApproval().GetVotes()) != 1 {
		t.Fatalf("decided gate %v %v; want approver unverified:%s and one vote", got.GetApproval(), err, winners[0])
	}
}

// pbTransition is one transition of a playbook node over the wire.
func pbTransition(runID string, seq int64, kind rbookv1.TransitionKind, index int32, node, typ string, status rbookv1.StepStatus, output string) *rbookv1.Transition {
	at := time.Unix(1_700_000_000+seq, 0)
	tr := &rbookv1.Transition{RunId: runID, Seq: seq, Time: timestamppb.New(at), RunStatus: rbookv1.RunStatus_RUN_STATUS_RUNNING,
		Kind: kind, StepIndex: index, StepName: node, StepType: typ}
	if status != rbookv1.StepStatus_STEP_STATUS_UNSPECIFIED {
		tr.Evidence = &rbookv1.Evidence{StepName: node, Type: typ, Output: output, Status: status,
			TimestampUtc: at.UTC().Format("2006-01-02T15:04:05.000000000Z")}
	}
	return tr
}

// GetRun, WatchRun and ListRuns show a playbook run's bindings, iteration counts, active nodes
// and node states; the run is paused while a gate is open even as another node finishes;
// ListRuns filters by kind; StartRun refuses bad bindings.
func TestPlaybookRunDetailsOverConnect(t *testing.T) {
	p := startServe(t)
	c := newClients(p.URL)
	for _, tc := range []struct{ bindings, want string }{
		{`{"version":`, "bindings is not valid JSON"},
		{`[1]`, "bindings must be a JSON object"},
		{`{"v":"` + strings.Repeat("x", 1<<20) + `"}`, "over the limit of 1048576"},
	} {
		_, err := c.runs.StartRun(context.Background(), &rbookv1.StartRunRequest{OwnerId: testOwner, RunId: "pb-bad", Name: "x",
			ContentHash: digest("plan"), SchemaHash8: "0123abcd", TotalSteps: 1, Kind: rbookv1.RunKind_RUN_KIND_PLAYBOOK, Bindings: tc.bindings})
		wantCode(t, err, connect.CodeInvalidArgument, "E_INVALID_ARGUMENT")
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("bindings %.30q: %v, want %q", tc.bindings, err, tc.want)
		}
	}
	startRun(t, c, "rb-1")
	startPlaybookRun(t, c, "pb-1", `{"version":"2026.4.90"}`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watch, err := c.runs.WatchRun(ctx, &rbookv1.WatchRunRequest{RunId: "pb-1"})
	if err != nil || !watch.Receive() {
		t.Fatalf("WatchRun: %v %v", err, watch.Err())
	}
	K := rbookv1.TransitionKind_TRANSITION_KIND_STEP_STARTED
	F := rbookv1.TransitionKind_TRANSITION_KIND_STEP_FINISHED
	none := rbookv1.StepStatus_STEP_STATUS_UNSPECIFIED
	record(t, c, pbTransition("pb-1", 1, K, 0, "build", "deterministic", none, ""))
	record(t, c, pbTransition("pb-1", 2, F, 0, "build", "deterministic", rbookv1.StepStatus_STEP_STATUS_PASS, `{"stdout":"ok","exit_code":0}`))
	record(t, c, pbTransition("pb-1", 3, K, 1, "lint", "deterministic", none, ""))
	record(t, c, pbTransition("pb-1", 4, K, 2, "review", "approval", none, ""))
	record(t, c, pbTransition("pb-1", 5, rbookv1.TransitionKind_TRANSITION_KIND_GATE_OPENED, 2, "review", "approval", none, ""))
	record(t, c, pbTransition("pb-1", 6, F, 1, "lint", "deterministic", rbookv1.StepStatus_STEP_STATUS_PASS, "clean"))

	got, err := c.runs.GetRun(context.Background(), &rbookv1.GetRunRequest{RunId: "pb-1"})
	if err != nil {
		t.Fatal(err)
	}
	run, pb := got.GetRun(), got.GetRun().GetPlaybook()
	var b map[string]any
	if err := json.Unmarshal([]byte(pb.GetBindings()), &b); err != nil {
		t.Fatal(err)
	}
	if run.GetStatus() != rbookv1.RunStatus_RUN_STATUS_PAUSED || run.GetCurrentStep() != "review" ||
		strings.Join(pb.GetActiveNodes(), ",") != "review" || pb.GetEpicId() != "T889" || pb.GetSessionId() != "ses_xyz" ||
		b["version"] != "2026.4.90" || fmt.Sprint(b["build"]) != "map[exit_code:0 stdout:ok]" || fmt.Sprint(b["lint"]) != "map[output:clean]" ||
		pb.GetIterationCounts()["build"] != 1 || pb.GetIterationCounts()["review"] != 1 {
		t.Fatalf("run %v current %q playbook %v", run.GetStatus(), run.GetCurrentStep(), pb)
	}
	var states []string
	for _, n := range pb.GetNodes() {
		states = append(states, fmt.Sprintf("%s:%s:%s:%d", n.GetNodeId(), n.GetType(), n.GetStatus(), n.GetIterations()))
	}
	if s := strings.Join(states, " "); s != "build:deterministic:PASS:1 lint:deterministic:PASS:1 review:approval:waiting:1" {
		t.Fatalf("nodes = %s", s)
	}
	// The watcher saw each transition with the run's playbook details as they were then.
	var last *rbookv1.Run
	for i := 0; i < 6 && watch.Receive(); i++ {
		last = watch.Msg().GetRun()
	}
	if last == nil || !strings.Contains(last.GetPlaybook().GetBindings(), `"lint":{"output":"clean"}`) ||
		len(last.GetPlaybook().GetNodes()) != 3 || last.GetStatus() != rbookv1.RunStatus_RUN_STATUS_PAUSED {
		t.Fatalf("last watched run %v (err %v)", last, watch.Err())
	}
	list, err := c.runs.ListRuns(context.Background(), &rbookv1.ListRunsRequest{Kind: rbookv1.RunKind_RUN_KIND_PLAYBOOK})
	if err != nil || len(list.GetRuns()) != 1 || list.GetRuns()[0].GetRunId() != "pb-1" ||
		list.GetRuns()[0].GetPlaybook().GetBindings() == "" || list.GetRuns()[0].GetPlaybook().GetNodes() != nil {
		t.Fatalf("ListRuns kind=playbook: %v %v", list, err)
	}
	list, err = c.runs.ListRuns(context.Background(), &rbookv1.ListRunsRequest{Kind: rbookv1.RunKind_RUN_KIND_RUNBOOK})
	if err != nil || len(list.GetRuns()) != 1 || list.GetRuns()[0].GetRunId() != "rb-1" {
		t.Fatalf("ListRuns kind=runbook: %v %v", list, err)
	}
	// Bindings over MaxListedPlaybookJSONBytes are left out of a listing; GetRun has them.
	big := `{"notes":"` + strings.Repeat("n", server.MaxListedPlaybookJSONBytes) + `"}`
	startPlaybookRun(t, c, "pb-big", big)
	list, err = c.runs.ListRuns(context.Background(), &rbookv1.ListRunsRequest{Kind: rbookv1.RunKind_RUN_KIND_PLAYBOOK, PageSize: 1})
	if err != nil || list.GetRuns()[0].GetRunId() != "pb-big" || list.GetRuns()[0].GetPlaybook().GetBindings() != "" ||
		list.GetRuns()[0].GetPlaybook().GetEpicId() != "T889" {
		t.Fatalf("ListRuns with big bindings: %v %v", list.GetRuns(), err)
	}
	if got, err := c.runs.GetRun(context.Background(), &rbookv1.GetRunRequest{RunId: "pb-big"}); err != nil || got.GetRun().GetPlaybook().GetBindings() != big {
		t.Fatalf("GetRun big bindings: %v", err)
	}
}
