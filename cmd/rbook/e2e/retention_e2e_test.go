package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/rbookhq/rbook-action/action/cpclient"
	"github.com/rbookhq/rbook-action/controlplane/store"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// rbook serve --retention with --retention-export-dir (docs/backup.md, "Retention"): at start
// it exports and deletes the finished run that ended before the retention age, keeps the
// recent one, and says what it did.
func TestServeRetentionExportsAndPrunesOldRunsAtStart(t *testing.T) {
	skipShort(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "cp.db")
	ctx := context.Background()
	st, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	fence := store.Fence{OwnerIDHash: store.OwnerIDHash("owner-0123456789"), Epoch: 1}
	for id, end := range map[string]time.Time{"R-old": now.Add(-72 * time.Hour), "R-recent": now.Add(-time.Hour)} {
		if _, _, err := st.StartRun(ctx, store.NewRun{RunID: id, PlaybookName: "deploy-web", PlaybookHash: strings.Repeat("a", 64),
			SchemaHash8: "0123abcd", TotalSteps: 1, StartedBy: "alice", StartedAt: end.Add(-time.Minute), OwnerIDHash: fence.OwnerIDHash}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.RecordTransition(ctx, store.Transition{RunID: id, Seq: 1, Kind: store.KindRunFinished, At: end, StepIndex: -1,
			RunStatus: store.ExecCompleted}, fence); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	export := filepath.Join(dir, "export")
	if err := os.Mkdir(export, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("RBOOK_APPROVAL_SECRET", testSecret)
	p := start(t, dir, "serve", "--addr", "127.0.0.1:0", "--db", db, "--retention", "48h", "--retention-export-dir", export)
	p.waitFor(t, "old runs pruned")
	if out := p.output(); !strings.Contains(out, "pruned=1 ") || !strings.Contains(out, "oldest_kept_started_at=") {
		t.Errorf("the prune's log line lacks the count or the oldest run kept:\n%s", out)
	}
	url := regexp.MustCompile(`listening on (http://\S+)`).FindStringSubmatch(p.output())[1]
	c := cpclient.New(url, "")
	if _, err := c.Runs.GetRun(ctx, &rbookv1.GetRunRequest{RunId: "R-old"}); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("GetRun(R-old) after the prune: %v, want NotFound", err)
	}
	if _, err := c.Runs.GetRun(ctx, &rbookv1.GetRunRequest{RunId: "R-recent"}); err != nil {
		t.Errorf("GetRun(R-recent): %v, want the run kept", err)
	}
	body, err := os.ReadFile(filepath.Join(export, "R-old.json"))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Format string `json:"format"`
		Run    struct {
			RunID string `json:"run_id"`
		} `json:"run"`
		Transitions []json.RawMessage `json:"transitions"`
	}
	if err := json.Unmarshal(body, &got); err != nil || got.Format != "rbook.run-export.v1" || got.Run.RunID != "R-old" || len(got.Transitions) != 1 {
		t.Errorf("export file (%v):\n%s", err, body)
	}
	if _, err := os.Stat(filepath.Join(export, "R-recent.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the kept run was exported: %v", err)
	}
}
