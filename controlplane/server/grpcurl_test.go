package server_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// findGrpcurl returns grpcurl from PATH or ~/go/bin; the test skips without it (the
// acceptance script installs it: go install github.com/fullstorydev/grpcurl/cmd/grpcurl@v1.9.3).
func findGrpcurl(t *testing.T) string {
	if p, err := exec.LookPath("grpcurl"); err == nil {
		return p
	}
	if home, err := os.UserHomeDir(); err == nil {
		if p := filepath.Join(home, "go", "bin", "grpcurl"); fileExists(p) {
			return p
		}
	}
	t.Skip("grpcurl is not on PATH or in ~/go/bin; install it with: go install github.com/fullstorydev/grpcurl/cmd/grpcurl@v1.9.3")
	return ""
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// grpcurl drives the server the way an approver at a shell would.
func TestGrpcurl(t *testing.T) {
	bin := findGrpcurl(t)
	p := startServe(t)
	call := func(method string, body any) (string, error) {
		args := []string{"-plaintext"}
		if body != nil {
			b, _ := json.Marshal(body)
			args = append(args, "-d", string(b))
		}
		out, err := exec.Command(bin, append(args, p.Addr, method)...).CombinedOutput()
		return string(out), err
	}
	must := func(method string, body any) string {
		t.Helper()
		out, err := call(method, body)
		if err != nil {
			t.Fatalf("grpcurl %s: %v\n%s", method, err, out)
		}
		return out
	}
	list := must("list", nil)
	for _, svc := range []string{"rbook.v1.RunService", "rbook.v1.ApprovalService", "grpc.health.v1.Health"} {
		if !strings.Contains("\n"+list, "\n"+svc+"\n") {
			t.Fatalf("grpcurl list lacks %s:\n%s", svc, list)
		}
	}
	const run = "RBOOK-20260102-grpcurl-0123abcd"
	must("rbook.v1.RunService/StartRun", map[string]any{"run_id": run, "name": "grpcurl", "content_hash": digest("plan"),
		"schema_hash8": "0123abcd", "total_steps": 2, "owner_id": testOwner})
	out := must("rbook.v1.ApprovalService/RequestApproval", map[string]any{"run_id": run, "step_name": "approve", "step_index": 1,
		"owner_id": testOwner, "epoch": 1, "plan_digest": digest("plan"), "deadline": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)})
	var opened struct{ Token string }
	if err := json.Unmarshal([]byte(out), &opened); err != nil || opened.Token == "" {
		t.Fatalf("RequestApproval output has no token: %v\n%s", err, out)
	}
	if got := must("rbook.v1.RunService/GetRun", map[string]any{"run_id": run}); !strings.Contains(got, "RUN_STATUS_PAUSED") {
		t.Fatalf("GetRun with a pending gate:\n%s", got)
	}
	if got := must("rbook.v1.ApprovalService/Approve", map[string]any{"token": opened.Token, "reason": "grpcurl check"}); !strings.Contains(got, "APPROVAL_STATUS_APPROVED") {
		t.Fatalf("Approve:\n%s", got)
	}
	replay, err := call("rbook.v1.ApprovalService/Approve", map[string]any{"token": opened.Token})
	if err == nil || !strings.Contains(replay, "E_APPROVAL_ALREADY_DECIDED") || strings.Contains(replay, opened.Token) {
		t.Fatalf("replayed Approve: %v\n%s", err, replay)
	}
	must("rbook.v1.RunService/RecordTransition", map[string]any{"transition": map[string]any{"run_id": run, "seq": 1,
		"kind": "TRANSITION_KIND_RUN_FINISHED", "time": time.Now().UTC().Format(time.RFC3339), "step_index": -1, "run_status": "RUN_STATUS_SUCCEEDED"}, "owner_id": testOwner, "epoch": 1})
	got := must("rbook.v1.RunService/GetRun", map[string]any{"run_id": run})
	if !strings.Contains(got, "RUN_STATUS_SUCCEEDED") || !strings.Contains(got, "TRANSITION_KIND_RUN_FINISHED") {
		t.Fatalf("GetRun after the run finished:\n%s", got)
	}
}
