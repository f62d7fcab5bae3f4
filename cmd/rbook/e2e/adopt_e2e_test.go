package e2e

// A bug the kill campaign found (TestKillNineAtRandomPointsLosesNothing, "evidence entries
// differ"), fixed in startOnControlPlane: a fresh run walks run ids upward from the lowest id free
// in the folder (state.uniqueRunID) and lets the control plane say which are taken
// (startOnControlPlane). When an id below the folder's last run belongs to someone else (another
// workspace, or an orphan of a kill), the walk reaches the folder's own previous run; if that run
// is final in its state file but not on the control plane (its outbox was never delivered),
// StartRun "resumes" it (same owner id), and the new run records its steps into the old run: two
// executions under one run id, and the .prev- file of that id is overwritten when the next run
// starts.

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rbookhq/rbook-action/action/cpclient"
	"github.com/rbookhq/rbook-action/action/state"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// withoutGates is a runbook's text without its confirm steps (one step a line): the runs here
// have nobody to answer a gate, and 21 steps is what the test's StartRun calls declare.
func withoutGates(rb string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(rb, "\n") {
		if !strings.Contains(l, "type: confirm") {
			b.WriteString(l)
		}
	}
	return b.String()
}

func TestFreshRunNeverAdoptsAnUndeliveredRun(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	mcpCfg, err := os.ReadFile(filepath.Join(dir, "runbooks", "demo.mcp.json"))
	if err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, filepath.Join(dir, "runbooks", campaignName+".mcp.json"), mcpCfg)
	writeTestFile(t, filepath.Join(dir, "runbooks", campaignName+".yaml"), []byte(withoutGates(campaignRunbook(t))))
	k := &campaign{t: t, dir: dir}
	k.setVariant(campaignVariants[0])
	url := serveCP(t, dir)
	c := cpclient.New(url, "")
	if out, code := run(t, dir, "", "run", campaignName, "--control-plane", url); code != 0 {
		t.Fatalf("first run: exit %d\n%s", code, out)
	}
	sp := k.statePath()
	st, err := state.Read(sp)
	if err != nil {
		t.Fatal(err)
	}
	x, ctx := st.RunID, context.Background()
	start := func(id, owner string) *rbookv1.StartRunResponse {
		r, err := c.Runs.StartRun(ctx, &rbookv1.StartRunRequest{RunId: id, Name: campaignName, ContentHash: st.RunbookHash,
			SchemaHash8: st.SchemaHash8, TotalSteps: 21, OwnerId: owner})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	// X.2 belongs to another workspace.
	start(x+".2", state.NewOwnerID())
	// X.3 is this folder's last run: COMPLETED in its state file, RUNNING on the control plane
	// with only run_started delivered (the executor died before the rest of its outbox went).
	r := start(x+".3", st.OwnerID)
	if _, err := c.Runs.RecordTransition(ctx, &rbookv1.RecordTransitionRequest{OwnerId: st.OwnerID, Epoch: r.GetRun().GetLease().GetEpoch(),
		Transition: &rbookv1.Transition{RunId: x + ".3", Seq: 1, Kind: rbookv1.TransitionKind_TRANSITION_KIND_RUN_STARTED,
			Time: timestamppb.New(time.Now()), StepIndex: -1, RunStatus: rbookv1.RunStatus_RUN_STATUS_RUNNING}}); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(sp, sp+".prev-"+x); err != nil {
		t.Fatal(err)
	}
	st.RunID, st.Seq, st.EvidencePack = x+".3", 1, nil
	if err := state.Write(sp, st); err != nil {
		t.Fatal(err)
	}

	out, code := run(t, dir, "", "run", campaignName, "--control-plane", url)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	now, err := state.Read(sp)
	if err != nil {
		t.Fatal(err)
	}
	if now.RunID == x+".3" {
		t.Errorf("the new run took the id of the folder's previous run %s (.prev- file and state file both hold it)\n%s", now.RunID, lastLines(out, 3))
	}
	if prev, err := state.Read(sp + ".prev-" + x + ".3"); err != nil || prev.Seq != 1 {
		t.Errorf("the previous run's state file: %v", err)
	}
}
